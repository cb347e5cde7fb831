"""The controller on the real sealed Pi 0.85.1, in the loopback-only network namespace (`nox -s smoke`).

Like pi-rpc's smoke suite: a missing install or a run outside the namespace fails loudly (never a green
skip); `MOSAIC_SMOKE_HOST_NET=1` allows the host network for a local debugging run. The scripted model
server (pi-rpc's `ModelServer`) answers Pi on 127.0.0.1: no real model, no credentials.
"""

from __future__ import annotations

import sys
from pathlib import Path

pytest_plugins = ["mosaic.pi_rpc.testing.smoke_plugin"]  # the namespace check, the pinned Pi, the model server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # core_harness.validate
