"""The runner's per-concept long-tail report, from fixture predictions and records,
against hand computations."""
import json
import os
import shutil

import ml_collections
import numpy as np
import pytest

from cc12m_jax.data import metadata, records
from cc12m_jax.experiments import commands, concept_report, suite as suite_lib
from configs.experiments import common

# What each nocaps-style image shows.
SHOWN = {"1": ["dog"], "2": ["dog", "kite"], "3": ["zebra"]}
# Captions of the training sources: cc12m names dog 3 times and zebra 12 times
# (10+ bucket), cc3m names dog once and kite once.
TRAINING = {"cc12m": ["a dog", "two dogs", "a dog and a cat"] + ["a zebra"] * 12,
            "cc3m": ["a dog", "a kite", "a cat"]}
PREDICTIONS = {
    ("a", 0): {"1": "a dog", "2": "a kite", "3": "a horse"},
    ("a", 1): {"1": "a cat", "2": "a dog and a kite", "3": "zebras"},
    ("b", 0): {"1": "a dog", "2": "a dog with a kite", "3": "a zebra"},
}


def _world(tmp_path) -> str:
  data_dir = str(tmp_path / "data")
  os.makedirs(os.path.join(data_dir, "nocaps_val"))
  with open(os.path.join(data_dir, "nocaps_val", "concepts.json"), "w") as f:
    json.dump(SHOWN, f)
  for source, caps in TRAINING.items():
    recs = [records.FeatureRecord(
        image_id=f"{source}_{i}", source=source, global_feature=np.zeros(4, np.float32),
        region_features=np.zeros((1, 4), np.float32),
        region_boxes=np.array([[0, 0, 1, 1]], np.float32), tags=[], tag_scores=np.zeros(0),
        captions=[c], width=8, height=8) for i, c in enumerate(caps)]
    records.write_records(metadata.shard_prefix(data_dir, source), recs, 2)
  return data_dir


def _fixture_config(data_dir: str, **stages) -> ml_collections.ConfigDict:
  """Conditions a and b, each a pre-training and its nocaps_val evaluation
  (rows a and b), plus `stages`; one column, overall CIDEr."""
  c = common.suite("fixture", "Fixture", "synthetic", report_source="nocaps_val",
                   selection_source="coco_val", selection_metric="overall/CIDEr")
  c.data_dir = data_dir
  c.paper_table = ""
  for name in ("a", "b"):
    c.conditions[name] = {"pre": common.stage("configs/synthetic_pretrain.py", "pretrain"),
                          "ev": common.ic_evaluate("synthetic", of="pre"), **stages}
  c.rows = [common.row("a", "A", "a", "ev"), common.row("b", "B", "b", "ev")]
  c.columns = [common.column("overall", "overall", "nocaps_val", "overall/CIDEr", 100.0)]
  return c


def _suite(data_dir: str, **long_tail) -> suite_lib.Suite:
  c = _fixture_config(data_dir, probe=common.ic_probe(of="pre"))
  c.long_tail = long_tail or {"rows": ["a", "b"], "compare": ["a,b"], "bucket_source": "cc12m"}
  return suite_lib.from_config(c)


def _make(suite: suite_lib.Suite, *args) -> dict | None:
  """The suite's one report, made."""
  (report,) = suite.long_tails
  return concept_report.make(suite, report, *args)


def _why_not(suite: suite_lib.Suite, data_dir: str) -> str:
  (report,) = suite.long_tails
  return concept_report.why_not(suite, report, data_dir)


def _training_configs():
  def config(mode, sources):
    return ml_collections.ConfigDict({"mode": mode, "data": {"train_sources": sources}})
  return {"a/pre": config("pretrain", "cc12m,cc3m"), "b/pre": config("pretrain", "cc12m"),
          "a/ev": config("evaluate", "coco_train")}


