"""SIGTERM mid-run: the trainer saves a checkpoint at the current step, exits 0, and resumes there."""
import os
import re
import signal
import subprocess
import time

import orbax.checkpoint as ocp

from tests.train.conftest import REPO_ROOT, main_command, trainer_config

# Steps and checkpoint interval of the first run: far more than the test lets
# it run, so a checkpoint at the stopping step can only be the SIGTERM save.
NEVER = 100_000
TRAINING = re.compile(r"step (\d+): loss")
PREEMPTED = re.compile(r"Preempted: checkpoint for step (\d+) written; exiting\.")


def _start(workdir, config, log_path) -> subprocess.Popen:
  with open(log_path, "w") as log:  # absl logs to stderr; the child keeps its own handle
    return subprocess.Popen(main_command(workdir, config), stdout=log, stderr=subprocess.STDOUT,
                            cwd=REPO_ROOT)


def _wait_for_training(proc: subprocess.Popen, log_path, timeout: float) -> None:
  deadline = time.monotonic() + timeout
  while not TRAINING.search(log_path.read_text()):
    assert proc.poll() is None, f"exited {proc.returncode} before training:\n{log_path.read_text()[-3000:]}"
    assert time.monotonic() < deadline, f"no training step logged in {timeout} s"
    time.sleep(0.2)


def _checkpointed_step(workdir, step: int) -> int:
  restored = ocp.PyTreeCheckpointer().restore(os.path.join(workdir, "checkpoints", str(step), "state"))
  return int(restored["step"])


def test_sigterm_saves_exits_cleanly_and_resumes_from_that_step(tiny_world, tmp_path):
  workdir = tmp_path / "run"
  config = trainer_config(tiny_world, num_train_steps=NEVER, checkpoint_every_steps=NEVER,
                          log_every_steps=2)
  first_log = tmp_path / "first.log"
  proc = _start(workdir, config, first_log)
  try:
    _wait_for_training(proc, first_log, timeout=300)
    proc.send_signal(signal.SIGTERM)
    returncode = proc.wait(timeout=60)  # the save of a tiny model takes seconds at most
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  log = first_log.read_text()
  assert returncode == 0, log[-3000:]
  assert "SIGTERM received" in log
  match = PREEMPTED.search(log)
  assert match, log[-3000:]
  stopped = int(match.group(1))
  assert stopped >= max(int(s) for s in TRAINING.findall(log))  # stopped at the latest step
  assert sorted(os.listdir(workdir / "checkpoints")) == [str(stopped)]
  assert sorted(os.listdir(workdir / "input_state")) == [str(stopped)]
  assert _checkpointed_step(workdir, stopped) == stopped

  # Restart on the same workdir, now configured to end two steps later.
  end = stopped + 2
  resumed = trainer_config(tiny_world, num_train_steps=end, checkpoint_every_steps=NEVER,
                           log_every_steps=2)
  second = subprocess.run(main_command(workdir, resumed), capture_output=True, text=True,
                          timeout=600, cwd=REPO_ROOT)
  assert second.returncode == 0, second.stderr[-3000:]
  assert f"Resuming from {workdir / 'checkpoints'} at step {stopped}." in second.stderr
  assert "Preempted" not in second.stderr
  assert sorted(os.listdir(workdir / "checkpoints"), key=int) == [str(stopped), str(end)]
  assert _checkpointed_step(workdir, end) == end
