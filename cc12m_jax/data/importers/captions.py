"""Captions from the public formats, as CaptionRows keyed by image id.

  cc        CC3M / CC12M TSV, one pair a line: url <TAB> caption (CC12M's
            order) or caption <TAB> url (CC3M's); the column that starts
            with http(s):// is the URL. An optional header line
            "url<TAB>caption" is skipped. Read by curation's own TSV reader
            (candidates.parse_tsv_line): id url_image_id(url).
  coco      COCO captions JSON (2014 / 2017: "images" + "annotations"), or
            the Karpathy split JSON (dataset_coco.json: "images" with
            "sentences" and "split"; choose splits, e.g. train,restval).
            Id: images[].id; a Karpathy record is named by its file stem
            (as data/karpathy.py names references) and joined to features by
            its cocoid (as COCO feature releases name images).
  nocaps    nocaps JSON in COCO layout whose images carry "domain"
            (in-domain / near-domain / out-domain): the captions file, and /
            or an image-info file (val / test) giving domains and sizes.
  flickr    Flickr30K Karpathy JSON (dataset_flickr30k.json); id: the file
            name stem, as cc12m_jax.evaluation.flickr names images.
  locnar    Localized Narratives JSON Lines; the caption is the narrative
            ("caption"); several narratives of an image are its captions.
  curated   curation's kept shards (cc12m_jax/curation/shards.py: JSON Lines
            or Parquet with id, caption, width, height, tags).

Line formats give `parse_*_line(location, line) -> CaptionRow | None`
(None: a blank or header line); whole-file formats give
`parse_*_file(options, path, data) -> iterator of CaptionRow | BadRow`.
"""
import dataclasses
import io
import json
from typing import Any, Iterator, Optional, Union

import pyarrow.parquet as pq

from cc12m_jax.curation import candidates
from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import image_ids
from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.importers import tags as tags_lib

NOCAPS_DOMAINS = tuple(d for d in records_lib.DOMAIN_IDS if d)
KARPATHY_SPLITS = ("train", "val", "test", "restval")

Row = Union[rows_lib.CaptionRow, rows_lib.BadRow]


def _json(data: bytes, what: str) -> Any:
  try:
    return json.loads(data)
  except UnicodeDecodeError as err:
    raise rows_lib.RowError("bad_utf8", f"{what}: {err}") from None
  except ValueError as err:
    raise rows_lib.RowError("bad_json", f"{what}: {err}") from None


def _size(value: Any, what: str) -> int:
  """A positive pixel size, 0 when absent."""
  if value is None:
    return 0
  if isinstance(value, bool) or not isinstance(value, (int, float)) or (
      isinstance(value, float) and not value.is_integer()):
    raise rows_lib.RowError("bad_number", f"{what}={value!r}")
  if value <= 0:
    raise rows_lib.RowError("bad_size", f"{what}={value!r}")
  return int(value)


def _id(value: Any) -> str:
  if value is None or isinstance(value, (dict, list, bool)):
    raise rows_lib.RowError("missing_id", f"image id {value!r}")
  text = str(value).strip()
  if not text:
    raise rows_lib.RowError("missing_id", "empty image id")
  return text


# ------------------------------------------------------------------- cc ---

def parse_cc_line(location: rows_lib.Location, line: bytes
                  ) -> Optional[rows_lib.CaptionRow]:
  """A CC TSV line through curation's own TSV reader (candidates.py), so
  that URL detection and the id are curation's exactly."""
  parsed = candidates.parse_tsv_line(line)
  if isinstance(parsed, candidates.Rejection):
    if parsed.reason in ("input/empty_line", "input/tsv_header"):
      return None
    reason = {"input/bad_utf8": "bad_utf8"}.get(parsed.reason)
    if reason is None:  # input/bad_tsv: wrong column count or no URL
      reason = "no_url" if "URL" in parsed.detail else "wrong_columns"
    error = rows_lib.RowError(reason, parsed.detail)
    error.image_id = parsed.record_id or ""
    raise error
  try:
    caption = rows_lib.clean_caption(parsed["alt_text"])
  except rows_lib.RowError as err:
    err.image_id = parsed["id"]
    raise
  return rows_lib.CaptionRow(parsed["id"], location, [caption], entry=True)


