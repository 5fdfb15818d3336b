"""The jitted train and eval steps (pure functions of state and batch)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax


def batch_digest(batch: Mapping[str, Any]) -> jax.Array:
  """A position-sensitive int32 checksum of the batch's target tokens.

  Two runs that saw the same examples in the same order have equal digests
  (used to check that resumed training sees the same data).
  """
  targets = batch["decoder_targets"].astype(jnp.uint32)  # [B, L]
  b, l = targets.shape
  weights = (jnp.arange(b, dtype=jnp.uint32)[:, None] * jnp.uint32(l)
             + jnp.arange(l, dtype=jnp.uint32)[None, :] + jnp.uint32(1))  # [B, L]
  return (targets * weights * jnp.uint32(2654435761)).sum(dtype=jnp.uint32)


DROPOUT_RNGS = ("rbg", "threefry")


def dropout_key(base_rng: jax.Array, step: jax.Array, impl: str) -> jax.Array:
  """The step's dropout key: fold_in(base, step), as a threefry or an rbg key.

  An rbg key (4 x uint32) is built from two threefry keys derived from the
  step key, so it is still a pure function of (base, step).
  """
  step_rng = jax.random.fold_in(base_rng, step)  # uint32 [2]
  if impl == "threefry":
    return step_rng
  if impl != "rbg":
    raise ValueError(f"config.train.dropout_rng={impl!r}: choose one of {DROPOUT_RNGS}.")
  words = jnp.concatenate(jax.random.split(step_rng))  # uint32 [4]
  return jax.random.wrap_key_data(words, impl="rbg")


def make_train_step(model, loss_fn: Callable, tx: optax.GradientTransformation,
                    schedule: optax.Schedule, dropout_rng: str = "threefry") -> Callable:
  """(state, batch) -> (new state, metrics). Dropout key = dropout_key(state.rng, step)."""

  def train_step(state: dict, batch: Mapping[str, Any]):
    step_rng = dropout_key(state["rng"], state["step"], dropout_rng)

    def objective(params):
      return loss_fn(model, params, batch, step_rng, train=True)

    (loss, metrics), grads = jax.value_and_grad(objective, has_aux=True)(state["params"])
    updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
    params = optax.apply_updates(state["params"], updates)
    metrics = dict(metrics)
    metrics["grad_norm"] = optax.global_norm(grads)
    metrics["learning_rate"] = schedule(state["step"])
    metrics["batch_digest"] = batch_digest(batch)
    new_state = dict(state, step=state["step"] + 1, params=params, opt_state=opt_state)
    return new_state, metrics

  return train_step


def make_eval_step(model, loss_fn: Callable) -> Callable:
  """(params, batch) -> metrics summed over the batch's real tokens (for averaging)."""

  def eval_step(params, batch: Mapping[str, Any]):
    _, metrics = loss_fn(model, params, batch, jax.random.PRNGKey(0), train=False)
    return metrics

  return eval_step
