"""Region-feature clusters of a source: the labels of the moc objective.

    python -m cc12m_jax.data.clusters --data_dir=data/features --source=cc12m \
        --num_clusters=1024 --sample_regions=200000 --iterations=20 --seed=0

writes, beside the source's metadata.json,

  <data_dir>/<source>/centroids.npy    f32 [C, D]: the k-means centroids
  <data_dir>/<source>/centroids.json   how they were made (sample, seed,
                                       iterations, inertia per iteration,
                                       cluster sizes)

The records are not rewritten: the moc loss assigns each region its nearest
centroid on device (`nearest_centroid`, an [N, D] x [D, C] product per
step), so a new clustering needs no pass over 12M records, and the batch
contract stays as it is. At paper size (batch 4096 x 16 regions, D = 2048,
C = 1024) that product is 0.27 TFLOP a step, under 1% of a train step's.

The job:
  1. sample: shards in a seeded order, images kept by a seeded hash of their
     id (`image_fraction`), every real region of a kept image, until
     `sample_regions`. A pure function of (data, seed, sizes).
  2. k-means (Lloyd) on the sample in one jitted loop: centroids start at
     k-means++ draws from the sample (seeded); each iteration
     assigns every point to its nearest centroid (in chunks, so memory is
     [chunk, C], not [N, C]) and moves each centroid to the mean of its
     points; a centroid with no points stays where it is. Bit-for-bit
     reproducible on one backend; with `--devices` > 1 the points are split
     over the devices and XLA all-reduces the per-cluster sums.

Scale: 200k regions x 2048 dims is 1.6 GB of f32 and 0.8 TFLOP an iteration:
seconds on one accelerator, minutes on a CPU host. Sampled, not streamed:
200 points per cluster estimate a centroid well, and a sample that fits one
device keeps the loop a single compiled program.
"""
from __future__ import annotations

import functools
import io
import json
import os
import zlib
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import tensorflow as tf
from absl import app, flags, logging
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from cc12m_jax import config_check
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data.centroids import INFO_FILE, centroids_path, nearest_centroid
from cc12m_jax.data import records as records_lib

@functools.partial(jax.jit, static_argnames=("num_clusters",))
def _kmeans_plus_plus(points: jax.Array, weights: jax.Array, key: jax.Array,
                      num_clusters: int) -> jax.Array:
  """k-means++ seeding of points f32 [N, D] (weight 0 = padding) -> f32 [C, D].

  The first centroid is a uniform draw, each next one a draw with
  probability proportional to its squared distance to the nearest chosen
  one: far-apart starts, so two centroids rarely begin in one cluster (the
  local optimum a uniform choice of starts often ends in).
  """
  first_key, key = jax.random.split(key)
  valid = weights > 0  # [N]
  first = jax.random.categorical(first_key, jnp.where(valid, 0.0, -jnp.inf))
  centroids = jnp.zeros((num_clusters, points.shape[1]), jnp.float32).at[0].set(points[first])
  d2 = jnp.sum((points - points[first]) ** 2, axis=-1)  # [N]

  def step(i, state):
    centroids, d2, key = state
    key, draw_key = jax.random.split(key)
    # Points already chosen (d2 = 0) stay possible but last: duplicates in the data.
    logits = jnp.where(valid, jnp.log(jnp.maximum(d2, 1e-30)), -jnp.inf)  # [N]
    chosen = points[jax.random.categorical(draw_key, logits)]  # [D]
    d2 = jnp.minimum(d2, jnp.sum((points - chosen) ** 2, axis=-1))
    return centroids.at[i].set(chosen), d2, key

  return jax.lax.fori_loop(1, num_clusters, step, (centroids, d2, key))[0]


def initial_centroids(points: np.ndarray, num_clusters: int, seed: int) -> np.ndarray:
  """k-means++ starts: `num_clusters` rows of points f32 [N, D], chosen by `seed` -> [C, D]."""
  if num_clusters > len(points):
    raise ValueError(f"--num_clusters={num_clusters} exceeds the {len(points)} sampled regions.")
  points = jnp.asarray(points, jnp.float32)
  return np.asarray(_kmeans_plus_plus(points, jnp.ones(points.shape[:1], jnp.float32),
                                      jax.random.PRNGKey(seed), num_clusters))


