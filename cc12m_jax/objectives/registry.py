"""Objective name -> module with `build_model` and `loss_fn`.

An objective module provides
  build_model(config: ConfigDict, vocab_size: int) -> nn.Module
  loss_fn(model, params, batch, rng, *, train: bool) -> (loss, metrics dict)
where `config` is the full config. Modules are imported lazily so that an
objective's dependencies load only when it is used.
"""
from __future__ import annotations

import importlib
from types import ModuleType

_OBJECTIVES: dict[str, str] = {
    "ic": "cc12m_jax.objectives.captioning",
    "vlm": "cc12m_jax.objectives.contrastive",
}


def names() -> list[str]:
  return sorted(_OBJECTIVES)


def get(name: str) -> ModuleType:
  """The objective module registered under `name` (e.g. 'ic', 'vlm')."""
  if name not in _OBJECTIVES:
    raise ValueError(f"config.train.objective={name!r} is unknown; known objectives: {names()}.")
  module = importlib.import_module(_OBJECTIVES[name])
  for attr in ("build_model", "loss_fn"):
    if not callable(getattr(module, attr, None)):
      raise TypeError(f"Objective {name!r} ({_OBJECTIVES[name]}) does not define {attr}().")
  return module
