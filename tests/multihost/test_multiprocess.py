"""Every multi-host path in real processes: 2 processes x 4 CPU devices against 1 x 8.

The processes are started by launch/multiprocess_cpu.sh and talk through the
real jax.distributed runtime on 127.0.0.1 (gloo collectives, orbax writes from
every process). The one-process side of each comparison runs in this pytest
process, on its 8 simulated devices (tests/conftest.py).

One 2-process run (`two_process_run`: 12 steps, checkpoints at 8 and 12, an
evaluation at 12) is shared by the tests that only read it.
"""
import json
import os
import re
import shutil
import signal
import time

import jax
import numpy as np
import pytest

from cc12m_jax import main as cc12m_main
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import pipeline
from cc12m_jax.train import state as state_lib
from tests.multihost import worker
from tests.multihost.conftest import (EVAL_FLAGS, Launch, assert_params_close, numpy_state,
                                      read_rows, run_launch, tiny_config)

STEPS, FIRST_CHECKPOINT = 12, 8
NEVER = 100_000
# Parameters of two runs that saw the same batches agree to float32 summation
# order (cross-process all-reduce against in-process): about 1e-7 for most,
# but Adam divides by sqrt(v), so a rarely-seen token's embedding row, whose
# gradients are tiny, carries the rounding up to ~1e-6 after 12 steps. 12
# steps move parameters by far more than this bound (checked in the first test).
ATOL = 5e-6
SOURCE = "nocaps_val"


def _eval_settings(config):
  """The same cheap evaluation as EVAL_FLAGS, on a config object."""
  for flag in EVAL_FLAGS:
    key, value = flag[len("--config."):].split("=")
    section, name = key.split(".")
    config[section][name] = type(config[section][name])(value)
  return config


def _run_config(world, **overrides):
  settings = dict(num_train_steps=STEPS, checkpoint_every_steps=FIRST_CHECKPOINT,
                  log_every_steps=4, keep_checkpoints=3)
  return tiny_config(world, **{**settings, **overrides})


# The launcher's WRAP for the shared run: process 0 creates files readable by
# others (umask 022), process 1 files that are not (umask 027), so a file's
# mode tells which kind of process created it.
MARK_CREATOR = "bash tests/multihost/with_umask.sh {i}"


def _created_by_other_processes(workdir) -> list[str]:
  """Paths under `workdir` created by a process other than 0 (see MARK_CREATOR)."""
  found = []
  for root, dirs, files in os.walk(workdir):
    for name in dirs + files:
      path = os.path.join(root, name)
      if not os.stat(path).st_mode & 0o007:
        found.append(os.path.relpath(path, workdir))
  return sorted(found)


@pytest.fixture(scope="module")
def eight_devices():
  assert jax.device_count() == 8, (
      f"the one-process side needs 8 CPU devices, got {jax.device_count()} "
      "(tests/conftest.py sets --xla_force_host_platform_device_count=8)")


@pytest.fixture(scope="module")
def two_process_run(world, tmp_path_factory):
  """2 processes x 4 devices: 12 steps, checkpoints at 8 and 12, evaluation at 12."""
  base = tmp_path_factory.mktemp("two_process_run")
  workdir, logs, rows = base / "workdir", base / "logs", base / "rows"
  config = _run_config(world, eval_every_steps=STEPS)
  launch = run_launch(2, workdir, config, *EVAL_FLAGS, f"--rows_dir={rows}", log_dir=logs,
                      wrap=MARK_CREATOR)
  return {"workdir": workdir, "logs": logs, "rows": read_rows(rows, 2), "launch": launch,
          "config": _eval_settings(config)}


def _global_rows(per_process: list[dict[int, str]]) -> dict[int, str]:
  merged = {}
  for rows in per_process:
    assert not set(rows) & set(merged), "two processes hold the same row"
    merged.update(rows)
  return merged


