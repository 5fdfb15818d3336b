"""The paired bootstrap equals a direct computation; per-query ranks give R@K."""
import numpy as np
import pytest

from cc12m_jax.evaluation import retrieval, retrieval_eval
from cc12m_jax.experiments import bootstrap


def direct_interval(cells, strata, samples, seed, confidence):
  """The documented procedure, written out image by image.

  cells: [(weight, source, num, den)]; strata: {source: [stratum of each image]}.
  """
  rng = np.random.default_rng(seed)
  draws = {}  # source -> stratum -> [B, m] positions within the stratum
  for source in sorted({c[1] for c in cells}):
    draws[source] = {}
    for name in sorted(set(strata[source])):
      m = sum(1 for s in strata[source] if s == name)
      draws[source][name] = rng.integers(0, m, size=(samples, m))
  values = []
  for b in range(samples):
    total = 0.0
    for weight, source, num, den in cells:
      images = []
      for name in sorted(set(strata[source])):
        members = [i for i, s in enumerate(strata[source]) if s == name]
        images += [members[p] for p in draws[source][name][b]]
      total += weight * sum(num[i] for i in images) / sum(den[i] for i in images)
    values.append(total)
  tail = 50 * (1 - confidence)
  return np.percentile(values, [tail, 100 - tail]), np.asarray(values)


@pytest.mark.parametrize("seed", [0, 7])
def test_paired_interval_equals_direct_computation(seed):
  gen = np.random.default_rng(123)
  strata = {"nocaps_val": ["in-domain"] * 5 + ["out-domain"] * 4 + ["near-domain"] * 3,
            "coco_val": [""] * 6}
  group = np.asarray([s == "out-domain" for s in strata["nocaps_val"]], float)
  a, b = gen.random(12), gen.random(12)
  c, d = gen.random(6), gen.random(6)
  cells = [(1.0, "nocaps_val", b * group, group), (-1.0, "nocaps_val", a * group, group),
           (0.5, "nocaps_val", b, np.ones(12)), (-0.5, "coco_val", c, np.ones(6)),
           (0.25, "coco_val", d, np.ones(6))]
  expect, expect_values = direct_interval(cells, strata, 300, seed, 0.95)
  got = bootstrap.paired_interval([bootstrap.Term(w, s, n, dn) for w, s, n, dn in cells], strata,
                                  samples=300, seed=seed, confidence=0.95)
  np.testing.assert_allclose(got.values, expect_values, rtol=1e-12)
  np.testing.assert_allclose([got.low, got.high], expect, rtol=1e-12)


def test_resampling_keeps_every_stratum_size():
  strata = ["x"] * 3 + ["y"] * 5
  counts = bootstrap.resample_counts(strata, 50, np.random.default_rng(0))
  assert (counts[:, :3].sum(axis=1) == 3).all() and (counts[:, 3:].sum(axis=1) == 5).all()


def test_first_hit_ranks_reproduce_recall_at_k():
  gen = np.random.default_rng(0)
  images = gen.normal(size=(7, 8)).astype(np.float32)
  owner = np.repeat(np.arange(7), 3)
  texts = (images[owner] + 1.5 * gen.normal(size=(21, 8))).astype(np.float32)
  metrics = retrieval.retrieval_metrics(images, texts, owner)
  _, top = retrieval.top_k_chunked(texts, images, 7)
  ranks = retrieval_eval.first_hit_ranks(top, owner)
  for k in (1, 5, 10):
    assert 100.0 * np.mean((ranks >= 0) & (ranks < k)) == pytest.approx(
        metrics[f"image_retrieval/R@{k}"])
  assert 0 < metrics["image_retrieval/R@1"] < 100  # the test ranks something
