"""Multi-process overhead on one machine: steps/s of N processes x D devices against 1 x N*D.

  python benchmarks/multihost.py [--processes=2] [--devices_per_process=4] [--steps=60]
      [--log_every=20] [--data_dir=DIR] [--model=synthetic|tiny]

Both runs train the same config for the same steps on the same simulated CPU
devices: 1 x N*D is `python -m cc12m_jax.main` in one process; N x D is
launch/multiprocess_cpu.sh (jax.distributed on 127.0.0.1, gloo collectives
between the processes, one input shard per process). Steps/s is the
trainer's own figure (its log line `step S: ... | X steps/s`), averaged over
the log intervals after the first one (compilation and input warm-up).
Without --data_dir a small synthetic world is generated first.

--model=synthetic is configs/synthetic_pretrain.py (width 128, 2+2 layers,
global batch 64); --model=tiny the tests' 1+1-layer width-32 model at batch 8,
where the step is almost all synchronisation.

Last line: `multihost_steps_per_sec_ratio: <N x D / 1 x N*D> x`.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.synthetic_world import make_world  # pylint: disable=wrong-import-position

STEP_LINE = re.compile(r"step (\d+): loss .*?\| ([\d.]+) steps/s")
TINY = ("--config.data.global_batch_size=8", "--config.data.max_caption_length=12",
        "--config.data.parse_batch_size=16", "--config.data.shuffle_buffer=50",
        "--config.model.emb_dim=32", "--config.model.mlp_dim=64",
        "--config.model.num_encoder_layers=1", "--config.model.num_decoder_layers=1")


def steps_per_sec(log: str) -> tuple[float, list[float]]:
  """Mean steps/s over the log intervals after the first, and every interval's figure."""
  rates = [float(m.group(2)) for m in STEP_LINE.finditer(log)]
  if len(rates) < 2:
    raise RuntimeError(f"fewer than two step lines in the log:\n{log[-3000:]}")
  later = rates[1:]
  return sum(later) / len(later), rates


def run(command: list[str], env: dict[str, str], log_path: str, timeout: float) -> str:
  with open(log_path, "w") as log:
    proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                          timeout=timeout)
  text = open(log_path, errors="replace").read()
  if proc.returncode != 0:
    raise RuntimeError(f"{' '.join(command)} exited {proc.returncode}:\n{text[-3000:]}")
  return text


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--processes", type=int, default=2)
  parser.add_argument("--devices_per_process", type=int, default=4)
  parser.add_argument("--steps", type=int, default=60)
  parser.add_argument("--log_every", type=int, default=20)
  parser.add_argument("--data_dir", default="")
  parser.add_argument("--model", choices=("synthetic", "tiny"), default="synthetic")
  parser.add_argument("--timeout", type=float, default=1800)
  args = parser.parse_args()
  total_devices = args.processes * args.devices_per_process

  work = tempfile.mkdtemp(prefix="multihost_bench_")
  data_dir = args.data_dir
  if not data_dir:
    data_dir = make_world(os.path.join(work, "world"), num_concepts=80, feature_dim=64,
                          vocab_size=500, num_cc3m=64, num_cc12m=512, num_coco_train=32,
                          num_coco_val=8, num_nocaps_val=8, num_flickr=12)
  flags = [f"--config.data.data_dir={data_dir}", f"--config.train.num_train_steps={args.steps}",
           f"--config.train.log_every_steps={args.log_every}",
           f"--config.train.checkpoint_every_steps={10 * args.steps}",
           "--config.train.eval_every_steps=0"]
  if args.model == "tiny":
    flags += TINY
  env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  xla_rest = re.sub(r"--xla_force_host_platform_device_count=\S+", "", env.get("XLA_FLAGS", ""))

  single_env = dict(env, XLA_FLAGS=f"{xla_rest} --xla_force_host_platform_device_count="
                    f"{total_devices}".strip())
  started = time.time()
  single = run([sys.executable, "-m", "cc12m_jax.main", "--config=configs/synthetic_pretrain.py",
                f"--workdir={work}/single", *flags], single_env, f"{work}/single.log", args.timeout)
  single_rate, single_all = steps_per_sec(single)
  print(f"1 process x {total_devices} devices: {single_rate:.2f} steps/s "
        f"(log intervals: {', '.join(f'{r:.2f}' for r in single_all)})", flush=True)

  multi_env = dict(env, DEVICES_PER_PROCESS=str(args.devices_per_process),
                   LOG_DIR=f"{work}/multi_logs", PYTHON=sys.executable)
  run(["bash", "launch/multiprocess_cpu.sh", str(args.processes),
       "configs/synthetic_pretrain.py", f"{work}/multi", *flags], multi_env, f"{work}/multi.log",
      args.timeout)
  multi_log = open(f"{work}/multi_logs/process_0.log", errors="replace").read()
  multi_rate, multi_all = steps_per_sec(multi_log)
  print(f"{args.processes} processes x {args.devices_per_process} devices: {multi_rate:.2f} "
        f"steps/s (log intervals: {', '.join(f'{r:.2f}' for r in multi_all)})", flush=True)
  load = os.getloadavg()
  print(f"model {args.model}, {args.steps} steps, {os.cpu_count()} CPUs, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, {time.time() - started:.0f} s; logs in {work}")
  print(f"multihost_steps_per_sec_ratio: {multi_rate / single_rate:.3f} x")


if __name__ == "__main__":
  main()
