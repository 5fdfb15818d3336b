"""results.json and its Markdown from fixture evaluation files, against hand computations.

The fixtures are small enough that every figure, and every bootstrap
interval, can be worked out by hand (each derivation is in a comment).
"""
import json
import math
import os

import pytest

from cc12m_jax.experiments import commands, results, suite as suite_lib
from configs.experiments import common

# nocaps-style set: images 1, 2 in-domain; 3, 4 out-domain. Per-image CIDEr
# (fractions) of rows A and B for seeds 0 and 1.
DOMAINS = {"1": "in-domain", "2": "in-domain", "3": "out-domain", "4": "out-domain"}
CIDER = {
    ("a", 0): [0.2, 0.4, 0.1, 0.3],   # in 0.3, out 0.2, overall 0.25
    ("a", 1): [0.4, 0.4, 0.1, 0.1],   # in 0.4, out 0.1, overall 0.25
    ("b", 0): [0.5, 0.5, 0.6, 0.8],   # in 0.5, out 0.7, overall 0.6
    ("b", 1): [0.3, 0.5, 0.9, 0.5],   # in 0.4, out 0.7, overall 0.55
}


def _mean(xs):
  return sum(xs) / len(xs)


def _report(cider):
  per_image = dict(zip(DOMAINS, cider))
  groups = {"in-domain": ["1", "2"], "out-domain": ["3", "4"], "overall": ["1", "2", "3", "4"]}
  scores = {g: {"CIDEr": _mean([per_image[i] for i in ids]), "BLEU-4": 0.1}
            for g, ids in groups.items()}
  return {"scores": scores, "per_image": {"CIDEr": per_image}, "image_domains": DOMAINS}


def _suite_config():
  c = common.suite("table3", "Fixture table", "synthetic", report_source="nocaps_val",
                   selection_source="coco_val", selection_metric="overall/CIDEr")
  for name in ("a", "b", "c"):
    c.conditions[name] = {"pre": common.stage("configs/synthetic_pretrain.py", "pretrain"),
                          "ev": common.ic_evaluate("synthetic", of="pre")}
  c.rows = [common.row("a", "A", "a", "ev", paper_row="cc3m_ft"),
            common.row("b", "B", "b", "ev", paper_row="cc12m_ft"),
            common.row("c", "C", "c", "ev", paper_row="scratch")]
  c.columns = [common.column("in", "in", "nocaps_val", "in-domain/CIDEr", 100.0),
               common.column("out", "out", "nocaps_val", "out-domain/CIDEr", 100.0),
               common.column("overall", "overall", "nocaps_val", "overall/CIDEr", 100.0),
               common.column("bleu", "BLEU-4", "nocaps_val", "overall/BLEU-4", 100.0)]
  c.claims = [common.chain("A below B out-of-domain", "out", "a < b"),
              common.gain("B's gain over A larger out than in", "a", "b", "out", "in"),
              common.chain("B at most A out-of-domain", "out", "b <= a"),
              common.chain("A ~ B in-domain", "in", "a ~ b"),
              common.chain("BLEU-4 ordering", "bleu", "a < b"),
              common.chain("C beyond B", "overall", "b < c")]
  return c


def _write_eval(workdir, stage_key, seed, source, name, data, step=7):
  directory = os.path.join(commands.stage_dir(workdir, stage_key, seed), "eval", source,
                           f"step_{step}")
  os.makedirs(directory)
  with open(os.path.join(directory, name), "w") as f:
    json.dump(data, f)


@pytest.fixture
def captioning(tmp_path):
  suite = suite_lib.from_config(_suite_config())
  workdir = str(tmp_path)
  for (row, seed), cider in CIDER.items():
    _write_eval(workdir, f"{row}/ev", seed, "nocaps_val", "report.json", _report(cider))
  return suite, results.collect(suite, workdir, seeds=[0, 1])


def test_table_cells_are_mean_and_std_over_seeds_beside_the_paper(captioning):
  _, res = captioning
  a, b, c = res["rows"]
  assert a["cells"]["in"]["seeds"] == pytest.approx({"0": 30.0, "1": 40.0})
  assert a["cells"]["in"]["mean"] == pytest.approx(35.0)
  assert a["cells"]["in"]["std"] == pytest.approx(math.sqrt(50.0))   # stdev(30, 40)
  assert a["cells"]["overall"]["std"] == pytest.approx(0.0)
  assert b["cells"]["overall"]["mean"] == pytest.approx(57.5)         # (60 + 55) / 2
  assert a["cells"]["out"]["paper"] == 65.3 and b["cells"]["out"]["paper"] == 91.3
  assert a["cells"]["bleu"]["paper"] is None
  assert c["cells"]["in"]["n"] == 0 and c["cells"]["in"]["mean"] is None
  assert c["cells"]["overall"]["paper"] == 54.7
  assert a["cells"]["in"]["steps"] == {"0": 7, "1": 7}
  # Named inside the workdir, so results.json survives the workdir being moved.
  assert a["cells"]["in"]["files"] == {
      s: f"runs/a/seed_{s}/ev/eval/nocaps_val/step_7/report.json" for s in ("0", "1")}


