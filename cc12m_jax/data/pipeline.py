"""tf.data training input: source mixtures with a checkpointable position.

(Exactly-once evaluation input is data/eval_pipeline.py; it shares the
host helpers here: hosts, host_setup, tokenize_batch, to_numpy, to_device.)

Train, per source (each host reads its own files):
  shard files by host -> shuffle files -> interleave TFRecord reads
  -> shuffle records -> repeat -> batch(parse_batch_size)
  -> one map over the chunk: parse + validate + drop excluded / sub-sampled
     ids + one example per caption + WordPiece tokenization of captions and
     tags (all vectorized, in-graph)
  -> a sequential check that the source still gives usable examples
     (_Watchdog: an all-bad source fails with its skip counts, never hangs)
then mix sources (`sample_from_datasets`, seeded, in blocks of MIX_BLOCK
examples) -> `rebatch` to the per-host batch -> prefetch. `TrainIterator`
turns each host batch into global jax.Arrays with
`jax.make_array_from_process_local_data`.

Parsing and tokenizing whole chunks, and `rebatch` instead of
unbatch/batch, keep the per-example work out of the pipeline
(benchmarks/input_pipeline.py).

The train iterator position (every buffer, RNG and file offset of the
tf.data iterator, plus the skip counters) is saved with tf.train.Checkpoint,
so a restored run continues at the exact next example.

A run's input is one such stream per input shard (`TrainInput`): one shard
per process in a new run, and the checkpoint's number of shards in a run
resumed on another number of processes, so the examples and their order do
not depend on how many processes read them.
"""
import os
from typing import Optional, Sequence

import jax
import ml_collections
import numpy as np
import tensorflow as tf
from absl import logging

from cc12m_jax.data import batch_spec
from cc12m_jax.data import host_memory
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.data import sources as sources_lib
from cc12m_jax.data.text import tokenizer as tokenizer_lib

AUTOTUNE = tf.data.AUTOTUNE
# Keys that go to the device (data/batch_spec.py); everything else (image
# ids, caption strings) stays on the host.
DEVICE_KEYS = batch_spec.device_keys(batch_spec.TRAIN)
FILTER_REASONS = ("excluded_id", "subsampled_out")
# Granularity (examples) at which training sources are mixed.
MIX_BLOCK = 4
_HASH_BUCKETS = 1_000_000


def hosts(process_index: Optional[int], process_count: Optional[int]) -> tuple[int, int]:
  """(this host's index, number of hosts): given values, else JAX's."""
  pi = jax.process_index() if process_index is None else process_index
  pc = jax.process_count() if process_count is None else process_count
  if not 0 <= pi < pc:
    raise ValueError(f"process_index {pi} not in [0, {pc})")
  return pi, pc


def per_host_batch(global_batch: int, process_count: int, key: str) -> int:
  if global_batch % process_count:
    raise ValueError(f"config.data.{key}={global_batch} is not divisible by "
                     f"the number of hosts ({process_count})")
  return global_batch // process_count


# ------------------------------------------------------------- id filters --

def keep_fraction(image_ids: tf.Tensor, fraction: float) -> tf.Tensor:
  """bool [B]: deterministic sub-sample by a fingerprint of the image id.

  The same id is kept or dropped on every run and host, and the kept set at
  25% is contained in the kept set at 50%.
  """
  bucket = tf.strings.to_hash_bucket_fast(image_ids, _HASH_BUCKETS)   # [B]
  return bucket < int(round(fraction * _HASH_BUCKETS))


def read_image_ids(files: Sequence[str]) -> list[bytes]:
  """Image ids of records (parses only that field).

  A damaged shard is a CorruptShardError naming the file whatever
  config.data.strict says: these ids exclude images from other sources, and
  dropping some would let those images back in.
  """
  spec = {"image_id": tf.io.FixedLenFeature([], tf.string, default_value="")}
  validator = records_lib.RecordValidator(strict=True)
  ds = records_lib.read_shards(files).batch(4096).map(
      tf.autograph.experimental.do_not_convert(
          lambda s: tf.io.parse_example(validator.drop_shard_markers(s), spec)["image_id"]))
  try:
    return [i for batch in ds.as_numpy_iterator() for i in batch.tolist()]
  except tf.errors.InvalidArgumentError as e:
    error = records_lib.bad_record_error(e)
    if error is None:
      raise
    raise error from None


