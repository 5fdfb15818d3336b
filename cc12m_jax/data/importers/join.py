"""The join: features, tags and captions of each image id -> one record.

Per image id (after a CoGroupByKey), rows are taken in file order:
  * one feature row (a second is a bad row `duplicate_id`, the first kept);
  * caption rows: at most one *entry* (a CC line, a COCO image, a curated
    pair; a second is `duplicate_id`) plus any number of non-entry rows
    (narratives, image-info sizes and domains); the captions are all of
    theirs, in file order;
  * at most one tag row (else `duplicate_id`); without one, the tags a
    curated pair carries.
The image size is the features' (bottom-up TSVs give it), else the
captions'; pixel boxes without any size are a bad row `missing_size`.

Counted under these keys (import_report.json):
  joined                      records written
  captions                    captions in them
  features_without_captions   feature rows whose id has no caption
  captions_without_features   caption rows' ids with no features
  tags_without_features       tag rows' ids with no features
  rows/<kind>                 good rows read (features, tags, captions)
  bad_rows/<reason>           bad rows, by reason (rows.REASONS)
"""
import dataclasses
import math
import zlib
from typing import Iterable, Iterator

import apache_beam as beam
import numpy as np
import tensorflow as tf

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import readers
from cc12m_jax.data.importers import regions as regions_lib
from cc12m_jax.data.importers import rows as rows_lib

COUNTS = "counts"


@dataclasses.dataclass(frozen=True)
class JoinOptions:
  source: str
  feature_dtype: str
  strict: bool


def _sorted(rows: Iterable) -> list:
  return sorted(rows, key=lambda r: r.location)


class JoinFn(beam.DoFn):
  """(image_id, {"features", "tags", "captions"}) -> (image_id, serialized
  tf.train.Example); bad rows and counts on tagged outputs."""

  def __init__(self, options: JoinOptions):
    super().__init__()
    self.options = options

  def _count(self, key: str, n: int = 1):
    return beam.pvalue.TaggedOutput(COUNTS, (key, n))

  def _bad(self, bad: rows_lib.BadRow):
    if self.options.strict:
      readers.raise_bad(bad)
    return beam.pvalue.TaggedOutput(readers.BAD, bad)

  def _first(self, image_id: str, rows: list, what: str) -> Iterator:
    """Yields bad rows for every row after the first."""
    for extra in rows[1:]:
      yield self._bad(rows_lib.BadRow(
          "duplicate_id", extra.location, f"a second {what} row for the image",
          image_id, first=rows[0].location))

  def process(self, element) -> Iterator:
    image_id, groups = element
    features = _sorted(groups.get("features", ()))
    tag_rows = _sorted(groups.get("tags", ()))
    caption_rows = _sorted(groups.get("captions", ()))
    if not features:
      if caption_rows:
        yield self._count("captions_without_features")
      if tag_rows:
        yield self._count("tags_without_features")
      return
    yield from self._first(image_id, features, "features")
    yield from self._first(image_id, tag_rows, "tags")
    entries = [r for r in caption_rows if r.entry]
    yield from self._first(image_id, entries, "caption entry")
    # (entries[0] is only looked at when some row is an entry)
    kept = [r for r in caption_rows if not r.entry or r is entries[0]]
    captions = [c for r in kept for c in r.captions]
    if not captions:
      yield self._count("features_without_captions")
      return
    feature = features[0]
    width, height = feature.width, feature.height
    if not width:
      sized = [r for r in kept if r.width and r.height]
      width, height = (sized[0].width, sized[0].height) if sized else (0, 0)
    boxes = feature.region_boxes
    try:
      if not width:
        raise rows_lib.RowError("missing_size", "no image size in the "
                                "features or the captions")
      if not feature.normalized:
        boxes = regions_lib.check_boxes(
            regions_lib.normalize_boxes(boxes, width, height))
    except rows_lib.RowError as err:
      yield self._bad(rows_lib.BadRow(err.reason, feature.location,
                                      err.detail, image_id))
      return
    if tag_rows:
      tags, scores = list(tag_rows[0].tags), list(tag_rows[0].scores)
    else:
      carried = next((r.tags for r in kept if r.tags), [])
      tags, scores = [t for t, _ in carried], [s for _, s in carried]
    domain = next((r.domain for r in kept if r.domain), "")
    record = records_lib.FeatureRecord(
        image_id=image_id, source=self.options.source,
        global_feature=feature.global_feature.astype(np.float32),
        region_features=feature.region_features.astype(np.float32),
        region_boxes=boxes, tags=tags,
        tag_scores=np.asarray(scores, np.float32), captions=captions,
        width=width, height=height, domain=domain)
    example = records_lib.record_to_example(record, self.options.feature_dtype)
    yield self._count("joined")
    yield self._count("captions", len(captions))
    yield image_id, example.SerializeToString(deterministic=True)


def shard_of(image_id: str, num_shards: int) -> int:
  """A stable shard for an id (CRC32: the same on every worker and run)."""
  return zlib.crc32(image_id.encode("utf-8")) % num_shards


def num_shards_for(num_records: int, records_per_shard: int,
                   fixed: int) -> int:
  if fixed:
    return fixed
  return max(1, math.ceil(num_records / records_per_shard))


class _WriteShardFn(beam.DoFn):
  """Writes one shard, records sorted by image id (same input, same bytes)."""

  def __init__(self, prefix: str):
    super().__init__()
    self.prefix = prefix

  def process(self, item, num_shards: int) -> Iterator[str]:
    shard, records = item
    records = sorted(r for r in records if r is not None)
    path = records_lib.shard_paths(self.prefix, num_shards)[shard]
    # Written in place: a retried bundle rewrites the same whole file.
    with tf.io.TFRecordWriter(path) as writer:
      for _, serialized in records:
        writer.write(serialized)
    yield path


class WriteShards(beam.PTransform):
  """(image_id, serialized) -> `<prefix>-0000i-of-0000N`, N from the count
  (records_per_shard) unless fixed; every shard is written, even empty."""

  def __init__(self, prefix: str, records_per_shard: int, num_shards: int):
    super().__init__()
    self.prefix = prefix
    self.records_per_shard = records_per_shard
    self.num_shards = num_shards

  def expand(self, records):
    per_shard, fixed = self.records_per_shard, self.num_shards
    shards = (records
              | "CountRecords" >> beam.combiners.Count.Globally()
              | "NumShards" >> beam.Map(num_shards_for, per_shard, fixed))
    n = beam.pvalue.AsSingleton(shards)
    keyed = records | "ShardOf" >> beam.Map(
        lambda kv, n: (shard_of(kv[0], n), kv), n)
    every = shards | "EveryShard" >> beam.FlatMap(
        lambda n: [(i, None) for i in range(n)])
    return ((keyed, every)
            | "AllShards" >> beam.Flatten()
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShard" >> beam.ParDo(_WriteShardFn(self.prefix), n))
