"""Raw web candidates: reading one record, field aliases, validation, header probing.

A raw record (a JSON Lines line, a CC-style TSV line, a Parquet row, or an
in-memory dict) becomes a plain dict `Candidate` with normalised fields, or a
`Rejection` (reason, the record's id when one can be recovered, detail).
Plain dicts keep Beam's coders cheap; the image bytes are hashed and probed
here and then dropped, so they never travel further down the pipeline.

Accepted fields (first alias present wins; docs/curation.md has the rules):
  id            id | key | uid: a non-empty string (a number, list or dict
                is rejected as input/id_not_a_string, never stringified)
  url           url | image_url (a string)
  alt_text      alt_text | caption | text | txt
  image bytes   image_bytes | jpg | image (bytes, or {"bytes": ...} as the
                Hugging Face image feature stores them), or image_base64
  metadata      format | image_format; width, height (used only without
                bytes); original_width, original_height (img2dataset's size
                of the downloaded image before its resize: they win)
  status        img2dataset's download status: anything but "success" is
                rejected as image/download_failed
  sha256        img2dataset's hash of the downloaded file, used when there
                are no bytes to hash
  tags          tags: [{"name", "score"}] | [[name, score]] | [name]
  safety        safety_score
A CC3M / CC12M TSV line is `url <TAB> caption` (CC12M) or `caption <TAB> url`
(CC3M): the column that starts with http(s):// is the URL, and the id is
`url_image_id(url)`.
"""
import base64
import binascii
import hashlib
import html
import io
import json
import math
import numbers
import re
from typing import Any, NamedTuple, Optional, Union

from PIL import Image

Candidate = dict[str, Any]

# Element kinds produced by shards.ReadRecords.
KIND_JSONL = "jsonl"
KIND_TSV = "tsv"
KIND_PARQUET = "parquet"
KIND_ERROR = "error"      # a file that could not be read on: payload = message

# Widths and heights are positive and fit the int32 fields of image formats
# and of downstream records; larger values are lies, not images.
MAX_SIDE = 2**31 - 1
URL_ID_HEX_DIGITS = 16

_ID_KEYS = ("id", "key", "uid")
_URL_KEYS = ("url", "image_url")
_TEXT_KEYS = ("alt_text", "caption", "text", "txt")
_BYTES_KEYS = ("image_bytes", "jpg", "image")
_FORMAT_KEYS = ("format", "image_format")
# Parquet columns the parser reads (others, e.g. img2dataset's exif, are
# never loaded).
KNOWN_FIELDS = frozenset(
    _ID_KEYS + _URL_KEYS + _TEXT_KEYS + _BYTES_KEYS + _FORMAT_KEYS +
    ("image_base64", "width", "height", "original_width", "original_height",
     "status", "error_message", "sha256", "tags", "safety_score"))
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
_TAGS_HTML = re.compile(r"<[^>]{0,200}>")
_SURROGATE = re.compile("[\ud800-\udfff]")
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_TSV_URL = re.compile(r"^\s*https?://", re.IGNORECASE)
_TSV_HEADERS = ({"url", "caption"}, {"image_url", "caption"})
# An "id"/"key"/"uid" string in a line that is not valid JSON (which alias
# wins: _recover_id).
_ID_IN_TEXT = re.compile(r'"(id|key|uid)"\s*:\s*("(?:[^"\\\n]|\\.){1,1024}")')

# Pillow may warn/raise on huge images; we only read headers, never pixels.
Image.MAX_IMAGE_PIXELS = None


class Rejection(NamedTuple):
  """Why a record is dropped, and what identifies it in the rejects output."""
  reason: str
  record_id: Optional[str] = None   # the record's string id, when known
  detail: str = ""
  raw_id: Any = None                # a non-string id value, as found


