"""End to end on the synthetic world: a briefly pre-trained dual encoder
retrieves the held-out Flickr-style test images far better than an untrained
one (zero-shot: no Flickr data is trained on).

Uses the real pieces: synthetic generator -> input pipeline -> trainer
(objective 'vlm' through the registry) -> orbax checkpoint -> 'evaluate'
mode with the 'retrieval' evaluator (Karpathy JSON joined to the records).
"""
import json
import os

import jax
import pytest

from configs import vlm_synthetic_pretrain
from cc12m_jax import config_rules, main
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.evaluation import registry as eval_registry
from cc12m_jax.train import state as state_lib, trainer
from tests.synthetic_world import make_world

STEPS = 160


@pytest.fixture(scope="module")
def world(tmp_path_factory):
  # num_flickr 240: 160 train / 40 val / 40 test images, 5 captions each.
  return make_world(str(tmp_path_factory.mktemp("world")),
                    num_concepts=60, feature_dim=32, vocab_size=600, num_cc3m=100,
                    num_cc12m=1200, num_coco_train=10, num_coco_val=10, num_nocaps_val=10,
                    num_flickr=240)


def _config(data_dir: str, workdir: str):
  config = vlm_synthetic_pretrain.get_config()
  config.data.data_dir = data_dir
  config.data.global_batch_size = 64
  config.data.eval_global_batch_size = 40
  config.data.shuffle_buffer = 500
  config.data.max_caption_length = 16
  config.eval.references = f"{data_dir}/flickr/dataset_flickr30k.json"
  config.eval.checkpoint_dir = workdir
  m = config.model
  m.emb_dim, m.num_heads, m.mlp_dim, m.projection_dim = 64, 4, 128, 64
  m.num_encoder_layers = m.text_encoder_layers = 1
  config.optim.learning_rate = 3e-3
  config.optim.warmup_steps = 20
  config.train.num_train_steps = STEPS
  config.train.checkpoint_every_steps = STEPS
  config.train.log_every_steps = STEPS
  config.train.async_checkpointing = False
  return config


@pytest.fixture(scope="module")
def trained(world, tmp_path_factory):
  """(config, workdir) of a STEPS-step vlm run with checkpoints at STEPS/2 and STEPS."""
  workdir = str(tmp_path_factory.mktemp("vlm"))
  config = _config(world, workdir)
  config.train.checkpoint_every_steps = STEPS // 2
  config_rules.validate(config, num_devices=1)
  trainer.train_and_evaluate(config, workdir, RunSetup(config, jax.devices()[:1]))
  return config, workdir


def test_pretrained_zero_shot_recall_far_above_untrained(trained):
  config, workdir = trained
  config = config.copy_and_resolve_references()
  # Trained on 1 device, evaluated on all 8 (the checkpoint is re-sharded).
  config.mode = "evaluate"
  config_rules.validate(config)
  trained = main.run(config, workdir)["flickr_test"]
  assert trained["num_images"] == 40 and trained["image_retrieval/num_queries"] == 200
  with open(os.path.join(workdir, "eval", "flickr_test", f"step_{STEPS}", "retrieval.json")) as f:
    assert json.load(f)["metrics"] == trained

  setup = RunSetup(config)
  params = state_lib.TrainSetup(setup, config.optim).new_state(0)["params"]  # no training
  untrained = eval_registry.build(config, setup)["flickr_test"].run(params).metrics
  # Chance R@1 over 40 images is 2.5%: the margins leave room for run-to-run spread.
  assert trained["image_retrieval/R@1"] >= untrained["image_retrieval/R@1"] + 10.0
  assert trained["image_retrieval/R@1"] >= 3 * max(untrained["image_retrieval/R@1"], 2.5)
  assert trained["image_retrieval/R@10"] >= untrained["image_retrieval/R@10"] + 30.0
  assert trained["text_retrieval/R@5"] >= untrained["text_retrieval/R@5"] + 20.0


def test_select_checkpoint_reports_the_best_step_on_the_selection_source(trained, tmp_path):
  """The fine-tuning protocol: choose the step on flickr_val, report flickr_test for it."""
  config, workdir = trained
  config = config.copy_and_resolve_references()
  config.mode = "evaluate"
  config.data.eval_sources = "flickr_val,flickr_test"
  config.eval.selection_metric = "flickr_val/text_retrieval/R@1"
  config_rules.validate(config)
  by_step = {}
  for step in (STEPS // 2, STEPS):
    config.eval.checkpoint_step = step
    by_step[step] = main.run(config, str(tmp_path / f"step_{step}"))
  config.eval.checkpoint_step = -1
  config.eval.select_checkpoint = True
  selected = main.run(config, str(tmp_path / "selected"))
  # The same choice by hand: the best flickr_val score, ties to the earlier step.
  best = max(by_step, key=lambda s: (by_step[s]["flickr_val"]["text_retrieval/R@1"], -s))
  assert selected == by_step[best]
  history = json.loads((tmp_path / "selected" / "selection" / "best.json").read_text())
  assert history["best_step"] == best
  assert [h["step"] for h in history["history"]] == [STEPS // 2, STEPS]
  # A step budget: the selection chooses among the steps up to its cap only.
  config.eval.selection_max_step = STEPS // 2
  config_rules.validate(config)
  assert main.run(config, str(tmp_path / "capped")) == by_step[STEPS // 2]
  config.eval.selection_max_step = STEPS // 2 - 1
  with pytest.raises(ValueError, match=f"selection_max_step={STEPS // 2 - 1}: .* has no kept "
                                       f"step at or before it"):
    main.run(config, str(tmp_path / "too_low"))
