"""Pre-LayerNorm Transformer encoder and decoder with a key/value cache.

Decoding follows the flax `decode=True` convention: `Captioner.decode` is
first traced through `init` with full-length inputs [B, max_len] to shape the
'cache' collection (see captioner.init_cache), then called one token [B, 1]
at a time with `mutable=['cache']`. Cache leaves all have leading dimension B
(the beam search tiles/gathers them along it):

  self-attention:  cached_key / cached_value [B, max_len, H, Dh], cache_index [B]
  cross-attention: cross_key / cross_value [B, S, H, Dh], filled [B]

The encoder output's keys/values are projected once, at the first step, so a
decode step costs O(one token) for projections.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.models import layers

NEG_INF = -1e9  # added to masked attention logits (f32 softmax)


class MultiHeadAttention(nn.Module):
  """Dot-product attention; `kind` is 'self' (cacheable, causal in decode) or 'cross'."""
  config: ml_collections.ConfigDict
  kind: str = "self"

  def _proj_params(self, name: str, e: int, h: int, dh: int):
    kernel = self.param(f"{name}_kernel", nn.with_logical_partitioning(
        layers.DEFAULT_KERNEL_INIT, ("embed", "heads", "kv")), (e, h, dh), jnp.float32)
    bias = self.param(f"{name}_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("heads", "kv")), (h, dh), jnp.float32)
    return kernel, bias

  @nn.compact
  def __call__(self, inputs_q, inputs_kv, mask, *, train: bool, decode: bool = False):
    """inputs_q [B, Lq, E], inputs_kv [B, Lk, E], mask bool broadcastable to [B, 1, Lq, Lk]."""
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    e, h = cfg.emb_dim, cfg.num_heads
    if e % h:
      raise ValueError(f"config.model.emb_dim={e} is not divisible by num_heads={h}.")
    dh = e // h
    q_kernel, q_bias = self._proj_params("query", e, h, dh)
    k_kernel, k_bias = self._proj_params("key", e, h, dh)
    v_kernel, v_bias = self._proj_params("value", e, h, dh)

    def project(x, kernel, bias):  # [B, L, E] -> [B, L, H, Dh]
      y = jnp.einsum("ble,ehd->blhd", x.astype(dtype), kernel.astype(dtype)) + bias.astype(dtype)
      return layers.constrain(y, ("batch", "act_length", "act_heads", "act_kv"))

    query = project(inputs_q, q_kernel, q_bias)  # [B, Lq, H, Dh]
    is_cached = decode and self.has_variable("cache", "filled" if self.kind == "cross"
                                             else "cache_index")
    if decode and self.kind == "cross":
      bsz, lk = inputs_kv.shape[0], inputs_kv.shape[1]
      cross_key = self.variable("cache", "cross_key", jnp.zeros, (bsz, lk, h, dh), dtype)
      cross_value = self.variable("cache", "cross_value", jnp.zeros, (bsz, lk, h, dh), dtype)
      filled = self.variable("cache", "filled", jnp.zeros, (bsz,), jnp.bool_)
      if is_cached:
        key, value = jax.lax.cond(
            filled.value[0],
            lambda: (cross_key.value, cross_value.value),
            lambda: (project(inputs_kv, k_kernel, k_bias), project(inputs_kv, v_kernel, v_bias)))
        cross_key.value, cross_value.value = key, value
        filled.value = jnp.ones_like(filled.value)
      else:
        key = project(inputs_kv, k_kernel, k_bias)
        value = project(inputs_kv, v_kernel, v_bias)
    else:
      key = project(inputs_kv, k_kernel, k_bias)  # [B, Lk, H, Dh]
      value = project(inputs_kv, v_kernel, v_bias)
      if decode and self.kind == "self":
        cached_key = self.variable("cache", "cached_key", jnp.zeros, key.shape, key.dtype)
        cached_value = self.variable("cache", "cached_value", jnp.zeros, value.shape, value.dtype)
        cache_index = self.variable("cache", "cache_index", jnp.zeros, (key.shape[0],), jnp.int32)
        if is_cached:
          if query.shape[1] != 1:
            raise ValueError(f"decode=True expects one token per call, got length {query.shape[1]}.")
          max_len = cached_key.value.shape[1]
          index = cache_index.value[0]
          key = jax.lax.dynamic_update_slice(cached_key.value, key, (0, index, 0, 0))
          value = jax.lax.dynamic_update_slice(cached_value.value, value, (0, index, 0, 0))
          cached_key.value, cached_value.value = key, value
          cache_index.value = cache_index.value + 1
          # Only positions <= index hold real keys.
          mask = (jnp.arange(max_len) <= index)[None, None, None, :]  # [1, 1, 1, max_len]

    logits = jnp.einsum("bqhd,bkhd->bhqk", query, key).astype(jnp.float32)  # [B, H, Lq, Lk]
    logits = logits / jnp.sqrt(jnp.float32(dh))
    logits = jnp.where(mask, logits, NEG_INF)
    weights = jax.nn.softmax(logits, axis=-1).astype(dtype)  # [B, H, Lq, Lk]
    weights = nn.Dropout(cfg.attention_dropout, deterministic=not train)(weights)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, value)  # [B, Lq, H, Dh]
    out_kernel = self.param("out_kernel", nn.with_logical_partitioning(
        layers.DEFAULT_KERNEL_INIT, ("heads", "kv", "embed")), (h, dh, e), jnp.float32)
    out_bias = self.param("out_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("embed",)), (e,), jnp.float32)
    y = jnp.einsum("bqhd,hde->bqe", out, out_kernel.astype(dtype)) + out_bias.astype(dtype)
    return layers.constrain(y, ("batch", "act_length", "act_embed"))  # [B, Lq, E]


class FeedForward(nn.Module):
  """Linear(F) -> ReLU -> Dropout -> Linear(E)."""
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    y = layers.dense(cfg.mlp_dim, ("embed", "mlp"), dtype, name="wi")(x)  # [B, L, F]
    y = layers.constrain(nn.relu(y), ("batch", "act_length", "act_mlp"))
    y = nn.Dropout(cfg.dropout, deterministic=not train)(y)
    return layers.dense(cfg.emb_dim, ("mlp", "embed"), dtype, name="wo")(y)  # [B, L, E]


class EncoderLayer(nn.Module):
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, attn_mask, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    drop = nn.Dropout(cfg.dropout, deterministic=not train)
    y = layers.layer_norm(dtype, name="attention_norm")(x)
    x = x + drop(MultiHeadAttention(cfg, "self", name="attention")(y, y, attn_mask, train=train))
    y = layers.layer_norm(dtype, name="mlp_norm")(x)
    return x + drop(FeedForward(cfg, name="mlp")(y, train=train))


class Encoder(nn.Module):
  """(x [B, S, E], mask bool [B, S]) -> [B, S, E]; padded slots never attended to."""
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, mask, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    attn_mask = mask[:, None, None, :]  # [B, 1, 1, S] (keys)
    x = x.astype(dtype)
    for i in range(cfg.num_encoder_layers):
      x = EncoderLayer(cfg, name=f"layer_{i}")(x, attn_mask, train=train)
      x = layers.constrain(x, ("batch", "act_length", "act_embed"))
    return layers.layer_norm(dtype, name="final_norm")(x)


class DecoderLayer(nn.Module):
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, encoded, self_mask, cross_mask, *, train: bool, decode: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    drop = nn.Dropout(cfg.dropout, deterministic=not train)
    y = layers.layer_norm(dtype, name="self_attention_norm")(x)
    x = x + drop(MultiHeadAttention(cfg, "self", name="self_attention")(
        y, y, self_mask, train=train, decode=decode))
    y = layers.layer_norm(dtype, name="cross_attention_norm")(x)
    x = x + drop(MultiHeadAttention(cfg, "cross", name="cross_attention")(
        y, encoded, cross_mask, train=train, decode=decode))
    y = layers.layer_norm(dtype, name="mlp_norm")(x)
    return x + drop(FeedForward(cfg, name="mlp")(y, train=train))


class Decoder(nn.Module):
  """(token vectors [B, L, E], encoded [B, S, E], encoder_mask [B, S]) -> [B, L, E].

  Causal self-attention (position i sees 0..i), cross-attention to the
  unmasked encoder slots. Padded caption positions need no extra mask: they
  come after the real tokens, so no real position attends to them, and the
  loss ignores them.
  """
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, encoded, encoder_mask, *, train: bool, decode: bool = False):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    length = x.shape[1]
    self_mask = nn.make_causal_mask(jnp.ones((1, length), bool)).astype(bool)  # [1, 1, L, L]
    cross_mask = encoder_mask[:, None, None, :]  # [B, 1, 1, S]
    x = x.astype(dtype)
    encoded = encoded.astype(dtype)
    for i in range(cfg.num_decoder_layers):
      x = DecoderLayer(cfg, name=f"layer_{i}")(
          x, encoded, self_mask, cross_mask, train=train, decode=decode)
      x = layers.constrain(x, ("batch", "act_length", "act_embed"))
    return layers.layer_norm(dtype, name="final_norm")(x)


def sinusoidal_positions(positions, dim: int):
  """positions int [...] -> [..., dim] fixed sin/cos encoding (length-agnostic)."""
  half = dim // 2
  freq = jnp.exp(-jnp.log(10_000.0) * jnp.arange(half, dtype=jnp.float32) / half)  # [dim/2]
  angles = positions.astype(jnp.float32)[..., None] * freq  # [..., dim/2]
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., dim]


