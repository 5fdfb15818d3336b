"""In-process trainer runs: cross-mesh restore, fine-tuning init, NaN stop."""
import os

import jax
import numpy as np
import pytest

import optax
from clu import metric_writers

from cc12m_jax import config_rules
from cc12m_jax.core import checkpointing
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import pipeline
from cc12m_jax.train import state as state_lib, trainer
from tests.train.conftest import trainer_config

STEPS = 2


@pytest.fixture(scope="module")
def pretrained(tiny_world, tmp_path_factory):
  """A 2-step run on a (data=4, model=2) mesh; returns (config, workdir, final host state)."""
  workdir = str(tmp_path_factory.mktemp("pretrain"))
  config = trainer_config(tiny_world, num_train_steps=STEPS, checkpoint_every_steps=STEPS)
  config.mesh.data, config.mesh.fsdp, config.mesh.model = 4, 1, 2
  state = trainer.train_and_evaluate(config, workdir)
  return config, workdir, jax.tree_util.tree_map(np.asarray, state)


@pytest.mark.parametrize("mesh,num_devices", [((8, 1, 1), 8), ((1, 1, 1), 1)])
def test_checkpoint_restores_on_another_mesh(pretrained, mesh, num_devices):
  config, workdir, saved = pretrained
  config = config.copy_and_resolve_references()
  config.mesh.data, config.mesh.fsdp, config.mesh.model = mesh
  training = state_lib.TrainSetup(RunSetup(config, jax.devices()[:num_devices]), config.optim)
  ckpt = checkpointing.Checkpointer(workdir, keep=3)
  assert ckpt.latest_step() == STEPS
  restored = ckpt.restore(STEPS, training.abstract_state, training.state_shardings,
                          train_iter=None)
  ckpt.close()
  assert int(restored["step"]) == STEPS
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(restored), jax.tree_util.tree_leaves(saved)):
    np.testing.assert_array_equal(np.asarray(a), b, err_msg=jax.tree_util.keystr(path))
    assert len(a.sharding.device_set) == num_devices


def test_finetune_loads_pretrained_params(pretrained, tmp_path):
  config, pre_workdir, saved = pretrained
  config = config.copy_and_resolve_references()
  config.mode = "finetune"
  config.data.train_sources = "coco_train"
  config.data.exclude_ids_of = ""
  config.train.init_from = pre_workdir
  config.train.num_train_steps = 1
  config.optim.learning_rate = 1e-12
  config.optim.warmup_steps = 0
  state = trainer.train_and_evaluate(config, str(tmp_path))
  assert int(state["step"]) == 1  # fresh step counter
  adam_count = optax.tree_utils.tree_get(
      state["opt_state"], "count",
      filtering=lambda path, _: path[-1].tuple_name == "ScaleByAdamState")
  assert int(adam_count) == 1  # fresh optimizer
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(state["params"]),
                          jax.tree_util.tree_leaves(saved["params"])):
    np.testing.assert_allclose(np.asarray(a), b, atol=1e-9, err_msg=jax.tree_util.keystr(path))


def test_finetune_with_other_vocabulary_is_a_clear_error(pretrained):
  config, pre_workdir, saved = pretrained
  config = config.copy_and_resolve_references()
  vocab = saved["params"]["logits_projection"]["kernel"].shape[1]
  config.model.vocab_size = vocab + 5
  setup = RunSetup(config)
  with pytest.raises(checkpointing.InitFromError, match="vocabulary mismatch") as err:
    checkpointing.load_pretrained_params(pre_workdir, -1, setup.abstract_params, setup.param_shardings)
  assert "logits_projection" in str(err.value) and str(vocab) in str(err.value)


def test_finetune_mode_requires_init_from(pretrained):
  config = pretrained[0].copy_and_resolve_references()
  config.mode = "finetune"
  with pytest.raises(config_rules.ConfigError, match="train.init_from"):
    config_rules.validate(config)


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tiny_world, tmp_path):
  config = trainer_config(tiny_world, num_train_steps=6, checkpoint_every_steps=1,
                          log_every_steps=1)
  config.optim.learning_rate = 1e30  # the first update sends params to ~1e30
  config.optim.warmup_steps = 0
  config.optim.grad_clip_norm = 0.0
  with pytest.raises(trainer.NonFiniteLossError, match="last good checkpoint") as err:
    trainer.train_and_evaluate(config, str(tmp_path))
  kept = sorted(int(s) for s in os.listdir(tmp_path / "checkpoints") if s.isdigit())
  assert kept and max(kept) == err.value.step - 1 == err.value.last_saved
  assert f"at step {err.value.step}" in str(err.value)


def test_relative_workdir_checkpoints_save_and_restore(pretrained, tmp_path, monkeypatch):
  """A relative --workdir (as the README's main job passes) works with orbax."""
  config, workdir, saved = pretrained
  config = config.copy_and_resolve_references()
  config.mesh.data, config.mesh.fsdp, config.mesh.model = 1, 1, 1
  setup = RunSetup(config, jax.devices()[:1])
  training = state_lib.TrainSetup(setup, config.optim)
  ckpt = checkpointing.Checkpointer(workdir, keep=3)
  state = ckpt.restore(STEPS, training.abstract_state, training.state_shardings, train_iter=None)
  ckpt.close()
  train_iter = pipeline.make_train_iterator(config.data, setup.batch_sharding)
  monkeypatch.chdir(tmp_path)
  relative = checkpointing.Checkpointer("relative_workdir", keep=1)
  relative.save(STEPS, state, train_iter)
  relative.close()
  assert (tmp_path / "relative_workdir" / "checkpoints" / str(STEPS)).is_dir()
  again = checkpointing.Checkpointer("relative_workdir", keep=1)
  assert again.latest_step() == STEPS
  restored = again.restore(STEPS, training.abstract_state, training.state_shardings,
                           train_iter=None)
  again.close()
  for a, b in zip(jax.tree_util.tree_leaves(restored), jax.tree_util.tree_leaves(saved)):
    np.testing.assert_array_equal(np.asarray(a), b)


def test_progress_line_shows_each_objectives_accuracy(caplog):
  """A weighted sum logs 'ic/token_accuracy' and 'moc/accuracy', not a missing 'acc'."""
  fetched = [(1, {"loss": 2.0, "ic/loss": 1.0, "ic/token_accuracy": 0.25,
                  "moc/loss": 10.0, "moc/accuracy": 0.5}),
             (2, {"loss": 4.0, "ic/loss": 3.0, "ic/token_accuracy": 0.75,
                  "moc/loss": 10.0, "moc/accuracy": 0.5})]
  with caplog.at_level("INFO"):
    trainer._log_train_metrics(metric_writers.LoggingWriter(), fetched, 2, elapsed=1.0,
                               steps_done=2, per_device_batch=4, remaining_steps=8,
                               not_trained_on={"skipped": {}, "filtered": {}})
  line = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("step 2:"))
  assert "loss 3.0000 ic/token_accuracy 0.500 moc/accuracy 0.500 |" in line, line
  assert "nan" not in line
