"""Parsers and readers that need no cgroup: mountinfo, cgroup.events, /proc/<pid>/cgroup.

The cgroup.events reader, the enumeration and the /proc/<pid>/cgroup parser are the shim's mechanisms,
public in ``mosaic.cgroup_cohort.cgroupfs``; testing them is the point here.
The /proc/<pid>/stat parser is mosaic.safe_open's (its own tests cover it).
"""

from __future__ import annotations

import os

import pytest

from mosaic.cgroup_cohort.cgroupfs import EvidenceUnavailable, find_cgroup2
from mosaic.cgroup_cohort.internals import (
    enumerate_members,
    has_feature,
    parse_events,
    parse_mountinfo,
    parse_proc_cgroup,
    read_events,
    start_time,
    wait_events,
    wait_tree,
)
from mosaic.safe_open.identity import parse_stat

HOST = """\
22 27 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/systemd rw,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
"""

# Inside the sandbox (facts §7.1): the host mount now shows root "/.." and the sandbox's own is last.
SANDBOX = HOST.replace("41 31 0:38 / /sys", "41 31 0:38 /.. /sys") + """\
90 31 0:61 / /sys/fs/cgroup rw,nosuid,nodev,noexec - tmpfs tmpfs rw,mode=755
91 90 0:38 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
92 25 0:62 / /run rw,nosuid,nodev - tmpfs tmpfs rw,mode=755
"""

UNIFIED_NSDELEGATE = """\
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
"""


def test_mountinfo_host_hybrid_layout():
    m = find_cgroup2(HOST)
    assert m.mount_point == "/sys/fs/cgroup/unified" and not m.nsdelegate


def test_mountinfo_sandbox_skips_the_shadowed_host_mount():
    m = find_cgroup2(SANDBOX)
    assert m.mount_point == "/sys/fs/cgroup"
    roots = [e.root for e in parse_mountinfo(SANDBOX) if e.fstype == "cgroup2"]
    assert roots == ["/..", "/"]


def test_mountinfo_unified_with_nsdelegate():
    m = find_cgroup2(UNIFIED_NSDELEGATE)
    assert m.mount_point == "/sys/fs/cgroup" and m.nsdelegate


def test_mountinfo_octal_escapes_and_optional_fields():
    text = "50 1 0:40 / /mnt/with\\040space rw shared:3 master:1 - cgroup2 none rw\n"
    (entry,) = parse_mountinfo(text)
    assert entry.mount_point == "/mnt/with space" and entry.fstype == "cgroup2" and entry.source == "none"


def test_mountinfo_without_cgroup2_is_unavailable_not_a_guess():
    with pytest.raises(EvidenceUnavailable) as e:
        find_cgroup2("22 27 0:21 / /sys rw - sysfs sysfs rw\n")
    assert e.value.reason == "cgroup-unavailable"
    with pytest.raises(EvidenceUnavailable):
        find_cgroup2(HOST.replace("41 31 0:38 / /sys", "41 31 0:38 /.. /sys"))


def test_malformed_mountinfo_lines_are_skipped():
    assert parse_mountinfo("garbage\n1 2 3\n") == []


@pytest.mark.parametrize(
    ("text", "populated", "frozen"),
    [("populated 1\nfrozen 0\n", True, False), ("populated 0\nfrozen 1\n", False, True),
     ("populated 0\n", False, None)],
)
def test_parse_events(text, populated, frozen):
    ev = parse_events(text)
    assert (ev.populated, ev.frozen) == (populated, frozen)


@pytest.mark.parametrize("text", ["", "frozen 1\n", "populated 2\n", "populated\n"])
def test_parse_events_refuses_what_it_cannot_read(text):
    with pytest.raises(ValueError):
        parse_events(text)


def test_read_events_from_a_directory(tmp_path):
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert read_events(str(tmp_path)).populated is True
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert read_events(fd).frozen is False
    finally:
        os.close(fd)


