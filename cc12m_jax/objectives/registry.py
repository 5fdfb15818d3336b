"""Objective name -> the module that defines it.

An objective module provides
  build_model(config: ConfigDict, vocab_size: int) -> nn.Module
      (`config` is the full config; the module holds a frozen `config.model`)
  loss_fn(model, params, batch, rng, *, train: bool) -> (loss, metrics dict)
  INPUT_KEYS   the batch keys (data/batch_spec.py) its model reads
  EVALUATOR    the evaluator (cc12m_jax/evaluation/registry.py) that scores
               its model when config.eval.evaluator is '' ('none': it has
               none before fine-tuning)
  TASKS        the tasks its model is trained on (evaluators check them)

A name with '+' is a weighted sum of objectives, e.g. 'ic+0.1*moc': `get`
returns a multitask.MultiTask, which has the same interface
(cc12m_jax/objectives/multitask.py, docs/objectives.md).
"""
from __future__ import annotations

from types import ModuleType

import numpy as np

from cc12m_jax.data import batch_spec
from cc12m_jax.objectives import captioning, contrastive, mass, mlm, moc, multitask

OBJECTIVES: dict[str, ModuleType] = {
    "ic": captioning,
    "vlm": contrastive,
    "mlm": mlm,
    "mass": mass,
    "moc": moc,
}
Objective = ModuleType | multitask.MultiTask


def names() -> list[str]:
  return sorted(OBJECTIVES)


def get(name: str) -> Objective:
  """The objective of `name`: a registered module ('ic', 'mlm', ...) or, for a
  weighted sum ('ic+0.1*moc'), a multitask.MultiTask. ValueError names what
  is wrong with an unknown name."""
  if name in OBJECTIVES:
    return OBJECTIVES[name]
  if "+" not in name and "*" not in name:
    raise ValueError(f"config.train.objective={name!r} is unknown; known objectives: "
                     f"{names()}, or a weighted sum such as 'ic+0.1*moc'.")
  terms = multitask.parse(name)
  if len(terms) == 1 and terms[0].weight == 1.0:
    return OBJECTIVES[terms[0].name]
  return multitask.MultiTask(terms)


def tasks(name: str) -> tuple[str, ...]:
  """The tasks of objective `name`: ('ic',) for 'ic', ('ic', 'moc') for 'ic+0.1*moc'."""
  objective = get(name)
  return tuple(getattr(objective, "TASKS", None) or (name,))


def dummy_batch(objective: Objective, dims: batch_spec.Dims) -> dict[str, np.ndarray]:
  """A zero batch of what `objective`'s model reads (parameter init, shape inference)."""
  return batch_spec.zeros(dims, objective.INPUT_KEYS)
