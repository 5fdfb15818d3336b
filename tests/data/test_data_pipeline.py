"""tf.data pipelines: host sharding, mixtures, sub-sampling, exclusion,
exactly-once eval, checkpointed position, bad records, device arrays."""
import collections
import os

import jax
import ml_collections
import numpy as np
import pytest
import tensorflow as tf

from cc12m_jax.data import eval_pipeline
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import pipeline as pipeline_lib
from cc12m_jax.data import records as records_lib
from data_fixtures import FEATURE_DIM, make_record


def data_config(tiny_world, **overrides) -> ml_collections.ConfigDict:
  cfg, _, _ = tiny_world
  data = ml_collections.ConfigDict(cfg.data.to_dict())
  data.global_batch_size = 8
  data.eval_global_batch_size = 8
  data.parse_batch_size = 16
  data.shuffle_buffer = 64
  for k, v in overrides.items():
    setattr(data, k, v)
  return data


def host_examples(it, n):
  """The first n (source index, image_id) examples of a TrainIterator."""
  out = []
  while len(out) < n:
    b = it.next_host_batch()
    out += list(zip(b["source_index"].tolist(), b["image_id"].tolist()))
  return out[:n]


def all_ids(data_dir, source):
  files = metadata_lib.shard_files(data_dir, source)
  return [i.decode() for i in pipeline_lib.read_image_ids(files)]


def _ids_per_host(files, pc):
  return [sorted(i.decode() for i in pipeline_lib.read_image_ids(files[h::pc]))
          for h in range(pc)]


@pytest.mark.parametrize("source,process_count", [
    ("cc12m", 2),   # 4 files: split by file
    ("cc3m", 3),    # 2 files < 3 hosts: split by example
])
def test_hosts_see_disjoint_data_covering_everything(tiny_world, source,
                                                     process_count):
  _, data_dir, _ = tiny_world
  everything = all_ids(data_dir, source)
  seen = []
  for h in range(process_count):
    it = pipeline_lib.make_train_iterator(
        data_config(tiny_world, train_sources=source, train_weights="1",
                    global_batch_size=6 * process_count),
        None, process_index=h, process_count=process_count)
    # Enough for two epochs of this host; the first epoch is its share.
    first = [e[1].decode() for e in host_examples(it, 2 * len(everything))]
    epoch = []
    for image_id in first:
      if image_id in epoch:
        break
      epoch.append(image_id)
    seen.append(set(epoch))
    assert it.skip_counts() == {r: 0 for r in records_lib.BAD_REASONS}
  for a in range(process_count):
    for b in range(a + 1, process_count):
      assert not seen[a] & seen[b]
  assert set().union(*seen) == set(everything)
  assert len(everything) == len(set(everything))


def test_mixture_proportions(tiny_world):
  it = pipeline_lib.make_train_iterator(
      data_config(tiny_world, train_sources="cc3m,cc12m", train_weights="1,3",
                  train_fractions="1,1", global_batch_size=64), None)
  counts = collections.Counter(s for s, _ in host_examples(it, 3200))
  assert abs(counts[0] / 3200 - 0.25) < 0.05   # cc3m
  assert abs(counts[1] / 3200 - 0.75) < 0.05   # cc12m


def test_subsampling_is_stable_and_nested():
  ids = tf.constant([f"web_{i:06d}" for i in range(20_000)])
  half = pipeline_lib.keep_fraction(ids, 0.5).numpy()
  quarter = pipeline_lib.keep_fraction(ids, 0.25).numpy()
  np.testing.assert_array_equal(
      half, pipeline_lib.keep_fraction(ids, 0.5).numpy())
  # The same id gives the same decision alone or in any batch.
  np.testing.assert_array_equal(
      quarter[::-1], pipeline_lib.keep_fraction(ids[::-1], 0.25).numpy())
  assert abs(half.mean() - 0.5) < 0.02 and abs(quarter.mean() - 0.25) < 0.02
  assert not (quarter & ~half).any()


def test_subsampled_training_keeps_only_selected_ids(tiny_world):
  _, data_dir, _ = tiny_world
  everything = all_ids(data_dir, "cc12m")
  keep = dict(zip(everything, pipeline_lib.keep_fraction(
      tf.constant(everything), 0.5).numpy()))
  it = pipeline_lib.make_train_iterator(
      data_config(tiny_world, train_sources="cc12m", train_fractions="0.5"),
      None)
  seen = {e[1].decode() for e in host_examples(it, 200)}
  assert seen == {i for i, k in keep.items() if k}
  assert it.filter_counts()["subsampled_out"] >= sum(not k for k in keep.values())


