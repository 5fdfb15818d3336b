"""Fixtures of the importer tests: the tiny synthetic world of the data
tests (tests/data/conftest.py), exported once to the public formats."""
import pytest

from cc12m_jax.data.synthetic import export as export_lib


@pytest.fixture(scope="session")
def public_world(tiny_world, tmp_path_factory):
  """(world data_dir, export dir, feature_dim): the same images twice."""
  cfg, data_dir, _ = tiny_world
  out = str(tmp_path_factory.mktemp("public"))
  export_lib.export_world(data_dir, out)
  return data_dir, out, cfg.synthetic.feature_dim
