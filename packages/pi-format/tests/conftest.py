"""Test setup: helpers.py importable under --import-mode=importlib; hypothesis' files kept in a tmp dir."""

import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Hypothesis writes caches under ./.hypothesis by default (already while collecting); nothing may be written
# into the repository, so its home is a temporary directory, removed when the session ends.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="pi-format-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)
