"""Region features in the bottom-up-attention TSV convention, and VinVL's.

One image a line, tab-separated, no header; arrays are base64 of raw
little-endian values. The columns are named by a layout or by
`--tsv_fields` (comma-separated, in order):

  bottomup  image_id, image_w, image_h, num_boxes, boxes, features
            (Anderson et al.'s generate_tsv.py; boxes f32 [N, 4] in pixels,
            features f32 [N, D])
  lxmert    img_id, img_h, img_w, objects_id, objects_conf, attrs_id,
            attrs_conf, num_boxes, boxes, features
            (rows with object / attribute ids and confidences: ids int64 [N],
            confidences f32 [N]; note height before width)
  vinvl     image_id, vinvl_json
            (VinVL / Oscar features.tsv: {"num_boxes": N, "features": base64
            f32 [N, D + 6]}; the last 6 values of a region are its normalized
            geometry, which gives the boxes)

Column names understood: image_id (img_id), image_w (img_w), image_h
(img_h), num_boxes, boxes, features, objects_conf (ranks regions when there
are more than 16), global_feature (f32 [D], else the mean of the regions)
and vinvl_json (whose object may also hold image_w, image_h, boxes,
objects_conf, global_feature). Other names (objects_id, attrs_id,
attrs_conf, cls_prob, ...) are columns that are carried but not decoded.
"""
import base64
import binascii
import dataclasses
import json
from typing import Optional

import numpy as np

from cc12m_jax.data.importers import regions as regions_lib
from cc12m_jax.data.importers import rows as rows_lib

LAYOUTS = {
    "bottomup": ("image_id", "image_w", "image_h", "num_boxes", "boxes",
                 "features"),
    "lxmert": ("img_id", "img_h", "img_w", "objects_id", "objects_conf",
               "attrs_id", "attrs_conf", "num_boxes", "boxes", "features"),
    "vinvl": ("image_id", "vinvl_json"),
}
_ALIASES = {"img_id": "image_id", "img_w": "image_w", "img_h": "image_h"}


@dataclasses.dataclass(frozen=True)
class TsvOptions:
  fields: tuple[str, ...]
  regions: regions_lib.RegionOptions


def tsv_options(layout: str, fields: str, regions: regions_lib.RegionOptions
                ) -> TsvOptions:
  """Options from a layout name or an explicit field list (which wins)."""
  if fields:
    names = tuple(f.strip() for f in fields.split(","))
  elif layout in LAYOUTS:
    names = LAYOUTS[layout]
  else:
    raise ValueError(f"unknown TSV layout {layout!r}; choose one of "
                     f"{sorted(LAYOUTS)} or give --tsv_fields")
  names = tuple(_ALIASES.get(n, n) for n in names)
  if "image_id" not in names:
    raise ValueError(f"TSV fields {names} have no image_id (or img_id)")
  if "vinvl_json" not in names and not {"num_boxes", "features"} <= set(names):
    raise ValueError(f"TSV fields {names} need num_boxes and features "
                     f"(or vinvl_json)")
  if layout == "vinvl" and not fields and not regions.geometry_dims:
    regions = dataclasses.replace(regions,
                                  geometry_dims=regions_lib.GEOMETRY_DIMS)
  return TsvOptions(names, regions)


def b64decode(value, what: str) -> bytes:
  if isinstance(value, str):
    value = value.encode("ascii", "replace")
  try:
    try:
      return binascii.a2b_base64(value, strict_mode=True)
    except TypeError:  # Python < 3.11: no strict mode
      return base64.b64decode(value, validate=True)
  except (binascii.Error, ValueError) as err:
    raise rows_lib.RowError("bad_base64", f"{what}: {err}") from None


def _array(value, what: str, dtype: str, count: int) -> np.ndarray:
  raw = b64decode(value, what)
  size = np.dtype(dtype).itemsize
  if len(raw) != count * size:
    raise rows_lib.RowError(
        "wrong_length", f"{what}: {len(raw)} bytes, expected {count} values "
        f"of {size} bytes ({count * size})")
  return np.frombuffer(raw, dtype=dtype)


def _int(value, what: str) -> int:
  try:
    number = int(value)
  except (TypeError, ValueError):
    try:
      as_float = float(value)
    except (TypeError, ValueError):
      as_float = float("nan")
    if not as_float.is_integer():
      raise rows_lib.RowError("bad_number", f"{what}={value!r}") from None
    number = int(as_float)
  if number < 0:
    raise rows_lib.RowError("bad_number", f"{what}={number} < 0")
  return number


def _features(value, n: int, options: regions_lib.RegionOptions
              ) -> np.ndarray:
  width = options.feature_dim + options.geometry_dims
  raw = b64decode(value, "features")
  if len(raw) != 4 * n * width:
    per_region = len(raw) / (4 * n) if n else float("nan")
    raise rows_lib.RowError(
        "wrong_length", f"features: {len(raw)} bytes for {n} regions "
        f"({per_region:g} values each), expected {width} values a region "
        f"(feature_dim {options.feature_dim} + geometry "
        f"{options.geometry_dims})")
  return np.frombuffer(raw, dtype="<f4").reshape(n, width)


def parse_line(options: TsvOptions, location: rows_lib.Location,
               line: bytes) -> rows_lib.FeatureRow:
  columns = line.split(b"\t")
  if len(columns) != len(options.fields):
    raise rows_lib.RowError(
        "wrong_columns", f"{len(columns)} columns, expected "
        f"{len(options.fields)} ({','.join(options.fields)})")
  values = dict(zip(options.fields, columns))
  image_id = rows_lib.decode_utf8(values["image_id"], "image_id").strip()
  if not image_id:
    raise rows_lib.RowError("missing_id", "empty image_id")
  try:
    return _parse_values(image_id, location, values, options.regions)
  except rows_lib.RowError as err:
    err.image_id = image_id  # the reader names the image in the bad row
    raise


def _parse_values(image_id: str, location: rows_lib.Location, values: dict,
                  options: regions_lib.RegionOptions) -> rows_lib.FeatureRow:
  if "vinvl_json" in values:
    try:
      extra = json.loads(values.pop("vinvl_json"))
    except ValueError as err:
      raise rows_lib.RowError("bad_json", f"vinvl_json: {err}") from None
    if not isinstance(extra, dict):
      raise rows_lib.RowError("bad_json", "vinvl_json is not an object")
    for key in ("num_boxes", "features", "image_w", "image_h", "boxes",
                "objects_conf", "global_feature"):
      if key in extra and key not in values:
        values[key] = extra[key]
  for key in ("num_boxes", "features"):
    if key not in values:
      raise rows_lib.RowError("missing_field", f"no {key}")
  n = _int(values["num_boxes"], "num_boxes")
  width = _int(values["image_w"], "image_w") if "image_w" in values else 0
  height = _int(values["image_h"], "image_h") if "image_h" in values else 0
  features = _features(values["features"], n, options)
  boxes = (_array(values["boxes"], "boxes", "<f4", 4 * n).reshape(n, 4)
           if "boxes" in values else None)
  confidence: Optional[np.ndarray] = (
      _array(values["objects_conf"], "objects_conf", "<f4", n)
      if "objects_conf" in values else None)
  global_feature = (
      _array(values["global_feature"], "global_feature", "<f4",
             options.feature_dim) if "global_feature" in values else None)
  return regions_lib.feature_row(
      image_id, location, features, boxes, options, width=width,
      height=height, confidence=confidence, global_feature=global_feature)
