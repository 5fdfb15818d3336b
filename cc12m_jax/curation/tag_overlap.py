"""Image-text filter (paper Section 2.2, step 3; the same in both presets).

A tag (from an image tagger, with a confidence) counts as overlapping when each
of its words, stemmed (words.stem), occurs among the stemmed alt-text words:
"dogs running" matches the tags "dog" and "running dog". At least
`min_tag_overlap` confident tags must overlap.

A candidate without a tags field (tags None; an empty list is a tagger that
found nothing) follows `missing_tags`: 'reject' (image_text/missing_tags) or
'skip_filter' (passes this filter; the pipeline counts it as a note).
"""
from typing import Any, Optional

import ml_collections

from cc12m_jax.curation import words as words_lib

NOTE_MISSING_TAGS = "image_text/missing_tags"


def overlapping_tags(alt_words: list[str], tags: list[list[Any]], min_score: float) -> list[str]:
  stems = {words_lib.stem(w) for w in alt_words}
  matched = []
  for name, score in tags:
    if score < min_score:
      continue
    tag_words = words_lib.caption_tokens(name)
    if tag_words and all(words_lib.stem(w) in stems for w in tag_words):
      matched.append(name)
  return matched


def tag_overlap_rejection(alt_words: list[str], tags: Optional[list[list[Any]]],
                          cfg: ml_collections.ConfigDict) -> Optional[str]:
  """Reason when fewer than cfg.min_tag_overlap confident tags occur in the text."""
  if cfg.min_tag_overlap == 0:
    return None
  if tags is None:
    return "image_text/missing_tags" if cfg.missing_tags == "reject" else None
  if not any(score >= cfg.min_tag_score for _, score in tags):
    return "image_text/no_confident_tags"
  if len(overlapping_tags(alt_words, tags, cfg.min_tag_score)) < cfg.min_tag_overlap:
    return "image_text/tag_overlap"
  return None
