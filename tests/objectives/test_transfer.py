"""Pre-trained mlm / mass / ic+moc parameters fine-tune as the ic Captioner."""
import jax
import numpy as np
import pytest

from cc12m_jax.core import checkpointing
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.train import state as state_lib
from tests.objectives import tiny


def _save(workdir: str, params) -> None:
  ckpt = checkpointing.Checkpointer(workdir, keep=1, use_async=False)
  ckpt.save(1, {"step": np.int32(1), "params": params}, None)
  ckpt.close()


@pytest.fixture(scope="module")
def captioner():
  """The ic fine-tuning run's setup and its fresh (seeded) parameters, on one device."""
  config = tiny.config("ic")
  config.mesh.data = 1
  setup = RunSetup(config, jax.devices()[:1])
  fresh = state_lib.TrainSetup(setup, config.optim).new_state(seed=0)["params"]
  return setup, fresh


def test_an_mlm_encoder_loads_partially_and_the_decoder_starts_fresh(tmp_path, captioner):
  setup, fresh = captioner
  _, _, mlm_params = tiny.model_and_params("mlm")
  workdir = str(tmp_path / "mlm")
  _save(workdir, mlm_params)
  # Without init_partial the missing decoder is an error that names the option.
  with pytest.raises(checkpointing.InitFromError, match="(?s)decoder.*missing in checkpoint.*"
                     "init_partial=True"):
    checkpointing.load_pretrained_params(workdir, -1, setup.abstract_params,
                                         setup.param_shardings)
  params, step = checkpointing.load_pretrained_params(
      workdir, -1, setup.abstract_params, setup.param_shardings, fresh_params=fresh)
  assert step == 1 and set(params) == set(fresh) and "text_segment" not in params
  for part in ("text_embedding", "image_embedding", "encoder", "logits_projection"):
    jax.tree_util.tree_map(np.testing.assert_array_equal, params[part], mlm_params[part])
  jax.tree_util.tree_map(np.testing.assert_array_equal, params["decoder"], fresh["decoder"])


def test_mass_and_ic_plus_moc_load_as_a_whole_captioner(tmp_path, captioner):
  setup, _ = captioner
  for objective in ("mass", "ic+0.1*moc"):
    _, _, pretrained = tiny.model_and_params(objective)
    workdir = str(tmp_path / objective.replace("*", "_"))
    _save(workdir, pretrained)
    params, _ = checkpointing.load_pretrained_params(  # strict: every parameter is there
        workdir, -1, setup.abstract_params, setup.param_shardings)
    assert set(params) == {"text_embedding", "image_embedding", "encoder", "decoder",
                           "logits_projection"}
    jax.tree_util.tree_map(np.testing.assert_array_equal, params,
                           {k: pretrained[k] for k in params})


def test_a_partial_load_still_refuses_a_different_shape(tmp_path, captioner):
  setup, fresh = captioner
  _, _, mlm_params = tiny.model_and_params("mlm")
  wrong = jax.tree_util.tree_map(np.asarray, mlm_params)
  wrong["logits_projection"]["kernel"] = np.zeros((32, tiny.VOCAB + 1), np.float32)
  workdir = str(tmp_path / "wrong")
  _save(workdir, wrong)
  with pytest.raises(checkpointing.InitFromError, match="vocabulary mismatch"):
    checkpointing.load_pretrained_params(workdir, -1, setup.abstract_params,
                                         setup.param_shardings, fresh_params=fresh)
