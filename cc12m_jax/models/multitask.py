"""The pre-training model of the masked and multi-task objectives (paper Appendix D.2).

One model for mlm, mass, moc and their sums with ic and vlm. It *is* the ic
Captioner (a subclass: same parameter names, same encode / decode /
init_decode_state / decode_step), with the parts the other objectives need
added under their own names, so a checkpoint of any of them fine-tunes as a
plain Captioner through config.train.init_from:

  part                          objectives        in the ic Captioner
  text_embedding, image_embedding,
  encoder, logits_projection    all but moc-only  yes (same names, same shapes)
  decoder                       ic, mass          yes
  text_segment  [E]             mlm, mass         no (dropped at fine-tuning)
  moc_head                      moc               no (dropped)
  text_encoder, image_projection,
  text_projection, log_temperature   vlm          no (dropped)

An mlm checkpoint has no decoder: fine-tuning starts it fresh
(config.train.init_partial, cc12m_jax/core/checkpointing.py). Parameters
exist only for the parts the model's `tasks` use (flax creates them on
first use, and `__call__` at init runs every task).

Joint input of mlm / mass (`encode_joint`):

  [ image bag: 1 global + R regions + T tags | caption tokens y1 .. yn [EOS] ]
     as the Captioner embeds it                 TextEmbedding + sinusoidal
                                                 positions 0..L-1 + text_segment

one bidirectional Transformer (`encoder`) over both. Only text slots get
the segment vector; image slots get nothing added, so the image part of the
input is distributed exactly as the ic Captioner's encoder sees it at
fine-tuning (an image-segment vector would be absent there).

The vlm part of ic + vlm shares the image side: the image vector is the
masked mean of the *same* encoder output the decoder attends to
(projected to P); the caption goes through a separate text Transformer
(model.text_encoder_layers) over the shared TextEmbedding, as in the dual
encoder. Sharing the encoder is what makes vlm an auxiliary loss of the
captioner rather than a second model (docs/objectives.md).

`Constant` carries the moc centroids: a numpy array fixed for the run,
hashed by identity (a module's fields must be hashable).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from cc12m_jax.models import dual_encoder, layers
from cc12m_jax.models.captioner import Captioner

TASKS = ("ic", "vlm", "mlm", "mass", "moc")
JOINT_TASKS = ("mlm", "mass")  # tasks that encode image and text together


@dataclasses.dataclass(frozen=True, eq=False)
class Constant:
  """A numpy array a module holds for the run (hash and equality by identity)."""
  value: np.ndarray


class RegionClusterHead(layers.ConfigModule):
  """Encoded regions [B, R, E] -> cluster logits f32 [B, R, C].

  Linear(E) -> ReLU -> LayerNorm -> Linear(C): UNITER's region
  classification head, with the activation of this code base's MLPs.
  """
  num_clusters: int

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    cfg = self.config
    dtype = layers.compute_dtype(cfg)
    y = layers.dense(cfg.emb_dim, ("embed", "mlp"), dtype, name="hidden")(x)  # [B, R, E]
    y = layers.layer_norm(dtype, name="norm")(nn.relu(y))  # [B, R, E]
    y = layers.dense(self.num_clusters, ("embed", "vocab"), dtype, name="output")(y)  # [B, R, C]
    return y.astype(jnp.float32)


class MultiTaskModel(Captioner):
  """The Captioner plus the heads of `tasks` (a subset of TASKS)."""
  tasks: tuple[str, ...] = ("ic",)
  # moc only: the cluster centroids f32 [C, D]; C sizes the head.
  centroids: Constant | None = None
  # config.objectives (masking rates): the losses read them here, since a
  # loss_fn is handed only the model, its parameters, the batch and a key.
  objectives: ml_collections.FrozenConfigDict | None = None

  def setup(self):
    super().setup()
    cfg = self.config
    unknown = sorted(set(self.tasks) - set(TASKS))
    if unknown or not self.tasks:
      raise ValueError(f"MultiTaskModel tasks {self.tasks}: choose from {TASKS}.")
    if set(self.tasks) & set(JOINT_TASKS):
      # BERT's token-type init (std 0.02): the text slots also differ from
      # image slots by their positions from the start.
      self.text_segment = self.param(
          "text_segment", nn.with_logical_partitioning(nn.initializers.normal(0.02), ("embed",)),
          (cfg.emb_dim,), jnp.float32)
    if "moc" in self.tasks:
      if self.centroids is None:
        raise ValueError("the moc task needs the cluster centroids (config.objectives.centroids).")
      self.moc_head = RegionClusterHead(cfg, int(self.centroids.value.shape[0]))
    if "vlm" in self.tasks:
      dual_encoder.add_text_tower(self, cfg)

  # -- mlm / mass: image and caption through one encoder ---------------------

  def encode_joint(self, batch: Mapping[str, Any], tokens: jax.Array, *, train: bool
                   ) -> tuple[jax.Array, jax.Array]:
    """Image bag + caption tokens i32 [B, L] -> (encoded [B, S+L, E], mask bool [B, S+L]).

    Slots 0..S-1 are the image bag (S = 1 + R + T), S..S+L-1 the caption;
    caption slots with token 0 (padding) are masked out.
    """
    image, image_mask = self.image_embedding(batch, train=train)  # [B, S, E], [B, S]
    positions = jnp.arange(tokens.shape[1])[None, :]  # [1, L]
    text = self._embed_tokens(tokens, positions, train=train)  # [B, L, E]
    text = text + self.text_segment.astype(text.dtype)  # [B, L, E]
    vectors = jnp.concatenate([image.astype(text.dtype), text], axis=1)  # [B, S+L, E]
    vectors = layers.constrain(vectors, ("batch", "act_length", "act_embed"))
    mask = jnp.concatenate([image_mask, tokens != 0], axis=1)  # [B, S+L]
    return self.encoder(vectors, mask, train=train), mask

  def mlm_logits(self, batch: Mapping[str, Any], tokens: jax.Array, *, train: bool) -> jax.Array:
    """Corrupted caption tokens i32 [B, L] -> logits f32 [B, L, V] at every caption slot.

    The output projection is the Captioner's (`logits_projection`), so the
    trained word predictor carries over to fine-tuning.
    """
    encoded, _ = self.encode_joint(batch, tokens, train=train)  # [B, S+L, E]
    return self._logits(encoded[:, -tokens.shape[1]:])  # [B, L, V]

  def mass_logits(self, batch: Mapping[str, Any], tokens: jax.Array, decoder_inputs: jax.Array,
                  decoder_positions: jax.Array, *, train: bool) -> jax.Array:
    """The decoder over the joint encoding of the span-masked caption.

    tokens i32 [B, L] (the caption with its span masked), decoder_inputs
    i32 [B, L'] ([BOS] and the span's tokens but the last, 0-padded),
    decoder_positions i32 [B, L'] (each input's position in the caption) ->
    logits f32 [B, L', V]. Causal self-attention over the span only; cross-
    attention to every unmasked image and text slot.
    """
    encoded, mask = self.encode_joint(batch, tokens, train=train)  # [B, S+L, E], [B, S+L]
    x = self._embed_tokens(decoder_inputs, decoder_positions, train=train)  # [B, L', E]
    x = self.decoder(x, encoded, mask, train=train)  # [B, L', E]
    return self._logits(x)  # [B, L', V]

  # -- moc: masked region classification ---------------------------------------

  def moc_logits(self, batch: Mapping[str, Any], *, train: bool) -> jax.Array:
    """batch (regions already masked by the loss) -> cluster logits f32 [B, R, C]."""
    encoded, _ = self.encode(batch, train=train)  # [B, 1+R+T, E]
    regions = batch["region_features"].shape[1]
    return self.moc_head(encoded[:, 1:1 + regions])  # [B, R, C]: slots after the global one

  # -- vlm: the shared image encoder and a text tower ---------------------------

  def encode_image(self, batch: Mapping[str, Any], *, train: bool) -> jax.Array:
    """batch -> f32 [B, P]: masked mean of the captioner's encoder output, projected."""
    encoded, mask = self.encode(batch, train=train)  # [B, S, E], [B, S]
    pooled = dual_encoder.masked_mean(encoded, mask)  # [B, E]
    return self.image_projection(pooled).astype(jnp.float32)  # [B, P]

  def encode_text(self, tokens: jax.Array, *, train: bool) -> jax.Array:
    """tokens i32 [B, L] (y1 .. yn [EOS], 0 = padding) -> f32 [B, P]."""
    return dual_encoder.text_tower(self, tokens, train=train)

  def temperature(self) -> jax.Array:
    """Scalar tau of the vlm loss (learned or fixed)."""
    return dual_encoder.temperature_of(self)

  def vlm_embeddings(self, batch: Mapping[str, Any], *, train: bool
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """-> (image vectors f32 [B, P], text vectors f32 [B, P], tau f32 [])."""
    return (self.encode_image(batch, train=train),
            self.encode_text(batch["decoder_targets"], train=train), self.temperature())

  def __call__(self, batch: Mapping[str, Any], *, train: bool) -> jax.Array | None:
    """Teacher-forced ic logits f32 [B, L, V] (as the Captioner; None without ic).

    At init every task's forward runs once on the (dummy) batch, so the
    parameters of every part the tasks use are created.
    """
    if self.is_initializing():
      if "vlm" in self.tasks:
        self.vlm_embeddings(batch, train=train)
      if "mlm" in self.tasks:
        self.mlm_logits(batch, batch["decoder_targets"], train=train)
      if "mass" in self.tasks:
        self.mass_logits(batch, batch["decoder_targets"], batch["decoder_targets"],
                         jnp.zeros_like(batch["decoder_targets"]), train=train)
      if "moc" in self.tasks:
        self.moc_logits(batch, train=train)
    if "ic" not in self.tasks:
      return None
    return super().__call__(batch, train=train)


def build(config: ml_collections.ConfigDict, vocab_size: int, tasks: tuple[str, ...],
          centroids: np.ndarray | None = None) -> MultiTaskModel:
  """The model of `tasks` for the full config (reads `config.model`)."""
  return MultiTaskModel(ml_collections.FrozenConfigDict(config.model), vocab_size,
                        tasks=tuple(tasks),
                        centroids=None if centroids is None else Constant(centroids),
                        objectives=ml_collections.FrozenConfigDict(config.objectives))
