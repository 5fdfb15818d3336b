"""Small models for decoding tests.

`RnnToy`: a pure-function recurrent language model whose cache is its hidden
state; `score_sequence` scores a whole sequence in NumPy, independently of the
JAX decoding code, for exhaustive-enumeration checks. (The decoding glue is
tested on the real Captioner, tests/decoding/captioner_decode_test.py.)
"""
from __future__ import annotations

import dataclasses

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
