"""Caption decoding for an encoder-decoder with the Captioner interface.

The model must provide (cc12m_jax/models/captioner.py)
  encode(batch, *, train) -> (encoded [B, S, E], encoder_mask [B, S])
  init_decode_state(encoded, encoder_mask, num_hypotheses, max_decode_len)
      creating the decoding state in the collections DECODE_COLLECTIONS
  decode_step(ids [B*K, 1]) -> logits [B*K, V]
      reading that state and updating STEP_CACHE and SLOT_CACHE.

The model owns its decoding state and decides what goes where: STEP_CACHE is
reordered with the beams, SLOT_CACHE is carried through the loop and never
reordered, PRIMED_CACHE (the cross-attention keys/values of B examples,
projected once per batch) is closed over by the step, so never carried nor
gathered. This module passes collections by name and never looks inside.

`make_decode_fn` returns one jitted function that runs the encoder once per
image, creates the decoding state for K hypotheses per example (beam-major:
rows b*K .. b*K+K-1 belong to example b) sized for `max_decode_len` steps, and
runs beam search (or greedy / sampling, K = 1). `best_captions` turns the
best hypotheses into text with the subword tokenizer.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import flax.linen as nn
import jax
import ml_collections
import numpy as np

from cc12m_jax.data.text import special_tokens
from cc12m_jax.decoding import beam_search as beam_lib
from cc12m_jax.decoding import sampling
from cc12m_jax.models.captioner import (DECODE_COLLECTIONS, PRIMED_CACHE,
                                        SLOT_CACHE, STEP_CACHE)

METHODS = ("beam", "greedy", "sample")


def validate_decode_config(cfg: ml_collections.ConfigDict) -> None:
  """Fails before any compute on a bad `config.decode`, naming the field."""
  if cfg.method not in METHODS:
    raise ValueError(f"config.decode.method={cfg.method!r}; expected one of "
                     f"{METHODS}")
  if cfg.beam_size < 1:
    raise ValueError(f"config.decode.beam_size={cfg.beam_size}; must be >= 1")
  if cfg.alpha < 0:
    raise ValueError(f"config.decode.alpha={cfg.alpha}; must be >= 0")
  if cfg.max_decode_len < 1:
    raise ValueError(f"config.decode.max_decode_len={cfg.max_decode_len}; "
                     "must be >= 1")
  if cfg.temperature <= 0:
    raise ValueError(f"config.decode.temperature={cfg.temperature}; "
                     "must be > 0")
  if cfg.top_k < 0:
    raise ValueError(f"config.decode.top_k={cfg.top_k}; must be >= 0")
  if not 0.0 < cfg.top_p <= 1.0:
    raise ValueError(f"config.decode.top_p={cfg.top_p}; must be in (0, 1]")


def num_hypotheses(cfg: ml_collections.ConfigDict) -> int:
  """K: beams kept per example (1 for greedy and sampling)."""
  return cfg.beam_size if cfg.method == "beam" else 1


def decode_batch(model: nn.Module, params: Any, batch: Mapping[str, Any],
                 rng: jax.Array, cfg: ml_collections.ConfigDict, *,
                 eos_id: int = special_tokens.EOS_ID,
                 bos_id: int = special_tokens.BOS_ID,
                 pad_id: int = special_tokens.PAD_ID,
                 logits_hook: Callable[[jax.Array], jax.Array] | None = None,
                 ) -> dict[str, jax.Array]:
  """Decodes one batch (traceable; see make_decode_fn for the jitted form).

  Returns {'tokens': int32 [B, K, L], 'scores': f32 [B, K]} best first.
  Beam scores are length-penalised log-probs; greedy/sample scores are the
  plain log-probs. `logits_hook` (logits [rows, V] -> same) lets callers
  change the distribution, e.g. the benchmark forbids EOS to force full
  length.
  """
  k = num_hypotheses(cfg)
  variables = {"params": params}
  encoded, encoder_mask = model.apply(variables, batch, train=False,
                                      method="encode")  # [B, S, E], [B, S]
  b = encoded.shape[0]
  _, state = model.apply(variables, encoded, encoder_mask, num_hypotheses=k,
                         max_decode_len=cfg.max_decode_len,
                         method="init_decode_state",
                         mutable=list(DECODE_COLLECTIONS))
  # Loop constants, closed over by the step: neither carried nor gathered.
  constants = {"params": params, PRIMED_CACHE: state[PRIMED_CACHE]}

  def tokens_to_logits(ids, cache, slot_cache):
    logits, mutated = model.apply(
        {**constants, STEP_CACHE: cache, SLOT_CACHE: slot_cache}, ids,
        method="decode_step", mutable=[STEP_CACHE, SLOT_CACHE])  # [B*K, V]
    if logits_hook is not None:
      logits = logits_hook(logits)
    return logits, mutated[STEP_CACHE], mutated[SLOT_CACHE]

  cache = state[STEP_CACHE]
  common = dict(slot_cache=state[SLOT_CACHE],
                max_decode_len=cfg.max_decode_len, eos_id=eos_id,
                bos_id=bos_id, pad_id=pad_id)
  if cfg.method == "beam":
    tokens, scores = beam_lib.beam_search(
        cache, tokens_to_logits, b, beam_size=k, alpha=cfg.alpha, **common)
  elif cfg.method == "greedy":
    tokens, scores = sampling.greedy_search(cache, tokens_to_logits, b,
                                            **common)
    tokens, scores = tokens[:, None], scores[:, None]
  else:
    tokens, scores = sampling.sample(
        cache, tokens_to_logits, b, rng, temperature=cfg.temperature,
        top_k=cfg.top_k, top_p=cfg.top_p, **common)
    tokens, scores = tokens[:, None], scores[:, None]
  return {"tokens": tokens, "scores": scores}


def make_decode_fn(model: nn.Module, cfg: ml_collections.ConfigDict, **kw
                   ) -> Callable[[Any, Mapping[str, Any], jax.Array],
                                 dict[str, jax.Array]]:
  """jit(decode_batch) for fixed model and settings: fn(params, batch, rng).

  Under a mesh, pass batch arrays sharded over the batch axes; the search
  is pure array code, so XLA keeps each example's beams on its device.
  """
  validate_decode_config(cfg)
  # The jitted closure must not see later changes to the caller's config.
  cfg = ml_collections.FrozenConfigDict(cfg)

  @jax.jit
  def fn(params, batch, rng):
    batch = {k: v for k, v in batch.items() if k not in ("decoder_inputs",
                                                         "decoder_targets")}
    return decode_batch(model, params, batch, rng, cfg, **kw)

  return fn


def tokens_to_text(tokens: np.ndarray, tokenizer: Any) -> list[str]:
  """Detokenises int [N, L] (generated tokens, no BOS) with tokenizer.decode."""
  return [tokenizer.decode([int(t) for t in row]) for row in np.asarray(tokens)]


def best_captions(output: Mapping[str, Any], tokenizer: Any) -> list[str]:
  """The best hypothesis of each example, as text: list of B strings."""
  tokens = np.asarray(jax.device_get(output["tokens"]))  # [B, K, L]
  return tokens_to_text(tokens[:, 0], tokenizer)
