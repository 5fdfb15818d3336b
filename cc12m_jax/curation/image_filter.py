"""Image-based filter (paper Section 2.2, step 1)."""
from typing import Any, Optional

import ml_collections

from cc12m_jax.curation.config import split_list


def aspect_ratio(width: int, height: int) -> float:
  """Larger side over smaller side (>= 1); inf for a zero side."""
  small, large = min(width, height), max(width, height)
  return float("inf") if small == 0 else large / small


def image_rejection(candidate: dict[str, Any], cfg: ml_collections.ConfigDict) -> Optional[str]:
  """Reason string when the image fails `cfg` (the `image` config section), else None."""
  allowed = {f.upper() for f in split_list(cfg.allowed_formats)}
  # Pillow reports 'JPEG' for .jpg/.jpeg; metadata may say 'JPG'.
  image_format = "JPEG" if candidate["format"] == "JPG" else candidate["format"]
  if image_format not in allowed:
    return "image/format"
  width, height = candidate["width"], candidate["height"]
  if min(width, height) <= cfg.min_shorter_side:
    return "image/too_small"
  if aspect_ratio(width, height) > cfg.max_aspect_ratio:
    return "image/aspect_ratio"
  safety = candidate.get("safety_score")
  if safety is not None and safety >= cfg.max_safety_score:
    return "image/unsafe"
  return None
