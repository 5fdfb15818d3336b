"""Visual-linguistic matching ('vlm') objective: contrastive softmax over the batch.

Paper Section 3, "Pre-Training Objective 2":

  L_vlm = -1/B sum_i log( exp(s(I_i, T_i)/tau) / sum_j exp(s(I_i, T_j)/tau) )

with s the dot product of the projected image and text vectors. This is the
image-to-text direction (each image classifies which text of the batch is its
own); `symmetric=True` averages it with the text-to-image direction.

Negatives are the whole *global* batch. The trainer runs `loss_fn` under
`jax.jit` on global `jax.Array`s sharded over the mesh's batch axes, so the
[B, B] similarity matrix below is a global computation: XLA inserts the
all-gather of the text (or image) embeddings across devices and every mean is
over the global batch. Nothing here is per-shard (no `shard_map`, no
`pmean` of per-device losses); tests/retrieval/test_contrastive_sharding.py
checks that loss and gradients on 8 devices equal the 1-device values.

The module is also the registry entry for 'vlm' (cc12m_jax/objectives/registry.py):
`build_model(config, vocab_size)` and `loss_fn(model, params, batch, rng, *, train)`.
"""
from typing import Any, Mapping, Optional

import jax
import jax.numpy as jnp
import ml_collections

from cc12m_jax.data import batch_spec
from cc12m_jax.models.dual_encoder import DualEncoder

Array = jax.Array
# The text tower reads the targets (y1 .. yn [EOS]), never the decoder inputs.
INPUT_KEYS = batch_spec.IMAGE_KEYS + ("decoder_targets",)
EVALUATOR = "retrieval"


def similarity_logits(image_emb: Array, text_emb: Array, temperature: Array) -> Array:
  """Dot-product similarities divided by tau; row i = image i vs every text."""
  image_emb = image_emb.astype(jnp.float32)  # [B, P]
  text_emb = text_emb.astype(jnp.float32)  # [B, P]
  # Full f32 precision: on TPU the default would round the inputs to bf16, and
  # near-equal similarities decide the loss as much as large ones.
  sims = jnp.einsum("ip,jp->ij", image_emb, text_emb,
                    precision=jax.lax.Precision.HIGHEST)  # [B, B]
  return sims / temperature  # [B, B]


def _cross_entropy_rows(logits: Array, valid: Array) -> tuple[Array, Array]:
  """Per-row -log softmax(row)[i] and whether argmax(row) == i.

  Invalid columns are excluded from every softmax (they are padding, not
  negatives); invalid rows are returned but must be masked by the caller.
  """
  neg = jnp.finfo(logits.dtype).min
  logits = jnp.where(valid[None, :], logits, neg)  # [B, B]
  log_probs = jax.nn.log_softmax(logits, axis=-1)  # [B, B]
  nll = -jnp.diagonal(log_probs)  # [B]
  # argmax takes the first maximum, so a tie with a lower-indexed impostor is
  # a miss: deterministic, and the same rule as retrieval (lower index wins).
  correct = jnp.argmax(logits, axis=-1) == jnp.arange(logits.shape[0])  # [B]
  return nll, correct


def contrastive_loss(image_emb: Array,
                     text_emb: Array,
                     temperature: Array | float,
                     *,
                     symmetric: bool = False,
                     example_mask: Optional[Array] = None
                     ) -> tuple[Array, dict[str, Array]]:
  """Contrastive softmax loss of paired embeddings (pair i = row i of each).

  Args:
    image_emb: f32 [B, P] projected image vectors.
    text_emb: f32 [B, P] projected text vectors.
    temperature: scalar tau > 0.
    symmetric: also add the text-to-image direction (mean of both).
    example_mask: bool [B]; False rows (eval padding) are neither scored nor
      used as negatives. None means all valid.

  Returns:
    (loss scalar, metrics) with metrics 'loss', 'i2t_loss', 'i2t_accuracy'
    (in-batch top-1 of the image-to-text softmax), 't2i_*' when symmetric, and
    'temperature'.
  """
  if image_emb.shape != text_emb.shape or image_emb.ndim != 2:
    raise ValueError(f"image_emb {image_emb.shape} and text_emb {text_emb.shape} "
                     "must both be [B, P]")
  batch = image_emb.shape[0]
  valid = (jnp.ones((batch,), bool) if example_mask is None
           else example_mask.astype(bool))  # [B]
  weight = valid.astype(jnp.float32)  # [B]
  count = jnp.maximum(weight.sum(), 1.0)
  temperature = jnp.asarray(temperature, jnp.float32)

  logits = similarity_logits(image_emb, text_emb, temperature)  # [B, B]
  i2t_nll, i2t_ok = _cross_entropy_rows(logits, valid)  # [B], [B]
  i2t_loss = (i2t_nll * weight).sum() / count
  metrics = {
      "i2t_loss": i2t_loss,
      "i2t_accuracy": (i2t_ok * weight).sum() / count,
      "temperature": temperature,
  }
  loss = i2t_loss
  if symmetric:
    t2i_nll, t2i_ok = _cross_entropy_rows(logits.T, valid)  # [B], [B]
    t2i_loss = (t2i_nll * weight).sum() / count
    metrics["t2i_loss"] = t2i_loss
    metrics["t2i_accuracy"] = (t2i_ok * weight).sum() / count
    loss = 0.5 * (i2t_loss + t2i_loss)
  metrics["loss"] = loss
  return loss, metrics


# ---------------------------------------------------------------------------
# Objective registry interface.


def build_model(config: ml_collections.ConfigDict, vocab_size: int) -> DualEncoder:
  """The dual encoder for the full config (reads `config.model`)."""
  return DualEncoder(ml_collections.FrozenConfigDict(config.model), vocab_size)


def loss_fn(model: DualEncoder,
            params: Any,
            batch: Mapping[str, Array],
            rng: Optional[Array],
            *,
            train: bool) -> tuple[Array, dict[str, Array]]:
  """Contrastive loss of a batch (keys of docs/architecture.md).

  Padding examples (`example_mask` False) are ignored, so the same function
  gives the validation loss on padded eval batches.
  """
  rngs = {"dropout": rng} if (train and rng is not None) else {}
  image_emb, text_emb, temperature = model.apply(
      {"params": params}, batch, train=train, rngs=rngs)  # [B,P], [B,P], []
  return contrastive_loss(
      image_emb, text_emb, temperature,
      symmetric=bool(model.config.symmetric_loss),
      example_mask=batch.get("example_mask"))
