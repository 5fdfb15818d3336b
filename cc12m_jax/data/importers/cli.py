r"""Command line of the importers (`python -m cc12m_jax.data.importers`).

    python -m cc12m_jax.data.importers <format> --source=NAME --output_dir=DIR \
        --captions=GLOB[,GLOB] --features=GLOB [--features_format=bottomup] \
        [--tags=GLOB] [--feature_dim=2048] [--strict] [Beam flags]

<format> is the captions' format: cc (cc3m, cc12m), coco, nocaps, flickr,
locnar, curated. Flags this program does not know are Beam pipeline options
(--runner=DataflowRunner --project=... --temp_location=gs://...); by default
Beam's local runner with a worker per core. docs/importers.md has examples.

    python -m cc12m_jax.data.importers tfds --config=coco --manual_dir=DIR \
        --data_dir=TFDS_DIR

builds a TensorFlow Datasets dataset from imported records (tfds_builder.py).
"""
import argparse
import difflib
import logging
import sys
from typing import Optional, Sequence

from apache_beam.options.pipeline_options import PipelineOptions

from cc12m_jax.data import tfds_builder
from cc12m_jax.data.importers import pipeline as pipeline_lib
from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.importers import run as run_lib
from cc12m_jax.data.importers import textfiles

ALIASES = {"cc3m": "cc", "cc12m": "cc"}


def _patterns(value: str) -> list[str]:
  return [v.strip() for v in value.split(",") if v.strip()]


