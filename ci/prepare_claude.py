#!/usr/bin/env python3
"""Install (or reuse) the pinned Claude Code 2.1.283 in a directory, with progress lines.

    .venv/bin/python ci/prepare_claude.py .cache/claude

Reuse is quiet: one line when the install there verifies against the pin (the binary's sha256 and
`--version`, every package file, npm's record). A first run fetches about 231 MB from the npm registry
(`npm ci --ignore-scripts` of the committed lockfile, about 5 s here) and says so first, then prints a
progress line every 5 s (seconds so far, megabytes on disk so far) and one line at the end. The install
runs in a child process of its own session, so an interrupt (SIGINT, SIGTERM, SIGHUP) ends npm too and
prints one line; the next run starts the install again.

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
from pathlib import Path
from types import FrameType

TICK = 5.0
CLAUDE_MB = 231


def _megabytes(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total // (1024 * 1024)


def child(directory: str) -> int:
    """In the child: ensure the install, print one JSON line with the outcome."""
    from mosaic.claude_rpc import check_pin, ensure_claude  # noqa: PLC0415 - the venv's packages
    from mosaic.claude_rpc.install import ClaudeInstallError  # noqa: PLC0415

    try:
        install = ensure_claude(directory)
        refusal = check_pin(install.root)
    except ClaudeInstallError as e:
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


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--child":
        return child(argv[1])
    if len(argv) != 1:
        print("usage: prepare_claude.py DIR", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise)
    target = Path(argv[0])
    proc: subprocess.Popen[str] | None = None
    try:
        from mosaic.claude_rpc.install import verify_claude  # noqa: PLC0415

        if target.is_dir() and not verify_claude(target):
            print(f"pinned Claude Code 2.1.283 in {target}: verified against the pin, reused", flush=True)
            return 0
        print(f"first run: fetching the pinned Claude Code 2.1.283 from the npm registry into {target} "
              f"(about {CLAUDE_MB} MB, about 5 s)", flush=True)
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, __file__, "--child", str(target)], stdout=subprocess.PIPE,
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
        print(f"interrupted: the Claude Code install in {target} was cut short; the next run starts it again",
              flush=True)
        return 128 + e.signum
    if not result["ok"]:
        print(f"the pinned Claude Code could not be installed in {target}: {result['error']}", flush=True)
        return 1
    print(f"  fetched in {time.monotonic() - start:.0f} s ({_megabytes(target)} MB); the pin verified", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
