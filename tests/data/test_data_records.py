"""Feature-record schema: round trip, fixed shapes, every bad-record reason,
damaged shards, metadata.json checks."""
import os

import numpy as np
import pytest
import tensorflow as tf

from cc12m_jax.data import records as records_lib
from data_fixtures import FEATURE_DIM, make_record

D = FEATURE_DIM


def _parse(paths):
  ds = tf.data.TFRecordDataset(paths).batch(64)
  return records_lib.parse_batch(next(iter(ds)), D)


def test_round_trip_and_fixed_shapes(tmp_path):
  rng = np.random.default_rng(0)
  recs = [make_record(i, rng) for i in range(7)]
  recs[3] = make_record(3, rng, domain="out-domain", tags=[],
                        tag_scores=np.zeros([0], np.float32))
  paths = records_lib.write_records(str(tmp_path / "r"), recs, num_shards=3)
  assert len(paths) == 3
  back = {r.image_id: r for r in records_lib.read_records(paths, D)}
  assert sorted(back) == sorted(r.image_id for r in recs)
  for r in recs:
    b = back[r.image_id]
    np.testing.assert_array_equal(b.global_feature, r.global_feature)
    np.testing.assert_array_equal(b.region_features, r.region_features)
    np.testing.assert_allclose(b.region_boxes, r.region_boxes)
    np.testing.assert_allclose(b.tag_scores, r.tag_scores)
    assert (b.tags, b.captions, b.domain, b.width, b.height) == (
        list(r.tags), list(r.captions), r.domain, r.width, r.height)

  p = _parse(paths)
  assert p["region_features"].shape == (7, 16, D)
  assert p["region_boxes"].shape == (7, 16, 5)
  assert p["tags"].shape == (7, 16) and p["tag_mask"].shape == (7, 16)
  ids = [i.decode() for i in p["image_id"].numpy()]
  for row, image_id in enumerate(ids):
    r = recs[int(image_id[-4:])]
    n = len(r.region_boxes)
    mask = p["region_mask"][row].numpy()
    assert mask[:n].all() and not mask[n:].any()
    boxes = p["region_boxes"][row].numpy()
    area = (r.region_boxes[:, 2] - r.region_boxes[:, 0]) * (
        r.region_boxes[:, 3] - r.region_boxes[:, 1])
    np.testing.assert_allclose(boxes[:n, 4], area, rtol=1e-6)
    assert not boxes[n:].any() and not p["region_features"][row, n:].numpy().any()
    assert p["tag_mask"][row].numpy().sum() == len(r.tags)
  assert p["domain"].numpy()[ids.index("img_0003")] == 3
  assert not p["reason"].numpy().any()


def _bad_examples(rng):
  """reason -> serialized tf.train.Example of a record bad for that reason."""
  def ser(record):
    return records_lib.record_to_example(record)

  bad = {}
  ex = ser(make_record(100, rng))
  del ex.features.feature["width"]
  bad["missing_field"] = ex
  bad["wrong_shape"] = ser(make_record(
      101, rng, region_features=rng.normal(size=(2, D)),
      region_boxes=np.array([[0.1, 0.1, 0.5, 0.5]])))
  g = rng.normal(size=D)
  g[3] = np.nan
  bad["non_finite"] = ser(make_record(102, rng, global_feature=g))
  bad["box_out_of_range"] = ser(make_record(
      103, rng, region_features=rng.normal(size=(1, D)),
      region_boxes=np.array([[0.2, 0.1, 1.3, 0.5]])))
  bad["empty_caption"] = ser(make_record(104, rng, captions=["fine", "  "]))
  bad["bad_domain"] = ser(make_record(105, rng, domain="mid-domain"))
  ex = ser(make_record(106, rng))
  ex.features.feature["captions"].bytes_list.value[1] = b"a caf\xe9 dog"  # Latin-1
  bad["bad_utf8"] = ex
  return bad


RECORD_REASONS = records_lib.REASONS[1:]  # a record's own reasons (not corrupt_shard)


def test_every_reason_has_a_case():
  assert sorted(_bad_examples(np.random.default_rng(0))) == sorted(RECORD_REASONS)
  assert records_lib.BAD_REASONS == RECORD_REASONS + ("corrupt_shard",)


