"""The tests of the CI scripts: their fixtures and helpers are in support.py (shared with ci/tests_demo)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from support import scratch_repo, tty  # noqa: E402,F401  (fixtures)
