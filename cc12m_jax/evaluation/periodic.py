"""Periodic caption evaluation for the training loop.

  hook = PeriodicCaptionEval(config, setup, workdir, writer)   # once
  ...
  hook(step, state["params"])   # every step; runs every eval_every_steps

At each evaluation every source of config.data.eval_sources is decoded and
scored (captioner_eval), its report files are written under
<workdir>/eval/<source>/step_<n>/, all '<source>/<group>/<metric>' scores
(in-, near-, out-domain and overall curves) go to the metric writer, and
the BestCheckpointTracker in <workdir>/best keeps the parameters with the
best config.eval.selection_metric. The selection metric names a group and
metric of the FIRST eval source (e.g. "out-domain/CIDEr"), or any source
explicitly as "<source>/<group>/<metric>".
"""
from __future__ import annotations

import os
from typing import Any

import ml_collections

from cc12m_jax.evaluation import nocaps, runner, selection


class PeriodicCaptionEval:
  """Calls the evaluators every `config.train.eval_every_steps` steps."""

  def __init__(self, config: ml_collections.ConfigDict, setup: Any,
               workdir: str, writer: Any = None, *, save_best: bool = True):
    self.every = int(config.train.eval_every_steps)
    self.workdir, self.writer, self.save_best = workdir, writer, save_best
    self.num_examples = config.eval.num_examples_to_show
    self.evaluators = runner.make_evaluators(config, setup) if self.every else {}
    self.first_source = next(iter(self.evaluators), "")
    self.tracker = selection.BestCheckpointTracker(
        os.path.join(workdir, "best"), config.eval.selection_metric,
        config.eval.selection_mode) if self.every else None

  def __call__(self, step: int, params: Any, *, force: bool = False
               ) -> dict[str, float] | None:
    """Evaluates when due (or forced); returns the flat scores or None."""
    if not self.every or (not force and step % self.every):
      return None
    flat: dict[str, float] = {}
    for source, evaluator in self.evaluators.items():
      result = evaluator(params)
      runner.write_and_log(result, source, step, self.workdir, self.writer,
                           self.num_examples)
      for key, value in nocaps.flatten_scores(result.report).items():
        flat[f"{source}/{key}"] = value
        if source == self.first_source:
          flat[key] = value
    if self.tracker.update(step, flat) and self.save_best:
      self.tracker.save_params(step, params)
    return flat