def url_image_id(url: str) -> str:
  """The image id of a web image known only by its URL: 16 hex digits of SHA-1(url).

  The one rule for CC-style TSV rows (curation input) and for the TSV
  importer, so that the same URL gets the same id in CC3M and CC12M and the
  paper's removal of CC3M images from CC12M works on ids. The URL is taken as
  written apart from surrounding whitespace (two spellings may be two files).
  64 bits: among 15M URLs a collision has probability ~6e-6, and curation
  rejects the second record of an id as input/duplicate_id, never merging.
  """
  return hashlib.sha1(url.strip().encode("utf-8")).hexdigest()[:URL_ID_HEX_DIGITS]


def _first(raw: dict[str, Any], keys: tuple[str, ...]) -> Any:
  for key in keys:
    value = raw.get(key)
    if value is not None:
      return value
  return None


def has_surrogates(text: str) -> bool:
  """Lone surrogates (JSON's "\\ud800", surrogateescape) cannot be written as UTF-8."""
  return _SURROGATE.search(text) is not None


def clean_alt_text(text: str) -> str:
  """Unescapes HTML entities, drops markup and control characters, folds spaces."""
  text = html.unescape(text)
  text = _TAGS_HTML.sub(" ", text)
  text = _CONTROL.sub(" ", text)
  return _SPACES.sub(" ", text).strip()


def probe_image(data: bytes) -> Optional[tuple[str, int, int]]:
  """(Pillow format, width, height) read from the header, or None if unreadable."""
  try:
    with Image.open(io.BytesIO(data)) as image:
      width, height = image.size
      return str(image.format or ""), int(width), int(height)
  except Exception:  # Pillow raises many types on corrupt input.
    return None


def _parse_tags(value: Any) -> Optional[list[list[Any]]]:
  """[[name, score], ...] lower-cased, or None when the field is malformed.

  Scores are numbers (a string "0.9" is malformed, as for every numeric
  field); a tag without a score counts as confident (1.0).
  """
  if isinstance(value, str):
    try:
      value = json.loads(value)
    except (ValueError, RecursionError):
      return None
  if not isinstance(value, (list, tuple)):
    return None
  tags = []
  for item in value:
    if isinstance(item, str):
      name, score = item, 1.0
    elif isinstance(item, dict):
      name, score = item.get("name"), item.get("score", 1.0)
    elif isinstance(item, (list, tuple)) and len(item) == 2:
      name, score = item
    else:
      return None
    if (not isinstance(name, str) or has_surrogates(name)
        or isinstance(score, bool) or not isinstance(score, (int, float))):
      return None
    try:
      score = float(score)
    except OverflowError:  # an int beyond float range
      return None
    if not math.isfinite(score):
      return None
    name = _SPACES.sub(" ", name).strip().lower()
    if name:
      tags.append([name, score])
  return tags


_BAD = object()  # a present but invalid value (vs None: absent)


def as_size(value: Any) -> Any:
  """A width or height: int in [1, MAX_SIDE]; None if absent; _BAD otherwise.

  Integral floats (800.0) are accepted because pandas writes an int column
  with nulls as float64; 800.7, "800", True, 0, negatives and 10**30 are not.
  """
  if value is None:
    return None
  if isinstance(value, bool):
    return _BAD
  if isinstance(value, float):
    if not (math.isfinite(value) and value.is_integer()):
      return _BAD
    value = int(value)
  elif isinstance(value, numbers.Integral):  # int, numpy integers
    value = int(value)
  else:
    return _BAD
  return value if 1 <= value <= MAX_SIDE else _BAD


def _recover_id(text: str) -> Optional[str]:
  """The id of a line that does not parse as JSON, when it is plainly there.

  The alias is chosen as record_id_of chooses it for a line that parses (the
  first of _ID_KEYS present, not the first in the text), so that a reject
  carries the same id whichever way its line failed. Of an alias seen twice
  the first is kept: a nested object's "id" usually follows the record's.
  """
  found: dict[str, str] = {}
  for match in _ID_IN_TEXT.finditer(text[:100_000]):
    found.setdefault(match.group(1), match.group(2))
  quoted = _first(found, _ID_KEYS)
  if quoted is None:
    return None
  try:
    value = json.loads(quoted)
  except ValueError:
    return None
  if not value.strip() or has_surrogates(value) or "\ufffd" in value:
    return None
  return value


