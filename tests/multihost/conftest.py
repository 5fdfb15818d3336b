"""Shared pieces of the multi-process tests: a tiny world, tiny configs, the launcher.

Every multi-process run goes through launch/multiprocess_cpu.sh (real
processes, the real jax.distributed runtime on 127.0.0.1); each process gets
its device count from the launcher, never from this process's XLA_FLAGS.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.synthetic_world import make_world
from tests.train.conftest import COMPILATION_CACHE, REPO_ROOT, config_overrides, trainer_config

LAUNCHER = os.path.join(REPO_ROOT, "launch", "multiprocess_cpu.sh")
# Flags of sections config_overrides leaves out: a cheap evaluation (greedy
# decoding compiles far faster than beam search; the gathering and reporting
# under test are the same).
EVAL_FLAGS = ("--config.eval.metrics=CIDEr,BLEU-4", "--config.decode.method=greedy",
              "--config.decode.max_decode_len=8", "--config.data.eval_global_batch_size=8")


@pytest.fixture(scope="session")
def world(tmp_path_factory) -> str:
  """A tiny world whose cc12m source (2 files of 32 records) one process reads in 8 steps."""
  return make_world(str(tmp_path_factory.mktemp("multihost_world")),
                    num_concepts=40, feature_dim=16, vocab_size=300, num_cc3m=16,
                    num_cc12m=64, num_coco_train=16, num_coco_val=8, num_nocaps_val=12,
                    num_flickr=12)


def tiny_config(data_dir: str, **train_overrides):
  """tests/train's 1+1-layer width-32 captioner at a learning rate that makes
  12 steps decode a word (an untrained model decodes empty captions, which would
  make any two evaluations agree)."""
  config = trainer_config(data_dir, **train_overrides)
  config.optim.learning_rate = 1e-2
  config.optim.warmup_steps = 2
  return config


def subprocess_env(**extra: str) -> dict[str, str]:
  env = dict(os.environ)
  env.update(JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="",
             JAX_COMPILATION_CACHE_DIR=COMPILATION_CACHE,
             JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
             JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
  env.update(extra)
  return env


class Launch:
  """One run of launch/multiprocess_cpu.sh (started, not waited for)."""

  def __init__(self, num: int, workdir, config, *extra: str, log_dir,
               module: str = "tests.multihost.worker", devices: int = 4,
               heartbeat_s: int = 30, grace_s: int = 120, wrap: str = ""):
    self.num, self.log_dir = num, str(log_dir)
    os.makedirs(self.log_dir, exist_ok=True)
    self.output = os.path.join(self.log_dir, "launcher.log")
    command = ["bash", LAUNCHER, str(num), "configs/synthetic_pretrain.py", str(workdir),
               *config_overrides(config), *extra]
    env = subprocess_env(DEVICES_PER_PROCESS=str(devices), LOG_DIR=self.log_dir,
                         MODULE=module, HEARTBEAT_TIMEOUT_S=str(heartbeat_s),
                         GRACE_S=str(grace_s), PYTHON=sys.executable, WRAP=wrap)
    with open(self.output, "w") as out:
      self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                   cwd=REPO_ROOT, env=env)
    self.started = time.monotonic()

  def log(self, i: int) -> str:
    path = os.path.join(self.log_dir, f"process_{i}.log")
    return open(path, errors="replace").read() if os.path.exists(path) else ""

  def launcher_log(self) -> str:
    return open(self.output, errors="replace").read()

  def pid(self, i: int) -> int:
    return int(open(os.path.join(self.log_dir, f"process_{i}.pid")).read())

  def describe(self) -> str:
    """Everything a failing assertion should show."""
    parts = [f"--- launcher\n{self.launcher_log()[-3000:]}"]
    parts += [f"--- process {i}\n{self.log(i)[-3000:]}" for i in range(self.num)]
    return "\n".join(parts)

  def wait_for_log(self, pattern: str, i: int = 0, timeout: float = 300) -> re.Match:
    deadline = time.monotonic() + timeout
    while True:
      match = re.search(pattern, self.log(i))
      if match:
        return match
      assert self.proc.poll() is None, f"ended before {pattern!r}:\n{self.describe()}"
      assert time.monotonic() < deadline, f"no {pattern!r} in {timeout} s:\n{self.describe()}"
      time.sleep(0.2)

  def wait(self, timeout: float = 600) -> int:
    try:
      return self.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      self.kill()
      raise AssertionError(f"launcher still running after {timeout} s:\n{self.describe()}")

  def kill(self) -> None:
    """Ends the launcher and every process it started (their pids, one by one)."""
    for i in range(self.num):
      try:
        os.kill(self.pid(i), signal.SIGKILL)
      except (OSError, ValueError):
        pass
    if self.proc.poll() is None:
      self.proc.kill()
      self.proc.wait()


def run_launch(*args, timeout: float = 600, **kwargs) -> Launch:
  launch = Launch(*args, **kwargs)
  returncode = launch.wait(timeout)
  assert returncode == 0, launch.describe()
  return launch


def numpy_state(directory) -> dict:
  """A train-state checkpoint as numpy arrays, whatever processes and devices wrote it."""
  checkpointer = ocp.PyTreeCheckpointer()
  path = os.path.join(str(directory), "state")
  tree = checkpointer.metadata(path).item_metadata.tree
  args = jax.tree_util.tree_map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
  return checkpointer.restore(path, restore_args=args)


# Attention key biases have no gradient (a softmax does not change when one
# number is added to all its logits), so Adam turns the float32 rounding noise
# of their gradients into updates of lr size, which differ between two runs that
# sum gradients in another order (all-reduce across processes or within one).
# They change nothing the model computes; the tests compare losses instead.
NO_GRADIENT = ("key_bias",)


def assert_params_close(a: Any, b: Any, atol: float) -> float:
  """Asserts two parameter trees agree to `atol` (but for NO_GRADIENT leaves);
  returns the largest difference."""
  largest = 0.0
  leaves_b = jax.tree_util.tree_leaves(b)
  assert len(jax.tree_util.tree_leaves(a)) == len(leaves_b)
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(a), leaves_b):
    name = jax.tree_util.keystr(path)
    if any(n in name for n in NO_GRADIENT):
      continue
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=atol, err_msg=name)
    largest = max(largest, float(np.max(np.abs(np.asarray(x) - np.asarray(y)))))
  return largest


def read_rows(rows_dir, num_processes: int) -> dict[int, list[dict[int, str]]]:
  """{step: [process i's {global row: fingerprint}]} from tests/multihost/worker.py files."""
  by_step: dict[int, list[dict[int, str]]] = {}
  for i in range(num_processes):
    with open(os.path.join(str(rows_dir), f"process_{i}.jsonl")) as f:
      for line in f:
        entry = json.loads(line)
        by_step.setdefault(entry["step"], [{} for _ in range(num_processes)])
        by_step[entry["step"]][i] = {int(r): fp for r, fp in entry["rows"]}
  return by_step


def pytest_configure(config):  # pylint: disable=unused-argument
  # In-process runs of these tests share compiled programs with the subprocesses.
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", COMPILATION_CACHE)
  jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
