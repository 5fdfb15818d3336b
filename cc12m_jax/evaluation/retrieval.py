"""Cross-modal retrieval: chunked top-k ranking and Recall@K.

Ranking never materialises the [Q, G] similarity matrix. Queries are taken in
blocks of `query_block`; for each block, a `lax.scan` walks the gallery in
chunks of `gallery_chunk`, scores the chunk ([query_block, gallery_chunk]),
takes its top-k and merges it into a running top-k. Peak memory is
O(query_block * gallery_chunk) regardless of the gallery size, so a
100,000-image gallery with 500,000 caption queries fits easily.

Ties are broken deterministically: among equal scores the LOWER gallery index
ranks first. `lax.top_k` returns equal values in index order, and the merge
concatenates [running (earlier chunks, lower indices) | this chunk], so the
rule holds by induction over chunks. Recall@K therefore never depends on the
chunk size, the device count or run-to-run noise; a query whose positive ties
with a lower-indexed impostor at the K-th place counts as a miss.

Image retrieval (the paper's task): queries are captions, the gallery is
images, and a query hits if its own image is in the top K. Text retrieval:
queries are images, the gallery is every caption, and a query hits if ANY of
its captions is in the top K. Both reduce to `recall_at_k` with labels.
"""
import functools
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

Array = jax.Array

DEFAULT_KS = (1, 5, 10)


def _check_finite(name: str, x: np.ndarray) -> None:
  bad = ~np.isfinite(x).all(axis=-1)
  if bad.any():
    rows = np.flatnonzero(bad)
    raise ValueError(f"{name}: {rows.size} row(s) contain NaN/inf, first rows "
                     f"{rows[:5].tolist()}; refusing to rank them")


def _merge_top_k(best_scores: Array, best_index: Array,
                 chunk_scores: Array, chunk_index: Array, k: int) -> tuple[Array, Array]:
  """Top-k of [running | chunk] candidates; running entries precede on ties."""
  scores = jnp.concatenate([best_scores, chunk_scores], axis=1)  # [Qb, k + kc]
  index = jnp.concatenate([best_index, chunk_index], axis=1)  # [Qb, k + kc]
  top_scores, pos = jax.lax.top_k(scores, k)  # [Qb, k]
  return top_scores, jnp.take_along_axis(index, pos, axis=1)  # [Qb, k]


@functools.partial(jax.jit, static_argnames=("k", "precision"))
def _top_k_block(queries: Array, gallery_chunks: Array, gallery_valid: Array,
                 *, k: int, precision) -> tuple[Array, Array]:
  """Running top-k of one query block over every gallery chunk.

  Args:
    queries: f32 [Qb, P].
    gallery_chunks: f32 [C, Gc, P], the gallery padded to C * Gc rows.
    gallery_valid: bool [C, Gc], False on padding rows.
  Returns:
    scores f32 [Qb, k], gallery indices i32 [Qb, k], best first.
  """
  num_queries = queries.shape[0]
  chunk = gallery_chunks.shape[1]
  chunk_k = min(k, chunk)

  def step(carry, xs):
    best_scores, best_index = carry  # [Qb, k], [Qb, k]
    gallery, valid, start = xs  # [Gc, P], [Gc], []
    scores = jnp.einsum("qp,gp->qg", queries, gallery,
                        precision=precision)  # [Qb, Gc]
    scores = jnp.where(valid[None, :], scores, -jnp.inf)  # [Qb, Gc]
    chunk_scores, chunk_pos = jax.lax.top_k(scores, chunk_k)  # [Qb, kc]
    chunk_index = chunk_pos.astype(jnp.int32) + start  # [Qb, kc]
    return _merge_top_k(best_scores, best_index, chunk_scores, chunk_index, k), None

  starts = jnp.arange(gallery_chunks.shape[0], dtype=jnp.int32) * chunk  # [C]
  init = (jnp.full((num_queries, k), -jnp.inf, queries.dtype),
          jnp.full((num_queries, k), jnp.iinfo(jnp.int32).max, jnp.int32))
  (scores, index), _ = jax.lax.scan(step, init, (gallery_chunks, gallery_valid, starts))
  return scores, index


