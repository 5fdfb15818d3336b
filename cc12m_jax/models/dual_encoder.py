"""The dual encoder of the visual-linguistic matching (vlm) objective.

Paper Section 3, "Pre-Training Objective 2" (late fusion):

  batch --ImageInputEmbedding--> bag [B, S=1+R+T, E] --Encoder (L layers)-->
        masked mean over S --Linear(P)--> image vector [B, P]
  decoder_targets [B, L] --TextEmbedding + sinusoidal positions--> [B, L, E]
        --Encoder (text_encoder_layers)--> masked mean over L --Linear(P)--> text vector [B, P]

  similarity(i, j) = <image_i, text_j>   (dot product, no normalisation)

The caption tokens are `decoder_targets` (y1 .. yn [EOS], 0-padded): the text
encoder sees the caption and its end marker, never the [BOS] of the decoder
input, and id 0 marks padding. The TextEmbedding (lookup + MLP) is shared by
tag words (inside the image bag) and caption tokens, as in the captioner; the
two Transformer encoders are separate. The temperature tau is a constant from
the config or, with `learn_temperature`, a parameter `log_temperature`
(initialised at log(config.temperature); the log keeps tau positive).

The two towers are separate methods, so retrieval encodes a gallery of images
once and caption queries on their own (cc12m_jax/evaluation/retrieval_eval.py).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.models import embeddings, layers, transformer


def masked_mean(x: jax.Array, mask: jax.Array) -> jax.Array:
  """x [B, S, E], mask bool [B, S] -> [B, E] mean over valid slots (0 if none)."""
  weights = mask.astype(jnp.float32)[..., None]  # [B, S, 1]
  total = (x.astype(jnp.float32) * weights).sum(axis=1)  # [B, E]
  return total / jnp.maximum(weights.sum(axis=1), 1.0)  # [B, E]


def text_encoder_config(config: ml_collections.ConfigDict) -> ml_collections.FrozenConfigDict:
  """The model config (frozen) with `num_encoder_layers` set to `text_encoder_layers`."""
  if int(config.text_encoder_layers) < 1:
    raise ValueError(f"config.model.text_encoder_layers={config.text_encoder_layers} "
                     "must be >= 1.")
  values = config.to_dict()
  values["num_encoder_layers"] = int(config.text_encoder_layers)
  return ml_collections.FrozenConfigDict(values)


def text_tower(model: nn.Module, tokens: jax.Array, *, train: bool) -> jax.Array:
  """The text tower of a bound module that has text_embedding, text_dropout,
  text_encoder and text_projection (DualEncoder, models/multitask.py's ic+vlm):
  tokens i32 [B, L] (y1 .. yn [EOS], 0 = padding) -> f32 [B, P]."""
  mask = tokens != 0  # [B, L]
  x = model.text_embedding(tokens, train=train)  # [B, L, E]
  positions = jnp.arange(tokens.shape[1])[None, :]  # [1, L]
  x = x + transformer.sinusoidal_positions(positions, model.config.emb_dim).astype(x.dtype)
  x = model.text_dropout(x, deterministic=not train)
  x = layers.constrain(x, ("batch", "act_length", "act_embed"))
  encoded = model.text_encoder(x, mask, train=train)  # [B, L, E]
  pooled = masked_mean(encoded, mask)  # [B, E]
  return model.text_projection(pooled).astype(jnp.float32)  # [B, P]


def temperature_of(model: nn.Module) -> jax.Array:
  """Scalar tau of a bound module: its learned log_temperature, or config.temperature."""
  if model.config.learn_temperature:
    return jnp.exp(model.log_temperature)
  return jnp.asarray(float(model.config.temperature), jnp.float32)


def add_text_tower(module: nn.Module, cfg) -> None:
  """The text Transformer, both projections and tau of vlm, made submodules of
  `module` from inside its setup (DualEncoder, and the vlm task of
  models/multitask.py): one definition, so both have the same parameter names."""
  dtype = layers.compute_dtype(cfg)
  module.text_encoder = transformer.Encoder(text_encoder_config(cfg))
  module.text_dropout = layers.Dropout(cfg.dropout)
  module.image_projection = layers.dense(cfg.projection_dim, ("embed", "mlp"), dtype)
  module.text_projection = layers.dense(cfg.projection_dim, ("embed", "mlp"), dtype)
  if cfg.learn_temperature:
    module.log_temperature = module.param(
        "log_temperature", nn.initializers.constant(math.log(float(cfg.temperature))),
        (), jnp.float32)


class DualEncoder(layers.ConfigModule):
  """Image tower and text tower projected into one P-dimensional space."""
  vocab_size: int

  def setup(self):
    cfg = self.config
    if int(cfg.projection_dim) < 1:
      raise ValueError(f"config.model.projection_dim={cfg.projection_dim} must be >= 1.")
    if not float(cfg.temperature) > 0:
      raise ValueError(f"config.model.temperature={cfg.temperature} must be > 0.")
    self.text_embedding = embeddings.TextEmbedding(cfg, self.vocab_size)
    self.image_embedding = embeddings.ImageInputEmbedding(cfg, text_embedding=self.text_embedding)
    self.image_encoder = transformer.Encoder(cfg)
    add_text_tower(self, cfg)

  def encode_image(self, batch: Mapping[str, Any], *, train: bool) -> jax.Array:
    """batch (image keys of docs/architecture.md) -> f32 [B, P]."""
    vectors, mask = self.image_embedding(batch, train=train)  # [B, S, E], [B, S]
    encoded = self.image_encoder(vectors, mask, train=train)  # [B, S, E]
    pooled = masked_mean(encoded, mask)  # [B, E]
    return self.image_projection(pooled).astype(jnp.float32)  # [B, P]

  def encode_text(self, tokens: jax.Array, *, train: bool) -> jax.Array:
    """tokens i32 [B, L] (y1 .. yn [EOS], 0 = padding) -> f32 [B, P]."""
    return text_tower(self, tokens, train=train)

  def temperature(self) -> jax.Array:
    """Scalar tau (learned or fixed)."""
    return temperature_of(self)

  def __call__(self, batch: Mapping[str, Any], *, train: bool
               ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """-> (image vectors f32 [B, P], text vectors f32 [B, P], tau f32 [])."""
    image = self.encode_image(batch, train=train)
    text = self.encode_text(batch["decoder_targets"], train=train)
    return image, text, self.temperature()
