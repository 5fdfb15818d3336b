"""Pre-LayerNorm Transformer encoder and decoder with a key/value cache.

Decoding follows the flax `decode=True` convention: `Captioner.decode` is
first traced through `init` with full-length inputs [B, max_len] to shape the
'cache' collection (see captioner.init_cache), then called one token [B, 1]
at a time with `mutable=['cache']`. Cache leaves all have leading dimension B:

  self-attention:  cached_key / cached_value [B, H, max_len, Dh] (slot-major),
                   cache_ancestors [B, max_len], cache_index [B]
  cross-attention: cross_key / cross_value [B, S, H, Dh], filled [B]

The self-attention cache is stored in the layout the attention products read
(heads before positions), so a step writes one row in place. It is
slot-major: a beam search reorders only the ancestor table (which row holds
each earlier position of a sequence), and the step gathers its keys/values
through it, so the loop never rewrites the cache; it reads only the filled
positions, rounded up to a multiple of ATTENTION_WINDOW (a `lax.switch` over
static window lengths). The cross-attention entries above
are filled lazily at the first step (a `lax.cond` per step). Fast decoding
replaces them with a *primed* cache from `cross_attention_cache`
(cross_key / cross_value [B, H, S, Dh], cross_mask [B, S], computed once
before the decode loop, shared by the K beams of each example).
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.models import layers

NEG_INF = -1e9  # added to masked attention logits (f32 softmax)
# Cached decoding attends over cache positions [0, w) for the smallest w in
# attention_windows(max_len) that covers the current position.
ATTENTION_WINDOW = 32


def attention_windows(max_len: int) -> tuple[int, ...]:
  """(32, 64, ..., max_len): the static attention lengths of one decode step."""
  return tuple(range(ATTENTION_WINDOW, max_len, ATTENTION_WINDOW)) + (max_len,)


def attention_weights(logits, mask, head_dim: int, dtype):
  """softmax(logits / sqrt(head_dim)) over the last axis where `mask`, in f32; cast to dtype."""
  logits = logits.astype(jnp.float32) / jnp.sqrt(jnp.float32(head_dim))
  return jax.nn.softmax(jnp.where(mask, logits, NEG_INF), axis=-1).astype(dtype)


def project(x, kernel, bias, dtype):
  """[B, L, E] x kernel [E, H, Dh] + bias [H, Dh] -> [B, L, H, Dh]."""
  y = jnp.einsum("ble,ehd->blhd", x.astype(dtype), kernel.astype(dtype)) + bias.astype(dtype)
  return layers.constrain(y, ("batch", "act_length", "act_heads", "act_kv"))


def project_stacked(x, kernels, biases, dtype) -> list:
  """n projections of one input in one product: [B, L, E] -> n x [B, L, H, Dh].

  The kernels are stacked on a new axis ([E, n, H, Dh]), so the product is
  [B*L, E] x [E, n*E]: one wide matmul instead of n thin ones (the paper-size
  train step on a 2-core CPU: 5.03 -> 4.78 s, benchmarks/train_step.py). The
  stacking copies the kernels, which a full-length pass amortizes and a
  one-token decode step does not, so cached decoding projects separately.
  Heads keep their own axis, so a heads-sharded mesh splits the stacked
  kernel exactly as it splits each one.
  """
  kernel = jnp.stack([k.astype(dtype) for k in kernels], axis=1)  # [E, n, H, Dh]
  bias = jnp.stack([b.astype(dtype) for b in biases], axis=0)      # [n, H, Dh]
  y = jnp.einsum("ble,enhd->nblhd", x.astype(dtype), kernel) + bias[:, None, None]
  y = layers.constrain(y, (None, "batch", "act_length", "act_heads", "act_kv"))  # [n, B, L, H, Dh]
  return [y[i] for i in range(len(kernels))]


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
    dropout = layers.Dropout(cfg.attention_dropout, deterministic=not train)

    if self.kind == "self" and inputs_kv is not inputs_q:
      raise ValueError("self-attention projects queries, keys and values from one input; "
                       "got different inputs_q and inputs_kv.")
    if self.kind == "self" and not decode:
      query, key, value = project_stacked(  # each [B, L, H, Dh]
          inputs_q, (q_kernel, k_kernel, v_kernel), (q_bias, k_bias, v_bias), dtype)
    elif self.kind == "self":
      # One token per step: three [rows, E] x [E, E] products read the kernels
      # as stored; stacking them would copy all three every step.
      query, key, value = (project(inputs_q, k, b, dtype) for k, b in (
          (q_kernel, q_bias), (k_kernel, k_bias), (v_kernel, v_bias)))  # each [B, 1, H, Dh]
    else:
      query = project(inputs_q, q_kernel, q_bias, dtype)  # [B, Lq, H, Dh]
    if decode and self.kind == "cross" and self.has_variable("cache", "cross_mask"):
      out = self._primed_cross_attention(query)  # [B, 1, H, Dh]
    elif decode and self.kind == "self" and self.has_variable("cache", "cache_index"):
      out = self._cached_self_attention(query, key, value, dropout)  # [B, 1, H, Dh]
    else:
      if decode and self.kind == "cross":
        key, value = self._lazy_cross_kv(inputs_kv, k_kernel, k_bias, v_kernel, v_bias, dtype)
      elif self.kind == "cross":
        key, value = project_stacked(  # each [B, Lk, H, Dh]
            inputs_kv, (k_kernel, v_kernel), (k_bias, v_bias), dtype)
      if decode and self.kind == "self":
        # Shaping pass of init: [B, H, max_len, Dh], the layout the step reads.
        b, length = key.shape[0], key.shape[1]
        self.variable("cache", "cached_key", jnp.zeros, (b, h, length, dh), key.dtype)
        self.variable("cache", "cached_value", jnp.zeros, (b, h, length, dh), value.dtype)
        self.variable("cache", "cache_index", jnp.zeros, (b,), jnp.int32)
        self.variable("cache", "cache_ancestors", jnp.zeros, (b, length), jnp.int32)
      logits = jnp.einsum("bqhd,bkhd->bhqk", query, key)  # [B, H, Lq, Lk]
      weights = dropout(attention_weights(logits, mask, dh, dtype))  # [B, H, Lq, Lk]
      out = jnp.einsum("bhqk,bkhd->bqhd", weights, value)  # [B, Lq, H, Dh]
    out_kernel = self.param("out_kernel", nn.with_logical_partitioning(
        layers.DEFAULT_KERNEL_INIT, ("heads", "kv", "embed")), (h, dh, e), jnp.float32)
    out_bias = self.param("out_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("embed",)), (e,), jnp.float32)
    y = jnp.einsum("bqhd,hde->bqe", out, out_kernel.astype(dtype)) + out_bias.astype(dtype)
    return layers.constrain(y, ("batch", "act_length", "act_embed"))  # [B, Lq, E]

  def _cached_self_attention(self, query, key, value, dropout):
    """One token against the slot-major cache [B, H, max_len, Dh].

    Row r, position t of the cache holds the key of whichever sequence sat in
    row r at step t; each (row, position) is written once, in place. The
    sequence now in row r reads position t' from row cache_ancestors[r, t'].
    A beam search therefore reorders only the small [B, max_len] ancestor
    table, never the cache itself (no full-size copy of the loop state).
    """
    if query.shape[1] != 1:
      raise ValueError(f"decode=True expects one token per call, got length {query.shape[1]}.")
    cached_key = self.variable("cache", "cached_key", jnp.zeros, (), key.dtype)
    cached_value = self.variable("cache", "cached_value", jnp.zeros, (), value.dtype)
    cache_index = self.variable("cache", "cache_index", jnp.zeros, (), jnp.int32)
    ancestors = self.variable("cache", "cache_ancestors", jnp.zeros, (), jnp.int32)
    rows, _, h, dh = query.shape
    max_len = cached_key.value.shape[2]
    index = cache_index.value[0]
    # [B, 1, H, Dh] -> [B, H, 1, Dh]: only the one new row is transposed.
    key = key.transpose(0, 2, 1, 3)
    value = value.transpose(0, 2, 1, 3)
    cache_k = jax.lax.dynamic_update_slice(cached_key.value, key.astype(cached_key.value.dtype),
                                           (0, 0, index, 0))  # [B, H, max_len, Dh]
    cache_v = jax.lax.dynamic_update_slice(cached_value.value,
                                           value.astype(cached_value.value.dtype), (0, 0, index, 0))
    anc = jax.lax.dynamic_update_slice(
        ancestors.value, jnp.arange(rows, dtype=jnp.int32)[:, None], (0, index))  # [B, max_len]
    cached_key.value, cached_value.value, ancestors.value = cache_k, cache_v, anc
    cache_index.value = cache_index.value + 1
    q = query.transpose(0, 2, 1, 3)  # [B, H, 1, Dh]

    def attend(window: int):
      """Attention over cache positions [0, window): those filled so far, plus padding."""
      def fn(q, cache_k, cache_v, anc, index):
        # This row's history: keys[r, h, t] = cache[anc[r, t], h, t] -> [B, H, window, Dh]
        heads = jnp.arange(h)[None, :, None]
        steps = jnp.arange(window)[None, None, :]
        keys = cache_k[anc[:, None, :window], heads, steps]
        values = cache_v[anc[:, None, :window], heads, steps]
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, keys)  # [B, H, 1, window]
        valid = (jnp.arange(window) <= index)[None, None, None, :]  # positions <= index are real
        weights = dropout(attention_weights(logits, valid, dh, q.dtype))  # [B, H, 1, window]
        return jnp.einsum("bhqk,bhkd->bhqd", weights, values)  # [B, H, 1, Dh]
      return fn

    # Read only the filled part of the cache, rounded up to a multiple of
    # ATTENTION_WINDOW: the gather and products then cost what the position
    # needs, not what max_len allows (a 180-token decode reads ~60% of it).
    windows = attention_windows(max_len)
    branch = jnp.minimum(index // ATTENTION_WINDOW, len(windows) - 1)
    out = jax.lax.switch(branch, [attend(w) for w in windows], q, cache_k, cache_v, anc, index)
    return out.transpose(0, 2, 1, 3)  # [B, 1, H, Dh]

  def _lazy_cross_kv(self, inputs_kv, k_kernel, k_bias, v_kernel, v_bias, dtype):
    """Cross keys/values [B, S, H, Dh] projected at the first step and kept in the cache.

    Used when the cache was not primed (see cross_attention_cache); the
    `filled` flag costs a `lax.cond` per step, which primed caches avoid.
    """
    bsz, lk = inputs_kv.shape[0], inputs_kv.shape[1]
    h, dh = k_kernel.shape[1], k_kernel.shape[2]
    is_cached = self.has_variable("cache", "filled")
    cross_key = self.variable("cache", "cross_key", jnp.zeros, (bsz, lk, h, dh), dtype)
    cross_value = self.variable("cache", "cross_value", jnp.zeros, (bsz, lk, h, dh), dtype)
    filled = self.variable("cache", "filled", jnp.zeros, (bsz,), jnp.bool_)
    if not is_cached:
      return (project(inputs_kv, k_kernel, k_bias, dtype),
              project(inputs_kv, v_kernel, v_bias, dtype))
    key, value = jax.lax.cond(
        filled.value[0],
        lambda: (cross_key.value, cross_value.value),
        lambda: (project(inputs_kv, k_kernel, k_bias, dtype),
                 project(inputs_kv, v_kernel, v_bias, dtype)))
    cross_key.value, cross_value.value = key, value
    filled.value = jnp.ones_like(filled.value)
    return key, value

  def _primed_cross_attention(self, query):
    """query [B*K, 1, H, Dh] against primed keys/values [B, H, S, Dh] shared by K beams."""
    keys = self.get_variable("cache", "cross_key")      # [B, H, S, Dh]
    values = self.get_variable("cache", "cross_value")  # [B, H, S, Dh]
    mask = self.get_variable("cache", "cross_mask")     # bool [B, S]
    rows, lq, h, dh = query.shape
    b = keys.shape[0]
    if lq != 1 or rows % b:
      raise ValueError(f"primed cross-attention cache for {b} examples cannot serve a query "
                       f"of shape {query.shape}: expected [{b} * beams, 1, H, Dh].")
    q = query.reshape(b, rows // b, h, dh)  # [B, K, H, Dh] (beam-major rows)
    logits = jnp.einsum("bkhd,bhsd->bhks", q, keys)  # [B, H, K, S]
    weights = attention_weights(logits, mask[:, None, None, :], dh, values.dtype)  # [B, H, K, S]
    out = jnp.einsum("bhks,bhsd->bkhd", weights, values)  # [B, K, H, Dh]
    return out.reshape(rows, 1, h, dh)


class FeedForward(nn.Module):
  """Linear(F) -> ReLU -> Dropout -> Linear(E)."""
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    y = layers.dense(cfg.mlp_dim, ("embed", "mlp"), dtype, name="wi")(x)  # [B, L, F]
    y = layers.constrain(nn.relu(y), ("batch", "act_length", "act_mlp"))
    y = layers.Dropout(cfg.dropout, deterministic=not train)(y)
    return layers.dense(cfg.emb_dim, ("mlp", "embed"), dtype, name="wo")(y)  # [B, L, E]


class EncoderLayer(nn.Module):
  config: ml_collections.ConfigDict

  @nn.compact
  def __call__(self, x, attn_mask, *, train: bool):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    drop = layers.Dropout(cfg.dropout, deterministic=not train)
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
    drop = layers.Dropout(cfg.dropout, deterministic=not train)
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


def cross_attention_cache(decoder_params: Any, encoded: jax.Array, encoder_mask: jax.Array,
                          config: ml_collections.ConfigDict) -> dict:
  """Primed cross-attention cache entries of every decoder layer, computed once per batch.

  decoder_params: the Decoder's params; encoded [B, S, E]; encoder_mask bool [B, S].
  Returns {'layer_i': {'cross_attention': {'cross_key', 'cross_value': [B, H, S, Dh],
  'cross_mask': [B, S]}}}. Merged into a decode cache (in place of the lazily filled
  entries), the step reads them directly; with B examples and B*K query rows each
  example's keys serve its K beams (no tiling, no per-step gather).
  """
  dtype = layers.compute_dtype(config)
  params = nn.meta.unbox(decoder_params)
  out = {}
  for i in range(config.num_decoder_layers):
    p = params[f"layer_{i}"]["cross_attention"]
    # The same stacked product as the full-length cross-attention pass.
    key, value = project_stacked(encoded, (p["key_kernel"], p["value_kernel"]),
                                 (p["key_bias"], p["value_bias"]), dtype)  # each [B, S, H, Dh]
    out[f"layer_{i}"] = {"cross_attention": {
        "cross_key": key.transpose(0, 2, 1, 3),      # [B, H, S, Dh]
        "cross_value": value.transpose(0, 2, 1, 3),
        "cross_mask": encoder_mask.astype(bool)}}
  return out
