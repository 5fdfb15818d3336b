"""Fixtures for the experiment runner's tests: the trainer tests' tiny world and
their persistent compilation cache (also reused by the stage subprocesses)."""
from tests.train.conftest import REPO_ROOT, pytest_configure, tiny_world  # pylint: disable=unused-import
