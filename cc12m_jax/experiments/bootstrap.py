"""Paired bootstrap over images: an interval for a difference between conditions.

A contrast is a weighted sum of table cells, e.g. CC12M's out-of-domain
CIDEr minus CC3M's, or a difference of two such gains. Every cell is a
ratio over the images of one eval source (cc12m_jax/experiments/scores.py:
`sum(num) / sum(den)`). One resample draws, for every eval source in the
contrast, images with replacement **within each stratum** (nocaps domain;
one stratum when there are none), as many as the stratum has, and applies
the same draw to every cell of that source: to every condition (the
comparison is paired: both conditions are scored on the same resampled
images) and every seed. A draw is counts [B, N] of how often each image
was drawn; a cell's value in resample b is `counts[b] @ num / counts[b] @ den`.

With several seeds the contrast is the mean over seeds (each term's weight
is divided by the number of seeds), all seeds sharing the draw: the
interval covers the sampling of images for the seed-averaged difference,
and the spread over seeds is reported beside it as a standard deviation.

Draws are reproducible: `np.random.default_rng(seed)` afresh for every
contrast, then for each source in sorted order and each stratum in sorted
order one `rng.integers(0, n, size=(B, n))` over that stratum's images
(in the sorted order of their ids). The interval is the percentile
interval: `np.percentile(values, [50 (1 - c), 100 - 50 (1 - c)])` for
confidence c (the default, linear interpolation).
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Term:
  """weight x (num . counts) / (den . counts), over the images of `source`."""
  weight: float
  source: str
  num: np.ndarray       # f64 [N]
  den: np.ndarray       # f64 [N]


@dataclasses.dataclass(frozen=True)
class Interval:
  low: float
  high: float
  values: np.ndarray    # f64 [B]: the contrast in every resample


def resample_counts(strata: Sequence[str], samples: int, rng: np.random.Generator
                    ) -> np.ndarray:
  """i64 [samples, N]: how often each image is drawn, within its stratum."""
  strata = np.asarray(strata)
  counts = np.zeros((samples, strata.size), np.int64)
  for name in sorted(set(strata.tolist())):
    members = np.flatnonzero(strata == name)  # [m]
    m = members.size
    draws = rng.integers(0, m, size=(samples, m))  # [B, m], positions within the stratum
    flat = (draws + np.arange(samples)[:, None] * m).ravel()
    counts[:, members] = np.bincount(flat, minlength=samples * m).reshape(samples, m)
  return counts


def paired_interval(terms: Sequence[Term], strata: dict[str, Sequence[str]], *,
                    samples: int, seed: int, confidence: float) -> Interval:
  """The percentile interval of sum(weight x cell) over paired resamples.

  `strata[source]` gives the stratum of each image of `source`, in the order
  of every term's num/den for that source.
  """
  rng = np.random.default_rng(seed)
  counts = {source: resample_counts(strata[source], samples, rng)
            for source in sorted({t.source for t in terms})}
  values = np.zeros((samples,), np.float64)
  for t in terms:
    c = counts[t.source].astype(np.float64)  # [B, N]
    values += t.weight * (c @ t.num) / (c @ t.den)
  tail = 50.0 * (1.0 - confidence)
  low, high = np.percentile(values, [tail, 100.0 - tail])
  return Interval(float(low), float(high), values)
