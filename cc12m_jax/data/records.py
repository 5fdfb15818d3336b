"""Feature records: the tf.train.Example schema, its writer and batch parser.

The schema is documented in docs/record_format.md. Float arrays are stored as
raw little-endian bytes (one bytes feature per array), because
`tf.io.decode_raw` decodes a whole batch of them in one op, where FloatLists
are parsed value by value.
The global and region features are float32 or float16, a property of the
dataset (`feature_dtype` in its metadata.json); boxes and tag scores are
always float32. The parser yields float32 either way.

Parsing is done on *batches* of serialized records (`parse_batch`), and every
record gets a reason code (0 = good) computed in-graph. `RecordValidator`
turns those codes into a keep-mask: strict mode raises naming the record and
reason; lenient mode counts skipped records per reason in tf.Variables (the
counts survive into Python through `RecordValidator.counts()`).

Shards are read with `read_shard` / `read_shards`: a file whose reading stops
at damage (a bad CRC, a truncated record: TensorFlow's DataLossError, which
names no file) ends there, and a marker naming the file takes the place of
the rest; `RecordValidator.drop_shard_markers` counts it as `corrupt_shard`
(lenient) or raises CorruptShardError naming the file (strict).
"""
import concurrent.futures
import dataclasses
import os
from typing import Iterable, Iterator, Optional, Sequence

import numpy as np
import tensorflow as tf

from cc12m_jax.data import metadata as metadata_lib
# The sizes and dtypes live where code without TensorFlow can read them; they
# stay names of this module for the writer's and parser's callers.
from cc12m_jax.data.record_schema import (FEATURE_DTYPES, FORMAT_VERSION,  # noqa: F401
                                          MAX_REGIONS, MAX_TAGS, check_feature_dtype)

_FLOAT16_MAX = float(np.finfo(np.float16).max)   # 65504

# nocaps domain label <-> the `domain` int of the batch contract.
DOMAIN_IDS = {"": 0, "in-domain": 1, "near-domain": 2, "out-domain": 3}

# Reason codes of a record; 0 is a good record. Order = checking priority
# (a record missing a field is reported as missing, not as wrongly shaped).
# bad_utf8: an image id, caption or tag that is not valid UTF-8 (it would
# train as garbage tokens and crash evaluation when decoded); appended last
# so earlier codes keep their numbers.
REASONS = ("ok", "missing_field", "wrong_shape", "non_finite",
           "box_out_of_range", "empty_caption", "bad_domain", "bad_utf8")
REASON_IDS = {name: i for i, name in enumerate(REASONS)}
# Not a record's reason: a shard whose reading stopped at damage, counted once
# each time that happens (the records lost after the damage are unknown).
CORRUPT_SHARD = "corrupt_shard"
# Everything a RecordValidator counts, in the order of its counter variable.
_COUNTED = REASONS + (CORRUPT_SHARD,)
BAD_REASONS = _COUNTED[1:]
# A caption of nothing but white space, separators, control and format
# characters (U+3000, U+00A0, U+200B, ...) is empty. tf.strings.strip only
# strips ASCII, and RE2's \s is ASCII only, hence the Unicode classes.
_BLANK = r"[\s\p{Z}\p{Cc}\p{Cf}]*"


class BadRecordError(ValueError):
  """A record failed validation in strict mode."""


class CorruptShardError(BadRecordError):
  """A shard could not be read to its end (strict mode); names the file."""


@dataclasses.dataclass
class FeatureRecord:
  """One image with its features, tags and captions (host-side, numpy)."""
  image_id: str
  source: str
  global_feature: np.ndarray   # f32 [D]
  region_features: np.ndarray  # f32 [N, D], N <= 16
  region_boxes: np.ndarray     # f32 [N, 4]: x1, y1, x2, y2 in [0, 1]
  tags: Sequence[str]          # <= 16 tag strings
  tag_scores: np.ndarray       # f32 [len(tags)]
  captions: Sequence[str]      # one or more
  width: int
  height: int
  domain: str = ""             # '' or a nocaps domain label


def _bytes(values: Iterable[bytes]) -> tf.train.Feature:
  return tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))


def _int(value: int) -> tf.train.Feature:
  return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))


def _raw_f32(array: np.ndarray) -> tf.train.Feature:
  return _bytes([np.asarray(array, dtype="<f4").tobytes()])


