"""`bash ci/main`'s Claude fetch (ci/prepare_claude.py): a verified install is reused in one line; a first
run says what it fetches, prints progress while npm works and ends in one line; an interrupt ends npm too,
in one line. npm is a stand-in on PATH for the last two (the real fetch is 231 MB)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from mosaic.claude_rpc import ClaudeInstall

REPO = Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
SCRIPT = str(REPO / "ci" / "prepare_claude.py")


def fake_npm(bin_dir: Path, body: str) -> dict[str, str]:
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(f"#!/bin/sh\n{body}\n")
    npm.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}


def test_a_verified_install_is_reused_in_one_line(claude: ClaudeInstall) -> None:
    done = subprocess.run([sys.executable, SCRIPT, str(claude.root)], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"pinned Claude Code 2.1.283 in {claude.root}: verified against the pin, reused\n"


def test_a_first_run_says_what_it_fetches_shows_progress_and_ends_in_one_line(tmp_path: Path) -> None:
    env = fake_npm(tmp_path / "bin", "mkdir -p node_modules && head -c 3000000 /dev/zero > node_modules/blob "
                                     "&& exec sleep 6")
    target = tmp_path / "claude"
    done = subprocess.run([sys.executable, SCRIPT, str(target)], capture_output=True, text=True, timeout=120,
                          env=env)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done
    assert lines[0] == (f"first run: fetching the pinned Claude Code 2.1.283 from the npm registry into {target} "
                        "(about 231 MB, about 5 s)")
    assert lines[1] == "  fetching: 5 s, 2 MB so far"
    assert lines[-1].startswith(f"the pinned Claude Code could not be installed in {target}: the install in ")
    assert "does not match the pin" in lines[-1] and len(lines) == 3


def test_an_interrupt_ends_npm_too_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    env = fake_npm(tmp_path / "bin", f"echo $$ > {fifo}; exec sleep 300")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    proc = subprocess.Popen([sys.executable, SCRIPT, str(tmp_path / "claude")], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert select.select([reader], [], [], 60)[0], "npm was never started"
        npm_pid = int(os.read(reader, 100))
    finally:
        os.close(reader)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert out.splitlines()[-1] == (f"interrupted: the Claude Code install in {tmp_path / 'claude'} was cut short; "
                                    "the next run starts it again")
    fd = os.pidfd_open(npm_pid) if os.path.exists(f"/proc/{npm_pid}") else None
    if fd is not None:
        try:
            assert select.select([fd], [], [], 10)[0], "npm still runs after the interrupt"
        finally:
            os.close(fd)
