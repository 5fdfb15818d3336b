"""Image-based filter (paper Section 2.2, step 1).

Missing information is a policy of the `image` config section, never a silent
pass: `missing_metadata` ('reject' | 'skip_filter') for a candidate without a
format or a size (e.g. a CC-style TSV line, or img2dataset metadata without
bytes), `missing_safety` ('reject' | 'accept') for one without a safety score.
`image_notes` names the policies that let a candidate through, so that the
pipeline counts them.
"""
from typing import Any, Optional

import ml_collections

from cc12m_jax.curation.config import split_list

NOTE_MISSING_METADATA = "image/missing_metadata"
NOTE_MISSING_SAFETY = "image/missing_safety_score"


def aspect_ratio(width: int, height: int) -> float:
  """Larger side over smaller side (>= 1); inf for a zero side."""
  small, large = min(width, height), max(width, height)
  return float("inf") if small == 0 else large / small


def image_rejection(candidate: dict[str, Any], cfg: ml_collections.ConfigDict) -> Optional[str]:
  """Reason string when the image fails `cfg` (the `image` config section), else None."""
  image_format = candidate.get("format")
  width, height = candidate.get("width"), candidate.get("height")
  if image_format is None or width is None or height is None:
    if cfg.missing_metadata == "reject":
      return "image/missing_metadata"
  if image_format is not None:
    allowed = {f.upper() for f in split_list(cfg.allowed_formats)}
    # Pillow reports 'JPEG' for .jpg/.jpeg; metadata may say 'JPG'.
    if ("JPEG" if image_format == "JPG" else image_format) not in allowed:
      return "image/format"
  if width is not None and height is not None:
    if min(width, height) <= cfg.min_shorter_side:
      return "image/too_small"
    if aspect_ratio(width, height) > cfg.max_aspect_ratio:
      return "image/aspect_ratio"
  safety = candidate.get("safety_score")
  if safety is None:
    if cfg.missing_safety == "reject":
      return "image/missing_safety_score"
  elif safety >= cfg.max_safety_score:
    return "image/unsafe"
  return None


def image_notes(candidate: dict[str, Any], cfg: ml_collections.ConfigDict) -> list[str]:
  """For a candidate that passed: the missing-data policies that let it pass."""
  notes = []
  if (candidate.get("format") is None or candidate.get("width") is None
      or candidate.get("height") is None):
    notes.append(NOTE_MISSING_METADATA)
  if candidate.get("safety_score") is None:
    notes.append(NOTE_MISSING_SAFETY)
  return notes