def _id_table(ids: Sequence[bytes]) -> Optional[tf.lookup.StaticHashTable]:
  if not ids:
    return None
  keys = tf.constant(sorted(set(ids)), tf.string)
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
          keys, tf.ones_like(keys, tf.int32)), default_value=0)


# --------------------------------------------------------- record streams --

READ_PARALLELISM = ("auto", "parallel", "sequential")


def parallel_reads(files: Sequence[str], read_parallelism: str) -> bool:
  """Whether files are read on parallel threads (config.data.read_parallelism).

  'auto' is parallel for remote storage (a path with a scheme such as gs://),
  where per-file latency dominates, and sequential for local files, where a
  thread hand-off per record costs more CPU than it hides on a host with few
  cores (docs/benchmarks.md, input pipeline).
  """
  if read_parallelism not in READ_PARALLELISM:
    raise ValueError(f"config.data.read_parallelism={read_parallelism!r}: choose one of "
                     f"{READ_PARALLELISM}")
  if read_parallelism == "auto":
    return any("://" in f for f in files)
  return read_parallelism == "parallel"


def _host_records(files: Sequence[str], pi: int, pc: int, *, shuffle: bool,
                  seed: int, num_parallel_reads: int,
                  read_parallelism: str = "auto") -> tf.data.Dataset:
  """Serialized records of this host (one pass).

  Files are split between hosts when there are enough of them; otherwise
  every host reads all files and keeps every pc-th record. Interleaving is
  deterministic (round-robin, one record per file) whether or not the reads
  run on parallel threads, so the record order does not depend on it. A
  damaged file ends at the damage with a marker (records.read_shard) that
  the chunk map counts or raises on.
  """
  files = sorted(files)
  if len(files) >= pc:
    mine = files[pi::pc]
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.constant(mine), tf.constant(records_lib.shard_sizes(mine), tf.int64)))
    if shuffle:
      ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    parallel = parallel_reads(files, read_parallelism)
    return ds.interleave(
        records_lib.read_shard,
        cycle_length=max(1, min(num_parallel_reads, len(mine))),
        block_length=1, num_parallel_calls=AUTOTUNE if parallel else None,
        deterministic=True if parallel else None)
  return records_lib.read_shards(files).shard(pc, pi)


def _expand_captions(parsed: dict, keep: tf.Tensor, seed: int) -> dict:
  """Kept records -> one example per caption, in a pseudo-random order.

  The order comes from a fingerprint of (image id, caption index, seed), not
  from an RNG, so it holds no state and an iterator restored from a
  checkpoint reproduces it; it spreads the 5 captions of a COCO image over
  the chunk (and so over several batches).
  """
  # Only what the device or the host-side checks need: every extra (string)
  # tensor costs time in rebatch.
  dropped = ("captions", "reason", "source", "width", "height")
  captions = parsed["captions"]                                       # [B,(C)]

  def identity():  # the common web case: every record kept, one caption
    out = {k: v for k, v in parsed.items() if k not in dropped}
    out["caption"] = captions.flat_values                             # [B]
    return out

  def expand():
    rows = tf.cast(tf.where(keep)[:, 0], tf.int32)                    # [K]
    kept = tf.gather(captions, rows)                                  # [K,(C)]
    example_rows = tf.gather(rows, kept.value_rowids())               # [E]
    caption_index = tf.strings.as_string(
        tf.range(tf.size(kept.flat_values)) -
        tf.gather(kept.row_starts(), kept.value_rowids()))            # [E]
    key = tf.strings.join([tf.gather(parsed["image_id"], example_rows),
                           caption_index, str(seed)], separator="/")
    order = tf.argsort(tf.strings.to_hash_bucket_fast(key, 2**62))   # [E]
    example_rows = tf.gather(example_rows, order)
    out = {k: tf.gather(v, example_rows) for k, v in parsed.items()
           if k not in dropped}
    out["caption"] = tf.gather(kept.flat_values, order)               # [E]
    return out

  simple = tf.reduce_all(keep) & tf.reduce_all(captions.row_lengths() == 1)
  return tf.cond(simple, identity, expand)