def test_report_pools_seeds_and_buckets_by_the_statistics_jobs_counts(tmp_path):
  data_dir = _world(tmp_path)
  suite = _suite(data_dir)
  workdir = str(tmp_path / "w")
  for (row, seed), preds in PREDICTIONS.items():
    directory = os.path.join(commands.stage_dir(workdir, f"{row}/ev", seed), "eval",
                             "nocaps_val", "step_5")
    os.makedirs(directory)
    with open(os.path.join(directory, "predictions.json"), "w") as f:
      json.dump([{"image_id": i, "caption": c} for i, c in preds.items()], f)
  assert _why_not(suite, data_dir) == ""
  out = str(tmp_path / "out")
  report = _make(suite, workdir, [0, 1], data_dir, _training_configs(), out)

  # Counts: the statistics job over the records of cc12m and cc3m (not coco_train,
  # which only an evaluate stage names).
  assert report["concepts"]["dog"]["counts"] == {"cc12m": 3, "cc3m": 1}
  assert report["concepts"]["kite"]["counts"] == {"cc12m": 0, "cc3m": 1}
  assert report["concepts"]["zebra"]["counts"] == {"cc12m": 12, "cc3m": 0}
  # Buckets by cc12m count: kite in '0', dog in '1-9', zebra in '10-99'.
  # Row a pools seeds 0 and 1: dog shown 4 times, named 3 (seed 0: images 1, -;
  # seed 1: -, 2); kite shown 2, named 2; zebra 2 / 1 ('zebras' counts).
  a = {r["bucket"]: (r["named"], r["pairs"]) for r in report["by_bucket"]["a"]}
  assert a == {"0": (2, 2), "1-9": (2, 4), "10-99": (1, 2), "100-999": (0, 0), "1000+": (0, 0)}
  b = {r["bucket"]: (r["named"], r["pairs"]) for r in report["by_bucket"]["b"]}
  assert b == {"0": (1, 1), "1-9": (2, 2), "10-99": (1, 1), "100-999": (0, 0), "1000+": (0, 0)}
  gained = report["comparisons"]["a->b"]["gained"]
  # a -> b: dog 0.5 -> 1, zebra 0.5 -> 1 (ties by name); kite 1 -> 1 is neither.
  assert [(g["concept"], g["delta"]) for g in gained] == [("dog", 0.5), ("zebra", 0.5)]
  assert report["comparisons"]["a->b"]["lost"] == []
  assert report["seeds"] == [0, 1]
  assert report["seeds_by_row"] == {"a": [0, 1], "b": [0]}
  assert report["seeds_without_files"] == []
  # Finer edges regroup the same pairs: dog (3) and kite (0) below 5, zebra (12) at 5+.
  # Seed 2 was asked for and never run: named, and it changes no count.
  report = _make(_suite(data_dir, rows=["a", "b"], bucket_edges=[0, 5]), workdir,
                               [0, 1, 2], data_dir, _training_configs(), out)
  assert report["seeds"] == [0, 1]
  assert report["seeds_without_files"] == [2]
  assert [(r["bucket"], r["named"], r["pairs"]) for r in report["by_bucket"]["a"]] == [
      ("0-4", 4, 6), ("5+", 1, 2)]
  for name in ("long_tail.json", "long_tail.md", "long_tail.png"):
    assert os.path.getsize(os.path.join(out, name)) > 0
  assert os.path.exists(os.path.join(out, "stats", "stats.json"))


def test_without_image_concepts_the_report_is_skipped_saying_why(tmp_path):
  suite = _suite(str(tmp_path / "real"))
  assert "nocaps_val/concepts.json does not exist" in _why_not(
      suite, str(tmp_path / "real"))


def test_long_tail_rows_must_exist_and_evaluate_the_reported_split(tmp_path):
  with pytest.raises(suite_lib.SuiteError, match="long_tail: no row or probe .z."):
    _suite(str(tmp_path), rows=["a", "z"])
  with pytest.raises(suite_lib.SuiteError, match="must be among long_tail.rows"):
    _suite(str(tmp_path), rows=["a"], compare=["a,b"])
  with pytest.raises(suite_lib.SuiteError, match="is not 'before_row,after_row'"):
    _suite(str(tmp_path), rows=["a", "b"], compare=["a-b"])
  with pytest.raises(suite_lib.SuiteError, match="bucket_edges: \\[1, 10\\] must be increasing"):
    _suite(str(tmp_path), rows=["a"], bucket_edges=[1, 10])


