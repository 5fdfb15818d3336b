"""A damaged latest checkpoint: reported, and the newest intact step is resumed
(issue 18, finding 4); a save that fails (a full disk) is one clear error."""
import glob
import os
import resource
import shutil
import signal
import subprocess

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from cc12m_jax.core import checkpointing
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import pipeline
from cc12m_jax.train import state as state_lib, trainer
from tests.train.conftest import REPO_ROOT, main_command, trainer_config


@pytest.fixture(scope="module")
def trained(tiny_world, tmp_path_factory):
  """(config, workdir) of a 4-step run with checkpoints at steps 2 and 4."""
  workdir = str(tmp_path_factory.mktemp("trained"))
  config = trainer_config(tiny_world, num_train_steps=4, checkpoint_every_steps=2,
                          keep_checkpoints=3)
  trainer.train_and_evaluate(config, workdir)
  return config, workdir


def _data_files(state_dir: str) -> list[str]:
  # Every one, at the top and per process: which of them a restore reads
  # depends on the mesh (here the top-level ones hold the arrays).
  return (glob.glob(os.path.join(state_dir, "d", "*"))
          + glob.glob(os.path.join(state_dir, "ocdbt.process_*", "d", "*")))


def _damage(workdir: str, step: int, kind: str) -> None:
  state = os.path.join(workdir, "checkpoints", str(step), "state")
  if kind == "manifest.ocdbt":
    os.remove(os.path.join(state, "manifest.ocdbt"))
  elif kind == "_METADATA":
    os.remove(os.path.join(state, "_METADATA"))
  elif kind == "d/":
    shutil.rmtree(os.path.join(state, "d"))
  elif kind == "state/":
    shutil.rmtree(state)
  elif kind == "input_state/":
    shutil.rmtree(os.path.join(workdir, "input_state", str(step)))
  elif kind == "truncated data files":
    for path in _data_files(state):
      with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)
  elif kind == "zeroed data files":
    for path in _data_files(state):
      size = os.path.getsize(path)
      with open(path, "r+b") as f:
        f.write(b"\0" * size)
  else:
    raise ValueError(kind)


def _restore_latest(config, workdir):
  setup = RunSetup(config)
  training = state_lib.TrainSetup(setup, config.optim)
  train_iter = pipeline.make_train_iterator(config.data, setup.batch_sharding)
  ckpt = checkpointing.Checkpointer(workdir, keep=3)
  try:
    return ckpt.restore_latest(training.abstract_state, training.state_shardings, train_iter)
  finally:
    ckpt.close()