def tokenize_batch(tokenizer: tokenizer_lib.SubwordTokenizer,
                   max_caption_length: int, max_tag_tokens: int):
  """Adds decoder_inputs/targets [B, L] and tag_tokens [B, T, K]; drops tags."""
  @tf.autograph.experimental.do_not_convert
  def fn(batch: dict) -> dict:
    ids = tokenizer.tf_tokenize(batch["caption"])                     # [B,(P)]
    inputs, targets = tokenizer_lib.decoder_arrays(ids, max_caption_length)
    out = dict(batch)
    out["decoder_inputs"] = inputs                                    # [B, L]
    out["decoder_targets"] = targets                                  # [B, L]
    out["tag_tokens"] = tokenizer.tf_tokenize_tags(
        out.pop("tags"), max_tag_tokens)                              # [B,T,K]
    if "example_mask" not in out:
      out["example_mask"] = tf.ones_like(batch["domain"], tf.bool)
    return out
  return fn


class _SourceParser:
  """The per-chunk map of one training source: parse, validate, drop
  excluded / sub-sampled ids, one example per caption, tokenize."""

  def __init__(self, d: int, validator: records_lib.RecordValidator,
               filter_counts: tf.Variable, fraction: float,
               exclude: Optional[tf.lookup.StaticHashTable], seed: int,
               tokenize, source_index: int = 0,
               feature_dtype: str = "float32"):
    self.d = d
    self.feature_dtype = feature_dtype
    self.validator = validator
    self.filter_counts = filter_counts
    self.fraction = fraction
    self.exclude = exclude
    self.seed = seed
    self.tokenize = tokenize
    self.source_index = source_index

  @tf.autograph.experimental.do_not_convert  # plain TF ops: fast tracing
  def __call__(self, serialized: tf.Tensor) -> tuple[dict, dict]:
    """(examples, what happened to the chunk's records: see _Watchdog)."""
    num_in = tf.size(serialized, out_type=tf.int64)
    serialized = self.validator.drop_shard_markers(serialized)
    damaged = num_in - tf.size(serialized, out_type=tf.int64)
    parsed = records_lib.parse_batch(serialized, self.d,
                                     feature_dtype=self.feature_dtype)
    good = self.validator.keep_mask(parsed)                           # [B]
    ids = parsed["image_id"]
    excluded = tf.zeros_like(good)
    if self.exclude is not None:
      excluded = self.exclude.lookup(ids) > 0
    sampled = (keep_fraction(ids, self.fraction) if self.fraction < 1
               else tf.ones_like(good))
    counts = tf.stack([
        tf.reduce_sum(tf.cast(good & excluded, tf.int64)),
        tf.reduce_sum(tf.cast(good & ~excluded & ~sampled, tf.int64))])
    with tf.control_dependencies([self.filter_counts.assign_add(counts)]):
      keep = good & ~excluded & sampled
    out = self.tokenize(_expand_captions(parsed, keep, self.seed))
    del out["caption"]
    out["source_index"] = tf.fill(tf.shape(out["domain"]), self.source_index)
    num_reasons = len(records_lib.REASONS)
    bad = tf.math.bincount(parsed["reason"], minlength=num_reasons,
                           maxlength=num_reasons, dtype=tf.int64)[1:]
    why = tf.concat([bad, [damaged], counts], 0)        # _Watchdog.WHY order
    stats = {"records": tf.size(ids, out_type=tf.int64), "damaged": damaged,
             "kept": tf.reduce_sum(tf.cast(keep, tf.int64)), "why": why}
    return out, stats


class NoUsableRecordsError(ValueError):
  """A training source gave no usable example for longer than its data can explain."""


