"""The training loop: `train_and_evaluate(config, workdir)`.

One code path for every topology: the mesh comes from config.mesh, the input
pipeline yields global arrays sharded over ('data', 'fsdp'), parameters are
sharded by logical axis rules, and the jitted step is the same everywhere.
Only process 0 writes metrics and logs progress; all processes take part in
(orbax) checkpointing.
"""
from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from clu import metric_writers, parameter_overview, periodic_actions
from etils import epath

from cc12m_jax import sharding
from cc12m_jax.models import captioner
from cc12m_jax.objectives import registry
from cc12m_jax.train import checkpointing, optim, state as state_lib, step as step_lib, validation


class NonFiniteLossError(RuntimeError):
  """Training produced a NaN or Inf loss."""


def resolve_data_dims(config: ml_collections.ConfigDict) -> tuple[int, int]:
  """(vocab_size, feature_dim) from config, or from the vocabulary / metadata when 0."""
  vocab_size, feature_dim = int(config.model.vocab_size), int(config.model.feature_dim)
  # pylint: disable=g-import-not-at-top
  from cc12m_jax.data import pipeline
  from cc12m_jax.data.text.tokenizer import SubwordTokenizer
  if vocab_size == 0:
    vocab_size = SubwordTokenizer(pipeline.vocab_path(config.data)).vocab_size
  if feature_dim == 0:
    sources = [s.name for s in pipeline.train_sources(config.data)]
    feature_dim = int(pipeline.feature_dim(config.data, sources))
  return vocab_size, feature_dim


class Setup:
  """Model, optimizer, mesh and shardings shared by training and evaluation."""

  def __init__(self, config: ml_collections.ConfigDict, devices=None):
    self.config = config
    self.mesh = sharding.make_mesh(config.mesh, devices)
    shards = sharding.batch_size_per_shard(self.mesh)
    if config.data.global_batch_size % shards:
      raise validation.ConfigError(
          f"config.data.global_batch_size={config.data.global_batch_size} is not divisible by "
          f"the mesh's batch shards (data x fsdp = {shards}).")
    self.vocab_size, self.feature_dim = resolve_data_dims(config)
    self.objective = registry.get(config.train.objective)
    self.model = self.objective.build_model(config, self.vocab_size)
    self.tx, self.schedule = optim.make_optimizer(config.optim)
    self.dummy_batch = captioner.dummy_batch(
        config.model, 1, self.feature_dim, config.data.max_caption_length,
        config.data.max_tag_tokens)
    self.abstract_params, self.param_shardings = state_lib.abstract_params_and_shardings(
        self.model, self.dummy_batch, self.mesh)
    self.state_shardings = state_lib.state_shardings(
        self.tx, self.abstract_params, self.param_shardings, self.mesh)
    self.abstract_state = state_lib.abstract_state(self.tx, self.abstract_params)
    self.batch_sharding = sharding.batch_sharding(self.mesh)

  def new_state(self, params: Any | None = None) -> dict:
    return state_lib.create_state(self.model, self.tx, self.dummy_batch,
                                  self.config.train.seed, self.state_shardings, params)

  def jit_train_step(self):
    fn = step_lib.make_train_step(self.model, self.objective.loss_fn, self.tx, self.schedule,
                                  self.config.train.dropout_rng)
    jitted = jax.jit(fn, in_shardings=(self.state_shardings, self.batch_sharding),
                     out_shardings=(self.state_shardings, sharding.replicated(self.mesh)),
                     donate_argnums=(0,))

    def call(state, batch):
      with sharding.activation_rules(self.mesh):
        return jitted(state, batch)

    call.lower = lambda state, batch: _lower_with_rules(jitted, self.mesh, state, batch)
    return call


def _lower_with_rules(jitted, mesh, *args):
  with sharding.activation_rules(mesh):
    return jitted.lower(*args)


