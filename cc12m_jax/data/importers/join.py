"""The join: features, tags and captions of each image id -> one record,
written straight into the record's shard.

One shuffle does both: every row is keyed by the shard of its image id
(CRC32(id) % N), so a shard's group holds all rows of its images; the
shard's DoFn joins them by id and writes the shard file, sorted by id (the
same inputs give the same files on every runner). A join by id followed by a
second shuffle into shards would move every record twice. N =
ceil(feature rows / records_per_shard) unless fixed, the rows counted from
the inputs without parsing them (lines or files): a count of the parsed rows
would hold every row until it is known. Every shard is written, even empty.

Per image id, rows are taken in file order:
  * one feature row (a second is a bad row `duplicate_id`, the first kept);
  * caption rows: at most one *entry* (a CC line, a COCO image, a curated
    pair; a second is `duplicate_id`) plus any number of non-entry rows
    (narratives, image-info sizes and domains); the captions are all of
    theirs, in file order;
  * at most one tag row (else `duplicate_id`); without one, the tags a
    curated pair carries.
The image size is the features' (bottom-up TSVs give it), else the
captions'; pixel boxes without any size are a bad row `missing_size`. The
record is named by the join key, or by the caption entry's `record_id` (COCO
Karpathy: joined by cocoid, named by file stem). The
domain is the first caption row's that has one (nocaps: the captions file or
the image info); a nocaps image with none is a bad row `bad_domain`.

Counted under these keys (import_report.json):
  joined                      records written
  captions                    captions in them
  features_without_captions   feature rows whose id has no caption
  captions_without_features   caption rows' ids with no features
  tags_without_features       tag rows' ids with no features
  rows/<kind>                 good rows read (features, tags, captions)
  bad_rows/<reason>           bad rows, by reason (rows.REASONS)
"""
import collections
import dataclasses
import math
import zlib
from typing import Iterator, Optional

import apache_beam as beam
import numpy as np
import tensorflow as tf

from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import readers
from cc12m_jax.data.importers import regions as regions_lib
from cc12m_jax.data.importers import rows as rows_lib

COUNTS = "counts"
KINDS = ("features", "tags", "captions")


@dataclasses.dataclass(frozen=True)
class JoinOptions:
  source: str
  feature_dtype: str
  strict: bool
  require_domain: bool = False   # nocaps: every record needs its domain


@dataclasses.dataclass
class Joined:
  """The outcome for one image id."""
  serialized: Optional[bytes] = None
  record_id: str = ""
  bad: list = dataclasses.field(default_factory=list)
  counts: list = dataclasses.field(default_factory=list)


def _duplicates(image_id: str, rows: list, what: str) -> list:
  return [rows_lib.BadRow("duplicate_id", extra.location,
                          f"a second {what} row for the image", image_id,
                          first=rows[0].location) for extra in rows[1:]]


def join_image(image_id: str, features: list, tag_rows: list,
               caption_rows: list, options: JoinOptions) -> Joined:
  """The record of one image id from its rows (each list in file order)."""
  out = Joined()
  if not features:
    if caption_rows:
      out.counts.append(("captions_without_features", 1))
    if tag_rows:
      out.counts.append(("tags_without_features", 1))
    return out
  entries = [r for r in caption_rows if r.entry]
  out.bad += (_duplicates(image_id, features, "features")
              + _duplicates(image_id, tag_rows, "tags")
              + _duplicates(image_id, entries, "caption entry"))
  # (entries[0] is only looked at when some row is an entry)
  kept = [r for r in caption_rows if not r.entry or r is entries[0]]
  captions = [c for r in kept for c in r.captions]
  if not captions:
    out.counts.append(("features_without_captions", 1))
    return out
  feature = features[0]
  width, height = feature.width, feature.height
  if not width:
    sized = [r for r in kept if r.width and r.height]
    width, height = (sized[0].width, sized[0].height) if sized else (0, 0)
  boxes = feature.region_boxes
  domain = next((r.domain for r in kept if r.domain), "")
  if options.require_domain and not domain:
    out.bad.append(rows_lib.BadRow(
        "bad_domain", kept[0].location, "no nocaps domain for the image in the "
        "captions or the image info", image_id))
    return out
  try:
    if not width:
      raise rows_lib.RowError("missing_size", "no image size in the "
                              "features or the captions")
    if not feature.normalized:
      boxes = regions_lib.check_boxes(
          regions_lib.normalize_boxes(boxes, width, height))
  except rows_lib.RowError as err:
    out.bad.append(rows_lib.BadRow(err.reason, feature.location, err.detail,
                                   image_id))
    return out
  if tag_rows:
    tags, scores = list(tag_rows[0].tags), list(tag_rows[0].scores)
  else:
    carried = next((r.tags for r in kept if r.tags), [])
    tags, scores = [t for t, _ in carried], [s for _, s in carried]
  named = next((r.record_id for r in kept if r.record_id), image_id)
  record = records_lib.FeatureRecord(
      image_id=named, source=options.source,
      global_feature=feature.global_feature.astype(np.float32),
      region_features=feature.region_features.astype(np.float32),
      region_boxes=boxes, tags=tags,
      tag_scores=np.asarray(scores, np.float32), captions=captions,
      width=width, height=height, domain=domain)
  example = records_lib.record_to_example(record, options.feature_dtype)
  out.serialized = example.SerializeToString(deterministic=True)
  out.record_id = named
  out.counts += [("joined", 1), ("captions", len(captions))]
  return out


