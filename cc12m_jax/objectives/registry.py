"""Objective name -> the module that defines it.

An objective module provides
  build_model(config: ConfigDict, vocab_size: int) -> nn.Module
      (`config` is the full config; the module holds a frozen `config.model`)
  loss_fn(model, params, batch, rng, *, train: bool) -> (loss, metrics dict)
  INPUT_KEYS   the batch keys (data/batch_spec.py) its model reads
  EVALUATOR    the evaluator (cc12m_jax/evaluation/registry.py) that scores
               its model when config.eval.evaluator is ''
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from cc12m_jax.data import batch_spec
from cc12m_jax.objectives import captioning, contrastive

OBJECTIVES: dict[str, ModuleType] = {
    "ic": captioning,
    "vlm": contrastive,
}


def names() -> list[str]:
  return sorted(OBJECTIVES)


def get(name: str) -> ModuleType:
  """The objective module registered under `name` (e.g. 'ic', 'vlm')."""
  if name not in OBJECTIVES:
    raise ValueError(f"config.train.objective={name!r} is unknown; known objectives: {names()}.")
  return OBJECTIVES[name]


def dummy_batch(objective: ModuleType, dims: batch_spec.Dims) -> dict[str, np.ndarray]:
  """A zero batch of what `objective`'s model reads (parameter init, shape inference)."""
  return batch_spec.zeros(dims, objective.INPUT_KEYS)
