"""Per-source metadata: `<data_dir>/<source>/metadata.json` beside the shards.

The feature dimension D is a property of the data (the detector that made
it), so models read it from here rather than from a config; so is the
storage dtype of the features (`feature_dtype`: float32 or float16; files
written before the field existed are float32).

Files are read and written through etils.epath (local paths and gs://), not
TensorFlow, so a run's dimensions resolve where only JAX is installed.
"""
import dataclasses
import json
import os

from etils import epath

from cc12m_jax.data import record_schema

METADATA_FILE = "metadata.json"
SHARD_PREFIX = "records.tfrecord"


@dataclasses.dataclass
class DatasetMetadata:
  source: str
  feature_dim: int
  num_records: int
  num_captions: int
  num_shards: int
  max_regions: int = record_schema.MAX_REGIONS
  max_tags: int = record_schema.MAX_TAGS
  format_version: int = 1
  description: str = ""
  feature_dtype: str = "float32"


def source_dir(data_dir: str, source: str) -> str:
  return os.path.join(data_dir, source)


def shard_prefix(data_dir: str, source: str) -> str:
  return os.path.join(source_dir(data_dir, source), SHARD_PREFIX)


def write_metadata(data_dir: str, metadata: DatasetMetadata) -> str:
  path = os.path.join(source_dir(data_dir, metadata.source), METADATA_FILE)
  file = epath.Path(path)
  file.parent.mkdir(parents=True, exist_ok=True)
  file.write_text(
      json.dumps(dataclasses.asdict(metadata), indent=2, sort_keys=True) + "\n")
  return path


def load_metadata(data_dir: str, source: str) -> DatasetMetadata:
  path = os.path.join(source_dir(data_dir, source), METADATA_FILE)
  file = epath.Path(path)
  if not file.exists():
    raise FileNotFoundError(
        f"no metadata for source {source!r}: {path} does not exist "
        f"(generate data with `python -m cc12m_jax.data.synthetic.generate`)")
  text = file.read_bytes()
  try:
    raw = json.loads(text)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ValueError(f"{path}: not valid JSON: {e}") from None
  if not isinstance(raw, dict):
    raise ValueError(f"{path}: must hold a JSON object, not {type(raw).__name__}")
  fields = {f.name: f for f in dataclasses.fields(DatasetMetadata)}
  unknown = sorted(set(raw) - set(fields))
  if unknown:
    raise ValueError(f"{path}: unknown metadata keys {unknown}")
  missing = sorted(name for name, f in fields.items() if name not in raw
                   and f.default is dataclasses.MISSING)
  if missing:
    raise ValueError(f"{path}: missing metadata keys {missing}")
  for name, value in raw.items():
    kind = fields[name].type
    _check_type(path, name, value, kind if isinstance(kind, str) else kind.__name__)
  metadata = DatasetMetadata(**raw)
  record_schema.check_feature_dtype(metadata.feature_dtype, f"{path}: feature_dtype")
  return metadata


# The smallest value of each integer field.
_MINIMUM = {"feature_dim": 1, "num_records": 0, "num_captions": 0, "num_shards": 0,
            "max_regions": 1, "max_tags": 1, "format_version": 1}


def _check_type(path: str, name: str, value: object, kind: str) -> None:
  """`value` of metadata key `name` has the field's type and range; else a
  ValueError naming the file and key (a string "16" would otherwise reach
  the parser as a repeated string, not as a number)."""
  if kind == "int":
    # bool is an int to Python, never to a metadata file.
    if not isinstance(value, int) or isinstance(value, bool):
      raise ValueError(f"{path}: {name} must be an integer, got {value!r} "
                       f"({type(value).__name__})")
    if value < _MINIMUM[name]:
      raise ValueError(f"{path}: {name} must be >= {_MINIMUM[name]}, got {value}")
  elif kind == "str" and not isinstance(value, str):
    raise ValueError(f"{path}: {name} must be a string, got {value!r} "
                     f"({type(value).__name__})")


def shard_files(data_dir: str, source: str) -> list[str]:
  """Sorted shard paths of a source; an error naming the source if none."""
  directory = source_dir(data_dir, source)
  pattern = SHARD_PREFIX + "-*-of-*"
  found = epath.Path(directory).glob(pattern) if epath.Path(directory).exists() else ()
  files = sorted(os.path.join(directory, f.name) for f in found)
  if not files:
    raise FileNotFoundError(f"source {source!r}: no shards match "
                            f"{os.path.join(directory, pattern)}")
  return files
