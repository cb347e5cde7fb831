"""The swap race: a thread flips the `sessions` component between a real directory and a symlink
to an outside directory holding a decoy `s.jsonl`, as fast as it can, while the library opens in a loop.

The seed could only detect such a swap after the open ("Node has no openat"). Here the decoy must never be
opened at all, which an inotify IN_OPEN watch on the outside directory proves, and every successful open
must return the real file's (dev, ino). Run for both resolution methods.

The flip is renameat2(RENAME_EXCHANGE) of `sessions` with a prepared symlink, so the path always exists
(either as the directory or as the symlink) and every refusal comes from the symlink, not from a gap.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from typing import TYPE_CHECKING, Any

import cffi  # type: ignore[import-untyped, unused-ignore]
import pytest

from mosaic.safe_open import SafeOpenRefusal
from mosaic.safe_open.testing import OpenWatch

if TYPE_CHECKING:
    from conftest import Tree

SESSIONS = ".pi/state/seat/sessions"
NAME = "s.jsonl"

RACE_SECONDS = 3.0  # per method: the race must run "for a few seconds"
RACE_BOUND_SECONDS = 20.0  # extended up to this if one of the two states was never met
RENAME_EXCHANGE = 2  # include/uapi/linux/fs.h

_ffi: Any = cffi.FFI()
_ffi.cdef(
    "int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);"
)
_libc: Any = _ffi.dlopen(None)


def exchange(dir_fd: int, a: bytes, b: bytes) -> None:
    if _libc.renameat2(dir_fd, a, dir_fd, b, RENAME_EXCHANGE) != 0:
        err = _ffi.errno
        raise OSError(err, os.strerror(err))


def test_swap_race_decoy_never_opened(tree: Tree, method: str, race_report: list[str]) -> None:
    parent = tree.sessions.parent
    link = parent / "sessions.link"
    link.symlink_to(tree.outside)  # absolute: the outside directory with the decoy s.jsonl
    real = os.lstat(tree.session)
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        exchange(parent_fd, b"sessions", b"sessions.link")
        exchange(parent_fd, b"sessions", b"sessions.link")
    except OSError as e:
        os.close(parent_fd)
        if e.errno in (errno.ENOSYS, errno.EINVAL):
            pytest.skip(f"SKIPPED LOUDLY: renameat2(RENAME_EXCHANGE) unsupported here: {e}")
        raise
    root = tree.open(method)

    stop = threading.Event()
    flips = 0
    flip_error: list[BaseException] = []

    def flipper() -> None:
        nonlocal flips
        try:
            while not stop.is_set():
                exchange(parent_fd, b"sessions", b"sessions.link")
                flips += 1
        except BaseException as e:  # reported by the main thread
            flip_error.append(e)

    ok = 0
    refused: dict[str, int] = {}
    wrong: list[tuple[int, int]] = []
    with OpenWatch([tree.outside]) as watch:
        thread = threading.Thread(target=flipper, name="swap-race-flipper", daemon=True)
        thread.start()
        started = time.monotonic()
        try:
            while True:
                elapsed = time.monotonic() - started
                if elapsed >= RACE_BOUND_SECONDS or (elapsed >= RACE_SECONDS and ok and refused):
                    break
                try:
                    f = root.open_session_file(SESSIONS, NAME)
                except SafeOpenRefusal as r:
                    refused[r.code] = refused.get(r.code, 0) + 1
                    continue
                with f:
                    ok += 1
                    if (f.dev, f.ino) != (real.st_dev, real.st_ino):
                        wrong.append((f.dev, f.ino))
                        break  # already a failure; no need to run to the bound
        finally:
            stop.set()
            thread.join(10.0)
            os.close(parent_fd)
        opened = watch.opened()
    elapsed = time.monotonic() - started
    line = (
        f"{method}: {ok} opens succeeded, refused {sum(refused.values())} {refused}, "
        f"{flips} flips in {elapsed:.1f} s"
    )
    print(line)
    race_report.append(line)
    assert not thread.is_alive(), "the flipper thread did not stop"
    assert not flip_error, f"the flipper failed: {flip_error}"
    assert opened == set(), f"the decoy side was opened: {sorted(opened)}"
    assert wrong == [], "a successful open returned another file than the real session"
    assert set(refused) <= {"unsafe-path"}, refused
    # The race must have met both states, or it proved nothing.
    assert ok > 0, f"no open succeeded in {elapsed:.1f} s"
    assert refused.get("unsafe-path", 0) > 0, f"no open met the symlink in {elapsed:.1f} s"
