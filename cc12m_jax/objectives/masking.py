"""Random masks of the masked objectives (mlm, mass, moc), drawn inside the jitted loss.

Every mask is a pure function of the step's key, so masks differ from step
to step without touching the input pipeline or the batch contract, and a
resumed run draws the same masks again.

How many: an example with n maskable items gets k = floor(r * n + u) masked,
u ~ U[0, 1): stochastic rounding, so E[k] = r * n exactly for any n (a fixed
round() would mask 0 or 1 word of a 5-word caption at r = 0.1, a rate of 0
or 0.2). An example may get k = 0 (no target this step); the losses average
over the masked positions of the whole batch, so that costs nothing.

Which: `random_subset` takes the k items with the smallest uniform scores
(k items without replacement, all subsets equally likely); `random_span`
takes one run of k consecutive items starting uniformly in [0, n - k].

Keys: the trainer's dropout key may be an rbg key, whose bits depend on how
the batch is sharded. Masks are drawn from a threefry key derived from it
(`mask_key`): threefry bits are the same on every mesh, so the loss on 8
devices equals the loss on 1 (tests/objectives/test_sharding.py). The draws
are [B, L] or [B, R]: their cost is nothing next to dropout's.
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import jax.numpy as jnp

from cc12m_jax.data.text import special_tokens
from cc12m_jax.objectives.captioning import token_cross_entropy

PAD_ID = special_tokens.PAD_ID
EOS_ID = special_tokens.EOS_ID
MASK_ID = special_tokens.MASK_ID
# Random replacements are drawn from the ordinary word pieces only.
FIRST_WORD_ID = len(special_tokens.RESERVED_TOKENS)
MASK_STREAM = 0x6D61736B  # 'mask'


def mask_key(rng: jax.Array | None) -> jax.Array:
  """A raw threefry key (uint32 [2]) from any key; None (evaluation) gives key 0.

  An rbg or typed key is reduced to two of its words, so the masks are the
  same on every mesh whichever config.train.dropout_rng is set.
  """
  if rng is None:
    return jax.random.PRNGKey(0)
  if jnp.issubdtype(rng.dtype, jax.dtypes.prng_key):
    rng = jax.random.key_data(rng)
  words = rng.reshape(-1).astype(jnp.uint32)[:2]  # [2] of the [2] or [4]
  # Folded with a stream id: the masks never reuse dropout's bits.
  return jax.random.fold_in(words, MASK_STREAM)


def caption_words(tokens: jax.Array) -> jax.Array:
  """tokens i32 [B, L] (y1 .. yn [EOS], 0-padded) -> bool [B, L]: the maskable words.

  The end marker is never masked: it says where the caption stops, not
  what it says.
  """
  return (tokens != PAD_ID) & (tokens != EOS_ID)  # [B, L]


def masked_count(rng: jax.Array, available: jax.Array, rate: float) -> jax.Array:
  """available i32 [B] -> i32 [B]: floor(rate * n + u), in [0, n]."""
  u = jax.random.uniform(rng, available.shape)  # [B]
  count = jnp.floor(rate * available.astype(jnp.float32) + u).astype(jnp.int32)  # [B]
  return jnp.clip(count, 0, available)


def random_subset(rng: jax.Array, valid: jax.Array, rate: float) -> jax.Array:
  """valid bool [B, N] -> bool [B, N]: k(b) of the valid items of each row, uniformly."""
  count_rng, order_rng = jax.random.split(rng)
  count = masked_count(count_rng, valid.sum(axis=-1), rate)  # [B]
  # Invalid items score 2 > any uniform draw, so they rank after every valid one.
  scores = jnp.where(valid, jax.random.uniform(order_rng, valid.shape), 2.0)  # [B, N]
  ranks = jnp.argsort(jnp.argsort(scores, axis=-1), axis=-1)  # [B, N]
  return ranks < count[:, None]  # [B, N]


def random_span(rng: jax.Array, lengths: jax.Array, rate: float, width: int
                ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """One run of k consecutive items of each row's first `lengths` items.

  lengths i32 [B] (items 0 .. n-1 of a row are maskable) ->
  (span bool [B, width], start i32 [B], count i32 [B]), the span being
  items start .. start+count-1 with start uniform in [0, n - count].
  """
  count_rng, start_rng = jax.random.split(rng)
  count = masked_count(count_rng, lengths, rate)  # [B]
  room = (lengths - count + 1).astype(jnp.float32)  # [B] possible starts
  start = jnp.floor(jax.random.uniform(start_rng, lengths.shape) * room).astype(jnp.int32)
  start = jnp.minimum(start, lengths - count)  # [B] guards u * room rounding up to room
  positions = jnp.arange(width)[None, :]  # [1, W]
  span = (positions >= start[:, None]) & (positions < (start + count)[:, None])  # [B, W]
  return span, start, count


def corrupt_tokens(rng: jax.Array, tokens: jax.Array, selected: jax.Array, vocab_size: int,
                   mask_prob: float, random_prob: float) -> jax.Array:
  """BERT-style replacement of the selected tokens.

  tokens i32 [B, L], selected bool [B, L] -> i32 [B, L]: each selected token
  becomes [MASK] with probability mask_prob, a random word piece (not a
  reserved id) with probability random_prob, and stays itself otherwise
  (BERT: 0.8 / 0.1 / 0.1). The kept 10% make the model predict every input
  token, not only [MASK] slots, so fine-tuning inputs without [MASK] are
  not out of distribution.
  """
  action_rng, word_rng = jax.random.split(rng)
  u = jax.random.uniform(action_rng, tokens.shape)  # [B, L]
  random_words = jax.random.randint(word_rng, tokens.shape, FIRST_WORD_ID,
                                    max(vocab_size, FIRST_WORD_ID + 1))  # [B, L]
  replaced = jnp.where(u < mask_prob, MASK_ID,
                       jnp.where(u < mask_prob + random_prob, random_words, tokens))  # [B, L]
  return jnp.where(selected, replaced, tokens).astype(tokens.dtype)  # [B, L]


def masked_cross_entropy(logits: jax.Array, targets: jax.Array, chosen: jax.Array,
                         candidates: jax.Array, batch: Mapping[str, Any], accuracy_name: str
                         ) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean cross-entropy of logits f32 [B, N, C] against targets i32 [B, N] where chosen.

  `candidates` bool [B, N] are the positions that could have been chosen (caption
  words, real regions): the metrics report the observed masking rate against them.
  Eval padding (example_mask False) contributes nothing.
  """
  weights = chosen.astype(jnp.float32)  # [B, N]
  eligible = candidates.astype(jnp.float32)  # [B, N]
  if "example_mask" in batch:
    valid = batch["example_mask"].astype(jnp.float32)[:, None]  # [B, 1]
    weights, eligible = weights * valid, eligible * valid
  loss_sum, correct_sum, count = token_cross_entropy(logits, targets, weights)
  denom = jnp.maximum(count, 1.0)
  loss = loss_sum / denom
  return loss, {
      "loss": loss,
      accuracy_name: correct_sum / denom,
      "mask_rate": count / jnp.maximum(eligible.sum(), 1.0),
      "num_targets": count,
  }
