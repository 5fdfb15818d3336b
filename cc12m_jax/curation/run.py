r"""Runs the curation pipeline.

python -m cc12m_jax.curation.run --config=configs/curation_cc12m.py \
    --config.input='raw/*.parquet' --config.output_dir=out/cc12m \
    [--config.exclude='out/cc3m/kept-*.jsonl'] [Beam pipeline args, e.g.
    --runner=DataflowRunner --project=... --temp_location=gs://...]

Unrecognised flags are handed to Beam's PipelineOptions and win over the
config's beam section, which by default picks Beam's local FnApiRunner (the
DirectRunner's batch engine) with one worker process per core. At the end
the counts table is printed and written to <output_dir>/counts.md; a count gap
(input != kept + rejections) is an error.
"""
import logging
from typing import Sequence

from absl import app
from absl import flags
import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
import ml_collections
from ml_collections import config_flags

from cc12m_jax import config_check
from cc12m_jax.curation import beam_options
from cc12m_jax.curation import config as config_lib
from cc12m_jax.curation import dofns
from cc12m_jax.curation import pipeline
from cc12m_jax.curation import report


def run_curation(config: ml_collections.ConfigDict,
                 beam_args: Sequence[str] = ()) -> dict[str, int]:
  """Runs the pipeline to completion; returns the reconciled counts."""
  config_lib.validate(config)
  p = beam.Pipeline(options=beam_options.pipeline_options(config.beam, beam_args))
  pipeline.build_and_write(p, config)
  result = p.run()
  result.wait_until_finish()
  counts = report.read_counts(config.output_dir)
  report.check(counts)
  report.check_metrics(counts, report.metric_counts(result, dofns.NAMESPACE))
  report.write_text(FileSystems.join(config.output_dir, "counts.md"),
                    f"# Curation counts ({config.preset} preset)\n\n{report.table(counts)}\n")
  return counts


def main(argv: Sequence[str]) -> None:
  counts = run_curation(flags.FLAGS.config, argv[1:])
  print(report.table(counts))


def _parse_flags(argv: list[str]) -> list[str]:
  """absl parses ours (override keys checked first); the rest goes to Beam."""
  return config_check.parse_flags(argv, known_only=True)


if __name__ == "__main__":
  # Defined here, not at import, so importing run_curation never clashes with
  # another program's --config flag.
  config_flags.DEFINE_config_file("config", None, "Curation config file.")
  flags.mark_flag_as_required("config")
  logging.getLogger().setLevel(logging.INFO)
  app.run(main, flags_parser=_parse_flags)
