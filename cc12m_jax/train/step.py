"""The train step: a pure function of (state, batch), jitted by the trainer."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import optax

from cc12m_jax import sharding


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
    new_state = dict(state, step=state["step"] + 1, params=params, opt_state=opt_state)
    return new_state, metrics

  return train_step



def jit_train_step(model, loss_fn: Callable, tx: optax.GradientTransformation,
                   schedule: optax.Schedule, dropout_rng: str, mesh: jax.sharding.Mesh,
                   state_shardings: Any, batch_sharding: Any) -> Callable:
  """The jitted train step on `mesh`: state donated, metrics replicated.

  The returned callable binds the logical activation rules while it traces
  (its first call, or `.lower(state, batch)`).
  """
  fn = make_train_step(model, loss_fn, tx, schedule, dropout_rng)
  jitted = jax.jit(fn, in_shardings=(state_shardings, batch_sharding),
                   out_shardings=(state_shardings, sharding.replicated(mesh)),
                   donate_argnums=(0,))

  def call(state, batch):
    with sharding.activation_rules(mesh):
      return jitted(state, batch)

  def lower(state, batch):
    with sharding.activation_rules(mesh):
      return jitted.lower(state, batch)

  call.lower = lower
  return call
