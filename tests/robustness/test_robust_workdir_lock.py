"""One trainer per workdir (issue 18, finding 5): a second one fails at once
naming the first; a lock whose holder died is taken over."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import orbax.checkpoint as ocp
import pytest

from cc12m_jax.core import workdir_lock
from cc12m_jax.evaluation import modes
from tests.train.conftest import REPO_ROOT, main_command, trainer_config


def test_second_lock_fails_naming_the_holder_and_release_frees_it(tmp_path):
  with workdir_lock.WorkdirLock(str(tmp_path)):
    holder = json.loads((tmp_path / "LOCK").read_text())
    assert (holder["host"], holder["pid"]) == (socket.gethostname(), os.getpid())
    with pytest.raises(workdir_lock.WorkdirLockedError) as info:
      workdir_lock.WorkdirLock(str(tmp_path)).acquire()
    assert f"host {socket.gethostname()}, pid {os.getpid()}" in str(info.value)
    assert str(tmp_path) in str(info.value)
  assert (tmp_path / "LOCK").read_text() == ""  # released: names no holder
  with workdir_lock.WorkdirLock(str(tmp_path)):
    pass


_HOLD = """
import sys, time
from cc12m_jax.core import workdir_lock
from cc12m_jax.evaluation import modes
workdir_lock.WorkdirLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_lock_of_a_killed_holder_is_taken_over(tmp_path, caplog):
  holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(tmp_path)], cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(workdir_lock.WorkdirLockedError, match=f"pid {holder.pid}"):
      workdir_lock.WorkdirLock(str(tmp_path)).acquire()
  finally:
    holder.send_signal(signal.SIGKILL)  # no clean-up: the file still names it
    holder.wait()
  assert json.loads((tmp_path / "LOCK").read_text())["pid"] == holder.pid
  with workdir_lock.WorkdirLock(str(tmp_path)):
    assert json.loads((tmp_path / "LOCK").read_text())["pid"] == os.getpid()
  assert any(f"no longer running (host {socket.gethostname()}, pid {holder.pid}" in r.getMessage()
             for r in caplog.records)


def test_lease_for_remote_workdirs(tmp_path, caplog):
  """The lease used on gs:// (no file locks there), tried on a local directory."""
  first = workdir_lock.WorkdirLock(str(tmp_path), lease=True, lease_s=2.0).acquire()
  with pytest.raises(workdir_lock.WorkdirLockedError, match=f"pid {os.getpid()}"):
    workdir_lock.WorkdirLock(str(tmp_path), lease=True, lease_s=2.0).acquire()
  time.sleep(2.5)  # renewed every 0.5 s: still held
  with pytest.raises(workdir_lock.WorkdirLockedError):
    workdir_lock.WorkdirLock(str(tmp_path), lease=True, lease_s=2.0).acquire()
  first._stop.set()  # pylint: disable=protected-access  (the holder dies: no more renewals)
  first._heartbeat.join()  # pylint: disable=protected-access
  time.sleep(2.5)
  second = workdir_lock.WorkdirLock(str(tmp_path), lease=True, lease_s=2.0).acquire()
  assert any("stopped renewing it" in r.getMessage() for r in caplog.records)
  second.release()
  assert not (tmp_path / "LOCK").exists()


def test_second_trainer_on_a_workdir_fails_at_once_and_the_first_finishes(tiny_world, tmp_path):
  workdir = tmp_path / "run"
  resume = tmp_path / "resume"
  config = trainer_config(tiny_world, num_train_steps=4, checkpoint_every_steps=2)
  first = subprocess.Popen(
      main_command(workdir, config, "--pause_at_step=2", f"--resume_file={resume}",
                   module="tests.train.harness"),
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
  try:
    deadline = time.monotonic() + 300
    while not os.path.exists(f"{resume}.waiting"):  # the first holds the lock, mid-run
      assert first.poll() is None, first.stderr.read()[-3000:]
      assert time.monotonic() < deadline, "the first trainer never reached step 2"
      time.sleep(0.2)
    start = time.monotonic()
    second = subprocess.run(main_command(workdir, config), capture_output=True, text=True,
                            timeout=300, cwd=REPO_ROOT)
    took = time.monotonic() - start
    assert second.returncode != 0
    [line] = [l for l in second.stderr.splitlines() if l.startswith(
        "cc12m_jax.core.workdir_lock.WorkdirLockedError: ")]
    assert f"{workdir} is in use by another run (host {socket.gethostname()}, " \
           f"pid {first.pid}, since " in line, line
    assert "Resuming" not in second.stderr and "Mesh " not in second.stderr  # never started
    print(f"second trainer failed after {took:.1f} s (start-up included)")
    resume.touch()
    assert first.wait(timeout=300) == 0
  finally:
    if first.poll() is None:
      first.kill()
      first.wait()
  assert sorted(os.listdir(workdir / "checkpoints"), key=int) == ["2", "4"]
  for step in (2, 4):
    restored = ocp.PyTreeCheckpointer().restore(str(workdir / "checkpoints" / str(step) / "state"))
    assert int(restored["step"]) == step
  assert (workdir / "LOCK").read_text() == ""


@pytest.mark.parametrize("mode", ["evaluate", "predict"])
def test_evaluate_and_predict_lock_their_workdir_too(tmp_path, mode):
  """They write reports and selection history under the workdir: a second run
  fails before restoring anything (no setup, no evaluators are touched)."""
  config = trainer_config(str(tmp_path / "no_data"))
  with workdir_lock.WorkdirLock(str(tmp_path / "eval")):
    with pytest.raises(workdir_lock.WorkdirLockedError, match=f"pid {os.getpid()}"):
      getattr(modes, mode)(config, str(tmp_path / "eval"), None, {})
  assert (tmp_path / "eval" / "LOCK").read_text() == ""
