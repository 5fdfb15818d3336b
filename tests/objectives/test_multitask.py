"""Weighted sums of objectives: parsing, the registry, config rules, and the sum itself."""
import re

import jax
import numpy as np
import pytest

from cc12m_jax import config_rules
from cc12m_jax.evaluation import registry as evaluators
from cc12m_jax.objectives import captioning, moc, multitask, registry
from configs import synthetic_pretrain
from tests.objectives import tiny


def test_parse_and_registry():
  assert multitask.parse("ic+0.1*moc") == (multitask.Term("ic", 1.0), multitask.Term("moc", 0.1))
  assert multitask.parse(" ic + 2e-1 * vlm ") == (multitask.Term("ic", 1.0),
                                                  multitask.Term("vlm", 0.2))
  assert registry.get("1*ic") is captioning
  sum_ = registry.get("ic+0.1*moc")
  assert sum_.name == "ic+0.1*moc" and sum_.EVALUATOR == "captioning"
  assert registry.tasks("ic+0.1*vlm") == ("ic", "vlm") and registry.tasks("mlm") == ("mlm",)
  assert set(sum_.INPUT_KEYS) == set(captioning.INPUT_KEYS) | set(moc.INPUT_KEYS)
  for bad, message in (("ic+0.1*moo", "'moo' is not an objective"),
                       ("ic+-1*moc", "cannot read the term"), ("ic+0*moc", "must be > 0"),
                       ("ic+ic", "appears twice"), ("icc", "is unknown")):
    with pytest.raises(ValueError, match=message):
      registry.get(bad)


def _validate(objective: str, **changes):
  config = synthetic_pretrain.get_config()
  config.train.objective = objective
  for key, value in changes.items():
    section, field = key.split(".")
    config[section][field] = value
  config_rules.validate(config, num_devices=8)


def test_config_rules_know_the_new_objectives_and_their_evaluators():
  _validate("ic+0.1*moc")  # the captioning evaluator scores it (its ic part)
  _validate("ic+0.1*vlm", **{"eval.evaluator": "retrieval", "eval.selection_metric": ""})
  _validate("mlm", **{"eval.selection_metric": ""})  # pre-training: evaluator 'none'
  assert evaluators.can_score(evaluators.EVALUATORS["captioning"], "ic+0.1*vlm")
  assert not evaluators.can_score(evaluators.EVALUATORS["captioning"], "mass")
  for objective, changes, message in (
      ("ic+0.1*mlx", {}, "config.train.objective='ic+0.1*mlx': 'mlx' is not an objective"),
      ("mlm", {"eval.selection_metric": "", "train.eval_every_steps": 100},
       "has no evaluator before fine-tuning"),
      ("mass", {"eval.evaluator": "captioning"}, "cannot score a 'mass' model"),
      ("mlm", {"eval.selection_metric": "", "objectives.text_mask_rate": 0.0},
       "config.objectives.text_mask_rate: must be in (0, 1]"),
      ("mlm", {"eval.selection_metric": "", "objectives.random_token_prob": 0.3},
       "mask_token_prob + random_token_prob = 1.1 exceeds 1")):
    with pytest.raises(config_rules.ConfigError, match=re.escape(message)):
      _validate(objective, **changes)


def test_the_sum_is_the_weighted_sum_of_each_objective_alone():
  """Each term equals its objective on its own model: ic on a plain Captioner and moc
  on a moc-only model, both given the sum's parameters they name, with the
  term's key; dropout is on, so the keys must match too."""
  objective = "ic+0.1*moc+0.5*vlm"
  obj, model, params = tiny.model_and_params(objective, dropout=0.1)
  cfg = tiny.config(objective, dropout=0.1)
  captioner = captioning.build_model(cfg, tiny.VOCAB)
  moc_model = moc.build_model(cfg, tiny.VOCAB)
  batch = tiny.batch(8, seed=4)
  rng = jax.random.wrap_key_data(np.arange(4, dtype=np.uint32), impl="rbg")  # as the step's

  @jax.jit
  def run(params, batch, rng):
    total = obj.loss_fn(model, params, batch, rng, train=True)
    ic = captioning.loss_fn(
        captioner, {k: params[k] for k in ("text_embedding", "image_embedding", "encoder",
                                           "decoder", "logits_projection")},
        batch, jax.random.fold_in(rng, 0), train=True)
    moc_alone = moc.loss_fn(
        moc_model, {k: params[k] for k in ("text_embedding", "image_embedding", "encoder",
                                           "moc_head")},
        batch, jax.random.fold_in(rng, 1), train=True)
    vlm = multitask.vlm_loss_fn(model, params, batch, jax.random.fold_in(rng, 2), train=True)
    no_dropout = captioning.loss_fn(model, params, batch, None, train=False)
    return total, ic, moc_alone, vlm, no_dropout

  (total, metrics), ic, moc_alone, vlm, no_dropout = run(params, batch, rng)
  np.testing.assert_allclose(float(total), float(ic[0]) + 0.1 * float(moc_alone[0])
                             + 0.5 * float(vlm[0]), rtol=1e-6)
  assert float(moc_alone[1]["num_targets"]) > 0
  for name, (_, alone) in (("ic", ic), ("moc", moc_alone), ("vlm", vlm)):
    for key, value in alone.items():
      np.testing.assert_allclose(float(metrics[f"{name}/{key}"]), float(value), rtol=1e-6)
  assert abs(float(ic[0]) - float(no_dropout[0])) > 1e-4  # dropout was on
