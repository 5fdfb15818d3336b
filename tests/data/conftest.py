"""Fixtures of the data tests: a tiny synthetic world, generated once."""
import pytest

from cc12m_jax.data.synthetic import generate as generate_lib
from data_fixtures import tiny_config


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory):
  """(config, data_dir, summary) of a generated tiny world."""
  cfg = tiny_config()
  data_dir = str(tmp_path_factory.mktemp("world"))
  summary = generate_lib.generate(cfg, data_dir, log=lambda _: None)
  cfg.data.data_dir = data_dir
  return cfg, data_dir, summary
