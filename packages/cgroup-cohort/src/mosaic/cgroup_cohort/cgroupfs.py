"""The cgroup2 filesystem: finding the mount, reading cgroup.events, enumerating, freezing, killing.

The kernel as the cohort reads it: the shim, the executors and the limits' writer call exactly these
(through this module, so a test can record them), and the few /proc readers a stop relies on are here too
(a process's cgroup and start time, from ``_proc``). A caller needs only where the mount is
(``find_cgroup2``, a ``Cgroup2Mount``); the readers are shown to this package's tests by
``mosaic.cgroup_cohort.internals``.
A reader that cannot read raises ``EvidenceUnavailable`` (a reason and a detail), never an empty answer.
The shim's start imports this module before the engine runs: nothing beyond the standard library and the
bindings (README "Threads": what a launch costs).

Rules this file keeps (docs/cgroup-facts.md):

* The cgroup2 mount is discovered from /proc/self/mountinfo: the LAST cgroup2 entry whose root is "/".
  It is never hard-coded (/sys/fs/cgroup/unified here, /sys/fs/cgroup elsewhere, and inside a sandbox
  the shadowed host mount shows root "/..") (facts §7.1).
* A missing or unreadable cgroup.events is ``EvidenceUnavailable``, never ``populated 0`` (brief §6
  "Unavailable is not empty", K15).
* Waiting is poll(POLLPRI) on cgroup.events with a periodic re-read and a bound; a timeout is reported
  as such, never as success (facts §7.6).
* Members are (pid, start time) pairs, read recursively from every cgroup.procs below a directory.
"""

from __future__ import annotations

import errno
import os
import select
import stat as _stat
import time
from collections.abc import Callable, Iterator

from ._evidence import EvidenceUnavailable
from ._ffi import file_handle_id
from ._proc import start_time
from ._record import Record

# What a caller needs: where the mount is, and the one failure every reader raises. The readers themselves
# are the cohort's own (the shim, the executors, the limits' writer); this package's tests reach them
# through mosaic.cgroup_cohort.internals.
__all__ = ["Cgroup2Mount", "EvidenceUnavailable", "find_cgroup2"]


def __dir__() -> list[str]:
    return sorted(__all__)


O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class MountEntry(Record):
    """One line of /proc/<pid>/mountinfo (proc(5)). A frozen value (``_record.Record``), as are the two
    records below: the shim imports this module before it starts the engine, without ``dataclasses``."""

    __slots__ = ("mount_id", "parent_id", "root", "mount_point", "options", "fstype", "source", "super_options")
    mount_id: int
    parent_id: int
    root: str
    mount_point: str
    options: str
    fstype: str
    source: str
    super_options: str

    def __init__(self, mount_id: int, parent_id: int, root: str, mount_point: str, options: str, fstype: str,
                 source: str, super_options: str) -> None:
        self._set(mount_id=mount_id, parent_id=parent_id, root=root, mount_point=mount_point, options=options,
                  fstype=fstype, source=source, super_options=super_options)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo (octal).
    out: list[str] = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and all(c in "01234567" for c in field[i + 1 : i + 4]):
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """Every well-formed line of a mountinfo file, in order. Malformed lines are skipped."""
    entries: list[MountEntry] = []
    for line in text.splitlines():
        parts = line.split(" ")
        try:
            sep = parts.index("-", 6)
        except ValueError:
            continue
        if len(parts) < sep + 4:
            continue
        try:
            entries.append(
                MountEntry(
                    mount_id=int(parts[0]),
                    parent_id=int(parts[1]),
                    root=_unescape(parts[3]),
                    mount_point=_unescape(parts[4]),
                    options=parts[5],
                    fstype=parts[sep + 1],
                    source=_unescape(parts[sep + 2]),
                    super_options=parts[sep + 3],
                )
            )
        except ValueError:
            continue
    return entries


class Cgroup2Mount(Record):
    """Where cgroup2 is reachable from this mount namespace, and whether it is mounted nsdelegate."""

    __slots__ = ("mount_point", "nsdelegate", "super_options")
    mount_point: str
    nsdelegate: bool
    super_options: str

    def __init__(self, mount_point: str, nsdelegate: bool, super_options: str) -> None:
        self._set(mount_point=mount_point, nsdelegate=nsdelegate, super_options=super_options)


