"""Writes the synthetic long-tail world: every source, references, vocabulary.

    python -m cc12m_jax.data.synthetic.generate --config=configs/synthetic_data.py \
        --output_dir=data/synthetic

Sizes and knobs come from `config.synthetic`; the output directory defaults to
`config.data.data_dir`. The output is a pure function of the config: every
record is drawn from its own generator seeded by (seed, source, index), and
files are written in a fixed order, so the same seed gives the same bytes.
See docs/synthetic_world.md.
"""
import collections
import copy
import dataclasses
import json
import math
import os
import sys
from typing import Callable, Iterator, Sequence

from absl import app
from absl import flags
import ml_collections
from ml_collections import config_flags
import numpy as np
import tensorflow as tf

from cc12m_jax import config_check
from cc12m_jax.data import image_text_check
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data import records as records_lib
from cc12m_jax.data.synthetic import captions as captions_lib
from cc12m_jax.data.synthetic import concepts as concepts_lib
from cc12m_jax.data.synthetic import world as world_lib
from cc12m_jax.data.text import build_vocab as build_vocab_lib
from cc12m_jax.data.text import tokenizer as tokenizer_lib
from cc12m_jax.data.text import vocab_file

TRAIN_SOURCES = ("cc3m", "cc12m", "coco_train", "flickr_train")
# New sources go last: a source's code seeds its records, so appending one
# leaves every other source's bytes as they were.
ALL_SOURCES = ("cc3m", "cc12m", "coco_train", "coco_val", "nocaps_val",
               "flickr_train", "flickr_val", "flickr_test", "cc3m_dev")
EVAL_SOURCES = tuple(s for s in ALL_SOURCES if s not in TRAIN_SOURCES)
# Sources whose captions make the vocabulary (the training corpora).
VOCAB_SOURCES = TRAIN_SOURCES
_SOURCE_CODES = {name: i for i, name in enumerate(ALL_SOURCES)}
# What the cc12m source's captions are: raw alt-texts (the default), or the
# same pairs written as CC3M's transformations write them (an ablation:
# docs/synthetic_world.md, "Sources").
CC12M_CAPTION_STYLES = ("alt_text", "cc3m")
# web_image_text_filter: candidates drawn for one web record before it is an
# error (the filter passes most candidates at once: docs/synthetic_world.md).
MAX_FILTER_DRAWS = 1000
# The filtered web sources (cc3m_dev is drawn as cc3m is).
FILTERED_SOURCES = ("cc3m", "cc12m", "cc3m_dev")
_PROGRESS_MIN_RECORDS = 20_000


@dataclasses.dataclass
class SourceSpec:
  name: str
  num_records: int
  # (world, index, rng) -> (scene, captions, domain label, image id, rng to
  # render the features with)
  make: Callable[[world_lib.World, int, np.random.Generator],
                 tuple[world_lib.Scene, list[str], str, str,
                       np.random.Generator]]


def image_rng(seed: int, source: str, index: int) -> np.random.Generator:
  return np.random.default_rng([seed, _SOURCE_CODES[source], index])