def top_k_chunked(queries: np.ndarray | Array,
                  gallery: np.ndarray | Array,
                  k: int,
                  *,
                  gallery_chunk: int = 8192,
                  query_block: int = 4096,
                  mesh: Optional[Mesh] = None,
                  batch_axes: Sequence[str] = ("data", "fsdp"),
                  precision=jax.lax.Precision.HIGHEST) -> tuple[np.ndarray, np.ndarray]:
  """Top-k gallery rows by dot product for every query, in bounded memory.

  Args:
    queries: [Q, P] query embeddings.
    gallery: [G, P] gallery embeddings (computed once, reused for every block).
    k: how many to keep, 1 <= k <= G.
    gallery_chunk: gallery rows scored at a time.
    query_block: queries per device call (rounded up to the device count).
    mesh: if given, each query block is split over `batch_axes` of the mesh
      and the gallery is replicated, so devices rank disjoint queries.
    precision: matmul precision (HIGHEST keeps f32 scores on TPU/GPU).

  Returns:
    (scores f32 [Q, k], indices int32 [Q, k]) on the host, best first, ties
    broken by the lower gallery index.
  """
  queries = np.asarray(queries, np.float32)
  gallery = np.asarray(gallery, np.float32)
  if queries.ndim != 2 or gallery.ndim != 2 or queries.shape[1] != gallery.shape[1]:
    raise ValueError(f"queries {queries.shape} and gallery {gallery.shape} must be "
                     "[Q, P] and [G, P] with the same P")
  num_queries, dim = queries.shape
  num_gallery = gallery.shape[0]
  if not 1 <= k <= num_gallery:
    raise ValueError(f"k={k} must be in [1, gallery size {num_gallery}]")
  _check_finite("queries", queries)
  _check_finite("gallery", gallery)
  if num_queries == 0:
    return np.zeros((0, k), np.float32), np.zeros((0, k), np.int32)

  gallery_chunk = max(1, min(gallery_chunk, num_gallery))
  num_chunks = -(-num_gallery // gallery_chunk)
  pad = num_chunks * gallery_chunk - num_gallery
  gallery_chunks = np.pad(gallery, ((0, pad), (0, 0))).reshape(
      num_chunks, gallery_chunk, dim)  # [C, Gc, P]
  gallery_valid = (np.arange(num_chunks * gallery_chunk) < num_gallery).reshape(
      num_chunks, gallery_chunk)  # [C, Gc]

  shards = 1
  if mesh is not None:
    shards = int(np.prod([mesh.shape[a] for a in batch_axes]))
    query_sharding = NamedSharding(mesh, PartitionSpec(tuple(batch_axes)))
    replicated = NamedSharding(mesh, PartitionSpec())
    gallery_chunks = jax.device_put(gallery_chunks, replicated)
    gallery_valid = jax.device_put(gallery_valid, replicated)
  else:
    gallery_chunks = jnp.asarray(gallery_chunks)
    gallery_valid = jnp.asarray(gallery_valid)
  query_block = max(1, min(query_block, num_queries))
  query_block = -(-query_block // shards) * shards

  outputs = []
  for start in range(0, num_queries, query_block):
    block = queries[start:start + query_block]  # [<=Qb, P]
    real = block.shape[0]
    if real < query_block:  # pad so that every block reuses one compilation
      block = np.pad(block, ((0, query_block - real), (0, 0)))
    block = (jax.device_put(block, query_sharding) if mesh is not None
             else jnp.asarray(block))
    scores, index = _top_k_block(block, gallery_chunks, gallery_valid,
                                 k=k, precision=precision)
    outputs.append((scores, index, real))  # dispatch is async; fetch at the end
  scores = np.concatenate([np.asarray(s)[:n] for s, _, n in outputs])  # [Q, k]
  index = np.concatenate([np.asarray(i)[:n] for _, i, n in outputs])  # [Q, k]
  return scores, index


def recall_at_k(top_index: np.ndarray,
                query_labels: np.ndarray,
                gallery_labels: np.ndarray,
                ks: Sequence[int] = DEFAULT_KS) -> dict[int, float]:
  """Fraction of queries with a matching gallery item in their top K.

  A gallery item matches a query when `gallery_labels[item] ==
  query_labels[query]` (e.g. both are the image index).

  Args:
    top_index: int [Q, k] ranked gallery indices (k >= max(ks)).
    query_labels: int [Q].
    gallery_labels: int [G].
  Returns:
    {K: recall in [0, 1]}.
  """
  top_index = np.asarray(top_index)
  if top_index.shape[1] < max(ks):
    raise ValueError(f"ranking keeps {top_index.shape[1]} items, fewer than "
                     f"max K={max(ks)}")
  hits = np.asarray(gallery_labels)[top_index] == np.asarray(query_labels)[:, None]  # [Q, k]
  first_hit = np.where(hits.any(axis=1), hits.argmax(axis=1), np.iinfo(np.int64).max)  # [Q]
  return {kk: float(np.mean(first_hit < kk)) for kk in ks}


def retrieval_metrics(image_emb: np.ndarray,
                      caption_emb: np.ndarray,
                      caption_image: np.ndarray,
                      *,
                      ks: Sequence[int] = DEFAULT_KS,
                      gallery_chunk: int = 8192,
                      query_block: int = 4096,
                      mesh: Optional[Mesh] = None,
                      precision=jax.lax.Precision.HIGHEST) -> dict[str, float]:
  """Image retrieval and text retrieval Recall@K.

  Args:
    image_emb: f32 [N, P], one row per image.
    caption_emb: f32 [M, P], one row per caption (all captions of all images).
    caption_image: int [M], the row of `image_emb` each caption describes.
  Returns:
    {'image_retrieval/R@K': %, 'text_retrieval/R@K': %, 'image_retrieval/
    num_queries', 'text_retrieval/num_queries'}; recalls in percent.
  """
  caption_image = np.asarray(caption_image)
  num_images = np.asarray(image_emb).shape[0]
  if caption_image.shape != (np.asarray(caption_emb).shape[0],):
    raise ValueError(f"caption_image {caption_image.shape} must have one entry per "
                     f"caption ({np.asarray(caption_emb).shape[0]})")
  if caption_image.size and (caption_image.min() < 0 or caption_image.max() >= num_images):
    raise ValueError(f"caption_image values must index the {num_images} images")
  kmax = max(ks)
  rank_kwargs = dict(gallery_chunk=gallery_chunk, query_block=query_block,
                     mesh=mesh, precision=precision)
  image_ids = np.arange(num_images)
  _, t2i = top_k_chunked(caption_emb, image_emb, min(kmax, num_images), **rank_kwargs)
  _, i2t = top_k_chunked(image_emb, caption_emb, min(kmax, caption_image.size), **rank_kwargs)
  metrics: dict[str, float] = {}
  for kk, r in recall_at_k(_pad_ranking(t2i, kmax), caption_image,
                           np.append(image_ids, -1), ks).items():
    metrics[f"image_retrieval/R@{kk}"] = 100.0 * r
  for kk, r in recall_at_k(_pad_ranking(i2t, kmax), image_ids,
                           np.append(caption_image, -1), ks).items():
    metrics[f"text_retrieval/R@{kk}"] = 100.0 * r
  metrics["image_retrieval/num_queries"] = float(caption_image.size)
  metrics["text_retrieval/num_queries"] = float(num_images)
  return metrics


def _pad_ranking(top_index: np.ndarray, k: int) -> np.ndarray:
  """Pads a ranking shorter than k (tiny galleries) with the sentinel -1.

  -1 indexes the extra last label appended by the caller, which is -1 and so
  never equals a real label.
  """
  if top_index.shape[1] >= k:
    return top_index
  return np.pad(top_index, ((0, 0), (0, k - top_index.shape[1])), constant_values=-1)
