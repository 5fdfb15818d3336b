"""Fixtures for the experiment runner's tests: a tiny synthetic world."""
import os

import pytest

from tests.synthetic_world import make_world

# Compiled programs are reused across the stage subprocesses of these tests.
COMPILATION_CACHE = "/tmp/cc12m_jax_test_compilation_cache"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config):  # pylint: disable=unused-argument
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", COMPILATION_CACHE)
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "-1")


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory) -> str:
  """data_dir of a very small synthetic world (feature dim 16, ~200-word vocab)."""
  return make_world(str(tmp_path_factory.mktemp("world")),
                    num_concepts=40, feature_dim=16, vocab_size=300, num_cc3m=40,
                    num_cc12m=120, num_coco_train=40, num_coco_val=12, num_nocaps_val=12,
                    num_flickr=12)