def _raw_features(array: np.ndarray, dtype: np.dtype, image_id: str,
                  key: str) -> tf.train.Feature:
  values = np.asarray(array, dtype=np.float32)
  if dtype == np.float16:
    # A finite value beyond float16's range would be stored as Inf and the
    # record later dropped as non_finite: refuse it here, by name. (NaN and
    # Inf are stored as given; the parser reports them.)
    magnitude = np.abs(values[np.isfinite(values)]).max(initial=0.0)
    if magnitude > _FLOAT16_MAX:
      raise ValueError(
          f"record {image_id!r}: {key} has a value of magnitude "
          f"{magnitude:.6g}, beyond float16's {_FLOAT16_MAX:g}; "
          f"write this dataset with feature_dtype='float32'")
  return _bytes([values.astype(dtype).tobytes()])


def record_to_example(record: FeatureRecord,
                      feature_dtype: str = "float32") -> tf.train.Example:
  """Serializes as given: shapes are not checked here (the parser checks).

  Global and region features are stored as `feature_dtype` (float32 or
  float16); a finite feature value outside float16's range is an error.
  """
  dtype = check_feature_dtype(feature_dtype)
  region_features = np.asarray(record.region_features, dtype="<f4")
  num_regions = region_features.shape[0] if region_features.ndim else 0
  feature = {
      "image_id": _bytes([record.image_id.encode()]),
      "source": _bytes([record.source.encode()]),
      "global_feature": _raw_features(record.global_feature, dtype,
                                      record.image_id, "global_feature"),
      "num_regions": _int(num_regions),
      "region_features": _raw_features(region_features, dtype,
                                       record.image_id, "region_features"),
      "region_boxes": _raw_f32(record.region_boxes),
      "tags": _bytes([t.encode() for t in record.tags]),
      "tag_scores": _raw_f32(record.tag_scores),
      "captions": _bytes([c.encode() for c in record.captions]),
      "domain": _bytes([record.domain.encode()]),
      "width": _int(record.width),
      "height": _int(record.height),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature))


def shard_paths(path_prefix: str, num_shards: int) -> list[str]:
  return [f"{path_prefix}-{i:05d}-of-{num_shards:05d}"
          for i in range(num_shards)]


def write_records(path_prefix: str, records: Iterable[FeatureRecord],
                  num_shards: int, feature_dtype: str = "float32"
                  ) -> list[str]:
  """Writes records round-robin into `num_shards` TFRecord files.

  Files are `<path_prefix>-00000-of-0000N`; record i goes to shard i % N, so
  the output is a pure function of the input order. Features are stored as
  `feature_dtype`; record it in the source's metadata.json. Returns the paths.
  """
  check_feature_dtype(feature_dtype)
  if num_shards < 1:
    raise ValueError(f"num_shards must be >= 1, got {num_shards}")
  os.makedirs(os.path.dirname(path_prefix) or ".", exist_ok=True)
  paths = shard_paths(path_prefix, num_shards)
  writers = [tf.io.TFRecordWriter(p) for p in paths]
  try:
    for i, record in enumerate(records):
      writers[i % num_shards].write(
          record_to_example(record, feature_dtype).SerializeToString(
              deterministic=True))
  finally:
    for w in writers:
      w.close()
  return paths


# ---------------------------------------------------------------- reading ---

# The marker that ends the stream of a damaged shard: not a tf.train.Example,
# so it must be taken out (RecordValidator.drop_shard_markers) before parsing.
_SHARD_MARKER = "\x00cc12m_jax corrupt shard\x00"
# Records per block of the byte accounting in read_shard (a scan per block
# instead of per record).
_ACCOUNTING_BLOCK = 128


def shard_sizes(paths: Sequence[str]) -> list[int]:
  """Byte sizes of `paths` (stat calls in parallel: remote storage is slow per file)."""
  paths = list(paths)
  if len(paths) <= 1 or not any("://" in p for p in paths):
    return [tf.io.gfile.stat(p).length for p in paths]
  with concurrent.futures.ThreadPoolExecutor(16) as pool:
    return list(pool.map(lambda p: tf.io.gfile.stat(p).length, paths))


