"""Masked object classification ('moc', paper Appendix D.2.2).

A share of each image's real regions (config.objectives.region_mask_rate,
default 0.15) is chosen each step; their features are zeroed (their boxes
stay, as in UNITER's masked region modelling) and a head on the encoder's
region slots predicts each chosen region's cluster:

  label(b, r) = argmin_c |region_features[b, r] - centroid_c|^2      (unmasked feature)
  L_moc = - sum_{b,r chosen} log p(label(b, r) | masked image) / #chosen

The centroids come from the k-means job (cc12m_jax/data/clusters.py),
`<data_dir>/<source>/centroids.npy` beside metadata.json, loaded once when
the model is built; labels are assigned here, on device, from the batch's
own features (an [B, R, D] x [D, C] product per step), so the records and
the batch contract are unchanged and a new clustering needs no rewrite.

The paper uses moc as an auxiliary loss of ic ('ic+0.1*moc',
objectives/multitask.py); 'moc' alone trains an image encoder only.
Metrics: loss, accuracy, mask_rate (chosen / real regions), num_targets.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from cc12m_jax.data import batch_spec, centroids as centroids_lib, sources as sources_lib
from cc12m_jax.models import multitask as multitask_model
from cc12m_jax.objectives import masking

TASKS = ("moc",)
INPUT_KEYS = batch_spec.IMAGE_KEYS
EVALUATOR = "none"


def centroids_file(config: ml_collections.ConfigDict) -> str:
  """config.objectives.centroids, or <data_dir>/<first train source>/centroids.npy."""
  if config.objectives.centroids:
    return config.objectives.centroids
  first = sources_lib.train_sources(config.data)[0].name
  return centroids_lib.centroids_path(config.data.data_dir, first)


def load_centroids(config: ml_collections.ConfigDict) -> np.ndarray:
  """f32 [C, D] of the run (checked against config.model.feature_dim when set)."""
  feature_dim = int(config.model.feature_dim) or None
  return centroids_lib.load_centroids(centroids_file(config), feature_dim)


def build_model(config: ml_collections.ConfigDict,
                vocab_size: int) -> multitask_model.MultiTaskModel:
  return multitask_model.build(config, vocab_size, TASKS, load_centroids(config))


def mask_regions(rng: jax.Array | None, batch: Mapping[str, Any], rate: float
                 ) -> tuple[dict[str, Any], jax.Array]:
  """-> (the batch with chosen regions' features zeroed, chosen bool [B, R])."""
  chosen = masking.random_subset(masking.mask_key(rng), batch["region_mask"].astype(bool),
                                 rate)  # [B, R]
  features = jnp.where(chosen[..., None], 0.0, batch["region_features"])  # [B, R, D]
  return dict(batch, region_features=features), chosen


def cluster_labels(features: jax.Array, centroids: np.ndarray) -> jax.Array:
  """features f32 [B, R, D] -> i32 [B, R]: each region's nearest centroid."""
  if features.shape[-1] != centroids.shape[1]:
    raise ValueError(f"moc centroids have dimension {centroids.shape[1]}, the region features "
                     f"{features.shape[-1]}: recompute them for this data "
                     "(python -m cc12m_jax.data.clusters).")
  return centroids_lib.nearest_centroid(features, jnp.asarray(centroids))  # [B, R]


def loss_fn(model: multitask_model.MultiTaskModel, params: Any, batch: Mapping[str, Any],
            rng: jax.Array | None, *, train: bool) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Regions chosen from `rng` (also at eval: key 0 when None); dropout only when training."""
  labels = cluster_labels(batch["region_features"], model.centroids.value)  # [B, R]
  masked, chosen = mask_regions(rng, batch, float(model.objectives.region_mask_rate))
  rngs = {"dropout": rng} if (train and rng is not None) else {}
  logits = model.apply({"params": params}, masked, train=train, rngs=rngs,
                       method=multitask_model.MultiTaskModel.moc_logits)  # [B, R, C]
  return masking.masked_cross_entropy(logits, labels, chosen, batch["region_mask"], batch,
                                      "accuracy")