def find_cgroup2(mountinfo: str | None = None) -> Cgroup2Mount:
    """The cgroup2 mount to use: the last cgroup2 entry whose root is "/" (facts §7.1).

    Raises EvidenceUnavailable("cgroup-unavailable") when there is none (a host without cgroup2, or one
    where only a mount rooted elsewhere is visible).
    """
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8") as f:
                mountinfo = f.read()
        except OSError as e:
            raise EvidenceUnavailable("cgroup-unavailable", f"cannot read mountinfo: {e}") from e
    found: MountEntry | None = None
    for entry in parse_mountinfo(mountinfo):
        if entry.fstype == "cgroup2" and entry.root == "/":
            found = entry
    if found is None:
        raise EvidenceUnavailable("cgroup-unavailable", "no cgroup2 mount with root / in mountinfo")
    opts = set(found.super_options.split(",")) | set(found.options.split(","))
    return Cgroup2Mount(found.mount_point, "nsdelegate" in opts, found.super_options)


class CgroupEvents(Record):
    """The keys of a cgroup.events file. ``frozen`` is None on kernels without the freezer (< 5.2)."""

    __slots__ = ("populated", "frozen")
    populated: bool
    frozen: bool | None

    def __init__(self, populated: bool, frozen: bool | None) -> None:
        self._set(populated=populated, frozen=frozen)


def parse_events(text: str) -> CgroupEvents:
    """Parse cgroup.events. Raises ValueError when ``populated`` is absent or a value is not 0/1."""
    values: dict[str, bool] = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key in ("populated", "frozen"):
            if value.strip() not in ("0", "1"):
                raise ValueError(f"cgroup.events: {key} has value {value!r}")
            values[key] = value.strip() == "1"
    if "populated" not in values:
        raise ValueError("cgroup.events has no populated key")
    return CgroupEvents(populated=values["populated"], frozen=values.get("frozen"))


def _open_in(dir_fd: int | None, path: str, flags: int) -> int:
    return os.open(path, flags | os.O_CLOEXEC, dir_fd=dir_fd)


def read_events(cgroup: str | int) -> CgroupEvents:
    """Read ``cgroup.events`` of a cgroup given as a path or an O_DIRECTORY fd.

    A missing directory or file, a permission error, or content that does not parse raises
    EvidenceUnavailable("cgroup-unavailable"): it is an absent observation, never an empty one (K15).
    """
    dir_fd = cgroup if isinstance(cgroup, int) else None
    path = "cgroup.events" if dir_fd is not None else os.path.join(str(cgroup), "cgroup.events")
    try:
        fd = _open_in(dir_fd, path, os.O_RDONLY)
        try:
            text = os.read(fd, 4096).decode("ascii", "replace")
        finally:
            os.close(fd)
        return parse_events(text)
    except (OSError, ValueError) as e:
        raise EvidenceUnavailable("cgroup-unavailable", f"{path}: {e}") from e


def wait_events(
    cgroup: str | int,
    until: Callable[[CgroupEvents], bool],
    timeout: float,
    *,
    reread: float = 0.05,
) -> tuple[bool, CgroupEvents]:
    """Wait until ``until(events)`` holds, for at most ``timeout`` seconds.

    Uses poll(POLLPRI) on cgroup.events (kernfs notifies it on every change) and also re-reads every
    ``reread`` seconds, because a notification can fire between a read and the next poll. Returns
    (True, events) when the condition held, (False, last events) at the bound. Raises
    EvidenceUnavailable when the file disappears or becomes unreadable while waiting.
    """
    dir_fd = cgroup if isinstance(cgroup, int) else None
    path = "cgroup.events" if dir_fd is not None else os.path.join(str(cgroup), "cgroup.events")
    deadline = time.monotonic() + timeout
    try:
        fd = _open_in(dir_fd, path, os.O_RDONLY)
    except OSError as e:
        raise EvidenceUnavailable("cgroup-unavailable", f"{path}: {e}") from e
    try:
        poller = select.poll()
        poller.register(fd, select.POLLPRI | select.POLLERR)
        while True:
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                events = parse_events(os.read(fd, 4096).decode("ascii", "replace"))
            except (OSError, ValueError) as e:
                raise EvidenceUnavailable("cgroup-unavailable", f"{path}: {e}") from e
            if until(events):
                return True, events
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False, events
            poller.poll(max(1, int(min(remaining, reread) * 1000)))
    finally:
        os.close(fd)


