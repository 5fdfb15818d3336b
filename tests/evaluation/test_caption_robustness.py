"""Caption scores cannot shift between images, whatever text a caption holds.

Issue 18, finding 1: a caption with U+2028 made the PTB tokenizer emit an
extra line, the wrapper dropped a trailing empty line, and every later
caption was scored against the wrong image. These tests run the real
Stanford PTBTokenizer (Java) and the real pycocoevalcap scorers.
"""
import json
import sys

from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from cc12m_jax.evaluation import caption_metrics
from cc12m_jax.evaluation import nocaps
from cc12m_jax.evaluation import ptb_tokenizer
from tests.evaluation import test_caption_metrics as fixture_lib

pytestmark = pytest.mark.skipif(
    ptb_tokenizer.java_unavailable_reason() is not None,
    reason="needs Java for PTB tokenization and METEOR")

# Every separator str.splitlines knows, plus Unicode format characters.
SEPARATORS = ["\u2028", "\u2029", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85",
              "\r", "\n", "\r\n"]
FAST_METRICS = ("BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr")


@pytest.fixture(scope="module")
def tokenizer():
  return ptb_tokenizer.PTBTokenizer()


@pytest.fixture(scope="module")
def references(tmp_path_factory):
  path = tmp_path_factory.mktemp("refs") / "nocaps_val.json"
  path.write_text(json.dumps(fixture_lib.nocaps_json()))
  return nocaps.load_references(str(path))


def _with_text(references, image_id, index, text):
  """A copy of `references` whose caption `index` of `image_id` is `text`."""
  captions = {k: list(v) for k, v in references.captions.items()}
  captions[image_id][index] = text
  return nocaps.References(captions, dict(references.domains),
                           dict(references.original_ids), references.source)


def _predictions(**changed):
  out = {str(i): p for i, (_, _, p) in fixture_lib.FIXTURE.items()}
  out.update(changed)
  return out


def test_issue_reproduction_keeps_every_caption_with_its_image(tokenizer):
  gts, res = caption_metrics.tokenize_pairs(
      {"1": ["a dog\u2028on the grass"], "2": ["a cat"], "3": ["a bird"]},
      {"1": "a dog", "2": "a cat", "3": ""}, tokenizer)
  assert gts == {"1": ["a dog on the grass"], "2": ["a cat"], "3": ["a bird"]}
  assert res == {"1": ["a dog"], "2": ["a cat"], "3": [""]}


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\v", "\f"])
def test_separator_scores_as_a_space_through_nocaps_evaluate(
    references, tokenizer, sep):
  # In a prediction of the first image (all later captions would shift) and
  # in a reference of another image.
  spaced = nocaps.evaluate(
      _predictions(**{"101": "a man riding a horse in a field"}),
      _with_text(references, "202", 1, "An old violin and bow."),
      metrics=FAST_METRICS, tokenizer=tokenizer)
  separated = nocaps.evaluate(
      _predictions(**{"101": f"a man riding{sep}a horse in a field"}),
      _with_text(references, "202", 1, f"An old violin{sep}and bow."),
      metrics=FAST_METRICS, tokenizer=tokenizer)
  assert separated["scores"] == spaced["scores"]


def test_every_separator_and_format_character_tokenizes_as_a_space(tokenizer):
  specials = SEPARATORS + ["\u200b", "\ufeff", "\u00ad", "\x00", "\t", "\x7f"]
  captions = [f"a dog{c}on the grass" for c in specials]
  lines = tokenizer.tokenize_lines(captions + ["a cat"])
  assert lines == ["a dog on the grass"] * len(specials) + ["a cat"]


def test_normalization_covers_everything_splitlines_splits_on():
  text = "".join(chr(cp) for cp in range(sys.maxunicode + 1)
                 if not 0xD800 <= cp <= 0xDFFF)
  breaks = [ch for ch in text if len(f"a{ch}b".splitlines()) > 1]
  assert len(breaks) == 10
  assert ptb_tokenizer.normalize_caption("".join(breaks)) == " " * len(breaks)
  assert len(ptb_tokenizer.normalize_caption(text).splitlines()) == 1


@pytest.mark.parametrize("blank", ["\u3000", "\u00a0", "\u3000\u00a0 \u200b"])
def test_blank_only_captions_count_as_empty(tokenizer, blank):
  gts, res = caption_metrics.tokenize_pairs(
      {"1": ["a dog", blank], "2": ["a cat"]}, {"1": blank, "2": "a cat"},
      tokenizer)
  assert gts == {"1": ["a dog", ""], "2": ["a cat"]}
  assert res == {"1": [""], "2": ["a cat"]}