def _write_mixed(path, bad_example, rng):
  good = [records_lib.record_to_example(make_record(i, rng)) for i in range(5)]
  with tf.io.TFRecordWriter(path) as w:
    for ex in good[:2] + [bad_example] + good[2:]:
      w.write(ex.SerializeToString())


@pytest.mark.parametrize("reason", RECORD_REASONS)
def test_lenient_skips_and_counts(tmp_path, reason):
  rng = np.random.default_rng(1)
  bad = _bad_examples(rng)[reason]
  path = str(tmp_path / "mixed.tfrecord")
  _write_mixed(path, bad, rng)
  validator = records_lib.RecordValidator(strict=False)

  def keep(serialized):
    parsed = records_lib.parse_batch(serialized, D)
    return tf.boolean_mask(parsed["image_id"], validator.keep_mask(parsed))
  ds = tf.data.TFRecordDataset(path).batch(4).map(keep)
  kept = [i.decode() for b in ds for i in b.numpy()]
  assert kept == [f"img_{i:04d}" for i in range(5)]
  expected = {r: 0 for r in records_lib.BAD_REASONS}
  expected[reason] = 1
  assert validator.counts() == expected


@pytest.mark.parametrize("reason", RECORD_REASONS)
def test_strict_raises_with_id_and_reason(tmp_path, reason):
  rng = np.random.default_rng(2)
  bad = _bad_examples(rng)[reason]
  path = str(tmp_path / "mixed.tfrecord")
  _write_mixed(path, bad, rng)
  validator = records_lib.RecordValidator(strict=True)
  ds = tf.data.TFRecordDataset(path).batch(4).map(
      lambda s: validator.keep_mask(records_lib.parse_batch(s, D)))
  with pytest.raises(tf.errors.InvalidArgumentError) as info:
    for _ in ds:
      pass
  error = records_lib.bad_record_error(info.value)
  assert isinstance(error, records_lib.BadRecordError)
  image_id = bad.features.feature["image_id"].bytes_list.value[0].decode()
  assert f"image_id='{image_id}'" in str(error)
  assert str(error).endswith(f"reason={reason}")


def test_read_records_raises_on_bad_record(tmp_path):
  rng = np.random.default_rng(3)
  path = str(tmp_path / "mixed.tfrecord")
  _write_mixed(path, _bad_examples(rng)["non_finite"], rng)
  with pytest.raises(records_lib.BadRecordError, match="img_0102.*non_finite"):
    list(records_lib.read_records([path], D))


