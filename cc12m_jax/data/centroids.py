"""The moc objective's centroids file, and the nearest-centroid assignment.

The k-means job (clusters.py) writes `<data_dir>/<source>/centroids.npy`; the
moc loss reads it here and labels each region by its nearest centroid on
device. Read through etils.epath (local paths and gs://), not TensorFlow, so
the objectives import where only JAX is installed (docs/architecture.md).
"""
import io
import os

import jax
import jax.numpy as jnp
import numpy as np
from etils import epath

from cc12m_jax.data import metadata as metadata_lib

CENTROIDS_FILE = "centroids.npy"
INFO_FILE = "centroids.json"


def centroids_path(data_dir: str, source: str) -> str:
  return os.path.join(metadata_lib.source_dir(data_dir, source), CENTROIDS_FILE)


def nearest_centroid(points: jax.Array, centroids: jax.Array) -> jax.Array:
  """points f32 [..., D], centroids f32 [C, D] -> i32 [...]: argmin_c |x - c|^2.

  |x - c|^2 = |x|^2 - 2 x.c + |c|^2, and |x|^2 does not depend on c. The
  product runs at full f32 precision (TPUs would round it to bf16), so the
  loss assigns exactly as the k-means job did.
  """
  centroids = centroids.astype(jnp.float32)
  cross = jnp.einsum("...d,cd->...c", points.astype(jnp.float32), centroids,
                     precision=jax.lax.Precision.HIGHEST)  # [..., C]
  norms = jnp.sum(centroids * centroids, axis=-1)  # [C]
  return jnp.argmin(norms - 2.0 * cross, axis=-1).astype(jnp.int32)  # [...]


def load_centroids(path: str, feature_dim: int | None = None) -> np.ndarray:
  """f32 [C, D] from a centroids.npy; errors name the file (and the expected D)."""
  file = epath.Path(path)
  if not file.exists():
    raise FileNotFoundError(f"{path}: no centroids file; compute it with "
                            "`python -m cc12m_jax.data.clusters` (docs/objectives.md).")
  centroids = np.load(io.BytesIO(file.read_bytes()), allow_pickle=False)
  if centroids.ndim != 2 or not np.all(np.isfinite(centroids)):
    raise ValueError(f"{path}: centroids must be a finite [C, D] array, got "
                     f"shape {centroids.shape}.")
  if feature_dim is not None and centroids.shape[1] != feature_dim:
    raise ValueError(f"{path}: centroids have dimension {centroids.shape[1]}, the "
                     f"features {feature_dim}.")
  return centroids.astype(np.float32)