class PeriodicEvaluation:
  """Decodes and scores the eval sets (cc12m_jax.evaluation) and keeps the best params.

  Scores are logged as eval/<source>/<group>/<metric>. The selection metric
  (config.eval.selection_metric, e.g. 'out-domain/CIDEr') is read from the
  *last* source of config.data.eval_sources unless it names a source itself
  ('coco_val/overall/CIDEr'); the best parameters go to <workdir>/best.
  """

  def __init__(self, config: ml_collections.ConfigDict, setup: Setup, workdir: str, writer):
    # pylint: disable=g-import-not-at-top
    from cc12m_jax.evaluation import runner, selection
    self._runner, self._workdir, self._writer = runner, workdir, writer
    self.evaluators = runner.make_evaluators(config, setup)
    self.tracker = selection.BestCheckpointTracker(
        os.path.join(workdir, "best"), config.eval.selection_metric, config.eval.selection_mode)
    self.num_examples = config.eval.num_examples_to_show

  def __call__(self, step: int, params: Any) -> None:
    from cc12m_jax.evaluation import nocaps  # pylint: disable=g-import-not-at-top
    scores: dict[str, float] = {}
    for source, evaluator in self.evaluators.items():
      result = evaluator(params)
      self._runner.write_and_log(result, source, step, self._workdir, self._writer,
                                 self.num_examples)
      flat = nocaps.flatten_scores(result.report)
      scores.update(flat)  # the last source's unprefixed names win
      scores.update({f"{source}/{k}": v for k, v in flat.items()})
    if self.tracker.update(step, scores):
      self.tracker.save_params(step, params)


class _Preemption:
  """Turns SIGTERM into a flag checked between steps."""

  def __init__(self):
    self.requested = False
    self._previous = None

  def __enter__(self):
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


def _fetch_and_check(pending: list[tuple[int, dict]], last_saved: int | None,
                     workdir: str) -> list[tuple[int, dict]]:
  """Host copies of pending metrics; raises on the first non-finite loss."""
  fetched = jax.device_get(pending)
  for step, metrics in fetched:
    loss = float(metrics["loss"])
    if not math.isfinite(loss):
      kept = (f"the last good checkpoint (step {last_saved}) is kept in {workdir}"
              if last_saved is not None else "no checkpoint was written")
      raise NonFiniteLossError(
          f"Loss is {loss} at step {step}: stopping training; {kept}. "
          "Lower config.optim.learning_rate or check the input data.")
  return fetched


