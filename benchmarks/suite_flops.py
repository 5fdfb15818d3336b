"""Training FLOPs of an experiment suite, stage by stage, and the floor they put on its time.

For every training stage of the suite (pre-training, fine-tuning, training
from scratch) this compiles the stage's own train step, from the stage's
resolved config (the command the runner would give it), and reads XLA's
count of its FLOPs (`compiled.cost_analysis()['flops']`: forward, backward
and optimizer; multiply-add = 2). It is compiled on one device at a batch of
at most `--compile_batch` and scaled to the stage's global batch: a step's
FLOPs are linear in the batch but for the optimizer's update, a few FLOPs per
parameter, which the scaling overcounts by well under 1% at these shapes.
Times steps gives the stage's FLOPs; the sum is the suite's per seed.

The floor is those FLOPs at the best rate this machine's matmuls reach
(`benchmarks/train_step.py`'s measurement): no training step runs faster than
its matmuls can, so no run of the suite here takes less, whatever the input
pipeline or the code. Evaluation and decoding are not counted, so the floor
is below the suite's real time. Nothing is trained or initialized and no workdir is written.

  python benchmarks/suite_flops.py --suite=configs/experiments/headline.py \
      --data_dir=data/synthetic [--stages='*/ic_*'] [--vocab_size=N --feature_dim=D] \
      [--peak_gflops=156]

`--vocab_size` and `--feature_dim` override the dimensions read from the
data's vocabulary and metadata.json, for data that is absent (a paper-size suite planned before its
features exist). `--peak_gflops` adds the floor at a peak known otherwise (a
chip's published one, a CPU's theoretical one), which no code can beat. Last line: `<suite>_training_floor_per_seed: <value> min`.
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
import tempfile

import jax
import jax.numpy as jnp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from cc12m_jax import sharding  # noqa: E402
from cc12m_jax.core.run_setup import RunSetup  # noqa: E402
from cc12m_jax.data import batch_spec  # noqa: E402
from cc12m_jax.experiments import commands, runner, suite as suite_lib  # noqa: E402
from cc12m_jax.experiments import validation  # noqa: E402
from cc12m_jax.train import state as state_lib  # noqa: E402
from train_step import measure_matmul_peak  # noqa: E402  (benchmarks/ is on sys.path)


def _flops(x: float) -> str:
  for unit, scale in (("EFLOP", 1e18), ("PFLOP", 1e15), ("TFLOP", 1e12)):
    if x >= scale:
      return f"{x / scale:.1f} {unit}"
  return f"{x / 1e9:.1f} GFLOP"


def _duration(seconds: float) -> str:
  if seconds < 3 * 3600:
    return f"{seconds / 60:.1f} min"
  return f"{seconds / 3600:.1f} h" if seconds < 3 * 86400 else f"{seconds / 86400:.1f} days"


def step_flops(config, compile_batch: int) -> float:
  """XLA FLOPs of one train step at the config's global batch."""
  config = config.copy_and_resolve_references()
  global_batch = int(config.data.global_batch_size)
  batch = min(global_batch, compile_batch)
  with config.unlocked():
    config.data.global_batch_size = batch
    config.mesh.data, config.mesh.fsdp, config.mesh.model = 1, 1, 1
  devices = sharding.first_local_devices(1)
  setup = RunSetup(config, devices)
  training = state_lib.TrainSetup(setup, config.optim)
  dims = dataclasses.replace(setup.dims, batch=batch)
  # Shapes only: the step's in_shardings place them, so nothing is
  # initialized or allocated (a paper-size state need not fit on the host).
  batch_shapes = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in
                  batch_spec.zeros(dims, batch_spec.device_keys(batch_spec.TRAIN)).items()}
  compiled = training.jit_train_step(config.train.dropout_rng).lower(
      training.abstract_state, batch_shapes).compile()
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"]) * global_batch / batch


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--suite", required=True, help="configs/experiments/<name>.py[:size]")
  parser.add_argument("--data_dir", default="")
  parser.add_argument("--stages", default="", help="the runner's --stages patterns")
  parser.add_argument("--compile_batch", type=int, default=64)
  parser.add_argument("--vocab_size", type=int, default=0)
  parser.add_argument("--feature_dim", type=int, default=0)
  parser.add_argument("--matmul_size", type=int, default=2048)
  parser.add_argument("--peak_gflops", type=float, default=0.0,
                      help="a known peak in GFLOP/s (a CPU's theoretical f32 one, a slice's "
                           "summed published bf16 one): the floor at it too")
  args = parser.parse_args()

  config = commands.load_config_file(args.suite)
  if args.data_dir:
    config.data_dir = args.data_dir
  suite = suite_lib.from_config(config)
  with tempfile.TemporaryDirectory(prefix="suite_flops_") as workdir:  # stage paths only
    configs = validation.check(suite, workdir, check_data=False)
    runs = runner.plan(suite, workdir, [0], configs)
  if args.stages:
    runs = runner.select(runs, [p for p in args.stages.split(",") if p])
  total, per_shape = 0.0, {}
  print(f"{'stage':<36}{'steps':>10}{'batch':>7}{'GFLOP/step':>12}{'FLOPs':>14}")
  for run in runs:
    if not run.stage.is_training:
      continue
    stage_config = configs[run.stage.key]
    with stage_config.unlocked():
      if args.vocab_size:
        stage_config.model.vocab_size = args.vocab_size
      if args.feature_dim:
        stage_config.model.feature_dim = args.feature_dim
    # Stages of one shape (e.g. CC3M- and CC12M-style pre-training) compile once.
    shape = (repr(stage_config.model), int(stage_config.data.global_batch_size),
             int(stage_config.data.max_caption_length), stage_config.train.objective,
             repr(stage_config.objectives), stage_config.data.data_dir)
    if shape not in per_shape:
      per_shape[shape] = step_flops(stage_config, args.compile_batch)
    flops = per_shape[shape]
    steps = int(stage_config.train.num_train_steps)
    total += flops * steps
    print(f"{run.stage.key:<36}{steps:>10,}{int(stage_config.data.global_batch_size):>7}"
          f"{flops / 1e9:>12.2f}{_flops(flops * steps):>14}")
  if not total:
    raise SystemExit(f"suite {suite.name}: no training stage selected")
  peak = max(measure_matmul_peak(args.matmul_size, jnp.float32) for _ in range(2))
  device = jax.devices()[0]
  print(f"training FLOPs per seed: {_flops(total)} (XLA count; evaluation and decoding not "
        f"counted)")
  print(f"measured {args.matmul_size}^2 f32 matmul peak on {device.device_kind} "
        f"({device.platform}): {peak / 1e9:.1f} GFLOP/s")
  if args.peak_gflops:
    print(f"floor at the given peak of {args.peak_gflops:,.0f} GFLOP/s: "
          f"{_duration(total / (args.peak_gflops * 1e9))} per seed")
  print(f"{suite.name}_training_floor_per_seed: {total / peak / 60:.1f} min")


if __name__ == "__main__":
  main()