def read_shard(path: tf.Tensor, size: tf.Tensor) -> tf.data.Dataset:
  """Serialized records of one TFRecord file of `size` bytes.

  Reading stops at the first damage (TFRecordDataset raises DataLossError
  and moves past the file, which `ignore_errors` turns into its end); then
  the bytes read fall short of the file's size and one marker naming the
  file and the readable length follows the good records. The accounting is
  per block of records, so a healthy file costs a batch and unbatch.
  """
  blocks = tf.data.TFRecordDataset(path).ignore_errors().batch(_ACCOUNTING_BLOCK)
  end = tf.data.Dataset.from_tensors(tf.zeros([0], tf.string))   # never a real block

  def account(read, block):
    n = tf.size(block, out_type=tf.int64)
    # TFRecord framing: length (8 bytes), its CRC (4), data, data CRC (4).
    after = read + tf.reduce_sum(tf.cast(tf.strings.length(block), tf.int64)) + 16 * n
    marker = tf.strings.join([_SHARD_MARKER, "file='", path, "' readable up to byte ",
                              tf.strings.as_string(read), " of ",
                              tf.strings.as_string(size)])
    damaged = tf.equal(n, 0) & (read < size)
    out = tf.cond(damaged, lambda: tf.reshape(marker, [1]), lambda: block)
    return after, out

  return blocks.concatenate(end).scan(tf.constant(0, tf.int64), account).unbatch()


def read_shards(paths: Sequence[str]) -> tf.data.Dataset:
  """Serialized records of `paths`, file after file (read_shard for each)."""
  paths = list(paths)
  files = tf.data.Dataset.from_tensor_slices(
      (tf.constant(paths, tf.string), tf.constant(shard_sizes(paths), tf.int64)))
  return files.flat_map(read_shard)


# ---------------------------------------------------------------- parsing ---

# Scalars get sentinel defaults so an absent key is told apart from a value.
_MISSING_STR = ""
_MISSING_INT = -1


def _features_spec() -> dict:
  s = tf.io.FixedLenFeature([], tf.string, default_value=_MISSING_STR)
  i = tf.io.FixedLenFeature([], tf.int64, default_value=_MISSING_INT)
  return {
      "image_id": s, "source": s, "global_feature": s, "num_regions": i,
      "region_features": s, "region_boxes": s, "tag_scores": s, "domain": s,
      "width": i, "height": i,
      "tags": tf.io.RaggedFeature(tf.string, row_splits_dtype=tf.int32),
      "captions": tf.io.RaggedFeature(tf.string, row_splits_dtype=tf.int32),
  }


def _decode_f32(raw: tf.Tensor, num_values: int) -> tf.Tensor:
  """raw float32 bytes [B] -> f32 [B, num_values]; zero-padded / truncated."""
  return tf.io.decode_raw(raw, tf.float32, little_endian=True,
                          fixed_length=4 * num_values)


def decode_features(raw: tf.Tensor, num_values: int,
                    feature_dtype: str) -> tf.Tensor:
  """raw feature bytes [B] -> f32 [B, num_values]; zero-padded / truncated."""
  if feature_dtype == "float32":
    return _decode_f32(raw, num_values)
  # decode_raw's padded kernel (fixed_length) has no float16 output: read the
  # float16 bits as uint16, reinterpret, widen.
  bits = tf.io.decode_raw(raw, tf.uint16, little_endian=True,
                          fixed_length=2 * num_values)             # [B, V]
  return tf.cast(tf.bitcast(bits, tf.float16), tf.float32)        # [B, V]


# Valid UTF-8, as Python decodes it: RE2 (in UTF-8 mode) matches no invalid
# sequence with `.`, except UTF-8-encoded surrogates (U+D800-U+DFFF), which
# Python refuses, hence the class. It agrees with bytes.decode('utf-8') on
# 200,000 random byte strings, and costs ~0.5 us per record where
# transcoding each string cost ~4 us.
_VALID_UTF8 = r"(?s)[^\x{D800}-\x{DFFF}]*"


def _bad_utf8(image_id: tf.Tensor, captions: tf.RaggedTensor,
              tags: tf.RaggedTensor) -> tf.Tensor:
  """bool [B]: the record's id, a caption or a tag is not valid UTF-8."""
  invalid = lambda text: ~tf.strings.regex_full_match(text, _VALID_UTF8)
  return (invalid(image_id)
          | tf.reduce_any(captions.with_flat_values(invalid(captions.flat_values)), axis=1)
          | tf.reduce_any(tags.with_flat_values(invalid(tags.flat_values)), axis=1))


