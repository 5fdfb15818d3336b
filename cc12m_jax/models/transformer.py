"""Pre-LayerNorm Transformer encoder and decoder, and the decoder's cached step.

Full-length passes (training, teacher forcing, the encoder) are each module's
`__call__`. Cached decoding uses two more methods of the decoder modules:

  init_decode_state(encoded [B, S, E], encoder_mask [B, S], rows, max_len)
      creates the decoding variables below, for `rows` = B*K hypotheses
      (beam-major: rows b*K .. b*K+K-1 belong to example b);
  step(x [rows, 1, E]) -> [rows, 1, E]
      one token per hypothesis; reads the variables and updates the first two
      collections.

The decoding variables are split into flax collections by how a search must
treat them, so callers pass collections by name and never look inside:

  STEP_CACHE:   per-hypothesis state that a beam search reorders with the
                beams: each self-attention's cache_index [rows] and
                cache_ancestors [rows, max_len].
  SLOT_CACHE:   each self-attention's cached_key / cached_value
                [rows, H, max_len, Dh], written in place, never reordered.
  PRIMED_CACHE: each cross-attention's cross_key / cross_value [B, H, S, Dh]
                and cross_mask [B, S], projected once from the encoder output:
                loop constants, read-only in `step`, shared by the K
                hypotheses of an example.

The self-attention cache is stored in the layout the attention products read
(heads before positions), so a step writes one row in place. It is
slot-major: row r, position t holds the key of whichever hypothesis sat in
row r at step t. A beam search reorders only the ancestor table (which row
holds each earlier position of a hypothesis), and the step gathers its
keys/values through it, so the loop never copies the cache. A step reads only
the filled positions, rounded up to a multiple of ATTENTION_WINDOW (a
`lax.switch` over static window lengths).
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from cc12m_jax.models import layers

NEG_INF = -1e9  # added to masked attention logits (f32 softmax)
# Cached decoding attends over cache positions [0, w) for the smallest w in
# attention_windows(max_len) that covers the current position.
ATTENTION_WINDOW = 32

# Flax collections of cached decoding (see the module docstring).
STEP_CACHE = "cache"
SLOT_CACHE = "slot_cache"
PRIMED_CACHE = "primed_cache"


def attention_windows(max_len: int) -> tuple[int, ...]:
  """(32, 64, ..., max_len): the static attention lengths of one decode step."""
  return tuple(range(ATTENTION_WINDOW, max_len, ATTENTION_WINDOW)) + (max_len,)


def attention_weights(logits: jax.Array, mask: jax.Array, head_dim: int, dtype) -> jax.Array:
  """softmax(logits / sqrt(head_dim)) over the last axis where `mask`, in f32; cast to dtype."""
  logits = logits.astype(jnp.float32) / jnp.sqrt(jnp.float32(head_dim))
  return jax.nn.softmax(jnp.where(mask, logits, NEG_INF), axis=-1).astype(dtype)


def project(x: jax.Array, kernel: jax.Array, bias: jax.Array, dtype) -> jax.Array:
  """[B, L, E] x kernel [E, H, Dh] + bias [H, Dh] -> [B, L, H, Dh]."""
  y = jnp.einsum("ble,ehd->blhd", x.astype(dtype), kernel.astype(dtype)) + bias.astype(dtype)
  return layers.constrain(y, ("batch", "act_length", "act_heads", "act_kv"))


def project_stacked(x: jax.Array, kernels, biases, dtype) -> list[jax.Array]:
  """n projections of one input in one product: [B, L, E] -> n x [B, L, H, Dh].

  The kernels are stacked on a new axis ([E, n, H, Dh]), so the product is
  [B*L, E] x [E, n*E]: one wide matmul, which runs faster than n thin ones.
  The stacking copies the kernels, which a full-length pass amortizes and a
  one-token decode step does not, so cached decoding projects separately.
  Heads keep their own axis, so a heads-sharded mesh splits the stacked
  kernel exactly as it splits each one.
  """
  kernel = jnp.stack([k.astype(dtype) for k in kernels], axis=1)  # [E, n, H, Dh]
  bias = jnp.stack([b.astype(dtype) for b in biases], axis=0)      # [n, H, Dh]
  y = jnp.einsum("ble,enhd->nblhd", x.astype(dtype), kernel) + bias[:, None, None]
  y = layers.constrain(y, (None, "batch", "act_length", "act_heads", "act_kv"))  # [n, B, L, H, Dh]
  return [y[i] for i in range(len(kernels))]


class _Attention(layers.ConfigModule):
  """The parameters and shared arithmetic of SelfAttention and CrossAttention.

  Parameters: {query, key, value}_kernel [E, H, Dh] and _bias [H, Dh],
  out_kernel [H, Dh, E], out_bias [E].
  """

  def setup(self):
    cfg = self.config
    e, h = cfg.emb_dim, cfg.num_heads
    if e % h:
      raise ValueError(f"config.model.emb_dim={e} is not divisible by num_heads={h}.")
    dh = e // h
    # Created in this order: initial values are drawn in creation order, so
    # the order fixes the initialisation of a given seed.
    self.query_kernel, self.query_bias = self._projection("query", e, h, dh)
    self.key_kernel, self.key_bias = self._projection("key", e, h, dh)
    self.value_kernel, self.value_bias = self._projection("value", e, h, dh)
    self.out_kernel = self.param("out_kernel", nn.with_logical_partitioning(
        layers.DEFAULT_KERNEL_INIT, ("heads", "kv", "embed")), (h, dh, e), jnp.float32)
    self.out_bias = self.param("out_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("embed",)), (e,), jnp.float32)
    # Dropout rngs derive from the submodule's name: "Dropout_0", flax's
    # automatic name for an inline Dropout, is the name earlier versions of
    # this module used, so a given seed still draws the same masks.
    self.dropout = layers.Dropout(cfg.attention_dropout, name="Dropout_0")

  def _projection(self, name: str, e: int, h: int, dh: int):
    kernel = self.param(f"{name}_kernel", nn.with_logical_partitioning(
        layers.DEFAULT_KERNEL_INIT, ("embed", "heads", "kv")), (e, h, dh), jnp.float32)
    bias = self.param(f"{name}_bias", nn.with_logical_partitioning(
        nn.initializers.zeros, ("heads", "kv")), (h, dh), jnp.float32)
    return kernel, bias

  @property
  def dtype(self):
    return layers.compute_dtype(self.config)

  @property
  def head_dim(self) -> int:
    return self.config.emb_dim // self.config.num_heads

  def _attend(self, query, key, value, mask, train: bool):
    """query [B, Lq, H, Dh], key/value [B, Lk, H, Dh], mask bool to [B, 1, Lq, Lk] -> [B, Lq, E]."""
    logits = jnp.einsum("bqhd,bkhd->bhqk", query, key)  # [B, H, Lq, Lk]
    weights = attention_weights(logits, mask, self.head_dim, self.dtype)  # [B, H, Lq, Lk]
    weights = self.dropout(weights, deterministic=not train)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, value)  # [B, Lq, H, Dh]
    return self._output(out)

  def _output(self, out):
    """Per-head outputs [B, Lq, H, Dh] -> [B, Lq, E]."""
    y = (jnp.einsum("bqhd,hde->bqe", out, self.out_kernel.astype(self.dtype))
         + self.out_bias.astype(self.dtype))  # [B, Lq, E]
    return layers.constrain(y, ("batch", "act_length", "act_embed"))


class SelfAttention(_Attention):
  """Attention of a sequence to itself; `step` is the cached, causal one-token form."""

  def __call__(self, x: jax.Array, mask: jax.Array, *, train: bool) -> jax.Array:
    """x [B, L, E], mask bool broadcastable to [B, 1, L, L] -> [B, L, E]."""
    query, key, value = project_stacked(  # each [B, L, H, Dh]
        x, (self.query_kernel, self.key_kernel, self.value_kernel),
        (self.query_bias, self.key_bias, self.value_bias), self.dtype)
    return self._attend(query, key, value, mask, train)

  def init_decode_state(self, rows: int, max_len: int) -> None:
    """Zero cache for `rows` hypotheses of up to `max_len` tokens."""
    h, dh = self.config.num_heads, self.head_dim
    self.put_variable(SLOT_CACHE, "cached_key", jnp.zeros((rows, h, max_len, dh), self.dtype))
    self.put_variable(SLOT_CACHE, "cached_value", jnp.zeros((rows, h, max_len, dh), self.dtype))
    self.put_variable(STEP_CACHE, "cache_index", jnp.zeros((rows,), jnp.int32))
    self.put_variable(STEP_CACHE, "cache_ancestors", jnp.zeros((rows, max_len), jnp.int32))

  def step(self, x: jax.Array) -> jax.Array:
    """One token x [rows, 1, E] against the slot-major cache -> [rows, 1, E] (inference only).

    Row r, position t of the cache holds the key of whichever hypothesis sat
    in row r at step t; each (row, position) is written once, in place. The
    hypothesis now in row r reads position t' from row cache_ancestors[r, t'].
    A beam search therefore reorders only the small [rows, max_len] ancestor
    table, never the cache itself (no full-size copy of the loop state).
    """
    if x.shape[1] != 1:
      raise ValueError(f"a decode step takes one token per row, got length {x.shape[1]}.")
    # One token: three [rows, E] x [E, E] products read the kernels as
    # stored; stacking them (project_stacked) would copy all three every step.
    query, key, value = (project(x, k, b, self.dtype) for k, b in (
        (self.query_kernel, self.query_bias), (self.key_kernel, self.key_bias),
        (self.value_kernel, self.value_bias)))  # each [rows, 1, H, Dh]
    cached_key = self.get_variable(SLOT_CACHE, "cached_key")      # [rows, H, max_len, Dh]
    cached_value = self.get_variable(SLOT_CACHE, "cached_value")  # [rows, H, max_len, Dh]
    cache_index = self.get_variable(STEP_CACHE, "cache_index")    # [rows]
    ancestors = self.get_variable(STEP_CACHE, "cache_ancestors")  # [rows, max_len]
    rows, _, h, dh = query.shape
    max_len = cached_key.shape[2]
    index = cache_index[0]
    # [rows, 1, H, Dh] -> [rows, H, 1, Dh]: only the one new row is transposed.
    key = key.transpose(0, 2, 1, 3)
    value = value.transpose(0, 2, 1, 3)
    cache_k = jax.lax.dynamic_update_slice(cached_key, key.astype(cached_key.dtype),
                                           (0, 0, index, 0))  # [rows, H, max_len, Dh]
    cache_v = jax.lax.dynamic_update_slice(cached_value, value.astype(cached_value.dtype),
                                           (0, 0, index, 0))  # [rows, H, max_len, Dh]
    anc = jax.lax.dynamic_update_slice(
        ancestors, jnp.arange(rows, dtype=jnp.int32)[:, None], (0, index))  # [rows, max_len]
    self.put_variable(SLOT_CACHE, "cached_key", cache_k)
    self.put_variable(SLOT_CACHE, "cached_value", cache_v)
    self.put_variable(STEP_CACHE, "cache_ancestors", anc)
    self.put_variable(STEP_CACHE, "cache_index", cache_index + 1)
    q = query.transpose(0, 2, 1, 3)  # [rows, H, 1, Dh]

    def attend(window: int):
      """Attention over cache positions [0, window): those filled so far, plus padding."""
      def fn(q, cache_k, cache_v, anc, index):
        # This row's history: keys[r, h, t] = cache[anc[r, t], h, t] -> [rows, H, window, Dh]
        heads = jnp.arange(h)[None, :, None]
        steps = jnp.arange(window)[None, None, :]
        keys = cache_k[anc[:, None, :window], heads, steps]
        values = cache_v[anc[:, None, :window], heads, steps]
        logits = jnp.einsum("bhqd,bhkd->bhqk", q, keys)  # [rows, H, 1, window]
        valid = (jnp.arange(window) <= index)[None, None, None, :]  # positions <= index are real
        weights = attention_weights(logits, valid, dh, q.dtype)  # [rows, H, 1, window]
        return jnp.einsum("bhqk,bhkd->bhqd", weights, values)  # [rows, H, 1, Dh]
      return fn

    # Read only the filled part of the cache, rounded up to a multiple of
    # ATTENTION_WINDOW: the gather and products then cost what the position
    # needs, not what max_len allows.
    windows = attention_windows(max_len)
    branch = jnp.minimum(index // ATTENTION_WINDOW, len(windows) - 1)
    out = jax.lax.switch(branch, [attend(w) for w in windows], q, cache_k, cache_v, anc, index)
    return self._output(out.transpose(0, 2, 1, 3))  # [rows, 1, E]


class CrossAttention(_Attention):
  """Attention of a sequence to the encoder output; `step` reads primed keys/values."""

  def __call__(self, x: jax.Array, encoded: jax.Array, mask: jax.Array, *,
               train: bool) -> jax.Array:
    """x [B, L, E], encoded [B, S, E], mask bool broadcastable to [B, 1, L, S] -> [B, L, E]."""
    query = project(x, self.query_kernel, self.query_bias, self.dtype)  # [B, L, H, Dh]
    key, value = project_stacked(  # each [B, S, H, Dh]
        encoded, (self.key_kernel, self.value_kernel), (self.key_bias, self.value_bias),
        self.dtype)
    return self._attend(query, key, value, mask, train)

  def init_decode_state(self, encoded: jax.Array, encoder_mask: jax.Array) -> None:
    """Primes keys/values [B, H, S, Dh] and the mask [B, S] of B examples, once per batch."""
    # The same stacked product as the full-length pass.
    key, value = project_stacked(  # each [B, S, H, Dh]
        encoded, (self.key_kernel, self.value_kernel), (self.key_bias, self.value_bias),
        self.dtype)
    self.put_variable(PRIMED_CACHE, "cross_key", key.transpose(0, 2, 1, 3))      # [B, H, S, Dh]
    self.put_variable(PRIMED_CACHE, "cross_value", value.transpose(0, 2, 1, 3))  # [B, H, S, Dh]
    self.put_variable(PRIMED_CACHE, "cross_mask", encoder_mask.astype(bool))     # [B, S]

  def step(self, x: jax.Array) -> jax.Array:
    """x [B*K, 1, E] (beam-major rows) -> [B*K, 1, E] (inference only).

    Each example's primed keys/values serve its K rows: the rows are reshaped
    to [B, K] (free for beam-major rows), so nothing is tiled or gathered.
    """
    query = project(x, self.query_kernel, self.query_bias, self.dtype)  # [B*K, 1, H, Dh]
    keys = self.get_variable(PRIMED_CACHE, "cross_key")      # [B, H, S, Dh]
    values = self.get_variable(PRIMED_CACHE, "cross_value")  # [B, H, S, Dh]
    mask = self.get_variable(PRIMED_CACHE, "cross_mask")     # bool [B, S]
    rows, lq, h, dh = query.shape
    b = keys.shape[0]
    if lq != 1 or rows % b:
      raise ValueError(f"primed cross-attention keys for {b} examples cannot serve a query "
                       f"of shape {query.shape}: expected [{b} * beams, 1, H, Dh].")
    q = query.reshape(b, rows // b, h, dh)  # [B, K, H, Dh]
    logits = jnp.einsum("bkhd,bhsd->bhks", q, keys)  # [B, H, K, S]
    weights = attention_weights(logits, mask[:, None, None, :], dh, values.dtype)  # [B, H, K, S]
    out = jnp.einsum("bhks,bhsd->bkhd", weights, values)  # [B, K, H, Dh]
    return self._output(out.reshape(rows, 1, h, dh))  # [B*K, 1, E]


class FeedForward(layers.ConfigModule):
  """Linear(F) -> ReLU -> Dropout -> Linear(E)."""

  @nn.compact
  def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    y = layers.dense(cfg.mlp_dim, ("embed", "mlp"), dtype, name="wi")(x)  # [B, L, F]
    y = layers.constrain(nn.relu(y), ("batch", "act_length", "act_mlp"))
    y = layers.Dropout(cfg.dropout, deterministic=not train)(y)
    return layers.dense(cfg.emb_dim, ("mlp", "embed"), dtype, name="wo")(y)  # [B, L, E]


class EncoderLayer(layers.ConfigModule):

  @nn.compact
  def __call__(self, x: jax.Array, attn_mask: jax.Array, *, train: bool) -> jax.Array:
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    drop = layers.Dropout(cfg.dropout, deterministic=not train)
    y = layers.layer_norm(dtype, name="attention_norm")(x)
    x = x + drop(SelfAttention(cfg, name="attention")(y, attn_mask, train=train))
    y = layers.layer_norm(dtype, name="mlp_norm")(x)
    return x + drop(FeedForward(cfg, name="mlp")(y, train=train))


class Encoder(layers.ConfigModule):
  """(x [B, S, E], mask bool [B, S]) -> [B, S, E]; padded slots never attended to."""

  @nn.compact
  def __call__(self, x: jax.Array, mask: jax.Array, *, train: bool) -> jax.Array:
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    attn_mask = mask[:, None, None, :]  # [B, 1, 1, S] (keys)
    x = x.astype(dtype)
    for i in range(cfg.num_encoder_layers):
      x = EncoderLayer(cfg, name=f"layer_{i}")(x, attn_mask, train=train)
      x = layers.constrain(x, ("batch", "act_length", "act_embed"))
    return layers.layer_norm(dtype, name="final_norm")(x)


class DecoderLayer(layers.ConfigModule):

  def setup(self):
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    self.self_attention_norm = layers.layer_norm(dtype, name="self_attention_norm")
    self.self_attention = SelfAttention(cfg, name="self_attention")
    self.cross_attention_norm = layers.layer_norm(dtype, name="cross_attention_norm")
    self.cross_attention = CrossAttention(cfg, name="cross_attention")
    self.mlp_norm = layers.layer_norm(dtype, name="mlp_norm")
    self.mlp = FeedForward(cfg, name="mlp")
    # "Dropout_0": flax's automatic name for an inline Dropout, as in earlier
    # versions of this layer (dropout rngs derive from the name).
    self.dropout = layers.Dropout(cfg.dropout, name="Dropout_0")

  def __call__(self, x: jax.Array, encoded: jax.Array, self_mask: jax.Array,
               cross_mask: jax.Array, *, train: bool) -> jax.Array:
    """x [B, L, E], encoded [B, S, E], masks broadcastable to [B, 1, L, L] / [B, 1, L, S]."""
    drop = lambda y: self.dropout(y, deterministic=not train)
    y = self.self_attention_norm(x)
    x = x + drop(self.self_attention(y, self_mask, train=train))
    y = self.cross_attention_norm(x)
    x = x + drop(self.cross_attention(y, encoded, cross_mask, train=train))
    y = self.mlp_norm(x)
    return x + drop(self.mlp(y, train=train))  # [B, L, E]

  def init_decode_state(self, encoded: jax.Array, encoder_mask: jax.Array, rows: int,
                        max_len: int) -> None:
    self.self_attention.init_decode_state(rows, max_len)
    self.cross_attention.init_decode_state(encoded, encoder_mask)

  def step(self, x: jax.Array) -> jax.Array:
    """x [rows, 1, E] -> [rows, 1, E] (inference: no dropout)."""
    y = self.self_attention_norm(x)
    x = x + self.self_attention.step(y)
    y = self.cross_attention_norm(x)
    x = x + self.cross_attention.step(y)
    y = self.mlp_norm(x)
    return x + self.mlp(y, train=False)


class Decoder(layers.ConfigModule):
  """(token vectors [B, L, E], encoded [B, S, E], encoder_mask [B, S]) -> [B, L, E].

  Causal self-attention (position i sees 0..i), cross-attention to the
  unmasked encoder slots. Padded caption positions need no extra mask: they
  come after the real tokens, so no real position attends to them, and the
  loss ignores them. `init_decode_state` and `step` are the cached form (see
  the module docstring).
  """

  def setup(self):
    cfg = self.config
    self.decoder_layers = [DecoderLayer(cfg, name=f"layer_{i}")
                           for i in range(cfg.num_decoder_layers)]
    self.final_norm = layers.layer_norm(layers.compute_dtype(cfg), name="final_norm")

  def __call__(self, x: jax.Array, encoded: jax.Array, encoder_mask: jax.Array, *,
               train: bool) -> jax.Array:
    dtype = layers.compute_dtype(self.config)
    length = x.shape[1]
    self_mask = nn.make_causal_mask(jnp.ones((1, length), bool)).astype(bool)  # [1, 1, L, L]
    cross_mask = encoder_mask[:, None, None, :]  # [B, 1, 1, S]
    x = x.astype(dtype)
    encoded = encoded.astype(dtype)
    for layer in self.decoder_layers:
      x = layer(x, encoded, self_mask, cross_mask, train=train)
      x = layers.constrain(x, ("batch", "act_length", "act_embed"))
    return self.final_norm(x)

  def init_decode_state(self, encoded: jax.Array, encoder_mask: jax.Array, rows: int,
                        max_len: int) -> None:
    """Decoding variables of every layer: `rows` hypotheses over encoded [B, S, E]."""
    for layer in self.decoder_layers:
      layer.init_decode_state(encoded, encoder_mask, rows, max_len)

  def step(self, x: jax.Array) -> jax.Array:
    """Token vectors x [rows, 1, E] -> [rows, 1, E], one step of every hypothesis."""
    x = x.astype(layers.compute_dtype(self.config))
    for layer in self.decoder_layers:
      x = layer.step(x)
      x = layers.constrain(x, ("batch", "act_length", "act_embed"))
    return self.final_norm(x)


def sinusoidal_positions(positions: jax.Array, dim: int) -> jax.Array:
  """positions int [...] -> [..., dim] fixed sin/cos encoding (length-agnostic)."""
  half = dim // 2
  freq = jnp.exp(-jnp.log(10_000.0) * jnp.arange(half, dtype=jnp.float32) / half)  # [dim/2]
  angles = positions.astype(jnp.float32)[..., None] * freq  # [..., dim/2]
  return jnp.concatenate([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., dim]