def test_float16_features_round_trip(tmp_path):
  rng = np.random.default_rng(4)
  recs = [make_record(i, rng) for i in range(6)]
  paths = records_lib.write_records(str(tmp_path / "r"), recs, num_shards=2,
                                    feature_dtype="float16")
  back = {r.image_id: r for r in records_lib.read_records(
      paths, D, feature_dtype="float16")}
  for r in recs:
    b = back[r.image_id]
    assert b.region_features.dtype == np.float32
    # Features are the float16 roundings of the written values, exactly.
    np.testing.assert_array_equal(
        b.global_feature, r.global_feature.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(
        b.region_features,
        r.region_features.astype(np.float16).astype(np.float32))
    # Boxes and tag scores stay float32.
    np.testing.assert_array_equal(b.region_boxes, r.region_boxes)
    np.testing.assert_array_equal(b.tag_scores, r.tag_scores)
  # Half the feature bytes of the float32 encoding.
  f32 = records_lib.record_to_example(recs[0], "float32")
  f16 = records_lib.record_to_example(recs[0], "float16")
  raw = lambda ex: len(ex.features.feature["region_features"].bytes_list.value[0])
  assert raw(f16) * 2 == raw(f32) == 4 * D * len(recs[0].region_features)


def test_float16_records_read_as_float32_are_wrong_shape(tmp_path):
  # A dtype that disagrees with the bytes is reported, never decoded silently.
  rng = np.random.default_rng(5)
  paths = records_lib.write_records(
      str(tmp_path / "r"), [make_record(i, rng) for i in range(3)],
      num_shards=1, feature_dtype="float16")
  reason = _parse(paths)["reason"].numpy()
  assert (reason == records_lib.REASON_IDS["wrong_shape"]).all()


def test_float16_non_finite_is_flagged_and_overflow_refused():
  rng = np.random.default_rng(6)
  g = rng.normal(size=D).astype(np.float32)
  g[2] = np.nan
  r = rng.normal(size=(2, D)).astype(np.float32)
  r[1, 5] = -np.inf
  boxes = np.array([[0.1, 0.1, 0.5, 0.5]] * 2, np.float32)
  serialized = tf.constant([
      records_lib.record_to_example(make_record(
          0, rng, global_feature=g), "float16").SerializeToString(),
      records_lib.record_to_example(make_record(
          1, rng, region_features=r, region_boxes=boxes),
          "float16").SerializeToString(),
      records_lib.record_to_example(make_record(2, rng),
                                    "float16").SerializeToString()])
  reason = records_lib.parse_batch(serialized, D,
                                   feature_dtype="float16")["reason"].numpy()
  assert [records_lib.REASONS[i] for i in reason] == [
      "non_finite", "non_finite", "ok"]
  big = rng.normal(size=(1, D)).astype(np.float32)
  big[0, 7] = 70000.0   # finite, beyond float16's 65504
  with pytest.raises(ValueError, match="'img_0003'.*region_features.*70000"):
    records_lib.record_to_example(make_record(
        3, rng, region_features=big, region_boxes=boxes[:1]), "float16")
  with pytest.raises(ValueError, match="feature_dtype='bfloat16'"):
    records_lib.record_to_example(make_record(4, rng), "bfloat16")


def test_metadata_feature_dtype(tmp_path):
  from cc12m_jax.data import metadata as metadata_lib
  data_dir = str(tmp_path)
  path = metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="s", feature_dim=D, num_records=1, num_captions=1,
      num_shards=1, feature_dtype="float16"))
  assert metadata_lib.load_metadata(data_dir, "s").feature_dtype == "float16"
  text = open(path).read()
  # Metadata written before the field existed describes float32 features.
  with open(path, "w") as f:
    f.write(text.replace('  "feature_dtype": "float16",\n', ""))
  assert metadata_lib.load_metadata(data_dir, "s").feature_dtype == "float32"
  with open(path, "w") as f:
    f.write(text.replace('"float16"', '"int8"'))
  with pytest.raises(ValueError, match=r"metadata.json: feature_dtype='int8'"):
    metadata_lib.load_metadata(data_dir, "s")


@pytest.mark.parametrize("blank", ["\u3000", "\u00a0", " \u3000\u00a0\t", "\u200b",
                                   "\u2028", "\x0b\x0c", "\u1680\u180e", "\x85"])
def test_unicode_blank_caption_is_empty(blank):
  # tf.strings.strip only strips ASCII: these used to count as captions.
  rng = np.random.default_rng(8)
  serialized = tf.constant([
      records_lib.record_to_example(make_record(0, rng, captions=["a dog", blank]))
      .SerializeToString(),
      records_lib.record_to_example(make_record(1, rng, captions=["a\u3000dog \ufffd"]))
      .SerializeToString()])
  reason = records_lib.parse_batch(serialized, D)["reason"].numpy()
  assert [records_lib.REASONS[i] for i in reason] == ["empty_caption", "ok"]


@pytest.mark.parametrize("field", ["image_id", "captions", "tags"])
def test_invalid_utf8_is_bad_utf8_and_strict_names_the_record(tmp_path, field):
  rng = np.random.default_rng(9)
  ex = records_lib.record_to_example(make_record(7, rng, tags=["dog"],
                                                 tag_scores=np.ones(1, np.float32)))
  ex.features.feature[field].bytes_list.value[0] = b"img_0007 \xed\xa0\x80"  # a surrogate
  path = str(tmp_path / "r.tfrecord")
  with tf.io.TFRecordWriter(path) as w:
    w.write(ex.SerializeToString())
  reason = _parse([path])["reason"].numpy()
  assert [records_lib.REASONS[i] for i in reason] == ["bad_utf8"]
  with pytest.raises(records_lib.BadRecordError, match="reason=bad_utf8"):
    list(records_lib.read_records([path], D))


