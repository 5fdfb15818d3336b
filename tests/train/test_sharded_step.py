"""The same global batch gives the same loss and update on any mesh."""
import jax
import numpy as np
import pytest

import optax

from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.train import state as state_lib
from tests.models import tiny

MESHES = [(8, 1, 1), (4, 1, 2), (2, 1, 4), (2, 2, 2)]  # (data, fsdp, model)


def _config(mesh):
  # No dropout: keeps the compiled step small (dropout is tested in tests/models).
  config = tiny.tiny_config(dropout=0.0, input_dropout=0.0, attention_dropout=0.0,
                            num_encoder_layers=1, num_decoder_layers=1)
  config.data.global_batch_size = 8
  config.mesh.data, config.mesh.fsdp, config.mesh.model = mesh
  return config


def _one_step(config, devices, batch, params=None):
  setup = RunSetup(config, devices)
  training = state_lib.TrainSetup(setup, config.optim)
  state = training.new_state(config.train.seed, None if params is None else
                             jax.device_put(params, setup.param_shardings))
  step = training.jit_train_step(config.train.dropout_rng)
  state, metrics = step(state, jax.device_put(batch, setup.batch_sharding))
  return float(metrics["loss"]), state


@pytest.fixture(scope="module")
def single_device_result():
  batch = tiny.random_batch(8, seed=21)
  config = _config((1, 1, 1))
  training = state_lib.TrainSetup(RunSetup(config, jax.devices()[:1]), config.optim)
  init_params = jax.tree_util.tree_map(np.asarray,
                                       training.new_state(config.train.seed)["params"])
  loss, state = _one_step(_config((1, 1, 1)), jax.devices()[:1], batch, init_params)
  return batch, init_params, loss, jax.tree_util.tree_map(np.asarray, state["params"])


@pytest.mark.parametrize("mesh", MESHES, ids=lambda m: "x".join(map(str, m)))
def test_loss_and_update_match_single_device(single_device_result, mesh):
  batch, init_params, loss1, params1 = single_device_result
  assert len(jax.devices()) == 8
  loss, state = _one_step(_config(mesh), jax.devices(), batch, init_params)
  np.testing.assert_allclose(loss, loss1, rtol=1e-5)
  jax.tree_util.tree_map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5),
                         jax.tree_util.tree_map(np.asarray, state["params"]), params1)
  # The parameters really are split as the logical rules say.
  data, fsdp, model = mesh
  kernel = state["params"]["decoder"]["layer_0"]["mlp"]["wi"]["kernel"]  # [E=32, F=64]
  assert kernel.sharding.shard_shape(kernel.shape) == (32 // fsdp, 64 // model)
  adam_mu = optax.tree_utils.tree_get(state["opt_state"], "mu")["decoder"]["layer_0"]["mlp"]["wi"]["kernel"]
  assert adam_mu.sharding == kernel.sharding
