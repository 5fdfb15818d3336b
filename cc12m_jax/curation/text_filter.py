"""Text-based filters (paper Section 2.2, step 2).

Two groups, so that cheap checks run before spaCy:
  surface_rejection  language, length, repetition, capitalization, unique-word
                     ratio, polarity, unwanted phrases (no NLP needed);
  pos_rejection      noun / determiner / preposition presence, unique-noun and
                     noun ratios (needs the spaCy tags in an `Analysis`).
Each returns a reason string ('text/...') or None. Thresholds: the `text`
config section; a disabled check has its neutral value (1.0 or 0.0).
"""
from typing import Optional

import ml_collections

from cc12m_jax.curation import language
from cc12m_jax.curation import polarity
from cc12m_jax.curation import words as words_lib
from cc12m_jax.curation.config import split_list
from cc12m_jax.curation.nlp import Analysis


def repeated_word_fraction(lowered_words: list[str]) -> float:
  """Share of repeated content words: (content - distinct content) / content.

  Function words (words.FUNCTION_WORDS) are left out, so 'a man and a woman'
  has no repetition while 'dog dog cute dog' has 2/4.
  """
  content = words_lib.content_words(lowered_words)
  if not content:
    return 0.0
  return (len(content) - len(set(content))) / len(content)


def uppercase_letter_ratio(text: str) -> float:
  letters = [ch for ch in text if ch.isalpha()]
  return sum(1 for ch in letters if ch.isupper()) / len(letters) if letters else 0.0


def capitalized_word_ratio(text_words: list[str]) -> float:
  alpha = [w for w in text_words if w[0].isalpha()]
  return sum(1 for w in alpha if w[0].isupper()) / len(alpha) if alpha else 0.0


def surface_rejection(text: str, text_words: list[str],
                      cfg: ml_collections.ConfigDict) -> Optional[str]:
  """Checks that need only the string and its `words.words` list."""
  if not text:
    return "text/empty"
  if not language.is_english(text, cfg.min_latin_letter_ratio, cfg.min_english_function_words):
    return "text/not_english"
  if len(text_words) < cfg.min_words:
    return "text/too_few_words"
  if len(text_words) > cfg.max_words:
    return "text/too_many_words"
  lowered = [w.lower() for w in text_words]
  if repeated_word_fraction(lowered) > cfg.max_repeated_word_fraction:
    return "text/repetition"
  if uppercase_letter_ratio(text) > cfg.max_uppercase_letter_ratio:
    return "text/capitalization"
  if capitalized_word_ratio(text_words) > cfg.max_capitalized_word_ratio:
    return "text/capitalization"
  if cfg.min_unique_word_ratio > 0 and 1.0 - repeated_word_fraction(lowered) < cfg.min_unique_word_ratio:
    return "text/unique_word_ratio"
  if polarity.opinion_word_ratio(lowered) > cfg.max_opinion_word_ratio:
    return "text/polarity"
  phrases = split_list(cfg.unwanted_phrases)
  if phrases:
    padded = " " + " ".join(lowered) + " "
    raw = text.lower()
    for phrase in phrases:
      # Word-bounded match on the word list; phrases with punctuation
      # ('credit:') match the raw lower-cased text.
      if (" " + phrase + " ") in padded or (not phrase.replace(" ", "").isalnum() and phrase in raw):
        return "text/unwanted_phrase"
  return None


def pos_rejection(analysis: Analysis, cfg: ml_collections.ConfigDict) -> Optional[str]:
  """Checks on spaCy's coarse POS tags of the alt-text."""
  nouns = [t.lower() for t, pos in zip(analysis.tokens, analysis.pos) if pos in ("NOUN", "PROPN")]
  if cfg.require_noun and not nouns:
    return "text/no_noun"
  if cfg.require_determiner and "DET" not in analysis.pos:
    return "text/no_determiner"
  if cfg.require_preposition and not any(
      pos == "ADP" and tag == "IN" for pos, tag in zip(analysis.pos, analysis.tags)):
    return "text/no_preposition"
  word_count = sum(1 for pos in analysis.pos if pos not in ("PUNCT", "SYM", "SPACE", "X"))
  if nouns and cfg.min_unique_noun_ratio > 0 and len(set(nouns)) / len(nouns) < cfg.min_unique_noun_ratio:
    return "text/unique_noun_ratio"
  if word_count and len(nouns) / word_count > cfg.max_noun_ratio:
    return "text/noun_ratio"
  return None
