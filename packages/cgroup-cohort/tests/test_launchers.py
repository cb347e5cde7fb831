"""The launcher seams the controller stands on, without a cgroup: one Launcher shape, presence on each route
(a fake systemctl for the scope; a plain directory for the direct route's private lookup), and the one
owner of the engine's stdio (a real process-group launch of ``cat``)."""

from __future__ import annotations

import os
import select
import stat
from pathlib import Path

import pytest

from mosaic.cgroup_cohort import CohortHandle, Launcher, PgroupLauncher, ScopeLauncher, UserManager
from mosaic.safe_open import process_ref

UNIT = "cohort-claim-0123456789abcdef0123456789abcdef.scope"


def _systemctl(tmp_path: Path, body: str) -> UserManager:
    """A fake systemctl whose output is ``body`` (a shell script fragment); it records its arguments."""
    script = tmp_path / "systemctl"
    script.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/argv\n{body}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return UserManager(systemctl=str(script))


@pytest.fixture
def sockets(tmp_path: Path) -> str:
    d = tmp_path / "s"
    d.mkdir(mode=0o700)
    return str(d)


def test_every_launcher_is_a_launcher(sockets):
    launchers = [ScopeLauncher(UserManager(), sockets), PgroupLauncher()]
    assert [launcher.kind for launcher in launchers] == ["scope", "pgroup"]
    assert all(isinstance(launcher, Launcher) for launcher in launchers)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("echo LoadState=loaded", "present"),
        ("echo LoadState=not-found", "absent"),
        ("echo LoadState=masked", "present"),
        ("echo LoadState=", "unavailable"),  # no answer is not "absent"
        ("echo Something=else", "unavailable"),
        ("echo LoadState=not-found; exit 1", "unavailable"),  # a failing manager is never "absent"
        ("echo 'Failed to connect to bus' >&2; exit 1", "unavailable"),
    ],
)
def test_scope_presence_reads_the_managers_load_state(body, expected, tmp_path, sockets):
    launcher = ScopeLauncher(_systemctl(tmp_path, body), sockets)
    assert launcher.presence(UNIT) == expected
    assert (tmp_path / "argv").read_text().split() == ["--user", "show", "-p", "LoadState", "--", UNIT]


def test_scope_presence_with_no_manager_at_all_is_unavailable(tmp_path, sockets):
    launcher = ScopeLauncher(UserManager(systemctl=str(tmp_path / "no-such-systemctl")), sockets)
    assert launcher.presence(UNIT) == "unavailable"


def test_pgroup_presence_is_always_unavailable():
    """A process group has no name to look up: never "absent" (brief §6 "Unavailable is not empty")."""
    assert PgroupLauncher().presence(UNIT) == "unavailable"


def test_direct_presence_lookup_never_reads_an_error_as_absent(tmp_path):
    """The direct route's lookup (a private mechanism, tested here without a cgroup; the real-kernel suite
    runs the public presence on a real cgroup2 tree)."""
    from mosaic.cgroup_cohort._launchers import _dir_presence

    parent = tmp_path / "parent"
    parent.mkdir()
    assert _dir_presence(str(parent), UNIT) == "absent"
    (parent / UNIT).mkdir()
    assert _dir_presence(str(parent), UNIT) == "present"
    (parent / UNIT).rmdir()
    (parent / UNIT).write_text("")  # a name that is not a directory cannot be a cgroup: cannot tell
    assert _dir_presence(str(parent), UNIT) == "unavailable"
    assert _dir_presence(str(tmp_path / "gone"), UNIT) == "unavailable"  # no parent: not "absent"
    parent.chmod(0o000)
    try:
        if os.geteuid() != 0:  # root reads through the mode bits
            assert _dir_presence(str(parent), UNIT) == "unavailable"
    finally:
        parent.chmod(0o755)


def _pipe_ends_open(ino: int) -> int:
    """How many descriptors of this process refer to the pipe with inode ``ino``."""
    found = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == f"pipe:[{ino}]":
                found += 1
        except FileNotFoundError:
            pass  # the listing's own descriptor
    return found


def _read(fd: int, n: int, timeout: float = 10.0) -> bytes:
    """Up to ``n`` bytes from ``fd`` (b"" at EOF), each wait bounded; a timeout fails the test."""
    out = b""
    while len(out) < n:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing to read within {timeout}s"
        chunk = os.read(fd, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def _launch_cat() -> CohortHandle:
    return PgroupLauncher().launch(UNIT, ["/bin/cat"], env={"PATH": "/usr/bin:/bin"})


def test_taken_stdio_belongs_to_the_taker_and_the_handle_never_closes_it():
    handle = _launch_cat()
    try:
        w, r = handle.take_stdio()
        with pytest.raises(RuntimeError):
            handle.take_stdio()  # exactly once
        w_ino, r_ino = os.fstat(w).st_ino, os.fstat(r).st_ino
        handle.close()
        handle.close()
        assert (_pipe_ends_open(w_ino), _pipe_ends_open(r_ino)) == (1, 1)  # still the taker's
        os.write(w, b"ping\n")
        assert _read(r, 5) == b"ping\n"  # the engine link works through them
        os.close(w)  # the taker closes each once: no EBADF, so nobody closed it before
        assert _read(r, 1) == b""  # cat saw EOF and exited
        os.close(r)
    finally:
        handle.release(timeout=10)
    assert process_ref(handle.ref.engine.pid) != handle.ref.engine  # exited and reaped (no zombie left)


def test_stdio_never_taken_is_closed_by_the_handle_exactly_once():
    handle = _launch_cat()
    w, r = handle._stdin_w, handle._stdout_r  # the handle's own, to watch them close
    assert w is not None and r is not None
    w_ino, r_ino = os.fstat(w).st_ino, os.fstat(r).st_ino
    handle.release(timeout=10)  # closes stdin first, which ends cat, so the release reaps it
    assert (_pipe_ends_open(w_ino), _pipe_ends_open(r_ino)) == (0, 0)
    assert process_ref(handle.ref.engine.pid) != handle.ref.engine  # exited and reaped (no zombie left)
    reuse = os.open(os.devnull, os.O_RDONLY)  # likely reuses one of the two numbers
    try:
        handle.close()  # a second close must not close whatever now has that number
        os.fstat(reuse)
    finally:
        os.close(reuse)
    with pytest.raises(RuntimeError):
        handle.take_stdio()  # closed with the handle: nothing left to hand over
