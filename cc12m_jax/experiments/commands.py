"""A stage as the command it runs and the config that command builds.

The flags of a stage's `python -m cc12m_jax.main` command and the config
that the runner validates before anything runs come from one list of
(key, value) overrides, so what is checked is what runs.

A stage's workdir is `<workdir>/runs/<condition>/seed_<s>/<stage>`: stages
with the same condition and name share it across suites run on the same
workdir (e.g. the CC12M pre-training of Tables 3, 5, 7 and Figure 6), and
the runner refuses a finished stage whose command has changed.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import ml_collections

from cc12m_jax import config_check
from cc12m_jax.experiments.suite import Stage, Suite, SuiteError

MAIN_MODULE = "cc12m_jax.main"
# Keys a stage sets through its fields; its overrides may not set them too.
RUNNER_KEYS = frozenset({
    "mode", "data.data_dir", "train.seed", "data.seed", "train.init_from",
    "eval.checkpoint_dir", "eval.checkpoint_step", "eval.select_checkpoint",
    "eval.selection_metric", "data.eval_sources"})

_MODULES: dict[str, Any] = {}


def load_config_file(spec: str) -> ml_collections.ConfigDict:
  """`path.py` or `path.py:arg` -> its get_config() / get_config(arg), as
  ml_collections' config flags load it (paths relative to the working directory)."""
  path, _, arg = spec.partition(":")
  path = os.path.abspath(path)
  if path not in _MODULES:
    if not os.path.isfile(path):
      raise SuiteError(f"config file {spec!r} does not exist (relative paths start at "
                       f"{os.getcwd()})")
    module_spec = importlib.util.spec_from_file_location(
        f"_cc12m_config_{len(_MODULES)}", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.getcwd())  # config files import `configs.base`
    try:
      module_spec.loader.exec_module(module)
    finally:
      sys.path.remove(os.getcwd())
    _MODULES[path] = module
  module = _MODULES[path]
  return module.get_config(arg) if arg else module.get_config()


def absolute(path: str) -> str:
  """A local path made absolute (stages run elsewhere); gs://... and the like as given."""
  return path if "://" in path else os.path.abspath(path)


def stage_dir(workdir: str, stage_key: str, seed: int) -> str:
  condition, name = stage_key.split("/")
  return os.path.join(absolute(workdir), "runs", condition, f"seed_{seed}", name)


def overrides(suite: Suite, stage: Stage, workdir: str, seed: int) -> list[tuple[str, Any]]:
  """Every (config key, value) the stage's command sets, in flag order."""
  for key, _ in stage.overrides:
    if key in RUNNER_KEYS:
      raise SuiteError(f"conditions.{stage.condition}.{stage.name}.overrides.{key}: set "
                       "through the stage's fields (mode, init_from, checkpoint_dir, "
                       "sources, select, checkpoint_step) or the suite's data_dir and seeds")
  out: list[tuple[str, Any]] = [("mode", stage.mode), ("data.data_dir", suite.data_dir),
                                ("train.seed", seed), ("data.seed", seed)]
  if stage.init_from:
    out.append(("train.init_from", stage_dir(workdir, stage.init_from, seed)))
  if stage.mode == "evaluate":
    selecting = stage.select and bool(suite.selection_source)
    sources = list(stage.sources)
    if selecting:
      # First the selection source: the evaluate mode scores every kept
      # checkpoint on it, then reports the chosen one on every source.
      sources = [suite.selection_source] + [s for s in sources if s != suite.selection_source]
    out += [("eval.checkpoint_dir", stage_dir(workdir, stage.checkpoint_dir, seed)),
            ("data.eval_sources", ",".join(sources)),
            ("eval.checkpoint_step", stage.checkpoint_step),
            ("eval.select_checkpoint", selecting),
            ("eval.selection_metric",
             f"{suite.selection_source}/{suite.selection_metric}" if selecting else "")]
  return out + list(stage.overrides)


def flag(key: str, value: Any) -> str:
  text = repr(value) if isinstance(value, float) else str(value)
  return f"--config.{key}={text}"


def main_args(suite: Suite, stage: Stage, workdir: str, seed: int) -> tuple[str, ...]:
  """The stage's arguments after the Python interpreter: -m cc12m_jax.main ..."""
  return ("-m", MAIN_MODULE, f"--config={stage.config}",
          f"--workdir={stage_dir(workdir, stage.key, seed)}",
          *(flag(k, v) for k, v in overrides(suite, stage, workdir, seed)))


def apply(config: ml_collections.ConfigDict, key: str, value: Any, where: str) -> None:
  """config.<key> = value, with the entry point's message for an unknown key."""
  message = config_check.unknown_key_message(config, key)
  if message is not None:
    raise SuiteError(f"{where}: {message}")
  *parents, last = key.split(".")
  node = config
  for part in parents:
    node = node[part]
  try:
    node[last] = value
  except TypeError as e:
    raise SuiteError(f"{where}: config.{key}={value!r}: {e}") from e


def stage_config(suite: Suite, stage: Stage, workdir: str, seed: int) -> ml_collections.ConfigDict:
  """The config that the stage's command builds (its file, then its flags)."""
  config = load_config_file(stage.config)
  for key, value in overrides(suite, stage, workdir, seed):
    apply(config, key, value, f"stage {stage.key}")
  return config
