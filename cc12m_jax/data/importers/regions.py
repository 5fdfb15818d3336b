"""From a detector's arrays to the regions a record holds.

Shared by every feature format (bottom-up TSV, VinVL, .npz):
  * VinVL-style rows carry D + 6 values a region: the feature, then the box
    geometry (x1, y1, x2, y2 normalized, width, height); the geometry is split
    off, and gives the boxes when the input has no box column.
  * The global feature is the given one, or else the mean of ALL given
    regions (before the 16 are chosen: it summarises the whole image, as the
    detector's pooled feature would).
  * More than 16 regions: the 16 most confident are kept (ties: earlier
    first), in their original order; without confidences, the first 16 (the
    detectors' own output order, by score).
  * Pixel boxes are divided by the image size. Detectors round boxes onto
    the image border, so coordinates up to 1% outside [0, 1] are clipped;
    further out is a bad row (`bad_box`): width and height swapped, or the
    wrong size, rather than rounding.
"""
import dataclasses
from typing import Optional

import numpy as np

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import rows as rows_lib

BOX_TOLERANCE = 0.01
GEOMETRY_DIMS = 6
_FLOAT16_MAX = float(np.finfo(np.float16).max)


@dataclasses.dataclass(frozen=True)
class RegionOptions:
  feature_dim: int                 # D of the region features
  feature_dtype: str = "float16"   # storage dtype (docs/record_format.md)
  geometry_dims: int = 0           # 6 for VinVL-style rows of D + 6 values
  boxes_normalized: bool = False   # boxes already in [0, 1]
  max_regions: int = records_lib.MAX_REGIONS


def check_size(width: int, height: int) -> None:
  if width <= 0 or height <= 0:
    raise rows_lib.RowError("bad_size", f"image size {width}x{height}")


def normalize_boxes(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
  """Pixel boxes [N, 4] -> [0, 1], computed in float64 then stored f32."""
  check_size(width, height)
  scale = np.array([width, height, width, height], np.float64)
  return (boxes.astype(np.float64) / scale).astype(np.float32)


def check_boxes(boxes: np.ndarray) -> np.ndarray:
  """Normalized boxes, clipped to [0, 1] within BOX_TOLERANCE; RowError else."""
  if boxes.size:
    low, high = float(boxes.min()), float(boxes.max())
    if low < -BOX_TOLERANCE or high > 1.0 + BOX_TOLERANCE:
      raise rows_lib.RowError(
          "bad_box", f"normalized coordinates span [{low:.4g}, {high:.4g}], "
          f"beyond the image (width and height swapped?)")
    if np.any(boxes[:, 2] < boxes[:, 0]) or np.any(boxes[:, 3] < boxes[:, 1]):
      raise rows_lib.RowError("bad_box", "a box with x2 < x1 or y2 < y1")
  return np.clip(boxes, 0.0, 1.0).astype(np.float32)


def to_storage(values: np.ndarray, feature_dtype: str, what: str) -> np.ndarray:
  dtype = records_lib.check_feature_dtype(feature_dtype)
  if dtype == np.float16 and values.size:
    magnitude = float(np.abs(values).max())
    if magnitude > _FLOAT16_MAX:
      raise rows_lib.RowError(
          "float16_overflow", f"{what} has a value of magnitude "
          f"{magnitude:.6g} (> {_FLOAT16_MAX:g}); import with --feature_dtype=float32")
  return values.astype(dtype)


def _finite(name: str, array: Optional[np.ndarray]) -> None:
  if array is not None and not np.isfinite(array).all():
    raise rows_lib.RowError("non_finite", f"NaN or Inf in {name}")


def select_regions(num_regions: int, confidence: Optional[np.ndarray],
                   max_regions: int) -> np.ndarray:
  """Indices of the regions kept, ascending."""
  if num_regions <= max_regions:
    return np.arange(num_regions)
  if confidence is None:
    return np.arange(max_regions)
  best = np.argsort(-confidence, kind="stable")[:max_regions]
  return np.sort(best)


def feature_row(image_id: str, location: rows_lib.Location,
                features: np.ndarray, boxes: Optional[np.ndarray],
                options: RegionOptions, *, width: int = 0, height: int = 0,
                confidence: Optional[np.ndarray] = None,
                global_feature: Optional[np.ndarray] = None
                ) -> rows_lib.FeatureRow:
  """Builds a FeatureRow from decoded float arrays.

  features: f32 [N, D + geometry_dims]; boxes: f32 [N, 4] or None (then
  from the geometry); confidence: [N] or None; global_feature: [D] or None.
  width / height: pixels, 0 when the input does not say.
  """
  d, g = options.feature_dim, options.geometry_dims
  n = features.shape[0]
  if features.ndim != 2 or features.shape[1] != d + g:
    raise rows_lib.RowError(
        "wrong_length", f"features have shape {features.shape}, expected "
        f"[N, {d + g}] (feature_dim {d} + geometry {g})")
  if global_feature is not None and global_feature.shape != (d,):
    raise rows_lib.RowError(
        "wrong_length", f"global feature has shape {global_feature.shape}, "
        f"expected ({d},)")
  if confidence is not None and confidence.shape != (n,):
    raise rows_lib.RowError(
        "wrong_length", f"confidences of shape {confidence.shape} for {n} regions")
  for name, array in (("features", features), ("boxes", boxes),
                      ("confidences", confidence),
                      ("global feature", global_feature)):
    _finite(name, array)
  normalized = options.boxes_normalized
  if g:
    if boxes is None:
      boxes, normalized = features[:, d:d + 4], True
    features = features[:, :d]
  if boxes is None:
    raise rows_lib.RowError("missing_field", "no boxes")
  if boxes.shape != (n, 4):
    raise rows_lib.RowError(
        "wrong_length", f"boxes have shape {boxes.shape}, expected ({n}, 4)")
  if global_feature is None:
    if n == 0:
      raise rows_lib.RowError("no_regions", "no regions and no global feature")
    global_feature = features.mean(axis=0, dtype=np.float64)
  keep = select_regions(n, confidence, options.max_regions)
  features, boxes = features[keep], boxes[keep]
  if width or height:
    check_size(width, height)
  if not normalized and width:
    boxes, normalized = normalize_boxes(boxes, width, height), True
  if normalized:
    boxes = check_boxes(boxes)
  return rows_lib.FeatureRow(
      image_id=image_id, location=location,
      global_feature=to_storage(np.asarray(global_feature, np.float32),
                                options.feature_dtype, "global feature"),
      region_features=to_storage(features.astype(np.float32, copy=False),
                                 options.feature_dtype, "region features"),
      region_boxes=np.asarray(boxes, np.float32), normalized=normalized,
      width=width, height=height)
