"""The same loss and metrics on 8 simulated devices as on 1, for every new objective.

One model carries every task ('mlm+mass+moc+ic+vlm'): each term's metrics
are its objective's own, so one compiled loss per mesh checks them all. The
8-device mesh splits the batch 4 x 2 over ('data', 'fsdp') and shards the
parameters (FSDP); masks come from the same key on both, and must not
depend on the sharding (masking.mask_key).
"""
import jax
import numpy as np

from cc12m_jax import sharding
from cc12m_jax.core.run_setup import RunSetup
from tests.objectives import tiny

OBJECTIVE = "mlm+0.5*mass+0.1*moc+ic+0.1*vlm"


def _loss(config, devices, params, batch, rng):
  setup = RunSetup(config, devices)
  params = jax.device_put(params, setup.param_shardings)
  batch = jax.device_put(batch, setup.batch_sharding)
  fn = jax.jit(lambda p, b, r: setup.objective.loss_fn(setup.model, p, b, r, train=False))
  with sharding.activation_rules(setup.mesh):
    loss, metrics = fn(params, batch, rng)
  return float(loss), {k: float(v) for k, v in metrics.items()}


def test_every_objective_gives_the_same_loss_on_8_devices_as_on_1():
  assert jax.device_count() == 8
  _, _, params = tiny.model_and_params(OBJECTIVE)
  params = jax.tree_util.tree_map(np.asarray, params)
  batch = tiny.batch(16, seed=6)
  rng = jax.random.wrap_key_data(np.arange(4, dtype=np.uint32), impl="rbg")  # as the step's
  config = tiny.config(OBJECTIVE)
  config.mesh.data, config.mesh.fsdp, config.mesh.model = 1, 1, 1
  loss1, metrics1 = _loss(config, jax.devices()[:1], params, batch, rng)
  config.mesh.data, config.mesh.fsdp = 4, 2
  loss8, metrics8 = _loss(config, jax.devices(), params, batch, rng)
  np.testing.assert_allclose(loss8, loss1, rtol=1e-5)
  assert {"mlm/loss", "mass/loss", "moc/loss", "ic/loss", "vlm/loss"} <= set(metrics1)
  for key, value in metrics1.items():
    np.testing.assert_allclose(metrics8[key], value, rtol=1e-5, atol=1e-6, err_msg=key)
  for name in ("mlm", "mass", "moc"):
    assert metrics1[f"{name}/num_targets"] > 0