def test_cc3m_images_excluded_from_cc12m(tiny_world):
  _, data_dir, _ = tiny_world
  cc3m = set(all_ids(data_dir, "cc3m"))
  duplicates = [i for i in all_ids(data_dir, "cc12m") if i in cc3m]
  assert duplicates, "the synthetic CC12M must re-use some CC3M images"
  plain = pipeline_lib.make_train_iterator(
      data_config(tiny_world, train_sources="cc12m"), None)
  assert {e[1].decode() for e in host_examples(plain, 240)} & cc3m
  it = pipeline_lib.make_train_iterator(
      data_config(tiny_world, train_sources="cc12m",
                  exclude_ids_of="cc3m"), None)
  seen = {e[1].decode() for e in host_examples(it, 240)}
  assert not seen & cc3m
  assert len(seen) == 120 - len(duplicates)
  assert it.filter_counts()["excluded_id"] >= len(duplicates)


def test_eval_covers_each_example_exactly_once(tiny_world):
  data = data_config(tiny_world, eval_global_batch_size=8)
  n = 21  # tiny_config: num_nocaps_val
  indices, steps = [], []
  for h in range(2):
    ev = eval_pipeline.make_eval_iterator(data, "nocaps_val", None,
                                         process_index=h, process_count=2)
    assert len(ev.examples) == n
    assert all(len(e.captions) == 10 and e.domain for e in ev.examples)
    batches = list(ev.host_batches())
    steps.append(len(batches))
    assert len(batches) == ev.num_steps == 3  # ceil(ceil(21/2) / 4)
    for b in batches:
      assert b["example_mask"].shape == (4,)
      mask = b["example_mask"]
      assert (b["example_index"][~mask] == -1).all()
      assert not b["region_features"][~mask].any()
      for i, image_id in zip(b["example_index"][mask], b["image_id"][mask]):
        assert ev.examples[i].image_id == image_id.decode()
      indices += b["example_index"][mask].tolist()
  assert steps[0] == steps[1]
  assert sorted(indices) == list(range(n))


def test_eval_device_batches(tiny_world):
  mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(-1, 1, 1),
                           ("data", "fsdp", "model"))
  sharding = jax.sharding.NamedSharding(
      mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
  ev = eval_pipeline.make_eval_iterator(
      data_config(tiny_world, eval_global_batch_size=16), "coco_val",
      sharding)
  batches = list(ev)
  assert len(batches) == 1
  b = batches[0]
  assert set(b) == set(eval_pipeline.EVAL_DEVICE_KEYS)
  assert b["example_index"].shape == (16,)
  assert int(b["example_mask"].sum()) == 10
  assert b["decoder_targets"].shape == (16, 36)


def test_train_device_batches(tiny_world):
  mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(-1, 1, 1),
                           ("data", "fsdp", "model"))
  sharding = jax.sharding.NamedSharding(
      mesh, jax.sharding.PartitionSpec(("data", "fsdp")))
  it = pipeline_lib.make_train_iterator(
      data_config(tiny_world, train_sources="coco_train",
                  global_batch_size=16), sharding)
  b = next(it)
  assert set(b) == set(pipeline_lib.DEVICE_KEYS)
  shapes = {k: v.shape for k, v in b.items()}
  assert shapes["global_feature"] == (16, FEATURE_DIM)
  assert shapes["region_features"] == (16, 16, FEATURE_DIM)
  assert shapes["region_boxes"] == (16, 16, 5)
  assert shapes["tag_tokens"] == (16, 16, 4)
  assert shapes["decoder_inputs"] == (16, 36)
  for v in b.values():
    assert isinstance(v, jax.Array) and v.sharding == sharding
    assert len(v.addressable_shards) == len(jax.devices())
  assert bool(b["example_mask"].all())
  assert (np.asarray(b["decoder_inputs"])[:, 0] == 1).all()
  # The 5 captions of a COCO image are spread over the chunk, not 5 in a
  # row (16 in a row would cover only 4 images).
  assert len(set(it.next_host_batch()["image_id"].tolist())) > 8