def test_two_processes_train_like_one_process_with_eight_devices(two_process_run, eight_devices):
  # The same global batches (two input shards, read here by one process) and
  # the same steps on 1 process x 8 devices give the same parameters.
  config = two_process_run["config"]
  setup = RunSetup(config)
  training = state_lib.TrainSetup(setup, config.optim)
  inputs = pipeline.make_train_iterator(config.data, setup.batch_sharding, num_shards=2)
  state = training.new_state(config.train.seed)
  initial = jax.device_get(state["params"])
  train_step = training.jit_train_step(config.train.dropout_rng)
  for step in range(1, STEPS + 1):
    batch = next(inputs)
    assert dict(worker.local_rows(batch["global_feature"])) == _global_rows(
        two_process_run["rows"][step]), f"step {step}: other examples"
    state, _ = train_step(state, batch)
  saved = numpy_state(two_process_run["workdir"] / "checkpoints" / str(STEPS))
  assert int(saved["step"]) == STEPS
  params = jax.device_get(state["params"])
  largest = assert_params_close(saved["params"], params, ATOL)
  moved = max(float(np.max(np.abs(a - b))) for a, b in zip(
      jax.tree_util.tree_leaves(params), jax.tree_util.tree_leaves(initial)))
  assert moved > 1000 * ATOL, (moved, largest)
  # The whole model, key biases included, computes the same loss.
  losses = [float(setup.objective.loss_fn(setup.model, jax.device_put(p, setup.param_shardings),
                                          batch, jax.random.key(0), train=False)[0])
            for p in (saved["params"], params)]
  assert abs(losses[0] - losses[1]) < 1e-5, losses


