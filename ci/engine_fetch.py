"""What `ci/prepare_pi.py` and `ci/prepare_claude.py` share: install (or reuse) a pinned engine in a directory,
with progress lines (issue 21 item 2; issue 30 for Claude Code).

Reuse is quiet: one line when the install there verifies against the pin. A first run says what it fetches
first, then prints a progress line every 5 s (seconds so far, megabytes on disk so far) and one line at the
end. The install runs in a child process of its own session (the script again, with `--child DIR`), so an
interrupt (SIGINT, SIGTERM, SIGHUP) ends npm too and prints one line; the next run starts the install again.

Exit status: 0 installed or reused; 1 the install failed (one line: npm's last words, or what differs from
the pin); 128 + the signal's number when interrupted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

TICK = 5.0


@dataclass(frozen=True)
class Engine:
    """One pinned engine's words and calls (the calls are imported late: they are the venv's packages)."""

    script: str  # the script's file: the child runs it again with --child
    pinned: str  # "Pi 0.85.1": "pinned {pinned} in DIR: verified against the pin, reused"
    fetched: str  # what the first run fetches: "the pinned Pi 0.85.1 and Node 22"
    about: str  # its size and time: "about 345 MB, 30-40 s"
    install: str  # "the Pi install in DIR was cut short"
    failed: str  # "the pinned Pi could not be installed in DIR"
    calls: Callable[[], tuple[Callable[[str], Any], Callable[[Any], Any], type[Exception], Callable[[Path], Any]]]
    # -> (ensure(directory) -> install with .root, check_pin(root) -> refusal or None, the install error,
    #     verify(directory) -> what differs, empty when it verifies)


def _megabytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total // (1024 * 1024)


def child(engine: Engine, directory: str) -> int:
    """In the child: ensure the install, print one JSON line with the outcome."""
    ensure, check_pin, install_error, _verify = engine.calls()
    try:
        install = ensure(directory)
        refusal = check_pin(install.root)
    except install_error as e:
        lines = [x.strip() for x in str(e).splitlines() if x.strip()]
        said = lines[0] + (f" (npm said: {lines[-1]})" if len(lines) > 1 else "")
        print(json.dumps({"ok": False, "error": said}), flush=True)
        return 1
    if refusal is not None:
        print(json.dumps({"ok": False, "error": f"the install does not match the pin: {refusal.message}"}),
              flush=True)
        return 1
    print(json.dumps({"ok": True, "root": str(install.root)}), flush=True)
    return 0


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def main(engine: Engine, argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--child":
        return child(engine, argv[1])
    if len(argv) != 1:
        print(f"usage: {Path(engine.script).name} DIR", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise)
    target = Path(argv[0])
    proc: subprocess.Popen[str] | None = None
    try:
        verify = engine.calls()[3]
        if target.is_dir() and not verify(target):
            print(f"pinned {engine.pinned} in {target}: verified against the pin, reused", flush=True)
            return 0
        print(f"first run: fetching {engine.fetched} from the npm registry into {target} ({engine.about})",
              flush=True)
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, engine.script, "--child", str(target)], stdout=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        while True:
            try:
                proc.wait(TICK)
                break
            except subprocess.TimeoutExpired:
                size = _megabytes(target) if target.is_dir() else 0
                print(f"  fetching: {time.monotonic() - start:.0f} s, {size} MB so far", flush=True)
        assert proc.stdout is not None
        out = proc.stdout.read().strip().splitlines()
        result = json.loads(out[-1]) if out else {"ok": False, "error": f"the installer exited {proc.returncode}"}
        proc = None
    except Interrupted as e:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: npm and its helpers too
            proc.wait()
        print(f"interrupted: {engine.install} in {target} was cut short; the next run starts it again", flush=True)
        return 128 + e.signum
    if not result["ok"]:
        print(f"{engine.failed} in {target}: {result['error']}", flush=True)
        return 1
    print(f"  fetched in {time.monotonic() - start:.0f} s ({_megabytes(target)} MB); the pin verified", flush=True)
    return 0