def shard_of(image_id: str, num_shards: int) -> int:
  """A stable shard for an id (CRC32: the same on every worker and run)."""
  return zlib.crc32(image_id.encode("utf-8")) % num_shards


def num_shards_for(num_rows: int, records_per_shard: int, fixed: int) -> int:
  if fixed:
    return fixed
  return max(1, math.ceil(num_rows / records_per_shard))


class JoinShardFn(beam.DoFn):
  """(shard, [(kind, row) or None]) -> writes the shard's file; bad rows and
  counts on tagged outputs; the main output is the file's path."""

  def __init__(self, prefix: str, options: JoinOptions):
    super().__init__()
    self.prefix = prefix
    self.options = options

  def process(self, item, num_shards: int) -> Iterator:
    shard, tagged = item
    by_id: dict[str, dict[str, list]] = collections.defaultdict(
        lambda: {kind: [] for kind in KINDS})
    for entry in tagged:
      if entry is not None:
        kind, row = entry
        by_id[row.image_id][kind].append(row)
    records = []
    for image_id in sorted(by_id):
      groups = {k: sorted(v, key=lambda r: r.location)
                for k, v in by_id[image_id].items()}
      joined = join_image(image_id, groups["features"], groups["tags"],
                          groups["captions"], self.options)
      for bad in joined.bad:
        if self.options.strict:
          readers.raise_bad(bad)
        yield beam.pvalue.TaggedOutput(readers.BAD, bad)
      for count in joined.counts:
        yield beam.pvalue.TaggedOutput(COUNTS, count)
      if joined.serialized is not None:
        records.append((joined.record_id, joined.serialized))
    path = records_lib.shard_paths(self.prefix, num_shards)[shard]
    # Written in place: a retried bundle rewrites the same whole file.
    with tf.io.TFRecordWriter(path) as writer:
      for _, serialized in sorted(records):   # by the records' ids
        writer.write(serialized)
    yield path


class JoinAndWrite(beam.PTransform):
  """{"features", "tags", "captions": rows} -> record shards under `prefix`;
  returns {"paths", "bad", "counts"}. `feature_rows`: ints adding up to the
  number of feature rows (readers' "size")."""

  def __init__(self, prefix: str, options: JoinOptions, feature_rows,
               records_per_shard: int, num_shards: int):
    super().__init__()
    self.prefix, self.options = prefix, options
    self.feature_rows = feature_rows
    self.records_per_shard, self.num_shards = records_per_shard, num_shards

  def expand(self, inputs: dict):
    per_shard, fixed = self.records_per_shard, self.num_shards
    shards = (self.feature_rows
              | "SumFeatureRows" >> beam.CombineGlobally(sum)
              | "NumShards" >> beam.Map(num_shards_for, per_shard, fixed))
    n = beam.pvalue.AsSingleton(shards)
    keyed = [rows | f"{kind.capitalize()}ByShard" >> beam.Map(
        lambda r, n, kind=kind: (shard_of(r.image_id, n), (kind, r)), n)
             for kind, rows in inputs.items()]
    every = shards | "EveryShard" >> beam.FlatMap(
        lambda n: [(i, None) for i in range(n)])
    joined = ((*keyed, every)
              | "AllRows" >> beam.Flatten()
              | "GroupByShard" >> beam.GroupByKey()
              | "JoinAndWrite" >> beam.ParDo(
                  JoinShardFn(self.prefix, self.options), n).with_outputs(
                      readers.BAD, COUNTS, main="paths"))
    return {"paths": joined.paths, "bad": joined[readers.BAD],
            "counts": joined[COUNTS]}
