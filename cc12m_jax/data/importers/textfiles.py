"""Line-oriented inputs (TSV, JSON Lines) read in parallel byte ranges.

Feature TSVs are often one file of many GB, so a file is cut into byte
ranges that different workers read: a line belongs to the range holding its
first byte. A line is known by its byte offset; its number is only needed
to name a bad row, so it is computed then, by counting the newlines before
the offset (one pass over a file for all of its bad rows). Compressed files cannot be
cut and are one range.
"""
from typing import Iterable, Iterator

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

DEFAULT_SPLIT_BYTES = 64 << 20
_SCAN_CHUNK = 16 << 20


def _compressed(path: str) -> bool:
  return CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED


def byte_ranges(path: str, size: int, split_bytes: int = DEFAULT_SPLIT_BYTES
                ) -> list[tuple[str, int, int]]:
  """(path, start, end) ranges covering the file; one for compressed files."""
  if _compressed(path) or size <= split_bytes:
    return [(path, 0, max(size, 1))]
  return [(path, start, min(start + split_bytes, size))
          for start in range(0, size, split_bytes)]


def read_range(path: str, start: int, end: int) -> Iterator[tuple[int, bytes]]:
  """(byte offset where the line starts, line without its newline)."""
  if _compressed(path):
    f = FileSystems.open(path)  # compression detected from the name
    start, end = 0, float("inf")
  else:
    f = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  with f:
    position = start
    if start > 0:
      # The line holding byte start-1 began in an earlier range; skip it.
      f.seek(start - 1)
      position = start - 1 + len(f.readline())
    while position < end:
      line = f.readline()
      if not line:
        break
      yield position, line.rstrip(b"\r\n")
      position += len(line)


def count_lines(path: str, start: int, end: int) -> int:
  """Lines starting in [start, end) (read_range's lines), counted without
  splitting them: a line starts at 0 or after a newline."""
  if _compressed(path):
    return sum(1 for _ in read_range(path, start, end))
  count = 0
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    size = f.seek(0, 2)
    end = min(end, size)
    if start == 0 and size > 0:
      count, start = 1, 1
    f.seek(start - 1)
    remaining = end - start   # newlines at [start-1, end-1) begin a line in range
    while remaining > 0:
      chunk = f.read(min(_SCAN_CHUNK, remaining))
      if not chunk:
        break
      count += chunk.count(b"\n")
      remaining -= len(chunk)
  return count


def newlines_before(path: str, offsets: Iterable[int]) -> dict[int, int]:
  """{offset: newlines in the file's first `offset` bytes} for all offsets,
  in one pass over the file (for a line's start: its line number - 1)."""
  wanted = sorted(set(offsets))
  counts = {o: 0 for o in wanted if o <= 0}
  wanted = [o for o in wanted if o > 0]
  if not wanted:
    return counts
  count = position = 0
  with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
    for offset in wanted:
      while position < offset:
        chunk = f.read(min(_SCAN_CHUNK, offset - position))
        if not chunk:
          break
        count += chunk.count(b"\n")
        position += len(chunk)
      counts[offset] = count
  return counts
