"""Each binding and each cgroup2 primitive against the real kernel (root, a scratch cgroup per test).

The cffi bindings and the cgroup2 primitives (``mosaic.cgroup_cohort.internals``) are the
mechanisms the shim and the executors stand on; testing them against the real kernel is the point here.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import time
from collections.abc import Iterator

import pytest

from mosaic.cgroup_cohort import Credentials
from mosaic.cgroup_cohort.cgroupfs import EvidenceUnavailable, find_cgroup2
from mosaic.cgroup_cohort.internals import (
    CLONE_NEWCGROUP,
    O_DIR,
    cgroup_id,
    cgroup_of,
    clone_child,
    enumerate_members,
    file_handle_id,
    has_feature,
    read_events,
    remove_tree,
    spawn,
    start_time,
    unshare,
    wait_events,
    wait_tree,
    write_value,
)


@pytest.fixture
def scratch(direct_parent: str) -> Iterator[str]:
    path = os.path.join(direct_parent, f"scratch-{secrets.token_hex(3)}")
    os.mkdir(path)
    yield path
    remove_tree(path)


def _rel(path: str) -> str:
    return "/" + os.path.relpath(path, find_cgroup2().mount_point)


def _first_line_from_child(cgroup_fd: int, flags: int = 0) -> tuple[str, int]:
    """Clone into a cgroup; the child's FIRST act is to read its own /proc/self/cgroup."""
    r, w = os.pipe()

    def body() -> int:
        with open("/proc/self/cgroup", encoding="ascii") as f:
            os.write(w, f.read().encode())
        return 0

    child = clone_child(body, cgroup_fd=cgroup_fd, flags=flags)
    os.close(w)
    out = b""
    while chunk := os.read(r, 4096):
        out += chunk
    os.close(r)
    os.waitpid(child.pid, 0)
    child.close()
    line = [x for x in out.decode().splitlines() if x.startswith("0::")][0]
    return line[3:], child.pid


def test_clone3_into_cgroup_child_starts_inside(scratch):
    fd = os.open(scratch, O_DIR)
    try:
        seen, _ = _first_line_from_child(fd)
    finally:
        os.close(fd)
    assert seen == _rel(scratch)


def test_clone3_new_cgroupns_is_rooted_at_the_target_cgroup(scratch):
    fd = os.open(scratch, O_DIR)
    try:
        seen, _ = _first_line_from_child(fd, CLONE_NEWCGROUP)
    finally:
        os.close(fd)
    assert seen == "/"


def test_unshare_cgroupns_in_a_child(scratch):
    r, w = os.pipe()
    fd = os.open(scratch, O_DIR)

    def body() -> int:
        unshare(CLONE_NEWCGROUP)
        with open("/proc/self/cgroup", encoding="ascii") as f:
            os.write(w, f.read().encode())
        return 0

    try:
        child = clone_child(body, cgroup_fd=fd)
    finally:
        os.close(fd)
    os.close(w)
    text = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(child.pid, 0)
    child.close()
    assert "0::/\n" in text


def test_clone3_refuses_a_descriptor_that_is_not_a_cgroup(scratch, tmp_path):
    for path in (os.path.join(scratch, "cgroup.procs"), str(tmp_path)):
        fd = os.open(path, os.O_RDONLY)
        try:
            with pytest.raises(OSError):
                clone_child(lambda: 0, cgroup_fd=fd)
        finally:
            os.close(fd)


def test_name_to_handle_at_on_a_cgroup_is_its_kernfs_id(scratch):
    kind, handle = file_handle_id(scratch)
    assert kind == 0xFE and handle == os.stat(scratch).st_ino == cgroup_id(scratch)
    # The same name recreated is another cgroup (facts §5: ids are not reused within a boot).
    os.rmdir(scratch)
    os.mkdir(scratch)
    assert cgroup_id(scratch) != handle


def test_cgroup_id_of_a_missing_cgroup_is_unavailable(scratch):
    with pytest.raises(EvidenceUnavailable):
        cgroup_id(os.path.join(scratch, "nope"))


def test_events_freeze_enumerate_kill_on_a_real_cgroup(scratch):
    """populated, frozen, the recursive enumeration and cgroup.kill, each waited for with poll(POLLPRI)."""
    assert has_feature(scratch, "cgroup.freeze") and has_feature(scratch, "cgroup.kill")
    assert read_events(scratch).populated is False
    sub = os.path.join(scratch, "sub")
    os.mkdir(sub)
    fd_top, fd_sub = os.open(scratch, O_DIR), os.open(sub, O_DIR)
    try:
        a = spawn(["/bin/sleep", "600"], env={}, cgroup_fd=fd_top, credentials=Credentials(65534, 65534, ()))
        b = spawn(["/bin/sleep", "600"], env={}, cgroup_fd=fd_sub, credentials=Credentials(65534, 65534, ()))
    finally:
        os.close(fd_top)
        os.close(fd_sub)
    try:
        ok, ev = wait_events(scratch, lambda e: e.populated, 5)
        assert ok and ev.frozen is False
        write_value(scratch, "cgroup.freeze", "1")
        top = os.open(scratch, O_DIR)
        try:
            ok, detail = wait_tree(top, lambda e: e.frozen is True, 10)
        finally:
            os.close(top)
        assert ok, detail
        assert read_events(sub).frozen is True  # freezing is hierarchical, once the whole tree settled
        members, complete = enumerate_members(scratch)
        assert complete
        assert members == sorted([(a.pid, start_time(a.pid)), (b.pid, start_time(b.pid))])
        write_value(scratch, "cgroup.kill", "1")
        t0 = time.monotonic()
        ok, ev = wait_events(scratch, lambda e: not e.populated, 10)
        assert ok, "populated 0 follows cgroup.kill"
        assert time.monotonic() - t0 < 10
        for child in (a, b):
            _, status = os.waitpid(child.pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    finally:
        for child in (a, b):
            child.close()


def test_cgroup_of_sees_a_process_in_its_cgroup(scratch):
    fd = os.open(scratch, O_DIR)
    try:
        child = spawn(["/bin/sleep", "600"], env={}, cgroup_fd=fd)
    finally:
        os.close(fd)
    try:
        assert cgroup_of(child.pid) == _rel(scratch)
    finally:
        signal.pidfd_send_signal(child.pidfd, signal.SIGKILL)
        select.select([child.pidfd], [], [], 10)
        os.waitpid(child.pid, 0)
        child.close()
