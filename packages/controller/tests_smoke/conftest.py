"""The controller on the real sealed Pi 0.85.1, in the loopback-only network namespace (`nox -s smoke`).

Like pi-rpc's smoke suite: a missing install or a run outside the namespace fails loudly (never a green
skip); `MOSAIC_SMOKE_HOST_NET=1` allows the host network for a local debugging run. The scripted model
server (pi-rpc's `ModelServer`) answers Pi on 127.0.0.1: no real model, no credentials.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.cgroup_cohort import Credentials
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account

pytest_plugins = ["mosaic.pi_rpc.testing.smoke_plugin"]  # the namespace check, the pinned Pi, the model server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # core_harness.validate


@pytest.fixture
def parent() -> Iterator[str]:
    """A cgroup under the cgroup2 root for the lifecycle's cohorts (the real engines' lifecycle needs root)."""
    if os.geteuid() != 0:
        pytest.fail("the real engines' lifecycle needs root (a cgroup under the cgroup2 root)")
    path = os.path.join(find_cgroup2().mount_point, f"mosaic-smoke-{secrets.token_hex(4)}")
    os.mkdir(path)
    yield path
    os.rmdir(path)  # every cohort under it was released by its recorded reference


@pytest.fixture
def engine_uid() -> Credentials:
    try:
        return engine_account()
    except EngineAccountError as e:
        pytest.fail(f"the engine account: {e}")


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A fixture tree the engine uid can traverse (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-smoke-fx-", dir="/tmp"))
    os.chmod(path, 0o755)
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