DAMAGE = ["manifest.ocdbt", "_METADATA", "d/", "state/", "input_state/",
          "truncated data files", "zeroed data files"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_latest_step_falls_back_to_the_previous_one(trained, tmp_path, kind, caplog):
  config, original = trained
  workdir = str(tmp_path / "run")
  shutil.copytree(original, workdir)
  _damage(workdir, 4, kind)
  step, state = _restore_latest(config, workdir)
  saved = ocp.PyTreeCheckpointer().restore(os.path.join(original, "checkpoints", str(step),
                                                        "state"))
  for a, b in zip(jax.tree_util.tree_leaves(state["params"]),
                  jax.tree_util.tree_leaves(saved["params"])):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  if step == 4:  # orbax does not need this file: nothing to fall back from
    assert kind == "_METADATA", kind
    return
  assert step == 2 and int(state["step"]) == 2
  errors = [r.getMessage() for r in caplog.records if "cannot be restored" in r.getMessage()]
  assert errors and errors[0].startswith("Checkpoint step 4 cannot be restored: ")
  # The damaged step is kept for a post-mortem, out of orbax's way (it would
  # skip every save up to step 4 otherwise).
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2"]
  assert os.path.isdir(os.path.join(workdir, checkpointing.DAMAGED_DIR, "4"))


def test_what_is_missing_is_named(trained, tmp_path, caplog):
  config, original = trained
  workdir = str(tmp_path / "run")
  shutil.copytree(original, workdir)
  _damage(workdir, 4, "manifest.ocdbt")
  _damage(workdir, 4, "input_state/")
  state = os.path.join(workdir, "checkpoints", "4", "state")
  emptied = sorted(_data_files(state))[0]
  open(emptied, "wb").close()
  _restore_latest(config, workdir)
  [error] = [r.getMessage() for r in caplog.records if "cannot be restored" in r.getMessage()]
  assert f"{state}/manifest.ocdbt is missing" in error
  assert f"{emptied} is empty" in error
  assert f"{workdir}/input_state/4 (the input position) is missing" in error


def test_no_intact_step_is_an_error_not_a_fresh_start(trained, tmp_path):
  config, original = trained
  workdir = str(tmp_path / "run")
  shutil.copytree(original, workdir)
  _damage(workdir, 4, "state/")
  _damage(workdir, 2, "zeroed data files")
  with pytest.raises(checkpointing.CheckpointError,
                     match="No checkpoint in .* can be restored") as info:
    trainer.train_and_evaluate(config, workdir)
  assert "step 4: " in str(info.value) and "step 2: " in str(info.value)
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints"))) == ["2", "4"]  # untouched


def test_trainer_resumes_from_the_intact_step_and_saves_past_the_damaged_one(trained, tmp_path):
  config, original = trained
  workdir = str(tmp_path / "run")
  shutil.copytree(original, workdir)
  _damage(workdir, 4, "truncated data files")
  config = config.copy_and_resolve_references()
  config.train.num_train_steps = 6
  state = trainer.train_and_evaluate(config, workdir)
  assert int(state["step"]) == 6
  # Step 4 written again, from the resumed run (orbax would skip it were the
  # damaged step 4 still in checkpoints/).
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints")), key=int) == ["2", "4", "6"]
  for step in (4, 6):
    restored = ocp.PyTreeCheckpointer().restore(os.path.join(workdir, "checkpoints", str(step),
                                                             "state"))
    assert int(restored["step"]) == step


def _limit_file_size():
  # A write past 128 KiB fails with EFBIG, as a full disk fails with ENOSPC,
  # without a special filesystem (SIGXFSZ would kill the process instead).
  # The tiny model's state is ~700 KB.
  signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
  resource.setrlimit(resource.RLIMIT_FSIZE, (128 << 10, 128 << 10))


@pytest.mark.parametrize("shuffle_buffer, written", [
    # The input position is written first: its shuffle buffer is over the limit.
    (50, "input_state/2/host_00000_of_00001/"),
    # Without one the input position fits, and orbax's (async) write fails.
    (1, "checkpoints/2.orbax-checkpoint-tmp/"),
])
def test_a_failed_save_is_one_clear_error_naming_the_directory(tiny_world, tmp_path,
                                                               shuffle_buffer, written):
  workdir = tmp_path / "run"
  config = trainer_config(tiny_world, num_train_steps=2, checkpoint_every_steps=2)
  config.data.shuffle_buffer = shuffle_buffer
  result = subprocess.run(main_command(workdir, config), capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT, preexec_fn=_limit_file_size)
  assert result.returncode != 0
  lines = result.stderr.splitlines()
  # The error is the last thing printed, once, with one traceback (it used to
  # follow ~780 lines of orbax's and tensorstore's tracebacks, then ~1,200
  # more at exit).
  assert lines[-1].startswith("cc12m_jax.core.checkpointing.CheckpointSaveError: "), \
      result.stderr[-5000:]
  assert (f"Could not write the checkpoint of step 2 to {workdir}: [Errno 27] File too large "
          f"(writing {workdir}/{written}") in lines[-1], lines[-1]
  assert "no checkpoint was completed" in lines[-1]
  assert result.stderr.count("Traceback (most recent call last)") == 1, result.stderr[-5000:]
  assert "Event loop is closed" not in result.stderr


def test_only_the_newest_steps_keep_their_input_position(tiny_world, tmp_path):
  # Steps kept for selection keep their parameters; the input position (the
  # shuffle buffer: large) is kept for the step to resume and its fallback.
  workdir = str(tmp_path / "run")
  config = trainer_config(tiny_world, num_train_steps=6, checkpoint_every_steps=2,
                          keep_checkpoints=3)
  trainer.train_and_evaluate(config, workdir)
  assert sorted(os.listdir(os.path.join(workdir, "checkpoints")), key=int) == ["2", "4", "6"]
  assert sorted(os.listdir(os.path.join(workdir, "input_state")), key=int) == ["4", "6"]
  setup = RunSetup(config)
  _, step = checkpointing.load_pretrained_params(workdir, 2, setup.abstract_params,
                                                 setup.param_shardings)
  assert step == 2  # a parameters-only step still initialises a run (and is evaluated)

  damaged = str(tmp_path / "damaged")
  shutil.copytree(workdir, damaged)
  _damage(damaged, 6, "zeroed data files")
  step, state = _restore_latest(config, damaged)
  assert step == 4 and int(state["step"]) == 4  # the fallback kept its input position

  both = str(tmp_path / "both")
  shutil.copytree(workdir, both)
  _damage(both, 6, "state/")
  _damage(both, 4, "zeroed data files")
  with pytest.raises(checkpointing.CheckpointError) as info:
    _restore_latest(config, both)
  message = str(info.value)
  assert "step 6: " in message and "step 4: " in message
  # Step 2 is not reported as damaged: its input position was pruned on purpose.
  assert "step 2: " not in message
  assert ("steps [2]: parameters only (input positions are kept for the newest 2 steps)"
          in message)
