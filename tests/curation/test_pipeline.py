"""The Beam pipeline end to end on the synthetic raw pool (single-process runner)."""
import collections
import glob
import json
import os

import pytest

from cc12m_jax.curation import report
from cc12m_jax.curation import synthetic_pool
from tests.curation import helpers

POOL_SIZE = 400


@pytest.fixture(scope="module")
def pool_dir(tmp_path_factory):
  directory = str(tmp_path_factory.mktemp("pool"))
  pool, table = synthetic_pool.generate_pool(POOL_SIZE, num_concepts=24, seed=3,
                                             bytes_fraction=0.2)
  synthetic_pool.write_pool(pool, directory, num_shards=4, fmt="both")
  with open(os.path.join(directory, "hypernyms.json"), "w") as f:
    json.dump(table, f)
  return directory


def _inputs(pool_dir):
  return f"{pool_dir}/*.jsonl,{pool_dir}/*.parquet"


def _pool_ids(pool_dir):
  ids = [r["id"] for r in helpers.read_jsonl_shards(pool_dir, "pool")]
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  for name in os.listdir(pool_dir):
    if name.endswith(".parquet"):
      ids += pq.read_table(os.path.join(pool_dir, name), columns=["id"]).column("id").to_pylist()
  return ids


@pytest.fixture(scope="module")
def cc12m_runs(pool_dir, tmp_path_factory):
  outs = []
  for _ in range(2):
    out = str(tmp_path_factory.mktemp("cc12m"))
    counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=3),
                         _inputs(pool_dir), out)
    outs.append((out, counts))
  return outs


def test_every_candidate_is_kept_or_rejected_once(pool_dir, cc12m_runs):
  out, counts = cc12m_runs[0]
  kept = helpers.read_jsonl_shards(out, "kept")
  rejects = helpers.read_jsonl_shards(out, "rejects")
  assert counts["input"] == POOL_SIZE
  assert counts["kept"] == len(kept) > 0
  report.check(counts)
  ids = [r["id"] for r in kept] + [r["id"] for r in rejects]
  assert sorted(ids) == sorted(_pool_ids(pool_dir))
  by_reason = collections.Counter("rejected/" + r["reason"] for r in rejects)
  assert by_reason == {k: v for k, v in counts.items() if k.startswith("rejected/")}
  # The pool exercises image, text and image-text rejections.
  assert {"rejected/image/format", "rejected/text/not_english"} <= set(counts)
  assert any(k.startswith("rejected/image_text/") for k in counts)
  with open(os.path.join(out, "counts.md")) as f:
    assert f"| **input** | {POOL_SIZE} |" in f.read()


def test_same_input_same_output(cc12m_runs):
  (out_a, counts_a), (out_b, counts_b) = cc12m_runs
  assert counts_a == counts_b
  key = lambda r: r["id"]
  assert sorted(helpers.read_jsonl_shards(out_a, "kept"), key=key) == \
      sorted(helpers.read_jsonl_shards(out_b, "kept"), key=key)


def test_kept_records_are_ready_to_join(cc12m_runs):
  kept = helpers.read_jsonl_shards(cc12m_runs[0][0], "kept")
  for r in kept:
    assert set(r) == {"id", "image_url", "image_sha256", "width", "height", "caption",
                      "alt_text", "tags", "person_substituted"}
    assert r["image_url"] or r["image_sha256"]
    assert ("<PERSON>" in r["caption"]) == r["person_substituted"]
  assert any(r["person_substituted"] for r in kept)


def test_exclusion_and_cc3m_is_stricter(pool_dir, cc12m_runs, tmp_path):
  cc3m_out = str(tmp_path / "cc3m")
  cc3m_counts = helpers.run(
      helpers.test_config("cc3m", transform__hypernym_table=f"{pool_dir}/hypernyms.json",
                          output_format="parquet"),
      _inputs(pool_dir), cc3m_out)
  cc12m_counts = cc12m_runs[0][1]
  assert 0 < cc3m_counts["kept"] < cc12m_counts["kept"]
  # cc3m captions carry no digits and no <PERSON>.
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  cc3m_kept = [row for path in sorted(glob.glob(f"{cc3m_out}/kept-*.parquet"))
               for row in pq.read_table(path).to_pylist()]
  assert len(cc3m_kept) == cc3m_counts["kept"]
  assert not any(ch.isdigit() for r in cc3m_kept for ch in r["caption"])
  # CC12M without the CC3M images: every CC3M-kept candidate is excluded.
  excl_out = str(tmp_path / "cc12m_minus_cc3m")
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=3),
                       _inputs(pool_dir), excl_out, exclude=f"{cc3m_out}/kept-*.parquet")
  assert counts["rejected/excluded/in_other_dataset"] == cc3m_counts["kept"]
  kept_ids = {r["id"] for r in helpers.read_jsonl_shards(excl_out, "kept")}
  assert kept_ids.isdisjoint(r["id"] for r in cc3m_kept)
  report.check(counts)


def test_reconciliation_detects_a_gap():
  with pytest.raises(report.ReconciliationError, match="gap 1"):
    report.check({"input": 10, "kept": 4, "rejected/text/empty": 5})


def test_hostile_lines_through_beam_are_all_counted(tmp_path):
  path = tmp_path / "hostile.jsonl"
  good = json.dumps(helpers.record("ok", "a dog on the beach with a ball"))
  lines = [good.encode(), b"", b"\xff\xfe\xfa not utf-8", b"[1, 2]", b"{}",
           json.dumps({"id": "t", "alt_text": "x" * 100_000, "format": "JPEG", "width": 900,
                       "height": 800, "url": "u"}).encode(),
           json.dumps({"id": "e", "alt_text": "a 🐶 &amp; a ball 🎾 on the beach",
                       "image_base64": "@@", "url": "u"}).encode()]
  path.write_bytes(b"\n".join(lines) + b"\n")
  counts = helpers.run(helpers.test_config("cc12m", text__min_token_count=0), str(path),
                       str(tmp_path / "out"))
  assert counts == {"input": 7, "kept": 1, "rejected/input/empty_line": 1,
                    "rejected/input/bad_utf8": 1,
                    "rejected/input/not_an_object": 1, "rejected/input/missing_id": 1,
                    "rejected/text/too_many_chars": 1, "rejected/image/bad_base64": 1,
                    "noted/image/missing_safety_score": 1}