class _Watchdog:
  """Fails a source that has stopped giving usable examples (instead of a
  pipeline that reads forever, e.g. when metadata.json's feature_dim or
  feature_dtype does not match the records and every record is skipped).

  Counts, in a sequential map over the chunks in order, the records (and
  damaged shard reads) since the last chunk that kept an example, by why
  they were not kept. Each pass over a host's files holds every usable
  record at least once, so a run without one can span at most the end of
  one pass and the start of the next: more than two passes (2 x num_records
  of metadata.json bounds what a host reads, plus a chunk of slack, or
  2 x the files for damaged shard reads) with nothing kept means nothing
  will ever be. The error carries the counts; TrainIterator turns it into
  NoUsableRecordsError naming the source.
  """
  WHY = records_lib.BAD_REASONS + FILTER_REASONS
  PREFIX = "no usable records: "

  def __init__(self, source: str, since_kept: tf.Variable, row: int,
               record_limit: int, damage_limit: int):
    self.source, self.since_kept, self.row = source, since_kept, row
    self.record_limit, self.damage_limit = record_limit, damage_limit

  @tf.autograph.experimental.do_not_convert
  def __call__(self, examples: dict, stats: dict) -> dict:
    chunk = tf.concat([[stats["records"], stats["damaged"]], stats["why"]], 0)
    previous = self.since_kept[self.row]
    since = tf.where(stats["kept"] > 0, tf.zeros_like(chunk), previous + chunk)
    with tf.control_dependencies([self.since_kept[self.row].assign(since)]):
      ok = (since[0] <= self.record_limit) & (since[1] <= self.damage_limit)
    counts = [tf.strings.join([name, "=", tf.strings.as_string(since[2 + i])])
              for i, name in enumerate(self.WHY)]
    message = tf.strings.join(
        [self.PREFIX, "source=", self.source, " records=", tf.strings.as_string(since[0]),
         " damaged_reads=", tf.strings.as_string(since[1]), " | ",
         tf.strings.reduce_join(tf.stack(counts), separator=" ")])
    with tf.control_dependencies([tf.debugging.Assert(ok, [message])]):
      return {k: tf.identity(v) for k, v in examples.items()}


def no_usable_records_error(error: tf.errors.OpError,
                            metadata: dict[str, metadata_lib.DatasetMetadata],
                            data_dir: str) -> Optional[NoUsableRecordsError]:
  """The NoUsableRecordsError inside a tf.data error raised by a _Watchdog, if any."""
  text = str(error.message)
  start = text.find(_Watchdog.PREFIX)
  if start < 0:
    return None
  line = text[start + len(_Watchdog.PREFIX):].splitlines()[0].strip().rstrip("]\"' ")
  head, _, tail = line.partition(" | ")
  fields = dict(item.split("=", 1) for item in head.split(" ") if "=" in item)
  source = fields.get("source", "?")
  why = {name: int(count) for name, count in
         (item.split("=", 1) for item in tail.split(" ") if "=" in item) if int(count)}
  meta = metadata.get(source)
  described = (f"{metadata_lib.source_dir(data_dir, source)}/{metadata_lib.METADATA_FILE} "
               f"says num_records {meta.num_records}, feature_dim {meta.feature_dim}, "
               f"feature_dtype {meta.feature_dtype}" if meta else "")
  reasons = ", ".join(f"{name} {count}" for name, count in why.items()) or "none counted"
  hint = ""
  if set(why) <= set(FILTER_REASONS):
    hint = (" Every record was good but left out on purpose: check "
            "config.data.exclude_ids_of and config.data.train_fractions.")
  elif "wrong_shape" in why:
    hint = (" Records of the wrong shape: does metadata.json's feature_dim / feature_dtype "
            "match them?")
  return NoUsableRecordsError(
      f"Training source {source!r} gave no usable example in the last {fields.get('records')} "
      f"records (and {fields.get('damaged_reads')} damaged shard reads) read on this host, "
      f"more than two passes over its data ({described}). Not kept, by reason: "
      f"{reasons}.{hint}")


def _options() -> tf.data.Options:
  options = tf.data.Options()
  options.deterministic = True
  # Each op of a tf.data function on one thread: the pipeline's parallelism
  # comes from its parallel stages, and ops splitting themselves over the
  # same few cores only contend.
  options.threading.max_intra_op_parallelism = 1
  # The skip counters are tf.Variables updated inside the pipeline; they are
  # checkpointed next to the iterator instead of inside it.
  options.experimental_external_state_policy = (
      tf.data.experimental.ExternalStatePolicy.IGNORE)
  return options


# ------------------------------------------------------------------ train --

