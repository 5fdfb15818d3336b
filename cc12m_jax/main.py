"""Entry point: `python -m cc12m_jax.main --config=configs/x.py --workdir=DIR [--config.a.b=v]`.

Modes (config.mode):
  pretrain, finetune   cc12m_jax.train.trainer.train_and_evaluate
  evaluate, predict    cc12m_jax.evaluation (decode a checkpoint, score / write captions)

An override of an unknown key fails before flags are parsed with one line naming
the key and the closest known one (cc12m_jax.config_check); one of the wrong
type fails while absl parses flags; the remaining checks
(cc12m_jax.train.validation) run before any device work.
"""
from __future__ import annotations

import importlib
import logging as std_logging
import sys
from typing import Sequence

import jax
from absl import app, flags, logging
from ml_collections import config_flags

from cc12m_jax import config_check
from cc12m_jax.train import validation

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Path to a configs/*.py file (optionally file.py:arg).", lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Checkpoints, metrics and outputs go here.")
flags.mark_flags_as_required(["config", "workdir"])

# Mode -> (module, function) with signature fn(config, workdir). Evaluation and
# prediction live with the decoding/evaluation code; they are imported only
# when used.
DISPATCH = {
    "pretrain": ("cc12m_jax.train.trainer", "train_and_evaluate"),
    "finetune": ("cc12m_jax.train.trainer", "train_and_evaluate"),
    "evaluate": ("cc12m_jax.evaluation.runner", "evaluate"),
    "predict": ("cc12m_jax.evaluation.runner", "predict"),
}


def _hide_accelerators_from_tensorflow() -> None:
  """tf.data runs on the host; TensorFlow must not grab GPU/TPU memory."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  tf.config.set_visible_devices([], "GPU")
  try:
    tf.config.set_visible_devices([], "TPU")
  except (ValueError, RuntimeError):
    pass


class _QuietLibraries(std_logging.Filter):
  """Drops INFO chatter of orbax (it logs every save step by step)."""

  def filter(self, record: std_logging.LogRecord) -> bool:
    return record.levelno >= std_logging.WARNING or "/orbax/" not in record.pathname


def run(config, workdir: str):
  validation.validate(config)
  module_name, fn_name = DISPATCH[config.mode]
  fn = getattr(importlib.import_module(module_name), fn_name)
  return fn(config, workdir)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  config = _CONFIG.value
  try:
    validation.validate(config)  # before any compute
  except validation.ConfigError as e:
    sys.stderr.write(f"FATAL config error: {e}\n")  # one line, no traceback
    sys.exit(1)
  _hide_accelerators_from_tensorflow()
  if config.train.distributed:
    jax.distributed.initialize()
  if jax.process_index() != 0:
    logging.set_verbosity(logging.WARNING)
  std_logging.getLogger("absl").setLevel(std_logging.INFO)
  for handler in std_logging.getLogger().handlers + std_logging.getLogger("absl").handlers:
    handler.addFilter(_QuietLibraries())
  logging.info("JAX process %d/%d, %d local / %d global devices (%s).", jax.process_index(),
               jax.process_count(), jax.local_device_count(), jax.device_count(),
               jax.devices()[0].platform)
  logging.info("Config:\n%s", config)
  run(config, _WORKDIR.value)


if __name__ == "__main__":
  app.run(main, flags_parser=config_check.parse_flags)