def _decode_line(raw: Union[bytes, str]) -> Union[str, Rejection]:
  """UTF-8 text of a line (a leading BOM dropped), or input/bad_utf8 / empty_line."""
  if isinstance(raw, bytes):
    try:
      raw = raw.decode("utf-8")
    except UnicodeDecodeError as err:
      text = raw.decode("utf-8", "replace")
      return Rejection("input/bad_utf8", _recover_line_id(text), str(err)[:200])
  text = raw[1:] if raw.startswith("\ufeff") else raw
  if not text.strip():
    return Rejection("input/empty_line")
  return text


def _recover_line_id(text: str) -> Optional[str]:
  """Id of an undecodable line: a JSON "id" string, else a TSV line's URL id."""
  found = _recover_id(text)
  if found is not None:
    return found
  for column in text.split("\t"):
    if _TSV_URL.match(column) and "\ufffd" not in column:
      return url_image_id(column)
  return None


def parse_tsv_line(raw: Union[bytes, str]) -> Union[dict[str, Any], Rejection]:
  """A CC3M / CC12M TSV line -> {"id", "url", "alt_text"} (a raw record).

  `url <TAB> caption` (CC12M) or `caption <TAB> url` (CC3M's release): the
  column that starts with http(s):// is the URL (both: the first). A header
  line (url, caption in either order) is rejected as input/tsv_header, so
  that every line is counted.
  """
  text = _decode_line(raw)
  if isinstance(text, Rejection):
    return text
  columns = text.rstrip("\r").split("\t")
  is_url = [bool(_TSV_URL.match(c)) for c in columns]
  if len(columns) != 2:
    record_id = next((url_image_id(c) for c, u in zip(columns, is_url) if u), None)
    return Rejection("input/bad_tsv", record_id,
                     f"{len(columns)} tab-separated columns, expected url and caption")
  if {c.strip().lower() for c in columns} in _TSV_HEADERS:
    return Rejection("input/tsv_header")
  if not any(is_url):
    return Rejection("input/bad_tsv", None, "neither column is an http(s) URL")
  u = 0 if is_url[0] else 1
  return {"id": url_image_id(columns[u]), "url": columns[u], "alt_text": columns[1 - u]}


def _load_json_line(raw: Union[bytes, str]) -> Union[dict[str, Any], Rejection]:
  text = _decode_line(raw)
  if isinstance(text, Rejection):
    return text
  try:
    value = json.loads(text)
  except (ValueError, RecursionError) as err:  # deep nesting: RecursionError
    return Rejection("input/bad_json", _recover_id(text), f"{type(err).__name__}: {err}"[:200])
  if not isinstance(value, dict):
    return Rejection("input/not_an_object", None, type(value).__name__)
  return value


def record_id_of(raw: Any) -> Optional[str]:
  """The string id of a raw record if it has a usable one (for rejects)."""
  if isinstance(raw, dict):
    value = _first(raw, _ID_KEYS)
    if isinstance(value, str) and value.strip() and not has_surrogates(value):
      return value
  return None


