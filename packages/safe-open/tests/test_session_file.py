"""The seed's session-file rules (README "Opening a file"), one test per rule, for both resolution methods.

Where a rule says a file is never opened, an inotify IN_OPEN watch proves it (the seed used mode 000,
which does not stop root, and CI runs as root).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from mosaic.safe_open import MAX_SESSION_FILE_BYTES, OpenedFile, SafeOpenRefusal, is_session_name
from mosaic.safe_open.testing import OpenWatch

if TYPE_CHECKING:
    from conftest import Tree

Bounded = Callable[..., Any]
SESSIONS = ".pi/state/seat/sessions"
NAME = "s.jsonl"
BOUND = 5.0  # seconds; an open that never blocks returns in microseconds


def refusal_code(fn: object) -> str:
    assert callable(fn)
    with pytest.raises(SafeOpenRefusal) as info:
        fn()
    return info.value.code


def test_regular_jsonl_opens_with_lstat_identity(tree: Tree, method: str) -> None:
    root = tree.open(method)
    st = os.lstat(tree.session)
    with root.open_session_file(SESSIONS, NAME) as f:
        assert isinstance(f, OpenedFile)
        assert (f.dev, f.ino, f.size, f.mtime_ns, f.name) == (
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            NAME,
        )
        assert os.read(f.fd, 100) == tree.session.read_bytes()
        # The contract's flags: read-only, non-blocking, close-on-exec.
        fl = fcntl.fcntl(f.fd, fcntl.F_GETFL)
        assert fl & os.O_ACCMODE == os.O_RDONLY
        assert fl & os.O_NONBLOCK
        assert fcntl.fcntl(f.fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC
    assert f.closed
    f.close()  # idempotent: never closes a reused fd number


@pytest.mark.parametrize(
    "name",
    [
        "s.json",
        "s.jsonl.bak",
        ".jsonl",
        ".hidden.jsonl",
        "../s.jsonl",
        "sub/s.jsonl",
        "",
        ".",
        "..",
        "s\0.jsonl",
    ],
)
def test_bad_names_are_unsafe_path_and_never_opened(tree: Tree, method: str, name: str) -> None:
    # Every bad name exists as a real regular file where it could, so only the name rule refuses it.
    (tree.sessions / "sub").mkdir()
    for n in ("s.json", "s.jsonl.bak", ".jsonl", ".hidden.jsonl", "sub/s.jsonl"):
        (tree.sessions / n).write_text("{}\n")
    (tree.project / ".pi/state/seat/s.jsonl").write_text("{}\n")
    root = tree.open(method)
    assert not is_session_name(name)
    with OpenWatch([tree.project]) as watch:
        assert refusal_code(lambda: root.open_session_file(SESSIONS, name)) == "unsafe-path"
        assert watch.opened() == set()


def test_file_must_be_directly_in_sessions_dir(tree: Tree, method: str) -> None:
    nested = tree.sessions / "sub"
    nested.mkdir()
    (nested / "n.jsonl").write_text("{}\n")
    root = tree.open(method)
    with OpenWatch([nested]) as watch:
        assert refusal_code(lambda: root.open_session_file(SESSIONS, "sub/n.jsonl")) == "unsafe-path"
        assert watch.opened() == set()
    # The same file is reachable only by naming its own directory as the sessions directory.
    with root.open_session_file(f"{SESSIONS}/sub", "n.jsonl") as f:
        assert f.ino == os.lstat(nested / "n.jsonl").st_ino


def test_symlinked_session_file_is_unsafe_path_and_target_never_opened(tree: Tree, method: str) -> None:
    link = tree.sessions / "l.jsonl"
    link.symlink_to(tree.decoy)
    inside = tree.sessions / "i.jsonl"
    inside.symlink_to(NAME)  # a relative link to the real session, beneath the root
    root = tree.open(method)
    with OpenWatch([tree.outside, tree.session]) as watch:
        assert refusal_code(lambda: root.open_session_file(SESSIONS, "l.jsonl")) == "unsafe-path"
        assert refusal_code(lambda: root.open_session_file(SESSIONS, "i.jsonl")) == "unsafe-path"
        assert watch.opened() == set()


def test_symlink_swapped_in_after_lstat_is_never_followed(tree: Tree, method: str) -> None:
    """Between the lstat (a regular file) and the open, the file becomes a symlink to a decoy.

    O_NOFOLLOW makes the open fail: the decoy is never opened (prevented, not detected afterwards)."""
    root = tree.open(method)
    staged = tree.sessions / "staged-link"
    staged.symlink_to(tree.decoy)

    def swap(dir_fd: int, name: str) -> None:
        os.rename("staged-link", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    with OpenWatch([tree.outside]) as watch:
        with pytest.raises(SafeOpenRefusal) as info:
            root.open_session_file(SESSIONS, NAME, _between_lstat_and_open=swap)
        assert info.value.code == "unsafe-path"
        assert watch.opened() == set(), "the decoy behind the swapped-in symlink was opened"
    assert tree.session.is_symlink()  # the swap really happened


def test_dev_ino_must_equal_the_lstat_before_the_open(tree: Tree, method: str) -> None:
    """A regular file swapped for another regular file between lstat and open is refused."""
    root = tree.open(method)
    other = tree.sessions / "other.tmp"
    other.write_text('{"other":true}\n')
    other_ino = os.lstat(other).st_ino

    def swap(dir_fd: int, name: str) -> None:
        os.rename("other.tmp", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    with pytest.raises(SafeOpenRefusal) as info:
        root.open_session_file(SESSIONS, NAME, _between_lstat_and_open=swap)
    assert info.value.code == "unsafe-path"
    assert "(dev, ino)" in info.value.message
    assert os.lstat(tree.session).st_ino == other_ino  # the swap really happened
    # Without a swap the same call opens.
    with root.open_session_file(SESSIONS, NAME) as f:
        assert f.ino == other_ino


def test_directory_named_jsonl_is_unsafe_path(tree: Tree, method: str) -> None:
    (tree.sessions / "d.jsonl").mkdir()
    root = tree.open(method)
    assert refusal_code(lambda: root.open_session_file(SESSIONS, "d.jsonl")) == "unsafe-path"


def waits_for_a_fifo_writer(tid: int) -> str | None:
    """Why the thread `tid` of this process is blocked opening a FIFO, or None: the kernel shows a FIFO open
    that waits for its other end as the wait channel `wait_for_partner` (fs/pipe.c), which an O_NONBLOCK open
    never reaches."""
    try:
        with open(f"/proc/self/task/{tid}/wchan") as f:
            channel = f.read().strip()
    except OSError:  # the thread is gone: it returned
        return None
    if channel == "wait_for_partner":
        return "the open waited for a writer of the FIFO (blocked in the kernel's wait_for_partner): it must never block"
    return None


def test_fifo_is_unsafe_path_and_never_blocks(tree: Tree, method: str, call_bounded: Bounded) -> None:
    fifo = tree.sessions / "f.jsonl"
    os.mkfifo(fifo)
    root = tree.open(method)

    def unblock() -> None:  # only a blocking (broken) open needs a writer to return
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    def attempt() -> str:
        return refusal_code(lambda: root.open_session_file(SESSIONS, "f.jsonl"))

    assert call_bounded(attempt, BOUND, unblock, waits_for_a_fifo_writer) == "unsafe-path"


def test_fifo_swapped_in_after_lstat_never_blocks(tree: Tree, method: str, call_bounded: Bounded) -> None:
    """The lstat sees a regular file; the open meets a FIFO with no writer. O_NONBLOCK makes that open
    return at once, and the (dev, ino) check refuses it. Without O_NONBLOCK it would block forever."""
    staged = tree.sessions / "staged-fifo"
    os.mkfifo(staged)
    root = tree.open(method)

    def swap(dir_fd: int, name: str) -> None:
        os.rename("staged-fifo", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)

    def unblock() -> None:
        try:
            os.close(os.open(tree.session, os.O_WRONLY | os.O_NONBLOCK))
        except OSError as e:  # ENXIO: no reader is waiting after all
            assert e.errno == errno.ENXIO

    def attempt() -> str:
        return refusal_code(lambda: root.open_session_file(SESSIONS, NAME, _between_lstat_and_open=swap))

    assert call_bounded(attempt, BOUND, unblock, waits_for_a_fifo_writer) == "unsafe-path"
    assert stat.S_ISFIFO(os.lstat(tree.session).st_mode)  # the swap really happened


def test_socket_is_unsafe_path(
    tree: Tree, method: str, call_bounded: Bounded, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AF_UNIX paths are limited to 108 bytes; bind relative to the sessions directory instead.
    monkeypatch.chdir(tree.sessions)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind("k.jsonl")
        assert stat.S_ISSOCK(os.lstat(tree.sessions / "k.jsonl").st_mode)
        root = tree.open(method)
        assert call_bounded(
            lambda: refusal_code(lambda: root.open_session_file(SESSIONS, "k.jsonl")), BOUND
        ) == ("unsafe-path")
    finally:
        sock.close()


@pytest.mark.parametrize("kind", ["char", "block"])
def test_device_is_unsafe_path_and_never_opened(
    tree: Tree, method: str, call_bounded: Bounded, kind: str
) -> None:
    dev = tree.sessions / "d.jsonl"
    mode, numbers = (stat.S_IFCHR, (1, 3)) if kind == "char" else (stat.S_IFBLK, (7, 0))  # /dev/null, loop0
    try:
        os.mknod(dev, mode | 0o600, os.makedev(*numbers))
    except PermissionError as e:
        pytest.skip(f"SKIPPED LOUDLY: cannot mknod a {kind} device here (needs CAP_MKNOD): {e}")
    root = tree.open(method)
    with OpenWatch([tree.sessions]) as watch:
        assert call_bounded(
            lambda: refusal_code(lambda: root.open_session_file(SESSIONS, "d.jsonl")), BOUND
        ) == ("unsafe-path")
        assert str(dev) not in watch.opened()


def _sparse(path: Path, size: int) -> None:
    with open(path, "wb") as f:
        f.truncate(size)  # sparse: no 256 MiB is written


def test_over_256_mib_is_too_large_and_exactly_256_mib_opens(tree: Tree, method: str) -> None:
    big = tree.sessions / "big.jsonl"
    edge = tree.sessions / "edge.jsonl"
    _sparse(big, MAX_SESSION_FILE_BYTES + 1)
    _sparse(edge, MAX_SESSION_FILE_BYTES)
    root = tree.open(method)
    with OpenWatch([big]) as watch:
        assert refusal_code(lambda: root.open_session_file(SESSIONS, "big.jsonl")) == "too-large"
        assert watch.opened() == set()  # refused from the lstat, before any open
    try:
        edge_file = root.open_session_file(SESSIONS, "edge.jsonl")
    except SafeOpenRefusal as exc:
        raise AssertionError(f"exactly 256 MiB must open, it was refused: {exc}") from exc
    with edge_file as f:
        assert f.size == 256 * 1024 * 1024


def test_growing_past_256_mib_between_lstat_and_open_is_too_large(tree: Tree, method: str) -> None:
    root = tree.open(method)

    def grow(dir_fd: int, name: str) -> None:
        _sparse(tree.session, MAX_SESSION_FILE_BYTES + 1)

    assert (
        refusal_code(lambda: root.open_session_file(SESSIONS, NAME, _between_lstat_and_open=grow))
        == "too-large"
    )


def test_missing_file_and_missing_sessions_dir_are_unavailable(tree: Tree, method: str) -> None:
    root = tree.open(method)
    assert refusal_code(lambda: root.open_session_file(SESSIONS, "gone.jsonl")) == "unavailable"
    assert (
        refusal_code(lambda: root.open_session_file(".pi/state/other-seat/sessions", NAME)) == "unavailable"
    )


def test_file_removed_between_lstat_and_open_is_unavailable(tree: Tree, method: str) -> None:
    root = tree.open(method)

    def remove(dir_fd: int, name: str) -> None:
        os.unlink(name, dir_fd=dir_fd)

    assert (
        refusal_code(lambda: root.open_session_file(SESSIONS, NAME, _between_lstat_and_open=remove))
        == "unavailable"
    )


def test_vanished_root_is_unavailable(tree: Tree, method: str) -> None:
    import shutil

    root = tree.open(method)
    shutil.rmtree(tree.project)
    assert refusal_code(lambda: root.open_session_file(SESSIONS, NAME)) == "unavailable"
    assert refusal_code(lambda: root.listdir("")) == "unavailable"
    assert refusal_code(lambda: root.open_dir(".")) == "unavailable"
    assert refusal_code(lambda: root.lstat("")) == "unavailable"


def test_root_replaced_at_the_same_path_is_not_followed(tree: Tree, method: str) -> None:
    """The root is resolved once: a new directory at the old path, with a full tree, is never read."""
    import shutil

    root = tree.open(method)
    shutil.rmtree(tree.project)
    (tree.project / SESSIONS).mkdir(parents=True)
    (tree.project / SESSIONS / NAME).write_text("{}\n")
    with OpenWatch([tree.project]) as watch:
        assert refusal_code(lambda: root.open_session_file(SESSIONS, NAME)) == "unavailable"
        assert watch.opened() == set()
