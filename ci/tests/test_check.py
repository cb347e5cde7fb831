"""Check first (issue 21, item 1): `bash ci/main` checks root, a writable cgroup2, python3.11, npm and its
registry, and free disk before installing anything, one line per problem with what to do, exit 1; no
traceback for a missing or read-only cgroup2, a missing npm or Ctrl-C. Each test runs the command as a
person would, in a copy of the scripts under /tmp (so another uid can read them)."""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
from support import Tty, as_nobody, copy_scripts, ended_within, system_python

CGROUP2_LINE = "41 31 0:38 / {mount} {opts} - cgroup2 cgroup2 rw\n"
OTHER_LINES = "22 1 8:1 / / rw,relatime - ext4 /dev/vda rw\n25 22 0:21 / /proc rw - proc proc rw\n"


def pi_installed(repo: Path) -> None:
    """What the check takes for installed engines (npm's record in .cache/pi and .cache/claude), so no
    registry is asked."""
    for engine in ("pi", "claude"):
        record = repo / ".cache" / engine / "node_modules" / ".package-lock.json"
        record.parent.mkdir(parents=True)
        record.write_text("{}")
        for d in (repo / ".cache", repo / ".cache" / engine, record.parent):
            os.chmod(d, 0o755)


def tools_dir(repo: Path, **tools: str) -> str:
    """A PATH directory holding exactly `tools` (name -> what it runs) and python3.11 (the system one)."""
    bin_dir = repo / "bin"
    bin_dir.mkdir(mode=0o755)
    os.symlink(system_python(), bin_dir / "python3.11")
    for name, body in tools.items():
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        os.chmod(script, 0o755)
    return str(bin_dir)


