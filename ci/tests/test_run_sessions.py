"""The test command's runner (ci/run_sessions.py): the engine sessions one after another beside the package
suites, lint and build, then the mutation pass alone, each session's output whole; the table in the sessions'
order; a failed or skipped session never shown as passed. Driven over a fake `nox` in a scratch copy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO, copy_scripts

sys.path.insert(0, str(REPO / "ci"))
import run_sessions as run_sessions_module  # noqa: E402
import workspace  # noqa: E402

# A stand-in for nox: logs when each session starts and ends, prints three lines with a pause between them
# (so that two sessions run side by side would interleave if their output were streamed), and fails or skips
# the sessions the environment names.
FAKE_NOX = """#!/bin/sh
name="$2"
echo "start $name $(date +%s.%N)" >> "$FAKE_LOG"
if [ -n "$MOSAIC_ENGINE_LANE_LOCK" ]; then
  if flock -n -s "$MOSAIC_ENGINE_LANE_LOCK" true; then held=free; else held=held; fi
  echo "lane-$held $name $(date +%s.%N)" >> "$FAKE_LOG"
  flock -s "$MOSAIC_ENGINE_LANE_LOCK" true
  echo "lane-taken $name $(date +%s.%N)" >> "$FAKE_LOG"
fi
pause=0.1
case " $SLOW " in *" $name "*) pause=0.5;; esac
for i in 1 2 3; do echo "$name line $i"; sleep $pause; done
echo "end $name $(date +%s.%N)" >> "$FAKE_LOG"
case " $FAIL " in *" $name "*) echo "nox > Session $name failed."; exit 1;; esac
case " $SKIP " in *" $name "*) echo "nox > Session $name skipped: no engine here (took 0 seconds)."; exit 0;; esac
echo "nox > Session $name was successful."
"""


def run_sessions(repo: Path, *args: str, fail: str = "", skip: str = "",
                 slow: str = "") -> tuple[subprocess.CompletedProcess[str], list[tuple[str, str]]]:
    copy_scripts(repo, "run_sessions.py", "workspace.py")
    bindir = repo / ".cache" / "tools" / "venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "nox").write_text(FAKE_NOX)
    os.chmod(bindir / "nox", 0o755)
    log = repo / "fake.log"
    env = {**os.environ, "FAKE_LOG": str(log), "FAIL": fail, "SKIP": skip, "SLOW": slow}
    env.pop("MOSAIC_ENGINE_LANE_LOCK", None)
    done = subprocess.run([sys.executable, str(repo / "ci" / "run_sessions.py"), *args], capture_output=True,
                          text=True, timeout=120, env=env)
    events = [(x.split()[0], x.split()[1]) for x in log.read_text().splitlines()] if log.exists() else []
    return done, events


def blocks(stdout: str) -> dict[str, list[str]]:
    """Each session's lines under its header."""
    out: dict[str, list[str]] = {}
    current = None
    for line in stdout.splitlines():
        m = re.match(r"^===== nox -s (\S+)", line)
        if m:
            current = m.group(1)
            out[current] = []
        elif line.startswith("====="):
            current = None
        elif current is not None and line:
            out[current].append(line)
    return out


def table(stdout: str) -> list[list[str]]:
    rows = stdout.split("===== sessions =====\n", 1)[1].splitlines()
    return [r.split() for r in rows if not r.startswith(("total time", "sessions:"))]


def test_two_lanes_the_engine_sessions_one_after_another_beside_the_package_suites_then_mutants(
        scratch_repo: Path) -> None:
    done, events = run_sessions(scratch_repo, "--jobs", "2")
    assert done.returncode == 0, done
    together = set(workspace.PACKAGES) | {"lint", "build"}
    engine = ["cohort", "smoke", "claude-smoke", "bench", "demo"]
    running: set[str] = set()
    started_so_far: set[str] = set()
    most = 0
    beside_engine = False
    for kind, name in events:
        if kind == "start":
            running.add(name)
            started_so_far.add(name)
            # The sessions that share the cgroup tree, the real Pi or the user manager never run at once;
            # mutants starts only once every package suite, lint and build has started.
            assert len(running & set(engine)) <= 1, running
            assert name != "mutants" or together <= started_so_far, started_so_far
            beside_engine = beside_engine or bool(running & set(engine) and running & together)
            most = max(most, len(running))
        elif kind == "end":
            running.discard(name)
    # Only the mutation pass is told of the engine lane's lock (here the lane had ended: the lock was free).
    assert [(k, n) for k, n in events if k.startswith("lane-")] == [("lane-free", "mutants"), ("lane-taken", "mutants")]
    assert most == 2 and beside_engine  # two lanes, never more than the jobs asked for
    started = [n for k, n in events if k == "start"]
    assert [n for n in started if n in engine] == engine and started[-1] == "mutants"
    printed = blocks(done.stdout)
    for name in [*workspace.PACKAGES, "lint", "build", "mutants", *engine]:
        # whole: a session's lines together under its own header, never another's between them
        assert printed[name][:3] == [f"{name} line 1", f"{name} line 2", f"{name} line 3"], (name, printed[name])
    assert [row[0] for row in table(done.stdout)] == [*workspace.PACKAGES, "lint", "build", "mutants", *engine]
    total = len(workspace.PACKAGES) + 3 + len(engine)  # the package suites, lint, build, mutants, the engine lane
    assert done.stdout.splitlines()[-1] == f"sessions: {total} passed, 0 failed, 0 skipped"