def _write_retrieval(workdir: str, row: str, seed: int, per_query: dict) -> None:
  directory = os.path.join(commands.stage_dir(workdir, f"{row}/ev", seed), "eval", "nocaps_val",
                           "step_5")
  os.makedirs(directory)
  with open(os.path.join(directory, "retrieval.json"), "w") as f:
    json.dump({"metrics": {}, "per_query": {"image_retrieval": per_query},
               "source": "nocaps_val"}, f)


def test_retrieval_rows_report_r_at_1_per_concept(tmp_path):
  data_dir = _world(tmp_path)
  suite = _suite(data_dir)
  workdir = str(tmp_path / "w")
  # Two caption queries per image; rank: 0-based place of the query's own
  # image (-1: not in the top 10). Only rank 0 is a hit at R@1.
  _write_retrieval(workdir, "a", 0, {"image_id": ["1", "1", "2", "2", "3", "3"],
                                     "rank": [0, 1, 0, -1, 0, 0]})
  _write_retrieval(workdir, "b", 0, {"image_id": ["1", "1", "2", "2", "3", "3"],
                                     "rank": [0, 0, 2, 3, 0, 5]})
  out = str(tmp_path / "out")
  report = _make(suite, workdir, [0], data_dir, _training_configs(), out)
  assert report["measure"] == "retrieval"
  # a: dog's queries are image 1's two and image 2's two: hits 1 + 1 = 2 of 4;
  # kite (image 2) 1 of 2; zebra (image 3) 2 of 2.
  a = {r["bucket"]: (r["named"], r["pairs"]) for r in report["by_bucket"]["a"]}
  assert a == {"0": (1, 2), "1-9": (2, 4), "10-99": (2, 2), "100-999": (0, 0), "1000+": (0, 0)}
  b = {c: report["concepts"][c]["recall"]["b"] for c in ("dog", "kite", "zebra")}
  assert b == {"dog": 0.5, "kite": 0.0, "zebra": 0.5}
  assert [(r["concept"], r["delta"]) for r in report["comparisons"]["a->b"]["lost"]] == [
      ("kite", -0.5), ("zebra", -0.5)]
  with open(os.path.join(out, "long_tail.md")) as f:
    text = f.read()
  assert text.startswith("R@1 of caption queries (%) by the concept's instance count in cc12m")
  assert "| bucket | a | b | queries |" in text


def test_a_report_does_not_mix_captioning_and_retrieval_rows(tmp_path):
  data_dir = _world(tmp_path)
  workdir = str(tmp_path / "w")
  _write_retrieval(workdir, "a", 0, {"image_id": ["1", "2", "3"], "rank": [0, 0, 0]})
  directory = os.path.join(commands.stage_dir(workdir, "b/ev", 0), "eval", "nocaps_val", "step_5")
  os.makedirs(directory)
  with open(os.path.join(directory, "predictions.json"), "w") as f:
    json.dump([{"image_id": i, "caption": "a dog"} for i in SHOWN], f)
  with pytest.raises(suite_lib.SuiteError, match="mix captioning and retrieval"):
    _make(_suite(data_dir), workdir, [0], data_dir, _training_configs(),
                        str(tmp_path / "out"))
  # An image without a query is an error naming it, not a silent miss.
  shutil.rmtree(os.path.dirname(directory))
  shutil.rmtree(os.path.join(commands.stage_dir(workdir, "a/ev", 0)))
  _write_retrieval(workdir, "a", 0, {"image_id": ["1", "2"], "rank": [0, 0]})
  with pytest.raises(KeyError, match=r"1 image\(s\) have no retrieval query, e.g. \['3'\]"):
    _make(_suite(data_dir, rows=["a"]), workdir, [0], data_dir,
                        _training_configs(), str(tmp_path / "out"))


