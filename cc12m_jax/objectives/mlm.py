"""Masked language modelling ('mlm', paper Appendix D.2.1).

The image bag and the caption go through one encoder together
(models/multitask.py, `encode_joint`); a share r of the caption's words
(config.objectives.text_mask_rate) is chosen each step and replaced
BERT-style (80% [MASK], 10% a random word piece, 10% kept; masking.py), and

  L_mlm = - sum_{b,t chosen} log p(y[b,t] | image, corrupted caption) / #chosen

over the chosen positions only: an unchosen word is input, never a target.
The caption is `decoder_targets` (y1 .. yn [EOS]); [EOS] is never chosen.

Fine-tuning for captioning (configs/ablation_finetune.py) loads the
embeddings, the encoder and the output projection into the ic Captioner;
its decoder starts fresh (config.train.init_partial=True).
Metrics: loss, token_accuracy (of the chosen words), mask_rate (chosen /
maskable words, the observed r), num_targets.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import ml_collections

from cc12m_jax.data import batch_spec
from cc12m_jax.models import multitask as multitask_model
from cc12m_jax.objectives import masking

TASKS = ("mlm",)
INPUT_KEYS = batch_spec.IMAGE_KEYS + ("decoder_targets",)
# A pre-trained encoder without a decoder scores nothing until fine-tuned.
EVALUATOR = "none"


def build_model(config: ml_collections.ConfigDict,
                vocab_size: int) -> multitask_model.MultiTaskModel:
  return multitask_model.build(config, vocab_size, TASKS)


def mask_caption(rng: jax.Array | None, tokens: jax.Array, settings: Any, vocab_size: int
                 ) -> tuple[jax.Array, jax.Array]:
  """tokens i32 [B, L] -> (corrupted tokens i32 [B, L], chosen bool [B, L])."""
  select_rng, corrupt_rng = jax.random.split(masking.mask_key(rng))
  chosen = masking.random_subset(select_rng, masking.caption_words(tokens),
                                 float(settings.text_mask_rate))  # [B, L]
  inputs = masking.corrupt_tokens(corrupt_rng, tokens, chosen, vocab_size,
                                  float(settings.mask_token_prob),
                                  float(settings.random_token_prob))  # [B, L]
  return inputs, chosen


def masked_token_loss(logits: jax.Array, targets: jax.Array, chosen: jax.Array,
                      batch: Mapping[str, Any]) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean cross-entropy of logits f32 [B, L, V] against targets i32 [B, L] where chosen."""
  return masking.masked_cross_entropy(logits, targets, chosen,
                                      masking.caption_words(batch["decoder_targets"]), batch,
                                      "token_accuracy")


def loss_fn(model: multitask_model.MultiTaskModel, params: Any, batch: Mapping[str, Any],
            rng: jax.Array | None, *, train: bool) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Masks from `rng` (also at eval: key 0 when None); dropout only when training."""
  targets = batch["decoder_targets"]  # [B, L]
  inputs, chosen = mask_caption(rng, targets, model.objectives, model.vocab_size)
  rngs = {"dropout": rng} if (train and rng is not None) else {}
  logits = model.apply({"params": params}, batch, inputs, train=train, rngs=rngs,
                       method=multitask_model.MultiTaskModel.mlm_logits)  # [B, L, V]
  return masked_token_loss(logits, targets, chosen, batch)