def test_restored_iterator_resumes_at_the_next_example(tiny_world, tmp_path):
  data = data_config(tiny_world, train_sources="cc12m,coco_train",
                     train_weights="2,1", train_fractions="1,1", exclude_ids_of="cc3m")
  it = pipeline_lib.make_train_iterator(data, None)
  for _ in range(5):
    it.next_host_batch()
  it.save(str(tmp_path))
  counts = (it.skip_counts(), it.filter_counts())
  expected = [it.next_host_batch() for _ in range(6)]

  resumed = pipeline_lib.make_train_iterator(data, None)
  first_fresh = resumed.next_host_batch()
  assert first_fresh["image_id"].tolist() != expected[0]["image_id"].tolist()
  resumed.restore(str(tmp_path))
  assert (resumed.skip_counts(), resumed.filter_counts()) == counts
  for want in expected:
    got = resumed.next_host_batch()
    assert set(got) == set(want)
    for k in want:
      np.testing.assert_array_equal(got[k], want[k], err_msg=k)
  with pytest.raises(FileNotFoundError, match="host 0"):
    resumed.restore(str(tmp_path / "nowhere"))


@pytest.fixture
def bad_source(tiny_world, tmp_path):
  """A data dir with source 'mixed': 12 good records and one NaN record."""
  rng = np.random.default_rng(0)
  recs = [make_record(i, rng) for i in range(12)]
  g = rng.normal(size=FEATURE_DIM)
  g[0] = np.inf
  recs.insert(5, make_record(99, rng, global_feature=g))
  data_dir = str(tmp_path)
  records_lib.write_records(metadata_lib.shard_prefix(data_dir, "mixed"),
                            recs, 2)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="mixed", feature_dim=FEATURE_DIM, num_records=13,
      num_captions=26, num_shards=2))
  _, world_dir, _ = tiny_world
  return data_config(tiny_world, data_dir=data_dir, train_sources="mixed",
                     vocab_path=f"{world_dir}/vocab.txt")


def test_pipeline_lenient_skips_and_counts(bad_source):
  it = pipeline_lib.make_train_iterator(bad_source, None)
  seen = {e[1].decode() for e in host_examples(it, 24)}
  assert "img_0099" not in seen and len(seen) == 12
  counts = it.skip_counts()
  assert counts["non_finite"] >= 1
  assert sum(counts.values()) == counts["non_finite"]
  ev = eval_pipeline.make_eval_iterator(bad_source, "mixed", None)
  assert len(ev.examples) == 12
  assert ev.skip_counts()["non_finite"] == 1


def test_pipeline_strict_raises_naming_the_record(bad_source):
  bad_source.strict = True
  it = pipeline_lib.make_train_iterator(bad_source, None)
  with pytest.raises(records_lib.BadRecordError,
                     match="img_0099.*reason=non_finite"):
    host_examples(it, 24)
  with pytest.raises(records_lib.BadRecordError, match="img_0099"):
    eval_pipeline.make_eval_iterator(bad_source, "mixed", None)


def test_config_errors_name_the_key(tiny_world):
  with pytest.raises(ValueError, match="train_weights"):
    pipeline_lib.make_train_iterator(
        data_config(tiny_world, train_sources="cc3m,cc12m",
                    train_weights="1"), None)
  with pytest.raises(ValueError, match="global_batch_size"):
    pipeline_lib.make_train_iterator(
        data_config(tiny_world, global_batch_size=7), None,
        process_index=0, process_count=2)
  with pytest.raises(FileNotFoundError, match="nosuch"):
    pipeline_lib.make_train_iterator(
        data_config(tiny_world, train_sources="nosuch"), None)


def test_read_parallelism_auto_is_parallel_only_for_remote_paths():
  assert pipeline_lib.parallel_reads(["gs://bucket/a-00000-of-00002", "/local/b"], "auto")
  assert not pipeline_lib.parallel_reads(["/local/a", "relative/b"], "auto")
  assert pipeline_lib.parallel_reads(["/local/a"], "parallel")
  assert not pipeline_lib.parallel_reads(["gs://bucket/a"], "sequential")
  with pytest.raises(ValueError, match="read_parallelism='threads'"):
    pipeline_lib.parallel_reads(["/local/a"], "threads")