def build_train_dataset(data_cfg: ml_collections.ConfigDict, *,
                        process_index: int, process_count: int,
                        validator: records_lib.RecordValidator,
                        filter_counts: tf.Variable,
                        since_kept: tf.Variable,
                        tokenizer: tokenizer_lib.SubwordTokenizer
                        ) -> tf.data.Dataset:
  """The infinite per-host batch stream (host tensors, strings included).

  `since_kept` (int64 [sources, 2 + len(_Watchdog.WHY)]) holds each source's
  counts since its last kept example (see _Watchdog).
  """
  sources = sources_lib.train_sources(data_cfg)
  metadata = sources_lib.source_metadata(data_cfg, [s.name for s in sources])
  d = sources_lib.shared_feature_dim(metadata)
  batch = per_host_batch(data_cfg.global_batch_size, process_count,
                         "global_batch_size")
  exclude_sources = sources_lib.split_csv(data_cfg.exclude_ids_of)
  exclude_ids = {s: read_image_ids(metadata_lib.shard_files(data_cfg.data_dir, s))
                 for s in exclude_sources}
  tokenize = tokenize_batch(tokenizer, data_cfg.max_caption_length,
                            data_cfg.max_tag_tokens)
  streams = []
  for i, src in enumerate(sources):
    seed = data_cfg.seed * 1009 + i
    ids = [x for s, v in exclude_ids.items() if s != src.name for x in v]
    parser = _SourceParser(d, validator, filter_counts, src.fraction,
                           _id_table(ids), seed, tokenize, i,
                           metadata[src.name].feature_dtype)
    ds = _host_records(metadata_lib.shard_files(data_cfg.data_dir, src.name),
                       process_index, process_count, shuffle=True, seed=seed,
                       num_parallel_reads=data_cfg.num_parallel_reads,
                       read_parallelism=data_cfg.read_parallelism)
    if data_cfg.shuffle_buffer > 1:
      ds = ds.shuffle(data_cfg.shuffle_buffer, seed=seed,
                      reshuffle_each_iteration=True)
    # Copying records into a chunk in parallel keeps the single reading thread
    # off the critical path; order unchanged.
    ds = ds.repeat().batch(data_cfg.parse_batch_size, num_parallel_calls=AUTOTUNE,
                           deterministic=True)
    # Device-ready examples in chunks of varying size (filtering, captions),
    # then, in order and on one thread, the check that the source still
    # gives usable examples.
    num_files = len(metadata_lib.shard_files(data_cfg.data_dir, src.name))
    watchdog = _Watchdog(src.name, since_kept, i,
                         record_limit=2 * metadata[src.name].num_records
                         + 4 * data_cfg.parse_batch_size,
                         damage_limit=2 * num_files)
    streams.append(ds.map(parser, num_parallel_calls=AUTOTUNE,
                          deterministic=True).map(watchdog))
  if len(streams) == 1:
    ds = streams[0]
  else:
    # Mix in blocks of MIX_BLOCK examples: exact proportions in expectation,
    # without splitting every chunk into single examples.
    weights = np.array([s.weight for s in sources], np.float64)
    ds = tf.data.Dataset.sample_from_datasets(
        [s.rebatch(MIX_BLOCK) for s in streams],
        weights=(weights / weights.sum()).tolist(),
        seed=data_cfg.seed, stop_on_empty_dataset=False)
  ds = ds.rebatch(batch, drop_remainder=True)
  return ds.prefetch(AUTOTUNE).with_options(_options())


def host_setup(data_cfg: ml_collections.ConfigDict
               ) -> tuple[tokenizer_lib.SubwordTokenizer,
                          records_lib.RecordValidator]:
  """What every iterator needs first: the host allocator policy
  (config.data.retain_host_memory), the tokenizer and a record validator."""
  if data_cfg.retain_host_memory:
    host_memory.retain_freed_memory()
  return (tokenizer_lib.SubwordTokenizer(sources_lib.vocab_path(data_cfg)),
          records_lib.RecordValidator(strict=data_cfg.strict))


def to_numpy(batch: dict) -> dict:
  return {k: v._numpy() for k, v in batch.items()}  # pylint: disable=protected-access


def to_device(host_batch: dict, sharding: jax.sharding.Sharding,
              keys: Sequence[str]) -> dict:
  """Host-local numpy arrays -> global jax.Arrays (batch axis sharded)."""
  if jax.process_count() == 1:
    # One host holds the whole batch: one batched transfer is cheaper, and a
    # list needs less pytree handling than a dict on the consumer thread,
    # which feeds the train step.
    arrays = jax.device_put([host_batch[k] for k in keys], sharding)
    return dict(zip(keys, arrays))
  return {k: jax.make_array_from_process_local_data(sharding, host_batch[k])
          for k in keys}


