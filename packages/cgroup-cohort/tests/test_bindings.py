"""The cffi bindings against the real kernel, in the forms that need no cgroup and no root.

The cgroup forms (CLONE_INTO_CGROUP, CLONE_NEWCGROUP, the kernfs file handle) are in tests_cohort/.
Each test skips, saying why, only where the kernel or a sandbox refuses the syscall itself.
"""

from __future__ import annotations

import errno
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# The cffi bindings (in mosaic.cgroup_cohort.internals) are the mechanism under everything; testing them is the point.
from mosaic.cgroup_cohort import Credentials
from mosaic.cgroup_cohort import internals as bindings
from mosaic.cgroup_cohort.cgroupfs import Cgroup2Mount
from mosaic.cgroup_cohort.internals import (
    CLONE_NEWUSER,
    clone_child,
    file_handle_id,
    get_child_subreaper,
    get_no_new_privs,
    set_child_subreaper,
    set_no_new_privs,
    spawn,
    thread_count,
    unshare,
)


def _run_in_child(body) -> int:
    """Run ``body`` in a clone3 child; returns its exit status (0 = the assertions in it held)."""
    try:
        child = clone_child(body)
    except OSError as e:
        if e.errno in (errno.ENOSYS, errno.EPERM):
            pytest.skip(f"clone3 refused here ({e}); needs Linux >= 5.3 without a seccomp filter on it")
        raise
    try:
        _, status = os.waitpid(child.pid, 0)
    finally:
        child.close()
    return os.waitstatus_to_exitcode(status)


def _read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 65536):
        out += chunk
    os.close(fd)
    return out