def test_orderings_equal_hand_computation(captioning):
  _, res = captioning
  by_text = {o["text"]: o for o in res["orderings"]}

  # b - a out-of-domain. Per seed: 70 - 20 = 50, 70 - 10 = 60. A resample
  # draws 2 of the 2 out-domain images; per-image differences (B - A) are
  # seed 0: 0.5, 0.5; seed 1: 0.8, 0.4. Draw (3,3) -> mean over seeds
  # (0.5 + 0.8) / 2 = 65; (4,4) -> (0.5 + 0.4) / 2 = 45; mixed -> 55. With
  # B=1000 both extremes appear ~250 times: the 95% interval is [45, 65].
  [cmp] = by_text["A below B out-of-domain"]["comparisons"]
  assert cmp["per_seed"] == pytest.approx([50.0, 60.0])
  assert cmp["difference"] == pytest.approx(55.0)
  assert cmp["std"] == pytest.approx(math.sqrt(50.0))
  assert cmp["interval"] == pytest.approx([45.0, 65.0])
  assert by_text["A below B out-of-domain"]["status"] == "holds"

  # Gain: (B - A)[out] - (B - A)[in]. Per seed: (50) - (20) = 30, (60) - (0) = 60.
  # In-domain per-image differences: seed 0: 0.3, 0.1; seed 1: -0.1, 0.1; any
  # draw gives a seed mean of 10, so the interval is [45, 65] - 10.
  [gain] = by_text["B's gain over A larger out than in"]["comparisons"]
  assert gain["per_seed"] == pytest.approx([30.0, 60.0])
  assert gain["interval"] == pytest.approx([35.0, 55.0])
  assert by_text["B's gain over A larger out than in"]["status"] == "holds"

  # 'b <= a': d = a - b lies in [-65, -45], below 0: the data contradict it.
  [le] = by_text["B at most A out-of-domain"]["comparisons"]
  assert le["interval"] == pytest.approx([-65.0, -45.0])
  assert by_text["B at most A out-of-domain"]["status"] == "does not hold"

  # 'a ~ b' in-domain: every resample gives 10, the interval [10, 10] excludes 0.
  [eq] = by_text["A ~ B in-domain"]["comparisons"]
  assert eq["interval"] == pytest.approx([10.0, 10.0])
  assert by_text["A ~ B in-domain"]["status"] == "does not hold"

  # BLEU-4 is a corpus statistic: a difference but no interval.
  [bleu] = by_text["BLEU-4 ordering"]["comparisons"]
  assert bleu["difference"] == pytest.approx(0.0) and bleu["interval"] is None
  assert by_text["BLEU-4 ordering"]["status"] == "not tested"
  # Row C was never evaluated.
  assert by_text["C beyond B"]["status"] == "not evaluated"


def test_markdown_lines(captioning):
  _, res = captioning
  text = results.markdown(res)
  assert ("| row | in | in (paper) | out | out (paper) | overall | overall (paper) | BLEU-4 | "
          "BLEU-4 (paper) |") in text
  assert ("| A | 35.0 ± 7.1 | 81.8 | 15.0 ± 7.1 | 65.3 | 25.0 ± 0.0 | 73.2 | 10.0 ± 0.0 | — |"
          in text)
  assert "| C | — | — | — | — | — | 54.7 | — | — |" in text
  assert "1. A below B out-of-domain: **holds**" in text
  assert "   - `a < b [out]`: +55.00 ± 7.07, 95% interval [+45.00, +65.00]: holds" in text
  assert "3. B at most A out-of-domain: **does not hold**" in text
  assert "Fine-tuning steps selected on `coco_val` (overall/CIDEr); reported: `nocaps_val`." in text


def test_seeds_asked_for_without_files_are_named_not_averaged(tmp_path):
  # Seeds run apart: seed 1's files are here, seeds 0 and 2 never ran here.
  suite = suite_lib.from_config(_suite_config())
  workdir = str(tmp_path)
  for row in ("a", "b"):
    _write_eval(workdir, f"{row}/ev", 1, "nocaps_val", "report.json", _report(CIDER[(row, 1)]))
  res = results.collect(suite, workdir, seeds=[0, 1, 2])
  assert res["seeds"] == [1]
  assert res["seeds_without_files"] == [0, 2]
  a = res["rows"][0]["cells"]["out"]
  assert (a["seeds"], a["mean"], a["std"], a["n"]) == ({"1": pytest.approx(10.0)},
                                                       pytest.approx(10.0), None, 1)
  assert "synthetic size; seeds 1 (no evaluation files for seeds 0, 2)" in results.markdown(res)
  # The orderings use seed 1 alone: B - A out-of-domain 0.7 - 0.1 = +60.
  first = res["orderings"][0]["comparisons"][0]
  assert (first["seeds"], first["difference"]) == ([1], pytest.approx(60.0))


