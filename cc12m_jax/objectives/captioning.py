"""Image-captioning (ic) objective: token cross-entropy over non-pad targets.

  L_ic = - sum_{b,t: y[b,t] != PAD} log p(y[b,t] | y[b,<t], image) / #non-pad

Examples with example_mask False (eval padding) contribute nothing.
Metrics: loss, token accuracy, perplexity = exp(loss), and the token count.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.data import batch_spec
from cc12m_jax.data.text import special_tokens
from cc12m_jax.models.captioner import Captioner

PAD_ID = special_tokens.PAD_ID
INPUT_KEYS = batch_spec.IMAGE_KEYS + ("decoder_inputs",)
EVALUATOR = "captioning"


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> Captioner:
  return Captioner(ml_collections.FrozenConfigDict(config.model), vocab_size)


def token_cross_entropy(logits, targets, weights):
  """logits [B, L, V], targets i32 [B, L], weights f32 [B, L] -> (sum loss, sum correct, sum weight).

  log-softmax is computed as logit[target] - logsumexp(logits) in float32,
  without materialising a one-hot [B, L, V] tensor.
  """
  logits = logits.astype(jnp.float32)
  lse = jax.nn.logsumexp(logits, axis=-1)  # [B, L]
  target_logit = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]  # [B, L]
  nll = (lse - target_logit) * weights  # [B, L]
  correct = (jnp.argmax(logits, axis=-1) == targets).astype(jnp.float32) * weights  # [B, L]
  return nll.sum(), correct.sum(), weights.sum()


def loss_fn(model, params, batch: Mapping[str, Any], rng, *, train: bool):
  """(mean token loss, metrics) for one batch; `rng` feeds dropout when training."""
  rngs = {"dropout": rng} if train else {}
  logits = model.apply({"params": params}, batch, train=train, rngs=rngs)  # [B, L, V]
  targets = batch["decoder_targets"]  # [B, L]
  weights = (targets != PAD_ID).astype(jnp.float32)  # [B, L]
  if "example_mask" in batch:
    weights = weights * batch["example_mask"].astype(jnp.float32)[:, None]
  loss_sum, correct_sum, count = token_cross_entropy(logits, targets, weights)
  denom = jnp.maximum(count, 1.0)
  loss = loss_sum / denom
  metrics = {
      "loss": loss,
      "token_accuracy": correct_sum / denom,
      "perplexity": jnp.exp(loss),
      "num_tokens": count,
  }
  return loss, metrics
