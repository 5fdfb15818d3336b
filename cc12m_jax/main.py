"""Entry point: `python -m cc12m_jax.main --config=configs/x.py --workdir=DIR [--config.a.b=v]`.

Modes (config.mode):
  pretrain, finetune   cc12m_jax.train.trainer.train_and_evaluate, with the
                       evaluators for periodic evaluation
  evaluate, predict    cc12m_jax.evaluation.modes (score / decode a checkpoint)

A run is: flags -> config_rules.validate (once, before any compute and before
the workdir is touched) -> RunSetup (model, mesh, shardings) -> evaluators
built from config (evaluation/registry.py) -> the mode. An override of an
unknown key fails while flags are parsed, naming the key and the closest
known one (cc12m_jax.config_check).
"""
from __future__ import annotations

import logging as std_logging
import sys
from typing import Any, Callable

import jax
import ml_collections
import tensorflow as tf
from absl import app, flags, logging
from ml_collections import config_flags

from cc12m_jax import config_check, config_rules
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.evaluation import modes, registry as evaluators
from cc12m_jax.train import trainer

CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a configs/*.py file (optionally file.py:arg).", lock_config=True)
WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints, metrics and outputs go here.")
flags.mark_flags_as_required(["config", "workdir"])


def _hide_accelerators_from_tensorflow() -> None:
  """tf.data runs on the host; TensorFlow must not grab GPU/TPU memory."""
  tf.config.set_visible_devices([], "GPU")
  try:
    tf.config.set_visible_devices([], "TPU")
  except (ValueError, RuntimeError):
    pass


class _QuietLibraries(std_logging.Filter):
  """Drops INFO chatter of orbax (it logs every save step by step)."""

  def filter(self, record: std_logging.LogRecord) -> bool:
    return record.levelno >= std_logging.WARNING or "/orbax/" not in record.pathname


def run(config: ml_collections.ConfigDict, workdir: str,
        on_step: Callable[[trainer.StepEvent], None] | None = None) -> Any:
  """Runs config.mode on a config that passed config_rules.validate.

  `on_step` goes to the trainer (called after every training step).
  """
  setup = RunSetup(config)
  needs_evaluators = config.mode in ("evaluate", "predict") or config.train.eval_every_steps > 0
  built = evaluators.build(config, setup) if needs_evaluators else {}
  if config.mode in ("pretrain", "finetune"):
    return trainer.train_and_evaluate(config, workdir, setup, built, on_step=on_step)
  if config.mode == "evaluate":
    return modes.evaluate(config, workdir, setup, built)
  return modes.predict(config, workdir, setup, built)


def prepare(config: ml_collections.ConfigDict) -> None:
  """Everything before `run`: JAX's multi-host runtime, the config rules (one
  line and exit 1 on an error), TensorFlow kept off accelerators, logging."""
  if config.train.distributed:
    jax.distributed.initialize()  # before anything asks JAX for its devices
  try:
    config_rules.validate(config)
  except config_rules.ConfigError as e:
    sys.stderr.write(f"FATAL config error: {e}\n")  # one line, no traceback
    sys.exit(1)
  _hide_accelerators_from_tensorflow()
  if jax.process_index() != 0:
    logging.set_verbosity(logging.WARNING)
  std_logging.getLogger("absl").setLevel(std_logging.INFO)
  for handler in std_logging.getLogger().handlers + std_logging.getLogger("absl").handlers:
    handler.addFilter(_QuietLibraries())
  logging.info("JAX process %d/%d, %d local / %d global devices (%s).", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.device_count(),
               jax.devices()[0].platform)
  logging.info("Config:\n%s", config)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  prepare(CONFIG.value)
  run(CONFIG.value, WORKDIR.value)


if __name__ == "__main__":
  app.run(main, flags_parser=config_check.parse_flags)
