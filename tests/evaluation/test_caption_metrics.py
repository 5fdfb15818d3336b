"""nocaps-protocol evaluation against pycocoevalcap's own tokenizer/scorers."""
import json
import os

import numpy as np
import pytest
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer as OfficialPTB

from cc12m_jax.evaluation import (caption_metrics, nocaps, ptb_tokenizer,
                                  report as report_lib)

pytestmark = pytest.mark.skipif(
    ptb_tokenizer.java_unavailable_reason() is not None,
    reason="needs Java for PTB tokenization and METEOR")

# image id -> (domain, references, prediction)
FIXTURE = {
    101: ("in-domain", ["A man riding a brown horse.", "A person on a horse.",
                        "Man rides a horse in a field."],
          "a man riding a horse in a field"),
    102: ("in-domain", ["Two dogs play in the snow.", "A pair of dogs in snow",
                        "Dogs running through snow!"], "two dogs in the snow"),
    103: ("in-domain", ["A plate of food on a table.", "Food on a white plate",
                        "A meal with rice, beans and salad."],
          "a plate of rice and beans"),
    104: ("in-domain", ["A red bus on a city street.", "A bus drives down "
                        "the road.", "Red double-decker bus."],
          "a red bus on the street"),
    201: ("near-domain", ["A jellyfish floating in blue water.",
                          "Jellyfish in the ocean.", "A pink jellyfish."],
          "a fish in the water"),
    202: ("near-domain", ["A violin lying on a wooden table.",
                          "An old violin and bow.", "A violin on a desk"],
          "a guitar on a table"),
    203: ("near-domain", ["Lanterns hanging over a street at night.",
                          "Paper lanterns glowing.", "Red lanterns in a row."],
          "red lanterns at night"),
    301: ("out-domain", ["A tortoise walking on sand.",
                         "A large tortoise on the beach.", "Tortoise crawling"],
          "a turtle on the sand"),
    302: ("out-domain", ["A harpsichord in a museum room.",
                         "An antique harpsichord.", "Keyboard instrument on "
                         "display."], "a piano in a room"),
}


def nocaps_json():
  return {
      "info": {"description": "fixture"},
      "images": [{"id": i, "domain": d, "file_name": f"{i}.jpg",
                  "open_images_id": f"oi{i}"} for i, (d, _, _) in
                 FIXTURE.items()],
      "annotations": [{"image_id": i, "id": 10 * i + j, "caption": c}
                      for i, (_, refs, _) in FIXTURE.items()
                      for j, c in enumerate(refs)],
  }


@pytest.fixture(scope="module")
def references(tmp_path_factory):
  path = tmp_path_factory.mktemp("refs") / "nocaps_val.json"
  path.write_text(json.dumps(nocaps_json()))
  return nocaps.load_references(str(path))


@pytest.fixture(scope="module")
def predictions():
  return {str(i): p for i, (_, _, p) in FIXTURE.items()}


@pytest.fixture(scope="module")
def report(references, predictions):
  return nocaps.evaluate(predictions, references)


@pytest.fixture(scope="module")
def official(references, predictions):
  """Tokenised with pycocoevalcap's own PTBTokenizer (writable install)."""
  tok = OfficialPTB()
  gts = tok.tokenize({k: [{"caption": c} for c in v]
                      for k, v in references.captions.items()})
  res = tok.tokenize({k: [{"caption": v}] for k, v in predictions.items()})
  return gts, res


def test_tokenizer_matches_official_and_writes_nothing_in_package(
    references, official):
  pkg = os.path.join(ptb_tokenizer.pycocoevalcap_dir(), "tokenizer")
  before = sorted(os.listdir(pkg))
  ours = ptb_tokenizer.PTBTokenizer().tokenize(
      {k: [{"caption": c} for c in v] for k, v in references.captions.items()})
  assert sorted(os.listdir(pkg)) == before
  assert ours == official[0]
  assert ours["301"][0] == "a tortoise walking on sand"


def test_per_domain_scores_match_direct_scorer_calls(report, official):
  gts, res = official
  all_ids = list(gts)
  _, cider_all = Cider().compute_score(gts, res)
  cider_by_id = dict(zip(all_ids, cider_all))
  groups = {
      "in-domain": ["101", "102", "103", "104"],
      "near-domain": ["201", "202", "203"],
      "out-domain": ["301", "302"],
      "overall": all_ids,
  }
  assert report["num_images"] == {g: len(v) for g, v in groups.items()}
  meteor = Meteor()
  for group, ids in groups.items():
    g = {k: gts[k] for k in ids}
    r = {k: res[k] for k in ids}
    bleu, _ = Bleu(4).compute_score(g, r, verbose=0)
    expected = {
        "BLEU-1": bleu[0], "BLEU-2": bleu[1], "BLEU-3": bleu[2],
        "BLEU-4": bleu[3],
        "METEOR": meteor.compute_score(g, r)[0],
        "ROUGE-L": Rouge().compute_score(g, r)[0],
        "CIDEr": np.mean([cider_by_id[k] for k in ids]),
    }
    for metric, value in expected.items():
      np.testing.assert_allclose(report["scores"][group][metric], value,
                                 rtol=1e-9, err_msg=f"{group} {metric}")


def test_overall_cider_is_image_weighted_mean_of_domains(report, official):
  scores, counts = report["scores"], report["num_images"]
  weighted = sum(scores[d]["CIDEr"] * counts[d] for d in nocaps.DOMAINS)
  np.testing.assert_allclose(scores["overall"]["CIDEr"],
                             weighted / counts["overall"], rtol=1e-12)
  # One set of document frequencies: a domain's figure is not CIDEr on
  # that domain alone (whose idf would come from its own few images).
  gts, res = official
  ids = ["301", "302"]
  alone, _ = Cider().compute_score({k: gts[k] for k in ids},
                                   {k: res[k] for k in ids})
  assert abs(alone - scores["out-domain"]["CIDEr"]) > 1e-3


def test_spice_reported_unavailable_with_reason(report):
  reason = caption_metrics.spice_unavailable_reason()
  if reason is None:
    assert "SPICE" in report["scores"]["overall"]
  else:
    assert report["unavailable"]["SPICE"] == reason
    assert "SPICE" not in report["scores"]["overall"]
    table = report_lib.markdown_table(report)
    assert f"SPICE: unavailable ({reason})" in table


def test_report_files(tmp_path, references, predictions, report):
  paths = report_lib.write_all(str(tmp_path), predictions, references, report)
  written = json.loads(open(paths["predictions"]).read())
  assert written[0] == {"image_id": 101,
                        "caption": "a man riding a horse in a field"}
  assert [p["image_id"] for p in written] == list(FIXTURE)
  assert report_lib.read_predictions(paths["predictions"]) == predictions
  assert json.loads(open(paths["report"]).read()) == json.loads(
      json.dumps(report))
  table = open(paths["markdown"]).read()
  row = [l for l in table.splitlines() if l.startswith("| out-domain |")][0]
  assert f"{100 * report['scores']['out-domain']['CIDEr']:.1f}" in row
  assert table.splitlines()[0].startswith("| split | images | CIDEr")