def _log_train_metrics(writer, fetched, step, *, elapsed, steps_done, per_device_batch,
                       remaining_steps):
  names = [k for k in fetched[-1][1] if k != "batch_digest"]
  scalars = {f"train/{k}": float(np.mean([m[k] for _, m in fetched])) for k in names}
  steps_per_sec = steps_done / max(elapsed, 1e-9)
  scalars["train/steps_per_sec"] = steps_per_sec
  scalars["train/examples_per_sec_per_device"] = steps_per_sec * per_device_batch
  writer.write_scalars(step, scalars)
  eta = remaining_steps / max(steps_per_sec, 1e-9)
  logging.info("step %d: loss %.4f acc %.3f | %.2f steps/s, %.1f examples/s/device, ETA %s",
               step, scalars.get("train/loss", float("nan")),
               scalars.get("train/token_accuracy", float("nan")), steps_per_sec,
               scalars["train/examples_per_sec_per_device"],
               time.strftime("%H:%M:%S", time.gmtime(eta)))


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str,
                       devices=None) -> dict:
  """Trains until config.train.num_train_steps; resumes from `workdir` if it has checkpoints.

  Returns the final state (dict of global arrays).
  """
  validation.validate(config)
  from cc12m_jax.data.pipeline import make_train_iterator  # pylint: disable=g-import-not-at-top

  is_chief = jax.process_index() == 0
  epath.Path(workdir).mkdir(parents=True, exist_ok=True)
  setup = Setup(config, devices)
  tcfg = config.train
  writer = metric_writers.create_default_writer(workdir, just_logging=not is_chief)
  if is_chief:
    writer.write_hparams({k: v for k, v in _flatten(config.to_dict()).items()})
  ckpt = checkpointing.Checkpointer(workdir, keep=tcfg.keep_checkpoints,
                                    use_async=tcfg.async_checkpointing)
  train_iter = make_train_iterator(config.data, setup.batch_sharding)

  latest = ckpt.latest_step()
  if latest is not None:
    logging.info("Resuming from %s at step %d.", ckpt.directory, latest)
    state = ckpt.restore(latest, setup.abstract_state, setup.state_shardings, train_iter)
  else:
    params = None
    if tcfg.init_from:
      params, _ = checkpointing.load_pretrained_params(
          tcfg.init_from, tcfg.init_step, setup.abstract_params, setup.param_shardings)
    state = setup.new_state(params)
  if is_chief:
    parameter_overview.log_parameter_overview(
        state["params"], msg=f"{type(setup.model).__name__} parameters ({tcfg.objective} objective)")
    logging.info("Mesh %s; %d parameters; vocabulary %d; feature dim %d.",
                 dict(setup.mesh.shape), state_lib.num_params(state["params"]),
                 setup.vocab_size, setup.feature_dim)

  train_step = setup.jit_train_step()
  start_step = int(jax.device_get(state["step"]))
  total = int(tcfg.num_train_steps)
  per_device_batch = config.data.global_batch_size / setup.mesh.size
  report = periodic_actions.ReportProgress(num_train_steps=total, writer=writer,
                                           every_steps=tcfg.log_every_steps)
  digest_path = epath.Path(workdir) / "batch_digests.jsonl"
  evaluation = (PeriodicEvaluation(config, setup, workdir, writer)
                if tcfg.eval_every_steps > 0 else None)
  last_saved = latest
  pending: list[tuple[int, dict]] = []
  log_time, log_step = time.time(), start_step
  it: Iterator = iter(train_iter)

  def flush(step: int) -> list:
    nonlocal pending
    fetched = _fetch_and_check(pending, last_saved, workdir)
    pending = []
    if tcfg.record_batch_digests and is_chief and fetched:
      with digest_path.open("a") as f:
        for s, m in fetched:
          f.write(json.dumps({"step": s, "digest": int(m["batch_digest"])}) + "\n")
    return fetched

  try:
    with _Preemption() as preemption:
      step = start_step
      while step < total:
        batch = next(it)
        state, metrics = train_step(state, batch)
        step += 1
        pending.append((step, metrics))
        report(step)
        preempted = preemption.requested or (
            jax.process_count() > 1 and ckpt.manager.reached_preemption(step))
        must_save = step % tcfg.checkpoint_every_steps == 0 or step == total or preempted
        if step % tcfg.log_every_steps == 0 or must_save or tcfg.record_batch_digests:
          fetched = flush(step)
          if step % tcfg.log_every_steps == 0 and fetched:
            now = time.time()
            _log_train_metrics(writer, fetched, step, elapsed=now - log_time,
                               steps_done=step - log_step, per_device_batch=per_device_batch,
                               remaining_steps=total - step)
            log_time, log_step = now, step
        if must_save:
          ckpt.save(step, state, train_iter)
          last_saved = step
        if evaluation is not None and (step % tcfg.eval_every_steps == 0 or step == total):
          evaluation(step, state["params"])
        if preempted:
          logging.warning("Preempted: checkpoint for step %d written; exiting.", step)
          break
        if tcfg.fault_kill_at_step == step:
          # Fault injection for resume tests: die like a preempted VM (no clean-up).
          ckpt.wait()
          logging.warning("config.train.fault_kill_at_step=%d reached: SIGKILL.", step)
          os.kill(os.getpid(), signal.SIGKILL)
  finally:
    ckpt.close()
    writer.flush()
  skipped = getattr(train_iter, "skip_counts", lambda: {})()
  if any(skipped.values()) and is_chief:
    logging.warning("Input records skipped, by reason: %s", skipped)
  return state


def _flatten(d: dict, prefix: str = "") -> dict:
  out = {}
  for k, v in d.items():
    key = f"{prefix}{k}"
    if isinstance(v, dict):
      out.update(_flatten(v, key + "."))
    else:
      out[key] = v
  return out
