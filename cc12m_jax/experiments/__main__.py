"""`python -m cc12m_jax.experiments --suite=configs/experiments/<table>.py[:size] --workdir=DIR`.

Validates every stage of the suite, runs the unfinished ones (each a
`python -m cc12m_jax.main` subprocess), then writes
`DIR/<suite>/results.json` and `results.md` and prints the Markdown, and,
when the suite names long_tail rows and the data knows what each image
shows, each per-concept long-tail report in `DIR/<suite>/long_tail/` (or
`long_tail_<column>/` for a report read at a column; experiments/concept_report.py).

  --seeds=N          run every condition with seeds 0 .. N-1
  --first_seed=K     start there instead: seeds K .. K+N-1 (one seed on each of
                     several machines, collected together afterwards)
  --stages=P[,P...]  run only the stages whose key (<condition>/<stage>) matches
                     a shell-style pattern, and the stages they depend on
                     (e.g. '*/ic_*': the captioning half of fig6); the
                     results collect whatever has finished
  --dry_run          print each stage's command (in order) and run nothing
  --collect_only     run nothing; collect what the stages have written
  --launcher=CMD     prefix every stage's command, or put it where CMD says
                     {command} (e.g. gcloud ... ssh --worker=all --command=
                     "cd REPO && {command}": every host of a TPU slice)
  --python=PATH      the interpreter of stage commands (default: this one)
  --nocheck_data     skip the check that the data directory has every source
  --suite.<field>=v  override a suite field (e.g. --suite.data_dir=/data,
                     --suite.selection_source=nocaps_heldout)
"""
from __future__ import annotations

import os
import shlex
import sys

from absl import app, flags
from ml_collections import config_flags

from cc12m_jax import config_check
from cc12m_jax.evaluation import long_tail
from cc12m_jax.experiments import concept_report, results, runner, suite as suite_lib, validation

SUITE = config_flags.DEFINE_config_file(
    "suite", None, "A suite file: configs/experiments/<table>.py[:synthetic|paper].",
    lock_config=True)
WORKDIR = flags.DEFINE_string("workdir", None, "Stages run in <workdir>/runs/; results go to "
                              "<workdir>/<suite>/.")
SEEDS = flags.DEFINE_integer("seeds", 1, "Run every condition with seeds 0 .. N-1 (from "
                             "--first_seed).", lower_bound=1)
FIRST_SEED = flags.DEFINE_integer("first_seed", 0, "The first of the --seeds seeds.",
                                  lower_bound=0)
STAGES = flags.DEFINE_list(
    "stages", [], "Run only the stages whose key (<condition>/<stage>) matches one of these "
    "shell-style patterns, and what they depend on (e.g. '*/ic_*').")
DRY_RUN = flags.DEFINE_bool("dry_run", False, "Print every stage's command; run nothing.")
COLLECT_ONLY = flags.DEFINE_bool("collect_only", False, "Run nothing; collect the results.")
LAUNCHER = flags.DEFINE_string("launcher", "", "Command prefix of every stage (shell words).")
PYTHON = flags.DEFINE_string("python", sys.executable, "Interpreter of the stage commands.")
PARALLEL = flags.DEFINE_integer(
    "parallel", 1, "Stages run at once, each as soon as its inputs are done: independent "
    "conditions and seeds side by side. More than 1 suits a many-core CPU host; on an "
    "accelerator each stage wants the whole device.", lower_bound=1)
CHECK_DATA = flags.DEFINE_bool("check_data", True, "Check that the data has every source.")
flags.mark_flags_as_required(["suite", "workdir"])


def parse_flags(argv: list[str]) -> list[str]:
  """absl's parsing; an unknown `--suite.` key is named with the closest known one."""
  try:
    return app.parse_flags_with_usage(list(argv))
  except (AttributeError, KeyError, flags.Error):
    try:
      config_check.check_overrides(argv, name="suite")
    except config_check.UnknownOverrideError as e:
      sys.stderr.write(f"FATAL Flags parsing error: {e}\n")
      sys.exit(1)
    raise


def main(argv: list[str]) -> None:
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  seeds = list(range(FIRST_SEED.value, FIRST_SEED.value + SEEDS.value))
  try:
    suite = suite_lib.from_config(SUITE.value)
    configs = validation.check(suite, WORKDIR.value,
                               check_data=CHECK_DATA.value and not COLLECT_ONLY.value)
    runs = runner.select(runner.plan(suite, WORKDIR.value, seeds, configs), STAGES.value)
    if not COLLECT_ONLY.value:
      runner.execute(runs, launcher=shlex.split(LAUNCHER.value), python=PYTHON.value,
                     dry_run=DRY_RUN.value, parallel=PARALLEL.value)
  except suite_lib.SuiteError as e:
    sys.stderr.write(f"FATAL suite error: {e}\n")
    sys.exit(1)
  except runner.StageFailed as e:
    sys.stderr.write(f"FATAL {e}\n")
    sys.exit(1)
  if DRY_RUN.value:
    return
  collected = results.collect(suite, WORKDIR.value, seeds)
  paths = results.write(collected, results.results_dir(WORKDIR.value, suite))
  print(results.markdown(collected))
  print(f"Results: {paths['json']}, {paths['markdown']}")
  for report in suite.long_tails:
    _write_long_tail(suite, report, seeds, configs)


def _write_long_tail(suite: suite_lib.Suite, report: suite_lib.LongTail, seeds: list[int],
                     configs: dict) -> None:
  skipped = concept_report.why_not(suite, report, suite.data_dir)
  if skipped:
    print(f"Long-tail report {report.name} skipped: {skipped}")
    return
  directory = os.path.join(results.results_dir(WORKDIR.value, suite), report.name)
  out = concept_report.make(suite, report, WORKDIR.value, seeds, suite.data_dir, configs,
                            directory)
  if out is None:
    print(f"Long-tail report {report.name} skipped: no row of it has an evaluation yet")
    return
  print(long_tail.markdown(out))
  print(f"Long-tail report: {directory}/long_tail.md, long_tail.png")


if __name__ == "__main__":
  app.run(main, flags_parser=parse_flags)