class TrainIterator:
  """Infinite iterator of device batches, with a checkpointable position."""

  def __init__(self, data_cfg: ml_collections.ConfigDict,
               batch_sharding: Optional[jax.sharding.Sharding], *,
               process_index: Optional[int] = None,
               process_count: Optional[int] = None):
    self.process_index, self.process_count = hosts(process_index,
                                                   process_count)
    self.batch_sharding = batch_sharding
    self.tokenizer, self._validator = host_setup(data_cfg)
    self._filter_counts = tf.Variable(
        tf.zeros([len(FILTER_REASONS)], tf.int64), trainable=False)
    # Not checkpointed: after a restart a source gets its full allowance again.
    self._since_kept = tf.Variable(
        tf.zeros([len(sources_lib.train_sources(data_cfg)), 2 + len(_Watchdog.WHY)], tf.int64),
        trainable=False)
    self._data_dir = data_cfg.data_dir
    self._metadata = sources_lib.source_metadata(
        data_cfg, [s.name for s in sources_lib.train_sources(data_cfg)])
    self.dataset = build_train_dataset(
        data_cfg, process_index=self.process_index,
        process_count=self.process_count, validator=self._validator,
        filter_counts=self._filter_counts, since_kept=self._since_kept,
        tokenizer=self.tokenizer)
    self._iterator = iter(self.dataset)
    self._checkpoint = tf.train.Checkpoint(
        iterator=self._iterator, skip_counts=self._validator.variable,
        filter_counts=self._filter_counts)

  def __iter__(self):
    return self

  def next_host_batch(self) -> dict:
    """This host's batch as numpy: the device keys plus `image_id` (str)
    and `source_index` (position in data.train_sources)."""
    try:
      return to_numpy(next(self._iterator))
    except tf.errors.InvalidArgumentError as e:
      error = (records_lib.bad_record_error(e)
               or no_usable_records_error(e, self._metadata, self._data_dir))
      if error is None:
        raise
      raise error from None  # the in-graph assertion's text is all in `error`

  def __next__(self) -> dict:
    if self.batch_sharding is None:
      raise ValueError("TrainIterator was built without batch_sharding; "
                       "use next_host_batch()")
    return to_device(self.next_host_batch(), self.batch_sharding, DEVICE_KEYS)

  def _prefix(self, directory: str) -> str:
    return os.path.join(
        directory, f"host_{self.process_index:05d}_of_"
        f"{self.process_count:05d}", "iterator")

  def save(self, directory: str) -> str:
    """Writes this host's position under `directory`; returns the prefix."""
    prefix = self._prefix(directory)
    tf.io.gfile.makedirs(os.path.dirname(prefix))
    return self._checkpoint.write(prefix)

  def restore(self, directory: str) -> None:
    prefix = self._prefix(directory)
    if not tf.io.gfile.exists(prefix + ".index"):
      raise FileNotFoundError(f"no input-pipeline state for host "
                              f"{self.process_index} at {prefix}")
    self._checkpoint.read(prefix).assert_consumed()

  def skip_counts(self) -> dict[str, int]:
    """Bad records skipped so far (lenient mode), by reason; `corrupt_shard`
    counts each read of a shard that stopped at damage."""
    return self._validator.counts()

  def filter_counts(self) -> dict[str, int]:
    """Good records left out on purpose: excluded ids, sub-sampled out."""
    values = self._filter_counts.numpy()
    return {name: int(v) for name, v in zip(FILTER_REASONS, values)}


# ------------------------------------------------------------ input shards --

