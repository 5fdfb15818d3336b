"""The training input's shards: the global batch does not depend on how many processes read it.

In one process, no JAX runtime: TrainInput is given the process index and
count, as each process of a multi-host run would see them.
"""
import numpy as np
import pytest

from cc12m_jax.data import pipeline
from tests.multihost.conftest import tiny_config

STEPS = 3


def _batches(it, n: int) -> list[dict]:
  return [it.next_host_batch() for _ in range(n)]


def _concat(parts: list[dict]) -> dict:
  return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _assert_batches_equal(got: list[dict], want: list[dict]) -> None:
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert set(g) == set(w)
    for k in w:
      np.testing.assert_array_equal(g[k], w[k], err_msg=k)


@pytest.fixture(scope="module")
def data(world):
  return tiny_config(world).data


def test_shards_are_the_hosts_of_a_multi_process_run(data):
  # Two shards read by one process: its host batch is what the two processes
  # of a 2-process run hold, process 0's rows first.
  one = pipeline.make_train_iterator(data, None, process_index=0, process_count=1,
                                     num_shards=2)
  hosts = [pipeline.TrainIterator(data, None, process_index=h, process_count=2)
           for h in range(2)]
  want = [_concat([h.next_host_batch() for h in hosts]) for _ in range(STEPS)]
  _assert_batches_equal(_batches(one, STEPS), want)


def test_one_shard_split_between_two_processes(data):
  whole = _batches(pipeline.make_train_iterator(data, None, process_index=0,
                                                process_count=1), STEPS)
  halves = [_batches(pipeline.make_train_iterator(data, None, process_index=p,
                                                  process_count=2, num_shards=1), STEPS)
            for p in range(2)]
  _assert_batches_equal([_concat([a, b]) for a, b in zip(*halves)], whole)


def test_two_process_position_restores_in_one_process_and_back(data, tmp_path):
  # Two processes save their positions; one process restores both and carries on
  # with the batches the two would have produced.
  hosts = [pipeline.make_train_iterator(data, None, process_index=h, process_count=2)
           for h in range(2)]
  for h in hosts:
    _batches(h, 2)
    h.save(str(tmp_path / "two"))
  want = [_concat([h.next_host_batch() for h in hosts]) for _ in range(STEPS)]
  one = pipeline.make_train_iterator(data, None, process_index=0, process_count=1)
  one.restore(str(tmp_path / "two"))
  assert one.num_shards == 2
  _assert_batches_equal(_batches(one, STEPS), want)

  # And one process's position restored by two processes: each takes its half.
  single = pipeline.make_train_iterator(data, None, process_index=0, process_count=1)
  _batches(single, 2)
  single.save(str(tmp_path / "one"))
  counts = single.skip_counts(), single.filter_counts()
  want = _batches(single, STEPS)
  halves = []
  for p in range(2):
    it = pipeline.make_train_iterator(data, None, process_index=p, process_count=2)
    it.restore(str(tmp_path / "one"))
    assert it.num_shards == 1
    # Counts of a shared shard are reported once (by its first reader), so
    # counts summed over processes count every record once.
    if p == 0:
      assert (it.skip_counts(), it.filter_counts()) == counts
    else:
      assert not any(it.skip_counts().values()) and not any(it.filter_counts().values())
    halves.append(_batches(it, STEPS))
  _assert_batches_equal([_concat([a, b]) for a, b in zip(*halves)], want)


def test_shard_assignment():
  assert pipeline.shard_assignment(4, 1, 2) == ([2, 3], 0, 1)
  assert pipeline.shard_assignment(2, 3, 4) == ([1], 1, 2)
  assert pipeline.shard_assignment(1, 0, 1) == ([0], 0, 1)
  with pytest.raises(ValueError, match="3 shards cannot be split among 2 processes"):
    pipeline.shard_assignment(3, 0, 2)
