"""The one reader of Karpathy-split JSON (`dataset_coco.json`, `dataset_flickr30k.json`).

Format (Karpathy & Fei-Fei, 2015):

  {"dataset": "flickr30k",
   "images": [{"filename": "1000092795.jpg", "imgid": 0, "split": "train",
               "sentids": [0, 1, 2, 3, 4],
               "sentences": [{"raw": "Two young guys ...", "tokens": [...],
                              "imgid": 0, "sentid": 0}, ...]}, ...]}

An image's id is its file name without the extension ("1000092795",
"COCO_val2014_000000391895"), which is how feature records name these images
(`image_id`): captioning references (evaluation/nocaps.py), retrieval
queries (evaluation/retrieval_eval.py) and the importers all read ids here.
`join_by_image_id` pairs the images of one split with the feature-record
order of an eval set; `split_of_source` names the split an eval source holds.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Iterable, Sequence

SPLITS = ("train", "val", "test", "restval")
# Eval source name suffix -> Karpathy split ('flickr_test' -> 'test').
_SPLIT_OF_SOURCE = {"train": "train", "val": "val", "test": "test"}


def split_of_source(source: str) -> str:
  """'flickr_test' -> 'test': the Karpathy split that an eval source holds."""
  suffix = source.rsplit("_", 1)[-1]
  if suffix not in _SPLIT_OF_SOURCE:
    raise ValueError(f"eval source {source!r}: cannot tell its Karpathy split (expected a "
                     f"name ending in one of {sorted(_SPLIT_OF_SOURCE)})")
  return _SPLIT_OF_SOURCE[suffix]


@dataclasses.dataclass(frozen=True)
class KarpathyImage:
  image_id: str
  filename: str
  split: str
  captions: tuple[str, ...]


def image_id_of(filename: str) -> str:
  """'1000092795.jpg' -> '1000092795' (the feature records' image id)."""
  return os.path.splitext(os.path.basename(filename))[0]


def load_karpathy_json(path: str, split: str | None = None) -> list[KarpathyImage]:
  """Images of `split` (all splits if None) in file order.

  Raises ValueError naming the image (index and file name) for a missing key,
  an unknown split, an image without sentences, or a duplicated image id.
  """
  if split is not None and split not in SPLITS:
    raise ValueError(f"split={split!r}: expected one of {SPLITS}")
  with open(path) as f:
    data = json.load(f)
  if not isinstance(data, dict) or "images" not in data:
    raise ValueError(f"{path}: not a Karpathy-split JSON (no top-level 'images' list)")
  images = []
  seen: dict[str, int] = {}
  for index, entry in enumerate(data["images"]):
    where = f"{path}: images[{index}]"
    for key in ("filename", "split", "sentences"):
      if key not in entry:
        raise ValueError(f"{where} ({entry.get('filename', '?')}): missing key {key!r}")
    where = f"{where} ({entry['filename']})"
    if entry["split"] not in SPLITS:
      raise ValueError(f"{where}: unknown split {entry['split']!r}")
    captions = []
    for j, sentence in enumerate(entry["sentences"]):
      if "raw" in sentence:
        captions.append(str(sentence["raw"]))
      elif "tokens" in sentence:
        captions.append(" ".join(sentence["tokens"]))
      else:
        raise ValueError(f"{where}: sentences[{j}] has neither 'raw' nor 'tokens'")
    if not captions:
      raise ValueError(f"{where}: no sentences")
    image_id = image_id_of(entry["filename"])
    if image_id in seen:
      raise ValueError(f"{where}: image id {image_id!r} repeats images[{seen[image_id]}]")
    seen[image_id] = index
    if split is None or entry["split"] == split:
      images.append(KarpathyImage(image_id, entry["filename"], entry["split"], tuple(captions)))
  return images


@dataclasses.dataclass
class JoinResult:
  """Karpathy images matched to eval-set positions.

  `images[i]` is the JSON entry for record position `record_positions[i]`.
  Records whose id is not in the split and split images without a record are
  listed (not dropped silently); the caller reports or rejects them.
  """
  images: list[KarpathyImage]
  record_positions: list[int]
  records_without_json: list[str]
  json_without_record: list[str]
  duplicate_records: list[str]

  def counts(self) -> dict[str, int]:
    return {
        "matched": len(self.images),
        "records_without_json": len(self.records_without_json),
        "json_without_record": len(self.json_without_record),
        "duplicate_records": len(self.duplicate_records),
    }


def join_by_image_id(images: Sequence[KarpathyImage],
                     record_ids: Iterable[str],
                     *, strict: bool = True) -> JoinResult:
  """Matches feature records (in their eval order) to Karpathy images by id.

  Args:
    images: one split of the JSON.
    record_ids: `image_id` of each eval example, indexed by `example_index`.
    strict: raise if any record or JSON image is unmatched (the retrieval
      gallery must be exactly the split); otherwise only count them.
  """
  by_id = {im.image_id: im for im in images}
  matched, positions, extra, dups = [], [], [], []
  used: set[str] = set()
  for position, rid in enumerate(record_ids):
    rid = str(rid)
    image = by_id.get(rid) or by_id.get(image_id_of(rid))
    if image is None:
      extra.append(rid)
    elif image.image_id in used:
      dups.append(rid)
    else:
      used.add(image.image_id)
      matched.append(image)
      positions.append(position)
  missing = [im.image_id for im in images if im.image_id not in used]
  result = JoinResult(matched, positions, extra, missing, dups)
  if strict and (extra or missing or dups):
    raise ValueError(
        "feature records and Karpathy JSON do not match: "
        f"{len(extra)} record(s) not in the split (first {extra[:3]}), "
        f"{len(missing)} split image(s) without a record (first {missing[:3]}), "
        f"{len(dups)} duplicated record id(s) (first {dups[:3]})")
  return result
