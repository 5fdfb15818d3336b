"""One condition of the main job, small, through cc12m_jax.main.run.

launch/run_synthetic.sh runs the headline suite, whose every condition is this
chain (synthetic generator -> pretrain on web-style records -> finetune on
COCO-style records -> beam-search decode and nocaps-protocol scoring); here on
a tiny world and a tiny model, checking that the fine-tuned captioner scores
well above an untrained one. The runner itself is tested in tests/experiments.
"""
import json
import os

import pytest

from cc12m_jax import config_rules, main
from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.evaluation import registry as eval_registry
from cc12m_jax.train import state as state_lib
from configs import synthetic_finetune
from tests.synthetic_world import make_world


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> str:
  return make_world(str(tmp_path_factory.mktemp("world")),
                    num_concepts=40, feature_dim=32, vocab_size=400, num_cc3m=50,
                    num_cc12m=1200, num_coco_train=300, num_coco_val=12, num_nocaps_val=30,
                    num_flickr=12)


def _config(data_dir: str, mode: str, steps: int):
  config = synthetic_finetune.get_config()
  config.mode = mode
  config.data.data_dir = data_dir
  config.data.global_batch_size = 32
  config.data.eval_global_batch_size = 32
  config.data.shuffle_buffer = 500
  config.data.max_caption_length = 16
  config.decode.max_decode_len = 16
  config.decode.beam_size = 3
  m = config.model
  m.emb_dim, m.num_heads, m.mlp_dim = 64, 4, 128
  m.num_encoder_layers = m.num_decoder_layers = 1
  config.optim.learning_rate = 2e-3
  config.optim.warmup_steps = 20
  config.train.num_train_steps = steps
  config.train.checkpoint_every_steps = steps
  config.train.log_every_steps = steps
  config.train.async_checkpointing = False
  config.eval.metrics = "CIDEr,BLEU-4,ROUGE-L"
  config.eval.num_examples_to_show = 0
  if mode == "pretrain":
    config.data.train_sources, config.data.exclude_ids_of = "cc12m", "cc3m"
  return config


def test_finetuned_captions_score_well_above_untrained(world, tmp_path):
  work = str(tmp_path)
  pretrain = _config(world, "pretrain", 250)
  config_rules.validate(pretrain)
  main.run(pretrain, os.path.join(work, "pretrain"))

  finetune = _config(world, "finetune", 120)
  finetune.train.init_from = os.path.join(work, "pretrain")
  config_rules.validate(finetune)
  main.run(finetune, os.path.join(work, "finetune"))

  evaluate = _config(world, "evaluate", 120)
  evaluate.data.eval_sources = "nocaps_val"
  evaluate.eval.checkpoint_dir = os.path.join(work, "finetune")
  config_rules.validate(evaluate)
  trained = main.run(evaluate, os.path.join(work, "evaluate"))["nocaps_val"]

  # The files the evaluation servers and humans read were written.
  out = os.path.join(work, "evaluate", "eval", "nocaps_val", "step_120")
  with open(os.path.join(out, "predictions.json")) as f:
    predictions = json.load(f)
  assert len(predictions) == 30 and all(p["caption"] for p in predictions)
  assert os.path.exists(os.path.join(out, "report.md"))

  # The same evaluation with freshly initialised parameters.
  setup = RunSetup(evaluate)
  untrained_params = state_lib.TrainSetup(setup, evaluate.optim).new_state(0)["params"]
  untrained = eval_registry.build(evaluate, setup)["nocaps_val"].run(untrained_params).metrics

  assert {f"{d}/CIDEr" for d in ("in-domain", "near-domain", "out-domain", "overall")} <= set(trained)
  assert trained["overall/CIDEr"] >= untrained["overall/CIDEr"] + 0.3, (trained, untrained)
  assert trained["overall/CIDEr"] >= 5 * max(untrained["overall/CIDEr"], 0.02)
  assert trained["overall/BLEU-4"] > untrained["overall/BLEU-4"]
