"""Best-checkpoint selection by a configurable evaluation metric.

The paper (Table 5) shows longer COCO fine-tuning raising COCO CIDEr while
nocaps CIDEr falls, so the checkpoint to keep is chosen on a named metric
(`config.eval.selection_metric`: '<source>/<metric>' such as
'nocaps_val/out-domain/CIDEr', or just '<metric>' when there is one eval
source) and every evaluation's scores are kept in the history.

The one selection path: the trainer's periodic evaluation feeds each
evaluation to a tracker (and keeps the best parameters), and the evaluate
mode with `config.eval.select_checkpoint` feeds it each kept checkpoint.

The tracker's state lives in `<directory>/best.json` (written atomically),
so a resumed run keeps comparing against the best seen before the restart.
With `save_params`, the best parameters are also written as an orbax
checkpoint in `<directory>/checkpoints/<step>` with the trainer's layout
(item "state" holding {"params": ...}), so `config.train.init_from` can
point at `<directory>` to fine-tune or evaluate from the best checkpoint.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Mapping

import jax
from absl import logging
from etils import epath

from cc12m_jax.core import checkpointing
from cc12m_jax.core.evaluator import EvalResult

MODES = ("max", "min")


def selection_scores(results: Mapping[str, EvalResult]) -> dict[str, float]:
  """Flat scores of one evaluation round: '<source>/<metric>' for every source,
  and the bare '<metric>' too when there is only one source."""
  scores: dict[str, float] = {}
  for source, result in results.items():
    scores.update({f"{source}/{k}": float(v) for k, v in result.metrics.items()})
  if len(results) == 1:
    scores.update({k: float(v) for k, v in next(iter(results.values())).metrics.items()})
  return scores


class BestCheckpointTracker:
  """Remembers the best value of one metric over periodic evaluations."""

  def __init__(self, directory: str, metric: str, mode: str = "max", *, resume: bool = True):
    """`resume`: continue the history in `directory` (a resumed training run);
    False starts afresh (a new selection over saved checkpoints)."""
    if mode not in MODES:
      raise ValueError(f"selection mode {mode!r}; expected one of {MODES}")
    if not metric:
      raise ValueError("config.eval.selection_metric is empty")
    self.directory = checkpointing.resolve_path(directory)  # orbax needs absolute paths
    self.metric, self.mode = metric, mode
    self.best_step: int | None = None
    self.best_value: float | None = None
    self.history: list[dict[str, Any]] = []
    if resume:
      self._load()

  @property
  def path(self) -> epath.Path:
    return self.directory / "best.json"

  def _load(self) -> None:
    if not self.path.exists():
      return
    state = json.loads(self.path.read_text())
    if state.get("metric") != self.metric or state.get("mode") != self.mode:
      raise ValueError(
          f"{self.path} tracks {state.get('metric')!r} ({state.get('mode')}), "
          f"not {self.metric!r} ({self.mode}); use another directory or "
          "delete the file")
    self.best_step, self.best_value = state["best_step"], state["best_value"]
    self.history = state.get("history", [])

  def _save(self) -> None:
    # Every process keeps the history (all must agree on the best step, whose
    # parameters they save together), but one writes it: processes renaming
    # the same best.json.tmp race, and the later rename fails.
    if jax.process_index() != 0:
      return
    self.directory.mkdir(parents=True, exist_ok=True)
    tmp = self.directory / "best.json.tmp"
    tmp.write_text(json.dumps({
        "metric": self.metric, "mode": self.mode, "best_step": self.best_step,
        "best_value": self.best_value, "history": self.history}, indent=1))
    os.replace(tmp, self.path)

  def is_better(self, value: float) -> bool:
    if math.isnan(value):
      return False
    if self.best_value is None:
      return True
    return value > self.best_value if self.mode == "max" else (
        value < self.best_value)

  def update(self, step: int, scores: Mapping[str, float]) -> bool:
    """Records `scores` (flat '<group>/<metric>'); True if `step` is the new best."""
    if self.metric not in scores:
      raise KeyError(f"selection metric {self.metric!r} not among the "
                     f"evaluation scores {sorted(scores)}")
    value = float(scores[self.metric])
    improved = self.is_better(value)
    if improved:
      self.best_step, self.best_value = int(step), value
    self.history.append({"step": int(step), **{k: float(v) for k, v in
                                               scores.items()}})
    self._save()
    logging.info("Eval step %d: %s = %.4f (best %.4f at step %s)%s", step,
                 self.metric, value, self.best_value, self.best_step,
                 " -- new best" if improved else "")
    return improved

  def save_params(self, step: int, params: Any) -> str:
    """Writes params as `<directory>/checkpoints/<step>`, keeping only it."""
    checkpointer = checkpointing.Checkpointer(str(self.directory), keep=1, use_async=False)
    try:
      checkpointer.save(step, {"params": params}, train_iter=None)
    finally:
      checkpointer.close()
    return str(checkpointer.directory / str(step))
