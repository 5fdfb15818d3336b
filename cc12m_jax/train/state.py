"""Train state (a plain dict, checkpointed as is) and its sharded creation.

  step      int32 []          optimizer steps taken
  params    model parameters  (float32, sharded by logical axis rules)
  opt_state optax state       (moments sharded like their parameters)
  rng       uint32 [2]        base key; step s uses fold_in(rng, s)
"""
from __future__ import annotations

from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import optax

from cc12m_jax import sharding
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.train import optim, step as step_lib


class TrainSetup:
  """The optimizer and the train state's abstract shapes and shardings for a RunSetup."""

  def __init__(self, setup: RunSetup, optim_cfg: ml_collections.ConfigDict):
    self.setup = setup
    self.tx, self.schedule = optim.make_optimizer(optim_cfg)
    self.state_shardings = state_shardings(self.tx, setup.abstract_params,
                                           setup.param_shardings, setup.mesh)
    self.abstract_state = abstract_state(self.tx, setup.abstract_params)

  def new_state(self, seed: int, params: Any | None = None) -> dict:
    return create_state(self.setup.model, self.tx, self.setup.dummy_batch, seed,
                        self.state_shardings, params)

  def jit_train_step(self, dropout_rng: str):
    s = self.setup
    return step_lib.jit_train_step(s.model, s.objective.loss_fn, self.tx, self.schedule,
                                   dropout_rng, s.mesh, self.state_shardings,
                                   s.batch_sharding)


def state_shardings(tx: optax.GradientTransformation, abstract_params: Any,
                    param_shardings: Any, mesh: jax.sharding.Mesh) -> dict:
  """Shardings of the whole state: optimizer moments follow their parameters."""
  abstract_opt = jax.eval_shape(tx.init, abstract_params)
  replicated = sharding.replicated(mesh)
  opt_shardings = optax.tree_map_params(
      tx, lambda _, s: s, abstract_opt, param_shardings,
      transform_non_params=lambda _: replicated)
  return {"step": replicated, "params": param_shardings, "opt_state": opt_shardings,
          "rng": replicated}


def abstract_state(tx: optax.GradientTransformation, abstract_params: Any) -> dict:
  return {
      "step": jax.ShapeDtypeStruct((), jnp.int32),
      "params": abstract_params,
      "opt_state": jax.eval_shape(tx.init, abstract_params),
      "rng": jax.ShapeDtypeStruct((2,), jnp.uint32),
  }


def create_state(model: nn.Module, tx: optax.GradientTransformation,
                 dummy_batch: Mapping[str, Any], seed: int, shardings: Mapping[str, Any],
                 params: Any | None = None) -> dict:
  """A fresh state, initialised directly into its shardings.

  With `params` given (fine-tuning) they are used instead of a random init
  and the optimizer starts fresh.
  """
  def init(rng):
    init_rng, train_rng = jax.random.split(rng)
    p = params
    if p is None:
      p = nn.meta.unbox(model.init({"params": init_rng}, dummy_batch, train=False)["params"])
    return {"step": jnp.zeros((), jnp.int32), "params": p, "opt_state": tx.init(p),
            "rng": train_rng}

  return jax.jit(init, out_shardings=dict(shardings))(jax.random.PRNGKey(seed))


def num_params(params: Any) -> int:
  return int(sum(x.size for x in jax.tree_util.tree_leaves(params)))
