"""Tiny models of the masked and multi-task objectives, shared by tests/objectives.

Width 32, one encoder / decoder / text layer, the random batches of
tests/models/tiny.py (R = 4 regions, T = 3 tags, L = 9 tokens, V = 48).
Models, parameters and jitted losses are cached: each compiles once per
test session.
"""
from __future__ import annotations

import functools
import os
import tempfile

import flax.linen as nn
import jax
import ml_collections
import numpy as np

from cc12m_jax.objectives import registry
from tests.models import tiny

VOCAB = tiny.VOCAB
FEATURE_DIM = tiny.FEATURE_DIM
NUM_CLUSTERS = 5


@functools.lru_cache(maxsize=None)
def centroids() -> np.ndarray:
  """C = 5 well-separated centroids f32 [5, D] (scale 4 against unit-normal noise)."""
  return (4.0 * np.random.default_rng(7).normal(size=(NUM_CLUSTERS, FEATURE_DIM))
          ).astype(np.float32)


@functools.lru_cache(maxsize=None)
def centroids_file() -> str:
  path = os.path.join(tempfile.mkdtemp(prefix="cc12m_centroids_"), "centroids.npy")
  np.save(path, centroids())
  return path


def config(objective: str, dropout: float = 0.0, **objectives) -> ml_collections.ConfigDict:
  """The tiny config of `objective`, without dropout unless asked."""
  cfg = tiny.tiny_config(num_encoder_layers=1, num_decoder_layers=1, text_encoder_layers=1,
                         projection_dim=16, temperature=0.1, dropout=dropout,
                         input_dropout=dropout, attention_dropout=0.0)
  cfg.train.objective = objective
  cfg.objectives.centroids = centroids_file()
  # Higher rates than the defaults: a 4-example batch of ~5-word captions and
  # ~3 real regions still gets several targets.
  cfg.objectives.text_mask_rate = 0.4
  cfg.objectives.region_mask_rate = 0.5
  for key, value in objectives.items():
    cfg.objectives[key] = value
  return cfg


def batch(batch_size: int = 4, seed: int = 0) -> dict:
  """A random batch whose real regions lie near known centroids (labels: `true_clusters`)."""
  b = tiny.random_batch(batch_size, seed)
  labels = true_clusters(b)
  noise = np.random.default_rng(seed + 100).normal(size=b["region_features"].shape)
  features = centroids()[labels] + 0.3 * noise
  b["region_features"] = np.where(b["region_mask"][..., None], features, 0.0).astype(np.float32)
  return b


def true_clusters(b: dict) -> np.ndarray:
  """i32 [B, R]: the cluster each region of `batch(...)` was drawn around (by position)."""
  shape = b["region_mask"].shape
  return (np.arange(shape[0])[:, None] * 3 + np.arange(shape[1])[None, :]) % NUM_CLUSTERS


@functools.lru_cache(maxsize=None)
def model_and_params(objective: str, dropout: float = 0.0):
  """(objective, model, params) of the tiny config, initialised by a jitted init."""
  obj = registry.get(objective)
  model = obj.build_model(config(objective, dropout), VOCAB)
  dummy = tiny.random_batch(2)
  # An rbg init key: XLA compiles its random bits ~8x faster on CPU than
  # threefry's, and the init is most of a tiny model's compile time.
  params = jax.jit(lambda: nn.meta.unbox(
      model.init(jax.random.key(0, impl="rbg"), dummy, train=False)["params"]))()
  return obj, model, params
