"""The command line as a user runs it: ``--help`` and ``--version``
answer without importing prompt_toolkit or the controller package; ``python -m mosaic.mediated_terminal``
and the ``mosaic-terminal`` script are the same program; every expected error is one line on stderr with
its documented exit code, and a crash has a code of its own. The bad socket path on a real terminal is
test_person.py's item 7."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

import mosaic.mediated_terminal as package
from mosaic.mediated_terminal.cli import EXIT_CRASH, EXIT_REFUSED, EXIT_USAGE, main

SCRIPT = Path(sys.executable).parent / "mosaic-terminal"


def _run(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, stdin=stdin, timeout=60,
                          check=False)


def test_8_help_answers_without_importing_prompt_toolkit_or_the_controller() -> None:
    done = _run("-X", "importtime", "-m", "mosaic.mediated_terminal", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: mosaic-terminal [-h] --socket PATH")
    imported = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "mosaic.mediated_terminal._cli" in imported
    assert not [m for m in imported if m.startswith(("mosaic.controller", "prompt_toolkit", "mosaic.pi_rpc",
                                                     "mosaic.mediated_terminal._app",
                                                     "mosaic.mediated_terminal.screen"))], imported
    assert "Ctrl-C or Ctrl-D quit" in " ".join(done.stdout.split())


def test_version_from_python_m_and_the_script_matches_the_distribution() -> None:
    version = importlib.metadata.version("mosaic-mediated-terminal")
    assert package.__version__ == version
    assert _run("-m", "mosaic.mediated_terminal", "--version").stdout == f"mosaic-terminal {version}\n"
    script = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert (script.returncode, script.stdout) == (0, f"mosaic-terminal {version}\n")


def test_a_usage_error_is_argparses_one_line_and_exit_2() -> None:
    done = _run("-m", "mosaic.mediated_terminal")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.splitlines()[-1] == ("mosaic-terminal: error: the following arguments are required: "
                                            "--socket")
    assert "Traceback" not in done.stderr


def test_no_terminal_and_an_unwritable_log_are_one_line_and_exit_1(tmp_path: Path) -> None:
    done = _run("-m", "mosaic.mediated_terminal", "--socket", str(tmp_path / "s"))
    assert (done.returncode, done.stderr) == (EXIT_REFUSED, "mosaic-terminal: needs a terminal: stdin and stdout "
                                                            "must be a tty\n")
    log = tmp_path / "no-such-dir" / "log"
    done = _run("-m", "mosaic.mediated_terminal", "--socket", str(tmp_path / "s"), "--log", str(log))
    assert (done.returncode, done.stderr) == (EXIT_REFUSED, f"mosaic-terminal: cannot open the log file {log}: "
                                                            "No such file or directory\n")


def test_a_crash_is_one_line_then_the_traceback_and_its_own_exit_code(monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    def broken(coro: Coroutine[Any, Any, int]) -> int:  # the terminal's run, as asyncio.run would get it
        coro.close()
        raise RuntimeError("boom")

    monkeypatch.setattr(asyncio, "run", broken)
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True, raising=False)
    assert main(["--socket", "/nowhere"]) == EXIT_CRASH != EXIT_REFUSED
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "mosaic-terminal: crashed: RuntimeError: boom (a bug; the traceback follows)"
    assert err[1] == "Traceback (most recent call last):" and err[-1] == "RuntimeError: boom"
