"""Input shards in one process, no JAX runtime: what the real multi-process tests leave out.

tests/multihost/test_multiprocess.py checks in real processes that the
global batch does not depend on how many processes read it (two shards read
by one process, one shard split between two). Here TrainInput is given the
process index and count as each process of a run would see them, for the
assignment rule and the skip counts of a shard read by several processes.
"""
import numpy as np
import pytest

from cc12m_jax.data import pipeline
from tests.multihost.conftest import tiny_config


def test_a_shared_shard_is_counted_once_and_split_in_halves(world, tmp_path):
  data = tiny_config(world).data
  single = pipeline.make_train_iterator(data, None, process_index=0, process_count=1)
  for _ in range(2):
    single.next_host_batch()
  single.save(str(tmp_path))
  counts = single.skip_counts(), single.filter_counts()
  assert any(counts[1].values())  # cc3m ids excluded: something to count
  want = single.next_host_batch()
  halves = []
  for p in range(2):
    it = pipeline.make_train_iterator(data, None, process_index=p, process_count=2)
    it.restore(str(tmp_path))
    assert it.num_shards == 1
    # Counts summed over processes count every record once: the first reader reports them.
    if p == 0:
      assert (it.skip_counts(), it.filter_counts()) == counts
    else:
      assert not any(it.skip_counts().values()) and not any(it.filter_counts().values())
    halves.append(it.next_host_batch())
  for k in want:
    np.testing.assert_array_equal(np.concatenate([halves[0][k], halves[1][k]]), want[k],
                                  err_msg=k)


def test_shard_assignment():
  assert pipeline.shard_assignment(4, 1, 2) == ([2, 3], 0, 1)
  assert pipeline.shard_assignment(2, 3, 4) == ([1], 1, 2)
  assert pipeline.shard_assignment(1, 0, 1) == ([0], 0, 1)
  with pytest.raises(ValueError, match="3 shards cannot be split among 2 processes"):
    pipeline.shard_assignment(3, 0, 2)