def _suite_with_retrieval_column(data_dir: str, long_tail) -> suite_lib.Suite:
  """Rows that caption on nocaps_val, and a column that reads each condition's
  dual-encoder stage on flickr_test (Figure 6's shape)."""
  c = _fixture_config(data_dir, vlm_pretrain=common.vlm_pretrain("synthetic", "cc12m"),
                      zs=common.vlm_as_is("synthetic"))
  c.columns.append(common.column("ir", "IR R@1", "flickr_test", "image_retrieval/R@1", 1.0,
                                 stage_name="zs"))
  c.long_tail = long_tail
  return suite_lib.from_config(c)


def test_a_report_read_at_a_column_scores_that_columns_stage_and_source(tmp_path):
  data_dir = _world(tmp_path)
  os.makedirs(os.path.join(data_dir, "flickr_test"))
  with open(os.path.join(data_dir, "flickr_test", "concepts.json"), "w") as f:
    json.dump({"f1": ["dog"], "f2": ["zebra"]}, f)
  suite = _suite_with_retrieval_column(data_dir, [
      {"rows": ["a", "b"], "bucket_source": "cc12m"},
      {"rows": ["a", "b"], "compare": ["a,b"], "bucket_source": "cc12m", "column": "ir"}])
  naming, retrieval = suite.long_tails
  assert (naming.name, retrieval.name) == ("long_tail", "long_tail_ir")
  assert suite.long_tail_source(retrieval) == "flickr_test"
  assert suite.long_tail_stage(retrieval, "a").key == "a/zs"
  assert suite.long_tail_stage(naming, "a").key == "a/ev"
  workdir = str(tmp_path / "w")
  for row, ranks in (("a", [0, 1, 0, 0]), ("b", [0, 0, 3, -1])):
    directory = os.path.join(commands.stage_dir(workdir, f"{row}/zs", 0), "eval", "flickr_test",
                             "step_6000")
    os.makedirs(directory)
    with open(os.path.join(directory, "retrieval.json"), "w") as f:
      json.dump({"metrics": {}, "per_query": {"image_retrieval": {
          "image_id": ["f1", "f1", "f2", "f2"], "rank": ranks}}, "source": "flickr_test"}, f)
  # The retrieval report reads flickr_test's concepts and the zs stages:
  # a: dog 1 of 2, zebra 2 of 2; b: dog 2 of 2, zebra 0 of 2.
  report = concept_report.make(suite, retrieval, workdir, [0], data_dir, _training_configs(),
                               str(tmp_path / "out"))
  assert report["measure"] == "retrieval"
  assert {c: report["concepts"][c]["recall"]["a"] for c in ("dog", "zebra")} == {
      "dog": 0.5, "zebra": 1.0}
  assert {c: report["concepts"][c]["recall"]["b"] for c in ("dog", "zebra")} == {
      "dog": 1.0, "zebra": 0.0}
  assert set(report["concepts"]) == {"dog", "zebra"}
  # The captioning report has no predictions yet: nothing to report.
  assert concept_report.make(suite, naming, workdir, [0], data_dir, _training_configs(),
                             str(tmp_path / "out2")) is None


def test_reports_name_a_real_column_each_at_most_once(tmp_path):
  with pytest.raises(suite_lib.SuiteError, match="column 'nope' is not a column"):
    _suite_with_retrieval_column(str(tmp_path), {"rows": ["a"], "column": "nope"})
  with pytest.raises(suite_lib.SuiteError, match="two reports on one column"):
    _suite_with_retrieval_column(str(tmp_path), [{"rows": ["a"], "column": "ir"},
                                                 {"rows": ["b"], "column": "ir"}])
  # Read at the retrieval column, a probe must score flickr_test too.
  with pytest.raises(suite_lib.SuiteError, match="'p' does not evaluate 'flickr_test'"):
    _suite_with_retrieval_column(str(tmp_path), {"rows": ["a"], "column": "ir",
                                                 "probes": [common.row("p", "P", "a", "ev")]})


def _write_ranks(workdir: str, stage_key: str, seed: int, ranks: dict) -> None:
  directory = os.path.join(commands.stage_dir(workdir, stage_key, seed), "eval", "nocaps_val",
                           "step_7")
  os.makedirs(directory)
  with open(os.path.join(directory, "ranks.json"), "w") as f:
    json.dump(ranks, f)


