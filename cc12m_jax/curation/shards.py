"""Reading raw candidate shards and writing curated outputs (JSON Lines / Parquet)."""
import bz2
import contextlib
import gzip
import json
import logging
import lzma
import math
import os
from typing import Any, Iterator, Optional

import apache_beam as beam
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
import pyarrow as pa
import pyarrow.parquet as pq

from cc12m_jax.curation import candidates
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


_COMPRESSED = (".gz", ".bz2", ".xz", ".lzma", ".zst", ".zstd", ".deflate")
_EXTENSIONS = {".jsonl": "jsonl", ".json": "jsonl", ".tsv": "tsv", ".parquet": "parquet"}


def format_of(path: str, input_format: str = "auto") -> str:
  """jsonl | tsv | parquet: the configured format, else by extension (after any .gz etc.)."""
  if input_format != "auto":
    return input_format
  name = os.path.basename(path).lower()
  for suffix in _COMPRESSED:
    if name.endswith(suffix):
      name = name[:-len(suffix)]
      break
  for ext, fmt in _EXTENSIONS.items():
    if ext in name:  # also kept-00000-of-00004.jsonl-style and name.jsonl-00000 shards
      return fmt
  raise ValueError(f"cannot tell the format of input {path!r} from its name; "
                   "set --config.input_format=jsonl|tsv|parquet")


def _match(patterns: tuple[str, ...], input_format: str) -> list[tuple[str, str]]:
  """[(path, format)] of every file the globs match; an empty glob is an error."""
  files = set()
  for pattern in patterns:
    try:
      matched = FileSystems.match([pattern])[0].metadata_list
    except BeamIOError:
      matched = []
    if not matched:
      raise FileNotFoundError(f"no input files match {pattern!r}")
    files.update((m.path, format_of(m.path, input_format)) for m in matched)
  return sorted(files)


@contextlib.contextmanager
def _open_text(path: str) -> Iterator[Any]:
  """A binary file object of the decompressed text.

  gzip, bzip2 and xz go through Python's own modules, which raise on a
  truncated or corrupt stream (Beam's reader stops silently at the damage);
  other codecs (.zst, .deflate) through Beam's.
  """
  lower = path.lower()
  for suffix, module in ((".gz", gzip), (".bz2", bz2), (".xz", lzma), (".lzma", lzma)):
    if lower.endswith(suffix):
      with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
        with module.open(raw, "rb") as f:
          yield f
      return
  with FileSystems.open(path, compression_type=CompressionTypes.AUTO) as f:
    yield f


class ReadFileFn(beam.DoFn):
  """(path, format) -> ((path, n), kind, payload) for every line / row of the file.

  n is the 1-based line number (JSONL, TSV) or row number (Parquet). A file
  that stops being readable part-way (a corrupt or truncated archive, a
  damaged Parquet page) gives one element of kind 'error' at the point where
  reading stopped, which the parser rejects as input/unreadable; lines before
  it are kept. A file that cannot be opened at all raises (a missing or
  unreadable path is a setup error, retried by the runner, then fatal).
  """

  def process(self, element: tuple[str, str]) -> Iterator[tuple[tuple[str, int], str, Any]]:
    path, fmt = element
    with contextlib.ExitStack() as stack:
      if fmt == "parquet":  # opening raises: a setup error, not bad data
        rows = self._parquet_rows(stack.enter_context(
            FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)))
      else:
        rows = self._lines(stack.enter_context(_open_text(path)))
      n = 0
      while True:
        try:  # only the reading is guarded: downstream errors are not ours
          payload = next(rows)
        except StopIteration:
          return
        except Exception as err:  # pylint: disable=broad-except
          logging.warning("curation input %s: reading stopped after %s %d: %s", path,
                          "row" if fmt == "parquet" else "line", n, err)
          yield ((path, n + 1), candidates.KIND_ERROR,
                 f"reading {path} stopped here: {type(err).__name__}: {err}")
          return
        n += 1
        yield ((path, n), fmt, payload)

  @staticmethod
  def _lines(f: Any) -> Iterator[bytes]:
    while True:
      line = f.readline()
      if not line:
        return
      if line.endswith(b"\n"):
        line = line[:-1]
      if line.endswith(b"\r"):
        line = line[:-1]
      yield line

  @staticmethod
  def _parquet_rows(f: Any) -> Iterator[dict[str, Any]]:
    parquet = pq.ParquetFile(f)  # a file that is not Parquet fails here: bad data
    columns = [c for c in parquet.schema_arrow.names if c in candidates.KNOWN_FIELDS]
    for batch in parquet.iter_batches(batch_size=256, columns=columns):
      yield from batch.to_pylist()