def test_clone3_with_pidfd_names_the_child():
    r, w = os.pipe()

    def body() -> int:
        os.write(w, str(os.getpid()).encode())
        return 7

    child = clone_child(body)
    os.close(w)
    try:
        assert int(_read_all(r)) == child.pid
        assert child.pidfd >= 0
        os.waitid(os.P_PIDFD, child.pidfd, os.WEXITED | os.WNOWAIT)
        _, status = os.waitpid(child.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 7
    finally:
        child.close()


def test_clone3_child_exception_never_unwinds_into_the_parent():
    def body() -> int:
        raise RuntimeError("boom")

    assert _run_in_child(body) == 127


def test_prctl_child_subreaper_and_no_new_privs_in_a_child():
    def body() -> int:
        assert not get_child_subreaper()
        set_child_subreaper(True)
        assert get_child_subreaper()
        assert not get_no_new_privs()
        set_no_new_privs()
        assert get_no_new_privs()
        return 0

    assert _run_in_child(body) == 0


def test_subreaper_adopts_an_orphaned_grandchild():
    r, w = os.pipe()

    def body() -> int:
        set_child_subreaper(True)
        mid = os.fork()
        if mid == 0:
            me = os.getpid()
            if os.fork() == 0:
                # The grandchild waits until its parent has exited (a pidfd is readable only after the
                # kernel re-parented the orphans), then reports who its parent is now.
                try:
                    pfd = os.pidfd_open(me)
                    select.select([pfd], [], [], 10)
                except ProcessLookupError:
                    pass  # already exited and reaped: the re-parenting is done
                os.write(w, str(os.getppid()).encode())
                os._exit(0)
            os._exit(0)
        os.waitpid(mid, 0)
        os.wait()  # the orphan is ours to reap
        return 0

    child = clone_child(body)
    os.close(w)
    try:
        assert int(_read_all(r)) == child.pid
        _, status = os.waitpid(child.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        child.close()


def test_unshare_user_namespace_in_a_child():
    def body() -> int:
        try:
            unshare(CLONE_NEWUSER)
        except OSError as e:
            return 100 + (e.errno or 0)
        with open("/proc/self/uid_map") as f:
            return 0 if f.read() == "" else 1

    code = _run_in_child(body)
    if code > 100:
        pytest.skip(f"unprivileged user namespaces are refused here ({os.strerror(code - 100)})")
    assert code == 0


def test_name_to_handle_at_gives_a_stable_handle(tmp_path):
    a = file_handle_id(str(tmp_path))
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert file_handle_id("", dir_fd=fd) == a
    finally:
        os.close(fd)
    with pytest.raises(OSError) as e:
        file_handle_id(str(tmp_path / "missing"))
    assert e.value.errno == errno.ENOENT


def test_spawn_maps_descriptors_and_resets_signals(tmp_path):
    out_r, out_w = os.pipe()
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the shim ignores TERM; its engine must not
    try:
        child = spawn(["/bin/sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status; echo fd3 >&3"],
                      env={"PATH": "/usr/bin:/bin"}, fds={1: out_w, 3: out_w})
    finally:
        signal.signal(signal.SIGTERM, old)
    os.close(out_w)
    text = _read_all(out_r).decode()
    os.waitpid(child.pid, 0)
    child.close()
    masks = dict(line.split(":\t") for line in text.splitlines() if line.startswith("Sig"))
    assert int(masks["SigIgn"], 16) & (1 << (signal.SIGTERM - 1)) == 0
    assert int(masks["SigBlk"], 16) == 0
    assert "fd3" in text


def test_spawn_closes_every_descriptor_not_named():
    leak = os.open(os.devnull, os.O_RDONLY)  # inheritable on purpose
    os.set_inheritable(leak, True)
    out_r, out_w = os.pipe()
    try:
        child = spawn(["/bin/sh", "-c", "ls /proc/self/fd"], env={"PATH": "/usr/bin:/bin"}, fds={1: out_w})
    finally:
        os.close(leak)
    os.close(out_w)
    fds = {int(x) for x in _read_all(out_r).split()}
    os.waitpid(child.pid, 0)
    child.close()
    assert leak not in fds or leak <= 2
    assert fds <= {0, 1, 2, 3}  # 3 is ls's own directory handle


def test_spawn_reports_exec_failure_and_reaps_the_child():
    with pytest.raises(OSError) as e:
        spawn(["/nonexistent/engine"], env={})
    assert e.value.errno == errno.ENOENT
    try:  # no zombie left behind: nothing of ours is waitable
        assert os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        pass


def test_spawn_new_session_and_environment():
    out_r, out_w = os.pipe()
    child = spawn(["/usr/bin/env"], env={"ONLY": "this"}, fds={1: out_w}, new_session=True)
    os.close(out_w)
    assert _read_all(out_r).decode().split() == ["ONLY=this"]
    assert os.getsid(child.pid) == child.pid if _alive(child.pid) else True
    os.waitpid(child.pid, 0)
    child.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_spawn_drops_credentials():
    if os.geteuid() != 0:
        pytest.skip("dropping to another uid needs root; runs in the cohort suite's CI (root)")
    out_r, out_w = os.pipe()
    child = spawn(["/bin/sh", "-c", "echo $(id -u) $(id -g) $(id -G); grep NoNewPrivs /proc/self/status"],
                  env={"PATH": "/usr/bin:/bin"}, fds={1: out_w}, credentials=Credentials(65534, 65534, ()),
                  no_new_privs=True)
    os.close(out_w)
    text = _read_all(out_r).decode()
    os.waitpid(child.pid, 0)
    child.close()
    first, second = text.splitlines()
    assert first.split() == ["65534", "65534", "65534"]
    assert second.split() == ["NoNewPrivs:", "1"]


def test_spawn_sets_the_rlimits_soft_and_hard_before_the_exec():
    """The engine's rlimits (README "Limits") are in place when its program starts, soft and hard alike; as
    root the child also drops to another uid first, which then cannot raise them again."""
    root = os.geteuid() == 0
    raise_it = ("import resource, sys\n"
                "try:\n    resource.setrlimit(resource.RLIMIT_NPROC, (78, 78)); print('raised')\n"
                "except (OSError, ValueError):\n    print('refused')\n")
    out_r, out_w = os.pipe()
    # /usr/bin/python3: the venv's interpreter may sit under /root, which uid 65534 cannot read (facts §7.7).
    child = spawn(["/bin/sh", "-c", "cat /proc/self/limits; /usr/bin/python3 -I -c \"$0\"", raise_it],
                  env={"PATH": "/usr/bin:/bin"}, fds={1: out_w},
                  credentials=Credentials(65534, 65534, ()) if root else None,
                  rlimits=[(resource.RLIMIT_NPROC, 77), (resource.RLIMIT_AS, 3 << 30), (resource.RLIMIT_CORE, 0)])
    os.close(out_w)
    text = _read_all(out_r).decode()
    os.waitpid(child.pid, 0)
    child.close()
    rows = {line[:26].strip(): line[26:].split()[:2] for line in text.splitlines()}
    assert rows["Max processes"] == ["77", "77"]
    assert rows["Max address space"] == [str(3 << 30)] * 2
    assert rows["Max core file size"] == ["0", "0"]
    if root:
        assert text.splitlines()[-1] == "refused"  # dropped first: the hard limit is out of its reach


def test_spawn_into_a_new_user_namespace_waits_for_the_id_map():
    mapped: list[int] = []

    def setup(pid: int) -> None:
        uid, gid = os.geteuid(), os.getegid()
        with open(f"/proc/{pid}/uid_map", "w") as f:
            f.write(f"0 {uid} 1\n")
        with open(f"/proc/{pid}/setgroups", "w") as f:
            f.write("deny\n")
        with open(f"/proc/{pid}/gid_map", "w") as f:
            f.write(f"0 {gid} 1\n")
        mapped.append(pid)

    out_r, out_w = os.pipe()
    try:
        child = spawn(["/bin/sh", "-c", "id -u; cat /proc/self/uid_map"], env={"PATH": "/usr/bin:/bin"},
                      fds={1: out_w}, userns_setup=setup, credentials=Credentials(0, 0, None))
    except (OSError, PermissionError) as e:
        os.close(out_w)
        os.close(out_r)
        pytest.skip(f"user namespaces refused here: {e}")
    os.close(out_w)
    lines = _read_all(out_r).decode().split("\n")
    os.waitpid(child.pid, 0)
    child.close()
    assert mapped == [child.pid]
    assert lines[0] == "0"
    assert lines[1].split() == ["0", str(os.geteuid()), "1"]




def _one_thread_within(timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while thread_count() != 1:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


def _no_child_of_ours() -> bool:
    try:
        return os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return True


def test_spawn_and_clone3_refuse_in_a_process_with_another_thread():
    """The rule (README "Threads"): a raw clone3 only in a single-threaded process. Its child runs Python
    before exec without fork()'s after-fork work, so a lock another thread holds (the GIL, malloc's) would
    stay held in it forever. Called from a second thread, or while one lives, both refuse loudly and start
    nothing; with the thread gone, they work again."""
    assert _one_thread_within(5.0)
    results: dict[str, BaseException | None] = {}

    def from_second_thread() -> None:
        for name, call in (("spawn", lambda: spawn(["/bin/true"], env={})),
                           ("clone_child", lambda: clone_child(lambda: 0))):
            try:
                call()
                results[name] = None
            except BaseException as e:  # noqa: BLE001 - examined by the main thread
                results[name] = e

    t = threading.Thread(target=from_second_thread)
    t.start()
    t.join(30)
    assert not t.is_alive()
    for name in ("spawn", "clone_child"):
        e = results[name]
        assert isinstance(e, RuntimeError), (name, e)
        assert "single-threaded" in str(e) and "2 threads" in str(e), e
    # From the main thread while another thread lives: the same refusal (it is the process that counts).
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    waiter.start()
    try:
        with pytest.raises(RuntimeError, match="single-threaded"):
            spawn(["/bin/true"], env={})
        with pytest.raises(RuntimeError, match="single-threaded"):
            clone_child(lambda: 0)
    finally:
        stop.set()
        waiter.join(30)
    assert _no_child_of_ours()  # nothing was started
    assert _one_thread_within(5.0)  # a joined thread can stay listed for a moment while it exits
    child = spawn(["/bin/true"], env={})
    _, status = os.waitpid(child.pid, 0)
    child.close()
    assert os.waitstatus_to_exitcode(status) == 0


def test_the_committed_abi_module_is_what_the_declarations_generate():
    """``_ffi_abi`` (cffi's out-of-line ABI mode: the declarations parsed once, README "Threads") is exactly
    what ``bindings.CDEF`` generates with this cffi, and importing the bindings loads no parser."""
    committed = Path(bindings.__file__).with_name("_ffi_abi.py").read_text(encoding="ascii")
    assert committed == bindings.render_abi(), "run: python -m mosaic.cgroup_cohort._ffi_build"
    r = subprocess.run([sys.executable, "-c", "import sys, mosaic.cgroup_cohort._ffi; "
                        "print(sorted(m for m in ('cffi', 'pycparser', '_cffi_backend') if m in sys.modules))"],
                       capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["['_cffi_backend']"], r.stderr


def test_credentials_are_a_frozen_value():
    """Credentials (and the cgroup2 records) are ``_record.Record`` values, not dataclasses (README
    "Threads"): compared and hashed by their fields, frozen, pickled whole."""
    c = Credentials(1001, 1002)
    assert c == Credentials(1001, 1002, ()) and c.groups == () and hash(c) == hash(Credentials(1001, 1002, ()))
    assert c != Credentials(1001, 1002, None) and c != (1001, 1002, ())
    assert repr(c) == "Credentials(uid=1001, gid=1002, groups=())"
    assert pickle.loads(pickle.dumps(c)) == c
    with pytest.raises(AttributeError):
        c.uid = 0
    with pytest.raises(AttributeError):
        del c.gid
    m = Cgroup2Mount("/sys/fs/cgroup", True, "rw,nsdelegate")
    assert {m: 1}[Cgroup2Mount("/sys/fs/cgroup", True, "rw,nsdelegate")] == 1 and m != c
