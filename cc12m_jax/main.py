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
# Multi-process runs (config.train.distributed=True). On Cloud TPU VMs and
# under Slurm / Open MPI / Kubernetes JAX finds all of these itself; elsewhere
# (several processes on one machine, launch/multiprocess_cpu.sh, or GPU hosts
# without a cluster manager) they must be given, because jax.distributed.initialize
# reads only the coordinator's address from the environment
# (JAX_COORDINATOR_ADDRESS), not the process count or id.
COORDINATOR = flags.DEFINE_string(
    "coordinator_address", "", "host:port of process 0's JAX coordinator ('': JAX's own "
    "detection, or $JAX_COORDINATOR_ADDRESS).")
NUM_PROCESSES = flags.DEFINE_integer("num_processes", 0, "Processes in the run (0: detected).")
PROCESS_ID = flags.DEFINE_integer("process_id", -1, "This process's index (-1: detected).")
HEARTBEAT_TIMEOUT = flags.DEFINE_integer(
    "heartbeat_timeout_s", 100, "A process silent this long counts as dead, and JAX then "
    "stops every other process with an error instead of letting it wait forever.")
INIT_TIMEOUT = flags.DEFINE_integer(
    "init_timeout_s", 300, "How long a process waits for all the others to join.")


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


def _initialize_distributed() -> None:
  """jax.distributed.initialize with the flags given; JAX detects the rest."""
  jax.distributed.initialize(
      coordinator_address=COORDINATOR.value or None,
      num_processes=NUM_PROCESSES.value or None,
      process_id=PROCESS_ID.value if PROCESS_ID.value >= 0 else None,
      initialization_timeout=INIT_TIMEOUT.value,
      heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT.value)


def prepare(config: ml_collections.ConfigDict) -> None:
  """Everything before `run`: JAX's multi-host runtime, the config rules (one
  line and exit 1 on an error), TensorFlow kept off accelerators, logging."""
  if config.train.distributed:
    _initialize_distributed()  # before anything asks JAX for its devices
  elif NUM_PROCESSES.present or PROCESS_ID.present:
    # Without the runtime every process would train alone into the same workdir.
    sys.stderr.write("FATAL --num_processes/--process_id need --config.train.distributed=True\n")
    sys.exit(1)
  try:
    config_rules.validate(config)
  except config_rules.ConfigError as e:
    sys.stderr.write(f"FATAL config error: {e}\n")  # one line, no traceback
    sys.exit(1)
  _hide_accelerators_from_tensorflow()
  # Only process 0 logs progress; the others log warnings and errors. (Setting
  # the absl logger to INFO on every process undid set_verbosity on the others.)
  chief = jax.process_index() == 0
  logging.set_verbosity(logging.INFO if chief else logging.WARNING)
  std_logging.getLogger("absl").setLevel(std_logging.INFO if chief else std_logging.WARNING)
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
