"""python -m mosaic.pi_format: one JSON summary line per file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers import DATA, PROJECT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mosaic.pi_format", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_cli_prints_one_summary_line_per_file(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(b"not a session\n")
    files = [str(DATA / "session-main-final.jsonl"), str(DATA / "nothink.jsonl"), str(garbage)]
    proc = run("--project", PROJECT, *files)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [r["file"] for r in rows] == files
    main, nothink, bad = rows
    assert main["ok"] and main["branches"] == [{"name": "main", "start": "n.31125ff3", "leaf": "n.49f6c33c",
                                                "parentBranch": None, "forkPoint": None, "items": 28}]
    assert nothink["defaultBranch"] == "b.aaaa0002" and nothink["supersededLines"] == [3]
    assert [b["items"] for b in nothink["branches"]] == [2, 2]
    assert bad == {"file": str(garbage), "ok": False, "refusal": {
        "code": "not-a-pi-session", "reconcile": False, "message": "line 1 is not a Pi session header (not JSON)"}}


def test_cli_refuses_a_foreign_project_and_fails_on_an_unreadable_file(tmp_path: Path) -> None:
    proc = run("--project", str(tmp_path), str(DATA / "empty.jsonl"), str(tmp_path / "missing.jsonl"))
    assert proc.returncode == 2
    first, second = (json.loads(x) for x in proc.stdout.splitlines())
    assert first["refusal"]["code"] == "foreign-project"
    assert second["ok"] is False and second["error"].startswith("FileNotFoundError")


def test_version_prints_the_installed_distributions_version_and_exits_0() -> None:
    from importlib.metadata import version  # noqa: PLC0415

    proc = run("--version")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"python -m mosaic.pi_format {version('mosaic-pi-format')} (mosaic-pi-format)\n"