def flickr_split_sizes(num_flickr: int, num_flickr_val: int,
                       num_flickr_test: int) -> dict[str, int]:
  """Train 2/3 of `num_flickr`; val and test their own sizes, as Flickr30K's
  1K galleries (the difficulty of retrieval grows with the gallery)."""
  return {"flickr_train": num_flickr - 2 * max(1, num_flickr // 6),
          "flickr_val": num_flickr_val, "flickr_test": num_flickr_test}


def _shows_novel(world: world_lib.World, scene: world_lib.Scene) -> bool:
  return any(world.concepts[i.concept].domain != concepts_lib.IN_DOMAIN
             for i in scene.instances)


def _draws(seed: int, source: str, index: int,
           rng: np.random.Generator, filtered: bool) -> Iterator[np.random.Generator]:
  """A web record's candidate generators: its own first (the unfiltered
  world's draw), then, when filtered, one of their own per further candidate."""
  yield rng
  if filtered:
    for draw in range(1, MAX_FILTER_DRAWS):
      yield np.random.default_rng([seed, _SOURCE_CODES[source], index, 3, draw])
  raise ValueError(
      f"{source} record {index}: no candidate in {MAX_FILTER_DRAWS} passes the image-text "
      "filter (config.synthetic.web_image_text_filter)")


def _source_specs(cfg: ml_collections.ConfigDict,
                  world: world_lib.World,
                  rejected: collections.Counter | None = None) -> list[SourceSpec]:
  """The sources' record makers. With web_image_text_filter, `rejected`
  counts, per web source, the candidates its image-text filter rejected."""
  in_pool = world.by_domain[concepts_lib.IN_DOMAIN]
  near_pool = world.by_domain[concepts_lib.NEAR_DOMAIN]
  out_pool = world.by_domain[concepts_lib.OUT_DOMAIN]
  # What a COCO photo shows beyond COCO's 80 classes: any novel concept,
  # named entities included, by its web frequency. Those of COCO's hypernyms
  # come first, then those of the hypernyms COCO lacks, in inventory order
  # (the order fixes which concept a draw picks).
  coco_novel = np.concatenate([near_pool, np.union1d(
      out_pool, world.by_domain[concepts_lib.WEB_ONLY])])
  coco_novel_p = world.frequencies[coco_novel] / world.frequencies[coco_novel].sum()
  period = (max(1, round(1.0 / cfg.cc12m_duplicate_fraction))
            if cfg.cc12m_duplicate_fraction > 0 else 0)
  web_vocab = (captions_lib.web_vocabulary(cfg.web_vocab_size, cfg.seed, world)
               if cfg.cc12m_context_words > 0 else None)

  filtered = cfg.web_image_text_filter
  image_text = image_text_check.curation_image_text()

  def passes(w, scene, render_rng, raw_text):
    # The curation's image-text filter against the tags this image will be
    # rendered with (from a copy: the record renders from render_rng itself).
    rendered = w.render(scene, copy.deepcopy(render_rng))
    return image_text_check.rejection(
        raw_text, rendered.tags, rendered.tag_scores, image_text) is None

  def cc3m(w, i, rng, prefix="cc3m", count=True):
    # With web_image_text_filter, a candidate whose raw alt-text (before
    # CC3M's hypernymization, which runs after the filters) shares no
    # confident tag with its image is redrawn; the poor-fit decision of the
    # first candidate holds for all (the raters' 90.3% is of kept pairs).
    misaligned = None
    for draw, r in enumerate(_draws(cfg.seed, prefix, i, rng, filtered)):
      # CC3M's filters (text quality, rare words, image-text overlap) reject
      # alt-texts of tail concepts more often than of common ones: a candidate
      # showing a novel concept passes with probability cc3m_novel_keep.
      scene = w.sample_scene(r)
      while (cfg.cc3m_novel_keep < 1.0 and _shows_novel(w, scene)
             and r.random() >= cfg.cc3m_novel_keep):
        scene = w.sample_scene(r)
      described = scene
      # A poor-fit pair that CC3M's filters still pass (its raters found about
      # a tenth of CC3M poor fits): the caption names something else. No draw
      # at 0, so at 0 the world is byte for byte the one before this knob.
      coin = (cfg.cc3m_misaligned_fraction > 0
              and r.random() < cfg.cc3m_misaligned_fraction)
      misaligned = coin if draw == 0 else misaligned
      if misaligned:
        described = captions_lib.misnamed(w, scene, r)
      before = copy.deepcopy(r) if filtered else None
      caption = captions_lib.cc3m_style(w, described, r)
      if not filtered or passes(
          w, scene, r, captions_lib.cc3m_style(w, described, before, hypernymize=False)):
        return scene, [caption], "", f"{prefix}_{i:07d}", r
      if count and rejected is not None:
        rejected[prefix] += 1

  def cc12m(w, i, rng):
    misaligned_fraction = cfg.cc12m_misaligned_fraction
    for draw, r in enumerate(_draws(cfg.seed, "cc12m", i, rng, filtered)):
      text, scene, image_id, render_rng, aligned = cc12m_candidate(
          w, i, r, draw, misaligned_fraction)
      if not filtered or passes(w, scene, render_rng, text):
        return scene, [text], "", image_id, render_rng
      if rejected is not None:
        rejected["cc12m"] += 1
      # Later candidates keep the first one's poor-fit decision (the raters'
      # 76.6% is of the pairs CC12M kept).
      if draw == 0:
        misaligned_fraction = 0.0 if aligned else 1.0

  def cc12m_candidate(w, i, rng, draw, misaligned_fraction):
    if draw == 0 and period and cfg.num_cc3m and i % period == 0:
      # The same image as a CC3M record (same id, and the same features:
      # rendered from the CC3M record's own rng, advanced exactly as there),
      # with its raw alt-text: what the paper's CC3M exclusion removes. (A
      # later candidate, after the image-text filter rejected this one, is
      # a web image of its own.)
      j = (i // period * 7919) % cfg.num_cc3m
      scene, _, _, image_id, render_rng = cc3m(
          w, j, image_rng(cfg.seed, "cc3m", j), count=False)
    else:
      scene, image_id, render_rng = w.sample_scene(rng), f"cc12m_{i:07d}", rng
    text, aligned = captions_lib.cc12m_style(
        w, scene, rng, misaligned_fraction=misaligned_fraction)
    if cfg.cc12m_caption_style == "cc3m":
      # The ablation of the caption's style alone: the alt-text is still drawn
      # (so the image's generator advances as it does: the same scenes and
      # ids, and at the same misaligned fraction the same features), then
      # replaced by what CC3M's transformations write for the same pair, from
      # a generator of its own.
      # A misaligned pair stays at cc12m_misaligned_fraction; CC3M's cleaning
      # keeps no web context.
      # (Not with web_image_text_filter: the config check refuses both.)
      style_rng = np.random.default_rng([cfg.seed, _SOURCE_CODES["cc12m"], i, 2])
      described = scene
      if style_rng.random() < cfg.cc12m_misaligned_fraction:
        described = captions_lib.misnamed(w, scene, style_rng)
      return (captions_lib.cc3m_style(w, described, style_rng), scene, image_id,
              render_rng, aligned)
    if cfg.cc12m_context_words > 0:
      # Its own generator, so the alt-text's head and the image's features
      # are the same bytes with or without the context.
      context = captions_lib.web_context(
          w, scene, web_vocab, np.random.default_rng(
              [cfg.seed, _SOURCE_CODES["cc12m"], i, 1] + ([draw] if draw else [])),
          cfg.cc12m_context_words)
      text = f"{text} {context}" if context else text
    return text, scene, image_id, render_rng, aligned

  def coco(split):
    def make(w, i, rng):
      scene = w.sample_scene(rng, pool=in_pool)
      # COCO photos sometimes show (and their captions name) a thing outside
      # COCO's 80 classes (coco_novel, above).
      if (cfg.coco_novel_fraction > 0 and len(scene.instances) < 3
          and rng.random() < cfg.coco_novel_fraction):
        scene.instances.append(world_lib.Instance(
            int(rng.choice(coco_novel, p=coco_novel_p)),
            int(rng.integers(len(world_lib.COLORS)))))
      caps = [captions_lib.coco_style(w, scene, rng) for _ in range(5)]
      return scene, caps, "", f"coco_{split}_{i:07d}", rng
    return make

  def nocaps(w, i, rng):
    domain = concepts_lib.DOMAINS[i % 3]
    if domain == concepts_lib.IN_DOMAIN:
      scene = w.sample_scene(rng, pool=in_pool, uniform=True)
    elif domain == concepts_lib.OUT_DOMAIN:
      scene = w.sample_scene(rng, pool=out_pool, uniform=True)
    else:
      scene = w.sample_scene(rng, pool=near_pool, uniform=True)
      if rng.random() < 0.5 and len(scene.instances) < 3:
        scene.instances.append(world_lib.Instance(
            int(rng.choice(in_pool)), int(rng.integers(len(world_lib.COLORS)))))
    caps = [captions_lib.coco_style(w, scene, rng) for _ in range(10)]
    return scene, caps, w.domain_of(scene), f"nocaps_{i:07d}", rng

  def flickr(offset):
    def make(w, i, rng):
      scene = w.sample_scene(rng)
      caps = [captions_lib.coco_style(w, scene, rng) for _ in range(5)]
      return scene, caps, "", f"flickr_{offset + i:07d}", rng
    return make

  splits = flickr_split_sizes(cfg.num_flickr, cfg.num_flickr_val,
                              cfg.num_flickr_test)
  return [
      SourceSpec("cc3m", cfg.num_cc3m, cc3m),
      SourceSpec("cc12m", cfg.num_cc12m, cc12m),
      SourceSpec("coco_train", cfg.num_coco_train, coco("train")),
      SourceSpec("coco_val", cfg.num_coco_val, coco("val")),
      SourceSpec("nocaps_val", cfg.num_nocaps_val, nocaps),
      SourceSpec("flickr_train", splits["flickr_train"], flickr(0)),
      SourceSpec("flickr_val", splits["flickr_val"],
                 flickr(splits["flickr_train"])),
      SourceSpec("flickr_test", splits["flickr_test"],
                 flickr(splits["flickr_train"] + splits["flickr_val"])),
      # CC3M's own dev split (Table 7's benchmark): the same filtered web
      # distribution and style as cc3m, other images, one caption each.
      SourceSpec("cc3m_dev", cfg.num_cc3m_dev,
                 lambda w, i, rng: cc3m(w, i, rng, prefix="cc3m_dev")),
  ]


def _records(spec: SourceSpec, world: world_lib.World, seed: int,
             log: Callable[[str], None],
             shown: dict[str, list[str]]) -> Iterator[records_lib.FeatureRecord]:
  """The source's records; `shown` gets each image's concept names (what it shows)."""
  show = spec.num_records >= _PROGRESS_MIN_RECORDS
  step = max(1, spec.num_records // 10)
  for i in range(spec.num_records):
    rng = image_rng(seed, spec.name, i)
    scene, caps, domain, image_id, render_rng = spec.make(world, i, rng)
    shown[image_id] = sorted({world.concepts[inst.concept].name for inst in scene.instances})
    rendered = world.render(scene, render_rng)
    yield records_lib.FeatureRecord(
        image_id=image_id, source=spec.name,
        global_feature=rendered.global_feature,
        region_features=rendered.region_features,
        region_boxes=rendered.region_boxes, tags=rendered.tags,
        tag_scores=rendered.tag_scores, captions=caps,
        width=rendered.width, height=rendered.height, domain=domain)
    if show and (i + 1) % step == 0:
      log(f"  {spec.name}: {i + 1}/{spec.num_records} records")


# ------------------------------------------------------------- references --

def _coco_json(rows: list[tuple[str, list[str], int, int, str]],
               with_domain: bool) -> dict:
  images, annotations = [], []
  for image_index, (image_id, caps, width, height, domain) in enumerate(rows):
    image = {"id": image_index, "file_name": f"{image_id}.jpg",
             "width": width, "height": height}
    if with_domain:
      image["domain"] = domain
    images.append(image)
    for cap in caps:
      annotations.append({"id": len(annotations), "image_id": image_index,
                          "caption": cap})
  return {"info": {"description": "cc12m_jax synthetic world"},
          "licenses": [], "type": "captions", "images": images,
          "annotations": annotations}


def _karpathy_json(splits: dict[str, list[tuple[str, list[str]]]]) -> dict:
  images, sent_id = [], 0
  for split in ("train", "val", "test"):
    for image_id, caps in splits[split]:
      imgid = len(images)
      sentences = []
      for cap in caps:
        sentences.append({"raw": cap, "imgid": imgid, "sentid": sent_id,
                          "tokens": tokenizer_lib.ptb_tokenize(cap)})
        sent_id += 1
      images.append({"filename": f"{image_id}.jpg", "imgid": imgid,
                     "split": split, "sentences": sentences,
                     "sentids": [s["sentid"] for s in sentences]})
  return {"dataset": "flickr30k", "images": images}


def _write_json(path: str, obj: dict) -> None:
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    json.dump(obj, f, sort_keys=True, indent=1)
    f.write("\n")


# ------------------------------------------------------------------ main ---

def validate_sources(data_dir: str, sources: Sequence[str]) -> dict[str, int]:
  """Reads sources back through the real parser (with the D and feature dtype
  of each one's metadata.json); skip counts by reason."""
  validator = records_lib.RecordValidator(strict=False)
  for source in sources:
    meta = metadata_lib.load_metadata(data_dir, source)
    ds = tf.data.TFRecordDataset(metadata_lib.shard_files(data_dir, source))
    ds = ds.batch(512).map(tf.autograph.experimental.do_not_convert(
        lambda s, meta=meta: validator.keep_mask(records_lib.parse_batch(
            s, meta.feature_dim, feature_dtype=meta.feature_dtype))))
    for _ in ds:
      pass
  return validator.counts()


def generate(cfg: ml_collections.ConfigDict, output_dir: str, *,
             log: Callable[[str], None] = print) -> dict:
  """Writes the world under output_dir; returns the summary dict."""
  syn = cfg.synthetic
  records_lib.check_feature_dtype(syn.feature_dtype,
                                  "config.synthetic.feature_dtype")
  if syn.cc12m_context_words < 0 or (syn.cc12m_context_words > 0
                                     and syn.web_vocab_size < 1):
    raise ValueError(
        "config.synthetic: cc12m_context_words must be >= 0 (got "
        f"{syn.cc12m_context_words}), and web_vocab_size >= 1 when it is > 0 "
        f"(got {syn.web_vocab_size})")
  if syn.cc12m_caption_style not in CC12M_CAPTION_STYLES:
    raise ValueError(
        f"config.synthetic.cc12m_caption_style: {syn.cc12m_caption_style!r}; choose "
        f"one of {CC12M_CAPTION_STYLES}")
  if syn.web_image_text_filter and syn.cc12m_caption_style != "alt_text":
    raise ValueError(
        "config.synthetic.web_image_text_filter filters alt-texts: it needs "
        f"cc12m_caption_style='alt_text' (got {syn.cc12m_caption_style!r})")
  if (syn.appearance_modes < 1 or not 0.0 <= syn.mode_shared <= 1.0
      or syn.mode_zipf_exponent < 0):
    raise ValueError(
        "config.synthetic: appearance_modes must be >= 1 (got "
        f"{syn.appearance_modes}), mode_shared in [0, 1] (got {syn.mode_shared}) "
        f"and mode_zipf_exponent >= 0 (got {syn.mode_zipf_exponent})")
  world = world_lib.World(syn.num_concepts, syn.feature_dim, syn.seed,
                          region_noise=syn.region_noise, zipf_exponent=syn.zipf_exponent,
                          num_modes=syn.appearance_modes, mode_shared=syn.mode_shared,
                          mode_zipf_exponent=syn.mode_zipf_exponent)
  summary = {"sources": {}, "concepts": len(world.concepts)}
  refs: dict[str, list] = {}
  rejected: collections.Counter = collections.Counter()
  specs = _source_specs(syn, world, rejected)
  for spec in specs:  # check every size before writing anything
    if spec.num_records <= 0:
      raise ValueError(f"config.synthetic: source {spec.name!r} would have "
                       f"{spec.num_records} records; sizes must be positive "
                       f"(num_flickr >= 3, num_flickr_val >= 1, num_flickr_test >= 1)")
  for spec in specs:
    rows = []

    def tracked(records):
      for r in records:
        rows.append((r.image_id, list(r.captions), r.width, r.height,
                     r.domain))
        yield r

    num_shards = max(2, math.ceil(spec.num_records / syn.records_per_shard))
    shown: dict[str, list[str]] = {}
    records_lib.write_records(
        metadata_lib.shard_prefix(output_dir, spec.name),
        tracked(_records(spec, world, syn.seed, log, shown)), num_shards,
        feature_dtype=syn.feature_dtype)
    if spec.name in EVAL_SOURCES:
      # What each image shows, for the per-concept long-tail report
      # (cc12m_jax/evaluation/long_tail.py); real data has no such file.
      _write_json(os.path.join(output_dir, spec.name, "concepts.json"), shown)
    num_captions = sum(len(r[1]) for r in rows)
    metadata_lib.write_metadata(output_dir, metadata_lib.DatasetMetadata(
        source=spec.name, feature_dim=syn.feature_dim,
        num_records=len(rows), num_captions=num_captions,
        num_shards=num_shards, feature_dtype=syn.feature_dtype,
        description=f"synthetic world, seed {syn.seed}"))
    refs[spec.name] = rows
    summary["sources"][spec.name] = {"records": len(rows),
                                     "captions": num_captions}
    if syn.web_image_text_filter and spec.name in FILTERED_SOURCES:
      summary["sources"][spec.name]["filter_rejected"] = rejected[spec.name]

  _write_json(os.path.join(output_dir, "coco_val", "captions.json"),
              _coco_json(refs["coco_val"], with_domain=False))
  _write_json(os.path.join(output_dir, "nocaps_val", "nocaps_val.json"),
              _coco_json(refs["nocaps_val"], with_domain=True))
  _write_json(os.path.join(output_dir, "flickr", "dataset_flickr30k.json"),
              _karpathy_json({
                  split: [(r[0], r[1]) for r in refs[f"flickr_{split}"]]
                  for split in ("train", "val", "test")}))

  vocab_path = build_vocab_lib.build_vocab(output_dir, VOCAB_SOURCES,
                                           syn.vocab_size)
  summary["vocab_size"] = len(vocab_file.load_vocab(vocab_path))
  skipped = validate_sources(output_dir, ALL_SOURCES)
  summary["skipped"] = skipped
  return summary


def format_summary(summary: dict, output_dir: str) -> str:
  lines = [f"synthetic world in {output_dir} "
           f"({summary['concepts']} concepts)",
           f"{'source':<14}{'records':>9}{'captions':>10}"]
  for name, s in summary["sources"].items():
    lines.append(f"{name:<14}{s['records']:>9}{s['captions']:>10}")
  rejected = {n: s["filter_rejected"] for n, s in summary["sources"].items()
              if "filter_rejected" in s}
  if rejected:
    lines.append("candidates the image-text filter rejected: " + ", ".join(
        f"{n}={k} ({100 * k / (k + summary['sources'][n]['records']):.1f}%)"
        for n, k in rejected.items()))
  lines.append(f"vocab size: {summary['vocab_size']}")
  lines.append("skipped records: " + ", ".join(
      f"{k}={v}" for k, v in summary["skipped"].items()))
  return "\n".join(lines)


# Flags are defined only when this module runs as a program, so that it can be
# imported beside other entry points (cc12m_jax.main defines --config too).
_FLAGS = {}


def _define_flags() -> None:
  _FLAGS["config"] = config_flags.DEFINE_config_file(
      "config", None, "Config file (configs/*.py); uses config.synthetic.",
      lock_config=True)
  _FLAGS["output_dir"] = flags.DEFINE_string(
      "output_dir", "", "Where to write; default config.data.data_dir.")


def main(argv: Sequence[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = _FLAGS["config"].value
  output_dir = _FLAGS["output_dir"].value or cfg.data.data_dir
  log = lambda msg: print(msg, file=sys.stderr, flush=True)
  summary = generate(cfg, output_dir, log=log)
  print(format_summary(summary, output_dir))


def run() -> None:
  _define_flags()
  flags.mark_flags_as_required(["config"])
  app.run(main, flags_parser=config_check.parse_flags)


if __name__ == "__main__":
  run()
