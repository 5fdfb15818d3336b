"""Rows of the public formats, and bad rows: what a reader yields.

A reader turns one input line (or one JSON entry, one .npz file) into a row,
or into a `BadRow` naming the file, the line (or entry) and a reason from
REASONS. Bad rows are counted by reason and listed in `bad_rows-*.jsonl`;
in strict mode the first one stops the import with `BadRowError`, whose
message starts "bad row: <file>:<line>: <reason>: ...".
"""
import dataclasses
from typing import Optional, Sequence

import numpy as np

# Why a row is bad. Readers raise RowError(reason, detail); the join adds
# duplicate_id and missing_size.
REASONS = {
    "bad_utf8": "bytes that are not UTF-8",
    "bad_json": "a line / file that is not the expected JSON",
    "wrong_columns": "a TSV line with the wrong number of columns",
    "missing_id": "no image id (or an empty one)",
    "missing_field": "a required field or key is absent",
    "bad_number": "a size or count that is not a non-negative integer",
    "bad_base64": "base64 that does not decode (e.g. truncated)",
    "wrong_length": "an array whose length disagrees with num_boxes / D",
    "non_finite": "NaN or Inf in a feature, box, confidence or score",
    "bad_box": "a box outside the image (beyond 1% of its size) or x2 < x1",
    "bad_size": "an image width or height <= 0",
    "float16_overflow": "a feature beyond float16's range (import as float32)",
    "no_regions": "zero regions and no global feature",
    "bad_file": "a file unreadable in its format (.npz, Parquet)",
    "bad_tags": "tags that are not [{name, score}] with finite scores",
    "empty_caption": "a caption that is empty after stripping whitespace",
    "bad_domain": "a nocaps domain other than in-, near- or out-domain",
    "no_url": "a CC TSV line with no http(s) URL column",
    "unknown_image": "an annotation naming an image absent from 'images'",
    "duplicate_id": "a second row of the same kind for an image id",
    "missing_size": "pixel boxes with no image size from any input",
}


class BadRowError(ValueError):
  """A bad row in strict mode; the message names the file and line."""


class RowError(ValueError):
  """Raised by a parser for one row; the reader adds the location."""

  def __init__(self, reason: str, detail: str = ""):
    if reason not in REASONS:
      raise KeyError(f"unknown bad-row reason {reason!r}")
    super().__init__(f"{reason}: {detail}")
    self.reason = reason
    self.detail = detail
    self.image_id = ""   # set by a parser once the row's id is known


@dataclasses.dataclass(frozen=True, order=True)
class Location:
  """Where a row came from: a line of a text file, a JSON entry, or a file.

  A line is named by the byte offset where it starts until its 1-based
  `line` number is resolved (textfiles.py: a line number costs a scan of the
  file's prefix, paid only for bad rows). Ordered by (file, offset, entry
  index) = file order, so the join's "first row wins" is the same on every
  runner.
  """
  path: str
  start: int = 0         # byte offset of the line
  index: int = 0         # entry index in a whole-file input
  entry: str = ""        # JSON entry, e.g. "annotations[12]"
  is_line: bool = False
  line: int = 0          # 1-based, once resolved

  def with_line(self, newlines_before_start: int) -> "Location":
    return dataclasses.replace(self, line=newlines_before_start + 1)

  def __str__(self) -> str:
    if self.line:
      return f"{self.path}:{self.line}"
    if self.is_line:
      return f"{self.path}: the line at byte {self.start}"
    if self.entry:
      return f"{self.path}: {self.entry}"
    return self.path


@dataclasses.dataclass(frozen=True)
class BadRow:
  reason: str
  location: Location
  detail: str = ""
  image_id: str = ""
  first: Optional[Location] = None   # duplicate_id: the row that was kept

  def message(self) -> str:
    image = f" (image {self.image_id!r})" if self.image_id else ""
    first = f" (first at {self.first})" if self.first else ""
    return f"bad row: {self.location}: {self.reason}{image}: {self.detail}{first}"

  def to_json(self) -> dict:
    out = {"file": self.location.path, "line": self.location.line,
           "entry": self.location.entry, "reason": self.reason,
           "image_id": self.image_id, "detail": self.detail}
    if self.first:
      out["first"] = str(self.first)
    return out


@dataclasses.dataclass
class FeatureRow:
  """Region features of one image, regions already chosen (<= 16).

  Features are in the dataset's storage dtype (the shuffle carries half the
  bytes with float16); boxes are normalized unless `normalized` is False
  (pixel boxes without an image size: the join normalizes them with the
  size the captions give).
  """
  image_id: str
  location: Location
  global_feature: np.ndarray    # [D], storage dtype
  region_features: np.ndarray   # [N, D], storage dtype
  region_boxes: np.ndarray      # f32 [N, 4]
  normalized: bool
  width: int = 0                # 0: unknown
  height: int = 0


@dataclasses.dataclass
class TagRow:
  image_id: str
  location: Location
  tags: Sequence[str]
  scores: Sequence[float]


@dataclasses.dataclass
class CaptionRow:
  """Captions of one image from one row.

  `entry`: the row *is* the image's entry in its format (a CC TSV line, a
  COCO 'images' item, a curated pair), so a second one for the same id is a
  duplicate; Localized Narratives lines are not entries (several narratives
  of one image are several captions).
  """
  image_id: str
  location: Location
  captions: Sequence[str]
  entry: bool = True
  width: int = 0
  height: int = 0
  domain: str = ""
  tags: Optional[Sequence[tuple[str, float]]] = None
  # The record's id when it differs from the join key `image_id` (COCO
  # Karpathy: features are keyed by cocoid, references by file stem).
  record_id: str = ""


def decode_utf8(raw: bytes, what: str = "line") -> str:
  try:
    return raw.decode("utf-8")
  except UnicodeDecodeError as err:
    raise RowError("bad_utf8", f"{what}: {err}") from None


def clean_caption(text: object) -> str:
  """A caption with surrounding whitespace removed; RowError if empty."""
  if not isinstance(text, str):
    raise RowError("missing_field", f"caption is {type(text).__name__}, not text")
  text = text.strip()
  if not text:
    raise RowError("empty_caption", "empty caption")
  return text
