"""Modes `evaluate` and `predict` of cc12m_jax.main, for any evaluator.

  evaluate  score config.eval.checkpoint_dir ('' = the workdir) on every
            eval source and report each result (cc12m_jax/core/evaluator.py:
            <workdir>/eval/<source>/step_<n>/, TensorBoard, printed table).
            Which checkpoint: config.eval.checkpoint_step (-1: the latest),
            or with config.eval.select_checkpoint every kept checkpoint is
            scored on the source that config.eval.selection_metric names and
            the best one is reported (history in <workdir>/selection/best.json;
            ties go to the earlier step); config.eval.selection_max_step > 0
            leaves out the steps after it.
  predict   decode only and write predictions.json (captioning evaluators;
            no references needed).
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Mapping

import jax
import ml_collections
from absl import logging
from clu import metric_writers

from cc12m_jax.core import checkpointing, evaluator as evaluator_lib, selection, workdir_lock
from cc12m_jax.core.evaluator import Evaluator
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.evaluation import report as report_lib


def selection_source(config: ml_collections.ConfigDict) -> tuple[str, str]:
  """(eval source, metric within it) named by config.eval.selection_metric."""
  metric = config.eval.selection_metric
  sources = [s.strip() for s in config.data.eval_sources.split(",") if s.strip()]
  head, _, rest = metric.partition("/")
  if head in sources and rest:
    return head, rest
  return sources[0], metric


def selection_dir(workdir: str) -> str:
  """Where an evaluation that selects its step keeps the tracker (best.json)."""
  return os.path.join(workdir, "selection")


def choose_step(config: ml_collections.ConfigDict, workdir: str, setup: RunSetup,
                evaluators: Mapping[str, Evaluator]) -> int:
  """The checkpoint step of config.eval.checkpoint_dir to report (see module docstring)."""
  directory = config.eval.checkpoint_dir or workdir
  steps = checkpointing.saved_steps(directory, key="config.eval.checkpoint_dir")
  if config.eval.checkpoint_step >= 0:
    if config.eval.checkpoint_step not in steps:
      raise ValueError(f"config.eval.checkpoint_step={config.eval.checkpoint_step} not in "
                       f"{directory!r} (has {steps})")
    return int(config.eval.checkpoint_step)
  if config.eval.selection_max_step:  # config_rules: only with select_checkpoint
    cap = config.eval.selection_max_step
    if not any(step <= cap for step in steps):
      raise ValueError(f"config.eval.selection_max_step={cap}: {directory!r} has no kept step "
                       f"at or before it (has {steps}).")
    steps = [step for step in steps if step <= cap]
  if not config.eval.select_checkpoint or len(steps) == 1:
    return steps[-1]
  source, metric = selection_source(config)
  tracker = selection.BestCheckpointTracker(selection_dir(workdir), metric,
                                            config.eval.selection_mode, resume=False)
  for step in steps:
    params, _ = setup.restore_params(directory, step)
    tracker.update(step, evaluators[source].run(params).metrics)
  logging.info("Selected step %d of %s: %s %s = %.4f.", tracker.best_step, directory, source,
               metric, tracker.best_value)
  return int(tracker.best_step)


@contextlib.contextmanager
def _locked(workdir: str) -> Iterator[None]:
  """The workdir's lock (core/workdir_lock.py), taken by process 0.

  Evaluations write reports and the selection history under their workdir as
  a trainer writes checkpoints: two runs on one workdir would overwrite each
  other's files, so the second fails at once, naming the first.
  """
  if jax.process_index() != 0:
    yield
    return
  with workdir_lock.WorkdirLock(workdir):
    yield


def evaluate(config: ml_collections.ConfigDict, workdir: str, setup: RunSetup,
             evaluators: Mapping[str, Evaluator]) -> dict[str, dict[str, float]]:
  """Mode `evaluate`: {source: metrics} of the chosen checkpoint (workdir locked)."""
  with _locked(workdir):
    return _evaluate(config, workdir, setup, evaluators)


def _evaluate(config: ml_collections.ConfigDict, workdir: str, setup: RunSetup,
              evaluators: Mapping[str, Evaluator]) -> dict[str, dict[str, float]]:
  step = choose_step(config, workdir, setup, evaluators)
  directory = config.eval.checkpoint_dir or workdir
  params, _ = setup.restore_params(directory, step)
  logging.info("Evaluating the parameters of %s, step %d.", directory, step)
  writer = metric_writers.create_default_writer(workdir, just_logging=jax.process_index() != 0)
  metrics = {}
  for source, evaluator in evaluators.items():
    result = evaluator.run(params)
    evaluator_lib.report(result, step, workdir, writer, config.eval.num_examples_to_show)
    metrics[source] = result.metrics
  writer.flush()
  return metrics


def predict(config: ml_collections.ConfigDict, workdir: str, setup: RunSetup,
            evaluators: Mapping[str, Any]) -> dict[str, str]:
  """Mode `predict`: {source: predictions.json path} (workdir locked)."""
  with _locked(workdir):
    return _predict(config, workdir, setup, evaluators)


def _predict(config: ml_collections.ConfigDict, workdir: str, setup: RunSetup,
             evaluators: Mapping[str, Any]) -> dict[str, str]:
  directory = config.eval.checkpoint_dir or workdir
  params, step = setup.restore_params(directory, config.eval.checkpoint_step)
  paths = {}
  for source, evaluator in evaluators.items():
    predictions = evaluator.predict(params)
    path = os.path.join(workdir, "predict", source, f"step_{step}", "predictions.json")
    if jax.process_index() == 0:
      report_lib.write_predictions(path, predictions, evaluator.references)
    logging.info("Wrote %d captions of %s to %s.", len(predictions), source, path)
    paths[source] = path
  return paths
