"""Masked sequence-to-sequence modelling ('mass', paper Appendix D.2.1).

The joint input of mlm (image bag + caption through one encoder), with one
run of k consecutive words masked (k ~ r x the caption's words,
config.objectives.text_mask_rate; replaced BERT-style, masking.py). The
decoder generates the run:

  decoder inputs   [BOS] y_s .. y_{s+k-2}     at caption positions s .. s+k-1
  decoder targets  y_s   .. y_{s+k-1}

  L_mass = - sum_{b, j < k(b)} log p(y[b, s+j] | y[b, s..s+j-1], image, masked caption) / sum k

The span is packed at the front of the decoder's sequence (causal attention
over the span only, as in MASS, where the other decoder slots are masked),
while each input keeps the sinusoidal position of its word in the caption.
[BOS] starts the span as it starts a caption in ic.

Every mass parameter but the text segment vector has the ic Captioner's
name and shape: fine-tuning loads the whole encoder-decoder
(configs/ablation_finetune.py); only `text_segment` is left behind.
Metrics: loss, token_accuracy, mask_rate (span words / maskable words),
num_targets.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.data import batch_spec
from cc12m_jax.data.text import special_tokens
from cc12m_jax.models import multitask as multitask_model
from cc12m_jax.objectives import masking, mlm

TASKS = ("mass",)
INPUT_KEYS = batch_spec.IMAGE_KEYS + ("decoder_targets",)
EVALUATOR = "none"
BOS_ID = special_tokens.BOS_ID


def build_model(config: ml_collections.ConfigDict,
                vocab_size: int) -> multitask_model.MultiTaskModel:
  return multitask_model.build(config, vocab_size, TASKS)


def mask_span(rng: jax.Array | None, tokens: jax.Array, settings: Any, vocab_size: int
              ) -> dict[str, jax.Array]:
  """tokens i32 [B, L] -> the encoder input, the span and the decoder's sequences.

  Returns inputs i32 [B, L] (span corrupted), span bool [B, L],
  decoder_inputs / decoder_targets / decoder_positions i32 [B, L] (span
  packed at the front, 0 after it).
  """
  span_rng, corrupt_rng = jax.random.split(masking.mask_key(rng))
  length = tokens.shape[1]
  words = masking.caption_words(tokens).sum(axis=-1)  # [B] words are slots 0 .. n-1
  span, start, count = masking.random_span(span_rng, words, float(settings.text_mask_rate),
                                           length)  # [B, L], [B], [B]
  inputs = masking.corrupt_tokens(corrupt_rng, tokens, span, vocab_size,
                                  float(settings.mask_token_prob),
                                  float(settings.random_token_prob))  # [B, L]
  j = jnp.arange(length)[None, :]  # [1, L]
  positions = start[:, None] + j  # [B, L] caption position of span slot j
  in_span = j < count[:, None]  # [B, L]
  here = jnp.take_along_axis(tokens, jnp.clip(positions, 0, length - 1), axis=1)  # [B, L]
  before = jnp.take_along_axis(tokens, jnp.clip(positions - 1, 0, length - 1), axis=1)  # [B, L]
  return {
      "inputs": inputs,
      "span": span,
      "decoder_inputs": jnp.where(in_span, jnp.where(j == 0, BOS_ID, before), 0),
      "decoder_targets": jnp.where(in_span, here, 0),
      "decoder_positions": positions,
  }


def loss_fn(model: multitask_model.MultiTaskModel, params: Any, batch: Mapping[str, Any],
            rng: jax.Array | None, *, train: bool) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Span from `rng` (also at eval: key 0 when None); dropout only when training."""
  masked = mask_span(rng, batch["decoder_targets"], model.objectives, model.vocab_size)
  rngs = {"dropout": rng} if (train and rng is not None) else {}
  logits = model.apply({"params": params}, batch, masked["inputs"], masked["decoder_inputs"],
                       masked["decoder_positions"], train=train, rngs=rngs,
                       method=multitask_model.MultiTaskModel.mass_logits)  # [B, L, V]
  targets = masked["decoder_targets"]  # [B, L]
  return mlm.masked_token_loss(logits, targets, targets != 0, batch)
