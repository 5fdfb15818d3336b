"""Weighted sums of objectives over one batch (paper Appendix D.2.2): 'ic+0.1*moc'.

  config.train.objective = "<term>+<term>+..."   term = [<weight>*]<name>
  L = sum_i weight_i * L_i(batch)

e.g. "ic+0.1*vlm", "ic+0.1*moc" (Table 12). Every term sees the whole batch
and runs its own forward pass of one shared model
(models/multitask.py: the ic Captioner plus the heads of the other terms),
with its own key fold_in(step key, i): its own dropout masks and, for the
masked terms, its own masks. Separate passes are what each term needs
(moc reads a masked image, ic the whole one) and keep each term's loss
exactly the loss it has alone (tests/objectives/test_multitask.py); the
cost is one more encoder pass per extra term.

Metrics: 'loss' (the weighted sum) and each term's metrics under its name
('ic/loss', 'ic/token_accuracy', 'moc/loss', 'moc/accuracy', ...), which
the train step logs as they come.

ic + vlm: the vlm term's image vector is the mean of the captioner's own
encoder output, its text vector a separate text Transformer's (the dual
encoder's text tower); the contrastive loss is the vlm objective's
(objectives/contrastive.py) over the global batch.
"""
from __future__ import annotations

import dataclasses
import re
from types import ModuleType
from typing import Any, Callable, Mapping

import jax
import ml_collections

from cc12m_jax.models import multitask as multitask_model
from cc12m_jax.objectives import captioning, contrastive, mass, mlm, moc

_TERM = re.compile(r"^\s*(?:(?P<weight>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*\*\s*)?"
                   r"(?P<name>[a-z_]+)\s*$")


def vlm_loss_fn(model: multitask_model.MultiTaskModel, params: Any, batch: Mapping[str, Any],
                rng: jax.Array | None, *, train: bool) -> tuple[jax.Array, dict[str, jax.Array]]:
  """The vlm contrastive loss with the shared image encoder of the multi-task model."""
  rngs = {"dropout": rng} if (train and rng is not None) else {}
  image, text, tau = model.apply({"params": params}, batch, train=train, rngs=rngs,
                                 method=multitask_model.MultiTaskModel.vlm_embeddings)
  return contrastive.contrastive_loss(image, text, tau,
                                      symmetric=bool(model.config.symmetric_loss),
                                      example_mask=batch.get("example_mask"))


# The loss of each task on a MultiTaskModel. ic's own loss_fn applies the
# model's default call, which is the Captioner's forward.
TERM_LOSSES: dict[str, Callable[..., tuple[jax.Array, dict[str, jax.Array]]]] = {
    "ic": captioning.loss_fn,
    "vlm": vlm_loss_fn,
    "mlm": mlm.loss_fn,
    "mass": mass.loss_fn,
    "moc": moc.loss_fn,
}
MODULES: dict[str, ModuleType] = {"ic": captioning, "vlm": contrastive, "mlm": mlm,
                                  "mass": mass, "moc": moc}


@dataclasses.dataclass(frozen=True)
class Term:
  name: str
  weight: float


def parse(text: str) -> tuple[Term, ...]:
  """'ic+0.1*moc' -> (Term('ic', 1.0), Term('moc', 0.1)); ValueError says what is wrong."""
  terms = []
  for part in text.split("+"):
    match = _TERM.match(part)
    if match is None:
      raise ValueError(f"config.train.objective={text!r}: cannot read the term {part!r}; "
                       "write terms like 'ic+0.1*moc' ([weight*]name joined by '+').")
    name, weight = match["name"], float(match["weight"] or 1.0)
    if name not in TERM_LOSSES:
      raise ValueError(f"config.train.objective={text!r}: {name!r} is not an objective; "
                       f"known: {sorted(TERM_LOSSES)}.")
    if not weight > 0:
      raise ValueError(f"config.train.objective={text!r}: the weight of {name!r} must be > 0.")
    terms.append(Term(name, weight))
  names = [t.name for t in terms]
  if len(set(names)) != len(names):
    raise ValueError(f"config.train.objective={text!r}: an objective appears twice.")
  return tuple(terms)


def term_rng(rng: jax.Array | None, index: int) -> jax.Array | None:
  """Term i's key: fold_in(step key, i) (None stays None: evaluation)."""
  return None if rng is None else jax.random.fold_in(rng, index)


class MultiTask:
  """A weighted sum of objectives; the registry's interface (build_model, loss_fn,
  INPUT_KEYS, EVALUATOR), as an objective module has it."""

  def __init__(self, terms: tuple[Term, ...]):
    self.terms = tuple(terms)
    self.TASKS = tuple(t.name for t in self.terms)  # pylint: disable=invalid-name
    keys: list[str] = []
    for name in self.TASKS:
      keys += [k for k in MODULES[name].INPUT_KEYS if k not in keys]
    self.INPUT_KEYS = tuple(keys)  # pylint: disable=invalid-name
    # The first term is the main one: ic + x models are scored as captioners.
    self.EVALUATOR = MODULES[self.TASKS[0]].EVALUATOR  # pylint: disable=invalid-name

  @property
  def name(self) -> str:
    return "+".join(t.name if t.weight == 1.0 else f"{t.weight:g}*{t.name}" for t in self.terms)

  def build_model(self, config: ml_collections.ConfigDict,
                  vocab_size: int) -> multitask_model.MultiTaskModel:
    centroids = moc.load_centroids(config) if "moc" in self.TASKS else None
    return multitask_model.build(config, vocab_size, self.TASKS, centroids)

  def loss_fn(self, model: multitask_model.MultiTaskModel, params: Any,
              batch: Mapping[str, Any], rng: jax.Array | None, *, train: bool
              ) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(sum_i w_i L_i, every term's metrics under '<name>/' and the total as 'loss')."""
    total, metrics = 0.0, {}
    for i, term in enumerate(self.terms):
      loss, term_metrics = TERM_LOSSES[term.name](model, params, batch, term_rng(rng, i),
                                                  train=train)
      total = total + term.weight * loss
      metrics.update({f"{term.name}/{k}": v for k, v in term_metrics.items()})
    metrics["loss"] = total
    return total, metrics
