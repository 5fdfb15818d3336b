"""config_rules.validate: every shipped config passes; each cross-field rule names its key."""
import importlib
import pathlib

import pytest

from cc12m_jax import config_rules
from cc12m_jax.data import sources as sources_lib
from configs import synthetic_finetune, synthetic_pretrain, vlm_synthetic_finetune

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Shared bases (paper_pretrain, vlm_pretrain) take arguments; the variants built on them are here.
RUN_CONFIGS = sorted(p.stem for p in (ROOT / "configs").glob("*.py")
                     if p.stem not in ("__init__", "base", "paper_pretrain", "vlm_pretrain", "synthetic_data")
                     and not p.stem.startswith("curation_"))


@pytest.mark.parametrize("name", RUN_CONFIGS)
def test_every_shipped_run_config_is_valid(name):
  config = importlib.import_module(f"configs.{name}").get_config()
  if config.mode == "finetune":
    config.train.init_from = "/pretrained"  # given on the command line
  # The paper's configs are for 32-core slices; any device count dividing the batch works.
  config_rules.validate(config, num_devices=8)


def _error(config, num_devices=8) -> str:
  with pytest.raises(config_rules.ConfigError) as err:
    config_rules.validate(config, num_devices=num_devices)
  return str(err.value)


@pytest.mark.parametrize("key, value, expected", [
    ("data.eval_global_batch_size", 0, "config.data.eval_global_batch_size: must be > 0"),
    ("data.shuffle_buffer", -1, "config.data.shuffle_buffer: must be >= 1"),
    ("data.num_parallel_reads", 0, "config.data.num_parallel_reads: must be > 0"),
    ("data.max_tag_tokens", 0, "config.data.max_tag_tokens: must be > 0"),
    ("data.parse_batch_size", 0, "config.data.parse_batch_size: must be > 0"),
    ("train.dropout_rng", "philox", "config.train.dropout_rng: 'philox' is not one of"),
    ("decode.beam_size", 0, "config.decode.beam_size=0; must be >= 1"),
    ("eval.evaluator", "bleu", "config.eval.evaluator: 'bleu' is not one of"),
    ("eval.evaluator", "retrieval", "the 'retrieval' evaluator cannot score a 'ic' model"),
    ("eval.metrics", "CIDEr,BLUE", "config.eval.metrics='CIDEr,BLUE': unknown ['BLUE']"),
    ("eval.checkpoint_step", -2, "config.eval.checkpoint_step: must be >= 0, or -1"),
])
def test_a_bad_value_names_its_key(key, value, expected):
  config = synthetic_pretrain.get_config()
  section, field = key.split(".")
  config[section][field] = value
  assert expected in _error(config)


def test_batch_must_divide_over_the_mesh():
  config = synthetic_pretrain.get_config()
  config.data.global_batch_size = 12
  assert ("config.data.global_batch_size: 12 is not divisible by the mesh's batch shards "
          "(data x fsdp = 8)") in _error(config)
  config.data.global_batch_size = 16
  config.mesh.model = 3
  assert "config.mesh" in _error(config)  # 8 devices do not split into model=3
  config.mesh.model = 1
  config_rules.validate(config, num_devices=8)
  config.data.eval_global_batch_size = 36
  assert "config.data.eval_global_batch_size: 36" in _error(config)


def test_one_weight_and_fraction_per_source_in_the_rules_and_the_pipeline():
  config = synthetic_pretrain.get_config()
  config.data.train_sources, config.data.train_weights = "cc3m,cc12m", "1,1"
  config.data.train_fractions = "0.5"
  assert "config.data.train_fractions has 1 values for 2 train_sources" in _error(config)
  with pytest.raises(ValueError, match="train_fractions has 1 values"):
    sources_lib.train_sources(config.data)


def test_selection_metric_names_a_source_and_a_metric_the_evaluator_reports():
  config = synthetic_finetune.get_config()  # eval sources coco_val, nocaps_val
  config.train.init_from = "/pretrained"
  config.train.eval_every_steps = 100  # evaluating while training: best/ selects on the metric
  config.eval.selection_metric = "out-domain/CIDEr"
  assert "does not say which of the eval sources ['coco_val', 'nocaps_val']" in _error(config)
  config.eval.selection_metric = "nocaps_val/out-domain/CIDER"
  assert "reports no metric 'out-domain/CIDER'" in _error(config)
  config.eval.selection_metric = "nocaps_val/out-domain/CIDEr"
  config_rules.validate(config, num_devices=8)
  config.eval.select_checkpoint, config.eval.selection_metric = True, ""
  assert "config.eval.select_checkpoint: needs config.eval.selection_metric" in _error(config)
  # An evaluation that selects nothing ignores the metric: the fine-tuning
  # config (selecting on coco_val) evaluates nocaps_val alone.
  config = synthetic_finetune.get_config()
  config.mode, config.data.eval_sources = "evaluate", "nocaps_val"
  config_rules.validate(config, num_devices=8)
  config.eval.select_checkpoint = True
  assert "reports no metric 'coco_val/overall/CIDEr'" in _error(config)
  # A step budget caps a selection; without one it would be ignored.
  config.data.eval_sources = "coco_val,nocaps_val"
  config.eval.selection_max_step = 300
  config_rules.validate(config, num_devices=8)
  config.eval.select_checkpoint = False
  assert "config.eval.selection_max_step: =300 caps the steps a selection" in _error(config)
  config.eval.select_checkpoint, config.eval.selection_max_step = True, -1
  assert "config.eval.selection_max_step: must be >= 0" in _error(config)


def test_retrieval_selection_and_predict_mode():
  config = vlm_synthetic_finetune.get_config()
  config.train.init_from = "/pretrained"
  config_rules.validate(config, num_devices=8)
  config.eval.selection_metric = "flickr_val/out-domain/CIDEr"
  assert "the 'retrieval' evaluator reports no metric 'out-domain/CIDEr'" in _error(config)
  config.eval.selection_metric = "flickr_val/image_retrieval/R@1"
  config.mode = "predict"
  assert "config.mode: predict writes captions" in _error(config)


def test_eval_sources_needed_when_evaluating():
  config = synthetic_pretrain.get_config()
  config.data.eval_sources = ""
  config.eval.selection_metric = ""
  config_rules.validate(config, num_devices=8)  # training without evaluation
  config.train.eval_every_steps = 100
  assert "config.data.eval_sources: names no source" in _error(config)
