"""End to end: the synthetic world in public formats -> import -> train ->
evaluate, plus the TFDS view of the imported records.

The world (tests/data/conftest.py) is exported (conftest.py), and the
sources the paper's pre-training needs are imported through the importers:
CC3M and CC12M from CC TSVs (their ids derived from the URLs), COCO from
COCO captions JSON, nocaps from nocaps JSON, features from bottom-up TSVs
and tags from JSONL. Training and evaluation go through the command line
(`python -m cc12m_jax.main`), whose flags are the stable interface.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow_datasets as tfds

from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import pipeline as pipeline_lib
from cc12m_jax.data import tfds_builder
from cc12m_jax.data.synthetic import export as export_lib
from importer_fixtures import (EXPORT_FIELDS, assert_same_records, counts,
                               records_by_id, run_import)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
CAPTIONS = {"cc3m": ("cc", "cc3m.tsv"), "cc12m": ("cc", "cc12m.tsv"),
            "coco_train": ("coco", "coco_train.json"), "coco_val": ("coco", "coco_val.json"),
            "nocaps_val": ("nocaps", "nocaps_val.json")}


@pytest.fixture(scope="module")
def imported(public_world, tmp_path_factory):
  """(world dir, imported data_dir, {source: report})."""
  world, pub, d = public_world
  out = str(tmp_path_factory.mktemp("imported"))
  reports = {}
  for source, (fmt, captions) in CAPTIONS.items():
    last = source == list(CAPTIONS)[-1]
    reports[source] = run_import(
        out, fmt, source, [os.path.join(pub, "captions", captions)],
        [os.path.join(pub, "features", f"{source}.tsv")], feature_dim=d,
        tsv_fields=EXPORT_FIELDS, tags=[os.path.join(pub, "tags", f"{source}.jsonl")],
        vocab_sources=["cc3m", "cc12m", "coco_train"] if last else [])
  return world, out, reports


def test_imports_equal_the_generator_records(imported):
  world, out, reports = imported
  for source in CAPTIONS:
    expected = records_by_id(world, source)
    if source == "cc12m":  # a CC12M image that is also in CC3M is one image
      assert len({export_lib.exported_id(source, i) for i in expected}) == len(expected)
    assert counts(reports[source])["joined"] == len(expected)
    assert not any(k.startswith("bad_rows/") for k in counts(reports[source]))
    assert_same_records(expected, records_by_id(out, source), source=source,
                        id_of=lambda i, s=source: export_lib.exported_id(s, i))
  meta = metadata_lib.load_metadata(out, "nocaps_val")
  assert (meta.num_records, meta.num_captions, meta.feature_dtype) == (21, 210, "float16")
  assert os.path.exists(os.path.join(out, "vocab.txt"))


def test_cc3m_exclusion_finds_the_shared_images(imported):
  world, out, _ = imported
  shared = {export_lib.exported_id("cc12m", i) for i in records_by_id(world, "cc12m")
            if i.startswith("cc3m_")}  # the generator's re-used CC3M images
  assert shared
  cc3m = set(pipeline_lib.read_image_ids(metadata_lib.shard_files(out, "cc3m")))
  cc12m = set(pipeline_lib.read_image_ids(metadata_lib.shard_files(out, "cc12m")))
  assert {i.decode() for i in cc3m & cc12m} == shared


def test_tfds_load_with_the_documented_splits(imported, tmp_path):
  _, out, _ = imported
  builder = tfds_builder.build("coco", manual_dir=out, data_dir=str(tmp_path))
  assert {s: i.num_examples for s, i in builder.info.splits.items()} == {
      "train": 30, "validation": 10}
  assert builder.info.metadata["feature_dim"] == 8
  ds = tfds.load("cc12m_feature_records/coco", split="validation", data_dir=str(tmp_path))
  expected = records_by_id(out, "coco_val")
  for example in tfds.as_numpy(ds):
    want = expected.pop(example["image_id"].decode())
    np.testing.assert_array_equal(example["region_features"], want.region_features)
    np.testing.assert_array_equal(example["region_boxes"], want.region_boxes)
    assert [c.decode() for c in example["captions"]] == list(want.captions)
    assert example["domain"] == 0 and example["width"] == want.width
  assert not expected


def test_train_and_evaluate_on_imported_data(imported, tmp_path):
  _, out, _ = imported
  workdir = str(tmp_path / "work")
  overrides = {
      "data.data_dir": out, "train.num_train_steps": 2, "train.eval_every_steps": 2,
      "train.checkpoint_every_steps": 2, "train.log_every_steps": 1,
      "train.async_checkpointing": False, "data.global_batch_size": 8,
      "data.eval_global_batch_size": 8, "data.shuffle_buffer": 64,
      "data.max_caption_length": 12, "decode.max_decode_len": 12, "decode.beam_size": 2,
      "model.emb_dim": 32, "model.num_heads": 2, "model.mlp_dim": 64,
      "model.num_encoder_layers": 1, "model.num_decoder_layers": 1,
      "eval.metrics": "CIDEr", "eval.num_examples_to_show": 0}
  command = [sys.executable, "-m", "cc12m_jax.main",
             "--config=configs/synthetic_pretrain.py", f"--workdir={workdir}"]
  command += [f"--config.{k}={v}" for k, v in overrides.items()]
  # One CPU device: the smallest compile (the test suite's 8 simulated ones are
  # for sharding tests).
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1",
             JAX_PLATFORMS="cpu")
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600,
                        env=env)
  assert done.returncode == 0, done.stderr[-3000:]
  reports = [os.path.join(d, f) for d, _, files in os.walk(workdir) for f in files
             if f == "report.json"]
  assert len(reports) == 1 and "nocaps_val" in reports[0], reports
  with open(reports[0]) as f:
    report = json.load(f)
  assert report["num_images"]["overall"] == 21   # every nocaps_val image decoded
  assert np.isfinite(report["scores"]["overall"]["CIDEr"])
