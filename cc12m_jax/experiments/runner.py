"""Runs a suite's stages as `python -m cc12m_jax.main` subprocesses, resumably.

A stage is finished when its directory holds `stage.json`, written
atomically after its command exited 0 (and, for a training stage, after its
last checkpoint is the config's num_train_steps: a preempted trainer also
exits 0). A finished stage is skipped. A stage without the marker is run
again with the same command: a training stage resumes from its latest
checkpoint (the trainer does that by itself), an evaluate stage starts
afresh (its eval/ and selection/ are cleared first).

Finished work is never silently re-used for something else: a finished
stage whose recorded command differs from the one the suite now gives, or
that was made from another run of a stage it depends on (each marker has a
run id, and records those of its inputs), or whose data has changed since it
ran (each marker records a fingerprint of every source directory and file
the stage read, `data_fingerprint`), is an error naming what to delete.

Each stage's output goes to `<stage dir>/stage.log` (appended, one header
per attempt; with a remote workdir such as gs://..., to the same path under
a local log directory). SIGTERM to the runner is passed on to every running
stage (the trainer then writes a checkpoint and exits); those stages stay
unfinished. `--parallel=N` runs up to N stages at once (`execute`).

A launcher prefixes every stage's command: its words come first, or, when
one of its words holds `{command}`, the shell-quoted command is put there
(e.g. `gcloud compute tpus tpu-vm ssh NAME --worker=all --command="cd REPO
&& {command}"` runs each stage on every host of a TPU slice and waits).
"""
from __future__ import annotations

import dataclasses
import datetime
import fnmatch
import functools
import hashlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Sequence

import ml_collections
from etils import epath

from cc12m_jax.data import metadata
from cc12m_jax.experiments import commands, scores, validation
from cc12m_jax.experiments.suite import Stage, Suite, SuiteError

MARKER, LOG = "stage.json", "stage.log"
# A training stage's unfinished attempts (seconds each), summed into its marker.
ATTEMPTS = "attempts.json"
LOCAL_LOGS = os.path.join(tempfile.gettempdir(), "cc12m_experiments_logs")


class StageFailed(RuntimeError):
  """A stage's command failed or stopped before finishing."""


@dataclasses.dataclass(frozen=True)
class StageRun:
  stage: Stage
  seed: int
  directory: str
  args: tuple[str, ...]   # after the interpreter: -m cc12m_jax.main --config=... ...
  final_step: int          # training stages: the step the last checkpoint must reach
  inputs: tuple[tuple[str, str], ...] = ()  # (stage key, directory) of its dependencies
  data: tuple[tuple[str, str], ...] = ()    # (source or file, path) it reads from the data

  @property
  def name(self) -> str:
    return f"{self.stage.key} (seed {self.seed})"


def plan(suite: Suite, workdir: str, seeds: Sequence[int],
         configs: dict[str, ml_collections.ConfigDict]) -> list[StageRun]:
  """Every stage for every seed, seed by seed, each after its dependencies.

  `configs` are the validated stage configs (validation.check), for the
  number of training steps.
  """
  runs = []
  for seed in seeds:
    for stage in suite.stages:
      final = int(configs[stage.key].train.num_train_steps) if stage.is_training else -1
      inputs = tuple((dep, commands.stage_dir(workdir, dep, seed)) for dep in stage.dependencies)
      data = tuple(validation.data_inputs(configs[stage.key]).items())
      runs.append(StageRun(stage, seed, commands.stage_dir(workdir, stage.key, seed),
                           commands.main_args(suite, stage, workdir, seed), final, inputs, data))
  return runs


def select(runs: Sequence[StageRun], patterns: Sequence[str]) -> list[StageRun]:
  """The runs whose stage key (`<condition>/<stage>`) matches one of the
  shell-style patterns (e.g. `*/ic_*`: the captioning half of a suite), and
  every stage those depend on, in plan order: a selected stage always has
  its inputs. No patterns: every run. SuiteError for a pattern that matches
  no stage, naming the suite's stages."""
  if not patterns:
    return list(runs)
  keys = sorted({run.stage.key for run in runs})
  for pattern in patterns:
    if not fnmatch.filter(keys, pattern):
      raise SuiteError(f"--stages: {pattern!r} matches no stage of the suite (stages: {keys})")
  by_key = {run.stage.key: run.stage for run in runs}
  wanted = {key for key in keys if any(fnmatch.fnmatchcase(key, p) for p in patterns)}
  todo = list(wanted)
  while todo:  # and what they are made from, transitively
    for dep in by_key[todo.pop()].dependencies:
      if dep not in wanted:
        wanted.add(dep)
        todo.append(dep)
  return [run for run in runs if run.stage.key in wanted]


