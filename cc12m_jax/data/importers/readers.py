"""Beam transforms that read an input format into rows and bad rows.

  ReadLines  line formats (TSV, JSON Lines): files are cut into byte ranges
             (textfiles.py) that workers parse in parallel;
  ReadFiles  whole-file formats (COCO / Karpathy JSON, .npz, Parquet): one
             file per element.
Both return a PCollection dict {"rows": ..., "bad": BadRow, "size": ints}
("size" adds up to the number of rows, counted without parsing: lines, or
files). In strict mode the first bad row raises BadRowError naming the file
and line instead.
`ResolveLines` gives bad rows of line inputs their line numbers, one scan
per file that has any.
"""
from typing import Callable, Iterable, Iterator, Optional, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.importers import textfiles

BAD = "bad"
NAMESPACE = "importers"

LineParser = Callable[[rows_lib.Location, bytes], Optional[object]]
FileParser = Callable[[str, bytes], Iterable[object]]


def check_patterns(patterns: Sequence[str], what: str) -> None:
  """Fails before the job starts for a pattern that matches nothing."""
  for pattern in patterns:
    found = FileSystems.match([pattern], limits=[1])[0].metadata_list
    if not found:
      raise FileNotFoundError(f"{what}: no file matches {pattern!r}")


def resolve_line(location: rows_lib.Location) -> rows_lib.Location:
  """The location with its line number (a scan of the file's prefix)."""
  if not location.is_line or location.line:
    return location
  base = textfiles.newlines_before(location.path, [location.start])
  return location.with_line(base[location.start])


def raise_bad(bad: rows_lib.BadRow) -> None:
  first = resolve_line(bad.first) if bad.first else None
  resolved = rows_lib.BadRow(bad.reason, resolve_line(bad.location),
                             bad.detail, bad.image_id, first)
  raise rows_lib.BadRowError(resolved.message())


class _ParseFn(beam.DoFn):
  """Counts rows per input kind (Beam counters: progress in any runner's UI)."""

  def __init__(self, kind: str, strict: bool):
    super().__init__()
    self.kind = kind
    self.strict = strict
    self._rows = Metrics.counter(NAMESPACE, f"rows/{kind}")
    self._bad = Metrics.counter(NAMESPACE, f"bad_rows/{kind}")

  def _bad_row(self, bad: rows_lib.BadRow) -> beam.pvalue.TaggedOutput:
    if self.strict:
      raise_bad(bad)
    self._bad.inc()
    return beam.pvalue.TaggedOutput(BAD, bad)

  def _emit(self, row) -> Iterator:
    if isinstance(row, rows_lib.BadRow):
      yield self._bad_row(row)
    elif row is not None:
      self._rows.inc()
      yield row


class _ParseRangeFn(_ParseFn):

  def __init__(self, kind: str, parse: LineParser, strict: bool):
    super().__init__(kind, strict)
    self.parse = parse

  def process(self, byte_range: tuple[str, int, int]) -> Iterator:
    path, start, end = byte_range
    for offset, line in textfiles.read_range(path, start, end):
      location = rows_lib.Location(path, offset, is_line=True)
      try:
        row = self.parse(location, line)
      except rows_lib.RowError as err:
        row = rows_lib.BadRow(err.reason, location, err.detail, err.image_id)
      yield from self._emit(row)


class _ParseFileFn(_ParseFn):

  def __init__(self, kind: str, parse: FileParser, strict: bool):
    super().__init__(kind, strict)
    self.parse = parse

  def process(self, path: str) -> Iterator:
    with FileSystems.open(path, compression_type=CompressionTypes.AUTO) as f:
      data = f.read()
    try:
      parsed = list(self.parse(path, data))
    except rows_lib.RowError as err:
      parsed = [rows_lib.BadRow(err.reason, rows_lib.Location(path), err.detail,
                                err.image_id)]
    for row in parsed:
      yield from self._emit(row)


def _match(pbegin, label: str, patterns: Sequence[str]):
  return (pbegin
          | f"{label}Patterns" >> beam.Create(list(patterns))
          | f"{label}Match" >> fileio.MatchAll(
              fileio.EmptyMatchTreatment.DISALLOW))


class ReadLines(beam.PTransform):
  """Line-format files -> {"rows", "bad"} through parse(location, line)."""

  def __init__(self, kind: str, patterns: Sequence[str], parse: LineParser,
               strict: bool, split_bytes: int = textfiles.DEFAULT_SPLIT_BYTES):
    super().__init__()
    self.kind, self.patterns, self.parse = kind, list(patterns), parse
    self.strict, self.split_bytes = strict, split_bytes

  def expand(self, pbegin):
    label, split = self.kind.capitalize(), self.split_bytes
    ranges = (
        _match(pbegin, label, self.patterns)
        | f"{label}Ranges" >> beam.FlatMap(
            lambda m: textfiles.byte_ranges(m.path, m.size_in_bytes, split))
        # Ranges of one big file must reach different workers.
        | f"{label}SpreadRanges" >> beam.Reshuffle())
    parsed = ranges | f"{label}Parse" >> beam.ParDo(_ParseRangeFn(
        self.kind, self.parse, self.strict)).with_outputs(BAD, main="rows")
    size = ranges | f"{label}CountLines" >> beam.MapTuple(textfiles.count_lines)
    return {"rows": parsed.rows, "bad": parsed[BAD], "size": size}


class ReadFiles(beam.PTransform):
  """Whole files -> {"rows", "bad"} through parse(path, data)."""

  def __init__(self, kind: str, patterns: Sequence[str], parse: FileParser,
               strict: bool):
    super().__init__()
    self.kind, self.patterns, self.parse = kind, list(patterns), parse
    self.strict = strict

  def expand(self, pbegin):
    label = self.kind.capitalize()
    paths = (_match(pbegin, label, self.patterns)
             | f"{label}Paths" >> beam.Map(lambda m: m.path)
             | f"{label}SpreadFiles" >> beam.Reshuffle())
    parsed = paths | f"{label}Parse" >> beam.ParDo(_ParseFileFn(
        self.kind, self.parse, self.strict)).with_outputs(BAD, main="rows")
    size = paths | f"{label}CountFiles" >> beam.Map(lambda _: 1)
    return {"rows": parsed.rows, "bad": parsed[BAD], "size": size}


def _resolve_file(item: tuple[str, Iterable[rows_lib.BadRow]]
                  ) -> Iterator[rows_lib.BadRow]:
  path, bads = item
  bads = list(bads)
  starts = [b.location.start for b in bads if b.location.is_line]
  starts += [b.first.start for b in bads if b.first and b.first.is_line]
  base = textfiles.newlines_before(path, starts) if starts else {}

  def fix(location):
    if location is None or not location.is_line or location.path != path:
      return location
    return location.with_line(base[location.start])

  for bad in bads:
    first = bad.first
    if first is not None and first.is_line and first.path != path:
      first = resolve_line(first)  # a duplicate in another file: rare
    yield rows_lib.BadRow(bad.reason, fix(bad.location), bad.detail,
                          bad.image_id, fix(first))


class ResolveLines(beam.PTransform):
  """Bad rows -> the same with line numbers: one scan per file with any."""

  def expand(self, bad):
    return (bad
            | "ByFile" >> beam.Map(lambda b: (b.location.path, b))
            | "GroupByFile" >> beam.GroupByKey()
            | "Resolve" >> beam.FlatMap(_resolve_file))