# ------------------------------------------------------ COCO / Karpathy ---

@dataclasses.dataclass(frozen=True)
class JsonOptions:
  """splits: Karpathy splits to keep ('' = a COCO-layout file is expected);
  id_rule: 'coco' (Karpathy: join by cocoid, name by file stem) or 'stem'
  (Flickr30K: both by file stem);
  entry: False for an image-info file (sizes and domains, no captions).
  A domain, where given, must be a nocaps one; that each nocaps image has
  one (from either file) is checked by the join."""
  splits: tuple[str, ...] = ()
  id_rule: str = "coco"
  entry: bool = True


def _bad(reason: str, location: rows_lib.Location, detail: str,
         image_id: str = "") -> rows_lib.BadRow:
  return rows_lib.BadRow(reason, location, detail, image_id)


def _coco_layout(options: JsonOptions, path: str, data: dict) -> Iterator[Row]:
  images = data.get("images")
  if not isinstance(images, list):
    yield _bad("missing_field", rows_lib.Location(path), "no 'images' list")
    return
  rows: dict[str, rows_lib.CaptionRow] = {}
  for i, image in enumerate(images):
    where = rows_lib.Location(path, index=i, entry=f"images[{i}]")
    try:
      if not isinstance(image, dict):
        raise rows_lib.RowError("bad_json", "not an object")
      image_id = _id(image.get("id"))
      if image_id in rows:
        raise rows_lib.RowError(
            "duplicate_id", f"image id {image_id!r} also at {rows[image_id].location}")
      domain = image.get("domain", "")
      if domain not in records_lib.DOMAIN_IDS:
        raise rows_lib.RowError("bad_domain", f"domain {domain!r}, expected one of "
                                f"{NOCAPS_DOMAINS}")
      rows[image_id] = rows_lib.CaptionRow(
          image_id, where, [], entry=options.entry,
          width=_size(image.get("width"), "width"),
          height=_size(image.get("height"), "height"), domain=domain)
    except rows_lib.RowError as err:
      yield _bad(err.reason, where, err.detail)
  annotations = data.get("annotations", [])
  if not isinstance(annotations, list):
    yield _bad("bad_json", rows_lib.Location(path), "'annotations' is not a list")
    annotations = []
  for j, ann in enumerate(annotations):
    where = rows_lib.Location(path, index=len(images) + j,
                              entry=f"annotations[{j}]")
    image_id = ""
    try:
      if not isinstance(ann, dict):
        raise rows_lib.RowError("bad_json", "not an object")
      image_id = _id(ann.get("image_id"))
      if image_id not in rows:
        raise rows_lib.RowError("unknown_image",
                                f"image_id {image_id!r} is not in 'images'")
      rows[image_id].captions.append(rows_lib.clean_caption(ann.get("caption")))
    except rows_lib.RowError as err:
      yield _bad(err.reason, where, err.detail, image_id)
  yield from rows.values()


def _karpathy_layout(options: JsonOptions, path: str, data: dict
                     ) -> Iterator[Row]:
  if not options.splits:
    raise ValueError(f"{path} is a Karpathy split JSON: choose its splits "
                     f"(--split, some of {KARPATHY_SPLITS})")
  seen: dict[str, rows_lib.Location] = {}
  for i, image in enumerate(data["images"]):
    where = rows_lib.Location(path, index=i, entry=f"images[{i}]")
    image_id = ""
    try:
      if not isinstance(image, dict):
        raise rows_lib.RowError("bad_json", "not an object")
      if image.get("split") not in options.splits:
        continue
      filename = image.get("filename")
      if not isinstance(filename, str) or not filename:
        raise rows_lib.RowError("missing_id", "no filename")
      image_id = record_id = _id(image_ids.file_stem(filename))
      if options.id_rule == "coco" and image.get("cocoid") is not None:
        image_id = _id(image["cocoid"])
      if image_id in seen:
        raise rows_lib.RowError("duplicate_id",
                                f"image id {image_id!r} also at {seen[image_id]}")
      seen[image_id] = where
      sentences = image.get("sentences")
      if not isinstance(sentences, list):
        raise rows_lib.RowError("missing_field", "no 'sentences' list")
      captions = []
      for j, sentence in enumerate(sentences):
        raw = sentence.get("raw") if isinstance(sentence, dict) else None
        if raw is None and isinstance(sentence, dict) and "tokens" in sentence:
          raw = " ".join(sentence["tokens"])
        try:
          captions.append(rows_lib.clean_caption(raw))
        except rows_lib.RowError as err:
          yield _bad(err.reason, rows_lib.Location(
              path, index=i, entry=f"images[{i}].sentences[{j}]"), err.detail, image_id)
      yield rows_lib.CaptionRow(image_id, where, captions, entry=options.entry,
                                record_id=record_id)
    except rows_lib.RowError as err:
      yield _bad(err.reason, where, err.detail, image_id)