def _subtree(dir_fd: int, rel: str = "") -> list[str]:
    out = [rel]
    with os.scandir(dir_fd) as it:
        subdirs = sorted(e.name for e in it if e.is_dir(follow_symlinks=False))
    for name in subdirs:
        sub = os.open(name, O_DIR, dir_fd=dir_fd)
        try:
            out.extend(_subtree(sub, f"{rel}/{name}" if rel else name))
        finally:
            os.close(sub)
    return out


def wait_tree(
    cgroup: int,
    until: Callable[[CgroupEvents], bool],
    timeout: float,
) -> tuple[bool, str]:
    """Wait until ``until`` holds for the cgroup AND every descendant cgroup, for at most ``timeout`` s.

    Why every descendant: on this kernel (6.18) a parent's ``frozen 1`` was observed while a child cgroup
    still read ``frozen 0`` (1 in 20 freezes with a task in each): the parent's flag follows its own
    tasks. A member still running in a child cgroup could fork after the enumeration, so the kill phase
    waits for frozen 1 everywhere below engine/ and accepts only a pass that finds the same set of
    cgroups all satisfying the condition twice in a row. Returns (True, "") or (False, what was seen).
    Raises EvidenceUnavailable if the top cgroup is missing or unreadable.
    """
    deadline = time.monotonic() + timeout
    previous: list[str] | None = None
    while True:
        try:
            dirs = _subtree(cgroup)
        except OSError as e:
            read_events(cgroup)  # raises EvidenceUnavailable when the top itself is gone
            dirs = []
            detail = f"walk: {e}"
        else:
            detail = ""
        satisfied = bool(dirs)
        for rel in dirs:
            try:
                fd = os.open(rel or ".", O_DIR, dir_fd=cgroup)
            except FileNotFoundError:
                satisfied = False  # a sub-cgroup vanished mid-walk: walk again
                break
            try:
                ok, ev = wait_events(fd, until, max(0.0, deadline - time.monotonic()))
            except EvidenceUnavailable:
                if not rel:
                    raise
                satisfied = False
                break
            finally:
                os.close(fd)
            if not ok:
                return False, f"{rel or '.'}: {ev}"
        if satisfied and previous == dirs:
            return True, ""
        if satisfied and previous is None:
            previous = dirs  # one immediate confirming pass, even at the bound
            continue
        previous = dirs if satisfied else None
        if time.monotonic() >= deadline:
            return False, detail or "the subtree kept changing"


def write_value(cgroup: str | int, name: str, value: str) -> None:
    """Write ``value`` to the control file ``name`` of a cgroup (path or O_DIRECTORY fd).

    Raises OSError with the kernel's errno (ENOENT: the file or cgroup is missing, which callers treat as
    a missing kernel feature or an unavailable cgroup).
    """
    dir_fd = cgroup if isinstance(cgroup, int) else None
    path = name if dir_fd is not None else os.path.join(str(cgroup), name)
    fd = _open_in(dir_fd, path, os.O_WRONLY)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


def has_feature(cgroup: str | int, name: str) -> bool:
    """Whether a control file such as cgroup.freeze or cgroup.kill exists in a (non-root) cgroup."""
    dir_fd = cgroup if isinstance(cgroup, int) else None
    path = name if dir_fd is not None else os.path.join(str(cgroup), name)
    try:
        os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def cgroup_id(cgroup: str | int) -> int:
    """The 64-bit cgroup id of a directory, read twice (st_ino and name_to_handle_at) and compared.

    Raises EvidenceUnavailable("cgroup-unavailable") when the directory is missing or the two readings
    disagree (the name now points at another cgroup).
    """
    try:
        if isinstance(cgroup, int):
            st = os.fstat(cgroup)
            kind, handle = file_handle_id("", dir_fd=cgroup)
        else:
            st = os.stat(cgroup, follow_symlinks=False)
            kind, handle = file_handle_id(cgroup)
    except OSError as e:
        raise EvidenceUnavailable("cgroup-unavailable", f"cgroup id of {cgroup!r}: {e}") from e
    if not _stat.S_ISDIR(st.st_mode):
        raise EvidenceUnavailable("cgroup-unavailable", f"{cgroup!r} is not a directory")
    if kind != 0xFE or handle != st.st_ino:
        raise EvidenceUnavailable(
            "cgroup-unavailable", f"{cgroup!r}: handle (0x{kind:x}, {handle}) != st_ino {st.st_ino}"
        )
    return handle


