"""Batched beam search with a GNMT length penalty, in one `jax.lax.while_loop`.

What "length" means here (the same everywhere in cc12m_jax.decoding):
  * A decoded sequence is the list of generated tokens y1 .. yn; the [BOS]
    fed at the first step is never part of it.
  * Its length n counts every generated token, *including* the final [EOS]
    when there is one: "a dog [EOS]" has length 3. This matches the training
    targets (`decoder_targets` = y1 .. yn [EOS], `data.max_caption_length`
    counts the EOS too).
  * `max_decode_len` is the most tokens a sequence can have, and the search
    really can return that many: with max_decode_len=36 a hypothesis may hold
    36 non-EOS tokens (it is then finished by truncation, with no EOS), or 35
    tokens followed by EOS. The search runs at most `max_decode_len` decoder
    steps, so the decoder cache needs `max_decode_len` positions.

Score of a finished sequence (what "best" means):
    score(y) = log p(y1 .. yn) / lp(n),   lp(n) = ((5 + n) / 6) ** alpha
where log p sums the model's log-probabilities of every generated token,
EOS included, under the distribution renormalised over allowed tokens
([PAD] and [BOS] are never generated). alpha = 0 gives the plain log-prob.

Each step expands every live beam by every allowed token. The K EOS
extensions (one per live beam) become finished candidates; the K best non-EOS
extensions (out of K * V) become the next live beams, and the decoder's
reorderable state (`cache`) is gathered along with them; its never-reordered
state (`slot_cache`) is carried as it is. At the last step the live
extensions are finished too (truncation). The search stops early, per batch
element, once K hypotheses are finished and none of the live beams can still
beat the worst of them: a live beam's log-prob only falls as it grows, so its
best possible score is logp / lp(max_decode_len) (valid for alpha >= 0).

When beam_size is at least the number of distinct live prefixes the search
never prunes and is exact (the tests check this against enumeration).

Pure array code: no host loops, so the whole search jits and shards over the
batch axis like any other batched computation.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import jax
import jax.numpy as jnp

from cc12m_jax.data.text import special_tokens


# The model's state for B*K hypotheses, split by the model (never by leaf
# names here) into
#   cache:      per-hypothesis state, leaves [B*K, ...]; reordered with the
#               beams (scalar leaves are shared by all beams and left alone);
#   slot_cache: state the model writes in place and addresses through
#               `cache` (e.g. self-attention keys/values read through an
#               ancestor table); carried through the loop, never reordered,
#               so a step costs no copy of it.
# Loop constants (e.g. keys/values of the encoder output) belong in the
# callback's closure, not in either.
Cache = Any
# tokens_to_logits(ids int32 [B*K, 1], cache, slot_cache)
#     -> (logits f32 [B*K, V], cache, slot_cache)
TokensToLogits = Callable[[jax.Array, Cache, Cache],
                          tuple[jax.Array, Cache, Cache]]

NEG_INF = -1.0e7  # finite "minus infinity": keeps the arithmetic NaN-free.


def length_penalty(length: jax.Array | int, alpha: float) -> jax.Array:
  """GNMT length penalty ((5 + length) / 6) ** alpha, `length` incl. EOS."""
  return jnp.power((5.0 + jnp.asarray(length, jnp.float32)) / 6.0, alpha)


def flatten_beams(x: jax.Array) -> jax.Array:
  """[B, K, ...] -> [B*K, ...]."""
  return x.reshape((x.shape[0] * x.shape[1],) + x.shape[2:])


def unflatten_beams(x: jax.Array, batch_size: int) -> jax.Array:
  """[B*K, ...] -> [B, K, ...]."""
  return x.reshape((batch_size, x.shape[0] // batch_size) + x.shape[1:])


def gather_beams(tree: Any, beam_indices: jax.Array, batch_size: int,
                 flat: bool) -> Any:
  """Selects beams `beam_indices` [B, N] from every leaf of `tree`.

  Leaves are [B, K, ...] (flat=False) or [B*K, ...] (flat=True; the cache);
  results have N beams. Scalar leaves are left unchanged.
  """
  b = beam_indices.shape[0]
  # Row indices into the flat [B*K, ...] layout: whole contiguous rows are
  # copied, which XLA does much faster than an element-wise gather.

  def gather(x):
    if x.ndim == 0:
      return x
    rows = x if flat else flatten_beams(x)                 # [B*K, ...]
    k = rows.shape[0] // batch_size
    flat_idx = (jnp.arange(b)[:, None] * k + beam_indices).reshape(-1)
    y = rows[flat_idx]                                     # [B*N, ...]
    return y if flat else unflatten_beams(y, batch_size)

  return jax.tree_util.tree_map(gather, tree)


def mask_disallowed(logits: jax.Array, disallowed_ids: tuple[int, ...]
                    ) -> jax.Array:
  """Sets the logits of tokens that may never be generated to NEG_INF."""
  if not disallowed_ids:
    return logits
  vocab = logits.shape[-1]
  bad = jnp.zeros((vocab,), bool).at[jnp.asarray(disallowed_ids)].set(True)
  return jnp.where(bad, NEG_INF, logits)


@dataclasses.dataclass
class BeamState:
  """Loop state. t = number of tokens generated so far by live beams."""
  t: jax.Array                  # int32 []
  live_seqs: jax.Array          # int32 [B, K, 1 + L]; column 0 is BOS
  live_logprobs: jax.Array      # f32 [B, K]
  finished_seqs: jax.Array      # int32 [B, K, 1 + L]
  finished_scores: jax.Array    # f32 [B, K]; NEG_INF = empty slot
  cache: Cache                  # leaves [B*K, ...], reordered with the beams
  slot_cache: Cache             # never reordered


jax.tree_util.register_dataclass(
    BeamState,
    data_fields=["t", "live_seqs", "live_logprobs", "finished_seqs",
                 "finished_scores", "cache", "slot_cache"],
    meta_fields=[])


def beam_search(init_cache: Cache,
                tokens_to_logits: TokensToLogits,
                batch_size: int,
                *,
                slot_cache: Cache = None,
                beam_size: int = 5,
                alpha: float = 0.6,
                max_decode_len: int = 36,
                eos_id: int = special_tokens.EOS_ID,
                bos_id: int = special_tokens.BOS_ID,
                pad_id: int = special_tokens.PAD_ID,
                ) -> tuple[jax.Array, jax.Array]:
  """Beam search; returns (sequences int32 [B, K, L], scores f32 [B, K]).

  Args:
    init_cache: the model's reorderable state, leaves [B*K, ...] (beam-major:
      rows b*K .. b*K+K-1 are example b), gathered along the surviving beams
      after every step.
    tokens_to_logits: (ids int32 [B*K, 1], cache, slot_cache)
      -> (logits [B*K, V], cache, slot_cache).
    batch_size: B.
    slot_cache: the model's state that is never reordered (see `Cache`
      above); passed to and returned by every call of tokens_to_logits.
    beam_size: K.
    alpha: length-penalty exponent (>= 0).
    max_decode_len: L, most generated tokens per sequence, EOS included.
    eos_id, bos_id, pad_id: special ids; PAD and BOS are never generated.

  Returns:
    sequences: [B, K, L], best first, generated tokens only (no BOS), the EOS
      kept, PAD (0) after it. scores: [B, K] length-penalised log-probs, best
      first. A slot that holds no hypothesis (possible only when fewer than K
      distinct sequences exist) has score NEG_INF.
  """
  if beam_size < 1:
    raise ValueError(f"beam_size must be >= 1, got {beam_size}")
  if max_decode_len < 1:
    raise ValueError(f"max_decode_len must be >= 1, got {max_decode_len}")
  if alpha < 0:
    raise ValueError(f"alpha must be >= 0 (early stopping relies on it), "
                     f"got {alpha}")
  b, k, length = batch_size, beam_size, max_decode_len
  disallowed = tuple(sorted({pad_id, bos_id} - {eos_id}))
  max_lp = length_penalty(length, alpha)

  seqs0 = jnp.zeros((b, k, 1 + length), jnp.int32).at[:, :, 0].set(bos_id)
  # Only beam 0 is alive at first: the K copies of [BOS] are identical.
  logprobs0 = jnp.tile(jnp.array([0.0] + [NEG_INF] * (k - 1), jnp.float32),
                       (b, 1))  # [B, K]
  state = BeamState(
      t=jnp.array(0, jnp.int32),
      live_seqs=seqs0,
      live_logprobs=logprobs0,
      finished_seqs=jnp.zeros_like(seqs0),
      finished_scores=jnp.full((b, k), NEG_INF, jnp.float32),
      cache=init_cache,
      slot_cache=slot_cache)

  def not_done(s: BeamState) -> jax.Array:
    best_live = jnp.max(s.live_logprobs, axis=1) / max_lp  # [B]
    worst_finished = jnp.min(s.finished_scores, axis=1)    # [B]
    # A NEG_INF live log-prob means no live beam at all.
    can_improve = (best_live > worst_finished) & (
        jnp.max(s.live_logprobs, axis=1) > NEG_INF / 2)
    return (s.t < length) & jnp.any(can_improve)

  def step(s: BeamState) -> BeamState:
    ids = jax.lax.dynamic_slice_in_dim(s.live_seqs, s.t, 1, axis=2)  # [B,K,1]
    logits, cache, slots = tokens_to_logits(flatten_beams(ids), s.cache,
                                            s.slot_cache)  # [B*K, V]
    logits = mask_disallowed(logits.astype(jnp.float32), disallowed)
    logp = jax.nn.log_softmax(logits, axis=-1)                     # [B*K, V]
    logp = unflatten_beams(logp, b)                                # [B, K, V]
    vocab = logp.shape[-1]
    cand = s.live_logprobs[:, :, None] + logp                      # [B, K, V]
    # Dead beams stay dead (NEG_INF + anything must not climb back).
    cand = jnp.where(s.live_logprobs[:, :, None] > NEG_INF / 2, cand, NEG_INF)
    new_len = s.t + 1
    lp = length_penalty(new_len, alpha)
    last_step = new_len == length

    # Live candidates: the K best non-EOS extensions out of K * V.
    non_eos = cand.at[:, :, eos_id].set(NEG_INF).reshape(b, k * vocab)
    live_lp, flat_idx = jax.lax.top_k(non_eos, k)          # [B, K]
    parent = flat_idx // vocab                              # [B, K]
    token = (flat_idx % vocab).astype(jnp.int32)            # [B, K]
    live_seqs = gather_beams(s.live_seqs, parent, b, flat=False)  # [B,K,1+L]
    live_seqs = jax.lax.dynamic_update_slice_in_dim(
        live_seqs, token[:, :, None], new_len, axis=2)
    cache = gather_beams(cache, parent, b, flat=True)

    # Finished candidates: each live beam + EOS; at the last step also the
    # live extensions themselves (finished by truncation).
    eos_lp = cand[:, :, eos_id]                              # [B, K]
    eos_seqs = jax.lax.dynamic_update_slice_in_dim(
        s.live_seqs, jnp.full((b, k, 1), eos_id, jnp.int32), new_len, axis=2)
    trunc_scores = jnp.where(last_step & (live_lp > NEG_INF / 2),
                             live_lp / lp, NEG_INF)
    eos_scores = jnp.where(eos_lp > NEG_INF / 2, eos_lp / lp, NEG_INF)
    all_seqs = jnp.concatenate([s.finished_seqs, eos_seqs, live_seqs], axis=1)
    all_scores = jnp.concatenate(
        [s.finished_scores, eos_scores, trunc_scores], axis=1)  # [B, 3K]
    fin_scores, fin_idx = jax.lax.top_k(all_scores, k)          # [B, K]
    fin_seqs = gather_beams(all_seqs, fin_idx, b, flat=False)

    return BeamState(t=new_len, live_seqs=live_seqs, live_logprobs=live_lp,
                     finished_seqs=fin_seqs, finished_scores=fin_scores,
                     cache=cache, slot_cache=slots)

  final = jax.lax.while_loop(not_done, step, state)
  return final.finished_seqs[:, :, 1:], final.finished_scores
