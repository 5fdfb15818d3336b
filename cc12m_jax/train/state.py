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
import optax
from jax.sharding import Mesh

from cc12m_jax import sharding


def abstract_params_and_shardings(model: nn.Module, dummy_batch: Mapping[str, Any],
                                  mesh: Mesh) -> tuple[Any, Any]:
  """(abstract unboxed params, NamedShardings) without running the init."""
  boxed = jax.eval_shape(
      lambda: model.init({"params": jax.random.PRNGKey(0)}, dummy_batch, train=False)["params"])
  return nn.meta.unbox(boxed), sharding.param_shardings(boxed, mesh)


def state_shardings(tx: optax.GradientTransformation, abstract_params: Any,
                    param_shardings: Any, mesh: Mesh) -> dict:
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


