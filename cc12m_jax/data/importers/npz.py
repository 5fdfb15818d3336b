"""Region features as a directory of per-image .npz files.

One file an image (`np.savez`), read without pickle (files from elsewhere
must not run code). Key names are configurable (`--npz_keys`), because
extraction scripts differ; the defaults are those of the widely used
py-bottom-up-attention extractor:

  features        x          f32 [N, D] (or [N, D + 6] with geometry)
  boxes           bbox       f32 [N, 4], pixels unless --boxes_normalized
  image_w         image_w    scalar (optional: else the captions' size)
  image_h         image_h    scalar
  confidence      objects_conf   [N] (optional; ranks regions beyond 16)
  global_feature  global_feature [D] (optional; else the regions' mean)
  image_id        (none)     optional key; default: the file name stem

`--npz_keys=features=feats,boxes=bboxes` overrides some names. (Pickled
`info` dicts of some extractors are not read; save what is needed as arrays.)
"""
import dataclasses
import io
import zipfile

import numpy as np

from cc12m_jax.data.importers import image_ids
from cc12m_jax.data.importers import regions as regions_lib
from cc12m_jax.data.importers import rows as rows_lib

DEFAULT_KEYS = {
    "features": "x", "boxes": "bbox", "image_w": "image_w",
    "image_h": "image_h", "confidence": "objects_conf",
    "global_feature": "global_feature", "image_id": "",
}


@dataclasses.dataclass(frozen=True)
class NpzOptions:
  keys: tuple[tuple[str, str], ...]   # (role, key in the file)
  regions: regions_lib.RegionOptions

  def key(self, role: str) -> str:
    return dict(self.keys)[role]


def npz_options(overrides: str, regions: regions_lib.RegionOptions
                ) -> NpzOptions:
  """`overrides`: 'role=key,...' on top of DEFAULT_KEYS."""
  keys = dict(DEFAULT_KEYS)
  for item in filter(None, (s.strip() for s in overrides.split(","))):
    role, sep, key = item.partition("=")
    if not sep or role not in keys:
      raise ValueError(f"--npz_keys item {item!r}: expected role=key with "
                       f"role one of {sorted(keys)}")
    keys[role] = key
  return NpzOptions(tuple(sorted(keys.items())), regions)


def _scalar(arrays, key: str) -> int:
  value = np.asarray(arrays[key])
  if value.size != 1 or not np.isfinite(value).all():
    raise rows_lib.RowError("bad_number", f"{key}={value!r}")
  number = float(value.reshape(()))
  if not number.is_integer() or number < 0:
    raise rows_lib.RowError("bad_number", f"{key}={number}")
  return int(number)


def _optional(arrays, key: str):
  if key and key in arrays.files:
    return np.asarray(arrays[key], np.float32)
  return None


def parse_file(options: NpzOptions, location: rows_lib.Location,
               data: bytes) -> rows_lib.FeatureRow:
  try:
    arrays = np.load(io.BytesIO(data), allow_pickle=False)
  except (ValueError, OSError, zipfile.BadZipFile, EOFError) as err:
    raise rows_lib.RowError("bad_file", str(err)) from None
  with arrays:
    id_key = options.key("image_id")
    if id_key:
      if id_key not in arrays.files:
        raise rows_lib.RowError("missing_id", f"no key {id_key!r}")
      image_id = str(np.asarray(arrays[id_key]).reshape(())).strip()
    else:
      image_id = image_ids.file_stem(location.path)
    if not image_id:
      raise rows_lib.RowError("missing_id", "empty image id")
    try:
      features_key = options.key("features")
      if features_key not in arrays.files:
        raise rows_lib.RowError(
            "missing_field", f"no key {features_key!r} (has {arrays.files})")
      try:
        features = np.asarray(arrays[features_key], np.float32)
      except (ValueError, TypeError) as err:
        raise rows_lib.RowError("bad_file", f"{features_key}: {err}") from None
      if features.ndim != 2:
        raise rows_lib.RowError(
            "wrong_length", f"{features_key} has shape {features.shape}")
      boxes = _optional(arrays, options.key("boxes"))
      if boxes is not None and boxes.size == 4 * features.shape[0]:
        boxes = boxes.reshape(-1, 4)
      size_keys = (options.key("image_w"), options.key("image_h"))
      width = height = 0
      if all(k and k in arrays.files for k in size_keys):
        width, height = (_scalar(arrays, k) for k in size_keys)
      return regions_lib.feature_row(
          image_id, location, features, boxes, options.regions,
          width=width, height=height,
          confidence=_optional(arrays, options.key("confidence")),
          global_feature=_optional(arrays, options.key("global_feature")))
    except rows_lib.RowError as err:
      err.image_id = image_id
      raise
