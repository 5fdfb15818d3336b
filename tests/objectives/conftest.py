"""Compiled programs of these tests are kept between runs (as tests/train does):
on a 2-core machine compiling is most of their time."""
import os

import jax

COMPILATION_CACHE = "/tmp/cc12m_jax_test_compilation_cache"


def pytest_configure(config):  # pylint: disable=unused-argument
  os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", COMPILATION_CACHE)
  jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