def test_invalid_text_is_an_error_naming_the_image(tokenizer):
  with pytest.raises(ValueError, match=r"image '7' prediction.*surrogate"):
    caption_metrics.tokenize_pairs({"6": ["a"], "7": ["b"]},
                                   {"6": "a", "7": "b\ud800"}, tokenizer)
  with pytest.raises(ValueError, match=r"image '6' reference 1.*UTF-8"):
    caption_metrics.tokenize_pairs({"6": ["a", b"\xff\xfe"]}, {"6": "a"},
                                   tokenizer)
  with pytest.raises(ValueError, match=r"image '6' prediction.*not a string"):
    caption_metrics.tokenize_pairs({"6": ["a"]}, {"6": None}, tokenizer)
  with pytest.raises(ValueError, match=r"image '6': references must be a list"):
    caption_metrics.tokenize_pairs({"6": "a dog"}, {"6": "a"}, tokenizer)


def test_output_out_of_step_is_an_error_naming_the_image():
  # _pair checks the Java output against the captions: caption 1 came back
  # as two lines, so the sentinel is not where it belongs.
  sentinel = ptb_tokenizer._SENTINEL  # pylint: disable=protected-access
  out = f"a dog\n{sentinel}\na\ncat\n{sentinel}\nbird\n{sentinel}\n"
  with pytest.raises(ptb_tokenizer.TokenizerMismatchError,
                     match=r"image '2' prediction"):
    ptb_tokenizer.PTBTokenizer._pair(  # pylint: disable=protected-access
        out, ["a dog", "a cat", "bird"],
        ["image '1' prediction", "image '2' prediction", "image '3' prediction"])
  with pytest.raises(ptb_tokenizer.TokenizerMismatchError, match="4 lines"):
    ptb_tokenizer.PTBTokenizer._pair(  # pylint: disable=protected-access
        f"a\n{sentinel}\nb\n{sentinel}\n", ["a"], ["image '1' prediction"])


def test_meteor_line_protocol_cannot_be_split_by_a_caption():
  gts = {"1": ["a man riding a horse", "a person on a horse"],
         "2": ["two dogs in the snow"], "3": ["a red bus on a street"]}
  res = {"1": ["a man on a horse"], "2": ["two dogs"], "3": ["a bus"]}
  hostile_gts = dict(gts, **{"1": ["a man riding\na horse",
                                   "a person ||| on a horse"]})
  hostile_res = dict(res, **{"2": ["two\u2028dogs"]})
  with caption_metrics.MeteorScorer() as scorer:
    plain = scorer.score(gts, res)
    hostile = scorer.score(hostile_gts, hostile_res)
  np.testing.assert_allclose(hostile[1], plain[1], rtol=1e-12)
  assert hostile[0] == pytest.approx(plain[0], rel=1e-12)


# Arbitrary Unicode (no lone surrogates: those are refused, see above), with
# line breaks and format characters drawn often.
_HOSTILE_CHARS = st.one_of(st.characters(blacklist_categories=("Cs",)),
                           st.sampled_from([c for c in SEPARATORS if len(c) == 1]
                                           + ["\u200b", "\x00"]))
hostile_text = st.text(alphabet=_HOSTILE_CHARS, max_size=40)
_IMAGE_IDS = [str(i) for i in fixture_lib.FIXTURE]


@pytest.fixture(scope="module")
def baseline(references, tokenizer):
  refs = {k: references.captions[k] for k in _IMAGE_IDS}
  gts, res = caption_metrics.tokenize_pairs(refs, _predictions(), tokenizer)
  _, cider = caption_metrics.cider_d(gts, res)
  return refs, gts, res, dict(zip(_IMAGE_IDS, cider))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(image=st.sampled_from(_IMAGE_IDS), text=hostile_text)
def test_arbitrary_prediction_never_moves_another_images_score(
    baseline, tokenizer, image, text):
  refs, base_gts, base_res, base_cider = baseline
  gts, res = caption_metrics.tokenize_pairs(refs, _predictions(**{image: text}),
                                            tokenizer)
  assert gts == base_gts
  assert {k: v for k, v in res.items() if k != image} == \
      {k: v for k, v in base_res.items() if k != image}
  # CIDEr's document frequencies come from the references only, so every
  # other image's score is exactly what it was.
  _, cider = caption_metrics.cider_d(gts, res)
  for k, value in zip(_IMAGE_IDS, cider):
    if k != image:
      assert value == base_cider[k], k


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(image=st.sampled_from(_IMAGE_IDS), index=st.integers(0, 2),
       text=hostile_text)
def test_arbitrary_reference_never_moves_another_images_tokens(
    baseline, tokenizer, image, index, text):
  refs, base_gts, base_res, _ = baseline
  refs = {k: list(v) for k, v in refs.items()}
  refs[image][index] = text
  gts, res = caption_metrics.tokenize_pairs(refs, _predictions(), tokenizer)
  assert res == base_res
  assert {k: v for k, v in gts.items() if k != image} == \
      {k: v for k, v in base_gts.items() if k != image}
  assert [g for j, g in enumerate(gts[image]) if j != index] == \
      [g for j, g in enumerate(base_gts[image]) if j != index]
