"""Cross-device negatives: 8-device loss/gradients equal the 1-device values.

The global batch is split over ('data', 'fsdp') = 4 x 2 devices and the
parameters are FSDP-sharded; the contrastive softmax must still range over
all 16 examples (not the 2 of each device).
"""
import flax.linen as nn
import jax
import numpy as np

from cc12m_jax import sharding
from cc12m_jax.objectives import contrastive
from tests.retrieval import tiny

GLOBAL_BATCH = 16


def _loss_and_grads(mesh, config, model, params, batch):
  p_shard = sharding.param_shardings(params, mesh)
  params = jax.device_put(nn.meta.unbox(params), p_shard)
  batch = jax.device_put(batch, sharding.batch_sharding(mesh))

  def objective(p, b):
    return contrastive.loss_fn(model, p, b, None, train=False)

  with jax.set_mesh(mesh), nn.logical_axis_rules(sharding.LOGICAL_AXIS_RULES):
    (loss, metrics), grads = jax.jit(jax.value_and_grad(objective, has_aux=True))(params, batch)
  return loss, metrics, grads


def test_loss_and_gradients_on_8_devices_equal_1_device():
  # Symmetric: both directions (each also reported on its own in metrics).
  assert jax.device_count() == 8
  config = tiny.model_config(symmetric_loss=True, learn_temperature=True,
                             num_encoder_layers=1, text_encoder_layers=1)
  model = contrastive.build_model(config, tiny.VOCAB_SIZE)
  batch = tiny.random_batch(np.random.default_rng(0), GLOBAL_BATCH, config)
  params = model.init(jax.random.PRNGKey(0), batch, train=False)["params"]

  one = sharding.make_mesh(config.mesh, jax.devices()[:1])
  with config.unlocked():
    config.mesh.data, config.mesh.fsdp = 4, 2
  eight = sharding.make_mesh(config.mesh, jax.devices())
  assert eight.shape["data"] * eight.shape["fsdp"] == 8

  loss1, metrics1, grads1 = _loss_and_grads(one, config, model, params, batch)
  loss8, metrics8, grads8 = _loss_and_grads(eight, config, model, params, batch)

  np.testing.assert_allclose(loss8, loss1, rtol=1e-5)
  for key in metrics1:
    np.testing.assert_allclose(metrics8[key], metrics1[key], rtol=1e-5, atol=1e-6)
  flat1 = jax.tree_util.tree_leaves_with_path(grads1)
  flat8 = dict(jax.tree_util.tree_leaves_with_path(grads8))
  assert len(flat1) == len(flat8) > 10
  for path, g1 in flat1:
    g1 = np.asarray(g1)
    # f32 sums run in a different order across 8 devices: compare to the scale
    # of each gradient, not element by element.
    np.testing.assert_allclose(np.asarray(flat8[path]), g1, rtol=1e-3,
                               atol=1e-4 * float(np.abs(g1).max()) + 1e-7,
                               err_msg=jax.tree_util.keystr(path))
  assert np.abs(np.asarray(grads1["log_temperature"])) > 0

  # A per-shard loss (negatives only within each device's 2 examples) is a
  # different number: the equality above is not vacuous.
  image, text, tau = model.apply({"params": nn.meta.unbox(params)}, batch, train=False)
  local = np.mean([
      contrastive.contrastive_loss(image[i:i + 2], text[i:i + 2], tau, symmetric=True)[0]
      for i in range(0, GLOBAL_BATCH, 2)])
  assert abs(local - float(loss1)) > 0.1


def test_sharded_batch_is_split_over_devices():
  config = tiny.model_config()
  with config.unlocked():
    config.mesh.data, config.mesh.fsdp = 4, 2
  mesh = sharding.make_mesh(config.mesh, jax.devices())
  batch = tiny.random_batch(np.random.default_rng(1), GLOBAL_BATCH, config)
  placed = jax.device_put(batch, sharding.batch_sharding(mesh))
  shards = placed["decoder_targets"].addressable_shards
  assert len(shards) == 8 and all(s.data.shape[0] == 2 for s in shards)