def parse_json_file(options: JsonOptions, path: str, data: bytes
                    ) -> Iterator[Row]:
  """COCO captions / nocaps / image-info JSON, or a Karpathy split JSON."""
  try:
    obj = _json(data, "file")
  except rows_lib.RowError as err:
    yield _bad(err.reason, rows_lib.Location(path), err.detail)
    return
  if not isinstance(obj, dict) or not isinstance(obj.get("images"), list):
    yield _bad("bad_json", rows_lib.Location(path),
               "neither COCO layout ('images', 'annotations') nor Karpathy "
               "layout ('images' with 'sentences')")
    return
  images = obj["images"]
  karpathy = "annotations" not in obj and any(
      isinstance(im, dict) and "sentences" in im for im in images[:10])
  if karpathy:
    yield from _karpathy_layout(options, path, obj)
  else:
    yield from _coco_layout(options, path, obj)


# --------------------------------------------------- Localized Narratives ---

def parse_locnar_line(location: rows_lib.Location, line: bytes
                      ) -> Optional[rows_lib.CaptionRow]:
  if not line.strip():
    return None
  obj = _json(line, "line")
  if not isinstance(obj, dict):
    raise rows_lib.RowError("bad_json", "not a JSON object")
  image_id = _id(obj.get("image_id"))
  try:
    caption = rows_lib.clean_caption(obj.get("caption"))
  except rows_lib.RowError as err:
    err.image_id = image_id
    raise
  return rows_lib.CaptionRow(image_id, location, [caption], entry=False)


# ----------------------------------------------------- curation's output ---

def curated_row(location: rows_lib.Location, obj: Any) -> rows_lib.CaptionRow:
  """A kept record of cc12m_jax.curation (shards.KEPT_SCHEMA) as a row."""
  if not isinstance(obj, dict):
    raise rows_lib.RowError("bad_json", "not a JSON object")
  image_id = _id(obj.get("id"))
  try:
    caption = rows_lib.clean_caption(obj.get("caption"))
    raw_tags = obj.get("tags")
    tags = tags_lib.clean_tags(list(raw_tags)) if raw_tags is not None else None
    return rows_lib.CaptionRow(
        image_id, location, [caption], entry=True,
        width=_size(obj.get("width"), "width"),
        height=_size(obj.get("height"), "height"), tags=tags)
  except rows_lib.RowError as err:
    err.image_id = image_id
    raise


def parse_curated_line(location: rows_lib.Location, line: bytes
                       ) -> Optional[rows_lib.CaptionRow]:
  if not line.strip():
    return None
  return curated_row(location, _json(line, "line"))


def parse_curated_parquet(path: str, data: bytes) -> Iterator[Row]:
  try:
    table = pq.read_table(io.BytesIO(data))
  except Exception as err:  # pyarrow raises several types on corrupt files
    yield _bad("bad_file", rows_lib.Location(path), f"unreadable Parquet: {err}")
    return
  for i, obj in enumerate(table.to_pylist()):
    where = rows_lib.Location(path, index=i, entry=f"row {i}")
    try:
      yield curated_row(where, obj)
    except rows_lib.RowError as err:
      yield _bad(err.reason, where, err.detail, err.image_id)


def splits_of(value: str) -> tuple[str, ...]:
  splits = tuple(s.strip() for s in value.split(",") if s.strip())
  unknown = [s for s in splits if s not in KARPATHY_SPLITS]
  if unknown:
    raise ValueError(f"--split: unknown Karpathy split(s) {unknown}; "
                     f"choose from {KARPATHY_SPLITS}")
  return splits
