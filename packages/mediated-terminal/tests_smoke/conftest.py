"""The terminal on the real sealed Pi 0.85.1, in the loopback-only network namespace (`nox -s smoke`).

Like the controller's smoke suite: pi-rpc's smoke plugin checks the namespace and the pinned install (a
missing install or a run outside the namespace fails loudly, never a green skip) and serves the scripted
model on 127.0.0.1: no real model, no credentials. tmux is required here too (a missing tmux fails).
"""

from __future__ import annotations

import sys
from pathlib import Path

pytest_plugins = ["mosaic.pi_rpc.testing.smoke_plugin"]  # the namespace check, the pinned Pi, the model server

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # term_harness
