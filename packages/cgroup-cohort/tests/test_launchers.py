"""The launcher seams the controller stands on, without a cgroup: one Launcher shape, presence on each route
(a fake systemctl for the scope; a plain directory for the direct route's lookup), and the one
owner of the engine's stdio (a real process-group launch of ``cat``)."""

from __future__ import annotations

import errno
import os
import select
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mosaic.cgroup_cohort import (
    CohortHandle,
    CohortRefusal,
    Credentials,
    EngineLimits,
    Launcher,
    PgroupLauncher,
    ScopeLauncher,
    UserManager,
)
from mosaic.cgroup_cohort.testing import churning_threads, in_worker, zombie_children
from mosaic.safe_open import process_ref, read_stat

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
    """The direct route's lookup (``launchers.dir_presence``, tested here without a cgroup; the real-kernel suite
    runs the public presence on a real cgroup2 tree)."""
    from mosaic.cgroup_cohort.internals import dir_presence

    parent = tmp_path / "parent"
    parent.mkdir()
    assert dir_presence(str(parent), UNIT) == "absent"
    (parent / UNIT).mkdir()
    assert dir_presence(str(parent), UNIT) == "present"
    (parent / UNIT).rmdir()
    (parent / UNIT).write_text("")  # a name that is not a directory cannot be a cgroup: cannot tell
    assert dir_presence(str(parent), UNIT) == "unavailable"
    assert dir_presence(str(tmp_path / "gone"), UNIT) == "unavailable"  # no parent: not "absent"
    parent.chmod(0o000)
    try:
        if os.geteuid() != 0:  # root reads through the mode bits
            assert dir_presence(str(parent), UNIT) == "unavailable"
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


# ------------------------------------------------------------------------------------------------ threads
# README "Threads": a launcher is called from a worker thread of a threaded process (the controller's
# asyncio executor). The process-group launcher needs no cgroup, so its threaded launch runs here too; the
# direct route's is in tests_cohort/test_threads.py.


@pytest.fixture
def busy() -> Iterator[int]:
    """Three churning threads (`churning_threads`): before the fix, launches with these hung within 30
    rounds (the first direct one, the sixth process-group one, measured). With them a launch takes ~40 ms.
    Yields their number."""
    with churning_threads(3) as n:
        yield n


def test_pgroup_launch_from_a_worker_thread_of_a_busy_process(busy):
    """Launch and release 10 times from a worker thread while other threads allocate: every launch returns
    (bounded), the engine is this process's child, runs in its own session, and is reaped by the handle.
    Before the spawn helper, the first such launch hung: the clone3 child, a copy of this process, waited
    forever for a lock (the GIL) held by a thread it does not have."""
    launcher = PgroupLauncher()
    for i in range(10):  # 30 in tests_cohort/test_threads.py, with the engine under another uid
        assert threading.active_count() > busy  # the process really is threaded
        if i % 2:
            assert in_worker(launcher.prewarm, 30)  # from a worker thread too; the launch below uses it
        handle = in_worker(lambda: launcher.launch(UNIT, ["/bin/cat"], env={"PATH": "/usr/bin:/bin"}), 30)
        engine = handle.ref.engine
        st = read_stat(engine.pid)
        assert st is not None and (st.ppid, st.sid, st.pgid) == (os.getpid(), engine.pid, engine.pid)
        w, r = handle.take_stdio()
        os.close(w)  # cat exits on EOF
        os.close(r)
        in_worker(lambda h=handle: h.release(timeout=10), 30)
        assert process_ref(engine.pid) != engine  # exited and reaped
    assert _helpers() == []  # each prewarmed helper served a launch
    assert zombie_children() == []  # no spawn helper left unreaped either


