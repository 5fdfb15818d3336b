"""Chunked top-k ranking and Recall@K against brute force."""
import jax
import numpy as np
import pytest
from jax.sharding import Mesh

from cc12m_jax.evaluation import retrieval


def _tied_data(rng, num_images=37, per_image=5, dim=4):
  """Small-integer embeddings: exact float scores, many ties, duplicate rows."""
  images = rng.integers(-1, 2, size=(num_images, dim)).astype(np.float32)
  images[5] = images[2]  # duplicate images
  images[30] = images[2]
  caption_image = np.repeat(np.arange(num_images), per_image)
  captions = rng.integers(-1, 2, size=(caption_image.size, dim)).astype(np.float32)
  captions[7] = captions[3]  # duplicate captions (different images)
  captions[100] = captions[3]
  return images, captions, caption_image


def _brute_force_ranking(queries, gallery):
  """Full score matrix, sorted by (-score, gallery index)."""
  scores = queries.astype(np.float64) @ gallery.astype(np.float64).T  # [Q, G]
  order = np.empty(scores.shape, np.int64)
  for q in range(scores.shape[0]):
    order[q] = np.lexsort((np.arange(scores.shape[1]), -scores[q]))
  return scores, order


def _brute_force_recall(queries, gallery, query_labels, gallery_labels, ks):
  _, order = _brute_force_ranking(queries, gallery)
  out = {}
  for k in ks:
    hits = [np.any(gallery_labels[order[q, :k]] == query_labels[q])
            for q in range(len(queries))]
    out[k] = float(np.mean(hits))
  return out


@pytest.mark.parametrize("gallery_chunk,query_block", [(1, 1000), (7, 16), (8, 5), (1000, 1000)])
def test_chunked_top_k_equals_full_top_k(gallery_chunk, query_block):
  rng = np.random.default_rng(0)
  images, captions, _ = _tied_data(rng)
  scores, order = _brute_force_ranking(captions, images)
  top_s, top_i = retrieval.top_k_chunked(captions, images, 10, gallery_chunk=gallery_chunk,
                                         query_block=query_block)
  np.testing.assert_array_equal(top_i, order[:, :10])
  np.testing.assert_array_equal(top_s, np.take_along_axis(scores, order[:, :10], 1))
  # Also equal to lax.top_k on the full matrix (same tie rule).
  full_s, full_i = jax.lax.top_k(captions @ images.T, 10)
  np.testing.assert_array_equal(top_i, np.asarray(full_i))
  np.testing.assert_array_equal(top_s, np.asarray(full_s))


def test_chunked_top_k_on_gaussian_data():
  rng = np.random.default_rng(1)
  queries = rng.normal(size=(50, 32)).astype(np.float32)
  gallery = rng.normal(size=(301, 32)).astype(np.float32)
  full_s, full_i = jax.lax.top_k(queries @ gallery.T, 10)
  top_s, top_i = retrieval.top_k_chunked(queries, gallery, 10, gallery_chunk=64, query_block=16)
  np.testing.assert_array_equal(top_i, np.asarray(full_i))
  np.testing.assert_allclose(top_s, np.asarray(full_s), rtol=1e-5)


def test_ties_go_to_the_lower_gallery_index():
  gallery = np.ones((20, 3), np.float32)
  gallery[13] = 2.0  # one strictly better item
  queries = np.ones((2, 3), np.float32)
  _, top_i = retrieval.top_k_chunked(queries, gallery, 5, gallery_chunk=3)
  np.testing.assert_array_equal(top_i, [[13, 0, 1, 2, 3]] * 2)


def test_sharded_ranking_over_8_devices_equals_single_device():
  assert jax.device_count() == 8
  mesh = Mesh(np.array(jax.devices()).reshape(4, 2, 1), ("data", "fsdp", "model"))
  rng = np.random.default_rng(2)
  images, captions, _ = _tied_data(rng)
  one = retrieval.top_k_chunked(captions, images, 10, gallery_chunk=9, query_block=24)
  many = retrieval.top_k_chunked(captions, images, 10, gallery_chunk=9, query_block=24,
                                 mesh=mesh)
  np.testing.assert_array_equal(one[1], many[1])
  np.testing.assert_array_equal(one[0], many[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recall_at_k_equals_brute_force_with_duplicates_and_ties(seed):
  rng = np.random.default_rng(seed)
  images, captions, caption_image = _tied_data(rng)
  metrics = retrieval.retrieval_metrics(images, captions, caption_image,
                                        gallery_chunk=8, query_block=32)
  ks = (1, 5, 10)
  image_ids = np.arange(len(images))
  expect_ir = _brute_force_recall(captions, images, caption_image, image_ids, ks)
  expect_tr = _brute_force_recall(images, captions, image_ids, caption_image, ks)
  for k in ks:
    assert metrics[f"image_retrieval/R@{k}"] == pytest.approx(100 * expect_ir[k])
    assert metrics[f"text_retrieval/R@{k}"] == pytest.approx(100 * expect_tr[k])
  # The data really has ties and the metric is not trivially 0 or 100.
  assert 0 < metrics["image_retrieval/R@5"] < 100
  assert metrics["image_retrieval/num_queries"] == len(captions)


def test_recall_with_gallery_smaller_than_k():
  images = np.eye(3, dtype=np.float32)
  captions = np.eye(3, dtype=np.float32)[[0, 1, 2, 1]]
  metrics = retrieval.retrieval_metrics(images, captions, np.array([0, 1, 2, 0]))
  # Caption 3 looks like image 1 but belongs to image 0: rank 2 of 3.
  assert metrics["image_retrieval/R@1"] == pytest.approx(75.0)
  assert metrics["image_retrieval/R@5"] == pytest.approx(100.0)
  assert metrics["text_retrieval/R@1"] == pytest.approx(100.0)


def test_recall_at_k_counts_first_hit():
  top = np.array([[4, 2, 0], [1, 3, 4], [0, 1, 2]])
  got = retrieval.recall_at_k(top, np.array([0, 4, 7]), np.arange(5), ks=(1, 2, 3))
  assert got == {1: pytest.approx(0.0), 2: pytest.approx(0.0), 3: pytest.approx(2 / 3)}


def test_bad_input_errors_name_the_problem():
  gallery = np.ones((4, 2), np.float32)
  queries = np.ones((3, 2), np.float32)
  queries[1, 0] = np.nan
  with pytest.raises(ValueError, match=r"queries: 1 row.*\[1\]"):
    retrieval.top_k_chunked(queries, gallery, 2)
  with pytest.raises(ValueError, match="k=5"):
    retrieval.top_k_chunked(np.ones((3, 2)), gallery, 5)
  with pytest.raises(ValueError, match="caption_image"):
    retrieval.retrieval_metrics(gallery, np.ones((3, 2)), np.array([0, 1]))
