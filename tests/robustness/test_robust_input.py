"""Input faults seen by the trainer: an all-bad source fails in bounded time
(issue 18, finding 2), SIGTERM is honoured while the input waits, skipped
records are metrics (finding 6)."""
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time

import numpy as np
import tensorflow as tf

from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.train import trainer
from tests.train.conftest import REPO_ROOT, main_command, trainer_config


def _world_copy(tiny_world, tmp_path, *sources):
  """A data dir with the tiny world's vocabulary and copies of `sources`."""
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  shutil.copy(os.path.join(tiny_world, "vocab.txt"), data_dir / "vocab.txt")
  for source in sources:
    shutil.copytree(os.path.join(tiny_world, source), data_dir / source)
  return str(data_dir)


def test_all_bad_source_fails_in_bounded_time(tiny_world, tmp_path):
  """metadata.json's feature_dim does not match the records: every record is
  wrong_shape. This used to spin at 99% CPU forever, deaf to SIGTERM."""
  data_dir = _world_copy(tiny_world, tmp_path, "cc12m")
  path = os.path.join(data_dir, "cc12m", "metadata.json")
  meta = json.loads(open(path).read())
  meta["feature_dim"] = 24  # the records hold 16
  with open(path, "w") as f:
    json.dump(meta, f)
  config = trainer_config(data_dir)
  config.data.exclude_ids_of = ""
  start = time.monotonic()
  result = subprocess.run(main_command(tmp_path / "run", config), capture_output=True,
                          text=True, timeout=300, cwd=REPO_ROOT)
  print(f"failed after {time.monotonic() - start:.1f} s (start-up included)")
  assert result.returncode != 0
  last = result.stderr.splitlines()[-1]
  assert last.startswith("cc12m_jax.data.pipeline.NoUsableRecordsError: Training source 'cc12m' "
                         "gave no usable example"), result.stderr[-3000:]
  assert f"{path} says num_records {meta['num_records']}, feature_dim 24" in last
  assert re.search(r"Not kept, by reason: wrong_shape \d+\.", last), last
  assert not os.path.exists(tmp_path / "run" / "checkpoints" / "0")


def test_sigterm_while_the_input_waits_exits_cleanly(tiny_world, tmp_path):
  """A shard that never delivers (a FIFO nobody writes: a stalled read): the
  main thread waits on input, SIGTERM must still stop the run."""
  data_dir = _world_copy(tiny_world, tmp_path)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="stalled", feature_dim=16, num_records=10, num_captions=10, num_shards=1))
  os.mkfifo(records_lib.shard_paths(metadata_lib.shard_prefix(data_dir, "stalled"), 1)[0])
  config = trainer_config(data_dir)
  config.data.train_sources, config.data.exclude_ids_of = "stalled", ""
  log_path = tmp_path / "log"
  with open(log_path, "w") as log:
    proc = subprocess.Popen(main_command(tmp_path / "run", config), stdout=log,
                            stderr=subprocess.STDOUT, cwd=REPO_ROOT)
  try:
    deadline = time.monotonic() + 300
    while "feature dim" not in log_path.read_text():  # the trainer's last line before input
      assert proc.poll() is None, log_path.read_text()[-3000:]
      assert time.monotonic() < deadline
      time.sleep(0.2)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    start = time.monotonic()
    returncode = proc.wait(timeout=trainer.INPUT_GRACE_S + 60)
    took = time.monotonic() - start
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  log = log_path.read_text()
  assert returncode == 0, log[-3000:]
  assert "SIGTERM received" in log
  assert ("Preempted while waiting for input (no batch 10 s after SIGTERM): no checkpoint for "
          "step 0; the run resumes from step 0 (none was written); exiting.") in log, log[-3000:]
  assert took < trainer.INPUT_GRACE_S + 30
  assert not os.listdir(tmp_path / "run" / "checkpoints")


def _events(workdir) -> dict[str, dict[int, float]]:
  """{tag: {step: value}} of the run's train/ scalars in TensorBoard."""
  out: dict[str, dict[int, float]] = {}
  for path in tf.io.gfile.glob(os.path.join(str(workdir), "events.out.tfevents.*")):
    for record in tf.data.TFRecordDataset(path):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.tag.startswith("train/"):
          number = (tf.make_ndarray(value.tensor).item() if value.HasField("tensor")
                    else value.simple_value)
          out.setdefault(value.tag, {})[event.step] = float(number)
  return out


def test_skipped_records_are_training_metrics(tiny_world, tmp_path, caplog):
  data_dir = _world_copy(tiny_world, tmp_path)
  rng = np.random.default_rng(0)
  good = next(records_lib.read_source_records(tiny_world, "cc12m"))
  recs = []
  for i in range(24):
    g = good.global_feature.copy()
    if i % 4 == 0:
      g[0] = np.nan
    recs.append(records_lib.FeatureRecord(
        image_id=f"r{i}", source="mixed", global_feature=g,
        region_features=good.region_features, region_boxes=good.region_boxes,
        tags=good.tags, tag_scores=good.tag_scores, captions=good.captions[:1],
        width=good.width, height=good.height))
  rng.shuffle(recs)
  records_lib.write_records(metadata_lib.shard_prefix(data_dir, "mixed"), recs, 2)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="mixed", feature_dim=16, num_records=24, num_captions=24, num_shards=2))
  config = trainer_config(data_dir, num_train_steps=4, log_every_steps=2)
  config.data.train_sources, config.data.exclude_ids_of = "mixed", ""
  caplog.set_level(logging.INFO)
  trainer.train_and_evaluate(config, str(tmp_path / "run"))
  events = _events(tmp_path / "run")
  skipped = events["train/skipped/non_finite"]
  assert sorted(skipped) == [2, 4] and 0 < skipped[2] <= skipped[4]
  assert events["train/skipped/wrong_shape"][4] == 0
  assert events["train/filtered/excluded_id"][4] == 0
  progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step 4: loss")]
  assert progress and f"| skipped {int(skipped[4])} (non_finite {int(skipped[4])})" in progress[0]