def parse_candidate(raw: Any, kind: Optional[str] = None) -> Union[Candidate, Rejection]:
  """Normalises one raw record; returns a Candidate dict or a Rejection.

  `kind`: KIND_TSV for a TSV line; otherwise bytes / str are a JSON line and
  a dict is a record (Parquet row or in-memory). Never raises on bad data
  (the DoFns still guard against the unforeseen).
  """
  if kind == KIND_ERROR:
    return Rejection("input/unreadable", None, str(raw)[:500])
  if kind == KIND_TSV:
    raw = parse_tsv_line(raw)
  elif isinstance(raw, (str, bytes)):
    raw = _load_json_line(raw)
  if isinstance(raw, Rejection):
    return raw
  if not isinstance(raw, dict):
    return Rejection("input/not_an_object", None, type(raw).__name__)

  record_id = _first(raw, _ID_KEYS)
  if record_id is None:
    return Rejection("input/missing_id")
  if not isinstance(record_id, str):
    return Rejection("input/id_not_a_string", None, type(record_id).__name__, record_id)
  if not record_id.strip():  # also U+3000, U+00A0, ... only
    return Rejection("input/missing_id", None, "blank id", record_id)
  if has_surrogates(record_id):
    return Rejection("input/invalid_unicode", record_id, "id")

  def reject(reason: str, detail: str = "") -> Rejection:
    return Rejection(reason, record_id, detail)

  status = raw.get("status")
  if status is not None and status != "success":
    return reject("image/download_failed",
                  f"status={status!r:.40} error={raw.get('error_message')!r:.200}")
  alt_text = _first(raw, _TEXT_KEYS)
  if alt_text is None:
    return reject("input/missing_alt_text")
  if not isinstance(alt_text, str):
    return reject("input/alt_text_not_a_string", type(alt_text).__name__)
  if has_surrogates(alt_text):
    return reject("input/invalid_unicode", "alt_text")
  url = _first(raw, _URL_KEYS)
  if url is None:
    url = ""
  elif not isinstance(url, str):
    return reject("input/url_not_a_string", type(url).__name__)
  elif has_surrogates(url):
    return reject("input/invalid_unicode", "url")
  url = url.strip()

  data = _first(raw, _BYTES_KEYS)
  if isinstance(data, dict):  # Hugging Face Image feature: {"bytes", "path"}
    data = data.get("bytes")
  if data is None and raw.get("image_base64") is not None:
    try:
      data = base64.b64decode(raw["image_base64"], validate=True)
    except (binascii.Error, TypeError, ValueError):
      return reject("image/bad_base64")
  if data is not None and not isinstance(data, (bytes, bytearray)):
    return reject("image/bad_bytes_field", type(data).__name__)
  image_format = None
  width = height = None
  image_sha256 = ""
  if data is not None:
    probed = probe_image(bytes(data))
    if probed is None:
      return reject("image/undecodable")
    image_format, width, height = probed
    image_sha256 = hashlib.sha256(data).hexdigest()
  else:
    image_format = _first(raw, _FORMAT_KEYS)
    if image_format is not None and (not isinstance(image_format, str)
                                     or not image_format.strip()
                                     or has_surrogates(image_format)):
      return reject("image/bad_format", f"{image_format!r:.40}")
    width, height = raw.get("width"), raw.get("height")
    claimed_sha = raw.get("sha256")
    if isinstance(claimed_sha, str) and _HEX64.match(claimed_sha):
      image_sha256 = claimed_sha.lower()
  # img2dataset stores resized images (256 px by default) and their size in
  # width/height; original_width/original_height are the web image's.
  if raw.get("original_width") is not None or raw.get("original_height") is not None:
    width, height = raw.get("original_width"), raw.get("original_height")
  sizes = as_size(width), as_size(height)
  if _BAD in sizes:
    return reject("image/bad_size", f"width={width!r:.40} height={height!r:.40}")
  width, height = sizes
  if not url and not image_sha256:
    return reject("input/missing_image_reference")

  tags = None  # None: the record has no tags field (config image_text.missing_tags)
  if raw.get("tags") is not None:
    tags = _parse_tags(raw["tags"])
    if tags is None:
      return reject("input/bad_tags")
  safety = raw.get("safety_score")
  if safety is not None:
    if isinstance(safety, bool) or not isinstance(safety, (int, float)):
      return reject("input/bad_safety_score", f"{safety!r:.40}")
    try:
      safety = float(safety)
    except OverflowError:
      return reject("input/bad_safety_score", "out of range")
    if not math.isfinite(safety):
      return reject("input/bad_safety_score", f"{safety!r}")
  return {
      "id": record_id,
      "url": url,
      "image_sha256": image_sha256,
      "format": image_format.strip().upper() if image_format else None,
      "width": width,
      "height": height,
      "alt_text": clean_alt_text(alt_text),
      "tags": tags,
      "safety_score": safety,
  }