def _damage(path: str, how: str) -> None:
  size = os.path.getsize(path)
  if how == "truncated":
    with open(path, "r+b") as f:
      f.truncate(size - 7)
  else:  # a flipped block in the middle: a data CRC mismatch
    with open(path, "r+b") as f:
      f.seek(size // 2)
      f.write(b"\xff" * 8)


@pytest.mark.parametrize("how", ["truncated", "corrupted"])
def test_damaged_shard_is_named_in_strict_and_counted_in_lenient(tmp_path, how):
  rng = np.random.default_rng(10)
  paths = records_lib.write_records(str(tmp_path / "r"), [make_record(i, rng) for i in range(20)],
                                    num_shards=2)
  _damage(paths[1], how)
  # Strict (the tools' reader): an error naming the file, not TensorFlow's
  # unnamed "DataLossError: corrupted record at N".
  with pytest.raises(records_lib.CorruptShardError, match=f"file='{paths[1]}'"):
    list(records_lib.read_records(paths, D))
  # Lenient: the good shard and the damaged one up to the damage, one count.
  validator = records_lib.RecordValidator(strict=False)
  ds = records_lib.read_shards(paths).batch(8).map(
      lambda s: records_lib.parse_batch(validator.drop_shard_markers(s), D)["image_id"])
  ids = [i.decode() for batch in ds for i in batch.numpy()]
  shard0 = [f"img_{i:04d}" for i in range(0, 20, 2)]
  assert ids[:10] == shard0 and 10 < len(ids) < 20
  assert ids[10:] == [f"img_{i:04d}" for i in range(1, 20, 2)][:len(ids) - 10]
  assert validator.counts()["corrupt_shard"] == 1
  assert sum(validator.counts().values()) == 1


def test_metadata_values_are_typed_and_errors_name_the_file(tmp_path):
  from cc12m_jax.data import metadata as metadata_lib
  data_dir = str(tmp_path)
  path = metadata_lib.write_metadata(data_dir, metadata_lib.DatasetMetadata(
      source="s", feature_dim=D, num_records=1, num_captions=1, num_shards=1))
  text = open(path).read()
  cases = [
      (f'"feature_dim": {D}', f'"feature_dim": "{D}"', "feature_dim must be an integer, got '8'"),
      (f'"feature_dim": {D}', '"feature_dim": true', "feature_dim must be an integer"),
      (f'"feature_dim": {D}', '"feature_dim": 0', "feature_dim must be >= 1"),
      (f'"feature_dim": {D}', '"feature_dim": 8.5', "feature_dim must be an integer"),
      ('"source": "s"', '"source": 3', "source must be a string"),
      (f'"feature_dim": {D},', f'"feature_dim": {D}', "not valid JSON"),
      (f'"feature_dim": {D},', "", "missing metadata keys ['feature_dim']"),
  ]
  for old, new, message in cases:
    assert old in text, old
    with open(path, "w") as f:
      f.write(text.replace(old, new))
    with pytest.raises(ValueError) as info:
      metadata_lib.load_metadata(data_dir, "s")
    assert str(info.value).startswith(path + ": "), info.value
    assert message in str(info.value)
  with open(path, "w") as f:
    f.write("[1, 2]")
  with pytest.raises(ValueError, match="must hold a JSON object"):
    metadata_lib.load_metadata(data_dir, "s")


def test_bad_utf8_agrees_with_python_on_random_bytes():
  """The in-graph check (an RE2 pattern) calls a string valid exactly when
  Python's UTF-8 decoder does (evaluation decodes every id and caption)."""
  rng = np.random.default_rng(11)
  edges = [0x00, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf, 0xe0, 0xed, 0xef, 0xf0,
           0xf4, 0xf5, 0xf8, 0xff]
  texts = [bytes(int(rng.choice(edges)) if rng.random() < 0.8 else int(rng.integers(256))
                 for _ in range(int(rng.integers(1, 7)))) for _ in range(20_000)]
  texts += ["caf\u00e9 \ufffd \U0001F600 \U0010FFFF".encode(), b"\xed\xa0\x80", b"\xe0\x80\x80"]

  def python_valid(b):
    try:
      b.decode("utf-8")
      return True
    except UnicodeDecodeError:
      return False
  ragged = tf.RaggedTensor.from_row_lengths(tf.constant(texts), [1] * len(texts))
  bad = records_lib._bad_utf8(tf.constant(texts), ragged, ragged[:, :0]).numpy()  # pylint: disable=protected-access
  assert [not b for b in bad] == [python_valid(t) for t in texts]