def parse_batch(serialized: tf.Tensor, feature_dim: int, *,
                feature_dtype: str = "float32",
                max_regions: int = MAX_REGIONS,
                max_tags: int = MAX_TAGS) -> dict:
  """Parses a batch of serialized records into fixed shapes.

  Args:
    serialized: tf.string [B].
    feature_dim: D, from the source's metadata.json.
    feature_dtype: storage dtype of the global / region features, from the
      same file ('float32' or 'float16'); the outputs are float32 either way.

  Returns a dict of tensors (B = batch, R = max_regions, T = max_tags):
    image_id str [B], source str [B], global_feature f32 [B, D],
    region_features f32 [B, R, D], region_boxes f32 [B, R, 5] (x1 y1 x2 y2
    area), region_mask bool [B, R], tags str [B, T], tag_mask bool [B, T],
    tag_scores f32 [B, T], captions RaggedTensor str [B, (C)], domain i32 [B],
    width / height i32 [B], reason i32 [B] (index into REASONS, 0 = good).
  Padded regions and tags are zero. Bad records still get (meaningless)
  values; use `reason` (see RecordValidator) to drop them.
  """
  d, r, t = feature_dim, max_regions, max_tags
  width = check_feature_dtype(feature_dtype).itemsize    # bytes per value
  ex = tf.io.parse_example(serialized, _features_spec())
  batch = tf.shape(serialized)[0]

  num_regions = tf.cast(ex["num_regions"], tf.int32)                  # [B]
  n = tf.clip_by_value(num_regions, 0, r)                             # [B]
  global_feature = tf.reshape(
      decode_features(ex["global_feature"], d, feature_dtype), [-1, d])
  region_features = tf.reshape(
      decode_features(ex["region_features"], r * d, feature_dtype),
      [-1, r, d])                                                     # [B,R,D]
  boxes = tf.reshape(_decode_f32(ex["region_boxes"], r * 4), [-1, r, 4])
  region_mask = tf.sequence_mask(n, r)                                # [B,R]
  # decode_raw zero-pads, so padded regions are already zero; records whose
  # byte lengths disagree with num_regions are flagged wrong_shape below.
  area = ((boxes[..., 2] - boxes[..., 0]) *
          (boxes[..., 3] - boxes[..., 1]))                            # [B,R]
  region_boxes = tf.concat([boxes, area[..., None]], axis=-1)         # [B,R,5]

  tags_ragged = ex["tags"]                                            # [B,(M)]
  num_tags = tags_ragged.row_lengths()                                # [B]
  tags = tags_ragged[:, :t].to_tensor(default_value="", shape=[None, t])
  tag_mask = tf.sequence_mask(tf.minimum(num_tags, t), t)             # [B,T]
  tag_scores = _decode_f32(ex["tag_scores"], t) * tf.cast(tag_mask, tf.float32)

  captions = ex["captions"]                                           # [B,(C)]
  num_captions = captions.row_lengths()                               # [B]
  # Domain label -> id with a few vectorized compares (no table: a table
  # built inside a tf.data function would be rebuilt for every batch).
  domain = tf.fill([batch], -1)                                       # [B]
  for label, label_id in DOMAIN_IDS.items():
    domain = tf.where(ex["domain"] == label, label_id, domain)

  # ---- reason codes, in priority order (first failing check wins).
  length = tf.strings.length
  missing = ((ex["image_id"] == _MISSING_STR) | (ex["source"] == _MISSING_STR)
             | (ex["global_feature"] == _MISSING_STR)
             | (ex["num_regions"] == _MISSING_INT)
             | (ex["width"] == _MISSING_INT) | (ex["height"] == _MISSING_INT)
             | (num_captions == 0))
  wrong_shape = ((length(ex["global_feature"]) != width * d)
                 | (num_regions < 0) | (num_regions > r)
                 | (length(ex["region_features"]) != width * d * num_regions)
                 | (length(ex["region_boxes"]) != 16 * num_regions)
                 | (num_tags > t)
                 | (length(ex["tag_scores"]) != 4 * tf.cast(num_tags, tf.int32))
                 | (ex["width"] <= 0) | (ex["height"] <= 0))
  # A sum is finite iff every term is (NaN / Inf propagate; overflow of
  # finite features to Inf is not a real-world case): one vectorized
  # reduction instead of a boolean tensor as large as the features.
  finite = lambda x, axes: tf.math.is_finite(tf.reduce_sum(x, axis=axes))
  non_finite = ~(finite(global_feature, [1]) & finite(region_features, [1, 2])
                 & finite(boxes, [1, 2]) & finite(tag_scores, [1]))
  bad_box = ((boxes < 0.0) | (boxes > 1.0))
  bad_box = tf.reduce_any(bad_box, axis=[1, 2]) | tf.reduce_any(
      region_mask & ((boxes[..., 2] < boxes[..., 0]) |
                     (boxes[..., 3] < boxes[..., 1])), axis=1)
  blank = tf.strings.regex_full_match(captions.flat_values, _BLANK)
  empty_caption = tf.reduce_any(captions.with_flat_values(blank), axis=1)
  bad_domain = domain < 0
  checks = [missing, wrong_shape, non_finite, bad_box, empty_caption,
            bad_domain, _bad_utf8(ex["image_id"], captions, tags_ragged)]
  reason = tf.zeros([batch], tf.int32)
  for code in range(len(checks), 0, -1):  # lowest code wins
    reason = tf.where(checks[code - 1], code, reason)

  return {
      "image_id": ex["image_id"],
      "source": ex["source"],
      "global_feature": global_feature,
      "region_features": region_features,
      "region_boxes": region_boxes,
      "region_mask": region_mask,
      "tags": tags,
      "tag_mask": tag_mask,
      "tag_scores": tag_scores,
      "captions": captions,
      "domain": tf.maximum(domain, 0),
      "width": tf.cast(ex["width"], tf.int32),
      "height": tf.cast(ex["height"], tf.int32),
      "reason": reason,
  }


