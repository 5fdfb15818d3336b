"""An evaluate stage's results: its metrics and the per-image scores behind them.

The evaluate mode writes `<stage dir>/eval/<source>/step_<n>/` (the runner
clears `eval/` before a stage runs, so there is one step per source):

  report.json     captioning: "scores" {group: {metric: value}}, "per_image"
                  {metric: {image_id: value}}, "image_domains" {image_id: domain}
  retrieval.json  retrieval: "metrics" {...}, "per_query" {"image_retrieval":
                  {"image_id": [...], "rank": [...]}}
  ranks.json      the naming probe (evaluation/naming_probe.py), beside its
                  report.json of "scores" {group: {metric: value}}

For the paired bootstrap a metric is a ratio over units (images):
`sum(num) / sum(den)` over the images of the table cell.

  * Captioning CIDEr: num = the image's CIDEr, den = 1 for the images of the
    metric's group (a domain, or all for 'overall'), 0 for the others.
    pycocoevalcap's corpus CIDEr is the mean of the per-image CIDErs, and a
    nocaps domain's CIDEr is the mean over its images (nocaps.evaluate), so
    this ratio is exactly the reported figure; `units` checks that it is.
    BLEU, METEOR and ROUGE-L are corpus statistics here and have no units.
  * Image retrieval R@K: num = 100 x (the image's captions whose image ranks
    in the top K), den = the image's number of captions: resampling an image
    resamples all its caption queries.

Each image has a stratum: its nocaps domain ('' when the source has none);
the bootstrap resamples images within each stratum.
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import numpy as np
from etils import epath

from cc12m_jax.evaluation import naming_probe, nocaps

CAPTION_FILE, RETRIEVAL_FILE = "report.json", "retrieval.json"
RANKS_FILE = naming_probe.RANKS_FILE


class NoUnitScores(ValueError):
  """The metric has no per-image scores to resample."""


@dataclasses.dataclass(frozen=True)
class Output:
  """One source's evaluation by one stage."""
  source: str
  step: int
  path: str
  kind: str                    # 'captioning', 'retrieval' or 'naming'
  metrics: dict[str, float]    # '<group>/<metric>' as the evaluator reports it
  data: dict[str, Any]

  @property
  def units(self) -> tuple[list[str], list[str]]:
    """(image ids, their strata), ids sorted: the same order for every stage."""
    if self.kind == "naming":
      raise NoUnitScores(f"{self.path}: the naming probe's metrics have no per-image units")
    if self.kind == "captioning":
      domains = self.data.get("image_domains")
      if domains is None:
        raise NoUnitScores(f"{self.path} has no per-image scores (written before "
                           "report.json had them); re-run its evaluate stage")
      ids = sorted(domains)
      return ids, [domains[i] for i in ids]
    per_query = self.data.get("per_query", {}).get("image_retrieval")
    if not per_query:
      raise NoUnitScores(f"{self.path} has no per-query ranks (written before "
                         "retrieval.json had them); re-run its evaluate stage")
    ids = sorted(set(per_query["image_id"]))
    return ids, [""] * len(ids)


def find(stage_dir: str, source: str) -> tuple[int, epath.Path]:
  """(step, directory) of the stage's evaluation of `source`."""
  root = epath.Path(stage_dir) / "eval" / source
  steps = sorted(int(m.group(1)) for p in (root.iterdir() if root.exists() else [])
                 if (m := re.fullmatch(r"step_(\d+)", p.name)))
  if not steps:
    raise FileNotFoundError(f"no evaluation of {source!r} under {root}")
  if len(steps) > 1:
    raise ValueError(f"{root} holds steps {steps}: more than one evaluation of {source!r}; "
                     "re-run the stage (the runner clears eval/ first)")
  return steps[0], root / f"step_{steps[0]}"


def read(stage_dir: str, source: str) -> Output:
  step, directory = find(stage_dir, source)
  if (directory / CAPTION_FILE).exists():
    path = directory / CAPTION_FILE
    data = json.loads(path.read_text())
    kind = "naming" if (directory / RANKS_FILE).exists() else "captioning"
    return Output(source, step, str(path), kind, nocaps.flatten_scores(data), data)
  path = directory / RETRIEVAL_FILE
  if not path.exists():
    raise FileNotFoundError(f"{directory} has neither {CAPTION_FILE} nor {RETRIEVAL_FILE}")
  data = json.loads(path.read_text())
  return Output(source, step, str(path), "retrieval",
                {k: float(v) for k, v in data["metrics"].items()}, data)


def unit_scores(output: Output, metric: str) -> tuple[np.ndarray, np.ndarray]:
  """(num, den) f64 [N] over `output.units` for `metric`; their ratio is the metric."""
  ids, strata = output.units
  group, _, name = metric.partition("/")
  if output.kind == "captioning":
    per_image = output.data.get("per_image", {})
    if name not in per_image:
      raise NoUnitScores(f"{name} has no per-image scores in {output.path} (only "
                         f"{sorted(per_image)}: the others are corpus statistics)")
    num = np.asarray([per_image[name][i] for i in ids], np.float64)
    den = np.asarray([1.0 if group == nocaps.OVERALL or s == group else 0.0 for s in strata])
    num = num * den
  else:
    match = re.fullmatch(r"R@(\d+)", name)
    if group != "image_retrieval" or not match:
      raise NoUnitScores(f"{metric}: per-query ranks are kept for image_retrieval/R@K only")
    k = int(match.group(1))
    per_query = output.data["per_query"]["image_retrieval"]
    position = {image: i for i, image in enumerate(ids)}
    owner = np.asarray([position[i] for i in per_query["image_id"]], np.int64)
    rank = np.asarray(per_query["rank"], np.int64)
    num = 100.0 * np.bincount(owner, weights=(rank >= 0) & (rank < k), minlength=len(ids))
    den = np.bincount(owner, minlength=len(ids)).astype(np.float64)
  reported = output.metrics.get(metric)
  if reported is None:
    raise KeyError(f"{output.path} reports no {metric!r}")
  if den.sum() == 0 or not np.isclose(num.sum() / den.sum(), reported, rtol=1e-9, atol=1e-9):
    raise ValueError(f"{output.path}: {metric} from per-image scores is "
                     f"{num.sum() / max(den.sum(), 1e-300)!r}, but the report says "
                     f"{reported!r}")
  return num, den
