"""Test support: the misbehaving process tree that stands in for the engine in the cohort suites, and the
small independent observations and clean-ups those suites (and the controller's contract test) need.

Not used by the package at run time. ``stage_tree(directory)`` copies the tree script into a directory
that an unprivileged engine uid can read (facts §7.7: /root is 0700), and returns its path. ``alive`` and
``kill_member`` name a process by (pid, start time). ``populated`` and ``wait_unpopulated`` read a
cgroup's ``cgroup.events`` with their own few lines, apart from the reader the stop itself uses, so a
test's observation of the kernel does not share the code under test. ``remove_cgroup`` kills and removes
a cgroup a test created, by the exact path it recorded. ``churning_threads``, ``in_worker`` and
``zombie_children`` make and check the controller's shape for a launch: a busy threaded process that
launches from a worker thread and must leave no child unreaped.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from mosaic.safe_open import ProcessRef, read_stat

from ..cgroupfs import remove_tree

__all__ = ["TREE_SCRIPT", "alive", "churning_threads", "in_worker", "kill_member", "populated", "remove_cgroup",
           "stage_tree", "wait_unpopulated", "zombie_children"]

TREE_SCRIPT = "misbehaving_tree.py"


def stage_tree(directory: str) -> str:
    """Copy the tree script into ``directory`` (made world-readable) and return the copy's path."""
    os.chmod(directory, 0o755)
    dest = os.path.join(directory, TREE_SCRIPT)
    with resources.as_file(resources.files(__package__).joinpath(TREE_SCRIPT)) as src:
        shutil.copyfile(src, dest)
    os.chmod(dest, 0o644)
    return dest


def alive(member: ProcessRef) -> bool:
    """Whether exactly this (pid, start time) is alive: running, sleeping or stopped (a zombie is dead)."""
    st = read_stat(member.pid)
    return st is not None and st.start_time == member.start_time and st.state not in ("Z", "X")


def kill_member(member: ProcessRef) -> bool:
    """SIGKILL exactly this (pid, start time) through a pidfd. Returns whether a signal was sent."""
    try:
        fd = os.pidfd_open(member.pid)
    except ProcessLookupError:
        return False
    try:
        st = read_stat(member.pid)
        if st is None or st.start_time != member.start_time:
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def _populated_in(text: str, path: str) -> bool:
    for line in text.splitlines():
        if line in ("populated 0", "populated 1"):
            return line == "populated 1"
    raise ValueError(f"{path}: no populated line in {text!r}")


def populated(cgroup: str) -> bool:
    """The ``populated`` key of ``<cgroup>/cgroup.events`` (a path). Raises OSError when it cannot be
    read (a missing cgroup is never "empty") and ValueError when it has no populated line."""
    path = os.path.join(cgroup, "cgroup.events")
    with open(path, encoding="ascii") as f:
        return _populated_in(f.read(), path)


def wait_unpopulated(cgroup: str, timeout: float) -> bool:
    """Wait, at most ``timeout`` seconds, for ``populated 0`` in ``<cgroup>/cgroup.events``: poll(POLLPRI)
    (kernfs notifies every change) with a re-read at each wake-up. Returns whether it was observed; raises
    OSError when the file cannot be read."""
    path = os.path.join(cgroup, "cgroup.events")
    deadline = time.monotonic() + timeout
    with open(path, "rb", buffering=0) as f:
        poller = select.poll()
        poller.register(f.fileno(), select.POLLPRI)
        while True:
            f.seek(0)
            if not _populated_in(f.read().decode("ascii"), path):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            # The re-read bound covers a notification that fired between the read and the poll.
            poller.poll(max(1, int(min(remaining, 0.1) * 1000)))


def remove_cgroup(path: str, *, timeout: float = 10.0) -> None:
    """Kill everything in the cgroup at ``path`` (the exact path the caller created) and remove it with its
    descendants. A missing path is fine. Raises OSError or TimeoutError when it cannot be removed."""
    remove_tree(path, timeout=timeout)


@contextlib.contextmanager
def churning_threads(count: int = 3) -> Iterator[int]:
    """``count`` threads allocating and freeing in a loop (800-byte list arrays and 4 KiB blobs come from
    malloc, not pymalloc), so the GIL and malloc's locks are taken and dropped by other threads all the
    time; a 1 ms pause per round keeps them from starving the launching thread of the GIL. Yields
    ``count``; the threads stop on exit."""
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            lists = [list(range(100)) for _ in range(100)]
            blobs = [bytes(4096) for _ in range(20)]
            del lists, blobs
            time.sleep(0.001)

    threads = [threading.Thread(target=churn, daemon=True, name=f"churn-{i}") for i in range(count)]
    for t in threads:
        t.start()
    try:
        yield count
    finally:
        stop.set()
        for t in threads:
            t.join(10)


def in_worker(fn: Callable[[], Any], timeout: float, *, on_hang: Callable[[], str] | None = None) -> Any:
    """``fn()`` on a daemon worker thread, bounded: a hang fails the test (TimeoutError, with what
    ``on_hang`` says after its clean-up) instead of hanging it; ``fn``'s exception is raised here."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name="launcher-worker")
    t.start()
    t.join(timeout)
    if t.is_alive():
        said = f"; {on_hang()}" if on_hang is not None else ""
        raise TimeoutError(f"hung: no return within {timeout}s{said}")
    if "error" in box:
        raise box["error"]
    return box["value"]


def zombie_children() -> list[int]:
    """This process's children that exited and were never reaped (state Z or X)."""
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = read_stat(int(name))
            if st is not None and st.ppid == me and st.state in ("Z", "X"):
                found.append(st.pid)
    return found


def __dir__() -> list[str]:
    return sorted(__all__)
