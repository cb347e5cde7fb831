"""Make the shared helpers (claim_helpers.py beside this file) importable under --import-mode=importlib,
and give every test a fresh claim root inside pytest's tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def claim_root(tmp_path: Path) -> Path:
    root = tmp_path / "claims"
    root.mkdir()
    return root
