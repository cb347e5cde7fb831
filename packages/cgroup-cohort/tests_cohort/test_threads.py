"""Launches from a worker thread of a busy threaded process, the controller's shape (README "Threads").

The controller calls ``launcher.launch(...)`` from a thread-pool worker of its asyncio process. Before the
spawn helper, the direct and process-group launchers ran a raw clone3 in the caller's process; its child
ran Python before exec without fork()'s after-fork work and hung as a copy of the caller, waiting for a
lock (the GIL, malloc's) held by a thread it does not have. Here every launch and release runs on a worker
thread while three other threads allocate, each bounded: a hang fails the test. Every cohort is cleaned up
and checked gone. The scope launcher only ever started ``systemd-run`` with ``subprocess.Popen`` (fork +
exec, no Python in between) and its shim is single-threaded: it runs the same test, as a check.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mosaic.cgroup_cohort import PgroupLauncher
from mosaic.cgroup_cohort.testing import alive, churning_threads, in_worker, wait_unpopulated, zombie_children
from mosaic.safe_open import process_ref, read_stat

LAUNCH_BOUND = 60.0  # seconds per launch or release; the real ones take well under a second
CHURNERS = 3


@pytest.fixture
def busy() -> Iterator[int]:
    """Three churning threads (`churning_threads`). With these, the launchers before the fix hung within 30
    launches (the first direct one; the sixth process-group one)."""
    with churning_threads(CHURNERS) as n:
        yield n


def _in_worker(fn: Callable[[], Any], timeout: float = LAUNCH_BOUND) -> Any:
    """`in_worker`, bounded by LAUNCH_BOUND; on a hang, the stuck copies of this process are killed."""
    return in_worker(fn, timeout, on_hang=lambda: f"stuck copies of this process killed: {_kill_stuck_copies()}")


def _kill_stuck_copies() -> list[int]:
    """After a hang: kill this process's children that are still copies of it (a clone3 child that never
    reached its exec). Recorded by pid; only children of this process running this process's executable."""
    me, exe = os.getpid(), os.readlink("/proc/self/exe")
    killed = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = read_stat(int(name))
        try:
            same = st is not None and st.ppid == me and os.readlink(f"/proc/{name}/exe") == exe
        except OSError:
            same = False
        if same:
            os.kill(int(name), 9)
            killed.append(int(name))
    return killed