class RecordValidator:
  """Turns per-record reason codes into a keep-mask, strictly or leniently.

  strict=True: the first bad record in a batch raises (in-graph assertion,
  re-raised by the iterators as BadRecordError with the record id and reason).
  strict=False: bad records are dropped and counted per reason in a
  tf.Variable, so counting works inside parallel tf.data maps; `counts()`
  reads the totals in Python.
  """

  def __init__(self, strict: bool):
    self.strict = strict
    self._counts = tf.Variable(tf.zeros([len(_COUNTED)], tf.int64),
                               trainable=False, name="skip_counts")

  @property
  def variable(self) -> tf.Variable:
    return self._counts

  def keep_mask(self, parsed: dict) -> tf.Tensor:
    """bool [B]: True for good records. Call inside tf.data functions."""
    reason = parsed["reason"]                                         # [B]
    good = reason == 0
    if self.strict:
      bad = tf.where(~good)[:, 0]
      # The first bad row, or the padding row past the end when there is
      # none (a chunk may be empty once damage markers are taken out).
      first = tf.reduce_min(tf.concat([tf.cast(bad, tf.int32), [tf.size(reason)]], 0))
      padded = lambda x, pad: tf.concat([x, [pad]], 0)[first]
      message = tf.strings.join([
          "bad record: image_id='", padded(parsed["image_id"], ""),
          "' source='", padded(parsed["source"], ""), "' reason=",
          tf.gather(tf.constant(_COUNTED), padded(reason, 0))])
      with tf.control_dependencies(
          [tf.debugging.Assert(tf.reduce_all(good), [message])]):
        return tf.identity(good)
    per_reason = tf.math.bincount(reason, minlength=len(_COUNTED),
                                  maxlength=len(_COUNTED), dtype=tf.int64)
    with tf.control_dependencies([self._counts.assign_add(per_reason)]):
      return tf.identity(good)

  def drop_shard_markers(self, serialized: tf.Tensor) -> tf.Tensor:
    """`serialized` [B] without read_shard's damage markers. Call inside
    tf.data functions, before parse_batch.

    strict=True: a marker raises (CorruptShardError, naming the file, once
    re-raised by the iterators); strict=False: each marker counts one
    corrupt_shard.
    """
    marker = tf.equal(tf.strings.substr(serialized, 0, len(_SHARD_MARKER)), _SHARD_MARKER)
    if self.strict:
      text = tf.strings.regex_replace(
          tf.concat([tf.boolean_mask(serialized, marker), [_SHARD_MARKER]], 0)[0],
          "^" + _SHARD_MARKER, "")
      check = tf.debugging.Assert(~tf.reduce_any(marker),
                                  [tf.strings.join(["corrupt shard: ", text])])
    else:
      found = tf.reduce_sum(tf.cast(marker, tf.int64))
      check = self._counts.assign_add(
          found * tf.one_hot(len(_COUNTED) - 1, len(_COUNTED), dtype=tf.int64))
    with tf.control_dependencies([check]):
      return tf.boolean_mask(serialized, ~marker)

  def counts(self) -> dict[str, int]:
    """Skipped records (and damaged shard reads) so far, by reason (zeros included)."""
    values = self._counts.numpy()
    return {name: int(values[i]) for i, name in enumerate(_COUNTED) if i}


