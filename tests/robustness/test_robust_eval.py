"""Skipped eval records are reported (issue 18, finding 6): an eval source of
12 records with one NaN feature used to log 'Evaluated 11 images' with a
report of 0 missing."""
import json
import logging

import jax
import numpy as np
import pytest

from cc12m_jax.core.run_setup import RunSetup
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.data.text import special_tokens
from cc12m_jax.evaluation import captioner_eval
from cc12m_jax.train import state as state_lib
from configs import base

WORDS = ["a", "dog", "cat", "on", "the", "grass"]
D = 8


def _write_source(data_dir: str) -> None:
  rng = np.random.default_rng(0)
  records = []
  for i in range(12):
    feature = rng.normal(size=D).astype(np.float32)
    if i == 5:
      feature[3] = np.nan
    records.append(records_lib.FeatureRecord(
        image_id=f"img{i}", source="nocaps_val", global_feature=feature,
        region_features=rng.normal(size=(2, D)).astype(np.float32),
        region_boxes=np.array([[0.1, 0.1, 0.5, 0.5], [0.2, 0.3, 0.9, 0.8]], np.float32),
        tags=["dog"], tag_scores=np.array([0.9], np.float32),
        captions=["a dog on the grass", "a cat"], width=640, height=480,
        domain=["in-domain", "near-domain", "out-domain"][i % 3]))
  records_lib.write_records(metadata_lib.shard_prefix(data_dir, "nocaps_val"), records, 2)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="nocaps_val", feature_dim=D, num_records=12, num_captions=24, num_shards=2))
  with open(f"{data_dir}/vocab.txt", "w") as f:
    f.write("\n".join(list(special_tokens.RESERVED_TOKENS) + WORDS) + "\n")


def _config(data_dir: str):
  config = base.get_config()
  config.data.data_dir = data_dir
  config.data.train_sources = "nocaps_val"  # only read for the feature dimension
  config.data.global_batch_size = config.data.eval_global_batch_size = 4
  config.data.max_caption_length, config.data.max_tag_tokens = 8, 2
  config.model.emb_dim, config.model.num_heads, config.model.mlp_dim = 16, 2, 32
  config.model.num_encoder_layers = config.model.num_decoder_layers = 1
  config.decode.beam_size, config.decode.max_decode_len = 1, 3
  config.eval.metrics = "CIDEr"
  config.mesh.data = 4
  return config


def test_a_skipped_eval_record_is_in_the_report_and_the_metrics(tmp_path, caplog):
  _write_source(str(tmp_path))
  config = _config(str(tmp_path))
  setup = RunSetup(config, jax.devices()[:4])
  evaluator = captioner_eval.CaptionEvaluator(config, setup, "nocaps_val")
  params = state_lib.TrainSetup(setup, config.optim).new_state(0)["params"]
  caplog.set_level(logging.INFO)
  result = evaluator.run(params)
  assert len(result.predictions) == 11
  assert result.report["num_skipped"]["non_finite"] == 1
  assert sum(result.report["num_skipped"].values()) == 1
  assert result.metrics["skipped/non_finite"] == 1.0 and result.metrics["skipped/bad_utf8"] == 0.0
  paths = result.write(str(tmp_path / "out"))
  with open(paths["report"]) as f:
    assert json.load(f)["num_skipped"]["non_finite"] == 1
  assert "skipped records of the eval source (not scored): non_finite 1" in result.summary(0)
  assert any("Evaluated 11 images of nocaps_val (1 records skipped, non_finite 1)"
             in r.getMessage() for r in caplog.records)


def test_strict_data_makes_a_skipped_eval_record_an_error(tmp_path):
  _write_source(str(tmp_path))
  config = _config(str(tmp_path))
  config.data.strict = True
  with pytest.raises(records_lib.BadRecordError, match="image_id='img5'.*reason=non_finite"):
    captioner_eval.CaptionEvaluator(config, RunSetup(config, jax.devices()[:4]), "nocaps_val")
