"""Greedy decoding and sampling (temperature, top-k, nucleus / top-p).

Same callback and the same meaning of "length" as beam_search.py: at most
`max_decode_len` generated tokens, EOS included, so a sequence may hold
`max_decode_len` non-EOS tokens (finished by truncation). [PAD] and [BOS] are
never generated. Here there is one hypothesis per example, so rows = B and
nothing is reordered: tokens_to_logits(ids int32 [B, 1], cache, slot_cache)
-> (logits [B, V], cache, slot_cache), both caches carried as they are.

The returned log-probability of a sequence is always measured under the
model's own distribution (temperature 1, no truncation, renormalised over the
allowed tokens), so greedy, sampled and beam outputs are comparable.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from cc12m_jax.data.text import special_tokens

from cc12m_jax.decoding.beam_search import (NEG_INF, Cache, TokensToLogits,
                                            mask_disallowed)


def filter_logits(logits: jax.Array, *, temperature: float = 1.0,
                  top_k: int = 0, top_p: float = 1.0) -> jax.Array:
  """Temperature, then top-k, then nucleus filtering of logits [B, V].

  Filtered-out tokens get NEG_INF. top_k=0 and top_p=1.0 disable the filter.
  Nucleus keeps the smallest set of most likely tokens whose probability
  reaches top_p (the most likely token is always kept).
  """
  if temperature <= 0:
    raise ValueError(f"temperature must be > 0, got {temperature}")
  if top_k < 0:
    raise ValueError(f"top_k must be >= 0, got {top_k}")
  if not 0.0 < top_p <= 1.0:
    raise ValueError(f"top_p must be in (0, 1], got {top_p}")
  logits = logits / temperature                               # [B, V]
  if top_k > 0:
    kth = jax.lax.top_k(logits, min(top_k, logits.shape[-1]))[0][:, -1:]
    logits = jnp.where(logits >= kth, logits, NEG_INF)        # [B, V]
  if top_p < 1.0:
    sorted_logits = jnp.sort(logits, axis=-1)[:, ::-1]        # [B, V] desc
    probs = jax.nn.softmax(sorted_logits, axis=-1)
    mass_before = jnp.cumsum(probs, axis=-1) - probs          # [B, V]
    keep = mass_before < top_p                                # first always
    # Smallest kept logit is the threshold.
    threshold = jnp.min(jnp.where(keep, sorted_logits, jnp.inf), axis=-1,
                        keepdims=True)                        # [B, 1]
    logits = jnp.where(logits >= threshold, logits, NEG_INF)
  return logits


@dataclasses.dataclass
class SampleState:
  t: jax.Array          # int32 []; tokens generated so far
  seqs: jax.Array       # int32 [B, 1 + L]; column 0 is BOS
  logprobs: jax.Array   # f32 [B]
  finished: jax.Array   # bool [B]
  cache: Cache
  slot_cache: Cache


jax.tree_util.register_dataclass(
    SampleState,
    data_fields=["t", "seqs", "logprobs", "finished", "cache", "slot_cache"],
    meta_fields=[])


def _decode_loop(init_cache: Cache, tokens_to_logits: TokensToLogits,
                 batch_size: int, choose, *, slot_cache: Cache,
                 max_decode_len: int, eos_id: int, bos_id: int, pad_id: int
                 ) -> tuple[jax.Array, jax.Array]:
  """Shared loop; choose(logits [B, V], t) -> token ids int32 [B]."""
  if max_decode_len < 1:
    raise ValueError(f"max_decode_len must be >= 1, got {max_decode_len}")
  disallowed = tuple(sorted({pad_id, bos_id} - {eos_id}))
  b, length = batch_size, max_decode_len
  state = SampleState(
      t=jnp.array(0, jnp.int32),
      seqs=jnp.zeros((b, 1 + length), jnp.int32).at[:, 0].set(bos_id),
      logprobs=jnp.zeros((b,), jnp.float32),
      finished=jnp.zeros((b,), bool),
      cache=init_cache,
      slot_cache=slot_cache)

  def not_done(s: SampleState) -> jax.Array:
    return (s.t < length) & ~jnp.all(s.finished)

  def step(s: SampleState) -> SampleState:
    ids = jax.lax.dynamic_slice_in_dim(s.seqs, s.t, 1, axis=1)   # [B, 1]
    logits, cache, slots = tokens_to_logits(ids, s.cache,
                                            s.slot_cache)        # [B, V]
    logits = mask_disallowed(logits.astype(jnp.float32), disallowed)
    token = choose(logits, s.t).astype(jnp.int32)                # [B]
    logp = jax.nn.log_softmax(logits, axis=-1)                   # [B, V]
    token_logp = jnp.take_along_axis(logp, token[:, None], axis=1)[:, 0]
    # Finished rows keep PAD and their log-prob.
    token = jnp.where(s.finished, pad_id, token)
    logprobs = s.logprobs + jnp.where(s.finished, 0.0, token_logp)
    seqs = jax.lax.dynamic_update_slice_in_dim(s.seqs, token[:, None],
                                               s.t + 1, axis=1)
    finished = s.finished | (token == eos_id)
    return SampleState(t=s.t + 1, seqs=seqs, logprobs=logprobs,
                       finished=finished, cache=cache, slot_cache=slots)

  final = jax.lax.while_loop(not_done, step, state)
  return final.seqs[:, 1:], final.logprobs


def greedy_search(init_cache: Cache, tokens_to_logits: TokensToLogits,
                  batch_size: int, *, slot_cache: Cache = None,
                  max_decode_len: int = 36,
                  eos_id: int = special_tokens.EOS_ID,
                  bos_id: int = special_tokens.BOS_ID,
                  pad_id: int = special_tokens.PAD_ID
                  ) -> tuple[jax.Array, jax.Array]:
  """Arg-max decoding; returns (sequences int32 [B, L], logprobs f32 [B])."""
  choose = lambda logits, t: jnp.argmax(logits, axis=-1)
  return _decode_loop(init_cache, tokens_to_logits, batch_size, choose,
                      slot_cache=slot_cache,
                      max_decode_len=max_decode_len, eos_id=eos_id,
                      bos_id=bos_id, pad_id=pad_id)


def sample(init_cache: Cache, tokens_to_logits: TokensToLogits,
           batch_size: int, rng: jax.Array, *, slot_cache: Cache = None,
           max_decode_len: int = 36, temperature: float = 1.0, top_k: int = 0,
           top_p: float = 1.0,
           eos_id: int = special_tokens.EOS_ID,
           bos_id: int = special_tokens.BOS_ID,
           pad_id: int = special_tokens.PAD_ID
           ) -> tuple[jax.Array, jax.Array]:
  """Ancestral sampling; returns (sequences int32 [B, L], logprobs f32 [B]).

  Step t draws from softmax(filter_logits(logits)) with key fold_in(rng, t).
  """
  filter_logits(jnp.zeros((1, 2)), temperature=temperature, top_k=top_k,
                top_p=top_p)  # validates the settings before tracing the loop

  def choose(logits, t):
    filtered = filter_logits(logits, temperature=temperature, top_k=top_k,
                             top_p=top_p)
    return jax.random.categorical(jax.random.fold_in(rng, t), filtered,
                                  axis=-1)

  return _decode_loop(init_cache, tokens_to_logits, batch_size, choose,
                      slot_cache=slot_cache,
                      max_decode_len=max_decode_len, eos_id=eos_id,
                      bos_id=bos_id, pad_id=pad_id)
