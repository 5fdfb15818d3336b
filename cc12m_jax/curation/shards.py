"""Reading raw candidate shards and writing curated outputs (JSON Lines / Parquet)."""
import json
import os
from typing import Any

import apache_beam as beam
from apache_beam.coders import coders
import pyarrow as pa

from cc12m_jax.curation.config import split_list

KEPT_PREFIX = "kept"
REJECTS_PREFIX = "rejects"
COUNTS_FILE = "counts.json"

KEPT_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("image_url", pa.string()),
    ("image_sha256", pa.string()),
    ("width", pa.int64()),
    ("height", pa.int64()),
    ("caption", pa.string()),
    ("alt_text", pa.string()),
    ("tags", pa.list_(pa.struct([("name", pa.string()), ("score", pa.float64())]))),
    ("person_substituted", pa.bool_()),
])


def _format_of(pattern: str, input_format: str) -> str:
  if input_format != "auto":
    return input_format
  if pattern.endswith((".parquet", ".parquet*")) or ".parquet" in os.path.basename(pattern):
    return "parquet"
  if pattern.endswith((".jsonl", ".json")) or ".jsonl" in os.path.basename(pattern):
    return "jsonl"
  raise ValueError(f"cannot tell the format of input {pattern!r} from its name; "
                   "set --config.input_format=jsonl|parquet")


class ReadRecords(beam.PTransform):
  """Comma-separated globs -> raw records: dicts (Parquet rows) or bytes (JSONL lines).

  JSON Lines are read as bytes so that a line with invalid UTF-8 becomes a
  counted rejection, not a pipeline crash.
  """

  def __init__(self, patterns: str, input_format: str = "auto"):
    super().__init__()
    self.patterns = split_list(patterns)
    self.input_format = input_format
    if not self.patterns:
      raise ValueError("no input patterns given")

  def expand(self, pbegin):
    parts = []
    for i, pattern in enumerate(self.patterns):
      if _format_of(pattern, self.input_format) == "parquet":
        parts.append(pbegin | f"ReadParquet{i}" >> beam.io.ReadFromParquet(pattern))
      else:
        parts.append(pbegin | f"ReadJsonl{i}" >> beam.io.ReadFromText(
            pattern, coder=coders.BytesCoder(), strip_trailing_newlines=True))
    return parts | "FlattenInputs" >> beam.Flatten() if len(parts) > 1 else parts[0]


def as_dict(raw: Any) -> dict[str, Any]:
  """A kept record read back (exclusion input): JSON line or Parquet row."""
  if isinstance(raw, (bytes, str)):
    try:
      value = json.loads(raw)
    except ValueError as e:
      raise ValueError(f"exclusion input: bad JSON line {raw[:80]!r}") from e
    if not isinstance(value, dict):
      raise ValueError(f"exclusion input: not a JSON object: {raw[:80]!r}")
    return value
  return raw


class WriteKept(beam.PTransform):

  def __init__(self, output_dir: str, output_format: str, num_shards: int):
    super().__init__()
    self.prefix = os.path.join(output_dir, KEPT_PREFIX)
    self.output_format = output_format
    self.num_shards = num_shards

  def expand(self, kept):
    if self.output_format == "parquet":
      return kept | "WriteParquet" >> beam.io.WriteToParquet(
          self.prefix, KEPT_SCHEMA, file_name_suffix=".parquet", num_shards=self.num_shards)
    return (kept
            | "ToJson" >> beam.Map(lambda r: json.dumps(r, ensure_ascii=False, sort_keys=True))
            | "WriteJsonl" >> beam.io.WriteToText(
                self.prefix, file_name_suffix=".jsonl", num_shards=self.num_shards))
