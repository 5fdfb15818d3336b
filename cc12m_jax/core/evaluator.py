"""The evaluator interface, and how every evaluation result is reported.

An evaluator scores one evaluation source with given parameters:

  evaluator.source                  the eval source it reads (e.g. 'nocaps_val')
  evaluator.run(params) -> EvalResult

Evaluators are built from config by cc12m_jax/evaluation/registry.py (one
per `config.data.eval_sources` entry) and handed to the trainer (periodic
evaluation) and to the evaluate mode; neither knows what kind it holds.

An EvalResult has flat float `metrics` ('<group>/<metric>' such as
'out-domain/CIDEr' or 'image_retrieval/R@1', plus 'skipped/<reason>'
counts), writes its own files and gives a text summary.
`report` writes it to `<workdir>/eval/<source>/step_<n>/` (process 0), logs
`eval/<source>/<metric>` scalars and prints the summary.
"""
from __future__ import annotations

import abc
import os
from typing import Any, Protocol

import jax
import numpy as np
from etils import epath
from jax.experimental import multihost_utils


class EvalResult(abc.ABC):
  """What one evaluation of one source produced."""

  source: str
  metrics: dict[str, float]

  @abc.abstractmethod
  def write(self, directory: str) -> dict[str, str]:
    """Writes the result's files into `directory`; returns {name: path}."""

  @abc.abstractmethod
  def summary(self, num_examples: int) -> str:
    """Human-readable scores (and up to `num_examples` examples) for the log."""


class Evaluator(Protocol):
  source: str

  def run(self, params: Any) -> EvalResult:
    ...


def to_host(x: jax.Array) -> np.ndarray:
  """A global (possibly multi-host) array as one host numpy array: evaluators
  gather every host's rows so that each host scores the whole eval set."""
  if jax.process_count() > 1:
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
  return np.asarray(jax.device_get(x))


def result_directory(workdir: str, source: str, step: int) -> str:
  return os.path.join(workdir, "eval", source, f"step_{step}")


def report(result: EvalResult, step: int, workdir: str, writer: Any = None,
           num_examples: int = 5) -> dict[str, str]:
  """Writes `result`'s files and prints its summary (process 0), logs its metrics.

  Returns {file name: path} of what was written (empty on other processes).
  """
  paths = {}
  if writer is not None:
    writer.write_scalars(step, {f"eval/{result.source}/{k}": v
                                for k, v in result.metrics.items()})
  if jax.process_index() == 0:
    directory = epath.Path(result_directory(workdir, result.source, step))
    directory.mkdir(parents=True, exist_ok=True)
    paths = result.write(str(directory))
    # Every process holds the same gathered result; one printout is enough.
    print(f"\n{result.source} at step {step}:\n{result.summary(num_examples)}", flush=True)
  return paths
