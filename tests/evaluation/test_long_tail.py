"""The per-concept long-tail report from fixture predictions equals a hand count."""
import json
import math
import subprocess
import sys

import pytest

from cc12m_jax.evaluation import concepts, long_tail

MATCHER = concepts.ConceptMatcher([concepts.Concept(n) for n in
                                   ("dog", "cat", "bagpipes", "zanzibar", "mangosteen")])
IMAGES = {"a": {"dog", "bagpipes"}, "b": {"cat"}, "c": {"bagpipes"}, "d": {"mangosteen", "dog"}}
# Instances per concept in two pre-training sources.
COUNTS = {"cc3m": {"dog": 500, "cat": 300, "bagpipes": 0, "mangosteen": 2},
          "cc12m": {"dog": 2000, "cat": 1500, "bagpipes": 40, "mangosteen": 12}}
CONDITIONS = {
    "cc3m": {"a": "a dog and a musical instrument", "b": "a cat", "c": "a man",
             "d": "a dog eating fruit"},
    "cc12m": {"a": "a dog next to bagpipes", "b": "a cat", "c": "a man playing bagpipes",
              "d": "a mangosteen"},
}


def test_buckets_and_comparison_equal_a_hand_count():
  report = long_tail.long_tail_report(CONDITIONS, IMAGES, MATCHER, COUNTS, "cc12m",
                                      [("cc3m", "cc12m")])
  assert report["buckets"] == ["0", "1-9", "10-99", "100-999", "1000+"]
  # By cc12m counts: dog 2000, cat 1500 -> 1000+; bagpipes 40, mangosteen 12 -> 10-99.
  by = {name: {r["bucket"]: r for r in rows} for name, rows in report["by_bucket"].items()}
  # cc3m: pairs (a,dog) yes, (b,cat) yes, (d,dog) yes -> 3/3 in 1000+;
  #       (a,bagpipes) no, (c,bagpipes) no, (d,mangosteen) no -> 0/3 in 10-99.
  assert (by["cc3m"]["1000+"]["named"], by["cc3m"]["1000+"]["pairs"]) == (3, 3)
  assert (by["cc3m"]["10-99"]["named"], by["cc3m"]["10-99"]["pairs"]) == (0, 3)
  # cc12m: dog named in a, not in d -> 2/3; bagpipes a, c and mangosteen d -> 3/3.
  assert (by["cc12m"]["1000+"]["named"], by["cc12m"]["1000+"]["pairs"]) == (2, 3)
  assert by["cc12m"]["10-99"]["recall"] == 1.0
  assert by["cc12m"]["10-99"]["concepts"] == 2
  assert math.isnan(by["cc12m"]["0"]["recall"]) and by["cc12m"]["0"]["pairs"] == 0
  comparison = report["comparisons"]["cc3m->cc12m"]
  assert [(r["concept"], r["delta"]) for r in comparison["gained"]] == [
      ("bagpipes", 1.0), ("mangosteen", 1.0)]
  assert [(r["concept"], r["delta"]) for r in comparison["lost"]] == [("dog", -0.5)]
  assert report["concepts"]["bagpipes"]["counts"] == {"cc3m": 0, "cc12m": 40}
  # Bucketed by the other source, bagpipes moves to bucket 0.
  by_cc3m = long_tail.long_tail_report(CONDITIONS, IMAGES, MATCHER, COUNTS, "cc3m")
  assert by_cc3m["by_bucket"]["cc12m"][0]["pairs"] == 2


def test_a_missing_prediction_is_an_error():
  with pytest.raises(KeyError, match="no prediction"):
    long_tail.per_concept_recall({"a": "a dog"}, IMAGES, MATCHER)


# The naming probe's ranks of the same pairs (evaluation/naming_probe.py).
RANKS = {"a": {"dog": 1, "bagpipes": 2}, "b": {"cat": 1}, "c": {"bagpipes": 1},
         "d": {"mangosteen": 7, "dog": 1}}


def test_probe_ranks_count_a_pair_named_at_rank_one():
  recall = long_tail.per_concept_rank_recall(RANKS, IMAGES)
  assert {c: (r.named, r.shown) for c, r in recall.items()} == {
      "dog": (2, 2), "cat": (1, 1), "bagpipes": (1, 2), "mangosteen": (0, 1)}
  at_10 = long_tail.per_concept_rank_recall(RANKS, IMAGES, k=10)
  assert at_10["mangosteen"].named == 1 and at_10["bagpipes"].named == 2
  with pytest.raises(KeyError, match="'d', concept 'mangosteen'"):
    long_tail.per_concept_rank_recall({**RANKS, "d": {"dog": 1}}, IMAGES)


def test_command_line_writes_json_markdown_and_png(tmp_path):
  paths = {}
  for name, preds in CONDITIONS.items():
    paths[name] = tmp_path / f"{name}.json"
    paths[name].write_text(json.dumps([{"image_id": k, "caption": v} for k, v in preds.items()]))
  (tmp_path / "images.json").write_text(json.dumps({k: sorted(v) for k, v in IMAGES.items()}))
  (tmp_path / "ranks.json").write_text(json.dumps(RANKS))
  (tmp_path / "classes.txt").write_text("\n".join(["dog", "cat", "bagpipes", "mangosteen"]))
  stats = {"datasets": {name: {"classes": {"instances": counts}} for name, counts in
                        COUNTS.items()}}
  (tmp_path / "stats.json").write_text(json.dumps(stats))
  out = tmp_path / "report"
  result = subprocess.run(
      [sys.executable, "-m", "cc12m_jax.evaluation.long_tail",
       *[f"--condition={n}={p}" for n, p in paths.items()],
       f"--ranks=probe={tmp_path / 'ranks.json'}",
       f"--image_concepts={tmp_path / 'images.json'}", f"--concepts={tmp_path / 'classes.txt'}",
       f"--stats={tmp_path / 'stats.json'}", "--bucket_source=cc12m", "--compare=cc3m,cc12m",
       f"--output_dir={out}"], capture_output=True, text=True, timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads((out / "long_tail.json").read_text())
  assert report["by_bucket"]["cc12m"][3]["bucket"] == "100-999"
  # cc3m, cc12m, then the probe: bagpipes (c) of the three 10-99 pairs at rank 1.
  assert "| 10-99 | 0.0 | 100.0 | 33.3 | 3 |" in (out / "long_tail.md").read_text()
  assert (out / "long_tail.png").read_bytes()[:4] == b"\x89PNG"
