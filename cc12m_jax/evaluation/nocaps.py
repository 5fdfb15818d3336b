"""References in official formats and the nocaps per-domain protocol.

Reference files:
  * COCO captions JSON: {"images": [{"id", ...}], "annotations":
    [{"image_id", "caption", ...}]}.
  * nocaps JSON: the same layout; every image also carries "domain" in
    {"in-domain", "near-domain", "out-domain"}.
  * Karpathy split JSON (Flickr30k/COCO): {"images": [{"filename" | "imgid",
    "split", "sentences": [{"raw"}]}]}; pick one split.
Image ids are kept as strings internally (the eval iterator's `image_id`);
the original id (int for COCO/nocaps) is kept for the predictions file.

Protocol (docs/evaluation.md):
  * All captions are PTB-tokenised (Stanford CoreNLP 3.4.1, as COCO does).
  * CIDEr(-D) is computed ONCE over the whole evaluated set, so every image
    shares one set of document frequencies; a domain's CIDEr is the mean of
    its images' scores and "overall" is the mean over all images, i.e. the
    image-count-weighted mean of the domain CIDErs. SPICE (when available)
    is per-image too and is averaged the same way.
  * BLEU-1..4, METEOR and ROUGE-L are computed on each domain's images
    separately and on the whole set ("overall"); BLEU and METEOR are corpus
    statistics, so their overall figure is not a mean of the domains.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from cc12m_jax.data import karpathy
from cc12m_jax.evaluation import caption_metrics, ptb_tokenizer

DOMAINS = ("in-domain", "near-domain", "out-domain")
OVERALL = "overall"


@dataclasses.dataclass
class References:
  """Reference captions by image id (str), with domains and original ids."""
  captions: dict[str, list[str]]
  domains: dict[str, str]            # '' when the set has no domains
  original_ids: dict[str, Any]       # id as written in the source file
  source: str = ""

  def __post_init__(self):
    for image_id, caps in self.captions.items():
      if not caps:
        raise ValueError(f"{self.source}: image {image_id!r} has no "
                         "reference captions")
      bad = [c for c in caps if not isinstance(c, str)]
      if bad:
        raise ValueError(f"{self.source}: image {image_id!r} has a "
                         f"non-string caption {bad[0]!r}")
    for image_id, domain in self.domains.items():
      if domain not in DOMAINS + ("",):
        raise ValueError(f"{self.source}: image {image_id!r} has domain "
                         f"{domain!r}; expected one of {DOMAINS} or none")

  @property
  def image_ids(self) -> list[str]:
    return list(self.captions)


def _coco_like(data: Mapping[str, Any], source: str) -> References:
  if "images" not in data or "annotations" not in data:
    raise ValueError(f"{source}: COCO/nocaps captions JSON needs 'images' "
                     f"and 'annotations'; found keys {sorted(data)}")
  captions: dict[str, list[str]] = {}
  domains: dict[str, str] = {}
  original: dict[str, Any] = {}
  for i, image in enumerate(data["images"]):
    if "id" not in image:
      raise ValueError(f"{source}: images[{i}] has no 'id'")
    key = str(image["id"])
    if key in captions:
      raise ValueError(f"{source}: image id {image['id']!r} listed twice")
    captions[key] = []
    domains[key] = image.get("domain", "")
    original[key] = image["id"]
  for i, ann in enumerate(data["annotations"]):
    for field in ("image_id", "caption"):
      if field not in ann:
        raise ValueError(f"{source}: annotations[{i}] has no {field!r}")
    key = str(ann["image_id"])
    if key not in captions:
      raise ValueError(f"{source}: annotations[{i}] refers to image "
                       f"{ann['image_id']!r}, which is not in 'images'")
    captions[key].append(ann["caption"])
  return References(captions, domains, original, source)


def _karpathy(path: str, split: str) -> References:
  """One split of a Karpathy JSON, keyed by the records' image ids (data/karpathy.py)."""
  images = karpathy.load_karpathy_json(path, split)
  if not images:
    raise ValueError(f"{path}: no images with split {split!r}")
  captions = {im.image_id: list(im.captions) for im in images}
  return References(captions, {k: "" for k in captions}, {k: k for k in captions}, path)


def load_references(path: str, split: str = "test") -> References:
  """Reads COCO captions, nocaps, or Karpathy split JSON (by its layout)."""
  with open(path) as f:
    data = json.load(f)
  if isinstance(data, dict) and "annotations" in data:
    return _coco_like(data, path)
  if (isinstance(data, dict) and data.get("images")
      and "sentences" in data["images"][0]):
    return _karpathy(path, split)
  raise ValueError(f"{path}: not a COCO/nocaps captions JSON (no "
                   "'annotations') nor a Karpathy split JSON (no "
                   "'images[].sentences')")


def references_from_examples(examples: Iterable[Any], source: str = ""
                             ) -> References:
  """References from host-side eval examples (image_id, domain, captions)."""
  captions, domains, original = {}, {}, {}
  for ex in examples:
    key = str(ex.image_id)
    if key in captions:
      raise ValueError(f"{source}: image {ex.image_id!r} appears twice in "
                       "the evaluation examples")
    captions[key] = list(ex.captions)
    domains[key] = ex.domain or ""
    original[key] = ex.image_id
  return References(captions, domains, original, source)