def shard_assignment(num_shards: int, process_index: int,
                     process_count: int) -> tuple[list[int], int, int]:
  """(the input shards process `process_index` reads, its part of each batch,
  the number of parts) when `num_shards` shards feed `process_count` processes.

  S shards among P processes: with S = kP process p reads shards pk .. pk+k-1
  whole; with P = kS, k processes read the same shard and each keeps its part
  (one k-th) of every batch of it.
  """
  s, p = num_shards, process_count
  if s % p == 0:
    k = s // p
    return list(range(process_index * k, (process_index + 1) * k)), 0, 1
  if p % s == 0:
    k = p // s
    return [process_index // k], process_index % k, k
  raise ValueError(f"an input of {s} shards cannot be split among {p} processes: "
                   "one count must divide the other")


def saved_num_shards(directory: str) -> Optional[int]:
  """The number of input shards whose positions TrainInput.save wrote in
  `directory` (host_<s>_of_<S>), or None if it holds none."""
  if not tf.io.gfile.isdir(directory):
    return None
  counts = {int(name.rstrip("/").rsplit("_of_", 1)[1])
            for name in tf.io.gfile.listdir(directory)
            if name.startswith("host_") and "_of_" in name}
  if len(counts) > 1:
    raise ValueError(f"{directory} holds input positions of {sorted(counts)} shards")
  return counts.pop() if counts else None


class TrainInput:
  """This process's part of the run's training input, with a checkpointable position.

  The run's input is S input shards, each a TrainIterator over its own part
  of the files (shard s of S reads files[s::S]; see _host_records), and the
  global batch is their batches in shard order. A new run has one shard per
  process. A run resumed on another number of processes keeps the S of its
  checkpoint (`restore` rebuilds the shards to match it), so it trains on the
  same examples in the same order as if it had not moved (shard_assignment).
  """

  def __init__(self, data_cfg: ml_collections.ConfigDict,
               batch_sharding: Optional[jax.sharding.Sharding], *,
               process_index: Optional[int] = None,
               process_count: Optional[int] = None, num_shards: int = 0):
    self._data_cfg = data_cfg
    self.batch_sharding = batch_sharding
    self.process_index, self.process_count = hosts(process_index, process_count)
    self._build(num_shards or self.process_count)

  def _build(self, num_shards: int) -> None:
    per_host_batch(self._data_cfg.global_batch_size, max(num_shards, self.process_count),
                   "global_batch_size")
    owned, self._part, self._parts = shard_assignment(num_shards, self.process_index,
                                                      self.process_count)
    self.num_shards = num_shards
    self.shards = [TrainIterator(self._data_cfg, None, process_index=s,
                                 process_count=num_shards) for s in owned]
    self.tokenizer = self.shards[0].tokenizer

  def __iter__(self):
    return self

  def next_host_batch(self) -> dict:
    """This process's rows of the global batch, as numpy (see TrainIterator)."""
    batches = [shard.next_host_batch() for shard in self.shards]
    batch = batches[0] if len(batches) == 1 else {
        k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    if self._parts > 1:
      n = len(batch[DEVICE_KEYS[0]]) // self._parts
      batch = {k: v[self._part * n:(self._part + 1) * n] for k, v in batch.items()}
    return batch

  def __next__(self) -> dict:
    if self.batch_sharding is None:
      raise ValueError("TrainInput was built without batch_sharding; "
                       "use next_host_batch()")
    return to_device(self.next_host_batch(), self.batch_sharding, DEVICE_KEYS)

  def save(self, directory: str) -> None:
    """Writes the positions of this process's shards (one writer per shard)."""
    if self._part == 0:
      for shard in self.shards:
        shard.save(directory)

  def restore(self, directory: str) -> None:
    """Repositions every shard; first rebuilds them if `directory` holds
    another number of shards than this input has."""
    saved = saved_num_shards(directory)
    if saved is not None and saved != self.num_shards:
      logging.warning("The input position was saved by %d input shards; this run has %d "
                      "processes, so it keeps %d shards (process %d reads %s).", saved,
                      self.process_count, saved, self.process_index,
                      shard_assignment(saved, self.process_index, self.process_count)[0])
      self._build(saved)
    for shard in self.shards:
      shard.restore(directory)

  def _summed(self, counts: list[dict[str, int]]) -> dict[str, int]:
    # A shard read by several processes is counted by its first reader only,
    # so counts summed over processes count each record once.
    return {k: sum(c[k] for c in counts) if self._part == 0 else 0 for k in counts[0]}

  def skip_counts(self) -> dict[str, int]:
    """Bad records skipped so far by this process's shards (TrainIterator.skip_counts)."""
    return self._summed([shard.skip_counts() for shard in self.shards])

  def filter_counts(self) -> dict[str, int]:
    """Good records left out on purpose so far (TrainIterator.filter_counts)."""
    return self._summed([shard.filter_counts() for shard in self.shards])


def make_train_iterator(data_cfg: ml_collections.ConfigDict,
                        batch_sharding: Optional[jax.sharding.Sharding], *,
                        process_index: Optional[int] = None,
                        process_count: Optional[int] = None,
                        num_shards: int = 0) -> TrainInput:
  """The training input of this process; `num_shards` 0: one shard per process."""
  return TrainInput(data_cfg, batch_sharding, process_index=process_index,
                    process_count=process_count, num_shards=num_shards)