def _read_procs(dir_fd: int) -> list[int]:
    fd = os.open("cgroup.procs", os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return [int(x) for x in b"".join(chunks).split()]


def _walk(dir_fd: int, rel: str) -> Iterator[tuple[str, list[int]]]:
    yield rel, _read_procs(dir_fd)
    with os.scandir(dir_fd) as it:
        subdirs = [e.name for e in it if e.is_dir(follow_symlinks=False)]
    for name in sorted(subdirs):
        sub = os.open(name, O_DIR, dir_fd=dir_fd)
        try:
            yield from _walk(sub, f"{rel}/{name}" if rel else name)
        finally:
            os.close(sub)


def enumerate_members(cgroup: str | int, *, proc: str = "/proc") -> tuple[list[tuple[int, int]], bool]:
    """Every process in the cgroup and all its descendants, as sorted (pid, start time) pairs.

    Returns (members, complete). ``complete`` is False when a process listed in a cgroup.procs was gone
    before its start time was read, or a sub-cgroup vanished during the walk: the caller (frozen) reads
    again and accepts only two identical complete readings. Raises EvidenceUnavailable when the cgroup
    itself is missing or unreadable.
    """
    try:
        top = os.open(cgroup, O_DIR) if isinstance(cgroup, str) else os.dup(cgroup)
    except OSError as e:
        raise EvidenceUnavailable("cgroup-unavailable", f"{cgroup!r}: {e}") from e
    members: set[tuple[int, int]] = set()
    complete = True
    try:
        try:
            pids: list[int] = []
            for _rel, found in _walk(top, ""):
                pids.extend(found)
        except FileNotFoundError as e:
            # The top directory gone is unavailable; a vanished sub-cgroup only makes this reading incomplete.
            try:
                os.stat("cgroup.procs", dir_fd=top)
            except OSError:
                raise EvidenceUnavailable("cgroup-unavailable", f"{cgroup!r}: {e}") from e
            return sorted(members), False
        except OSError as e:
            raise EvidenceUnavailable("cgroup-unavailable", f"{cgroup!r}: {e}") from e
        for pid in pids:
            st = start_time(pid, proc=proc)
            if st is None:
                complete = False
                continue
            members.add((pid, st))
    finally:
        os.close(top)
    return sorted(members), complete


def remove_tree(path: str, *, timeout: float = 10.0) -> None:
    """Kill everything in the cgroup ``path`` and remove it with its descendants, depth first.

    For fixtures' finalizers and launch failures: the caller names the exact cgroup it created. A missing
    path is fine (already removed). Raises OSError/TimeoutError when the tree cannot be removed.
    """
    if not os.path.isdir(path):
        return
    if has_feature(path, "cgroup.kill"):
        try:
            ok, _ = wait_events(path, lambda e: not e.populated, 0.0)
            if not ok:
                write_value(path, "cgroup.kill", "1")
                ok, _ = wait_events(path, lambda e: not e.populated, timeout)
                if not ok:
                    raise TimeoutError(f"{path}: populated 0 not reached within {timeout}s")
        except EvidenceUnavailable:
            if os.path.isdir(path):
                raise
            return
    for dirpath, _dirnames, _files in list(os.walk(path, topdown=False)):
        for attempt in range(50):
            try:
                os.rmdir(dirpath)
                break
            except FileNotFoundError:
                break
            except OSError as e:
                # EBUSY right after populated 0 while zombies are released; retry briefly.
                if e.errno != errno.EBUSY or attempt == 49:
                    raise
                time.sleep(0.02)
