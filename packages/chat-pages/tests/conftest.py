"""Test setup: helpers.py importable under --import-mode=importlib; the `world` and `server` fixtures; the
check counts."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import CHECKED, World  # noqa: E402

from mosaic.chat_pages import ReaderServer, serve  # noqa: E402

# Hypothesis (test_rawtext) writes caches under ./.hypothesis by default: nothing may be written into the
# repository, so its home is a temporary directory, removed when the session ends.
_HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="chat-pages-hypothesis-")
set_hypothesis_home_dir(_HYPOTHESIS_HOME)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_HYPOTHESIS_HOME, ignore_errors=True)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    terminalreporter.section("chat-pages checks")
    terminalreporter.write_line(
        f"reader calls under fingerprint + inotify: {CHECKED['calls']}; pages validated: {CHECKED['pages']}; "
        f"cursor records validated: {CHECKED['cursors']}; catalogues validated: {CHECKED['catalogues']}"
    )


@pytest.fixture
def world(tmp_path: Path) -> World:
    """An empty temporary tree (tmp_path/w) with a reader whose every call is fingerprinted and watched."""
    top = tmp_path / "w"
    top.mkdir()
    return World(top)


@pytest.fixture
def server(world: World) -> Iterator[ReaderServer]:
    """The reader's HTTP server over `world`'s reader, closed after the test."""
    srv = serve(world.reader)
    try:
        yield srv
    finally:
        srv.close()
