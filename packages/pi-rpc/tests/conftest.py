"""Shared fixtures: a fake engine in a scratch tree (mosaic.pi_rpc.testing.harness)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc.testing import FakeRun


@pytest.fixture
def fake_run(tmp_path: Path) -> Iterator[Any]:
    """A factory: ``fake_run(**FakeRun kwargs)`` starts a fake in a fresh tree; all are killed at teardown."""
    runs: list[FakeRun] = []

    def start(**kw: Any) -> FakeRun:
        run = FakeRun(tmp_path / f"run{len(runs)}", **kw)
        runs.append(run)
        return run

    try:
        yield start
    finally:
        for run in runs:
            run.close()
