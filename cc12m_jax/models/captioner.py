"""The image-captioning (ic) encoder-decoder of the paper.

  batch --ImageInputEmbedding--> bag [B, S=1+R+T, E] --Encoder--> encoded [B, S, E]
  decoder_inputs [B, L] --TextEmbedding + sinusoidal positions--> [B, L, E]
        --Decoder(encoded)--> [B, L, E] --Linear(V)--> logits [B, L, V]

The TextEmbedding is shared by caption tokens and tag words (Section 3.3).

Cached decoding (cc12m_jax/decoding/captioner_decode.py) goes through two
methods, each called with `model.apply(..., method=...)`:

  init_decode_state(encoded, encoder_mask, num_hypotheses, max_decode_len)
      with mutable=DECODE_COLLECTIONS: returns (None, the decoding state);
  decode_step(ids [B*K, 1]) -> logits [B*K, V]
      with the state's collections and mutable=[STEP_CACHE, SLOT_CACHE].

The state is one flax collection per way a search treats it
(transformer.py): STEP_CACHE (reordered with the beams), SLOT_CACHE (written
in place, never reordered), PRIMED_CACHE (per example, loop constants).
Callers pass them by name and never look inside.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from cc12m_jax.models import embeddings, layers, transformer
from cc12m_jax.models.transformer import PRIMED_CACHE, SLOT_CACHE, STEP_CACHE

DECODE_COLLECTIONS = (STEP_CACHE, SLOT_CACHE, PRIMED_CACHE)


class Captioner(layers.ConfigModule):
  vocab_size: int

  def setup(self):
    cfg = self.config
    self.text_embedding = embeddings.TextEmbedding(cfg, self.vocab_size)
    self.image_embedding = embeddings.ImageInputEmbedding(cfg, text_embedding=self.text_embedding)
    self.encoder = transformer.Encoder(cfg)
    self.decoder = transformer.Decoder(cfg)
    self.logits_projection = layers.dense(
        self.vocab_size, ("embed", "vocab"), layers.compute_dtype(cfg))
    self.embedding_dropout = layers.Dropout(cfg.dropout)

  def encode(self, batch: Mapping[str, Any], *, train: bool) -> tuple[jax.Array, jax.Array]:
    """batch -> (encoded [B, S, E], encoder_mask bool [B, S])."""
    vectors, mask = self.image_embedding(batch, train=train)  # [B, S, E], [B, S]
    return self.encoder(vectors, mask, train=train), mask

  def decode(self, decoder_inputs: jax.Array, encoded: jax.Array, encoder_mask: jax.Array, *,
             train: bool, at: jax.Array | None = None) -> jax.Array:
    """Teacher forcing: decoder_inputs i32 [B, L] -> logits f32 [B, L, V].

    With `at` i32 [B, K], only the logits of those positions, f32 [B, K, V]:
    the vocabulary projection is most of a small decoder's cost, and a scorer
    of a few tokens of each input (evaluation/naming_probe.py) needs no more.
    """
    positions = jnp.arange(decoder_inputs.shape[1])[None, :]  # [1, L]
    x = self._embed_tokens(decoder_inputs, positions, train=train)  # [B, L, E]
    x = self.decoder(x, encoded, encoder_mask, train=train)  # [B, L, E]
    if at is not None:
      x = jnp.take_along_axis(x, at[..., None], axis=1)  # [B, K, E]
    return self._logits(x)  # [B, L or K, V]

  def init_decode_state(self, encoded: jax.Array, encoder_mask: jax.Array,
                        num_hypotheses: int, max_decode_len: int) -> None:
    """Creates the decoding state of B examples x K hypotheses, up to max_decode_len tokens.

    encoded [B, S, E], encoder_mask bool [B, S] (from `encode`). Call with
    mutable=DECODE_COLLECTIONS; the mutated collections are the state:
    STEP_CACHE and SLOT_CACHE leaves have B*K rows (beam-major: rows
    b*K .. b*K+K-1 are example b), PRIMED_CACHE leaves have B (each
    example's cross-attention keys/values, projected here once).
    """
    rows = encoded.shape[0] * num_hypotheses
    self.put_variable(STEP_CACHE, "position", jnp.zeros((rows,), jnp.int32))
    self.decoder.init_decode_state(encoded, encoder_mask, rows, max_decode_len)

  def decode_step(self, ids: jax.Array) -> jax.Array:
    """One token per hypothesis: ids i32 [B*K, 1] -> logits f32 [B*K, V] (inference only).

    Call with the decoding state's collections and
    mutable=[STEP_CACHE, SLOT_CACHE]; PRIMED_CACHE is only read.
    """
    position = self.get_variable(STEP_CACHE, "position")  # [B*K]
    self.put_variable(STEP_CACHE, "position", position + 1)
    x = self._embed_tokens(ids, position[:, None], train=False)  # [B*K, 1, E]
    x = self.decoder.step(x)  # [B*K, 1, E]
    return self._logits(x)[:, 0]  # [B*K, V]

  def _embed_tokens(self, ids, positions, *, train: bool):
    """ids i32 [B, L], positions i32 [B or 1, L] -> token vectors [B, L, E]."""
    x = self.text_embedding(ids, train=train)  # [B, L, E]
    x = x + transformer.sinusoidal_positions(positions, self.config.emb_dim).astype(x.dtype)
    return self.embedding_dropout(x, deterministic=not train)

  def _logits(self, x):
    """[B, L, E] -> f32 [B, L, V]."""
    logits = self.logits_projection(x)  # [B, L, V]
    logits = layers.constrain(logits, ("batch", "act_length", "act_vocab"))
    return logits.astype(jnp.float32)

  def __call__(self, batch: Mapping[str, Any], *, train: bool) -> jax.Array:
    """Teacher-forced logits f32 [B, L, V] for batch['decoder_inputs']."""
    encoded, mask = self.encode(batch, train=train)
    return self.decode(batch["decoder_inputs"], encoded, mask, train=train)
