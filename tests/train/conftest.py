"""Fixtures for trainer tests: a tiny synthetic world and tiny trainer configs."""
import os
import sys

import jax
import pytest

from tests.synthetic_world import make_world

# Compiled programs are reused across the in-process and subprocess runs of
# these tests (same shapes, same code): a large saving on a 2-core machine.
# One directory per xdist worker: JAX (0.10, no size cap) writes an entry in
# place, so with one directory a worker could read, and deserialize, a program
# the other is still writing. The subprocesses a worker starts share its
# directory: it waits on them, and of a multi-process run only process 0 writes.
COMPILATION_CACHE = os.path.join("/tmp/cc12m_jax_test_compilation_cache",
                                 os.environ.get("PYTEST_XDIST_WORKER", "main"))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):  # pylint: disable=unused-argument
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", COMPILATION_CACHE)
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")
  jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory) -> str:
  """data_dir of a very small synthetic world (feature dim 16, ~200-word vocab)."""
  return make_world(str(tmp_path_factory.mktemp("world")),
                    num_concepts=40, feature_dim=16, vocab_size=300, num_cc3m=40,
                    num_cc12m=120, num_coco_train=40, num_coco_val=12, num_nocaps_val=12,
                    num_flickr=12)


def trainer_config(data_dir: str, **train_overrides):
  """A 1+1-layer width-32 captioner on the tiny world, batch 8."""
  from configs import synthetic_pretrain  # pylint: disable=g-import-not-at-top
  config = synthetic_pretrain.get_config()
  config.data.data_dir = data_dir
  config.data.global_batch_size = 8
  config.data.shuffle_buffer = 50
  config.data.parse_batch_size = 16
  config.data.max_caption_length = 12
  m = config.model
  m.emb_dim, m.num_heads, m.mlp_dim = 32, 4, 64
  m.num_encoder_layers = m.num_decoder_layers = 1
  config.train.log_every_steps = 2
  config.train.checkpoint_every_steps = 2
  config.train.num_train_steps = 4
  config.train.async_checkpointing = True
  for k, v in train_overrides.items():
    config.train[k] = v
  return config


def config_overrides(config) -> list[str]:
  """`config` as `--config.x.y=v` flags on top of configs/synthetic_pretrain.py (CLI runs)."""
  from configs import synthetic_pretrain  # pylint: disable=g-import-not-at-top
  base_cfg = synthetic_pretrain.get_config()
  flags = []
  for section in ("data", "model", "train", "optim", "mesh"):
    for key, value in config[section].items():
      if base_cfg[section][key] != value:
        flags.append(f"--config.{section}.{key}={value}")
  return flags


def main_command(workdir, config, *extra: str, module: str = "cc12m_jax.main") -> list[str]:
  """argv of `python -m <module>` training `config` in `workdir` (run it in REPO_ROOT).

  `module` may be tests.train.harness: the same run with test-only faults.
  """
  return [sys.executable, "-m", module, "--config=configs/synthetic_pretrain.py",
          f"--workdir={workdir}", *config_overrides(config), *extra]
