"""The training loop: `train_and_evaluate(config, workdir, setup, evaluators)`.

One code path for every topology: the mesh comes from config.mesh, the input
pipeline yields global arrays sharded over ('data', 'fsdp'), parameters are
sharded by logical axis rules, and the jitted step is the same everywhere.
Only process 0 writes metrics and logs progress; all processes take part in
(orbax) checkpointing. Evaluators are handed in (cc12m_jax/core/evaluator.py):
the trainer never imports cc12m_jax.evaluation.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import queue
import signal
import threading
import time
from typing import Any, Callable, Iterator, Mapping

import jax
import ml_collections
import numpy as np
from clu import metric_writers, parameter_overview, periodic_actions
from etils import epath
from jax.experimental import multihost_utils

from cc12m_jax.core import checkpointing, evaluator as evaluator_lib, selection, workdir_lock
from cc12m_jax.core.evaluator import Evaluator
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import pipeline
from cc12m_jax.train import state as state_lib


class NonFiniteLossError(RuntimeError):
  """Training produced a NaN or Inf loss at `step`; `last_saved` is the last good checkpoint."""

  def __init__(self, step: int, loss: float, last_saved: int | None, workdir: str):
    self.step, self.loss, self.last_saved = step, loss, last_saved
    kept = (f"the last good checkpoint (step {last_saved}) is kept in {workdir}"
            if last_saved is not None else "no checkpoint was written")
    super().__init__(f"Loss is {loss} at step {step}: stopping training; {kept}. "
                     "Lower config.optim.learning_rate or check the input data.")


@dataclasses.dataclass(frozen=True)
class StepEvent:
  """What an `on_step` callback of train_and_evaluate sees after each step."""
  step: int                    # steps taken so far
  batch: Mapping[str, Any]     # the step's global batch (device arrays)
  metrics: Mapping[str, Any]   # the step's metrics (device arrays)
  checkpointer: checkpointing.Checkpointer


class PeriodicEvaluation:
  """Runs every evaluator, reports each result, and keeps the best parameters.

  With `config.eval.selection_metric` set, a BestCheckpointTracker in
  <workdir>/best records every evaluation and saves the best parameters there.
  """

  def __init__(self, config: ml_collections.ConfigDict, evaluators: Mapping[str, Evaluator],
               workdir: str, writer):
    self.evaluators, self._workdir, self._writer = dict(evaluators), workdir, writer
    self.tracker = (selection.BestCheckpointTracker(
        os.path.join(workdir, "best"), config.eval.selection_metric, config.eval.selection_mode)
                    if config.eval.selection_metric else None)
    self.num_examples = config.eval.num_examples_to_show

  def __call__(self, step: int, params: Any) -> None:
    results = {}
    for source, evaluator in self.evaluators.items():
      results[source] = evaluator.run(params)
      evaluator_lib.report(results[source], step, self._workdir, self._writer, self.num_examples)
    if self.tracker is not None and self.tracker.update(step, selection.selection_scores(results)):
      self.tracker.save_params(step, params)


class _Preemption:
  """Turns SIGTERM into a flag checked between steps (one process).

  With several processes SIGTERM is left to JAX's preemption notifier: the
  processes see the signal at different steps (or only some see it), so the
  stop must be agreed on, and `reached_preemption(step)` is true on all of them
  at the same step. A Python handler would take the signal away from the
  notifier: one process would stop and save alone while the others wait for
  it in the next step's collectives, forever.
  """

  def __init__(self):
    self.requested = False
    self._previous = None

  def __enter__(self):
    if jax.process_count() > 1:
      return self
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread
      self._previous = None
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    logging.warning("SIGTERM received: saving a checkpoint and stopping after this step.")
    self.requested = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


# After SIGTERM, how long a batch the input pipeline is still producing is
# waited for (then the step runs and is saved as usual); past it the run
# stops without a new checkpoint. Preemption notices give ~30 s in all.
INPUT_GRACE_S = 10.0


class _InputFetcher:
  """Fetches each batch on a daemon thread, so the main thread, waiting in
  short slices, still runs the SIGTERM handler while the input pipeline is
  stuck (a Python signal handler only runs between bytecodes, never while
  the main thread is inside TensorFlow).

  A batch is fetched only when the loop asks for it, as before: the input
  position saved after a step is never ahead of the batches trained on.
  """

  def __init__(self, iterator: Iterator):
    self._iterator = iterator
    self._requests: queue.Queue = queue.Queue()
    self._results: queue.Queue = queue.Queue()
    # Daemon: a fetch stuck forever must not keep the process alive at exit.
    threading.Thread(target=self._run, name="input-fetcher", daemon=True).start()

  def _run(self) -> None:
    while self._requests.get():
      try:
        self._results.put((True, next(self._iterator)))
      except BaseException as e:  # pylint: disable=broad-except  (re-raised by next())
        self._results.put((False, e))

  def next(self, stop_requested: Callable[[], bool], grace_s: float = INPUT_GRACE_S,
           poll_s: float = 0.2) -> Any | None:
    """The next batch; None when stop_requested() turned true and the batch
    did not follow within `grace_s`. The pipeline's errors are raised here."""
    self._requests.put(True)
    deadline = None
    while True:
      try:
        ok, value = self._results.get(timeout=poll_s)
      except queue.Empty:
        if deadline is None and stop_requested():
          deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
          return None
        continue
      if ok:
        return value
      raise value

  def close(self) -> None:
    self._requests.put(False)  # ends the thread once it is free


