"""The controller on the real sealed Pi 0.85.1, in the loopback-only network namespace (`nox -s smoke`).

Like pi-rpc's smoke suite: a missing install or a run outside the namespace fails loudly (never a green
skip); `MOSAIC_SMOKE_HOST_NET=1` allows the host network for a local debugging run. The scripted model
server (pi-rpc's `ModelServer`) answers Pi on 127.0.0.1: no real model, no credentials.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.pi_rpc import check_pin
from mosaic.pi_rpc.testing import ModelServer
from mosaic.pi_rpc.testing.netns import interfaces

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # core_harness.validate


@pytest.fixture(scope="session", autouse=True)
def loopback_only_namespace() -> None:
    if os.environ.get("MOSAIC_SMOKE_HOST_NET") == "1":
        return
    ino = os.environ.get("MOSAIC_NETNS")
    if ino is None or ino != str(os.stat("/proc/self/ns/net").st_ino):
        pytest.fail("the controller smoke suite must run inside `python -m mosaic.pi_rpc.testing.netns -- ...` "
                    "(MOSAIC_SMOKE_HOST_NET=1 allows the host network for a local debugging run)")
    assert interfaces() == ["lo"]


@pytest.fixture(scope="session")
def pi_dir() -> Path:
    value = os.environ.get("MOSAIC_PI_DIR")
    if not value:
        pytest.fail("MOSAIC_PI_DIR is not set: run `python -m mosaic.pi_rpc.testing.smoke prepare DIR` first")
    root = Path(value)
    refusal = check_pin(root)
    if refusal is not None:
        pytest.fail(f"the install in {root} does not match the pin: {refusal}")
    return root


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server