def test_pgroup_launch_holds_its_limits_as_rlimits_and_says_so():
    """No cgroup: the limits asked are the engine's rlimits (through the spawn helper, before its exec), and
    the handle records "rlimit" with each value, cpu "none" (README "Limits")."""
    limits = EngineLimits(pids=500, address_space=9 << 30, core=0, data=3 << 30)
    handle = PgroupLauncher().launch(UNIT, ["/bin/sleep", "30"], env={"PATH": "/usr/bin:/bin"}, limits=limits)
    try:
        with open(f"/proc/{handle.ref.engine.pid}/limits", encoding="ascii") as f:
            rows = {line[:26].strip(): line[26:].split()[:2] for line in f}
        root = os.geteuid() == 0  # the kernel does not apply RLIMIT_NPROC to root: nothing is set for it
        assert rows["Max address space"] == [str(9 << 30)] * 2 and rows["Max core file size"] == ["0", "0"]
        assert rows["Max data size"] == [str(3 << 30)] * 2
        held = handle.limits
        assert {n: h.via for n, h in held.items()} == {
            "pids": "none" if root else "rlimit", "memory": "rlimit", "data": "rlimit", "cpu": "none",
            "core": "rlimit"}
        assert (held["data"].where, held["data"].value) == ("RLIMIT_DATA", 3 << 30)
        assert (held["memory"].where, held["memory"].value) == ("RLIMIT_AS", 9 << 30)
        assert "the process-group launcher makes no cgroup" in str(held["memory"].why)
        if not root:
            assert rows["Max processes"] == ["500", "500"]
    finally:
        os.kill(handle.ref.engine.pid, 9)
        handle.release()


def test_a_launch_runs_its_engine_as_the_credentials_given_for_that_launch():
    """Issue 28 item 3: a launch may name its engine's credentials (a uid allocated for one execution); they
    win over the launcher's own for that launch only. Every uid and gid of the engine process is the one
    given, and the rlimits hold for it (RLIMIT_NPROC is counted per uid: this execution's own budget)."""
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: running an engine as another uid needs root")
    launcher = PgroupLauncher(engine=Credentials(65534, 65534, ()))
    for creds in (Credentials(64090, 995, ()), None):
        handle = launcher.launch(UNIT, ["/bin/sleep", "30"], env={"PATH": "/usr/bin:/bin"}, engine=creds,
                                 limits=EngineLimits(pids=77))
        try:
            with open(f"/proc/{handle.ref.engine.pid}/status", encoding="ascii") as f:
                rows = {k: v.split() for k, _, v in (line.partition(":") for line in f)}
            want = creds or Credentials(65534, 65534, ())
            assert rows["Uid"] == [str(want.uid)] * 4 and rows["Gid"] == [str(want.gid)] * 4, rows["Uid"]
            assert rows["Groups"] == []
            with open(f"/proc/{handle.ref.engine.pid}/limits", encoding="ascii") as f:
                assert next(line for line in f if line.startswith("Max processes")).split()[2:4] == ["77", "77"]
        finally:
            os.kill(handle.ref.engine.pid, 9)
            handle.release()


def test_pgroup_launch_whose_exec_fails_is_launch_failed_and_leaves_nothing():
    with pytest.raises(CohortRefusal) as e:
        PgroupLauncher().launch(UNIT, ["/nonexistent/engine"], env={"PATH": "/usr/bin:/bin"})
    assert e.value.code == "launch-failed" and "No such file" in e.value.message
    assert zombie_children() == []
    try:
        assert os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        pass  # nothing of ours is waitable: the failed child was reaped, the helper too


def test_the_spawn_helper_hands_the_child_to_the_caller_and_is_gone():
    """The spawn helper itself (``spawn_helper.spawn_in_helper``): the child the helper clone3s is the caller's (CLONE_PARENT), with a
    pidfd; the helper has exited and was reaped; a broken interpreter is an error, not a hang."""
    from mosaic.cgroup_cohort.internals import spawn_in_helper

    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    child = spawn_in_helper(sys.executable, ["/bin/sh", "-c", "echo $PPID; cat /proc/self/status"],
                            env={"PATH": "/usr/bin:/bin"}, fds={1: out_w}, new_session=True)
    os.close(out_w)
    text = _read(out_r, 1 << 16).decode()
    os.close(out_r)
    try:
        assert text.splitlines()[0] == str(os.getpid())
        assert child.pidfd >= 0
    finally:
        _, status = os.waitpid(child.pid, 0)
        child.close()
    assert os.waitstatus_to_exitcode(status) == 0
    assert zombie_children() == []
    with pytest.raises(OSError) as e:
        spawn_in_helper("/bin/false", ["/bin/true"], env={}, fds={}, timeout=10)
    assert e.value.errno == errno.EIO


