"""Evaluator name -> how to build it from config (cc12m_jax/core/evaluator.py).

  build(config, setup, source) -> Evaluator     one eval source
  metric_names(config) -> set[str]              what its results' metrics are called

`config.eval.evaluator` names one; '' takes the objective's own (its
EVALUATOR: 'captioning' for ic and ic + x, 'retrieval' for vlm, 'none' for
the pre-training objectives mlm, mass and moc, whose models are scored only
after fine-tuning with ic: docs/objectives.md). 'naming' is asked for by
name: it ranks every concept's name under teacher forcing
(evaluation/naming_probe.py), to tell a name never learned from one never
decoded.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import ml_collections

from cc12m_jax.core.evaluator import Evaluator
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.evaluation import captioner_eval, naming_probe, retrieval_eval
from cc12m_jax.objectives import registry as objectives


@dataclasses.dataclass(frozen=True)
class EvaluatorKind:
  build: Callable[[ml_collections.ConfigDict, RunSetup, str], Evaluator]
  metric_names: Callable[[ml_collections.ConfigDict], set[str]]
  # The tasks (objectives.registry.tasks) of which a model needs one: a
  # captioner for 'captioning' (ic, ic+0.1*moc, ...), image and text towers
  # for 'retrieval' (vlm, ic+0.1*vlm).
  model_objectives: tuple[str, ...]


def _no_evaluator(config: ml_collections.ConfigDict, setup: RunSetup, source: str) -> Evaluator:
  raise ValueError(f"config.eval.evaluator='none' ({config.train.objective!r}): nothing scores "
                   f"this model on {source!r}; fine-tune it with ic first (docs/objectives.md).")


EVALUATORS: dict[str, EvaluatorKind] = {
    "captioning": EvaluatorKind(captioner_eval.CaptionEvaluator, captioner_eval.metric_names,
                                ("ic",)),
    # Teacher-forced ranking of every concept's name (evaluation/naming_probe.py).
    naming_probe.NAME: EvaluatorKind(naming_probe.NamingProbeEvaluator, naming_probe.metric_names,
                            ("ic",)),
    "retrieval": EvaluatorKind(retrieval_eval.RetrievalEvaluator, retrieval_eval.metric_names,
                               ("vlm",)),
    # mlm / mass / moc pre-training: no evaluation until fine-tuned.
    "none": EvaluatorKind(_no_evaluator, lambda config: set(), tuple(objectives.names())),
}


def can_score(evaluator_kind: EvaluatorKind, objective: str) -> bool:
  """Whether the model of `objective` has a task the evaluator scores."""
  return bool(set(objectives.tasks(objective)) & set(evaluator_kind.model_objectives))


def evaluator_name(config: ml_collections.ConfigDict) -> str:
  return config.eval.evaluator or objectives.get(config.train.objective).EVALUATOR


def kind(config: ml_collections.ConfigDict) -> EvaluatorKind:
  name = evaluator_name(config)
  if name not in EVALUATORS:
    raise ValueError(f"config.eval.evaluator={name!r} is unknown; known: {sorted(EVALUATORS)}")
  return EVALUATORS[name]


def eval_sources(config: ml_collections.ConfigDict) -> list[str]:
  return [s.strip() for s in config.data.eval_sources.split(",") if s.strip()]


def build(config: ml_collections.ConfigDict, setup: RunSetup) -> dict[str, Evaluator]:
  """{source: Evaluator} for every config.data.eval_sources entry, in order."""
  evaluator_kind = kind(config)
  return {source: evaluator_kind.build(config, setup, source) for source in eval_sources(config)}
