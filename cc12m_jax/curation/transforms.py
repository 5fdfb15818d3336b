"""Text transformations (paper Section 2.2, step 4).

cc12m: every PERSON entity -> `<PERSON>` (privacy); everything else kept.
cc3m:  PERSON, ORG and location entities -> their hypernym (hypernyms.py),
       DATE/TIME spans deleted (with a preposition right before them: "taken on
       12 May 2019" -> "taken"), every digit -> '#'.
Spans come from spaCy's NER in an `Analysis`; edits are made on character
offsets of the original alt-text, so untouched text is kept byte for byte.
"""
import re
from typing import Callable, NamedTuple, Optional

import ml_collections

from cc12m_jax.curation.config import split_list
from cc12m_jax.curation.nlp import Analysis

_DIGIT = re.compile(r"[0-9]")
_SPACES = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)\]])")
_LEADING_PUNCT = re.compile(r"^[\s,.;:!?\-–—]+")
_DOUBLE_COMMA = re.compile(r",(\s*,)+")
_TRAILING_PUNCT = re.compile(r"[\s,;:\-–—]+$")


class Transformed(NamedTuple):
  caption: str
  num_person_spans: int     # PERSON spans replaced (by <PERSON> or a hypernym)
  num_deleted_spans: int    # DATE/TIME-like spans removed
  num_hypernymized: int     # non-person entity spans hypernymized


def _tidy(text: str) -> str:
  text = _SPACES.sub(" ", text)
  text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
  text = _DOUBLE_COMMA.sub(",", text)
  text = _LEADING_PUNCT.sub("", text)
  return _TRAILING_PUNCT.sub("", text).strip()


def _preposition_start(analysis: Analysis, span_start: int) -> Optional[int]:
  """Start offset of an ADP token directly before `span_start` (one space), if any."""
  for text, pos, tag, start in zip(analysis.tokens, analysis.pos, analysis.tags, analysis.offsets):
    if pos == "ADP" and tag == "IN" and start + len(text) in (span_start, span_start - 1):
      return start
  return None


def transform(text: str, analysis: Analysis, cfg: ml_collections.ConfigDict,
              hypernym: Optional[Callable[[str, str], str]] = None) -> Transformed:
  """Applies the `transform` config section to `text` analysed as `analysis`."""
  hyper_labels = set(split_list(cfg.hypernymize_labels))
  delete_labels = set(split_list(cfg.delete_labels))
  if (hyper_labels or cfg.person == "hypernym") and hypernym is None:
    raise ValueError("transform: hypernymization is configured but no hypernym function given")
  pieces, cursor = [], 0
  persons = deleted = hypernymized = 0
  for start, end, label in sorted(analysis.entities):
    if start < cursor:  # spaCy spans do not overlap; be safe anyway
      continue
    replacement = None
    if label in delete_labels:
      prep = _preposition_start(analysis, start)
      if prep is not None and prep >= cursor:
        start = prep
      replacement, deleted = "", deleted + 1
    elif label == "PERSON" and cfg.person != "keep":
      replacement = cfg.person_token if cfg.person == "placeholder" else hypernym(text[start:end], label)
      persons += 1
    elif label in hyper_labels:
      replacement = hypernym(text[start:end], label)
      hypernymized += 1
    if replacement is None:
      continue
    pieces.append(text[cursor:start])
    pieces.append(replacement)
    cursor = end
  pieces.append(text[cursor:])
  caption = "".join(pieces)
  if cfg.replace_digits:
    caption = _DIGIT.sub("#", caption)
  if deleted or hypernymized or persons:
    caption = _tidy(caption)
  return Transformed(caption, persons, deleted, hypernymized)
