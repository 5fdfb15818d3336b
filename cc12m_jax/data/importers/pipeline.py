"""The import job's Beam graph: read features, tags, captions; join; write.

  features ─┐
  tags ─────┼─ (shard of image_id, row) ─ GroupByKey ─ JoinShardFn ─ records.tfrecord-*
  captions ─┘                                             │
  bad rows of every stage ─ ResolveLines ─────────────────┴─ bad_rows.jsonl
  counts of every stage ─ CombinePerKey(sum) ───────  .import_counts.json

Counts are computed inside the pipeline, so they are exact on every runner
(counters can be approximate or absent on some); run.py reads them back.
"""
import dataclasses
import functools
import json
import os
from typing import Sequence

import apache_beam as beam

from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.data.importers import bottomup
from cc12m_jax.data.importers import captions as captions_lib
from cc12m_jax.data.importers import join as join_lib
from cc12m_jax.data.importers import npz as npz_lib
from cc12m_jax.data.importers import readers
from cc12m_jax.data.importers import regions as regions_lib
from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.importers import tags as tags_lib
from cc12m_jax.data.importers import textfiles

CAPTION_FORMATS = ("cc", "coco", "nocaps", "flickr", "locnar", "curated")
FEATURE_FORMATS = tuple(bottomup.LAYOUTS) + ("npz",)
COUNTS_FILE = ".import_counts.json"
BAD_ROWS_FILE = "bad_rows.jsonl"


@dataclasses.dataclass
class ImportSpec:
  """One import: a caption format joined with features (and tags)."""
  format: str                      # one of CAPTION_FORMATS
  source: str                      # records go to <output_dir>/<source>/
  output_dir: str
  captions: Sequence[str]          # file patterns
  features: Sequence[str]
  features_format: str = "bottomup"
  feature_dim: int = 2048
  tags: Sequence[str] = ()
  image_info: Sequence[str] = ()   # nocaps image-info JSON (sizes, domains)
  split: str = ""                  # Karpathy splits, e.g. "train,restval"
  tsv_fields: str = ""             # overrides the layout's columns
  npz_keys: str = ""               # role=key overrides
  geometry_dims: int = 0           # 6: VinVL rows of D + 6 values
  boxes_normalized: bool = False
  feature_dtype: str = "float16"
  strict: bool = False
  records_per_shard: int = 1000
  num_shards: int = 0              # 0: from records_per_shard
  split_bytes: int = textfiles.DEFAULT_SPLIT_BYTES

  def check(self) -> None:
    if self.format not in CAPTION_FORMATS:
      raise ValueError(f"format {self.format!r}: choose one of {CAPTION_FORMATS}")
    if self.features_format not in FEATURE_FORMATS:
      raise ValueError(f"--features_format={self.features_format!r}: choose "
                       f"one of {FEATURE_FORMATS}")
    for name in ("source", "output_dir"):
      if not getattr(self, name):
        raise ValueError(f"--{name} is required")
    if os.sep in self.source or "/" in self.source:
      raise ValueError(f"--source={self.source!r}: a name, not a path")
    if not self.captions and not (self.format == "nocaps" and self.image_info):
      raise ValueError("--captions is required")
    if not self.features:
      raise ValueError("--features is required")
    if self.image_info and self.format != "nocaps":
      raise ValueError("--image_info is for the nocaps format")
    if self.format == "flickr" and not self.split:
      raise ValueError("flickr: choose the Karpathy split(s) with --split")
    if self.feature_dim <= 0:
      raise ValueError(f"--feature_dim={self.feature_dim}: must be > 0")
    if self.records_per_shard <= 0 or self.num_shards < 0:
      raise ValueError("--records_per_shard must be > 0, --num_shards >= 0")
    captions_lib.splits_of(self.split)
    self.region_options()  # checks the dtype
    self.feature_parser()  # checks the TSV fields / npz keys

  def region_options(self) -> regions_lib.RegionOptions:
    records_lib.check_feature_dtype(self.feature_dtype, "--feature_dtype")
    return regions_lib.RegionOptions(
        feature_dim=self.feature_dim, feature_dtype=self.feature_dtype,
        geometry_dims=self.geometry_dims,
        boxes_normalized=self.boxes_normalized)

  def feature_parser(self):
    if self.features_format == "npz":
      return functools.partial(
          _npz_rows, npz_lib.npz_options(self.npz_keys, self.region_options()))
    return functools.partial(bottomup.parse_line, bottomup.tsv_options(
        self.features_format, self.tsv_fields, self.region_options()))


