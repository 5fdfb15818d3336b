"""Curation on a multi-worker local runner gives what the single-worker runner gives.

Beam's FnApiRunner with direct_running_mode=multi_processing runs the bundles
in separate worker processes (what Dataflow does with machines), so the
global rare-word count, a side input, is built from several workers' partial
counts and the DoFns' set-up runs once per worker. The cc3m preset exercises
the most: rare words, hypernyms and the image-text filter.
"""
import json
import os

import pytest

from cc12m_jax.curation import report
from cc12m_jax.curation import synthetic_pool
from tests.curation import helpers

POOL_SIZE = 240


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("pool"))
  pool, table = synthetic_pool.generate_pool(POOL_SIZE, num_concepts=24, seed=5,
                                             bytes_fraction=0.2)
  synthetic_pool.write_pool(pool, directory, num_shards=4, fmt="jsonl")
  with open(os.path.join(directory, "hypernyms.json"), "w") as f:
    json.dump(table, f)
  return directory


def _run(pool_dir, out, mode, workers):
  config = helpers.test_config("cc3m", transform__hypernym_table=f"{pool_dir}/hypernyms.json",
                               text__min_token_count=2)
  config.beam.direct_running_mode = mode
  config.beam.direct_num_workers = workers
  counts = helpers.run(config, f"{pool_dir}/*.jsonl", str(out))
  by_id = lambda r: (r["id"], r.get("reason", ""))
  return (counts, sorted(helpers.read_jsonl_shards(str(out), "kept"), key=by_id),
          sorted(helpers.read_jsonl_shards(str(out), "rejects"), key=by_id))


def test_two_worker_processes_count_and_keep_what_one_does(pool_dir, tmp_path):
  counts_one, kept_one, rejects_one = _run(pool_dir, tmp_path / "one", "in_memory", 1)
  counts_two, kept_two, rejects_two = _run(pool_dir, tmp_path / "two", "multi_processing", 2)
  assert counts_two == counts_one
  assert counts_one["input"] == POOL_SIZE and counts_one["kept"] > 0
  report.check(counts_two)
  # Hypernymization depends on the global rare-word count: same captions only
  # if the workers' partial counts were combined.
  assert any(k.startswith("rejected/text/") for k in counts_one)
  assert kept_two == kept_one
  assert rejects_two == rejects_one
