"""Test setup: the harness modules (core_harness.py, server_harness.py) importable under
--import-mode=importlib, as chat-pages does with its helpers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
