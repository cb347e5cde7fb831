"""The controller's real-kernel suite (`nox -s cohort`): the launch routes, the systemd sandbox and the
cleanup sweep come from cgroup-cohort's testing plugin, the same fixtures its own K suite uses.

The lifecycle tests run real controller processes (controller_child.py) that launch pi-rpc's fake engine
(run by /usr/bin/python3 as the engine uid `cohorttest`, from a world-readable vendored copy) in a real
cohort under a real writer claim, so a test can SIGKILL a controller at an exact step and start another
on the same claim root. Every tree, socket directory, process and cohort is removed by its recorded name.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["mosaic.cgroup_cohort.testing.lab"]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lifecycle_helpers import World  # noqa: E402

from mosaic.controller.testing import readable_packages  # noqa: E402


@pytest.fixture(scope="session")
def vendored_engine() -> Iterator[str]:
    """pi-rpc (the fake engine) and safe-open, world-readable, for /usr/bin/python3 running as the engine
    uid (/root is 0700: it cannot import from this venv), with the test's scenario table and the TERM-grace
    relay (term_grace_relay.py, K5) beside them."""
    import mosaic.pi_rpc as pi_rpc  # noqa: PLC0415
    import mosaic.safe_open as bottom  # noqa: PLC0415

    d = str(readable_packages([pi_rpc, bottom]))
    for name in ("cohort_scenarios.py", "term_grace_relay.py"):
        shutil.copy(HERE / name, d)
        os.chmod(os.path.join(d, name), 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def world(lab: Any, vendored_engine: str, run_marker: str) -> Iterator[World]:
    root = Path(tempfile.mkdtemp(prefix="mosaic-fx-", dir="/tmp"))
    os.chmod(root, 0o755)
    w = World(root=root, lab=lab, vendored=vendored_engine, run_marker=run_marker)
    w.make()
    yield w
    problems = w.cleanup()
    assert not problems, problems