def _load_marker(directory: str) -> dict[str, Any] | None:
  path = epath.Path(directory) / MARKER
  return json.loads(path.read_text()) if path.exists() else None


def input_ids(run: StageRun) -> dict[str, str]:
  """{dependency: its run id}; StageFailed when a dependency is unfinished."""
  ids = {}
  for key, directory in run.inputs:
    marker = _load_marker(directory)
    if marker is None:
      raise StageFailed(f"stage {run.name} needs {key} (seed {run.seed}), which has not "
                        f"finished ({directory})")
    ids[key] = marker["run_id"]
  return ids


def read_marker(run: StageRun) -> dict[str, Any] | None:
  """The stage's marker, None when unfinished; SuiteError when its command
  changed or a finished dependency is not the run it was made from."""
  path = epath.Path(run.directory) / MARKER
  marker = _load_marker(run.directory)
  if marker is None:
    return None
  if list(marker["args"]) != list(run.args):
    was, now = set(marker["args"]), set(run.args)
    diff = [f"- {a}" for a in marker["args"] if a not in now] + [
        f"+ {a}" for a in run.args if a not in was]
    raise SuiteError(f"stage {run.name} finished with another command than the suite now gives:\n"
                     + "\n".join(diff) + f"\nTo re-run it, delete {path} (and its outputs); "
                     "or use another --workdir")
  for key, directory in run.inputs:
    current = _load_marker(directory)
    if current is not None and current["run_id"] != marker["inputs"].get(key):
      raise SuiteError(f"stage {run.name} was made from an earlier run of {key}, which has "
                       f"run again since; delete {run.directory} to re-run it from the new one")
  return marker


def data_fingerprint(path: str) -> str:
  """A digest that changes when the data at `path` changes. A source
  directory: its metadata.json and the name and size of each record shard
  (one listing and one small read, so cheap at paper size too; files beside
  the records, such as the moc centroids, are not part of the source). A
  file: its bytes. 'missing' when nothing is there."""
  p = epath.Path(path)
  if not p.exists():
    return "missing"
  digest = hashlib.sha256()
  if p.is_dir():
    meta = p / metadata.METADATA_FILE
    digest.update(meta.read_bytes() if meta.exists() else b"no metadata")
    for shard in sorted(c.name for c in p.iterdir() if c.name.startswith(metadata.SHARD_PREFIX)):
      digest.update(f"\n{shard} {(p / shard).stat().length}".encode())
  else:
    digest.update(p.read_bytes())
  return digest.hexdigest()[:16]


def check_data_unchanged(run: StageRun, marker: dict[str, Any],
                         fingerprint: Callable[[str], str] = data_fingerprint) -> None:
  """SuiteError when data the finished stage read has changed since
  (markers written before fingerprints were recorded are not checked)."""
  recorded = marker.get("data", {})
  changed = [f"{name} ({path})" for name, path in run.data
             if name in recorded and fingerprint(path) != recorded[name]]
  if changed:
    raise SuiteError(f"stage {run.name} finished on other data than is there now: "
                     f"{', '.join(changed)} changed since; delete {run.directory} to re-run "
                     "it on the new data, or point --suite.data_dir at the data it used")


def latest_step(directory: str) -> int | None:
  """The latest complete checkpoint step of a training workdir."""
  root = epath.Path(directory) / "checkpoints"
  steps = [int(p.name) for p in (root.iterdir() if root.exists() else [])
           if re.fullmatch(r"\d+", p.name)]
  return max(steps) if steps else None


def command_line(run: StageRun, launcher: Sequence[str] = (),
                 python: str = sys.executable) -> list[str]:
  """The stage's command, behind the launcher (see the module docstring)."""
  argv = [python, *run.args]
  if any("{command}" in word for word in launcher):
    return [word.replace("{command}", shlex.join(argv)) for word in launcher]
  return [*launcher, *argv]