def test_parallel_and_sequential_reads_give_the_same_record_order(tmp_path):
  files = []
  for f in range(3):
    path = str(tmp_path / f"shard-{f}")
    with tf.io.TFRecordWriter(path) as writer:
      for i in range(5 + f):  # unequal lengths: the round-robin must drain each file alike
        writer.write(f"{f}/{i}".encode())
    files.append(path)
  orders = {}
  for mode in ("parallel", "sequential"):
    ds = pipeline_lib._host_records(files, 0, 1, shuffle=True, seed=7, num_parallel_reads=2,
                                read_parallelism=mode)
    orders[mode] = [r.decode() for r in ds.as_numpy_iterator()]
  assert orders["parallel"] == orders["sequential"]
  assert sorted(orders["parallel"]) == sorted(f"{f}/{i}" for f in range(3) for i in range(5 + f))


def test_sources_of_a_mixture_keep_their_own_feature_dtype(tiny_world,
                                                           tmp_path):
  rng = np.random.default_rng(7)
  recs = [make_record(i, rng, captions=[f"a dog number {i} ."])
          for i in range(16)]
  data_dir = str(tmp_path)
  for source, dtype in (("exact", "float32"), ("half", "float16")):
    records_lib.write_records(metadata_lib.shard_prefix(data_dir, source),
                              recs, 2, feature_dtype=dtype)
    metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
        source=source, feature_dim=FEATURE_DIM, num_records=16,
        num_captions=16, num_shards=2, feature_dtype=dtype))
  _, world_dir, _ = tiny_world
  cfg = data_config(tiny_world, data_dir=data_dir,
                    train_sources="exact,half", train_weights="1,1",
                    train_fractions="1,1", global_batch_size=8,
                    vocab_path=f"{world_dir}/vocab.txt")
  it = pipeline_lib.make_train_iterator(cfg, None)
  by_id = {r.image_id: r for r in recs}
  seen = set()
  for _ in range(8):
    b = it.next_host_batch()
    for row, image_id in enumerate(b["image_id"].tolist()):
      r = by_id[image_id.decode()]
      n = len(r.region_features)
      want = r.region_features
      if b["source_index"][row] == 1:   # 'half': float16 storage
        want = want.astype(np.float16).astype(np.float32)
      np.testing.assert_array_equal(b["region_features"][row, :n], want)
      seen.add(int(b["source_index"][row]))
  assert seen == {0, 1}
  assert it.skip_counts() == {r: 0 for r in records_lib.BAD_REASONS}


def _write_source(data_dir, name, recs, num_shards=2, **metadata):
  records_lib.write_records(metadata_lib.shard_prefix(data_dir, name), recs, num_shards)
  fields = dict(source=name, feature_dim=FEATURE_DIM, num_records=len(recs),
                num_captions=sum(len(r.captions) for r in recs), num_shards=num_shards)
  fields.update(metadata)
  metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(**fields))
  return metadata_lib.shard_files(data_dir, name)


@pytest.mark.parametrize("metadata, reason", [
    ({"feature_dim": FEATURE_DIM + 4}, "wrong_shape"),
    ({"feature_dtype": "float16"}, "wrong_shape"),
])
def test_all_bad_source_fails_with_its_skip_counts(tiny_world, tmp_path, metadata, reason):
  """metadata.json disagreeing with the records: every record is skipped.
  This used to read forever (issue 18, finding 2)."""
  rng = np.random.default_rng(11)
  _write_source(str(tmp_path), "wrong", [make_record(i, rng) for i in range(12)], **metadata)
  _, world_dir, _ = tiny_world
  cfg = data_config(tiny_world, data_dir=str(tmp_path), train_sources="wrong",
                    vocab_path=f"{world_dir}/vocab.txt")
  it = pipeline_lib.make_train_iterator(cfg, None)
  with pytest.raises(pipeline_lib.NoUsableRecordsError) as info:
    for _ in range(10_000):
      it.next_host_batch()
  message = str(info.value)
  assert "Training source 'wrong' gave no usable example" in message
  assert f"{reason} " in message and "num_records 12" in message
  assert "metadata.json" in message and "feature_dim" in message
  # Two passes (24 records) plus four chunks of slack (64): not much more.
  read = int(message.split("in the last ")[1].split(" ")[0])
  assert 24 < read <= 24 + 4 * 16 + 16
  # The same records, counted once; chunks parsed in parallel with the one
  # that raised may add theirs.
  assert read <= it.skip_counts()[reason] <= read + 4 * 16