class ReadRecords(beam.PTransform):
  """Comma-separated globs -> ((path, n), kind, payload) elements, one per line / row.

  kind is 'jsonl' (payload: the line's bytes), 'tsv' (the line's bytes),
  'parquet' (the row as a dict of the columns the parser knows) or 'error'.
  Lines are read as bytes so that invalid UTF-8 becomes a counted rejection,
  not a pipeline crash. Each file is read whole by one worker (that is what
  gives exact line numbers); the files are spread over workers first, and
  curation's group-by-id spreads the records of a big file again.
  """

  def __init__(self, patterns: str, input_format: str = "auto"):
    super().__init__()
    self.patterns = split_list(patterns)
    self.input_format = input_format
    if not self.patterns:
      raise ValueError("no input patterns given")

  def expand(self, pbegin):
    files = _match(self.patterns, self.input_format)
    return (pbegin
            | "InputFiles" >> beam.Create(files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles" >> beam.ParDo(ReadFileFn()))


def format_source(source: Optional[tuple[str, int]]) -> str:
  """'path:n' of a record's (path, line or row number)."""
  if isinstance(source, (tuple, list)) and len(source) == 2:
    return f"{source[0]}:{source[1]}"
  return "" if source is None else repr(source)[:200]


def exclusion_record(element: tuple[tuple[str, int], str, Any]) -> Optional[dict[str, Any]]:
  """A record of another dataset (exclusion input), or None for a blank or TSV header line.

  Fatal on anything unreadable, naming the file and line: a dropped
  exclusion line would let the other dataset's images back in.
  """
  source, kind, payload = element
  where = format_source(source)
  if kind == candidates.KIND_ERROR:
    raise ValueError(f"exclusion input {where}: {payload}")
  if kind == candidates.KIND_TSV:
    row = candidates.parse_tsv_line(payload)
    if isinstance(row, candidates.Rejection):
      if row.reason in ("input/tsv_header", "input/empty_line"):
        return None
      raise ValueError(f"exclusion input {where}: {row.reason} {row.detail}")
    return row
  if kind == candidates.KIND_JSONL:
    if not payload.strip():
      return None
    try:
      value = json.loads(payload)
    except (ValueError, RecursionError) as e:
      raise ValueError(f"exclusion input {where}: bad JSON line {payload[:80]!r}") from e
    if not isinstance(value, dict):
      raise ValueError(f"exclusion input {where}: not a JSON object: {payload[:80]!r}")
    return value
  return payload


def check_writable(record: dict[str, Any]) -> None:
  """Raises ValueError unless `record` fits KEPT_SCHEMA and encodes as UTF-8.

  The last line of defence before the writers, whose errors (e.g. an int
  beyond int64 in Parquet) would otherwise fail the whole job.
  """
  for field in ("id", "image_url", "image_sha256", "caption", "alt_text"):
    value = record[field]
    if not isinstance(value, str):
      raise ValueError(f"kept field {field} is {type(value).__name__}, not a string")
    value.encode("utf-8")  # UnicodeEncodeError (a ValueError) on lone surrogates
  for field in ("width", "height"):
    value = record[field]
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or not 1 <= value <= candidates.MAX_SIDE):
      raise ValueError(f"kept field {field}={value!r:.40} is not a positive int32")
  for tag in record["tags"]:
    if not isinstance(tag["name"], str) or not math.isfinite(tag["score"]):
      raise ValueError(f"kept tag {tag!r:.80} is not a (name, finite score)")
    tag["name"].encode("utf-8")
  if not isinstance(record["person_substituted"], bool):
    raise ValueError("kept field person_substituted is not a bool")


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