def log_path(run: StageRun) -> str:
  """Where the stage's output goes: its directory, or a local mirror of it."""
  if "://" not in run.directory:
    return os.path.join(run.directory, LOG)
  return os.path.join(LOCAL_LOGS, run.directory.split("://", 1)[1].lstrip("/"), LOG)


def _attempts(run: StageRun) -> list[float]:
  """Seconds of a training stage's earlier, unfinished attempts (ATTEMPTS file)."""
  path = epath.Path(run.directory) / ATTEMPTS
  return [float(s) for s in json.loads(path.read_text())] if path.exists() else []


def _record_attempt(run: StageRun, seconds: float) -> None:
  """Adds an unfinished training attempt's seconds; an evaluation starts afresh,
  so its lost attempts are no part of what it costs."""
  if run.stage.is_training:
    (epath.Path(run.directory) / ATTEMPTS).write_text(json.dumps(_attempts(run) + [seconds]))


def _write_marker(run: StageRun, marker: dict[str, Any]) -> None:
  path = epath.Path(run.directory) / MARKER
  tmp = epath.Path(run.directory) / (MARKER + ".tmp")
  tmp.write_text(json.dumps(marker, indent=1) + "\n")
  tmp.replace(path)  # readers see no marker or a whole one


def _tail(path: str, lines: int = 30) -> str:
  with open(path, errors="replace") as f:
    return "".join(f.readlines()[-lines:])


def _clear_outputs(run: StageRun) -> None:
  """An evaluate stage starts afresh: an interrupted try may have left part of
  its results, and `scores.find` wants one step per source."""
  for name in ("eval", "selection"):
    path = epath.Path(run.directory) / name
    if path.exists():
      path.rmtree()


def _outputs(run: StageRun) -> dict[str, Any]:
  out = {}
  for source in run.stage.sources:
    output = scores.read(run.directory, source)
    out[source] = {"step": output.step, "path": output.path, "metrics": output.metrics}
  return out


@dataclasses.dataclass
class _Started:
  """A stage whose command is running."""
  run: StageRun
  process: subprocess.Popen
  log_file: str
  inputs: dict[str, str]
  data: dict[str, str]
  argv: list[str]
  started: float


def _start(run: StageRun, launcher: Sequence[str], python: str) -> _Started:
  inputs = input_ids(run)
  # Fingerprinted before the command runs: what it read, not what is there after.
  data = {name: data_fingerprint(path) for name, path in run.data}
  epath.Path(run.directory).mkdir(parents=True, exist_ok=True)
  if not run.stage.is_training:
    _clear_outputs(run)
  argv = command_line(run, launcher, python)
  log_file = log_path(run)
  os.makedirs(os.path.dirname(log_file), exist_ok=True)
  with open(log_file, "a") as log:
    log.write(f"=== {datetime.datetime.now().isoformat(timespec='seconds')} "
              f"{shlex.join(argv)}\n")
    log.flush()
    # The child holds its own descriptor; ours closes here.
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
  return _Started(run, process, log_file, inputs, data, argv, time.time())


def _finish(started: _Started, terminated: bool) -> dict[str, Any]:
  """The finished stage's marker, written; StageFailed when it did not finish."""
  run, returncode = started.run, started.process.returncode
  seconds = round(time.time() - started.started, 1)
  if returncode != 0 or terminated:
    _record_attempt(run, seconds)
    why = "was terminated" if terminated else f"exited with {returncode}"
    raise StageFailed(f"stage {run.name} {why}; log {started.log_file}, last lines:\n"
                      + _tail(started.log_file))
  marker: dict[str, Any] = {
      "stage": run.stage.key, "seed": run.seed, "run_id": uuid.uuid4().hex,
      "inputs": started.inputs, "data": started.data, "args": list(run.args),
      "command": started.argv, "log": started.log_file,
      "finished": datetime.datetime.now().isoformat(timespec="seconds"),
      "seconds": seconds}
  if run.stage.is_training:
    step = latest_step(run.directory)
    if step != run.final_step:
      _record_attempt(run, seconds)
      raise StageFailed(f"stage {run.name} exited at step {step} of {run.final_step} "
                        "(preempted?); run the suite again to resume it")
    marker["step"] = step
    # A resumed training's time is that of all its attempts (what it costs
    # uninterrupted, give or take the steps redone since the last checkpoint);
    # the last attempt alone is when it ran.
    attempts = _attempts(run) + [seconds]
    marker["attempt_seconds"] = attempts
    marker["seconds"] = round(sum(attempts), 1)
  else:
    marker["outputs"] = _outputs(run)
  _write_marker(run, marker)
  return marker