def _fetch_and_check(pending: list[tuple[int, dict]], last_saved: int | None,
                     workdir: str) -> list[tuple[int, dict]]:
  """Host copies of pending metrics; raises on the first non-finite loss."""
  fetched = jax.device_get(pending)
  for step, metrics in fetched:
    loss = float(metrics["loss"])
    if not math.isfinite(loss):
      raise NonFiniteLossError(step, loss, last_saved, workdir)
  return fetched


def input_counts(train_iter: pipeline.TrainInput) -> dict[str, dict[str, int]]:
  """Records not trained on so far, summed over hosts: {'skipped': bad records
  (and damaged shard reads) by reason, 'filtered': good ones left out on
  purpose (excluded ids, sub-sampling)}. A collective with several processes."""
  groups = {"skipped": train_iter.skip_counts(), "filtered": train_iter.filter_counts()}
  names = [(g, k) for g, counts in groups.items() for k in counts]
  values = np.array([groups[g][k] for g, k in names], np.int64)
  if jax.process_count() > 1:
    values = np.asarray(multihost_utils.process_allgather(values)).sum(axis=0)
  out: dict[str, dict[str, int]] = {g: {} for g in groups}
  for (g, k), v in zip(names, values):
    out[g][k] = int(v)
  return out


def _log_train_metrics(writer, fetched, step, *, elapsed, steps_done, per_device_batch,
                       remaining_steps, not_trained_on):
  scalars = {f"train/{k}": float(np.mean([m[k] for _, m in fetched])) for k in fetched[-1][1]}
  steps_per_sec = steps_done / max(elapsed, 1e-9)
  scalars["train/steps_per_sec"] = steps_per_sec
  scalars["train/examples_per_sec_per_device"] = steps_per_sec * per_device_batch
  for group, counts in not_trained_on.items():  # train/skipped/<reason>, train/filtered/<reason>
    scalars.update({f"train/{group}/{k}": float(v) for k, v in counts.items()})
  writer.write_scalars(step, scalars)
  eta = remaining_steps / max(steps_per_sec, 1e-9)
  skipped = not_trained_on["skipped"]
  reasons = ", ".join(f"{k} {v}" for k, v in skipped.items() if v)
  # Every objective names its own accuracies (ic: token_accuracy, moc: accuracy,
  # vlm: i2t/t2i_accuracy; a weighted sum prefixes each with its objective).
  accuracies = " ".join(f"{name[len('train/'):]} {value:.3f}"
                        for name, value in sorted(scalars.items())
                        if name.startswith("train/") and name.endswith("accuracy"))
  logging.info("step %d: loss %.4f %s | %.2f steps/s, %.1f examples/s/device, ETA %s"
               " | skipped %d%s",
               step, scalars.get("train/loss", float("nan")), accuracies, steps_per_sec,
               scalars["train/examples_per_sec_per_device"],
               time.strftime("%H:%M:%S", time.gmtime(eta)), sum(skipped.values()),
               f" ({reasons})" if reasons else "")


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       setup: RunSetup | None = None,
                       evaluators: Mapping[str, Evaluator] | None = None, *,
                       on_step: Callable[[StepEvent], None] | None = None) -> dict:
  """Trains until config.train.num_train_steps; resumes from `workdir` if it has checkpoints.

  `config` must have passed cc12m_jax.config_rules.validate. `setup` defaults
  to RunSetup(config); `evaluators` ({source: Evaluator}, built by
  cc12m_jax.evaluation.registry) run every config.train.eval_every_steps.
  `on_step` is called after every step (tests drive faults through it).
  Returns the final state (dict of global arrays).

  The workdir is locked for the whole run (core/workdir_lock.py): a second
  trainer on it fails at once with WorkdirLockedError naming this one. Only
  process 0 takes the lock; the other processes of the run share the workdir.
  """
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  if jax.process_index() != 0:
    return _train_and_evaluate(config, workdir, setup, evaluators, on_step=on_step)
  with workdir_lock.WorkdirLock(workdir):
    return _train_and_evaluate(config, workdir, setup, evaluators, on_step=on_step)