def _probe(key: str, condition: str) -> dict:
  return common.row(key, f"{condition} probe", condition, "probe")


def _suite_with_probes(data_dir: str, **long_tail) -> suite_lib.Suite:
  return _suite(data_dir, **(long_tail or {"rows": ["a"], "probes": [_probe("a_probe", "a")],
                                           "compare": ["a_probe,a"], "bucket_source": "cc12m"}))


def test_probes_report_rank_1_naming_beside_the_decoded_rows(tmp_path):
  data_dir = _world(tmp_path)
  suite = _suite_with_probes(data_dir)
  workdir = str(tmp_path / "w")
  directory = os.path.join(commands.stage_dir(workdir, "a/ev", 0), "eval", "nocaps_val", "step_5")
  os.makedirs(directory)
  with open(os.path.join(directory, "predictions.json"), "w") as f:
    json.dump([{"image_id": i, "caption": c} for i, c in PREDICTIONS[("a", 0)].items()], f)
  # The probe knows dog in image 1 (rank 1), not in image 2 (rank 3); kite and
  # zebra at rank 1: a name is known where the decoded caption lacks it (zebra).
  _write_ranks(workdir, "a/probe", 0, {"1": {"dog": 1}, "2": {"dog": 3, "kite": 1},
                                       "3": {"zebra": 1}})
  report = _make(suite, workdir, [0], data_dir, _training_configs(),
                               str(tmp_path / "out"))
  probe = {r["bucket"]: (r["named"], r["pairs"]) for r in report["by_bucket"]["a_probe"]}
  assert probe == {"0": (1, 1), "1-9": (1, 2), "10-99": (1, 1), "100-999": (0, 0),
                   "1000+": (0, 0)}
  decoded = {r["bucket"]: (r["named"], r["pairs"]) for r in report["by_bucket"]["a"]}
  assert decoded == {"0": (1, 1), "1-9": (1, 2), "10-99": (0, 1), "100-999": (0, 0),
                     "1000+": (0, 0)}
  # From the probe to the decoded caption, zebra is lost: learned, not decoded.
  assert [(r["concept"], r["delta"]) for r in report["comparisons"]["a_probe->a"]["lost"]] == [
      ("zebra", -1.0)]
  assert report["seeds_by_row"] == {"a": [0], "a_probe": [0]}
  # A shown pair without a rank is an error naming it, not a miss.
  shutil.rmtree(commands.stage_dir(workdir, "a/probe", 0))
  _write_ranks(workdir, "a/probe", 0, {"1": {"dog": 1}, "2": {"dog": 3}, "3": {"zebra": 1}})
  with pytest.raises(KeyError, match="image '2', concept 'kite': no rank"):
    _make(suite, workdir, [0], data_dir, _training_configs(),
                        str(tmp_path / "out"))


def test_probes_must_name_evaluate_stages_of_the_reported_split_under_their_own_keys(tmp_path):
  data_dir = str(tmp_path)
  with pytest.raises(suite_lib.SuiteError, match="'a' is also a row key"):
    _suite_with_probes(data_dir, rows=["a"], probes=[_probe("a", "a")])
  with pytest.raises(suite_lib.SuiteError, match="'p': no stage c/probe"):
    _suite_with_probes(data_dir, rows=["a"], probes=[_probe("p", "c")])
  with pytest.raises(suite_lib.SuiteError, match="probe keys repeat"):
    _suite_with_probes(data_dir, probes=[_probe("p", "a"), _probe("p", "b")])
  with pytest.raises(suite_lib.SuiteError, match="'p': stage a/pre is not an evaluate stage"):
    _suite_with_probes(data_dir, probes=[common.row("p", "P", "a", "pre")])
  with pytest.raises(suite_lib.SuiteError, match="no row or probe 'q'"):
    _suite_with_probes(data_dir, probes=[_probe("p", "a")], compare=["p,q"])
  # A report of probes only is a report; without concepts.json it says why not.
  assert "concepts.json does not exist" in _why_not(
      _suite_with_probes(data_dir, probes=[_probe("p", "a")]), data_dir)
