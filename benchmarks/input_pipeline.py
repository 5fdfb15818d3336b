"""Train input-pipeline throughput (examples/sec), device arrays included.

    python benchmarks/input_pipeline.py [--num_records=4096 --batch_size=256]
        [--feature_dtype=float16|float32]

Writes records shaped like real CC12M features (D=512, 16 regions, 16 tags,
~36-token alt-text captions; features stored as the library's default for
new datasets, float16, unless --feature_dtype says otherwise) to a
temporary directory, builds a vocabulary,
then measures
  1. a bare reference: TFRecord read -> batch -> parse_example + decode_raw
     + whitespace split (no shuffle, no validation, no sub-words, no device);
  2. the real pipeline (cc12m_jax.data.pipeline.make_train_iterator: shuffle,
     validation, caption expansion, WordPiece tokenization, masks) with every
     batch placed on the devices as global jax.Arrays.
The last line is `input_pipeline_examples_per_sec: <value> examples/s`.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from configs import base  # noqa: E402
from cc12m_jax.data import metadata as metadata_lib  # noqa: E402
from cc12m_jax.data import pipeline as pipeline_lib  # noqa: E402
from cc12m_jax.data import records as records_lib  # noqa: E402
from cc12m_jax.data.synthetic import captions as captions_lib  # noqa: E402
from cc12m_jax.data.synthetic import world as world_lib  # noqa: E402
from cc12m_jax.data.text import build_vocab as build_vocab_lib  # noqa: E402

_NUM_RECORDS = flags.DEFINE_integer("num_records", 4096, "Records written.")
_BATCH = flags.DEFINE_integer("batch_size", 256, "Global batch size.")
_SECONDS = flags.DEFINE_float("seconds", 5.0, "Measuring time per round.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Alternating measuring rounds.")
_FEATURE_DTYPE = flags.DEFINE_enum(
    "feature_dtype", base.synthetic_config().feature_dtype,
    sorted(records_lib.FEATURE_DTYPES),
    "Storage dtype of the global / region features (default: the library's "
    "default for new datasets, config.synthetic.feature_dtype).")
_DIM = 512
_SOURCE = "bench"


def _write_data(data_dir: str, num_records: int, feature_dtype: str) -> None:
  world = world_lib.World(600, _DIM, seed=0)
  rng = np.random.default_rng(0)

  def records():
    for i in range(num_records):
      scene = world.sample_scene(rng)
      text, _ = captions_lib.cc12m_style(world, scene, rng)
      text += " " + captions_lib.coco_style(world, scene, rng)  # ~36 tokens
      boxes = np.sort(rng.uniform(size=(16, 2, 2)), axis=1)     # [16, 2, 2]
      yield records_lib.FeatureRecord(
          image_id=f"bench_{i:07d}", source=_SOURCE,
          global_feature=rng.normal(size=_DIM).astype(np.float32),
          region_features=rng.normal(size=(16, _DIM)).astype(np.float32),
          region_boxes=boxes.transpose(0, 2, 1).reshape(16, 4)[:, [0, 2, 1, 3]],
          tags=[world.concepts[int(c)].name
                for c in rng.choice(600, 16, replace=False)],
          tag_scores=rng.uniform(size=16).astype(np.float32),
          captions=[text], width=640, height=480)

  num_shards = 8
  records_lib.write_records(metadata_lib.shard_prefix(data_dir, _SOURCE),
                            records(), num_shards, feature_dtype)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source=_SOURCE, feature_dim=_DIM, num_records=num_records,
      num_captions=num_records, num_shards=num_shards,
      feature_dtype=feature_dtype))
  build_vocab_lib.build_vocab(data_dir, [_SOURCE], 4000)


def _bare_reference(data_dir: str, batch: int, feature_dtype: str):
  """Iterator of the bare read: batch -> parse -> decode_raw -> split."""
  spec = {"global_feature": tf.io.FixedLenFeature([], tf.string),
          "region_features": tf.io.FixedLenFeature([], tf.string),
          "region_boxes": tf.io.FixedLenFeature([], tf.string),
          "tag_scores": tf.io.FixedLenFeature([], tf.string),
          "tags": tf.io.RaggedFeature(tf.string),
          "captions": tf.io.RaggedFeature(tf.string)}

  def parse(serialized):
    ex = tf.io.parse_example(serialized, spec)
    out = {k: tf.io.decode_raw(ex[k], tf.float32)
           for k in ("region_boxes", "tag_scores")}
    out["global_feature"] = records_lib.decode_features(
        ex["global_feature"], _DIM, feature_dtype)
    out["region_features"] = records_lib.decode_features(
        ex["region_features"], 16 * _DIM, feature_dtype)
    out["words"] = tf.strings.split(ex["captions"].flat_values).to_tensor()
    out["tags"] = ex["tags"].to_tensor()
    return out

  files = metadata_lib.shard_files(data_dir, _SOURCE)
  ds = (tf.data.TFRecordDataset(files).repeat().batch(batch)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE))
  return iter(ds)


def _measure(step, batch: int, seconds: float) -> tuple[float, float]:
  """(examples/s wall, examples per CPU-second of this process)."""
  for _ in range(5):  # warm-up: fill buffers, trace functions
    step()
  count = 0
  start, cpu = time.perf_counter(), time.process_time()
  while time.perf_counter() - start < seconds:
    step()
    count += batch
  wall = time.perf_counter() - start
  return count / wall, count / max(time.process_time() - cpu, 1e-9)


def main(argv):
  del argv
  batch = _BATCH.value
  with tempfile.TemporaryDirectory() as data_dir:
    t = time.perf_counter()
    _write_data(data_dir, _NUM_RECORDS.value, _FEATURE_DTYPE.value)
    print(f"wrote {_NUM_RECORDS.value} records (D={_DIM}, 16 regions, "
          f"16 tags, {_FEATURE_DTYPE.value} features) in "
          f"{time.perf_counter() - t:.1f}s")

    bare_it = _bare_reference(data_dir, batch, _FEATURE_DTYPE.value)

    cfg = base.get_config().data
    cfg.data_dir = data_dir
    cfg.train_sources = _SOURCE
    cfg.global_batch_size = batch
    devices = np.array(jax.devices())
    mesh = jax.sharding.Mesh(devices.reshape(-1, 1, 1),
                             ("data", "fsdp", "model"))
    sharding = jax.sharding.NamedSharding(
        mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
    it = pipeline_lib.make_train_iterator(cfg, sharding)

    # Rounds alternate between the two, so load from other processes on a
    # shared machine hits both alike; the median round is reported.
    bare, real = [], []
    for _ in range(_ROUNDS.value):
      bare.append(_measure(lambda: next(bare_it), batch, _SECONDS.value))
      real.append(_measure(lambda: jax.block_until_ready(next(it)), batch,
                           _SECONDS.value))
    median = lambda xs, i: float(np.median([x[i] for x in xs]))
    cores = os.cpu_count()
    print(f"bare batch-then-parse read (whitespace split): "
          f"{median(bare, 0):,.0f} examples/s "
          f"({median(bare, 1) * cores:,.0f} examples/s on {cores} idle cores "
          f"by CPU time)")
    print(f"real pipeline: {median(real, 0):,.0f} examples/s "
          f"({median(real, 1) * cores:,.0f} examples/s on {cores} idle cores "
          f"by CPU time); real / bare = "
          f"{median(real, 0) / median(bare, 0):.2f}")
    print(f"devices: {len(devices)} x {devices[0].platform}; "
          f"global batch {batch}; skipped: {it.skip_counts()}")
    rate = median(real, 0)
  print(f"input_pipeline_examples_per_sec: {rate:.0f} examples/s")


if __name__ == "__main__":
  app.run(main)