def _domain_groups(references: References, image_ids: Sequence[str]
                   ) -> dict[str, list[str]]:
  groups = {d: [i for i in image_ids if references.domains.get(i) == d]
            for d in DOMAINS}
  groups = {d: ids for d, ids in groups.items() if ids}
  groups[OVERALL] = list(image_ids)
  return groups


def evaluate(predictions: Mapping[str, str], references: References, *,
             metrics: Sequence[str] = caption_metrics.DEFAULT_METRICS,
             allow_missing: bool = False,
             tokenizer: ptb_tokenizer.PTBTokenizer | None = None
             ) -> dict[str, Any]:
  """Scores predictions {image_id (str): caption} under the nocaps protocol.

  Every prediction must name a reference image. With allow_missing=False
  every reference image needs a prediction; with True the evaluated set is
  the predicted images and the rest are counted in the report.

  Returns a JSON-ready report:
    {"scores": {group: {metric: value}}, "num_images": {group: n},
     "unavailable": {metric: reason}, "num_references_without_prediction": n,
     "metrics": [...], "protocol": "nocaps",
     "per_image": {metric: {image_id: value}}, "image_domains": {image_id: domain}}
  with groups the domains present plus "overall". `per_image` holds the
  per-image metrics (CIDEr; SPICE when available) whose group means are the
  scores above, so a paired bootstrap over images can resample them
  (cc12m_jax/experiments/bootstrap.py).
  """
  predictions = {str(k): v for k, v in predictions.items()}
  unknown = [k for k in predictions if k not in references.captions]
  if unknown:
    raise KeyError(f"predictions for images not in the references "
                   f"({references.source}): {unknown[:5]} "
                   f"({len(unknown)} in all)")
  for k, v in predictions.items():
    if not isinstance(v, str):
      raise ValueError(f"prediction for image {k!r} is not a string: {v!r}")
  missing = [k for k in references.captions if k not in predictions]
  if missing and not allow_missing:
    raise ValueError(f"{len(missing)} reference images have no prediction, "
                     f"e.g. {missing[:5]} (pass allow_missing=True to score "
                     "the predicted subset)")
  bad = set(metrics) - set(caption_metrics.ALL_METRICS)
  if bad:
    raise ValueError(f"unknown metrics {sorted(bad)}; known: "
                     f"{caption_metrics.ALL_METRICS}")
  image_ids = [k for k in references.captions if k in predictions]
  if not image_ids:
    raise ValueError("no predictions to evaluate")
  groups = _domain_groups(references, image_ids)

  refs = {k: references.captions[k] for k in image_ids}
  gts_tok, res_tok = caption_metrics.tokenize_pairs(
      refs, {k: predictions[k] for k in image_ids}, tokenizer)

  unavailable: dict[str, str] = {}
  if "METEOR" in metrics:
    reason = caption_metrics.meteor_unavailable_reason()
    if reason:
      unavailable["METEOR"] = reason
  if "SPICE" in metrics:
    reason = caption_metrics.spice_unavailable_reason()
    if reason:
      unavailable["SPICE"] = reason
  corpus_metrics = [m for m in metrics if m not in ("CIDEr", "SPICE")
                    and m not in unavailable]

  # Per-image metrics: one pass over the whole set.
  per_image: dict[str, dict[str, float]] = {}
  if "CIDEr" in metrics:
    _, cider = caption_metrics.cider_d(gts_tok, res_tok)
    per_image["CIDEr"] = dict(zip(image_ids, cider))
  if "SPICE" in metrics and "SPICE" not in unavailable:
    try:
      _, spice = caption_metrics.spice(
          refs, {k: [predictions[k]] for k in image_ids})
      per_image["SPICE"] = dict(zip(image_ids, spice))
    except RuntimeError as err:
      unavailable["SPICE"] = str(err).removeprefix("SPICE unavailable: ")

  scores: dict[str, dict[str, float]] = {}

  def run(meteor_scorer):
    for group, ids in groups.items():
      g = {k: gts_tok[k] for k in ids}
      r = {k: res_tok[k] for k in ids}
      row = caption_metrics.score_tokenized(g, r, corpus_metrics,
                                            meteor_scorer=meteor_scorer)
      for name, values in per_image.items():
        row[name] = float(np.mean([values[k] for k in ids]))
      scores[group] = {m: row[m] for m in metrics if m in row}

  if "METEOR" in corpus_metrics:
    with caption_metrics.MeteorScorer() as meteor_scorer:
      run(meteor_scorer)
  else:
    run(None)

  return {
      "protocol": "nocaps",
      "references": references.source,
      "metrics": [m for m in metrics if m not in unavailable],
      "scores": scores,
      "num_images": {g: len(ids) for g, ids in groups.items()},
      "unavailable": unavailable,
      "num_references_without_prediction": len(missing),
      "per_image": {name: {k: float(v) for k, v in values.items()}
                    for name, values in per_image.items()},
      "image_domains": {k: references.domains.get(k, "") for k in image_ids},
  }


def flatten_scores(report: Mapping[str, Any]) -> dict[str, float]:
  """{'<group>/<metric>': value}, e.g. 'out-domain/CIDEr' (for logging)."""
  return {f"{group}/{metric}": value
          for group, row in report["scores"].items()
          for metric, value in row.items()}
