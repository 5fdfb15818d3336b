"""The image-captioning (ic) encoder-decoder of the paper.

  batch --ImageInputEmbedding--> bag [B, S=1+R+T, E] --Encoder--> encoded [B, S, E]
  decoder_inputs [B, L] --TextEmbedding + sinusoidal positions--> [B, L, E]
        --Decoder(encoded)--> [B, L, E] --Linear(V)--> logits [B, L, V]

The TextEmbedding is shared by caption tokens and tag words (Section 3.3).
"""
from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.models import embeddings, layers, transformer


class DecodePositions(nn.Module):
  """Token positions: 0..L-1, or with decode=True the running count in the cache."""

  @nn.compact
  def __call__(self, batch_size: int, length: int, *, decode: bool):
    if decode:
      is_cached = self.has_variable("cache", "position")
      position = self.variable("cache", "position", jnp.zeros, (batch_size,), jnp.int32)
      if is_cached:  # one token per call
        current = position.value[:, None]  # [B, 1]
        position.value = position.value + 1
        return current
    return jnp.arange(length)[None, :]  # [1, L]


class Captioner(nn.Module):
  config: ml_collections.ConfigDict
  vocab_size: int

  def setup(self):
    cfg = self.config
    self.text_embedding = embeddings.TextEmbedding(cfg, self.vocab_size)
    self.image_embedding = embeddings.ImageInputEmbedding(cfg, text_embedding=self.text_embedding)
    self.encoder = transformer.Encoder(cfg)
    self.decoder = transformer.Decoder(cfg)
    self.logits_projection = layers.dense(
        self.vocab_size, ("embed", "vocab"), layers.compute_dtype(cfg))
    self.embedding_dropout = layers.Dropout(cfg.dropout)
    self.positions = DecodePositions()

  def encode(self, batch: Mapping[str, Any], *, train: bool):
    """batch -> (encoded [B, S, E], encoder_mask bool [B, S])."""
    vectors, mask = self.image_embedding(batch, train=train)  # [B, S, E], [B, S]
    return self.encoder(vectors, mask, train=train), mask

  def decode(self, decoder_inputs, encoded, encoder_mask, *, train: bool, decode: bool = False):
    """decoder_inputs i32 [B, L] (or [B, 1] with decode=True) -> logits f32 [B, L, V]."""
    cfg = self.config
    x = self.text_embedding(decoder_inputs, train=train)  # [B, L, E]
    positions = self.positions(x.shape[0], x.shape[1], decode=decode)  # [B or 1, L]
    x = x + transformer.sinusoidal_positions(positions, cfg.emb_dim).astype(x.dtype)
    x = self.embedding_dropout(x, deterministic=not train)
    x = self.decoder(x, encoded, encoder_mask, train=train, decode=decode)  # [B, L, E]
    logits = self.logits_projection(x)  # [B, L, V]
    logits = layers.constrain(logits, ("batch", "act_length", "act_vocab"))
    return logits.astype(jnp.float32)

  def __call__(self, batch: Mapping[str, Any], *, train: bool):
    """Teacher-forced logits f32 [B, L, V] for batch['decoder_inputs']."""
    encoded, mask = self.encode(batch, train=train)
    return self.decode(batch["decoder_inputs"], encoded, mask, train=train)


def init_cache(model: Captioner, encoded, encoder_mask, max_decode_len: int) -> Any:
  """Zero 'cache' collection for step-wise decoding of `encoded.shape[0]` rows.

  Shapes come from tracing `decode(decode=True)` on [B, max_decode_len] inputs
  (no parameters are computed). Every leaf has leading dimension B.
  """
  bsz = encoded.shape[0]

  def shaping_init():
    return model.init(
        {"params": jax.random.PRNGKey(0)}, jnp.ones((bsz, max_decode_len), jnp.int32),
        encoded, encoder_mask, train=False, decode=True, method=Captioner.decode)["cache"]

  shapes = jax.eval_shape(shaping_init)
  return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def dummy_batch(config: ml_collections.ConfigDict, batch_size: int,
                feature_dim: int, max_caption_length: int, max_tag_tokens: int) -> dict:
  """A zero batch of the right shapes/dtypes (for init and shape inference)."""
  r, t = config.max_regions, config.max_tags
  return {
      "global_feature": jnp.zeros((batch_size, feature_dim), jnp.float32),
      "region_features": jnp.zeros((batch_size, r, feature_dim), jnp.float32),
      "region_boxes": jnp.zeros((batch_size, r, 5), jnp.float32),
      "region_mask": jnp.ones((batch_size, r), bool),
      "tag_tokens": jnp.zeros((batch_size, t, max_tag_tokens), jnp.int32),
      "tag_mask": jnp.ones((batch_size, t), bool),
      "tag_scores": jnp.zeros((batch_size, t), jnp.float32),
      "decoder_inputs": jnp.zeros((batch_size, max_caption_length), jnp.int32),
      "decoder_targets": jnp.zeros((batch_size, max_caption_length), jnp.int32),
      "example_mask": jnp.ones((batch_size,), bool),
      "domain": jnp.zeros((batch_size,), jnp.int32),
  }
