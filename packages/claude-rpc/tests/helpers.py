"""Shared by the claude-rpc tests: where the committed fixtures are, and stand-ins for the binary and for an
install (the package suite never runs the real binary: that is `nox -s claude-smoke`'s, under the lock)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from mosaic.claude_rpc.install import CLAUDE_PACKAGE, NATIVE_PACKAGE, installed_files, pin_data

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
FIXTURES = REPO / "fixtures" / "claude-2.1.283"
RECORDINGS = FIXTURES / "recordings"
TREES = FIXTURES / "trees"


def manifest_rows() -> dict[str, dict[str, Any]]:
    """The `claude-2.1.283` section of fixtures/MANIFEST.json, by path relative to fixtures/."""
    doc = json.loads((REPO / "fixtures" / "MANIFEST.json").read_text())
    return {row["path"]: row for row in doc["claude-2.1.283"]["files"]}


def stand_in(path: Path, *, prints: str, marker: Path) -> str:
    """An executable shell script that touches ``marker`` when run and prints ``prints``; its sha256."""
    path.write_text(f"#!/bin/sh\ntouch '{marker}'\necho '{prints}'\n")
    path.chmod(0o755)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fake_install(root: Path, *, binary_text: str = "#!/bin/sh\necho not-claude\n") -> Path:
    """A directory laid out as an install: the committed pin files, npm's record of the two pinned packages,
    every package file sources.json names (with stand-in bytes, so each differs) and a stand-in binary."""
    pin = pin_data()
    root.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        (root / name).write_bytes(pin[name])
    packages = json.loads(pin["package-lock.json"])["packages"]
    keep = {k: packages[k] for k in (f"node_modules/{CLAUDE_PACKAGE}", f"node_modules/{NATIVE_PACKAGE}")}
    (root / "node_modules").mkdir()
    (root / "node_modules" / ".package-lock.json").write_text(json.dumps({"packages": keep}))
    for rel in installed_files():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"stand-in for {rel}\n")
    binary = root / "node_modules" / NATIVE_PACKAGE / "claude"
    binary.write_text(binary_text)
    binary.chmod(0o755)
    return root
