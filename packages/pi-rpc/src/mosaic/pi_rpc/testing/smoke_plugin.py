"""The pytest fixtures of every suite that runs the real sealed Pi 0.85.1 (``pytest_plugins =
["mosaic.pi_rpc.testing.smoke_plugin"]`` in the suite's root conftest).

Run such a suite as ``python -m mosaic.pi_rpc.testing.netns -- python -m pytest ...`` with ``MOSAIC_PI_DIR``
naming an install that ``python -m mosaic.pi_rpc.testing.smoke prepare DIR`` made. A missing install or a
run outside the namespace fails loudly (it never skips into a green run); ``MOSAIC_SMOKE_HOST_NET=1``
allows the host network for a local debugging run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.pi_rpc import check_pin
from mosaic.pi_rpc.testing.model_server import ModelServer
from mosaic.pi_rpc.testing.netns import interfaces

__all__ = ["loopback_only_namespace", "model", "pi_dir"]


@pytest.fixture(scope="session", autouse=True)
def loopback_only_namespace() -> None:
    if os.environ.get("MOSAIC_SMOKE_HOST_NET") == "1":
        return
    ino = os.environ.get("MOSAIC_NETNS")
    if ino is None or ino != str(os.stat("/proc/self/ns/net").st_ino):
        pytest.fail("the smoke suite must run inside `python -m mosaic.pi_rpc.testing.netns -- ...` "
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
    """The scripted model server on 127.0.0.1: no real model, no credentials."""
    with ModelServer() as server:
        yield server


def __dir__() -> list[str]:
    return sorted(__all__)