def _parser() -> argparse.ArgumentParser:
  common = argparse.ArgumentParser(add_help=False)
  a = common.add_argument
  a("--source", required=True, help="source name: records go to <output_dir>/<source>/")
  a("--output_dir", required=True, help="data_dir of the records (local or gs://)")
  a("--captions", type=_patterns, default=[], help="caption file patterns, comma-separated")
  a("--features", type=_patterns, required=True, help="feature file patterns")
  a("--features_format", default="bottomup", choices=pipeline_lib.FEATURE_FORMATS,
    help="bottomup | lxmert | vinvl TSV layouts, or npz (a file an image)")
  a("--tsv_fields", default="", help="TSV column names in order (overrides the layout)")
  a("--npz_keys", default="", help="role=key overrides, e.g. features=feats,boxes=bboxes")
  a("--feature_dim", type=int, default=2048, help="D of the region features")
  a("--geometry_dims", type=int, default=0,
    help="values after D in each region row (6 for VinVL); vinvl sets 6")
  a("--boxes_normalized", action="store_true", help="boxes are already in [0, 1]")
  a("--tags", type=_patterns, default=[], help="tags JSONL patterns")
  a("--feature_dtype", default="float16", choices=("float16", "float32"),
    help="storage dtype of the features (docs/record_format.md)")
  a("--strict", action="store_true", help="fail on the first bad row, naming file and line")
  a("--records_per_shard", type=int, default=1000)
  a("--num_shards", type=int, default=0, help="0: from --records_per_shard")
  a("--split_bytes", type=int, default=textfiles.DEFAULT_SPLIT_BYTES,
    help="text inputs are read in byte ranges of this size, in parallel")
  a("--overwrite", action="store_true", help="replace an earlier import of the source")
  a("--vocab_sources", default=None,
    help="rebuild <output_dir>/vocab.txt from these sources (comma-separated); "
         "default: from this source if there is no vocabulary yet; 'none': never")
  a("--vocab_size", type=int, default=8000)

  parser = argparse.ArgumentParser(
      prog="python -m cc12m_jax.data.importers",
      description=__doc__.split("\n\n")[0].strip(),
      formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = parser.add_subparsers(dest="format", required=True, metavar="<format>")
  helps = {
      "cc": "CC3M / CC12M TSV: url<TAB>caption (or caption<TAB>url); ids from the URL",
      "coco": "COCO captions JSON (2014/2017) or Karpathy JSON (--split)",
      "nocaps": "nocaps captions JSON and/or --image_info JSON (domains)",
      "flickr": "Flickr30K Karpathy JSON (--split)",
      "locnar": "Localized Narratives JSONL: the narrative is the caption",
      "curated": "curation's kept-*.jsonl / kept-*.parquet",
  }
  for name in pipeline_lib.CAPTION_FORMATS:
    aliases = [k for k, v in ALIASES.items() if v == name]
    s = sub.add_parser(name, parents=[common], help=helps[name], aliases=aliases)
    if name in ("coco", "flickr"):
      s.add_argument("--split", default="",
                     help="Karpathy splits to keep, e.g. train,restval")
    if name == "nocaps":
      s.add_argument("--image_info", type=_patterns, default=[],
                     help="nocaps image-info JSON patterns (val or test)")
  s = sub.add_parser("tfds", help="build a TFDS dataset from imported records "
                     "(cc12m_jax/data/tfds_builder.py)")
  s.add_argument("--config", required=True, help="coco, nocaps, flickr30k, cc3m, ...")
  s.add_argument("--manual_dir", required=True, help="a data_dir of feature records")
  s.add_argument("--data_dir", required=True, help="the TFDS data_dir to write")
  return parser


def _build_tfds(args) -> int:
  if args.config not in tfds_builder.SPLITS:
    print(f"error: --config={args.config!r}: choose one of {sorted(tfds_builder.SPLITS)}",
          file=sys.stderr)
    return 1
  builder = tfds_builder.build(args.config, args.manual_dir, args.data_dir)
  for split, info in builder.info.splits.items():
    print(f"{tfds_builder.NAME}/{args.config} {split}: {info.num_examples} examples")
  return 0


def _check_beam_args(args: Sequence[str]) -> None:
  """Flags we do not know must be Beam's; a typo is named, not ignored."""
  known = set(PipelineOptions([]).get_all_options(drop_default=False))
  for arg in args:
    if not arg.startswith("--"):
      raise SystemExit(f"unexpected argument {arg!r}")
    name = arg[2:].split("=", 1)[0].replace("-", "_")
    if name not in known:
      close = difflib.get_close_matches(name, sorted(known), n=1)
      hint = f"; did you mean --{close[0]}?" if close else ""
      raise SystemExit(f"unknown flag --{name} (neither an importer flag nor a "
                       f"Beam pipeline option){hint}")


def main(argv: Optional[Sequence[str]] = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  args, beam_args = _parser().parse_known_args(argv)
  if args.format == "tfds":
    if beam_args:
      raise SystemExit(f"unexpected arguments {beam_args}")
    return _build_tfds(args)
  _check_beam_args(beam_args)
  fmt = ALIASES.get(args.format, args.format)
  spec = pipeline_lib.ImportSpec(
      format=fmt, source=args.source, output_dir=args.output_dir,
      captions=args.captions, features=args.features,
      features_format=args.features_format, feature_dim=args.feature_dim,
      tags=args.tags, image_info=getattr(args, "image_info", []),
      split=getattr(args, "split", ""), tsv_fields=args.tsv_fields,
      npz_keys=args.npz_keys, geometry_dims=args.geometry_dims,
      boxes_normalized=args.boxes_normalized, feature_dtype=args.feature_dtype,
      strict=args.strict, records_per_shard=args.records_per_shard,
      num_shards=args.num_shards, split_bytes=args.split_bytes)
  vocab = args.vocab_sources
  vocab_sources = (None if vocab is None else
                   [] if vocab.strip().lower() == "none" else _patterns(vocab))
  try:
    report = run_lib.run_import(spec, beam_args, overwrite=args.overwrite,
                                vocab_sources=vocab_sources,
                                vocab_size=args.vocab_size, log=lambda _: None)
  except (rows_lib.BadRowError, ValueError, FileNotFoundError, FileExistsError) as err:
    print(f"error: {err}", file=sys.stderr)
    return 1
  print(run_lib.format_report(report))
  return 0


def run() -> None:
  logging.getLogger().setLevel(logging.WARNING)
  sys.exit(main())
