"""Test helpers shared by the packages that read through safe-open.

`OpenWatch` proves that a file was never opened. The seed made such files mode 000 so that an attempted
open would throw EACCES (seed README, "Tests"); CI runs as root, and mode 000 does not stop root. An
inotify IN_OPEN watch does not depend on who opens: the kernel queues the event inside open(2) itself,
before the call returns, so once the code under test has returned, every open it made is in the queue.

What inotify cannot see: an O_PATH open (it reads nothing), stat/lstat, and opens made through another
mount of the same file outside the watched inodes. None of those read the file's bytes.

`reset_peak` and `vm_bytes` measure the peak memory of one step in a child process (the pathological-input
tests of pi-format and chat-pages: a parse's or an open's growth against the file's size).

`openat2_unavailable()` makes this process's openat2 probe answer "unavailable", as a kernel without the
call (before Linux 5.6) or a seccomp filter does, so the walk fallback runs on a kernel that has openat2.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Self

from . import _kernel
from ._kernel import IN_DONT_FOLLOW, IN_IGNORED, IN_OPEN, IN_Q_OVERFLOW, inotify_add_watch, inotify_init

__all__ = ["OpenWatch", "OpenWatchOverflow", "openat2_unavailable", "reset_peak", "vm_bytes"]

_EVENT = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len; then `len` bytes of name


class OpenWatchOverflow(RuntimeError):
    """The kernel dropped events (IN_Q_OVERFLOW): whether a file was opened is unknown, never "no"."""


class OpenWatch:
    """Watch paths for IN_OPEN: files directly, directories recursively (every file and subdirectory
    that exists when the watch starts).

    Use as a context manager; `opened()` returns the set of watched paths opened since the watch started
    (a directory opened for listing is reported too). Symlinks among the watched paths are not followed
    and not watched: opening through a symlink opens its target, which is what a watch must name.

    Directories and files created after the watch started are seen only as entries of a watched
    directory (IN_OPEN on a child of a watched directory is reported with the child's name), not
    recursively. If the kernel's event queue overflows, `opened()` raises OpenWatchOverflow.
    """

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self._roots = [os.path.abspath(os.fspath(p)) for p in paths]
        self._fd: int | None = None
        self._wd_path: dict[int, str] = {}
        self._opened: set[str] = set()
        self._overflow = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        """Add the watches. Raises OSError (e.g. ENOSPC: max_user_watches) if a watch cannot be added,
        and FileNotFoundError for a watched path that does not exist."""
        if self._fd is not None:
            raise RuntimeError("OpenWatch already started")
        self._fd = inotify_init()
        try:
            for root in self._roots:
                self._watch_tree(root)
        except BaseException:
            self.close()
            raise

    def _add(self, path: str) -> None:
        assert self._fd is not None
        wd = inotify_add_watch(self._fd, path, IN_OPEN | IN_DONT_FOLLOW)
        self._wd_path[wd] = path

    def _watch_tree(self, root: str) -> None:
        if os.path.islink(root):
            raise ValueError(f"{root} is a symlink; watch its target instead")
        os.lstat(root)  # FileNotFoundError for a path that does not exist
        paths = [root]
        if os.path.isdir(root):
            # List the whole tree before adding any watch: os.walk opens every directory, and the watch
            # must not report its own listing.
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
        for path in paths:
            if not os.path.islink(path):
                self._add(path)

    def close(self) -> None:
        """Drain what is queued, then close the inotify fd (idempotent)."""
        if self._fd is not None:
            try:
                self._drain()
            finally:
                os.close(self._fd)
                self._fd = None

    def _drain(self) -> None:
        if self._fd is None:
            return
        while True:
            try:
                buf = os.read(self._fd, 65536)
            except BlockingIOError:
                return
            off = 0
            while off + _EVENT.size <= len(buf):
                wd, mask, _cookie, length = _EVENT.unpack_from(buf, off)
                raw = buf[off + _EVENT.size : off + _EVENT.size + length].rstrip(b"\0")
                off += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    self._overflow = True
                    continue
                if mask & IN_IGNORED or not mask & IN_OPEN:
                    continue
                base = self._wd_path.get(wd)
                if base is None:
                    continue
                # IN_ISDIR in the mask only says the opened path is a directory; both kinds are reported.
                self._opened.add(os.path.join(base, os.fsdecode(raw)) if raw else base)

    def opened(self) -> set[str]:
        """Every watched path opened so far (absolute). Raises OpenWatchOverflow if events were lost."""
        self._drain()
        if self._overflow:
            raise OpenWatchOverflow("inotify queue overflowed: which files were opened is unknown")
        return set(self._opened)

    def assert_not_opened(self) -> None:
        """Raise AssertionError naming the opened paths if any watched path was opened."""
        opened = self.opened()
        if opened:
            raise AssertionError(f"watched paths were opened: {sorted(opened)}")


def vm_bytes(key: str) -> int:
    """This process's `key` line of /proc/self/status (VmRSS, VmHWM, ...) in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(f"no {key} in /proc/self/status")


def reset_peak() -> int:
    """Reset this process's peak RSS (VmHWM) to its current RSS, so `vm_bytes("VmHWM")` read later is the
    peak of what ran in between; returns the current RSS. If the kernel refuses (/proc/self/clear_refs),
    the later peak includes everything before, which only overstates a growth."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
    return vm_bytes("VmRSS")


@contextlib.contextmanager
def openat2_unavailable(status: str = "simulated ENOSYS") -> Iterator[None]:
    """Inside the block, the once-per-process openat2 probe answers (False, `status`): `open_root` with
    method "auto" walks and method "openat2" raises OSError(ENOSYS), as on a kernel without openat2. The
    probe's previous answer (or none yet) is restored on exit. Not thread-safe against a concurrent probe
    by design: a test holds it around its own calls."""
    with _kernel._probe_lock:
        saved = _kernel._probe
        _kernel._probe = (False, status)
    try:
        yield
    finally:
        with _kernel._probe_lock:
            _kernel._probe = saved


def __dir__() -> list[str]:
    return sorted(__all__)