def _npz_rows(options: npz_lib.NpzOptions, path: str, data: bytes):
  return [npz_lib.parse_file(options, rows_lib.Location(path), data)]


def _read_features(p, spec: ImportSpec):
  parser = spec.feature_parser()
  if spec.features_format == "npz":
    return p | "Features" >> readers.ReadFiles(
        "features", spec.features, parser, spec.strict)
  return p | "Features" >> readers.ReadLines(
      "features", spec.features, parser, spec.strict, spec.split_bytes)


def _read_captions(p, spec: ImportSpec) -> list[dict]:
  splits = captions_lib.splits_of(spec.split)
  line_parsers = {"cc": captions_lib.parse_cc_line,
                  "locnar": captions_lib.parse_locnar_line}
  if spec.format in line_parsers:
    return [p | "Captions" >> readers.ReadLines(
        "captions", spec.captions, line_parsers[spec.format], spec.strict,
        spec.split_bytes)]
  if spec.format == "curated":
    parquet = [c for c in spec.captions if ".parquet" in os.path.basename(c)]
    jsonl = [c for c in spec.captions if c not in parquet]
    out = []
    if parquet:
      out.append(p | "CuratedParquet" >> readers.ReadFiles(
          "captions", parquet, captions_lib.parse_curated_parquet, spec.strict))
    if jsonl:
      out.append(p | "CuratedJsonl" >> readers.ReadLines(
          "captions", jsonl, captions_lib.parse_curated_line, spec.strict,
          spec.split_bytes))
    return out
  options = captions_lib.JsonOptions(
      splits=splits, id_rule="stem" if spec.format == "flickr" else "coco")
  out = []
  if spec.captions:
    out.append(p | "Captions" >> readers.ReadFiles(
        "captions", spec.captions,
        functools.partial(captions_lib.parse_json_file, options), spec.strict))
  if spec.image_info:
    info = dataclasses.replace(options, entry=False)
    out.append(p | "ImageInfo" >> readers.ReadFiles(
        "image_info", spec.image_info,
        functools.partial(captions_lib.parse_json_file, info), spec.strict))
  return out


def _counted(pcoll, label: str, key):
  return pcoll | label >> beam.Map(lambda x, key=key: (key(x) if callable(key) else key, 1))


def build(p: beam.Pipeline, spec: ImportSpec) -> None:
  """Adds the import graph for `spec` to `p`."""
  spec.check()
  inputs = {"features": [_read_features(p, spec)],
            "captions": _read_captions(p, spec)}
  if spec.tags:
    inputs["tags"] = [p | "Tags" >> readers.ReadLines(
        "tags", spec.tags, tags_lib.parse_line, spec.strict, spec.split_bytes)]
  rows_by_kind, bad, counts = {}, [], []
  for kind, parts in inputs.items():
    title = kind.capitalize()
    rows = ([part["rows"] for part in parts]
            | f"{title}Rows" >> beam.Flatten())
    rows_by_kind[kind] = rows
    counts.append(_counted(rows, f"Count{title}", f"rows/{kind}"))
    bad.extend(part["bad"] for part in parts)

  source_dir = metadata_lib.source_dir(spec.output_dir, spec.source)
  joined = rows_by_kind | "Join" >> join_lib.JoinAndWrite(
      metadata_lib.shard_prefix(spec.output_dir, spec.source),
      join_lib.JoinOptions(spec.source, spec.feature_dtype, spec.strict,
                           require_domain=spec.format == "nocaps"),
      inputs["features"][0]["size"], spec.records_per_shard, spec.num_shards)
  bad.append(joined["bad"])
  counts.append(joined["counts"])

  all_bad = bad | "AllBadRows" >> beam.Flatten()
  counts.append(_counted(all_bad, "CountBad", lambda b: f"bad_rows/{b.reason}"))
  _ = (all_bad
       | "ResolveLines" >> readers.ResolveLines()
       | "BadToJson" >> beam.Map(lambda b: json.dumps(b.to_json(), ensure_ascii=False))
       | "WriteBad" >> beam.io.WriteToText(
           os.path.join(source_dir, BAD_ROWS_FILE), num_shards=1,
           shard_name_template=""))
  _ = (counts
       | "AllCounts" >> beam.Flatten()
       | "SumCounts" >> beam.CombinePerKey(sum)
       | "CountList" >> beam.combiners.ToList()
       | "CountsJson" >> beam.Map(lambda kv: json.dumps(dict(sorted(kv))))
       | "WriteCounts" >> beam.io.WriteToText(
           os.path.join(source_dir, COUNTS_FILE), num_shards=1,
           shard_name_template=""))