def test_selected_steps_and_their_held_out_values(tmp_path):
  """Row A's evaluate stage chose steps 200 and 250 on coco_val: results carry
  them with the value in the paper's units (the overall/CIDEr column's x 100)."""
  suite = suite_lib.from_config(_suite_config())
  workdir = str(tmp_path)
  for seed, (step, value) in enumerate([(200, 0.5), (250, 0.7)]):
    directory = os.path.join(commands.stage_dir(workdir, "a/ev", seed), "selection")
    os.makedirs(directory)
    with open(os.path.join(directory, "best.json"), "w") as f:
      json.dump({"metric": "overall/CIDEr", "mode": "max", "best_step": step,
                 "best_value": value, "history": []}, f)
  res = results.collect(suite, workdir, seeds=[0, 1])
  a = res["rows"][0]["selection"]
  assert a["seeds"] == {"0": {"step": 200, "value": 50.0}, "1": {"step": 250, "value": 70.0}}
  assert a["mean"] == pytest.approx(60.0) and a["std"] == pytest.approx(math.sqrt(200))
  assert res["rows"][1]["selection"]["seeds"] == {}  # B: nothing written
  text = results.markdown(res)
  assert "* A: step 200 (seed 0), 250 (seed 1); 60.0 ± 14.1" in text
  assert "* B:" not in text


def test_written_files(captioning, tmp_path):
  _, res = captioning
  paths = results.write(res, str(tmp_path / "out"))
  with open(paths["json"]) as f:
    assert json.load(f) == json.loads(json.dumps(res))
  with open(paths["markdown"]) as f:
    assert f.read() == results.markdown(res)


def test_retrieval_cells_and_interval_from_per_query_ranks(tmp_path):
  # Images x, y with two caption queries each. A: x ranks [0, 3], y [-1, 0]
  # -> R@1 = 2/4 = 50, R@5 = 3/4 = 75. B: x [0, 0], y [1, 0] -> R@1 = 75.
  # B - A per image (R@1): x 100 - 50 = 50, y 50 - 50 = 0; draws (x,x) 50,
  # (y,y) 0, mixed 25: the 95% interval is [0, 50], which does not lie above 0.
  c = common.suite("table8", "Fixture retrieval", "synthetic", report_source="flickr_test",
                   selection_source="flickr_val", selection_metric="image_retrieval/R@1")
  for name in ("a", "b"):
    c.conditions[name] = {"pre": common.stage("configs/vlm_synthetic_pretrain.py", "pretrain"),
                          "ev": common.vlm_as_is("synthetic", of="pre")}
  c.rows = [common.row("a", "A", "a", "ev", paper_row="cc3m_zs"),
            common.row("b", "B", "b", "ev", paper_row="cc12m_zs")]
  c.columns = [common.column(f"R@{k}", f"R@{k}", "flickr_test", f"image_retrieval/R@{k}", 1.0)
               for k in (1, 5)]
  c.claims = [common.chain("A below B", "R@1", "a < b")]
  suite = suite_lib.from_config(c)
  for row, ranks, r1, r5 in (("a", [0, 3, -1, 0], 50.0, 75.0), ("b", [0, 0, 1, 0], 75.0, 100.0)):
    _write_eval(str(tmp_path), f"{row}/ev", 0, "flickr_test", "retrieval.json", {
        "metrics": {"image_retrieval/R@1": r1, "image_retrieval/R@5": r5},
        "per_query": {"image_retrieval": {"image_id": ["x", "x", "y", "y"], "rank": ranks}}})
  res = results.collect(suite, str(tmp_path), seeds=[0])
  assert res["rows"][0]["cells"]["R@5"]["mean"] == 75.0
  assert res["rows"][0]["cells"]["R@1"]["paper"] == 35.4
  [claim] = res["orderings"]
  assert claim["comparisons"][0]["difference"] == pytest.approx(25.0)
  assert claim["comparisons"][0]["std"] is None
  assert claim["comparisons"][0]["interval"] == pytest.approx([0.0, 50.0])
  assert claim["status"] == "does not hold"


def test_per_image_scores_must_reproduce_the_reported_figure(tmp_path):
  suite = suite_lib.from_config(_suite_config())
  report = _report(CIDER[("a", 0)])
  report["scores"]["out-domain"]["CIDEr"] = 0.5  # not the mean of images 3 and 4
  for (row, seed), cider in CIDER.items():
    _write_eval(str(tmp_path), f"{row}/ev", seed, "nocaps_val", "report.json",
                report if (row, seed) == ("a", 0) else _report(cider))
  with pytest.raises(ValueError, match="out-domain/CIDEr from per-image scores"):
    results.collect(suite, str(tmp_path), seeds=[0, 1])
