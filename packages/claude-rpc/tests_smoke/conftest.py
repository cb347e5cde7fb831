"""The claude-smoke suite: the real pinned Claude Code 2.1.283 in a loopback-only network namespace.

Run by `nox -s claude-smoke` after `python -m mosaic.claude_rpc.testing.smoke prepare` (outside the
namespace: the install and the sources need the registries), inside
`python -m mosaic.claude_rpc.testing.netns`. A missing install, missing sources or a run outside the
namespace fails loudly here, never skips into a green run. Only the scripted server on 127.0.0.1 answers;
the key is fake; every run has a scratch HOME, CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.testing.netns import interfaces

sys.path.insert(0, str(Path(__file__).resolve().parent))

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])


def _required(name: str) -> Path:
    value = os.environ.get(name)
    if not value or not Path(value).is_dir():
        pytest.fail(f"{name} must name the directory `smoke prepare` filled (nox -s claude-smoke does); got {value!r}")
    return Path(value).resolve()


@pytest.fixture(scope="session", autouse=True)
def loopback_only() -> None:
    """Every test here runs inside the namespace the netns tool made, with only lo."""
    made = os.environ.get("MOSAIC_NETNS")
    if made is None or str(os.stat("/proc/self/ns/net").st_ino) != made:
        pytest.fail("claude-smoke runs only inside `python -m mosaic.claude_rpc.testing.netns` (nox -s claude-smoke)")
    assert interfaces() == ["lo"]


@pytest.fixture(scope="session")
def claude() -> ClaudeInstall:
    return ClaudeInstall(_required("MOSAIC_CLAUDE_DIR"))


@pytest.fixture(scope="session")
def sources_dir() -> Path:
    return _required("MOSAIC_CLAUDE_SOURCES")