class _ForwardSigterm:
  """While active, SIGTERM to the runner goes to every running stage (the
  trainer then checkpoints and exits) instead of killing the runner."""

  def __init__(self):
    self.running: list[subprocess.Popen] = []
    self.received = False

  def _forward(self, signum, frame):  # pylint: disable=unused-argument
    self.received = True
    for process in self.running:
      if process.poll() is None:
        process.send_signal(signum)

  def __enter__(self):
    self._previous = signal.signal(signal.SIGTERM, self._forward)
    return self

  def __exit__(self, *exc):
    signal.signal(signal.SIGTERM, self._previous)


def execute(runs: Sequence[StageRun], *, launcher: Sequence[str] = (),
            python: str = sys.executable, dry_run: bool = False, parallel: int = 1,
            echo: Callable[[str], None] = print) -> None:
  """Runs every unfinished stage (or, with dry_run, prints its command).

  With parallel=1, one at a time in plan order. With parallel=N, up to N
  stages at once, each as soon as the stages it depends on have finished:
  independent chains (conditions, seeds) run side by side, which uses a
  many-core CPU host better than one stage at a time; on an accelerator each
  stage wants the whole device, so keep 1 there. When a stage fails no new
  stage starts, the running ones finish (their work is kept), and then the
  first failure is raised.
  """
  if parallel < 1:
    raise ValueError(f"parallel must be >= 1, got {parallel}")
  if dry_run:
    echo(f"# {len(runs)} stages; run from {os.getcwd()}, each after the stages it names")
  # Stages and seeds share their sources: each is fingerprinted once per call.
  fingerprint = functools.lru_cache(maxsize=None)(data_fingerprint)
  pending = []
  for run in runs:
    marker = read_marker(run)
    finished = marker is not None
    if finished:
      check_data_unchanged(run, marker, fingerprint)
    if dry_run:
      after = ", ".join(run.stage.dependencies) or "nothing"
      echo(f"# {run.name}{' [finished]' if finished else ''}; after: {after}")
      echo(shlex.join(command_line(run, launcher, python)))
    elif finished:
      echo(f"[skip] {run.name}: finished ({run.directory}/{MARKER})")
    else:
      pending.append(run)
  if not dry_run:
    _run_pending(pending, launcher, python, parallel, echo)


def _run_pending(pending: list[StageRun], launcher: Sequence[str], python: str,
                 parallel: int, echo: Callable[[str], None]) -> None:
  unfinished = {run.directory for run in pending}
  running: list[_Started] = []
  failures: list[StageFailed] = []
  with _ForwardSigterm() as sigterm:
    while pending or running:
      # Start every stage whose inputs are done, in plan order, while slots are free.
      for run in list(pending):
        if failures or sigterm.received or len(running) >= parallel:
          break
        if any(directory in unfinished for _, directory in run.inputs):
          continue
        pending.remove(run)
        resuming = run.stage.is_training and latest_step(run.directory) is not None
        echo(f"[run]  {run.name}{' (resuming)' if resuming else ''}: log {log_path(run)}")
        started = _start(run, launcher, python)
        running.append(started)
        sigterm.running.append(started.process)
      if not running:
        break  # after a failure or SIGTERM: what is left waits for the next call
      for started in _wait_any(running):
        running.remove(started)
        sigterm.running.remove(started.process)
        try:
          marker = _finish(started, sigterm.received)
        except StageFailed as e:
          failures.append(e)
          continue
        unfinished.discard(started.run.directory)
        echo(f"[done] {started.run.name} in {marker['seconds']} s")
  if failures:
    if len(failures) > 1:
      echo(f"{len(failures)} stages failed; the first is raised, the others: "
           + "; ".join(str(f).split(";", 1)[0] for f in failures[1:]))
    raise failures[0]


def _wait_any(running: list[_Started]) -> list[_Started]:
  """The stages among `running` that have exited (at least one)."""
  if len(running) == 1:
    running[0].process.wait()
    return running
  while True:
    done = [s for s in running if s.process.poll() is not None]
    if done:
      return done
    time.sleep(0.2)
