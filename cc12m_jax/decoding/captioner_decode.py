"""Caption decoding for an encoder-decoder with the Captioner interface.

The model must provide
  encode(batch, *, train) -> (encoded [B, S, E], encoder_mask [B, S])
  decode(ids [B, L], encoded, encoder_mask, *, train, decode) -> logits [B, L, V]
where decode=True takes one token [B, 1] per call and updates the flax
'cache' collection (every cache leaf has leading dimension B).

`make_decode_fn` returns one jitted function that runs the encoder once per
image, projects the cross-attention keys/values of every decoder layer once
([B, S] rows, shared by the K beams of an example and closed over by the
step, so never carried through the loop nor gathered), builds a zero
self-attention cache of B*K rows (beam-major: rows b*K .. b*K+K-1 belong to
example b) sized for `max_decode_len` steps, and runs beam search (or
greedy / sampling, K = 1). `captions_from_tokens` turns the
token ids into text with the subword tokenizer.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import flax
import flax.linen as nn
from flax import traverse_util
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from cc12m_jax.data.text import special_tokens
from cc12m_jax.decoding import beam_search as beam_lib
from cc12m_jax.decoding import sampling
from cc12m_jax.models import transformer

METHODS = ("beam", "greedy", "sample")

# Cache leaves of the lazily filled cross-attention cache; decode_batch
# replaces them with a primed cache computed once per batch (see
# transformer.cross_attention_cache) and keeps it out of the loop state.
CROSS_CACHE_KEYS = ("cross_key", "cross_value", "filled", "cross_mask")
# Self-attention caches are slot-major (rows are addressed through the
# gathered `cache_ancestors` table), so beam search must not reorder them.
SLOT_MAJOR_CACHE_KEYS = ("cached_key", "cached_value")

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


def init_decoder_cache(model: nn.Module, encoded: jax.Array,
                       encoder_mask: jax.Array, max_decode_len: int) -> Any:
  """Zero 'cache' for `encoded.shape[0]` rows and `max_decode_len` steps.

  Shapes come from `jax.eval_shape` of `model.init(decode=True)` on
  [rows, max_decode_len] inputs, so no parameter is computed.
  """
  rows = encoded.shape[0]

  def shaping_init():
    return model.init({"params": jax.random.PRNGKey(0)},
                      jnp.ones((rows, max_decode_len), jnp.int32), encoded,
                      encoder_mask, train=False, decode=True,
                      method="decode")["cache"]

  shapes = jax.eval_shape(shaping_init)
  return jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)


def split_cross_cache(cache: Any) -> tuple[dict, dict]:
  """cache -> (entries that change per step, cross-attention entries)."""
  flat = traverse_util.flatten_dict(flax.core.unfreeze(cache))
  cross = {p: v for p, v in flat.items() if p[-1] in CROSS_CACHE_KEYS}
  rest = {p: v for p, v in flat.items() if p[-1] not in CROSS_CACHE_KEYS}
  return (traverse_util.unflatten_dict(rest),
          traverse_util.unflatten_dict(cross))


def merge_cache(loop_cache: Any, cross_cache: Any) -> dict:
  """Inverse of split_cross_cache: one nested cache dict."""
  flat = traverse_util.flatten_dict(flax.core.unfreeze(loop_cache))
  flat.update(traverse_util.flatten_dict(cross_cache))
  return traverse_util.unflatten_dict(flat)


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
  # Only the shapes of the tiled [B*K, ...] inputs are used (jit drops the
  # zero cross-attention entries, replaced by the primed ones below).
  cache = init_decoder_cache(model, beam_lib.tile_beams(encoded, k),
                             beam_lib.tile_beams(encoder_mask, k),
                             cfg.max_decode_len)
  cache, _ = split_cross_cache(cache)
  # Cross-attention keys/values [B, H, S, Dh], projected once per batch and
  # closed over by the step: loop constants, neither carried nor gathered.
  cross_cache = {"decoder": transformer.cross_attention_cache(
      params["decoder"], encoded, encoder_mask, model.config)}

  def tokens_to_logits(ids, cache):
    logits, mutated = model.apply(
        {"params": params, "cache": merge_cache(cache, cross_cache)},
        ids, encoded, encoder_mask, train=False, decode=True,
        mutable=["cache"], method="decode")             # [B*K, 1, V]
    logits = logits[:, 0]                               # [B*K, V]
    if logits_hook is not None:
      logits = logits_hook(logits)
    return logits, split_cross_cache(mutated["cache"])[0]

  common = dict(max_decode_len=cfg.max_decode_len, eos_id=eos_id,
                bos_id=bos_id, pad_id=pad_id)
  if cfg.method == "beam":
    tokens, scores = beam_lib.beam_search(
        cache, tokens_to_logits, b, beam_size=k, alpha=cfg.alpha,
        beam_invariant_keys=SLOT_MAJOR_CACHE_KEYS, **common)
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
  cfg = ml_collections.ConfigDict(cfg.to_dict())  # frozen copy for the closure

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


def all_captions(output: Mapping[str, Any], tokenizer: Any
                 ) -> list[list[str]]:
  """All K hypotheses of each example, best first: B lists of K strings."""
  tokens = np.asarray(jax.device_get(output["tokens"]))  # [B, K, L]
  return [tokens_to_text(row, tokenizer) for row in tokens]
