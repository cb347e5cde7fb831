"""Shared fixtures: the project tree, the resolution method, bounded calls and dropped-uid children.

Every test writes only in pytest's tmp_path (the mount-crossing and magic-link tests open "/", /proc and
/proc/self for reading, and create nothing there). The tree mirrors the seed's layout,
<project>/.pi/state/<seat>/sessions/<name>.jsonl, with an `outside` directory next to the project that
holds decoys: files a correct library must never open (proved with inotify, see OpenWatch).
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mosaic.safe_open import Root, open_root
from mosaic.safe_open.internals import openat2_available, openat2_status

SESSIONS = ".pi/state/seat/sessions"
NAME = "s.jsonl"

RACE_REPORT = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[RACE_REPORT] = []


def pytest_report_header(config: pytest.Config) -> list[str]:
    have = "yes" if openat2_available() else "NO (openat2 tests skip; the walk runs everywhere)"
    return [f"safe-open: this kernel has openat2: {have} [{openat2_status()}]; euid={os.geteuid()}"]


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    lines = config.stash.get(RACE_REPORT, [])
    if lines:
        terminalreporter.section("safe-open swap race")
        for line in lines:
            terminalreporter.write_line(line)


@pytest.fixture
def race_report(request: pytest.FixtureRequest) -> list[str]:
    return request.config.stash[RACE_REPORT]


@pytest.fixture(params=["openat2", "walk"])
def method(request: pytest.FixtureRequest) -> str:
    """The resolution method under test. openat2 skips loudly on a kernel without it."""
    m: str = request.param
    if m == "openat2" and not openat2_available():
        pytest.skip(f"SKIPPED LOUDLY: this kernel lacks openat2 ({openat2_status()}); only the walk ran")
    return m


@dataclass
class Tree:
    base: Path
    project: Path
    sessions: Path
    session: Path
    outside: Path
    decoy: Path
    roots: list[Root] = field(default_factory=list)

    def open(self, method: str, path: Path | None = None) -> Root:
        """open_root(project or `path`) with `method`, asserting that method is what actually runs."""
        root = open_root(path or self.project, method=method)  # type: ignore[arg-type]
        assert root.method == method
        self.roots.append(root)
        return root


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    project = tmp_path / "project"
    sessions = project / SESSIONS
    sessions.mkdir(parents=True)
    session = sessions / NAME
    session.write_text('{"type":"session"}\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    decoy = outside / NAME
    decoy.write_text('{"decoy":true}\n')
    t = Tree(tmp_path, project, sessions, session, outside, decoy)
    yield t
    for root in t.roots:
        root.close()


def call_bounded(fn: Callable[[], Any], timeout: float, unblock: Callable[[], None] | None = None,
                 blocked: Callable[[int], str | None] | None = None) -> Any:
    """Run `fn` in a thread and return its result (or raise its exception) within `timeout` seconds.

    `blocked(tid)`, polled while `fn` runs, looks at the thread (its native id) in the kernel and says why
    it is blocked where the rule forbids it (say, an open waiting for a FIFO's writer): that is the test's
    failure, an assertion naming the rule. A call that merely does not return within `timeout` raises
    TimeoutError: a wait that ran out, which proves no rule (the mutation pass calls it hung). Either way
    `unblock` runs first, so a thread stuck in a blocking open (a mutant that dropped O_NONBLOCK) can
    return and the suite does not hang.
    """
    box: dict[str, Any] = {}
    done = threading.Event()
    started = threading.Event()

    def run() -> None:
        box["tid"] = threading.get_native_id()
        started.set()
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e
        finally:
            done.set()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    started.wait()
    deadline = time.monotonic() + timeout
    why: str | None = None
    while not done.wait(0.002 if blocked is not None else timeout):
        why = blocked(box["tid"]) if blocked is not None else None
        if why is not None or time.monotonic() >= deadline:
            break
    else:
        why = ""  # returned in time
    if why != "":
        if unblock is not None:
            unblock()
        done.wait(timeout)
        if why is not None:
            pytest.fail(why)
        raise TimeoutError(f"call did not return within {timeout} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(name="call_bounded")
def call_bounded_fixture() -> Callable[..., Any]:
    return call_bounded


UNPRIVILEGED = 65534  # nobody/nogroup


def run_unprivileged(fn: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run `fn` where file modes bind: in a forked child that dropped to uid/gid 65534 when we are root
    (mode 000 does not stop root), or in-process otherwise. Returns fn's pickled result; re-raises its
    exception. Skips loudly when the privileges cannot be dropped.

    The child inherits the parent's open fds, so a Root opened before the call is usable in it.
    """
    if os.geteuid() != 0:
        return fn()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        try:
            os.close(r)
            try:
                os.setgroups([])
                os.setresgid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
                os.setresuid(UNPRIVILEGED, UNPRIVILEGED, UNPRIVILEGED)
                payload: tuple[str, Any] = ("ok", fn())
            except PermissionError as e:
                payload = ("cannot-drop", str(e))
            except BaseException as e:
                payload = ("error", e)
            try:
                data = pickle.dumps(payload)
            except Exception as e:
                data = pickle.dumps(("error", RuntimeError(f"unpicklable result: {e!r}")))
            with os.fdopen(w, "wb") as f:
                f.write(data)
        finally:
            os._exit(0)
    os.close(w)
    chunks: list[bytes] = []
    try:
        with os.fdopen(r, "rb") as f:
            while True:
                ready, _, _ = select.select([f], [], [], timeout)
                if not ready:
                    os.kill(pid, signal.SIGKILL)  # the child we forked, by its pid
                    raise TimeoutError(f"unprivileged child {pid} did not answer within {timeout} s")
                chunk = os.read(f.fileno(), 65536)
                if not chunk:
                    break
                chunks.append(chunk)
    finally:
        os.waitpid(pid, 0)
    kind, value = pickle.loads(b"".join(chunks))
    if kind == "cannot-drop":
        pytest.skip(f"SKIPPED LOUDLY: cannot drop to uid {UNPRIVILEGED} to produce EACCES as root: {value}")
    if kind == "error":
        raise value
    return value


@pytest.fixture(name="run_unprivileged")
def run_unprivileged_fixture() -> Callable[..., Any]:
    return run_unprivileged