def _train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                        setup: RunSetup | None,
                        evaluators: Mapping[str, Evaluator] | None, *,
                        on_step: Callable[[StepEvent], None] | None) -> dict:
  """train_and_evaluate, the workdir locked."""
  is_chief = jax.process_index() == 0
  setup = setup if setup is not None else RunSetup(config)
  training = state_lib.TrainSetup(setup, config.optim)
  tcfg = config.train
  writer = metric_writers.create_default_writer(workdir, just_logging=not is_chief)
  if is_chief:
    writer.write_hparams({k: v for k, v in _flatten(config.to_dict()).items()})
  ckpt = checkpointing.Checkpointer(workdir, keep=tcfg.keep_checkpoints,
                                    use_async=tcfg.async_checkpointing)
  train_iter = pipeline.make_train_iterator(config.data, setup.batch_sharding)

  # The newest step that restores (damaged newer ones are reported and set
  # aside); CheckpointError when checkpoints exist but none restores.
  resumed = ckpt.restore_latest(training.abstract_state, training.state_shardings, train_iter)
  latest = resumed[0] if resumed is not None else None
  if resumed is not None:
    logging.info("Resuming from %s at step %d.", ckpt.directory, latest)
    state = resumed[1]
  else:
    params = None
    if tcfg.init_from:
      # init_partial: what the checkpoint lacks keeps the seed's initial value.
      fresh = training.new_state(tcfg.seed)["params"] if tcfg.init_partial else None
      params, _ = checkpointing.load_pretrained_params(
          tcfg.init_from, tcfg.init_step, setup.abstract_params, setup.param_shardings,
          fresh_params=fresh)
    state = training.new_state(tcfg.seed, params)
  if is_chief:
    parameter_overview.log_parameter_overview(
        state["params"], msg=f"{type(setup.model).__name__} parameters ({tcfg.objective} objective)")
    logging.info("Mesh %s; %d parameters; vocabulary %d; feature dim %d.",
                 dict(setup.mesh.shape), state_lib.num_params(state["params"]),
                 setup.vocab_size, setup.feature_dim)

  train_step = training.jit_train_step(tcfg.dropout_rng)
  start_step = int(jax.device_get(state["step"]))
  total = int(tcfg.num_train_steps)
  per_device_batch = config.data.global_batch_size / setup.mesh.size
  report = periodic_actions.ReportProgress(num_train_steps=total, writer=writer,
                                           every_steps=tcfg.log_every_steps)
  evaluation = (PeriodicEvaluation(config, evaluators, workdir, writer)
                if tcfg.eval_every_steps > 0 and evaluators else None)
  last_saved = latest
  pending: list[tuple[int, dict]] = []
  log_time, log_step = time.time(), start_step
  fetcher = _InputFetcher(iter(train_iter))

  try:
    with _Preemption() as preemption:
      step = start_step
      while step < total:
        batch = fetcher.next(lambda: preemption.requested)
        if batch is None:
          _log_preempted_waiting(step, last_saved)
          break
        state, metrics = train_step(state, batch)
        step += 1
        pending.append((step, metrics))
        report(step)
        preempted = preemption.requested or (
            jax.process_count() > 1 and ckpt.manager.reached_preemption(step))
        must_save = step % tcfg.checkpoint_every_steps == 0 or step == total or preempted
        if step % tcfg.log_every_steps == 0 or must_save:
          fetched = _fetch_and_check(pending, last_saved, workdir)
          pending = []
          if step % tcfg.log_every_steps == 0 and fetched:
            now = time.time()
            _log_train_metrics(writer, fetched, step, elapsed=now - log_time,
                               steps_done=step - log_step, per_device_batch=per_device_batch,
                               remaining_steps=total - step,
                               not_trained_on=input_counts(train_iter))
            log_time, log_step = now, step
        if must_save:
          ckpt.save(step, state, train_iter)
          last_saved = step
        if evaluation is not None and (step % tcfg.eval_every_steps == 0 or step == total):
          evaluation(step, state["params"])
        if on_step is not None:
          on_step(StepEvent(step, batch, metrics, ckpt))
        if preempted:
          logging.warning("Preempted: checkpoint for step %d written; exiting.", step)
          break
  finally:
    fetcher.close()
    ckpt.close()
    writer.flush()
  skipped = train_iter.skip_counts()
  if any(skipped.values()) and is_chief:
    logging.warning("Input records skipped on this host, by reason: %s", skipped)
  return state


def _log_preempted_waiting(step: int, last_saved: int | None) -> None:
  if last_saved == step:
    saved = f"the checkpoint for step {step} was already written"
  else:
    # The unfinished fetch has moved the input position: it cannot be saved.
    saved = (f"no checkpoint for step {step}; the run resumes from "
             + (f"step {last_saved}" if last_saved is not None else "step 0 (none was written)"))
  logging.warning("Preempted while waiting for input (no batch %.0f s after SIGTERM): %s; "
                  "exiting.", INPUT_GRACE_S, saved)


def _flatten(d: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in d.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(_flatten(v, key + "."))
    else:
      out[key] = v
  return out