def test_all_subsampled_out_source_fails_naming_the_filter(tiny_world):
  cfg = data_config(tiny_world, train_sources="cc3m", train_weights="1",
                    train_fractions="0.000001", exclude_ids_of="")
  it = pipeline_lib.make_train_iterator(cfg, None)
  with pytest.raises(pipeline_lib.NoUsableRecordsError,
                     match=r"subsampled_out \d+\..*left out on purpose.*train_fractions"):
    for _ in range(10_000):
      it.next_host_batch()


def test_mixture_fails_naming_the_bad_source(tiny_world, tmp_path):
  rng = np.random.default_rng(12)
  data_dir = str(tmp_path)
  _write_source(data_dir, "good", [make_record(i, rng) for i in range(12)])
  _write_source(data_dir, "wrong", [make_record(i, rng) for i in range(12)],
                feature_dtype="float16")  # the records are float32
  _, world_dir, _ = tiny_world
  cfg = data_config(tiny_world, data_dir=data_dir, train_sources="good,wrong",
                    train_weights="1,1", train_fractions="1,1",
                    vocab_path=f"{world_dir}/vocab.txt")
  it = pipeline_lib.make_train_iterator(cfg, None)
  with pytest.raises(pipeline_lib.NoUsableRecordsError,
                     match=r"source 'wrong' .*feature_dtype float16.*wrong_shape \d+\."):
    for _ in range(10_000):
      it.next_host_batch()


def _damage_middle(path):
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    f.seek(size // 2)
    f.write(b"\xff" * 8)


def test_corrupt_shard_named_in_strict_and_counted_in_lenient(tiny_world, tmp_path):
  """TensorFlow's DataLossError ('corrupted record at N') names no file (finding 7)."""
  rng = np.random.default_rng(13)
  data_dir = str(tmp_path)
  files = _write_source(data_dir, "damaged", [make_record(i, rng) for i in range(24)],
                        num_shards=3)
  _damage_middle(files[1])
  _, world_dir, _ = tiny_world
  cfg = data_config(tiny_world, data_dir=data_dir, train_sources="damaged",
                    vocab_path=f"{world_dir}/vocab.txt", shuffle_buffer=1)
  it = pipeline_lib.make_train_iterator(cfg, None)
  seen = {e[1].decode() for e in host_examples(it, 80)}
  intact = {f"img_{i:04d}" for i in range(24) if i % 3 != 1}
  assert intact <= seen and len(seen) < 24  # the damaged shard's tail is gone
  counts = it.skip_counts()  # once: the prefetching reader keeps counting between calls
  assert counts["corrupt_shard"] >= 1 and sum(counts.values()) == counts["corrupt_shard"]
  ev = eval_pipeline.make_eval_iterator(cfg, "damaged", None)
  assert intact <= {e.image_id for e in ev.examples} and len(ev.examples) < 24
  assert ev.skip_counts()["corrupt_shard"] == 1

  cfg.strict = True
  it = pipeline_lib.make_train_iterator(cfg, None)
  with pytest.raises(records_lib.CorruptShardError, match=f"file='{files[1]}' readable up to"):
    host_examples(it, 80)
  with pytest.raises(records_lib.CorruptShardError, match=f"file='{files[1]}'"):
    eval_pipeline.make_eval_iterator(cfg, "damaged", None)
  # Exclusion ids are read strictly in either mode (a lost id lets its image back in).
  with pytest.raises(records_lib.CorruptShardError, match=f"file='{files[1]}'"):
    pipeline_lib.read_image_ids(files)


def test_eval_source_with_no_usable_record_is_an_error(tiny_world, tmp_path):
  rng = np.random.default_rng(14)
  _write_source(str(tmp_path), "wrong", [make_record(i, rng) for i in range(5)],
                feature_dim=FEATURE_DIM + 1)
  _, world_dir, _ = tiny_world
  cfg = data_config(tiny_world, data_dir=str(tmp_path), vocab_path=f"{world_dir}/vocab.txt")
  with pytest.raises(ValueError, match=r"eval source 'wrong' .* no usable record.*'wrong_shape': 5"):
    eval_pipeline.make_eval_iterator(cfg, "wrong", None)