@functools.partial(jax.jit, static_argnames=("iterations",))
def _lloyd(blocks: jax.Array, weights: jax.Array, centroids: jax.Array, iterations: int
           ) -> tuple[jax.Array, jax.Array]:
  """blocks f32 [M, chunk, D], weights f32 [M, chunk] (0 = padding), centroids f32 [C, D]
  -> (centroids [C, D], inertia f32 [iterations] of each assignment)."""
  num_clusters = centroids.shape[0]

  def assign_and_sum(centroids):
    def block(carry, inputs):
      sums, counts, inertia = carry
      x, w = inputs  # [chunk, D], [chunk]
      ids = nearest_centroid(x, centroids)  # [chunk]
      nearest = centroids[ids]  # [chunk, D]
      inertia = inertia + jnp.sum(w * jnp.sum((x - nearest) ** 2, axis=-1))
      sums = sums + jax.ops.segment_sum(x * w[:, None], ids, num_segments=num_clusters)  # [C, D]
      counts = counts + jax.ops.segment_sum(w, ids, num_segments=num_clusters)  # [C]
      return (sums, counts, inertia), None

    zeros = (jnp.zeros_like(centroids), jnp.zeros((num_clusters,), jnp.float32),
             jnp.zeros((), jnp.float32))
    return jax.lax.scan(block, zeros, (blocks, weights))[0]

  def step(i, state):
    centroids, history = state
    sums, counts, inertia = assign_and_sum(centroids)
    moved = sums / jnp.maximum(counts, 1.0)[:, None]  # [C, D]
    centroids = jnp.where(counts[:, None] > 0, moved, centroids)  # empty clusters stay
    return centroids, history.at[i].set(inertia)

  return jax.lax.fori_loop(0, iterations, step,
                           (centroids, jnp.zeros((iterations,), jnp.float32)))


