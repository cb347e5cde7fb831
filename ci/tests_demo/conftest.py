"""The demo's tests (`nox -s demo`): the helpers and fixtures of ci/tests/support.py, and ci/ on the path
(ci/demo.py's hold points)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support import scratch_repo, tty  # noqa: E402,F401  (fixtures)