def test_K15_missing_cgroup_events_is_unavailable_not_empty(tmp_path):
    """K15 / mutant 21: a missing cgroup path is evidence unavailable, never populated 0."""
    with pytest.raises(EvidenceUnavailable) as e:
        read_events(str(tmp_path / "engine"))
    assert e.value.reason == "cgroup-unavailable"
    (tmp_path / "engine").mkdir()
    with pytest.raises(EvidenceUnavailable):
        read_events(str(tmp_path / "engine"))  # the directory without its events file
    with pytest.raises(EvidenceUnavailable):
        wait_events(str(tmp_path / "engine"), lambda ev: not ev.populated, 0.0)


def test_K15_unreadable_cgroup_events_is_unavailable(tmp_path):
    (tmp_path / "cgroup.events").mkdir()  # unreadable as a file (EISDIR), for root too
    with pytest.raises(EvidenceUnavailable):
        read_events(str(tmp_path))
    (tmp_path / "cgroup.events").rmdir()
    (tmp_path / "cgroup.events").write_text("nonsense\n")
    with pytest.raises(EvidenceUnavailable):
        read_events(str(tmp_path))


def test_wait_events_reports_the_bound_as_not_reached(tmp_path):
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    ok, ev = wait_events(str(tmp_path), lambda e: not e.populated, 0.05, reread=0.01)
    assert not ok and ev.populated
    ok, ev = wait_events(str(tmp_path), lambda e: e.populated, 0.0)
    assert ok


def test_has_feature(tmp_path):
    (tmp_path / "cgroup.kill").write_text("")
    assert has_feature(str(tmp_path), "cgroup.kill") and not has_feature(str(tmp_path), "cgroup.freeze")


def test_enumerate_members_recursive_with_start_times(tmp_path):
    me = os.getpid()
    (tmp_path / "cgroup.procs").write_text(f"{me}\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cgroup.procs").write_text(f"{os.getppid()}\n")
    (tmp_path / "sub" / "deeper").mkdir()
    (tmp_path / "sub" / "deeper" / "cgroup.procs").write_text("")
    members, complete = enumerate_members(str(tmp_path))
    assert complete
    assert members == sorted([(me, start_time(me)), (os.getppid(), start_time(os.getppid()))])


def test_enumeration_with_a_vanished_process_is_incomplete(tmp_path):
    gone = _dead_pid()
    (tmp_path / "cgroup.procs").write_text(f"{os.getpid()}\n{gone}\n")
    members, complete = enumerate_members(str(tmp_path))
    assert not complete and [p for p, _ in members] == [os.getpid()]


def test_enumeration_of_a_missing_cgroup_is_unavailable(tmp_path):
    with pytest.raises(EvidenceUnavailable):
        enumerate_members(str(tmp_path / "nope"))


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_the_shared_stat_parser_reports_a_task_in_do_exit():
    """The shim counts a member in do_exit (PF_EXITING) as dead, never as a survivor (populated 0 is
    signalled before the task is a zombie): it relies on the shared parser's ``exiting``."""
    line = "4242 (a) b (c) S) R 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0 " + " 0" * 30
    assert not parse_stat(line).exiting
    assert parse_stat(line.replace(" 4194560 ", " 4194564 ")).exiting  # PF_EXITING (0x4)


def test_start_time_of_self_and_of_a_gone_pid():
    assert start_time(os.getpid()) == start_time("self") and start_time(os.getpid()) is not None
    assert start_time(_dead_pid()) is None


def test_proc_cgroup_v2_line():
    assert parse_proc_cgroup("9:name=systemd:/\n0::/app.slice/x.scope/engine\n") == "/app.slice/x.scope/engine"
    assert parse_proc_cgroup("4:memory:/x\n") is None


def test_frozen_means_frozen_in_every_descendant(tmp_path):
    """A parent's frozen 1 alone is not accepted: every cgroup below must read frozen 1 (see wait_tree)."""
    (tmp_path / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ok, detail = wait_tree(fd, lambda e: e.frozen is True, 0.05)
        assert not ok and detail.startswith("sub")
        (tmp_path / "sub" / "cgroup.events").write_text("populated 1\nfrozen 1\n")
        assert wait_tree(fd, lambda e: e.frozen is True, 0.0) == (True, "")
        (tmp_path / "cgroup.events").unlink()
        with pytest.raises(EvidenceUnavailable):
            wait_tree(fd, lambda e: e.frozen is True, 0.0)
    finally:
        os.close(fd)