def _assertion_line(error: tf.errors.OpError, prefix: str) -> Optional[str]:
  """The line of an in-graph assertion's message that starts with `prefix`."""
  # The assertion prints its data with escaped quotes.
  text = str(error.message).replace("\\'", "'")
  start = text.find(prefix)
  if start < 0:
    return None
  return text[start:].splitlines()[0].strip().rstrip("]\"' ")


def bad_record_error(error: tf.errors.OpError) -> Optional[BadRecordError]:
  """The BadRecordError (or CorruptShardError) inside a tf.data error raised
  by keep_mask or drop_shard_markers, if any."""
  line = _assertion_line(error, "bad record: ")
  if line is not None:
    return BadRecordError(line)
  line = _assertion_line(error, "corrupt shard: ")
  if line is not None:
    return CorruptShardError(line + " (a bad CRC or a truncated record; run with "
                             "config.data.strict=False to skip the rest of the shard and count it)")
  return None


def read_records(paths: Sequence[str], feature_dim: int, *,
                 feature_dtype: str = "float32",
                 batch_size: int = 256) -> Iterator[FeatureRecord]:
  """Reads records back as FeatureRecords (tests, tools; not the pipeline).

  Raises BadRecordError on the first bad record, CorruptShardError (naming
  the file) at a damaged shard.
  """
  validator = RecordValidator(strict=True)
  ds = read_shards(paths).batch(batch_size).map(validator.drop_shard_markers)
  for serialized in _reraised(ds):
    p = parse_batch(serialized, feature_dim, feature_dtype=feature_dtype)
    p = {k: (v.to_list() if isinstance(v, tf.RaggedTensor) else v.numpy())
         for k, v in p.items()}
    for i in range(len(p["image_id"])):
      if p["reason"][i]:
        raise BadRecordError(
            f"bad record: image_id="
            f"{p['image_id'][i].decode(errors='backslashreplace')!r} "
            f"reason={REASONS[p['reason'][i]]}")
      n = int(p["region_mask"][i].sum())
      m = int(p["tag_mask"][i].sum())
      yield FeatureRecord(
          image_id=p["image_id"][i].decode(),
          source=p["source"][i].decode(),
          global_feature=p["global_feature"][i],
          region_features=p["region_features"][i, :n],
          region_boxes=p["region_boxes"][i, :n, :4],
          tags=[x.decode() for x in p["tags"][i, :m]],
          tag_scores=p["tag_scores"][i, :m],
          captions=[c.decode() for c in p["captions"][i]],
          width=int(p["width"][i]), height=int(p["height"][i]),
          domain={v: k for k, v in DOMAIN_IDS.items()}[int(p["domain"][i])])


def _reraised(dataset: tf.data.Dataset) -> Iterator[tf.Tensor]:
  """Iterates `dataset`, turning validation assertions into BadRecordError."""
  try:
    yield from dataset
  except tf.errors.InvalidArgumentError as e:
    error = bad_record_error(e)
    if error is None:
      raise
    raise error from None


def read_source_records(data_dir: str, source: str) -> Iterator[FeatureRecord]:
  """A source's records as FeatureRecords, decoded with the feature
  dimension and dtype of its metadata.json (tests, tools; not the pipeline)."""
  metadata = metadata_lib.load_metadata(data_dir, source)
  return read_records(metadata_lib.shard_files(data_dir, source), metadata.feature_dim,
                      feature_dtype=metadata.feature_dtype)
