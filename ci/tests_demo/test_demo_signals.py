"""Clean up on every signal (issue 21, item 3): the demo on the real Pi, held at each step boundary, gets
SIGINT (Ctrl-C typed on its terminal), SIGHUP (its terminal closed) or SIGTERM (`kill`), prints one line,
`interrupted: cleaned up`, exits 128 + the signal's number, and leaves nothing: no shim or engine, no
cgroup, no temporary directory, no socket, no state file. A run killed outright (SIGKILL) is swept by the
next run, by the names it recorded. Needs root and the pinned Pi (MOSAIC_PI_DIR), as `nox -s demo` runs it.

The matrix is 13 boundaries x 3 signals on the real demo, each run stopping at its boundary (the Pi install
is used in place when the engine account can read it, so a clean-up takes about 0.2 s); the last three
(`step-7`, `claude-launched` with the sealed Claude Code running in its cohort, `done`) are the Claude Code
seat's (issue 32).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import demo  # ci/demo.py (conftest.py puts ci/ on the path): its hold points
import pytest
from support import REPO, Tty, ended_within

from mosaic.cgroup_cohort import CohortRef
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.cgroup_cohort.testing import alive
from mosaic.safe_open import ProcessRef

HOW = {"SIGINT": signal.SIGINT, "SIGHUP": signal.SIGHUP, "SIGTERM": signal.SIGTERM}


@pytest.fixture
def state_dir(scratch_repo: Path) -> Path:
    path = scratch_repo / "runs"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture(autouse=True)
def needs() -> None:
    if os.geteuid() != 0:
        pytest.fail("the demo needs root (a cgroup, the engine account); nox -s demo runs as root")
    if not os.environ.get("MOSAIC_PI_DIR"):
        pytest.fail("MOSAIC_PI_DIR is not set (nox -s demo prepares the pinned Pi and sets it)")


def demo_argv(state: Path, transcript: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mosaic.pi_rpc.testing.netns", "--", sys.executable, str(REPO / "ci" / "demo.py"),
            "--state-dir", str(state), "--transcript", str(transcript), *extra]


def env() -> dict[str, str]:
    return {**os.environ, "MOSAIC_REPO": str(REPO), "LC_ALL": "C.UTF-8"}


def recorded(state: Path) -> dict[str, Any]:
    (path,) = state.glob("run-*.json")
    names: dict[str, Any] = json.loads(path.read_text())
    return names


def processes(names: dict[str, Any]) -> list[ProcessRef]:
    """The shim and engine of every cohort the run recorded."""
    out = []
    for raw in names["refs"]:
        ref = CohortRef.from_dict(raw)
        out.append(ref.engine)
        if ref.shim is not None:
            out.append(ref.shim)
    return out


def leftovers(names: dict[str, Any], state: Path, live: list[ProcessRef]) -> list[str]:
    token = names["token"]
    left = [p for p in (f"/tmp/mosaic-demo-{token}", f"/tmp/mosaic-demo-sock-{token}") if os.path.lexists(p)]
    parent = os.path.join(find_cgroup2().mount_point, f"mosaic-demo-{token}")
    if os.path.exists(parent):
        left.append(parent)
    left += [f"state file {p.name}" for p in state.glob("run-*")]
    left += [f"process {p.pid}" for p in live if alive(p)]
    return left


def wait_gone(live: list[ProcessRef], timeout: float = 15.0) -> None:
    """Wait (bounded) for each recorded process that is still alive to end."""
    for member in live:
        if alive(member):
            ended_within(member.pid, timeout)


def signal_it(term: Tty, how: str) -> None:
    if how == "SIGINT":
        term.ctrl_c()
    elif how == "SIGHUP":
        term.hang_up()
    else:
        os.kill(term.pid, signal.SIGTERM)


@pytest.mark.parametrize("point", demo.HOLD_POINTS)
@pytest.mark.parametrize("how", list(HOW))
def test_a_signal_at_each_step_cleans_up_everything_and_says_so(
        how: str, point: str, state_dir: Path, scratch_repo: Path, tty: Callable[..., Tty]) -> None:
    transcript = scratch_repo / "transcript.txt"
    term = tty(demo_argv(state_dir, transcript, "--hold-at", point), env=env(), cwd=str(REPO))
    term.read_until(f"(held at {point})", timeout=120)
    names = recorded(state_dir)
    live = processes(names)
    if point in ("launched", "step-1", "step-2", "step-3", "step-4", "relaunched", "claude-launched"):
        assert any(alive(p) for p in live), f"nothing was running at {point}: {names}"
    signal_it(term, how)
    code = term.finish(timeout=120)
    said = transcript.read_text().splitlines()
    assert code == 128 + HOW[how], (code, term.output[-2000:])
    assert said[-1] == "interrupted: cleaned up", said[-5:]
    if how != "SIGHUP":  # a closed terminal shows nothing; the transcript has the line
        assert term.lines()[-1] == "interrupted: cleaned up", term.lines()[-5:]
        assert "Traceback" not in term.output
    wait_gone(live)
    assert leftovers(names, state_dir, live) == []


def test_a_killed_run_is_swept_by_the_next_run_by_the_names_it_recorded(
        state_dir: Path, scratch_repo: Path, tty: Callable[..., Tty]) -> None:
    first = tty(demo_argv(state_dir, scratch_repo / "first.txt", "--hold-at", "step-3"), env=env(), cwd=str(REPO))
    first.read_until("(held at step-3)", timeout=120)
    names = recorded(state_dir)
    live = processes(names)
    os.kill(first.pid, signal.SIGKILL)
    assert first.finish(timeout=60) == 128 + signal.SIGKILL
    left = leftovers(names, state_dir, live)
    assert f"/tmp/mosaic-demo-{names['token']}" in left and any(x.startswith("process ") for x in left), left
    second = tty(demo_argv(state_dir, scratch_repo / "second.txt", "--hold-at", "start"), env=env(), cwd=str(REPO))
    second.read_until("(held at start)", timeout=120)
    assert (f"swept what an earlier run left when it was killed (pid {names['owner']['pid']}): "
            f"{len(names['refs'])} cohort(s), the parent cgroup, its directories") in second.output
    wait_gone(live)
    assert leftovers(names, state_dir, live) == [f"state file {p.name}" for p in state_dir.glob("run-*")]
    second.ctrl_c()
    assert second.finish(timeout=60) == 130
    assert list(state_dir.glob("run-*")) == []


def test_a_run_going_on_is_never_swept_by_another(
        state_dir: Path, scratch_repo: Path, tty: Callable[..., Tty]) -> None:
    first = tty(demo_argv(state_dir, scratch_repo / "a.txt", "--hold-at", "route"), env=env(), cwd=str(REPO))
    first.read_until("(held at route)", timeout=120)
    names = recorded(state_dir)
    second = tty(demo_argv(state_dir, scratch_repo / "b.txt", "--hold-at", "start"), env=env(), cwd=str(REPO))
    second.read_until("(held at start)", timeout=120)
    assert "swept" not in second.output
    assert os.path.isdir(f"/tmp/mosaic-demo-{names['token']}")
    assert os.path.isdir(os.path.join(find_cgroup2().mount_point, f"mosaic-demo-{names['token']}"))
    for term in (first, second):
        term.ctrl_c()
        assert term.finish(timeout=60) == 130
    assert list(state_dir.glob("run-*")) == []


def test_an_engine_account_with_other_properties_refuses_in_one_line_and_leaves_nothing(
        state_dir: Path, scratch_repo: Path) -> None:
    done = subprocess.run(demo_argv(state_dir, scratch_repo / "t.txt"), capture_output=True, text=True,
                          timeout=120, env={**env(), "MOSAIC_ENGINE_USER": "root"}, cwd=str(REPO))
    assert done.returncode == 1, done
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        "demo: the engine account: the account root exists but is not a system account with no home and no "
        "login shell (uid 0 is not a system uid"), done.stdout
    assert list(state_dir.glob("run-*")) == []  # removed only once everything it recorded was removed


def test_outside_the_namespace_the_demo_refuses_in_one_line(state_dir: Path, scratch_repo: Path) -> None:
    bare = {k: v for k, v in env().items() if k not in ("MOSAIC_NETNS", "MOSAIC_SMOKE_HOST_NET")}
    done = subprocess.run([sys.executable, str(REPO / "ci" / "demo.py"), "--state-dir", str(state_dir)],
                          capture_output=True, text=True, timeout=60, env=bare)
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == ("demo: run it inside the loopback-only namespace: bash ci/main (or python -m "
                           "mosaic.pi_rpc.testing.netns -- python ci/demo.py)\n")



def test_a_claude_install_that_is_not_the_pinned_one_refuses_in_one_line_and_leaves_nothing(
        state_dir: Path, scratch_repo: Path) -> None:
    """Step 7's Claude Code is checked against its pin before anything is launched (issue 32): a directory
    that does not hold Claude Code 2.1.283 refuses in one line, with what to do, and leaves nothing."""
    empty = scratch_repo / "not-claude"
    empty.mkdir()
    done = subprocess.run(demo_argv(state_dir, scratch_repo / "t.txt"), capture_output=True, text=True,
                          timeout=120, env={**env(), "MOSAIC_CLAUDE_DIR": str(empty)}, cwd=str(REPO))
    assert done.returncode == 1, done
    assert "Traceback" not in done.stdout + done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith(f"demo: the Claude Code install in {empty} does not match the pin ("), done.stdout
    assert last.endswith("): bash ci/main installs it again"), last
    assert "launched" not in done.stdout
    assert list(state_dir.glob("run-*")) == []