def _threads_of(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        (line,) = [x for x in f.read().splitlines() if x.startswith("Threads:")]
    return int(line.split()[1])


def _wait_exit(pid: int, timeout: float) -> bool:
    """Whether ``pid`` (any process, child or not) exits within ``timeout`` (its pidfd turns readable)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def test_launch_from_a_worker_thread_while_other_threads_allocate(lab, busy):
    """30 launches + releases, each from a worker thread while
    other threads allocate, every other one after a ``prewarm()`` from a worker thread too (the direct
    launcher's spawn helper, which also runs the shim's start up to the engine's birth): none hangs; each
    shim was born in its unit cgroup (the engine in engine/, the hello complete) and is single-threaded, as
    its own clone3 of the engine requires; each cohort is gone afterwards (engine, shim, and the unit cgroup
    or scope), and no child of this process is left unreaped (neither a shim nor a spawn helper)."""
    launcher = lab.launcher(lab.engine)
    units = []
    for i in range(30):
        assert threading.active_count() > busy  # the caller really is threaded
        if i % 2:
            assert _in_worker(launcher.prewarm) == (lab.path == "direct")  # a scope has nothing to prewarm
        launched = _in_worker(lambda: lab.launch({"exit_on_eof": True}, launcher=launcher))
        ref = launched.ref
        units.append(ref.unit)
        assert ref.shim is not None and ref.containment.held
        assert _threads_of(ref.shim.pid) == 1  # the shim clone3s the engine: it must stay single-threaded
        with open(f"/proc/{ref.shim.pid}/cgroup", encoding="ascii") as f:
            assert f.read().strip().endswith(f"/{ref.unit}/supervisor")
        launched.close_stdio()  # the engine exits on EOF
        assert _wait_exit(ref.engine.pid, 20)
        assert wait_unpopulated(launched.engine_path_host, 20)
        _in_worker(lambda h=launched.handle: h.release(timeout=15))
        assert launched.handle.wait(0) is not None  # reaped by the handle
        assert not alive(ref.engine) and not alive(ref.shim)
        if lab.path == "direct":
            assert not os.path.exists(launched.unit_path_host)
    deadline = time.monotonic() + 20
    while any(launcher.presence(u) != "absent" for u in units):  # a manager collects a scope a bit later
        assert time.monotonic() < deadline, [(u, launcher.presence(u)) for u in units]
        time.sleep(0.05)
    launcher.close()  # nothing left to stop: every prewarmed helper served a launch
    assert zombie_children() == []


def test_prewarmed_helpers_that_no_launch_uses_are_stopped(lab):
    """``prewarm()`` twice and ``close()`` (twice): both helpers are killed and reaped, nothing of theirs is
    left (no child, no cgroup: a helper makes none before its request); the launcher still launches."""
    launcher = lab.launcher(lab.engine)
    if lab.path != "direct":
        assert not launcher.prewarm()
        launcher.close()
        return
    before = set(_children())
    assert launcher.prewarm() and launcher.prewarm()
    # the helpers are the two new children (a helper's cmdline names the spawner only once it has exec'd,
    # which may not have happened yet: reading it here raced in CI)
    helpers = sorted(set(_children()) - before)
    assert len(helpers) == 2
    launcher.close()
    launcher.close()
    assert [pid for pid in helpers if read_stat(pid) is not None] == []  # exited and reaped
    launched = lab.launch({"exit_on_eof": True}, launcher=launcher)
    launched.close_stdio()  # the engine exits on EOF
    assert _wait_exit(launched.ref.engine.pid, 20) and wait_unpopulated(launched.engine_path_host, 20)
    launched.handle.release(timeout=15)
    assert zombie_children() == []


def _children() -> list[int]:
    me = os.getpid()
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and (st := read_stat(int(n))) is not None
            and st.ppid == me]


def test_pgroup_launch_from_a_worker_thread_while_other_threads_allocate(busy, engine_credentials, run_marker):
    """30 process-group launches + releases from a worker thread while other threads allocate: none hangs;
    each engine runs under the engine uid with no_new_privs in its own session, is this process's child,
    and is gone and reaped after the release; no spawn helper is left unreaped."""
    launcher = PgroupLauncher(engine=engine_credentials)
    for i in range(30):
        assert threading.active_count() > busy
        unit = f"cohort-claim-{os.urandom(16).hex()}.scope"
        handle = _in_worker(lambda u=unit: launcher.launch(
            u, ["/bin/cat"], env={"PATH": "/usr/bin:/bin", "MOSAIC_COHORT_RUN": run_marker}))
        engine = handle.ref.engine
        try:
            st = read_stat(engine.pid)
            assert st is not None and (st.ppid, st.sid, st.pgid) == (os.getpid(), engine.pid, engine.pid)
            if i == 0:
                with open(f"/proc/{engine.pid}/status", encoding="ascii") as f:
                    status = dict(line.split(":", 1) for line in f.read().splitlines())
                assert status["Uid"].split()[0] == str(engine_credentials.uid)
                assert status["NoNewPrivs"].strip() == "1"
            w, r = handle.take_stdio()
            os.close(w)  # cat exits on EOF
            os.close(r)
            _in_worker(lambda h=handle: h.release(timeout=15))
        finally:
            if alive(engine):
                os.kill(engine.pid, 9)
                handle.wait(10)
        assert process_ref(engine.pid) != engine  # exited and reaped
    assert zombie_children() == []
