"""Small models for decoding tests.

Each has the search callback tokens_to_logits(ids [rows, 1], cache,
slot_cache) -> (logits [rows, V], cache, slot_cache) and scores a whole
sequence in NumPy (`score_sequence`), independently of the JAX decoding code,
for exhaustive-enumeration checks:

  RnnToy:     a recurrent language model whose cache is its hidden state.
  SlotRnnToy: the same model keeping its hidden states slot-major, as the
              Captioner keeps its self-attention keys/values: written in
              place in `slot_cache`, read through an ancestor table in
              `cache`. Correct only if the search reorders `cache` and never
              `slot_cache`.
  ChainToy:   a bigram model in which a word can only repeat itself, so the
              live prefixes of every length are few (one per word).

(The decoding glue is tested on the real Captioner,
tests/decoding/test_captioner_decode.py.)
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

PAD, BOS, EOS = 0, 1, 2
IMPOSSIBLE = -1e9  # logit of a token a toy never allows


def log_softmax_allowed(logits: np.ndarray) -> np.ndarray:
  """log-probabilities renormalised without PAD/BOS and impossible tokens (NumPy, f64)."""
  logits = np.asarray(logits, np.float64).copy()
  logits[[PAD, BOS]] = -np.inf
  logits[logits <= IMPOSSIBLE / 2] = -np.inf
  m = logits.max()
  return logits - m - np.log(np.exp(logits - m).sum())


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

  def next_hidden(self, h, ids):
    """h [rows, H], ids [rows, 1] -> [rows, H]."""
    return jnp.tanh(h @ self.rec + jnp.asarray(self.emb)[ids[:, 0]])

  def logits(self, h):
    """h [rows, H] -> [rows, V]."""
    return (h @ self.out).at[:, EOS].add(self.eos_bias)

  def tokens_to_logits(self, ids, cache, slot_cache):
    h = self.next_hidden(cache["h"], ids)  # [rows, H]
    return self.logits(h), {"h": h}, slot_cache

  def score_sequence(self, b: int, tokens: list[int]) -> float:
    """log p(tokens) for example b, renormalised without PAD/BOS (NumPy)."""
    h = self.memory[b].astype(np.float64)
    prev, total = BOS, 0.0
    for tok in tokens:
      h = np.tanh(h @ self.rec + self.emb[prev])
      logits = h @ self.out
      logits[EOS] += self.eos_bias
      total += log_softmax_allowed(logits)[tok]
      prev = tok
    return float(total)


@dataclasses.dataclass
class SlotRnnToy:
  """RnnToy's model with slot-major state (see the module docstring).

  slot_cache['h'] [rows, 1 + L, H]: row r, position t holds the hidden state
  after t steps of whichever hypothesis sat in row r at step t; written once,
  in place. cache['ancestors'] [rows, 1 + L]: the row holding position t of
  the hypothesis now in row r; cache['t'] [rows]: steps taken.
  """
  rnn: RnnToy

  def init_state(self, beam_size: int, max_len: int) -> tuple[dict, dict]:
    """(cache, slot_cache) for B*K rows."""
    memory = np.repeat(self.rnn.memory, beam_size, axis=0)  # [B*K, H]
    rows, hidden = memory.shape
    h = np.zeros((rows, 1 + max_len, hidden), np.float32)
    h[:, 0] = memory
    ancestors = np.zeros((rows, 1 + max_len), np.int32)
    ancestors[:, 0] = np.arange(rows)
    cache = {"ancestors": jnp.asarray(ancestors), "t": jnp.zeros((rows,), jnp.int32)}
    return cache, {"h": jnp.asarray(h)}

  def tokens_to_logits(self, ids, cache, slot_cache):
    rows = ids.shape[0]
    t = cache["t"][0]
    h_prev = slot_cache["h"][cache["ancestors"][:, t], t]  # [rows, H]
    h = self.rnn.next_hidden(h_prev, ids)  # [rows, H]
    slots = {"h": slot_cache["h"].at[:, t + 1].set(h)}
    cache = {"ancestors": cache["ancestors"].at[:, t + 1].set(jnp.arange(rows)),
             "t": cache["t"] + 1}
    return self.rnn.logits(h), cache, slots


@dataclasses.dataclass
class ChainToy:
  """After BOS any word or EOS; after word w only w again or EOS.

  The sequences are [EOS], w^n [EOS] (n < L) and w^L for each word w, and the
  live prefixes of every length are the W chains w^n: a beam of width >= W
  never prunes. EOS endings accumulate W per step, so with width W the
  finished set is full after one step and the search can stop early.
  """
  first: np.ndarray  # [B, V] logits after BOS
  stay: np.ndarray   # [B, V] logit of w after w (index w)
  stop: np.ndarray   # [B, V] logit of EOS after w (index w)

  @classmethod
  def from_probabilities(cls, first: dict[int, float], stay: dict[int, float]) -> "ChainToy":
    """One example: p(token | BOS) for EOS and each word; p(w | w), so p(EOS | w) = 1 - p(w | w)."""
    vocab = 1 + max(first)

    def logits(probs):  # [1, V]; tokens without a probability are impossible
      row = np.full((1, vocab), IMPOSSIBLE, np.float64)
      for t, p in probs.items():
        row[0, t] = np.log(p)
      return row.astype(np.float32)

    return cls(first=logits(first), stay=logits(stay),
               stop=logits({w: 1.0 - q for w, q in stay.items()}))

  @property
  def words(self) -> list[int]:
    return list(range(3, self.first.shape[1]))

  def init_cache(self, beam_size: int) -> dict:
    """Each row's example index [B*K] (gathered with the beams, so it stays right)."""
    batch = self.first.shape[0]
    return {"example": jnp.repeat(jnp.arange(batch, dtype=jnp.int32), beam_size)}

  def _logits(self, example, prev):
    vocab = self.first.shape[1]
    if prev == BOS:
      return self.first[example].astype(np.float64)
    logits = np.full(vocab, IMPOSSIBLE, np.float64)
    logits[prev] = self.stay[example, prev]
    logits[EOS] = self.stop[example, prev]
    return logits

  def tokens_to_logits(self, ids, cache, slot_cache):
    prev = ids[:, 0]  # [rows]
    example = cache["example"]  # [rows]
    vocab = self.first.shape[1]
    rows = jnp.arange(ids.shape[0])
    after_word = jnp.full((ids.shape[0], vocab), IMPOSSIBLE, jnp.float32)  # [rows, V]
    after_word = after_word.at[rows, prev].set(jnp.asarray(self.stay)[example, prev])
    after_word = after_word.at[rows, EOS].set(jnp.asarray(self.stop)[example, prev])
    logits = jnp.where((prev == BOS)[:, None], jnp.asarray(self.first)[example],
                       after_word)  # [rows, V]
    return logits, cache, slot_cache

  def sequences(self, max_len: int) -> list[list[int]]:
    """Every sequence of nonzero probability."""
    seqs = [[EOS]]
    for w in self.words:
      seqs += [[w] * n + [EOS] for n in range(1, max_len)] + [[w] * max_len]
    return seqs

  def score_sequence(self, b: int, tokens: list[int]) -> float:
    prev, total = BOS, 0.0
    for tok in tokens:
      total += log_softmax_allowed(self._logits(b, prev))[tok]
      prev = tok
    return float(total)
