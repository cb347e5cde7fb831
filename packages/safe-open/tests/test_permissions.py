"""Permission denied is `unreadable`: on the session file, on a directory inside the approved root, and on
a directory above the root at open_root.

CI runs as root, and mode 000 does not stop root, so each body runs in a forked child that dropped to uid
and gid 65534 (the `run_unprivileged` fixture); it skips loudly if that is impossible. Each case has a
control in the same child that succeeds, so a child that could read nothing would fail the test.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mosaic.safe_open import SafeOpenRefusal, open_root

if TYPE_CHECKING:
    from conftest import Tree

SESSIONS = ".pi/state/seat/sessions"
NAME = "s.jsonl"
Unprivileged = Callable[..., Any]


def outcome(fn: Callable[[], object]) -> str:
    """ "ok" or the refusal code, as a picklable string."""
    try:
        result = fn()
    except SafeOpenRefusal as r:
        return r.code
    close = getattr(result, "close", None)
    if callable(close):
        close()
    elif isinstance(result, int):
        os.close(result)
    return "ok"


def test_permission_denied_on_the_file_is_unreadable(
    tree: Tree, method: str, run_unprivileged: Unprivileged
) -> None:
    (tree.sessions / "locked.jsonl").write_text("{}\n")
    os.chmod(tree.sessions / "locked.jsonl", 0o000)
    os.chmod(tree.session, 0o644)
    root = tree.open(method)  # opened as root, before the drop; the child inherits the fd

    def body() -> dict[str, str]:
        return {
            "control": outcome(lambda: root.open_session_file(SESSIONS, NAME)),
            "locked": outcome(lambda: root.open_session_file(SESSIONS, "locked.jsonl")),
        }

    assert run_unprivileged(body) == {"control": "ok", "locked": "unreadable"}


def test_permission_denied_on_a_directory_inside_the_root_is_unreadable(
    tree: Tree, method: str, run_unprivileged: Unprivileged
) -> None:
    # Two other seats: one whose sessions directory is unreadable (no r, no x), one whose seat directory
    # cannot be searched (no x), so the lookup fails above the sessions directory.
    state = tree.project / ".pi/state"
    for seat in ("a", "b"):
        (state / seat / "sessions").mkdir(parents=True)
        (state / seat / "sessions" / NAME).write_text("{}\n")
    os.chmod(state / "a/sessions", 0o000)
    os.chmod(state / "b", 0o600)
    root = tree.open(method)

    def body() -> dict[str, str]:
        return {
            "control": outcome(lambda: root.open_session_file(SESSIONS, NAME)),
            "control-list": outcome(lambda: root.listdir(SESSIONS)),
            "a-open": outcome(lambda: root.open_session_file(".pi/state/a/sessions", NAME)),
            "a-list": outcome(lambda: root.listdir(".pi/state/a/sessions")),
            "a-dir": outcome(lambda: root.open_dir(".pi/state/a/sessions")),
            "b-open": outcome(lambda: root.open_session_file(".pi/state/b/sessions", NAME)),
            "b-lstat": outcome(lambda: root.lstat(f".pi/state/b/sessions/{NAME}")),
        }

    assert run_unprivileged(body) == {
        "control": "ok",
        "control-list": "ok",
        "a-open": "unreadable",
        "a-list": "unreadable",
        "a-dir": "unreadable",
        "b-open": "unreadable",
        "b-lstat": "unreadable",
    }


def test_permission_denied_above_the_root_is_unreadable_at_open_root(
    tree: Tree, method: str, run_unprivileged: Unprivileged
) -> None:
    """open_root through a directory the caller may not search refuses unreadable.

    pytest's tmp_path sits under a 0700 directory, so the child reaches the test's area through an fd the
    parent opened (/proc/self/fd/N is a link to it) and meets only the directory this test locked."""
    area = tree.base / "area"
    for sub in ("open", "locked"):
        (area / sub / "project").mkdir(parents=True)
    os.chmod(area, 0o755)
    os.chmod(area / "locked", 0o000)
    area_fd = os.open(area, os.O_RDONLY | os.O_DIRECTORY)
    try:

        def body() -> dict[str, str]:
            via = f"/proc/self/fd/{area_fd}"
            m: Any = method
            return {
                "control": outcome(lambda: open_root(f"{via}/open/project", method=m)),
                "locked": outcome(lambda: open_root(f"{via}/locked/project", method=m)),
            }

        assert run_unprivileged(body) == {"control": "ok", "locked": "unreadable"}
    finally:
        os.close(area_fd)
