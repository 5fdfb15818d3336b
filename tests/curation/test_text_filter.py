"""Text filters (paper Section 2.2, step 2) on hand-written alt-texts."""
import pytest

from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import language
from cc12m_jax.curation import text_filter
from cc12m_jax.curation import words

CC3M = config_lib.preset_config("cc3m").text
CC12M = config_lib.preset_config("cc12m").text

# Distinct filler words so that long texts have no repetition.
_FILLER = [f"item{i}" for i in range(400)]


def _surface(text, cfg):
  return text_filter.surface_rejection(text, words.words(text), cfg)


def _text_with_words(n):
  """'the dog ...' with exactly n words, no repeated content word."""
  return " ".join(["the", "dog"] + _FILLER[:n - 2])


@pytest.mark.parametrize("n,expected", [
    (2, "text/too_few_words"), (3, None), (256, None), (257, "text/too_many_words")])
def test_cc12m_word_count_boundaries(n, expected):
  assert len(words.words(_text_with_words(n))) == n
  assert _surface(_text_with_words(n), CC12M) == expected


@pytest.mark.parametrize("n,expected", [
    (3, "text/too_few_words"), (4, None), (48, None), (49, "text/too_many_words")])
def test_cc3m_word_count_boundaries(n, expected):
  text = _text_with_words(n)
  cfg = CC3M.copy_and_resolve_references()
  cfg.max_noun_ratio = 1.0
  assert _surface(text, cfg) == expected


def test_repetition_boundary_is_inclusive_at_0_2():
  # Content words: dog cat bird fish dog -> 1 repeat of 5 = 0.2 -> kept.
  assert text_filter.repeated_word_fraction("a dog and a cat a bird a fish a dog".split()) == 0.2
  assert _surface("a dog and a cat with a bird near a fish and a dog", CC12M) is None
  # dog cat dog bird dog -> 2 of 5 = 0.4 -> rejected.
  assert _surface("a dog and a cat with a dog near a bird and a dog", CC12M) == "text/repetition"
  # 10 content words, 2 repeats = 0.2 kept; 3 repeats = 0.3 rejected.
  ten = "the red dog and the blue cat with a green bird near a red fish by a blue lake"
  assert text_filter.repeated_word_fraction([w.lower() for w in words.words(ten)]) == 0.2
  assert _surface(ten, CC12M) is None
  eleven = ten + " and a red sky"
  assert _surface(eleven, CC12M) == "text/repetition"


def test_english_heuristic():
  assert language.is_english("a dog on the beach", 0.9, 1)
  assert not language.is_english("le chien sur la plage dans le jardin", 0.9, 1)
  assert not language.is_english("el perro en la playa con una pelota", 0.9, 1)
  assert not language.is_english("公園で遊ぶ犬と猫", 0.9, 1)
  assert not language.is_english("собака на пляже", 0.9, 1)
  assert not language.is_english("#jellyfish #ocean", 0.9, 1)  # no function word
  assert _surface("公園で遊ぶ犬と猫", CC12M) == "text/not_english"
  assert _surface("", CC12M) == "text/empty"


def test_cc3m_only_heuristics():
  cases = {
      "A GREEN DOG IN THE PARK FOR SALE": "text/capitalization",
      "The Green Dog In The Park For Lovers": "text/capitalization",
      "the most amazing beautiful dog, so lovely and awesome": "text/polarity",
      "click here for a photo of the dog in the park": "text/unwanted_phrase",
      # 6 content words, 1 repeat: unique 0.83 < 0.85 (cc3m), repetition 0.17 <= 0.2.
      "a dog and a cat with a bird near a tree by the lake and a dog": "text/unique_word_ratio",
  }
  for text, reason in cases.items():
    assert _surface(text, CC3M) == reason, text
    assert _surface(text, CC12M) is None, text


def test_pos_checks_noun_determiner_preposition(analyze):
  # The paper's Figure 1 example: no preposition; cc3m drops it, cc12m keeps it.
  jelly = analyze("#jellyfish #blue #ocean the pretty Sea Turtle Wallpaper")
  assert text_filter.pos_rejection(jelly, CC12M) is None
  assert text_filter.pos_rejection(jelly, CC3M) == "text/no_preposition"
  clean = analyze("a dog running on the beach")
  assert text_filter.pos_rejection(clean, CC3M) is None
  assert text_filter.pos_rejection(analyze("dogs running on beaches"), CC12M) == "text/no_determiner"
  assert text_filter.pos_rejection(analyze("this is very good"), CC12M) == "text/no_noun"


def test_cc3m_noun_ratio(analyze):
  listy = analyze("the dog cat bird fish tree house in garden")
  assert text_filter.pos_rejection(listy, CC3M) == "text/noun_ratio"
  assert text_filter.pos_rejection(listy, CC12M) is None
