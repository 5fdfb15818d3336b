"""The k-means job behind moc's labels: NumPy's Lloyd iterations, reproducible, end to end."""
import json
import os

import jax
import numpy as np
import pytest

from cc12m_jax.data import clusters, metadata, records
from cc12m_jax.objectives import moc
from tests.objectives import tiny


def _numpy_kmeans(points, start, iterations):
  """Textbook Lloyd in float64: assign to the nearest centroid, move to the mean."""
  centroids = start.astype(np.float64)
  for _ in range(iterations):
    ids = ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(-1)
    for c in range(len(centroids)):
      if (ids == c).any():  # an empty cluster keeps its centroid
        centroids[c] = points[ids == c].mean(0)
  return centroids, ((points[:, None] - centroids[None]) ** 2).sum(-1).argmin(-1)


def _points(seed=0):
  rng = np.random.default_rng(seed)
  centers = 2.0 * rng.normal(size=(6, 5))
  return (centers[rng.integers(0, 6, 300)] + rng.normal(size=(300, 5))).astype(np.float32)


def test_kmeans_equals_numpy_and_is_reproducible():
  points = _points()
  # chunk 64: several blocks, the last one padded (300 = 4 x 64 + 44).
  centroids, ids, inertia = clusters.kmeans(points, 6, iterations=8, seed=3, chunk=64)
  start = clusters.initial_centroids(points, 6, seed=3)
  expected, expected_ids = _numpy_kmeans(points, start, 8)
  np.testing.assert_allclose(centroids, expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(ids, expected_ids)
  assert np.all(np.diff(inertia) <= 1e-3)  # Lloyd never increases the inertia
  # Same seed: the same bits; points split over 8 devices: the same clusters.
  again = clusters.kmeans(points, 6, iterations=8, seed=3, chunk=64)
  np.testing.assert_array_equal(again[0], centroids)
  split = clusters.kmeans(points, 6, iterations=8, seed=3, chunk=64, devices=jax.devices())
  np.testing.assert_allclose(split[0], centroids, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(split[1], ids)
  other = clusters.kmeans(points, 6, iterations=8, seed=4, chunk=64)
  assert not np.array_equal(other[0], centroids)


def _write_source(data_dir: str, num_images: int = 40, dim: int = tiny.FEATURE_DIM) -> None:
  rng = np.random.default_rng(1)
  recs = []
  for i in range(num_images):
    n = int(rng.integers(1, 6))
    recs.append(records.FeatureRecord(
        image_id=f"img{i}", source="cc12m",
        global_feature=rng.normal(size=dim).astype(np.float32),
        region_features=(tiny.centroids()[rng.integers(0, 5, n)]
                         + 0.1 * rng.normal(size=(n, dim))).astype(np.float32),
        region_boxes=np.tile(np.array([[0.1, 0.1, 0.5, 0.5]], np.float32), (n, 1)),
        tags=["dog"], tag_scores=np.ones(1, np.float32), captions=["a dog"],
        width=100, height=100))
  records.write_records(metadata.shard_prefix(data_dir, "cc12m"), recs, num_shards=3)
  metadata.write_metadata(data_dir, metadata.DatasetMetadata(
      source="cc12m", feature_dim=dim, num_records=num_images, num_captions=num_images,
      num_shards=3))


def test_the_job_writes_centroids_beside_the_metadata_that_moc_reads(tmp_path):
  data_dir = str(tmp_path)
  _write_source(data_dir)
  kwargs = dict(num_clusters=5, sample_regions_count=60, iterations=10, seed=0, chunk=32)
  path = clusters.run(data_dir, "cc12m", **kwargs)
  assert path == os.path.join(data_dir, "cc12m", "centroids.npy")
  first = np.load(path)
  info = json.load(open(os.path.join(data_dir, "cc12m", "centroids.json")))
  assert info["sample_regions"] == 60 and sum(info["cluster_sizes"]) == 60
  assert info["num_clusters"] == 5 and len(info["inertia"]) == 10
  # Regions were drawn around 5 known centres: k-means finds each of them.
  distance = np.abs(first[:, None] - tiny.centroids()[None]).max(-1)  # [5 found, 5 true]
  assert np.all(distance.min(0) < 0.2), distance.min(0)
  clusters.run(data_dir, "cc12m", **kwargs)
  np.testing.assert_array_equal(np.load(path), first)  # the same data and seed: the same file
  # The moc objective finds the file from the config's data_dir and first train source.
  config = tiny.config("moc")
  config.objectives.centroids = ""
  config.data.data_dir, config.data.train_sources = data_dir, "cc12m"
  np.testing.assert_array_equal(moc.load_centroids(config), first)
  config.model.feature_dim = 7
  with pytest.raises(ValueError, match="centroids have dimension 12, the features 7"):
    moc.load_centroids(config)
