"""Small models for decoding tests.

`RnnToy`: a pure-function recurrent language model whose cache is its hidden
state; `score_sequence` scores a whole sequence in NumPy, independently of the
JAX decoding code, for exhaustive-enumeration checks.

`ToyCaptioner`: a one-layer flax encoder-decoder with the Captioner interface
(`encode`, `decode(..., decode=True)` with a flax key/value cache), used to
check cached decoding against the full decoder and to test captioner glue.
"""
from __future__ import annotations

import dataclasses

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

PAD, BOS, EOS = 0, 1, 2


@dataclasses.dataclass
class RnnToy:
  emb: np.ndarray     # [V, H]
  rec: np.ndarray     # [H, H]
  out: np.ndarray     # [H, V]
  memory: np.ndarray  # [B, H]  per-example initial state ("the image")
  eos_bias: float = 0.0

  @classmethod
  def create(cls, seed: int, vocab: int, hidden: int, batch: int,
             scale: float = 2.0, eos_bias: float = 0.0) -> "RnnToy":
    rs = np.random.RandomState(seed)
    out = rs.normal(size=(hidden, vocab)).astype(np.float32) * scale
    toy = cls(emb=rs.normal(size=(vocab, hidden)).astype(np.float32),
              rec=rs.normal(size=(hidden, hidden)).astype(np.float32) * 0.5,
              out=out,
              memory=rs.normal(size=(batch, hidden)).astype(np.float32),
              eos_bias=eos_bias)
    return toy

  def init_cache(self, beam_size: int) -> dict:
    h = np.repeat(self.memory, beam_size, axis=0)  # [B*K, H]
    return {"h": jnp.asarray(h)}

  def tokens_to_logits(self, ids, cache):
    h = jnp.tanh(cache["h"] @ self.rec + jnp.asarray(self.emb)[ids[:, 0]])
    logits = h @ self.out
    logits = logits.at[:, EOS].add(self.eos_bias)
    return logits, {"h": h}

  def score_sequence(self, b: int, tokens: list[int]) -> float:
    """log p(tokens) for example b, renormalised without PAD/BOS (NumPy)."""
    h = self.memory[b].astype(np.float64)
    prev, total = BOS, 0.0
    for tok in tokens:
      h = np.tanh(h @ self.rec + self.emb[prev])
      logits = h @ self.out
      logits[EOS] += self.eos_bias
      logits[[PAD, BOS]] = -np.inf
      m = logits.max()
      logp = logits - m - np.log(np.exp(logits - m).sum())
      total += logp[tok]
      prev = tok
    return float(total)


class ToyCaptioner(nn.Module):
  """One-layer encoder-decoder with the Captioner method signatures."""
  vocab_size: int
  emb_dim: int = 16
  num_heads: int = 2
  max_len: int = 64

  def setup(self):
    self.feature_proj = nn.Dense(self.emb_dim)
    self.tok_emb = nn.Embed(self.vocab_size, self.emb_dim)
    self.pos_emb = self.param("pos_emb", nn.initializers.normal(1.0),
                              (self.max_len, self.emb_dim))
    self.self_attn = nn.MultiHeadDotProductAttention(num_heads=self.num_heads)
    self.cross_attn = nn.MultiHeadDotProductAttention(
        num_heads=self.num_heads)
    self.out = nn.Dense(self.vocab_size)

  def encode(self, batch, *, train: bool):
    x = jnp.concatenate([batch["global_feature"][:, None],
                         batch["region_features"]], axis=1)  # [B, 1+R, D]
    mask = jnp.concatenate([jnp.ones_like(batch["region_mask"][:, :1]),
                            batch["region_mask"]], axis=1)     # [B, 1+R]
    return self.feature_proj(x), mask

  def decode(self, decoder_inputs, encoded, encoder_mask, *, train: bool,
             decode: bool = False):
    length = decoder_inputs.shape[1]
    x = self.tok_emb(decoder_inputs)                          # [B, L, E]
    if decode:
      is_init = not self.has_variable("cache", "position")
      position = self.variable("cache", "position",
                               lambda: jnp.zeros((), jnp.int32))
      if is_init:
        pos = self.pos_emb[:length]
      else:
        pos = jax.lax.dynamic_slice_in_dim(self.pos_emb, position.value, 1)
        position.value = position.value + 1
      causal = None
    else:
      pos = self.pos_emb[:length]
      causal = nn.make_causal_mask(decoder_inputs)
    x = x + pos[None]
    x = x + self.self_attn(x, mask=causal, decode=decode)
    cross_mask = nn.make_attention_mask(
        jnp.ones(decoder_inputs.shape, bool), encoder_mask)
    x = x + self.cross_attn(x, encoded, mask=cross_mask)
    return self.out(x)                                        # [B, L, V]

  def __call__(self, batch, *, train: bool):
    encoded, mask = self.encode(batch, train=train)
    return self.decode(batch["decoder_inputs"], encoded, mask, train=train)


def toy_batch(rng: np.random.RandomState, batch: int, dim: int = 8,
              regions: int = 3, length: int = 6) -> dict:
  return {
      "global_feature": rng.normal(size=(batch, dim)).astype(np.float32),
      "region_features": rng.normal(size=(batch, regions, dim)
                                    ).astype(np.float32),
      "region_mask": rng.rand(batch, regions) > 0.3,
      "decoder_inputs": rng.randint(3, 10, size=(batch, length)
                                    ).astype(np.int32),
  }