def test_mutants_starts_beside_the_engine_lane_and_its_lock_is_held_until_the_lane_has_ended(
        scratch_repo: Path) -> None:
    """The mutation pass starts on the worker lint frees while the engine lane still runs; the lane's lock file,
    named to the pass alone, is held then, and the pass can take it only after the lane's last session ended."""
    done, events = run_sessions(scratch_repo, "--jobs", "2", "lint", "mutants", "cohort", "smoke", slow="cohort smoke")
    assert done.returncode == 0, done
    when = {(k, n): i for i, (k, n) in enumerate(events)}
    assert when["start", "mutants"] < when["end", "cohort"]  # beside the engine lane
    assert ("lane-held", "mutants") in when and ("lane-free", "mutants") not in when
    assert when["lane-taken", "mutants"] > when["end", "smoke"]  # only once the lane's last session ended
    assert done.stdout.splitlines()[-1] == "sessions: 4 passed, 0 failed, 0 skipped"


def test_a_failed_and_a_skipped_session_side_by_side_are_never_shown_passed(scratch_repo: Path) -> None:
    done, _ = run_sessions(scratch_repo, "lint", "safe-open", "smoke", fail="lint", skip="safe-open smoke")
    assert done.returncode == 1
    rows = {row[0]: row for row in table(done.stdout)}
    assert rows["lint"][1] == "failed" and rows["lint"][3:] == ["nox", "exit", "1"]
    assert rows["safe-open"][1] == "skipped" and " ".join(rows["safe-open"][3:]) == "no engine here"
    assert rows["smoke"][1] == "skipped"
    assert done.stdout.splitlines()[-1] == "sessions: 0 passed, 1 failed, 2 skipped"


def test_jobs_1_runs_every_session_one_after_another_in_the_order_given(scratch_repo: Path) -> None:
    done, events = run_sessions(scratch_repo, "--jobs", "1", "lint", "safe-open", "pi-format")
    assert done.returncode == 0, done
    assert events == [("start", "lint"), ("end", "lint"), ("start", "safe-open"), ("end", "safe-open"),
                      ("start", "pi-format"), ("end", "pi-format")]
    assert "side by side" not in done.stdout


def test_jobs_must_be_a_whole_number(scratch_repo: Path) -> None:
    done, events = run_sessions(scratch_repo, "--jobs", "0", "lint")
    assert done.returncode != 0 and events == []
    assert "--jobs needs a whole number of at least 1, not '0'" in done.stderr
    assert "Traceback" not in done.stderr


# Issue 26, item 1: the test command works on a machine whose only nox and uv are the tool venv's.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def test_the_session_list_runs_with_only_the_system_directories_on_path(scratch_repo: Path) -> None:
    """Every session of the list is started (nox by its path in the tool venv), with no nox or uv on PATH."""
    copy_scripts(scratch_repo, "run_sessions.py", "workspace.py")
    bindir = scratch_repo / ".cache" / "tools" / "venv" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "nox").write_text(FAKE_NOX)
    os.chmod(bindir / "nox", 0o755)
    log = scratch_repo / "fake.log"
    env = {**os.environ, "PATH": SYSTEM_PATH, "FAKE_LOG": str(log), "FAIL": "", "SKIP": ""}
    done = subprocess.run([sys.executable, str(scratch_repo / "ci" / "run_sessions.py"), "--jobs", "1"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done
    started = [x.split()[1] for x in log.read_text().splitlines() if x.startswith("start ")]
    assert started == run_sessions_module.SESSIONS


def test_the_session_list_is_the_noxfiles_as_the_tool_venvs_nox_reads_it_with_only_the_system_path() -> None:
    """`nox --list` from the tool venv with only the system directories on PATH: the noxfile loads, and its
    sessions are exactly the test command's list (none left out, none unknown)."""
    nox = workspace.TOOLS_BIN / "nox"
    if not os.access(nox, os.X_OK):
        pytest.fail(f"no nox in the tool venv {nox.parent}: run bash ci/bootstrap first")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV") and not k.startswith("NOX_")}
    env["PATH"] = SYSTEM_PATH
    done = subprocess.run([str(nox), "-f", str(REPO / "noxfile.py"), "--list"], capture_output=True,
                          text=True, timeout=120, env=env, cwd=REPO)
    assert done.returncode == 0, done
    # "* name -> doc" for the sessions plain `nox` selects, "- name -> doc" for the others
    listed = [m.group(1) for m in re.finditer(r"^[*-] (\S+) -> ", done.stdout, re.M)]
    assert sorted(listed) == sorted(run_sessions_module.SESSIONS), done.stdout