def test_processes_read_disjoint_data_that_covers_the_source(two_process_run, world):
  rows = two_process_run["rows"]
  assert sorted(rows) == list(range(1, STEPS + 1))
  seen = [set(), set()]
  for step, per_process in rows.items():
    for i, process_rows in enumerate(per_process):
      # Process i holds its own devices' rows of the global batch.
      assert sorted(process_rows) == list(range(4 * i, 4 * i + 4)), step
      seen[i].update(process_rows.values())
  assert not seen[0] & seen[1]
  # Everything one process reads of the source in two passes.
  data = tiny_config(world).data
  everything = pipeline.make_train_iterator(data, None, process_index=0, process_count=1)
  expected = set()
  for _ in range(2 * 64 // data.global_batch_size):
    expected.update(worker.fingerprint(r) for r in everything.next_host_batch()["global_feature"])
  assert seen[0] | seen[1] == expected


def test_only_process_zero_writes_logs_reports_and_predictions(two_process_run):
  workdir, launch = two_process_run["workdir"], two_process_run["launch"]
  eval_dir = workdir / "eval" / SOURCE / f"step_{STEPS}"
  assert sorted(os.listdir(eval_dir)) == ["predictions.json", "report.json", "report.md"]
  assert len(json.loads((eval_dir / "predictions.json").read_text())) == 12
  events = [f for f in os.listdir(workdir) if f.startswith("events.out.tfevents")]
  assert len(events) == 1 and f".{launch.pid(0)}." in events[0], events  # name has writer's pid
  # Process 1 created only its parts of the checkpoints (and of the best
  # parameters) and its input position; the logs, reports, predictions and
  # selection history are process 0's.
  others = _created_by_other_processes(workdir)
  assert any("ocdbt.process_1" in p for p in others), others  # the marking works
  assert any("host_00001_of_00002" in p for p in others), others
  assert not [p for p in others if not p.startswith(("checkpoints", "input_state",
                                                     "best/checkpoints"))], others
  # Process 1 logs warnings only: no progress, config or evaluation lines.
  chief, other = launch.log(0), launch.log(1)
  assert re.search(r"step 12: loss", chief) and "Config:" in chief
  summary = f"{SOURCE} at step {STEPS}:"  # the evaluation's printed summary
  assert summary in chief and summary not in other, other
  assert not re.search(r"step \d+: loss|Config:|Resuming|Evaluated \d+ images", other), other
  assert not re.search(r"^I\d{4} [\d:.]+ +\d+ (main|trainer|selection|captioner_eval)\.py",
                       other, re.M), other


def test_evaluation_over_two_processes_matches_one_process(two_process_run, world,
                                                           eight_devices, tmp_path):
  config = _eval_settings(_run_config(world, eval_every_steps=STEPS))
  config.mode = "evaluate"
  config.eval.checkpoint_dir = str(two_process_run["workdir"])
  config.eval.checkpoint_step = STEPS
  cc12m_main.run(config, str(tmp_path))
  two = two_process_run["workdir"] / "eval" / SOURCE / f"step_{STEPS}"
  one = tmp_path / "eval" / SOURCE / f"step_{STEPS}"
  captions = [{p["image_id"]: p["caption"] for p in json.loads((d / "predictions.json").read_text())}
              for d in (one, two)]
  assert captions[0] == captions[1]
  assert any(captions[0].values()), "every caption empty: nothing compared"
  reports = [json.loads((d / "report.json").read_text()) for d in (one, two)]
  for key in ("scores", "num_images", "per_image", "image_domains"):
    assert reports[0][key] == reports[1][key], key


def test_two_process_checkpoint_resumes_in_one_process(two_process_run, eight_devices,
                                                       tmp_path):
  # Step 8 of the 2-process run, alone in a new workdir, resumed by one process.
  source = two_process_run["workdir"]
  for part in ("checkpoints", "input_state"):
    shutil.copytree(source / part / str(FIRST_CHECKPOINT), tmp_path / part / str(FIRST_CHECKPOINT))
  config = _run_config(two_process_run["config"].data.data_dir)
  rows = tmp_path / "rows.jsonl"
  cc12m_main.run(config, str(tmp_path), on_step=worker.row_recorder(str(rows)))
  one = _read_rows_file(rows)
  assert sorted(one) == list(range(FIRST_CHECKPOINT + 1, STEPS + 1))
  for step, got in one.items():  # the input position came along
    assert got == _global_rows(two_process_run["rows"][step]), step
  assert_params_close(numpy_state(tmp_path / "checkpoints" / str(STEPS))["params"],
                      numpy_state(source / "checkpoints" / str(STEPS))["params"], ATOL)


PREEMPTED = re.compile(r"Preempted: checkpoint for step (\d+) written; exiting\.")


def _read_rows_file(path) -> dict[int, dict[int, str]]:
  rows = {}
  for line in path.read_text().splitlines():
    entry = json.loads(line)
    rows[entry["step"]] = {int(r): fp for r, fp in entry["rows"]}
  return rows


@pytest.fixture(scope="module")
def preempted_resumed_run(world, eight_devices, tmp_path_factory):
  """A one-process run to step 12; its step 8 resumed by two processes, which
  train on (checkpoints every 4 steps) until both get SIGTERM after step 12."""
  base = tmp_path_factory.mktemp("resumed_run")
  config = _run_config(world)
  single = base / "one"
  cc12m_main.run(config, str(single), on_step=worker.row_recorder(str(base / "one_rows.jsonl")))
  resumed = base / "two"
  for part in ("checkpoints", "input_state"):
    shutil.copytree(single / part / str(FIRST_CHECKPOINT), resumed / part / str(FIRST_CHECKPOINT))
  endless = _run_config(world, num_train_steps=NEVER, checkpoint_every_steps=4,
                        keep_checkpoints=10)
  launch = Launch(2, resumed, endless, f"--rows_dir={base / 'two_rows'}", log_dir=base / "logs")
  try:
    launch.wait_for_log(rf"step {STEPS}: loss")
    for i in range(2):  # as a preemption notice does: every process gets SIGTERM
      os.kill(launch.pid(i), signal.SIGTERM)
    returncode = launch.wait(timeout=120)
  finally:
    launch.kill()
  return {"single": single, "one_rows": _read_rows_file(base / "one_rows.jsonl"),
          "resumed": resumed, "two_rows": read_rows(base / "two_rows", 2), "launch": launch,
          "returncode": returncode}


def test_one_process_checkpoint_resumes_in_two_processes(preempted_resumed_run):
  # The one-process run had one input shard: each process reads all of it and
  # keeps its half of every batch.
  run = preempted_resumed_run
  assert (f"Resuming from {run['resumed'] / 'checkpoints'} at step {FIRST_CHECKPOINT}"
          in run["launch"].log(0)), run["launch"].describe()
  for step in range(FIRST_CHECKPOINT + 1, STEPS + 1):
    assert _global_rows(run["two_rows"][step]) == run["one_rows"][step], step
  assert_params_close(numpy_state(run["resumed"] / "checkpoints" / str(STEPS))["params"],
                      numpy_state(run["single"] / "checkpoints" / str(STEPS))["params"], ATOL)


def test_sigterm_saves_once_and_every_process_exits_cleanly(preempted_resumed_run):
  run = preempted_resumed_run
  launch = run["launch"]
  assert run["returncode"] == 0, launch.describe()
  stops = [PREEMPTED.findall(launch.log(i)) for i in range(2)]
  assert len(stops[0]) == 1 and stops[0] == stops[1], launch.describe()
  stop = int(stops[0][0])
  assert stop >= STEPS and max(run["two_rows"]) == stop
  # One save at the step all processes agreed on, next to the periodic ones.
  periodic = set(range(FIRST_CHECKPOINT, stop + 1, 4))
  assert {int(s) for s in os.listdir(run["resumed"] / "checkpoints")} == periodic | {stop}
  assert sorted(os.listdir(run["resumed"] / "input_state" / str(stop))) == [
      "host_00000_of_00001"]  # the one shard, written once
  assert int(numpy_state(run["resumed"] / "checkpoints" / str(stop))["step"]) == stop
  for i in range(2):
    assert f"process {i} (pid {launch.pid(i)}) exited with status 0" in launch.launcher_log()


RUNTIME_NAMES_A_DEAD_PEER = "|".join([
    r"another task died", r"tasks are unhealthy", r"stopped sending heartbeats",
    r"heartbeat timeout", r"task has disconnected", r"task is already disconnected",
    r"Connection closed by peer", r"Connection reset by peer", r"Socket closed",
    r"gloo::\w*Exception", r"Read error \[", r"Write error \[",
    # A kill in the middle of a transfer can also end in one of Gloo's own
    # consistency checks on the broken connection instead of an I/O error.
    r"gloo::EnforceNotMet"])


def runtime_errors(log: str) -> str:
  """The error and fatal lines of a process log (its tail is a thread dump)."""
  return "\n".join(line for line in log.splitlines()
                   if re.match(r"[EF]\d{4}|terminate called|\s*what\(\)|Fatal", line))[-4000:]


def test_a_dead_process_stops_the_others_with_a_clear_message(world, tmp_path):
  heartbeat = 5
  config = tiny_config(world, num_train_steps=NEVER, checkpoint_every_steps=NEVER,
                       log_every_steps=1)
  # The launcher's own clean-up comes far later than JAX's: what stops process 0
  # must be the runtime.
  launch = Launch(2, tmp_path / "run", config, log_dir=tmp_path / "logs",
                  heartbeat_s=heartbeat, grace_s=300)
  try:
    launch.wait_for_log(r"step 2: loss")
    os.kill(launch.pid(1), signal.SIGKILL)
    killed = time.monotonic()
    returncode = launch.wait(timeout=heartbeat + 90)
    took = time.monotonic() - killed
  finally:
    launch.kill()
  assert returncode != 0
  summary = launch.launcher_log()
  assert f"process 1 (pid {launch.pid(1)}) killed by signal 9" in summary
  assert re.search(rf"process 0 \(pid {launch.pid(0)}\) (exited with status [1-9]|killed by)",
                   summary), summary
  assert "killing it" not in summary, summary
  assert took < heartbeat + 60, took
  # Which part of the runtime notices first depends on timing: the coordination
  # service (missed heartbeats, a disconnected task) or, when the kill lands
  # inside a collective, Gloo's connection to the dead peer. Each names where it
  # failed.
  log = launch.log(0)
  assert re.search(RUNTIME_NAMES_A_DEAD_PEER, log), runtime_errors(log)