def run(repo: Path, *args: str, path: str | None = None, nobody: bool = False,
        env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [system_python(), str(repo / "ci" / "check.py"), *args]
    full = {"PATH": path or "/usr/bin:/bin", "LC_ALL": "C", **(env or {})}
    return subprocess.run(as_nobody(argv) if nobody else argv, capture_output=True, text=True, timeout=60,
                          env=full, cwd="/")


def lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert "Traceback" not in done.stdout + done.stderr, done
    return done.stdout.splitlines()


def test_a_non_root_run_says_so_first_and_installs_nothing(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py", "main")
    pi_installed(scratch_repo)
    done = subprocess.run(as_nobody(["bash", str(scratch_repo / "ci" / "main")]), capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, cwd="/")
    out = lines(done)
    assert done.returncode == 1, done
    assert out[0] == (f"check: not root (uid {65534 if os.geteuid() == 0 else os.geteuid()}): the demo creates a "
                      "cgroup under the cgroup2 mount and the engine account; run it as root (sudo bash ci/main)")
    assert out[-1].endswith("problem(s); nothing was installed"), out
    assert not (scratch_repo / ".venv").exists() and not (scratch_repo / ".cache" / "tools").exists()


def test_a_missing_cgroup2_is_one_line_with_what_to_do(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    pi_installed(scratch_repo)
    info = scratch_repo / "mountinfo"
    info.write_text(OTHER_LINES)
    done = run(scratch_repo, "--mountinfo", str(info), path=tools_dir(scratch_repo))
    out = lines(done)
    problems = [x for x in out if "cgroup2" in x]
    assert problems == ["check: no cgroup2 mount (the unified hierarchy) in /proc/self/mountinfo: the engine's "
                        "cohort is a cgroup2 directory; run on a host or VM with cgroup v2 "
                        "(systemd.unified_cgroup_hierarchy=1), or a container given a writable cgroup2 mount"]
    assert done.returncode == 1 and out[-1] == f"check: {len(out) - 1} problem(s); nothing was installed"


def test_a_read_only_cgroup2_is_one_line_with_what_to_do(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    pi_installed(scratch_repo)
    info = scratch_repo / "mountinfo"
    # The escaped space (\040) is how mountinfo writes one; the check reports the real path.
    info.write_text(OTHER_LINES + CGROUP2_LINE.format(mount=r"/sys/fs/cgroup\040x", opts="ro,nosuid,relatime"))
    done = run(scratch_repo, "--mountinfo", str(info), path=tools_dir(scratch_repo))
    out = lines(done)
    assert [x for x in out if "cgroup2" in x] == [
        "check: the cgroup2 mount /sys/fs/cgroup x is read-only here (a container without a writable cgroup?): "
        "run on a host or VM, or give the container a writable cgroup2 mount (e.g. docker --privileged "
        "--cgroupns=private)"]
    assert done.returncode == 1


def test_npm_missing_beside_a_node_from_elsewhere_says_what_to_do_not_apt(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")  # no Pi installed: npm is needed
    bin_dir = tools_dir(scratch_repo, node="echo v20.19.0")
    done = run(scratch_repo, path=bin_dir)
    out = lines(done)
    assert [x for x in out if "npm" in x] == [
        f"check: npm is not on PATH although node is ({bin_dir}/node): put the npm that came with that node on "
        "PATH (apt-get install npm would conflict with a node from another source); it fetches the pinned Pi "
        "0.85.1 with Node 22 and Claude Code 2.1.283 (about 576 MB, once)"]
    assert done.returncode == 1


def test_npm_and_node_missing_says_apt_get_install_npm(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    done = run(scratch_repo, path=tools_dir(scratch_repo))
    assert [x for x in lines(done) if "npm" in x] == [
        "check: npm is not installed: apt-get install npm (it fetches the pinned Pi 0.85.1 with Node 22 and "
        "Claude Code 2.1.283, about 576 MB, once)"]
    assert done.returncode == 1


def test_a_registry_that_does_not_answer_is_one_line(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    done = run(scratch_repo, path=tools_dir(scratch_repo, node="echo v22", npm="echo 'npm ERR! network' >&2; exit 1"))
    assert [x for x in lines(done) if "npm" in x] == [
        "check: the npm registry does not answer (npm ping exit 1): check the network and npm's registry and "
        "proxy settings (npm config get registry)"]
    assert done.returncode == 1


def test_too_little_disk_is_one_line(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    pi_installed(scratch_repo)
    done = run(scratch_repo, "--min-free-mb", str(1 << 40), path=tools_dir(scratch_repo))
    disk = [x for x in lines(done) if "free on" in x]
    assert len(disk) in (1, 2) and disk[0].startswith("check: ") and disk[0].endswith(
        f"MB free on the file system of {scratch_repo}, {1 << 40} MB needed (the pinned engines, the "
        "virtualenvs): free some space there")
    assert done.returncode == 1


def test_python311_missing_is_one_line(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    pi_installed(scratch_repo)
    empty = scratch_repo / "empty"
    empty.mkdir()
    done = run(scratch_repo, path=str(empty))
    assert [x for x in lines(done) if "python3.11" in x] == [
        "check: python3.11 is not on PATH: install it (Debian 12: apt-get install python3.11 python3.11-venv)"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the all-clear needs root (the CI runs as root)")
def test_a_good_machine_passes_in_one_line(scratch_repo: Path) -> None:
    copy_scripts(scratch_repo, "check.py")
    pi_installed(scratch_repo)
    done = run(scratch_repo, "--min-free-mb", "1", path=tools_dir(scratch_repo))
    assert lines(done) == ["check: root, a writable cgroup2, python3.11, the pinned engines already in .cache, "
                           "free disk: ok"]
    assert done.returncode == 0


def test_ctrl_c_while_the_registry_is_asked_ends_in_one_line(scratch_repo: Path, tty: Callable[..., Tty]) -> None:
    copy_scripts(scratch_repo, "check.py")
    fifo = scratch_repo / "asked"
    os.mkfifo(fifo)
    # A registry that never answers: npm tells the test its pid (it was asked), then hangs.
    bin_dir = tools_dir(scratch_repo, node="echo v22", npm=f"echo $$ > {fifo}; exec /bin/sleep 300")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        term = tty([system_python(), str(scratch_repo / "ci" / "check.py")],
                   env={"PATH": bin_dir, "LC_ALL": "C"}, cwd="/")
        ready, _, _ = select.select([reader], [], [], 30)
        assert ready, f"the check never asked the registry; it showed:\n{term.output}"
        npm_pid = int(os.read(reader, 100))
    finally:
        os.close(reader)
    term.ctrl_c()
    assert term.finish(timeout=30) == 130
    assert "Traceback" not in term.output
    assert term.lines()[-1] == "check: interrupted", term.output
    # The hanging npm is gone too (Ctrl-C reached its process group, and the check kills what it started).
    assert ended_within(npm_pid, 10), "the fake npm is still running 10 s after Ctrl-C"
