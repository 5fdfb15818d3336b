"""Exactly-once evaluation input: every example of a source once, padded batches.

Host h of P takes examples h, h + P, h + 2P, ... of the source in file order;
every host runs the same number of steps, and padding examples carry
example_mask False and example_index -1, so metrics can leave them out.
Records are parsed and validated as in training (data/pipeline.py), and the
bad ones are skipped and counted (or raise, with config.data.strict); so is a
damaged shard (`corrupt_shard`). `skip_counts()` goes into every evaluation
report.
"""
import dataclasses
import math
from typing import Iterator, Optional, Sequence

import jax
import ml_collections
import tensorflow as tf

from cc12m_jax.data import batch_spec
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import pipeline
from cc12m_jax.data import records as records_lib

# The train keys plus each example's position in the source (-1: padding).
EVAL_DEVICE_KEYS = batch_spec.device_keys(batch_spec.EVAL)
_DOMAIN_NAMES = {v: k for k, v in records_lib.DOMAIN_IDS.items()}


@dataclasses.dataclass(frozen=True)
class EvalExample:
  image_id: str
  domain: str          # 'in-domain' | 'near-domain' | 'out-domain' | ''
  captions: list[str]  # all reference captions


def _eval_records(files: Sequence[str], d: int,
                  validator: records_lib.RecordValidator,
                  chunk: int, dtype: str) -> tf.data.Dataset:
  """Good records of an eval source, in file order, one element each (a
  damaged shard up to its damage, counted or raised on by `validator`)."""
  @tf.autograph.experimental.do_not_convert
  def parse(serialized):
    serialized = validator.drop_shard_markers(serialized)
    parsed = records_lib.parse_batch(serialized, d, feature_dtype=dtype)
    keep = validator.keep_mask(parsed)
    captions = parsed.pop("captions")
    del parsed["reason"]
    parsed["caption"] = captions[:, :1].to_tensor(default_value="",
                                                  shape=[None, 1])[:, 0]
    parsed["num_captions"] = tf.cast(captions.row_lengths(), tf.int32)
    parsed["all_captions"] = tf.strings.reduce_join(
        captions, axis=1, separator="\n")
    return {k: tf.boolean_mask(v, keep) for k, v in parsed.items()}
  ds = records_lib.read_shards(sorted(files)).batch(chunk)
  return ds.map(parse).unbatch()


class EvalIterator:
  """Each iteration yields every example of the source exactly once.

  Host h takes examples h, h + P, h + 2P, ... (P hosts); every host runs
  `num_steps` steps; padding examples have example_mask False and
  example_index -1.
  """

  def __init__(self, data_cfg: ml_collections.ConfigDict, source: str,
               batch_sharding: Optional[jax.sharding.Sharding], *,
               process_index: Optional[int] = None,
               process_count: Optional[int] = None):
    self.source = source
    self.process_index, self.process_count = pipeline.hosts(process_index, process_count)
    self.batch_sharding = batch_sharding
    self.tokenizer, self._validator = pipeline.host_setup(data_cfg)
    self._data_cfg = data_cfg
    metadata = metadata_lib.load_metadata(data_cfg.data_dir, source)
    self._d, self._dtype = metadata.feature_dim, metadata.feature_dtype
    self._files = metadata_lib.shard_files(data_cfg.data_dir, source)
    self.batch_size = pipeline.per_host_batch(data_cfg.eval_global_batch_size,
                                              self.process_count, "eval_global_batch_size")
    self.examples = self._read_examples()
    n = len(self.examples)
    most = math.ceil(n / self.process_count)          # host 0 has the most
    self.num_steps = max(1, math.ceil(most / self.batch_size))

  def _read_examples(self) -> list[EvalExample]:
    validator = records_lib.RecordValidator(strict=self._data_cfg.strict)
    spec = _eval_records(self._files, self._d, validator,
                         self._data_cfg.parse_batch_size, self._dtype)
    ds = spec.map(lambda e: (e["image_id"], e["domain"], e["all_captions"]))
    examples = []
    try:
      for image_id, domain, captions in ds.batch(1024).as_numpy_iterator():
        for i, dom, caps in zip(image_id, domain, captions):
          examples.append(EvalExample(i.decode(), _DOMAIN_NAMES[int(dom)],
                                      caps.decode().split("\n")))
    except tf.errors.InvalidArgumentError as e:
      error = records_lib.bad_record_error(e)
      if error is None:
        raise
      raise error from None  # the in-graph assertion's text is all in `error`
    self._validator.variable.assign(validator.variable)
    if not examples:
      skipped = {k: v for k, v in validator.counts().items() if v}
      directory = metadata_lib.source_dir(self._data_cfg.data_dir, self.source)
      raise ValueError(f"eval source {self.source!r} ({directory}) has no usable record; "
                       f"skipped, by reason: {skipped or 'none'}")
    return examples

  def _dataset(self) -> tf.data.Dataset:
    pi, pc = self.process_index, self.process_count
    ds = _eval_records(self._files, self._d,
                       records_lib.RecordValidator(strict=False),
                       self._data_cfg.parse_batch_size, self._dtype)
    ds = ds.enumerate().filter(lambda i, e: i % pc == pi)

    @tf.autograph.experimental.do_not_convert
    def with_index(i, e):
      e = dict(e)
      for k in ("all_captions", "num_captions", "source", "width", "height"):
        del e[k]
      e["example_index"] = tf.cast(i, tf.int32)
      e["example_mask"] = tf.constant(True)
      return e
    ds = ds.map(with_index)
    local = len(range(pi, len(self.examples), pc))
    num_pad = self.num_steps * self.batch_size - local
    pad = tf.nest.map_structure(
        lambda s: (tf.zeros(s.shape, s.dtype) if s.dtype != tf.string
                   else tf.fill(s.shape, "")), ds.element_spec)
    pad["example_index"] = tf.constant(-1)
    pad["example_mask"] = tf.constant(False)
    ds = ds.concatenate(tf.data.Dataset.from_tensors(pad).repeat(num_pad))
    ds = ds.batch(self.batch_size, drop_remainder=True)
    ds = ds.map(pipeline.tokenize_batch(self.tokenizer,
                                        self._data_cfg.max_caption_length,
                                        self._data_cfg.max_tag_tokens),
                num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    return ds.prefetch(2)

  def host_batches(self) -> Iterator[dict]:
    """This host's batches as numpy dicts (strings included)."""
    for batch in self._dataset():
      yield pipeline.to_numpy(batch)

  def __iter__(self) -> Iterator[dict]:
    if self.batch_sharding is None:
      raise ValueError("EvalIterator was built without batch_sharding; "
                       "use host_batches()")
    for batch in self.host_batches():
      yield pipeline.to_device(batch, self.batch_sharding, EVAL_DEVICE_KEYS)

  def __len__(self) -> int:
    return self.num_steps

  def skip_counts(self) -> dict[str, int]:
    return self._validator.counts()


def make_eval_iterator(data_cfg: ml_collections.ConfigDict, source: str,
                       batch_sharding: Optional[jax.sharding.Sharding], *,
                       process_index: Optional[int] = None,
                       process_count: Optional[int] = None) -> EvalIterator:
  return EvalIterator(data_cfg, source, batch_sharding,
                      process_index=process_index, process_count=process_count)
