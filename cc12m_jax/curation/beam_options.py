"""Beam pipeline options of the curation jobs (curation.run, curation.stats).

Explicit command-line Beam arguments win over the defaults taken from a
config's `beam` section (curation/config.py): by default Beam's local
FnApiRunner, named so that the DirectRunner never tries Prism, which downloads
a binary at run time.
"""
import os
from typing import Sequence

from apache_beam.options.pipeline_options import DirectOptions
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import StandardOptions
import ml_collections


def pipeline_options(beam: ml_collections.ConfigDict,
                     beam_args: Sequence[str] = ()) -> PipelineOptions:
  """`beam`: a config's beam section; `beam_args`: e.g. ['--runner=DataflowRunner', ...]."""
  options = PipelineOptions(list(beam_args))
  given = lambda name: any(a == f"--{name}" or a.startswith(f"--{name}=") for a in beam_args)
  if not given("runner"):
    options.view_as(StandardOptions).runner = beam.runner
  direct = options.view_as(DirectOptions)
  if not given("direct_running_mode"):
    direct.direct_running_mode = beam.direct_running_mode
  if not given("direct_num_workers"):
    direct.direct_num_workers = beam.direct_num_workers or os.cpu_count() or 1
  return options
