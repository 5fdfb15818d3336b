"""Input embeddings of the captioner (paper Section 3.3 / Appendix E).

ImageInputEmbedding turns one batch (docs/architecture.md) into the encoder's
bag of vectors: 1 global feature + R fused regions + T tags, each of width E,
with a validity mask and no positional encoding (the bag is unordered).
TextEmbedding is shared by caption tokens (decoder input) and tag words.
"""
from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax.numpy as jnp

from cc12m_jax.models import layers

NUM_BOX_VALUES = 5  # x1, y1, x2, y2, relative area


class TextEmbedding(layers.ConfigModule):
  """ids [...] -> [..., E]: lookup(E) -> Linear(E) -> ReLU -> Dropout -> Linear(E)."""
  vocab_size: int

  @nn.compact
  def __call__(self, ids, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    table = nn.Embed(
        self.vocab_size, cfg.emb_dim, dtype=dtype, param_dtype=jnp.float32,
        embedding_init=nn.with_logical_partitioning(
            nn.initializers.normal(stddev=1.0), ("vocab", "embed")),
        name="lookup")
    x = table(ids)  # [..., E]
    return layers.MlpBlock(cfg.emb_dim, cfg.input_dropout, dtype, name="mlp")(x, train=train)


class GeometryEmbedding(layers.ConfigModule):
  """boxes [B, R, 5] -> [B, R, E].

  Each of the 5 values is projected on its own to E (a per-value weight row
  and bias), the 5 projections are concatenated (5E) and passed through
  Linear(E) -> ReLU -> Dropout(0.3) -> Linear(E).
  """

  @nn.compact
  def __call__(self, boxes, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    e = cfg.emb_dim
    # Row i projects box value i (fan-in 1, hence unit-variance init).
    w = self.param("value_kernel", nn.with_logical_partitioning(
        nn.initializers.normal(stddev=1.0), ("geometry", "embed")),
        (NUM_BOX_VALUES, e), jnp.float32)
    b = self.param("value_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("geometry", "embed")), (NUM_BOX_VALUES, e), jnp.float32)
    boxes = boxes.astype(dtype)
    per_value = boxes[..., None] * w.astype(dtype) + b.astype(dtype)  # [B, R, 5, E]
    concat = per_value.reshape(boxes.shape[:-1] + (NUM_BOX_VALUES * e,))  # [B, R, 5E]
    return layers.MlpBlock(e, cfg.input_dropout, dtype, name="mlp")(concat, train=train)


class RegionFusion(layers.ConfigModule):
  """LN(geometry) + LN(semantic) -> Linear -> ReLU -> Dropout -> Linear -> LN."""

  @nn.compact
  def __call__(self, semantic, geometry, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    x = (layers.layer_norm(dtype, name="geometry_norm")(geometry)
         + layers.layer_norm(dtype, name="semantic_norm")(semantic))  # [B, R, E]
    x = layers.MlpBlock(cfg.emb_dim, cfg.input_dropout, dtype, name="mlp")(x, train=train)
    return layers.layer_norm(dtype, name="output_norm")(x)  # [B, R, E]


def embed_tags(text_embedding: nn.Module, tag_tokens, *, train: bool):
  """tag_tokens i32 [B, T, K] -> [B, T, E]: masked mean of word-piece embeddings.

  Pieces with id 0 (PAD) are excluded; an all-padding tag gives zeros (it is
  masked out of the encoder by tag_mask anyway).
  """
  pieces = text_embedding(tag_tokens, train=train)  # [B, T, K, E]
  valid = (tag_tokens != 0).astype(pieces.dtype)[..., None]  # [B, T, K, 1]
  count = jnp.maximum(valid.sum(axis=-2), 1.0)  # [B, T, 1]
  return (pieces * valid).sum(axis=-2) / count  # [B, T, E]


class ImageInputEmbedding(layers.ConfigModule):
  """batch -> (vectors f32 [B, 1+R+T, E], mask bool [B, 1+R+T]).

  `text_embedding` is the captioner's shared TextEmbedding (tags and caption
  tokens use the same table and MLP). Without it (or with
  config.use_tags=False) tags are left out and the bag is 1+R vectors.
  """
  text_embedding: nn.Module | None = None

  @nn.compact
  def __call__(self, batch: Mapping[str, Any], *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    e = cfg.emb_dim
    global_vec = layers.dense(e, ("feature", "embed"), dtype, name="global_projection")(
        batch["global_feature"].astype(dtype))[:, None, :]  # [B, 1, E]
    semantic = layers.dense(e, ("feature", "embed"), dtype, name="region_projection")(
        batch["region_features"].astype(dtype))  # [B, R, E]
    geometry = GeometryEmbedding(cfg, name="geometry")(batch["region_boxes"], train=train)
    regions = RegionFusion(cfg, name="fusion")(semantic, geometry, train=train)  # [B, R, E]
    bsz = global_vec.shape[0]
    parts = [global_vec, regions]
    masks = [jnp.ones((bsz, 1), bool), batch["region_mask"].astype(bool)]
    if cfg.use_tags and self.text_embedding is not None:
      parts.append(embed_tags(self.text_embedding, batch["tag_tokens"], train=train))
      masks.append(batch["tag_mask"].astype(bool))
    vectors = jnp.concatenate([p.astype(dtype) for p in parts], axis=1)  # [B, S, E]
    mask = jnp.concatenate(masks, axis=1)  # [B, S]
    # Padded slots are zeroed so nothing of them can leak (they are also
    # excluded from attention by `mask`).
    vectors = vectors * mask[..., None].astype(dtype)
    return layers.constrain(vectors, ("batch", "act_length", "act_embed")), mask
