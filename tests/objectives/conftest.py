"""Compiled programs of these tests are kept between runs, as tests/train does:
on a 2-core machine compiling is most of their time."""
from tests.train.conftest import pytest_configure  # pylint: disable=unused-import