# ------------------------------------------------------------------------------------------------ prewarm
# README "Threads": ``prewarm()`` starts the next launch's spawn helper ahead (one per call, consumed by the
# next launch, no pool), ``close()`` stops the ones no launch used, and a helper never outlives its launcher.


def _children(parent: int | None = None) -> set[int]:
    """The live (not exited) children of ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None and st.ppid == parent and st.state not in ("Z", "X"):
                found.add(st.pid)
    return found


def _helpers(parent: int | None = None) -> list[int]:
    """The live (not exited) spawn helpers whose parent is ``parent`` (default: this process), by their
    command line: for "none is left", since a helper names the spawner there only once it has exec'd."""
    found = []
    for pid in _children(parent):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"mosaic.cgroup_cohort._spawner" in f.read():
                    found.append(pid)
        except OSError:
            pass
    return sorted(found)


def _prewarmed(launcher: PgroupLauncher, count: int = 1, **kw: float) -> list[int]:
    """``count`` prewarm() calls; the helpers they started, as this process's new children (reading their
    command line right away could race with their exec, as it did in CI for the real-kernel suite)."""
    before = _children()
    assert all(launcher.prewarm(**kw) for _ in range(count))
    return sorted(_children() - before)


def _state(pid: int) -> str | None:
    st = read_stat(pid)
    return None if st is None else st.state


def _launch_and_release(launcher: PgroupLauncher) -> None:
    handle = launcher.launch(UNIT, ["/bin/cat"], env={"PATH": "/usr/bin:/bin"})
    st = read_stat(handle.ref.engine.pid)
    assert st is not None and st.ppid == os.getpid()  # the engine is this process's child, as ever
    handle.release(timeout=10)  # closes cat's stdin: it exits and is reaped
    assert process_ref(handle.ref.engine.pid) != handle.ref.engine


def test_a_prewarmed_helper_serves_the_next_launch_and_is_gone():
    launcher = PgroupLauncher()
    try:
        (helper,) = _prewarmed(launcher)
        _launch_and_release(launcher)
        assert _helpers() == [] and _state(helper) is None  # used, exited, reaped by the launch
    finally:
        launcher.close()
    assert zombie_children() == []


def test_close_stops_every_unused_helper_and_is_idempotent():
    launcher = PgroupLauncher()
    helpers = _prewarmed(launcher, 2)
    assert len(helpers) == 2  # one helper per call
    launcher.close()
    launcher.close()
    assert _helpers() == [] and [_state(pid) for pid in helpers] == [None, None]  # killed and reaped
    assert zombie_children() == []
    _launch_and_release(launcher)  # still usable: the launch starts its own helper
    assert zombie_children() == []


def test_an_expired_prewarmed_helper_is_replaced_at_the_launch():
    """A helper not used within its idle bound exits by itself, having read nothing; the launch that takes
    it then (a race the launcher cannot rule out) finds it expired and starts a fresh one."""
    launcher = PgroupLauncher()
    (helper,) = _prewarmed(launcher, idle=0.2)
    deadline = time.monotonic() + 20
    while _state(helper) not in ("Z", None):  # exited (a zombie until the launcher reaps it)
        assert time.monotonic() < deadline, "the helper did not exit at its idle bound"
        time.sleep(0.02)
    _launch_and_release(launcher)
    assert _state(helper) is None and _helpers() == []
    assert zombie_children() == []


def test_a_prewarmed_helper_does_not_outlive_its_launcher():
    """The launcher's process dies (SIGKILL) with a prewarmed helper it never used: the helper sees EOF on
    its socket and exits at once, long before its idle bound."""
    code = ("import sys; from mosaic.cgroup_cohort import PgroupLauncher; "
            "assert PgroupLauncher().prewarm(idle=600); print('ok', flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ok\n"
        (helper,) = _children(proc.pid)  # its only child
        fd = os.pidfd_open(helper)
    finally:
        proc.kill()
        proc.wait()
    try:
        assert select.select([fd], [], [], 20)[0], "the helper outlived its launcher"
    finally:
        os.close(fd)
