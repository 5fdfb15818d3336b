"""Raw web candidates: field aliases, validation and image-header probing.

A raw record (a JSON Lines object or a Parquet row) becomes a plain dict
`Candidate` with normalised fields, or a rejection reason. Plain dicts keep
Beam's coders cheap; the image bytes are hashed and probed here and then
dropped, so they never travel further down the pipeline.

Accepted fields (first alias present wins):
  id            id | key | uid
  url           url | image_url
  alt_text      alt_text | caption | text
  image bytes   image_bytes | jpg | image (bytes), or image_base64 (JSON Lines)
  metadata      format | image_format; width; height (used only without bytes)
  tags          tags: [{"name", "score"}] | [[name, score]] | [name]
  safety        safety_score
"""
import base64
import binascii
import hashlib
import html
import io
import json
import math
import re
from typing import Any, Optional, Union

from PIL import Image

Candidate = dict[str, Any]
Rejection = str

_ID_KEYS = ("id", "key", "uid")
_URL_KEYS = ("url", "image_url")
_TEXT_KEYS = ("alt_text", "caption", "text")
_BYTES_KEYS = ("image_bytes", "jpg", "image")
_FORMAT_KEYS = ("format", "image_format")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACES = re.compile(r"\s+")
_TAGS_HTML = re.compile(r"<[^>]{0,200}>")

# Pillow may warn/raise on huge images; we only read headers, never pixels.
Image.MAX_IMAGE_PIXELS = None


def _first(raw: dict[str, Any], keys: tuple[str, ...]) -> Any:
  for key in keys:
    value = raw.get(key)
    if value is not None:
      return value
  return None


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
  """[[name, score], ...] lower-cased, or None when the field is malformed."""
  if isinstance(value, str):
    try:
      value = json.loads(value)
    except ValueError:
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
    if not isinstance(name, str) or isinstance(score, bool):
      return None
    try:
      score = float(score)
    except (TypeError, ValueError):
      return None
    if not math.isfinite(score):
      return None
    name = _SPACES.sub(" ", name).strip().lower()
    if name:
      tags.append([name, score])
  return tags


def _as_int(value: Any) -> Optional[int]:
  if isinstance(value, bool):
    return None
  try:
    number = int(value)
  except (TypeError, ValueError, OverflowError):
    return None
  return number if number >= 0 else None


def parse_candidate(raw: Union[dict[str, Any], str, bytes]) -> Union[Candidate, Rejection]:
  """Normalises one raw record; returns a Candidate dict or a reason string."""
  if isinstance(raw, (str, bytes)):
    try:
      raw = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
      return "input/bad_json"
  if not isinstance(raw, dict):
    return "input/not_an_object"
  record_id = _first(raw, _ID_KEYS)
  if record_id is None or str(record_id) == "":
    return "input/missing_id"
  alt_text = _first(raw, _TEXT_KEYS)
  if not isinstance(alt_text, str):
    return "input/missing_alt_text"
  url = _first(raw, _URL_KEYS)
  url = url if isinstance(url, str) else ""

  data = _first(raw, _BYTES_KEYS)
  if data is None and raw.get("image_base64") is not None:
    try:
      data = base64.b64decode(raw["image_base64"], validate=True)
    except (binascii.Error, TypeError, ValueError):
      return "image/bad_base64"
  if data is not None and not isinstance(data, (bytes, bytearray)):
    return "image/bad_bytes_field"
  if data is not None:
    probed = probe_image(bytes(data))
    if probed is None:
      return "image/undecodable"
    image_format, width, height = probed
    image_sha256 = hashlib.sha256(data).hexdigest()
  else:
    image_format = _first(raw, _FORMAT_KEYS)
    width, height = _as_int(raw.get("width")), _as_int(raw.get("height"))
    if not isinstance(image_format, str) or width is None or height is None:
      return "image/missing_metadata"
    image_sha256 = ""
  if not url and not image_sha256:
    return "input/missing_image_reference"

  tags: list[list[Any]] = []
  if raw.get("tags") is not None:
    parsed = _parse_tags(raw["tags"])
    if parsed is None:
      return "input/bad_tags"
    tags = parsed
  safety = raw.get("safety_score")
  if safety is not None:
    try:
      safety = float(safety)
    except (TypeError, ValueError):
      return "input/bad_safety_score"
    if not math.isfinite(safety) or isinstance(raw.get("safety_score"), bool):
      return "input/bad_safety_score"
  return {
      "id": str(record_id),
      "url": url,
      "image_sha256": image_sha256,
      "format": image_format.upper(),
      "width": width,
      "height": height,
      "alt_text": clean_alt_text(alt_text),
      "tags": tags,
      "safety_score": safety,
  }
