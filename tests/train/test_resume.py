"""A SIGKILLed run resumed on its workdir ends bitwise equal to an uninterrupted run."""
import json
import os
import signal
import subprocess

import numpy as np
import orbax.checkpoint as ocp
import jax

from tests.train.conftest import REPO_ROOT, main_command, trainer_config

K = 4  # checkpoint interval; runs go to 2K


def _run(workdir, config, *extra):
  command = main_command(workdir, config, f"--digests={workdir}.digests.jsonl", *extra,
                         module="tests.train.harness")
  return subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO_ROOT)


def _final_params(workdir, step):
  restored = ocp.PyTreeCheckpointer().restore(os.path.join(workdir, "checkpoints", str(step), "state"))
  return restored["params"], restored


def _digests(workdir):
  by_step = {}
  with open(f"{workdir}.digests.jsonl") as f:
    for line in f:
      row = json.loads(line)
      by_step[row["step"]] = row["digest"]  # a re-run step overwrites its first try
  return by_step


def test_sigkill_then_resume_matches_uninterrupted_run(tiny_world, tmp_path):
  config = trainer_config(tiny_world, num_train_steps=2 * K, checkpoint_every_steps=K,
                          log_every_steps=K)
  straight, resumed = tmp_path / "straight", tmp_path / "resumed"

  first = _run(straight, config)
  assert first.returncode == 0, first.stderr[-3000:]

  killed = _run(resumed, config, f"--kill_at_step={K + 2}")
  assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
  assert sorted(os.listdir(resumed / "checkpoints")) == [str(K)]  # died before step 2K

  second = _run(resumed, config)
  assert second.returncode == 0, second.stderr[-3000:]
  assert f"Resuming from {resumed / 'checkpoints'} at step {K}" in second.stderr

  params_a, state_a = _final_params(straight, 2 * K)
  params_b, state_b = _final_params(resumed, 2 * K)
  assert int(state_a["step"]) == int(state_b["step"]) == 2 * K
  for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(params_a),
                          jax.tree_util.tree_leaves(params_b)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=jax.tree_util.keystr(path))
  digests_a, digests_b = _digests(straight), _digests(resumed)
  assert sorted(digests_a) == list(range(1, 2 * K + 1))
  assert digests_a == digests_b
  assert len(set(digests_a.values())) > 1  # batches differ from step to step
