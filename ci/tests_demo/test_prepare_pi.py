"""The Pi fetch of `bash ci/main` (issue 21, item 2): a verified install is reused in one line; a first run
says what it fetches and how long, prints progress while npm works, and ends in one line; an interrupt
ends npm too, in one line. npm is a stand-in on PATH here (the real fetch is 345 MB); about 8 s in all."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from support import REPO, ended_within

SCRIPT = str(REPO / "ci" / "prepare_pi.py")


def fake_npm(bin_dir: Path, body: str) -> dict[str, str]:
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(f"#!/bin/sh\n{body}\n")
    npm.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "LC_ALL": "C"}


def test_a_verified_install_is_reused_in_one_line() -> None:
    pi = os.environ["MOSAIC_PI_DIR"]
    done = subprocess.run([sys.executable, SCRIPT, pi], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"pinned Pi 0.85.1 in {pi}: verified against the pin, reused\n"


def test_a_first_run_says_what_it_fetches_shows_progress_and_ends_in_one_line(tmp_path: Path) -> None:
    # npm that works for 6 s (longer than one progress tick) and leaves something that is not the pin.
    env = fake_npm(tmp_path / "bin", "mkdir -p node_modules && head -c 3000000 /dev/zero > node_modules/blob "
                                     "&& exec sleep 6")
    target = tmp_path / "pi"
    done = subprocess.run([sys.executable, SCRIPT, str(target)], capture_output=True, text=True, timeout=120,
                          env=env)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done
    assert lines[0] == (f"first run: fetching the pinned Pi 0.85.1 and Node 22 from the npm registry into {target} "
                        "(about 345 MB, 30-40 s)")
    assert lines[1] == "  fetching: 5 s, 2 MB so far"
    assert lines[-1].startswith(f"the pinned Pi could not be installed in {target}: the install in ")
    assert "does not match the pin" in lines[-1] and len(lines) == 3


def test_an_interrupt_ends_npm_too_in_one_line(tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    env = fake_npm(tmp_path / "bin", f"echo $$ > {fifo}; exec sleep 300")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    proc = subprocess.Popen([sys.executable, SCRIPT, str(tmp_path / "pi")], stdout=subprocess.PIPE, text=True,
                            env=env)
    try:
        assert select.select([reader], [], [], 60)[0], "npm was never started"
        npm_pid = int(os.read(reader, 100))
    finally:
        os.close(reader)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert out.splitlines()[-1] == (f"interrupted: the Pi install in {tmp_path / 'pi'} was cut short; the next run "
                                    "starts it again")
    assert ended_within(npm_pid, 10), "npm still runs after the interrupt"