def kmeans(points: np.ndarray, num_clusters: int, *, iterations: int, seed: int,
           chunk: int = 4096, devices: Sequence[jax.Device] | None = None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Lloyd's k-means of points f32 [N, D].

  Returns (centroids f32 [C, D], ids i32 [N] of the final centroids,
  inertia f32 [iterations]: the sum of squared distances of each
  iteration's assignment). `devices` (default: the first device) split the
  points; the result does not depend on how many up to f32 rounding.
  """
  points = np.asarray(points, np.float32)
  devices = list(devices) if devices else jax.devices()[:1]
  start = initial_centroids(points, num_clusters, seed)
  n, d = points.shape
  # Blocks of `chunk` points, each split evenly over the devices.
  chunk = -(-min(chunk, n) // len(devices)) * len(devices)
  num_blocks = -(-n // chunk)
  padded = np.zeros((num_blocks * chunk, d), np.float32)
  padded[:n] = points
  weights = np.zeros((num_blocks * chunk,), np.float32)
  weights[:n] = 1.0
  mesh = Mesh(np.asarray(devices), ("data",))
  split = NamedSharding(mesh, P(None, "data"))
  blocks = jax.device_put(padded.reshape(num_blocks, chunk, d), split)
  block_weights = jax.device_put(weights.reshape(num_blocks, chunk), split)
  centroids, inertia = _lloyd(blocks, block_weights,
                              jax.device_put(start, NamedSharding(mesh, P())), iterations)
  ids = jax.jit(nearest_centroid)(jnp.asarray(points), centroids)
  return np.asarray(centroids), np.asarray(ids), np.asarray(inertia)


def _keep_image(image_id: str, fraction: float, seed: int) -> bool:
  """A seeded hash of the id below `fraction`: the same images whatever the read order."""
  if fraction >= 1.0:
    return True
  return zlib.crc32(f"{seed}:{image_id}".encode()) < fraction * 2.0**32


def sample_regions(data_dir: str, source: str, max_regions: int, *, seed: int,
                   image_fraction: float = 1.0) -> np.ndarray:
  """f32 [N <= max_regions, D]: real region features of a seeded sample of images."""
  meta = metadata_lib.load_metadata(data_dir, source)
  files = metadata_lib.shard_files(data_dir, source)
  order = np.random.default_rng(seed).permutation(len(files))
  chunks, total = [], 0
  for index in order:
    for record in records_lib.read_records([files[index]], meta.feature_dim,
                                           feature_dtype=meta.feature_dtype):
      if not _keep_image(record.image_id, image_fraction, seed):
        continue
      regions = np.asarray(record.region_features, np.float32)[:max_regions - total]
      chunks.append(regions)
      total += len(regions)
      if total >= max_regions:
        return np.concatenate(chunks)
  if not chunks:
    raise ValueError(f"source {source!r} in {data_dir}: no regions sampled "
                     f"(image_fraction={image_fraction}).")
  return np.concatenate(chunks)


def write_centroids(data_dir: str, source: str, centroids: np.ndarray,
                    info: dict[str, Any]) -> str:
  """Writes centroids.npy (f32 [C, D]) and centroids.json beside metadata.json."""
  path = centroids_path(data_dir, source)
  buffer = io.BytesIO()
  np.save(buffer, np.asarray(centroids, np.float32))
  with tf.io.gfile.GFile(path, "wb") as f:  # gs:// as well as local paths
    f.write(buffer.getvalue())
  with tf.io.gfile.GFile(os.path.join(os.path.dirname(path), INFO_FILE), "w") as f:
    f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
  return path


def run(data_dir: str, source: str, *, num_clusters: int, sample_regions_count: int,
        iterations: int, seed: int, image_fraction: float = 1.0, chunk: int = 4096,
        devices: Sequence[jax.Device] | None = None) -> str:
  """The whole job: sample, cluster, write. Returns the centroids path."""
  points = sample_regions(data_dir, source, sample_regions_count, seed=seed,
                          image_fraction=image_fraction)
  centroids, ids, inertia = kmeans(points, num_clusters, iterations=iterations, seed=seed,
                                   chunk=chunk, devices=devices)
  info = {
      "source": source, "num_clusters": num_clusters, "feature_dim": int(points.shape[1]),
      "sample_regions": int(len(points)), "image_fraction": image_fraction,
      "iterations": iterations, "seed": seed, "inertia": [float(x) for x in inertia],
      "cluster_sizes": np.bincount(ids, minlength=num_clusters).tolist(),
  }
  path = write_centroids(data_dir, source, centroids, info)
  logging.info("%d centroids of %d regions (inertia %.4g -> %.4g) written to %s",
               num_clusters, len(points), inertia[0], inertia[-1], path)
  return path


def _define_flags() -> dict[str, Any]:
  """The command line's flags; defined only when run as a program, so that
  importing the module (the moc objective does) defines no global flags."""
  return {
      "data_dir": flags.DEFINE_string("data_dir", "data/features", "Root of the sources."),
      "source": flags.DEFINE_string("source", "cc12m", "The source to cluster (its "
                                    "pre-training data)."),
      "num_clusters": flags.DEFINE_integer("num_clusters", 1024, "C: the moc head's classes."),
      "sample_regions": flags.DEFINE_integer("sample_regions", 200_000, "Regions clustered."),
      "image_fraction": flags.DEFINE_float("image_fraction", 1.0, "Share of images eligible "
                                           "(a seeded hash of the image id)."),
      "iterations": flags.DEFINE_integer("iterations", 20, "Lloyd iterations."),
      "seed": flags.DEFINE_integer("seed", 0, "Sample order and initial centroids."),
      "chunk": flags.DEFINE_integer("chunk", 4096, "Points assigned at a time (memory "
                                    "[chunk, C])."),
      "devices": flags.DEFINE_integer("devices", 1, "Local devices the points are split "
                                      "over (0: all)."),
  }


def main(argv: Sequence[str], flag_values: dict[str, Any]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  v = {name: holder.value for name, holder in flag_values.items()}
  devices = jax.local_devices()[:v["devices"] or None]
  print(run(v["data_dir"], v["source"], num_clusters=v["num_clusters"],
            sample_regions_count=v["sample_regions"], iterations=v["iterations"],
            seed=v["seed"], image_fraction=v["image_fraction"], chunk=v["chunk"],
            devices=devices))


if __name__ == "__main__":
  FLAG_VALUES = _define_flags()
  app.run(lambda argv: main(argv, FLAG_VALUES), flags_parser=config_check.parse_flags)
