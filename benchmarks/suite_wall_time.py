"""Wall time of an experiment suite on this machine, stage by stage.

Runs the suite (`python -m cc12m_jax.experiments`, unfinished stages only) in
`--workdir`, then reads every stage's marker (`stage.json`: seconds from
start to finish of its `cc12m_jax.main` subprocess, summed over the attempts
of a training stage that was interrupted and resumed) and prints each stage's
time (mean over seeds), the suite's time per seed, the elapsed time from the
first stage's start to the last stage's end (less than the sum when the
runner ran stages side by side, `--parallel`, and meaningful when one runner
invocation ran them all), and, last, the headline.

A stage that several suites share (e.g. CC12M pre-training) counts in each
suite that needs it: the figure is what the suite costs run on its own. Stages
finished earlier in the workdir are read, not re-run (`--norun` reads only).
`--stages` times part of a suite, as the runner's `--stages` runs part of it
(e.g. `*/vlm_*`: Figure 6's retrieval half, with what it depends on).

  python benchmarks/suite_wall_time.py --suite=configs/experiments/table3.py \
      --workdir=W --data_dir=data/synthetic [--seeds=3] [--first_seed=K] [--parallel=2] \
      [--stages='*/vlm_*'] [--norun]

Last line: `<suite>_wall_time_per_seed: <value> min`.
"""
from __future__ import annotations

import argparse
import collections
import datetime
import pathlib
import statistics
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from cc12m_jax.experiments import commands, runner, suite as suite_lib  # noqa: E402
from cc12m_jax.experiments import validation  # noqa: E402


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--suite", required=True, help="configs/experiments/<name>.py[:size]")
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--data_dir", default="")
  parser.add_argument("--seeds", type=int, default=1)
  parser.add_argument("--first_seed", type=int, default=0,
                      help="seeds first_seed..first_seed+seeds-1, as the runner's --first_seed")
  parser.add_argument("--parallel", type=int, default=1, help="the runner's --parallel")
  parser.add_argument("--stages", default="",
                      help="the runner's --stages: only these stages and what they depend on")
  parser.add_argument("--norun", action="store_true", help="only read finished stages")
  args = parser.parse_args()

  if not args.norun:
    command = [sys.executable, "-m", "cc12m_jax.experiments", f"--suite={args.suite}",
               f"--workdir={args.workdir}", f"--seeds={args.seeds}",
               f"--first_seed={args.first_seed}",
               f"--parallel={args.parallel}"]
    if args.data_dir:
      command.append(f"--suite.data_dir={args.data_dir}")
    if args.stages:
      command.append(f"--stages={args.stages}")
    subprocess.run(command, check=True)

  config = commands.load_config_file(args.suite)
  if args.data_dir:
    config.data_dir = args.data_dir
  suite = suite_lib.from_config(config)
  seeds = list(range(args.first_seed, args.first_seed + args.seeds))
  configs = validation.check(suite, args.workdir, check_data=False)
  seconds: dict[str, list[float]] = collections.defaultdict(list)
  per_seed: dict[int, float] = collections.defaultdict(float)
  spans = []  # (start, end) of each stage, seconds since the epoch
  missing = []
  runs = runner.plan(suite, args.workdir, seeds, configs)
  for run in runner.select(runs, [p for p in args.stages.split(",") if p]):
    marker = runner.read_marker(run)
    if marker is None or "seconds" not in marker:
      missing.append(run.name)
      continue
    seconds[run.stage.key].append(float(marker["seconds"]))
    per_seed[run.seed] += float(marker["seconds"])
    end = datetime.datetime.fromisoformat(marker["finished"]).timestamp()
    last_attempt = marker.get("attempt_seconds", [marker["seconds"]])[-1]
    spans.append((end - float(last_attempt), end))
  if missing:
    raise SystemExit(f"{len(missing)} stage(s) unfinished, e.g. {missing[:3]}; run without "
                     "--norun, or time part of the suite with --stages")
  print(f"{'stage':<40}{'mean s':>10}{'seeds':>7}")
  for key, values in seconds.items():
    print(f"{key:<40}{statistics.fmean(values):>10.1f}{len(values):>7}")
  totals = [per_seed[s] / 60 for s in seeds]
  spread = f" (seeds: {', '.join(f'{t:.1f}' for t in totals)})" if len(totals) > 1 else ""
  print(f"{len(seconds)} stages per seed{spread}")
  elapsed = (max(e for _, e in spans) - min(b for b, _ in spans)) / 60
  print(f"elapsed, first stage start to last stage end, all seeds: {elapsed:.1f} min")
  name = suite.name
  if args.stages:
    print(f"stages matching {args.stages} and their inputs only")
    name += "_stages"
  print(f"{name}_wall_time_per_seed: {statistics.fmean(totals):.1f} min")


if __name__ == "__main__":
  main()
