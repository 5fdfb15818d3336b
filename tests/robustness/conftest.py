"""Fixtures of the robustness tests: the trainer tests' tiny world and configs."""
from tests.train.conftest import pytest_configure, tiny_world  # pylint: disable=unused-import
