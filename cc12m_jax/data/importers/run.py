"""Runs an import and finishes what the pipeline cannot: metadata, report,
vocabulary.

After the Beam job: `<source>/metadata.json` (D, dtype, counts, shards),
`<source>/import_report.json` (the inputs and every count), and the
vocabulary `<output_dir>/vocab.txt` (cc12m_jax.data.text.build_vocab) when
asked for or when there is none yet.
"""
import dataclasses
import json
import os
import re
from typing import Callable, Optional, Sequence

import apache_beam as beam
import tensorflow as tf

from cc12m_jax.curation import beam_options
from cc12m_jax.curation import config as curation_config
from cc12m_jax.data import metadata as metadata_lib
from cc12m_jax.data.importers import pipeline as pipeline_lib
from cc12m_jax.data.importers import readers
from cc12m_jax.data.importers import rows as rows_lib
from cc12m_jax.data.text import build_vocab as build_vocab_lib

REPORT_FILE = "import_report.json"
_OUTPUTS = (metadata_lib.SHARD_PREFIX + "-*", metadata_lib.METADATA_FILE,
            REPORT_FILE, pipeline_lib.BAD_ROWS_FILE, pipeline_lib.COUNTS_FILE)


def local_beam_defaults():
  """Curation's Beam defaults, but one in-process worker when run locally.

  Measured on 2 cores (docs/importers.md): the local runner's workers pass
  every row through its data plane, which costs more than the parsing they
  spread (bottom-up TSV, 2,000 images x 36 regions: 5.1 CPU-s in process,
  9.1 with two threads, 18.1 with two processes). Beam flags on the command
  line still win (--direct_running_mode, --direct_num_workers, --runner).
  """
  beam = curation_config.beam_defaults()
  beam.direct_running_mode = "in_memory"
  beam.direct_num_workers = 1
  return beam


def _clear_outputs(source_dir: str, overwrite: bool) -> None:
  existing = [p for pattern in _OUTPUTS
              for p in tf.io.gfile.glob(os.path.join(source_dir, pattern))]
  if existing and not overwrite:
    raise FileExistsError(
        f"{source_dir} already holds an import ({os.path.basename(existing[0])}"
        f", ...); pass --overwrite to replace it")
  for path in existing:
    tf.io.gfile.remove(path)


def bad_row_error(error: BaseException) -> Optional[rows_lib.BadRowError]:
  """The BadRowError inside a runner's wrapped exception, if any."""
  text = str(error)
  start = text.find("bad row: ")
  if start < 0:
    return None
  line = text[start:].splitlines()[0]
  line = re.sub(r" \[while running '[^']*'\]", "", line)  # Beam's step name
  return rows_lib.BadRowError(line.strip().rstrip("'\""))


def run_import(spec: pipeline_lib.ImportSpec, beam_args: Sequence[str] = (), *,
               overwrite: bool = False, vocab_sources: Optional[Sequence[str]] = None,
               vocab_size: int = 8000,
               log: Callable[[str], None] = print) -> dict:
  """Runs the import of `spec`; returns the report (also written as JSON).

  vocab_sources: None builds <output_dir>/vocab.txt from this source only
  when there is no vocabulary yet; [] never builds it; a list rebuilds it
  from those sources (e.g. the training corpora, once all are imported).
  Raises BadRowError in strict mode, naming the file and line.
  """
  spec.check()
  for name, patterns in (("--captions", spec.captions), ("--features", spec.features),
                         ("--tags", spec.tags), ("--image_info", spec.image_info)):
    readers.check_patterns(patterns, name)
  source_dir = metadata_lib.source_dir(spec.output_dir, spec.source)
  tf.io.gfile.makedirs(source_dir)
  _clear_outputs(source_dir, overwrite)

  options = beam_options.pipeline_options(local_beam_defaults(), beam_args)
  p = beam.Pipeline(options=options)
  pipeline_lib.build(p, spec)
  try:
    p.run().wait_until_finish()
  except Exception as err:  # runners wrap the DoFn's exception in their own
    bad = bad_row_error(err)
    if bad is not None:
      raise bad from None
    raise

  counts_path = os.path.join(source_dir, pipeline_lib.COUNTS_FILE)
  with tf.io.gfile.GFile(counts_path) as f:
    counts = json.loads(f.read() or "{}")
  tf.io.gfile.remove(counts_path)
  shards = metadata_lib.shard_files(spec.output_dir, spec.source)
  metadata_lib.write_metadata(spec.output_dir, metadata_lib.DatasetMetadata(
      source=spec.source, feature_dim=spec.feature_dim,
      num_records=counts.get("joined", 0), num_captions=counts.get("captions", 0),
      num_shards=len(shards), feature_dtype=spec.feature_dtype,
      description=f"imported by cc12m_jax.data.importers {spec.format} "
                  f"(features: {spec.features_format})"))
  report = {"spec": dataclasses.asdict(spec), "counts": counts,
            "bad_rows": sum(v for k, v in counts.items() if k.startswith("bad_rows/"))}
  with tf.io.gfile.GFile(os.path.join(source_dir, REPORT_FILE), "w") as f:
    f.write(json.dumps(report, indent=1, sort_keys=True) + "\n")

  vocab_path = os.path.join(spec.output_dir, build_vocab_lib.VOCAB_FILE)
  if vocab_sources is None:
    vocab_sources = [] if tf.io.gfile.exists(vocab_path) else [spec.source]
  if vocab_sources:
    build_vocab_lib.build_vocab(spec.output_dir, list(vocab_sources), vocab_size)
    report["vocab"] = {"path": vocab_path, "sources": list(vocab_sources)}
  log(format_report(report))
  return report


_ORDER = ("joined", "captions", "features_without_captions",
          "captions_without_features", "tags_without_features")


def format_report(report: dict) -> str:
  counts = report["counts"]
  spec = report["spec"]
  lines = [f"import {spec['format']} -> {spec['output_dir']}/{spec['source']}"]
  keys = [k for k in _ORDER] + sorted(k for k in counts if k.startswith("rows/"))
  keys += sorted(k for k in counts if k.startswith("bad_rows/"))
  width = max(len(k) for k in keys)
  for key in keys:
    lines.append(f"  {key:<{width}}  {counts.get(key, 0):>10}")
  if report["bad_rows"]:
    lines.append(f"  bad rows are listed in {spec['source']}/{pipeline_lib.BAD_ROWS_FILE}")
  if "vocab" in report:
    lines.append(f"  vocabulary: {report['vocab']['path']} "
                 f"(from {','.join(report['vocab']['sources'])})")
  return "\n".join(lines)
