"""mosaic.safe_open.testing.OpenWatch: the inotify proof that a file was never opened, which the other
packages reuse (chat-pages). It must see every open, whoever opens (root included), and nothing else."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mosaic.safe_open.testing import OpenWatch, OpenWatchOverflow


def make_tree(base: Path) -> tuple[Path, Path, Path]:
    top = base / "top"
    (top / "a" / "b").mkdir(parents=True)
    f1 = top / "one.jsonl"
    f2 = top / "a" / "b" / "two.jsonl"
    f1.write_text("1\n")
    f2.write_text("2\n")
    os.chmod(f2, 0o000)  # does not stop root; the watch sees the open regardless
    return top, f1, f2


def test_reports_opens_recursively_and_nothing_else(tmp_path: Path) -> None:
    top, f1, f2 = make_tree(tmp_path)
    with OpenWatch([top]) as watch:
        assert watch.opened() == set()
        # stat, lstat, access and readlink open nothing.
        os.stat(f1)
        os.lstat(f2)
        os.access(f2, os.R_OK)
        assert watch.opened() == set()
        os.close(os.open(f2, os.O_RDONLY))
        assert watch.opened() == {str(f2)}
        f1.read_text()
        assert watch.opened() == {str(f1), str(f2)}
    assert watch.opened() == {str(f1), str(f2)}  # still readable after close


def test_reports_a_directory_opened_for_listing(tmp_path: Path) -> None:
    top, _, _ = make_tree(tmp_path)
    with OpenWatch([top]) as watch:
        os.listdir(top / "a")
        assert watch.opened() == {str(top / "a")}


def test_sees_opens_through_a_symlink_and_a_hard_link(tmp_path: Path) -> None:
    top, f1, f2 = make_tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "via-symlink").symlink_to(f1)
    os.link(f2, elsewhere / "via-hardlink")
    with OpenWatch([top]) as watch:
        (elsewhere / "via-symlink").read_text()
        os.close(os.open(elsewhere / "via-hardlink", os.O_RDONLY))
        # The files are watched by inode, so the path used to reach them does not matter.
        assert watch.opened() == {str(f1), str(f2)}


def test_a_single_file_can_be_watched(tmp_path: Path) -> None:
    _, f1, f2 = make_tree(tmp_path)
    with OpenWatch([f1]) as watch:
        f2.read_text()
        assert watch.opened() == set()
        f1.read_text()
        assert watch.opened() == {str(f1)}


def test_sees_an_open_by_another_process(tmp_path: Path) -> None:
    _, f1, _ = make_tree(tmp_path)
    with OpenWatch([f1]) as watch:
        pid = os.fork()
        if pid == 0:
            try:
                os.close(os.open(f1, os.O_RDONLY))
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        assert watch.opened() == {str(f1)}


def test_refuses_symlinks_and_missing_paths(tmp_path: Path) -> None:
    _, f1, _ = make_tree(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(f1)
    with pytest.raises(ValueError):
        OpenWatch([link]).start()
    with pytest.raises(FileNotFoundError):
        OpenWatch([tmp_path / "missing"]).start()


def test_assert_not_opened_names_the_paths(tmp_path: Path) -> None:
    _, f1, _ = make_tree(tmp_path)
    with OpenWatch([f1]) as watch:
        watch.assert_not_opened()
        f1.read_text()
        with pytest.raises(AssertionError, match="one.jsonl"):
            watch.assert_not_opened()


def test_overflow_is_unknown_never_empty(tmp_path: Path) -> None:
    """Lost events must not read as "never opened"."""
    try:
        limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except OSError as e:
        pytest.skip(f"SKIPPED LOUDLY: cannot read max_queued_events: {e}")
    if limit > 200_000:
        pytest.skip(f"SKIPPED LOUDLY: max_queued_events is {limit}; too many opens to overflow it here")
    _, f1, _ = make_tree(tmp_path)
    (f1.parent / "other").write_text("")
    with OpenWatch([f1.parent]) as watch:
        fd = os.open(f1.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            # Alternate two names: inotify merges an event identical to the one before it.
            for i in range(limit + 10):
                os.close(os.open("one.jsonl" if i % 2 else "other", os.O_RDONLY, dir_fd=fd))
        finally:
            os.close(fd)
        with pytest.raises(OpenWatchOverflow):
            watch.opened()
