"""The mutation pass counts a kill only when a named test failed on an assertion raised in the suite's own code
(or on the mutant's declared signal): an assert in the product, or an exception the code raised, is "crashed";
a wait that ran out (a TimeoutError, or the AssertionError a harness raised in its place) is "hung"; neither is
a kill (issue 26, item 3). And the pass runs on a machine whose only uv is the tool venv's (item 1)."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import mutants  # noqa: E402


def _signals(tmp_path: pathlib.Path, *rows: dict[str, object]) -> pathlib.Path:
    path = tmp_path / "signals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(**kw: object) -> dict[str, object]:
    """A failure as the plugin records it: by default a test's own assertion, in its call phase."""
    return {"nodeid": "t::a", "when": "call", "type": "builtins.AssertionError", "assertion": True,
            "raised_at": "/s/tests/test_a.py:3 test_a", "in_suite": True, "timeout": False, **kw}


def test_an_assertion_in_the_suites_code_in_the_call_phase_is_a_kill(tmp_path: pathlib.Path) -> None:
    assert mutants.classify(_signals(tmp_path, _row()), ()) == ("killed", "")


def test_pytest_raises_that_saw_nothing_is_a_kill(tmp_path: pathlib.Path) -> None:
    assert mutants.classify(_signals(tmp_path, _row(type="builtins.Failed")), ())[0] == "killed"


def test_an_assert_in_the_product_is_crashed_never_a_kill(tmp_path: pathlib.Path) -> None:
    """Issue 26, item 3: the O5 row deleted from OVERLAP_SIGNALS failed only the product's own `assert
    signal in OVERLAP_SIGNALS`."""
    f = _signals(tmp_path, _row(in_suite=False, raised_at="/s/src/mosaic/controller/_core_engine.py:146 overlap"))
    result, detail = mutants.classify(f, ())
    assert result == "CRASHED" and "an assertion outside the suite" in detail and "_core_engine.py:146" in detail


def test_a_harness_wait_that_turned_its_timeout_into_an_assertion_is_hung_never_a_kill(
        tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, _row(timeout=True))
    result, detail = mutants.classify(f, ())
    assert result == "HUNG" and "a wait ran out" in detail


def test_a_timeout_error_is_hung(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, _row(type="builtins.TimeoutError", assertion=False, timeout=True))
    assert mutants.classify(f, ())[0] == "HUNG"


def test_another_exception_is_crashed_not_killed(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, _row(type="mosaic.pi_rpc._link.LinkPoisoned", assertion=False, in_suite=False))
    result, detail = mutants.classify(f, ())
    assert result == "CRASHED" and "LinkPoisoned" in detail


def test_one_test_assertion_among_other_failures_is_a_kill(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, _row(nodeid="t::b", timeout=True), _row(in_suite=False), _row())
    assert mutants.classify(f, ())[0] == "killed"


def test_a_declared_signal_is_a_kill_and_says_so(tmp_path: pathlib.Path) -> None:
    f = _signals(tmp_path, _row(type="builtins.ValueError", assertion=False, in_suite=False))
    result, detail = mutants.classify(f, ("builtins.ValueError",))
    assert result == "killed" and detail.startswith("by its declared signal builtins.ValueError")
    assert mutants.classify(f, ())[0] == "CRASHED"


def test_a_failure_in_setup_is_not_a_kill(tmp_path: pathlib.Path) -> None:
    assert mutants.classify(_signals(tmp_path, _row(when="setup")), ())[0] == "CRASHED"


def test_no_recorded_failure_is_not_a_kill(tmp_path: pathlib.Path) -> None:
    assert mutants.classify(tmp_path / "absent.jsonl", ()) == ("CRASHED", "pytest failed but recorded no failed test")


def test_the_signal_header_is_parsed(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "m.patch"
    p.write_text("# mutant: x\n# brief: -\n# package: pi-rpc\n# killed-by: tests/test_a.py::t\n"
                 "# signal: builtins.TimeoutError\ndiff --git a/x b/x\n")
    assert mutants.parse(p).signals == ("builtins.TimeoutError",)


def test_the_plugin_records_the_raising_frame_and_a_timeout_behind_an_assertion(tmp_path: pathlib.Path) -> None:
    """The plugin itself, in a pytest run of failing tests whose rootdir is their suite's directory: an assert
    and a `pytest.raises` that saw nothing in the test (its frame, not pytest's), an assert in a module outside
    the suite (the product), a wait that catches its TimeoutError and raises AssertionError, a TimeoutError."""
    suite = tmp_path / "tests"
    suite.mkdir()
    product = tmp_path / "product"
    product.mkdir()
    (product / "prod.py").write_text("def check(x):\n    assert x in ('O1',)\n")
    (suite / "test_x.py").write_text(
        "import sys, pytest\n"
        f"sys.path.insert(0, {str(product)!r})\n"
        "import prod\n"
        "def test_assert():\n    assert 1 == 2\n"
        "def test_raises():\n    with pytest.raises(KeyError):\n        pass\n"
        "def test_product_assert():\n    prod.check('O5')\n"
        "def wait():\n    try:\n        raise TimeoutError('no')\n    except TimeoutError:\n"
        "        raise AssertionError('never came') from None\n"
        "def test_wait():\n    wait()\n"
        "def test_timeout():\n    raise TimeoutError('no')\n")
    out = tmp_path / "signals.jsonl"
    env = {**os.environ, "MOSAIC_MUTANT_SIGNALS": str(out),
           "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutant_signal",
                           "--rootdir", str(suite), str(suite / "test_x.py")], env=env, capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["nodeid"].split("::")[-1]: r for r in map(json.loads, out.read_text().splitlines())}
    assert rows["test_assert"]["assertion"] and rows["test_assert"]["in_suite"] and not rows["test_assert"]["timeout"]
    assert rows["test_assert"]["raised_at"] == f"{suite / 'test_x.py'}:5 test_assert"
    assert rows["test_raises"]["assertion"] and rows["test_raises"]["in_suite"]
    assert rows["test_raises"]["raised_at"].endswith("test_x.py:7 test_raises")  # not inside pytest
    assert rows["test_product_assert"]["assertion"] and not rows["test_product_assert"]["in_suite"]
    assert rows["test_product_assert"]["raised_at"] == f"{product / 'prod.py'}:2 check"
    assert rows["test_wait"]["assertion"] and rows["test_wait"]["in_suite"] and rows["test_wait"]["timeout"]
    assert rows["test_timeout"]["type"] == "builtins.TimeoutError" and rows["test_timeout"]["timeout"]
    judged = {}
    for name, row in rows.items():
        (tmp_path / name).mkdir()
        judged[name] = mutants.classify(_signals(tmp_path / name, row), ())[0]
    assert judged == {"test_assert": "killed", "test_raises": "killed", "test_product_assert": "CRASHED",
                      "test_wait": "HUNG", "test_timeout": "HUNG"}


def test_a_run_killed_at_its_bound_names_the_test_it_hung_in(tmp_path: pathlib.Path) -> None:
    """A stop's CI failed on one hung mutant and its log could not say where: the plugin keeps the test under
    way beside the signals file, which a run killed mid-test leaves naming that test, and dumps every thread's
    stack 5 s before the run's bound."""
    suite = tmp_path / "tests"
    suite.mkdir()
    (suite / "test_h.py").write_text("import time\ndef test_quick():\n    pass\n"
                                     "def test_stuck():\n    time.sleep(60)\n")
    out = tmp_path / "signals.jsonl"
    env = {**os.environ, "MOSAIC_MUTANT_SIGNALS": str(out), "MOSAIC_MUTANT_BOUND": "9",
           "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1])}
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutant_signal",
                               "--rootdir", str(suite), str(suite / "test_h.py")], env=env, capture_output=True,
                              text=True, cwd=tmp_path, timeout=10)
    except subprocess.TimeoutExpired:
        pass
    else:
        pytest.fail(f"the run ended before it was killed: {done.returncode}\n{done.stdout}{done.stderr}")
    assert pathlib.Path(f"{out}.running").read_text() == "test_h.py::test_stuck"
    stacks = pathlib.Path(f"{out}.stacks").read_text()  # dumped 5 s before the bound: 4 s in
    assert 'test_h.py", line 5 in test_stuck' in stacks, stacks


def test_in_a_mutated_run_hypothesis_neither_shrinks_nor_explains(tmp_path: pathlib.Path) -> None:
    """The plugin loads a Hypothesis profile without the shrink and explain phases in a mutated run only
    (MOSAIC_MUTANT_SIGNALS set), before the test modules are imported, so a property test's own @settings
    inherits it; a baseline run (no signals file) keeps Hypothesis's defaults."""
    suite = tmp_path / "tests"
    suite.mkdir()
    (suite / "test_h.py").write_text(
        "from hypothesis import Phase, given, settings, strategies as st\n"
        "@settings(max_examples=5, database=None)\n"
        "@given(st.integers())\n"
        "def test_phases(n):\n"
        "    assert Phase.shrink not in settings().phases and Phase.explain not in settings().phases\n"
        "    assert Phase.generate in settings().phases\n")
    ci = str(pathlib.Path(__file__).resolve().parents[1])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mutant_signal", "--rootdir",
            str(suite), str(suite / "test_h.py")]
    base = {k: v for k, v in os.environ.items() if k != "MOSAIC_MUTANT_SIGNALS"}
    mutated = subprocess.run(argv, env={**base, "PYTHONPATH": ci, "MOSAIC_MUTANT_SIGNALS": str(tmp_path / "s.jsonl")},
                             capture_output=True, text=True, cwd=tmp_path)
    assert mutated.returncode == 0, mutated.stdout + mutated.stderr
    baseline = subprocess.run(argv, env={**base, "PYTHONPATH": ci}, capture_output=True, text=True, cwd=tmp_path)
    assert baseline.returncode == 1, baseline.stdout + baseline.stderr  # the defaults shrink


def test_a_mutated_runs_failed_compare_is_a_kill_at_once_on_a_ci_machine_where_pytest_would_diff_it(
        tmp_path: pathlib.Path) -> None:
    """Stop 40's CI hung a mutant at its bound twice: with `CI` set, pytest explains a failed `==` of two long
    sequences by a difflib diff (minutes for these 5,000 lines: 3,000 took over 38 s of CPU here). A mutated
    run's asserts are plain (`pytest_argv`), so the same failure is a kill in about a second; the baseline's
    arguments keep pytest's explanation (a run of them is still explaining after 8 s)."""
    pkg = tmp_path / "pkg"
    (pkg / "tests").mkdir(parents=True)
    (pkg / "tests" / "test_c.py").write_text(
        "def test_compare():\n"
        "    got = [f'entry {i} of the page' for i in range(5000)]\n"
        "    assert got == [f'entry {i} of the page!' for i in range(5000)]\n")
    signals = tmp_path / "signals.jsonl"
    env = {**os.environ, "CI": "1", "PYTHONPATH": str(pathlib.Path(__file__).resolve().parents[1]),
           "MOSAIC_MUTANT_SIGNALS": str(signals)}
    killer = ["tests/test_c.py::test_compare"]
    done = subprocess.run([sys.executable, "-m", "pytest", *mutants.pytest_argv(pkg, killer, mutated=True)],
                          env=env, capture_output=True, text=True, cwd=pkg, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert mutants.classify(signals, ()) == ("killed", "")
    assert "--assert=plain" not in mutants.pytest_argv(pkg, killer, mutated=False)
    signals.unlink()
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-m", "pytest", *mutants.pytest_argv(pkg, killer, mutated=False)],
                       env=env, capture_output=True, text=True, cwd=pkg, timeout=8)


def test_jobs_are_read_from_the_arguments_and_the_rest_are_mutant_names() -> None:
    assert mutants._jobs(["--jobs", "3", "a-mutant"]) == (3, ["a-mutant"])
    assert mutants._jobs(["--jobs=1", "b"]) == (1, ["b"])
    assert mutants._jobs(["--jobs", "0"]) == (1, [])  # at least one copy
    default, rest = mutants._jobs(["c"])
    assert 1 <= default <= 2 and rest == ["c"]


def test_the_cohort_suites_mutants_run_one_at_a_time() -> None:
    assert "tests_cohort" in mutants.SERIAL_SUITES


def test_a_mutant_may_name_killers_in_two_suites_each_run_on_its_own_and_one_in_the_cohort_suite_runs_alone(
        ) -> None:
    """Issue 31: a fast killer in tests/ beside the kernel's in tests_cohort/. Each suite's killers run in one
    pytest of their own (the suite is its rootdir); one kernel killer makes the mutant serial."""
    m = mutants.Mutant(pathlib.Path("x.patch"), "w", "-", "controller",
                       ["tests_cohort/test_a.py::test_k", "tests/test_b.py::test_f", "tests/test_c.py::test_g"])
    assert m.suites == ["tests", "tests_cohort"] and m.serial
    assert m.killers_in("tests") == ["tests/test_b.py::test_f", "tests/test_c.py::test_g"]
    assert not mutants.Mutant(pathlib.Path("y.patch"), "w", "-", "controller", ["tests/test_b.py::t"]).serial


class _FakeScratch:
    """A scratch copy whose patches apply and whose pytest records each run (copy, package, suite, baseline or
    mutant, start, end) and how many cohort-suite runs were under way at once: a baseline passes, a mutated run
    is killed by a test's assertion. A cohort suite's run takes longer than a unit suite's."""

    lock = threading.Lock()

    def __init__(self, name: str, runs: list[tuple[str, str, str, str, float, float]], fail: set[str],
                 tmp: pathlib.Path, cohort_now: list[int]) -> None:
        self.name, self.runs, self.fail, self.cohort_now = name, runs, fail, cohort_now
        self.dir = tmp / name
        self.dir.mkdir(parents=True, exist_ok=True)

    def patch(self, mutant: object, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 0, "", "")

    def pytest(self, package: str, killed_by: list[str], signals_file: pathlib.Path | None = None,
               timeout: float = mutants.TEST_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        suite = mutants.suite_of(killed_by[0])
        cohort = suite in mutants.SERIAL_SUITES
        with self.lock:
            if cohort:
                self.cohort_now[0] += 1
                self.cohort_now[1] = max(self.cohort_now[1], self.cohort_now[0])
        start = time.monotonic()
        time.sleep(0.15 if cohort else 0.03)
        end = time.monotonic()
        with self.lock:
            if cohort:
                self.cohort_now[0] -= 1
            self.runs.append((self.name, package, suite, "base" if signals_file is None else "mutant", start, end))
        if signals_file is None:
            return subprocess.CompletedProcess([], 1 if package in self.fail else 0, "", "")
        signals_file.write_text(json.dumps(_row()) + "\n")
        return subprocess.CompletedProcess([], 1, "", "")


def _mutant_set() -> list[mutants.Mutant]:
    return [mutants.Mutant(pathlib.Path(f"{i}.patch"), "w", "-", pkg, killers) for i, (pkg, killers) in enumerate([
        ("controller", ["tests/test_a.py::t1", "tests_cohort/test_k.py::k1"]),
        ("cgroup-cohort", ["tests_cohort/test_c.py::c"]),
        *[(pkg, [f"tests/test_{i}.py::t"]) for i, pkg in enumerate(
            ["controller", "pi-format", "safe-open", "writer-claim", "claude-rpc", "pi-rpc", "chat-pages"] * 3)],
    ])]


def _copies(tmp: pathlib.Path, runs: list[tuple[str, str, str, str, float, float]],
            fail: set[str] | None = None) -> tuple[list[_FakeScratch], list[int]]:
    cohort_now = [0, 0]  # under way now, the most at once
    return [_FakeScratch("first", runs, fail or set(), tmp, cohort_now),
            _FakeScratch("second", runs, fail or set(), tmp, cohort_now)], cohort_now


def test_the_unit_suites_baselines_are_shared_out_among_the_copies_and_a_failing_one_is_reported(
        tmp_path: pathlib.Path) -> None:
    """Issue 34: each unit package suite's baseline runs once, on every copy at once (each copy makes the venvs
    it will need); a suite whose named tests fail on the unpatched tree is reported failed. No cohort suite
    runs here: its baseline is the first step of its line (the next test)."""
    runs: list[tuple[str, str, str, str, float, float]] = []
    copies, _ = _copies(tmp_path, runs, {"safe-open"})
    got = {k: b.ok for k, b in mutants._baselines(_mutant_set(), copies).items()}  # type: ignore[arg-type]
    assert got == {("controller", "tests"): True, ("pi-format", "tests"): True, ("safe-open", "tests"): False,
                   ("writer-claim", "tests"): True, ("claude-rpc", "tests"): True, ("pi-rpc", "tests"): True,
                   ("chat-pages", "tests"): True}
    assert sorted((p, s) for _, p, s, *_ in runs) == sorted(got)  # each once
    assert {name for name, *_ in runs} == {"first", "second"}


def test_the_cohort_line_runs_on_the_first_copy_one_at_a_time_its_baseline_first_beside_the_unit_mutants(
        tmp_path: pathlib.Path) -> None:
    """Two labs never share the machine's cgroup tree: every cohort-suite run (baseline or mutant) is on the
    first copy, never two at once, each suite's baseline before its mutants. The second copy goes on with the
    unit suites' mutants beside the line, instead of idling while it runs after them (stop 40)."""
    runs: list[tuple[str, str, str, str, float, float]] = []
    copies, cohort_now = _copies(tmp_path, runs)
    ms = _mutant_set()
    base = mutants._baselines(ms, copies)  # type: ignore[arg-type]
    del runs[:]
    outcomes = mutants._run_all(ms, copies, base)  # type: ignore[arg-type]
    assert {m.stem for m in ms} == set(outcomes) and all(o.result == "killed" for o in outcomes.values())
    cohort = [r for r in runs if r[2] == "tests_cohort"]
    assert cohort and {r[0] for r in cohort} == {"first"} and cohort_now[1] == 1
    for package in ("controller", "cgroup-cohort"):
        kinds = [r[3] for r in sorted(cohort, key=lambda r: r[4]) if r[1] == package]
        assert kinds == ["base", "mutant"], (package, kinds)
    beside = [r for r in runs if r[0] == "second" and any(c[4] < r[5] and r[4] < c[5] for c in cohort)]
    assert beside, "no unit mutant ran beside the cohort line"
    assert base[("controller", "tests_cohort")].ok and base[("cgroup-cohort", "tests_cohort")].ok


def test_beside_the_engine_lane_only_the_first_copy_works_and_no_cohort_suite_runs_until_the_lane_ends(
        tmp_path: pathlib.Path) -> None:
    """Issue 34 (bash ci/test within 12 minutes): while the runner holds the engine lane's lock, the baselines and
    mutants run on the first copy alone and no cohort suite runs; once it lets go, the second copy joins and the
    cohort line runs, one at a time, on the first copy."""
    import fcntl

    lock = tmp_path / "engine-lane.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    ms = _mutant_set()
    runs: list[tuple[str, str, str, str, float, float]] = []
    copies, cohort_now = _copies(tmp_path, runs)
    gate = mutants.LaneGate(str(lock))
    got: dict[str, mutants.Outcome] = {}

    def the_pass() -> None:
        got.update(mutants._run_all(ms, copies, mutants._baselines(ms, copies, gate), gate))  # type: ignore[arg-type]

    worker = threading.Thread(target=the_pass)
    worker.start()
    time.sleep(0.5)  # the first copy has run the unit baselines and some unit mutants (0.03 s each) by now
    while_held = list(runs)
    assert not gate.is_open and worker.is_alive()
    assert {r[0] for r in while_held} == {"first"} and len(while_held) >= 3
    assert all(r[2] == "tests" for r in while_held)
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    worker.join(20)
    assert gate.is_open and not worker.is_alive() and len(got) == len(ms)
    assert all(o.result == "killed" for o in got.values())
    cohort = [r for r in runs if r[2] == "tests_cohort"]
    assert len(cohort) == 4 and {r[0] for r in cohort} == {"first"} and cohort_now[1] == 1
    assert "second" in {r[0] for r in runs[len(while_held):]}


def test_a_mutated_runs_bound_grows_with_its_suites_baseline_and_never_passes_the_ceiling() -> None:
    """A stop's CI lost 600 s to one hung run: a mutated run is bounded by its suite's baseline on this machine
    (floor plus a multiple), at most TEST_TIMEOUT_S; a suite whose baseline failed gets the ceiling."""
    assert mutants.Baseline(True, 10.0).bound() == mutants.HANG_FLOOR_S + 10.0 * mutants.HANG_FACTOR
    assert mutants.Baseline(True, 0.0).bound() == mutants.HANG_FLOOR_S
    assert mutants.Baseline(True, 10_000.0).bound() == mutants.TEST_TIMEOUT_S
    assert mutants.Baseline(False, 1.0).bound() == mutants.TEST_TIMEOUT_S
    assert mutants.Baseline(True, 24.0).bound() < mutants.TEST_TIMEOUT_S / 2  # the slowest suite's, today


class _ScriptedScratch:
    """A scratch copy whose patches always apply and whose mutated runs answer from a script, in order: "hang"
    (the run passed its bound), "wait" (a harness wait ran out), "kill" (a test's assertion), "crash" (an exception
    the code raised), "pass"."""

    def __init__(self, tmp_path: pathlib.Path, script: list[str]) -> None:
        self.dir, self.script = tmp_path, list(script)
        self.bounds: list[float] = []

    def patch(self, mutant: object, **kw: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess([], 0, "", "")

    def pytest(self, package: str, killed_by: list[str], signals_file: pathlib.Path | None = None,
               timeout: float = mutants.TEST_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        assert signals_file is not None  # every baseline passed: only mutated runs
        self.bounds.append(timeout)
        step = self.script.pop(0)
        if step == "hang":  # what the plugin leaves of a run killed at its bound
            pathlib.Path(f"{signals_file}.running").write_text("tests/test_a.py::test_a")
            pathlib.Path(f"{signals_file}.stacks").write_text('File "x.py", line 1 in stuck_here')
            return subprocess.CompletedProcess([], mutants.TIMED_OUT, "still waiting", "")
        if step == "pass":
            return subprocess.CompletedProcess([], 0, "", "")
        row = _row() if step == "kill" else _row(type="builtins.TimeoutError", assertion=False, timeout=True)
        if step == "crash":
            row = _row(type="builtins.KeyError", assertion=False)
        with open(signals_file, "a") as out:  # as the plugin writes
            out.write(json.dumps(row) + "\n")
        return subprocess.CompletedProcess([], 1, "", "")


@pytest.mark.parametrize(("script", "result", "runs"), [
    (["kill"], "killed", 1),
    (["hang", "kill"], "killed", 2),
    (["wait", "kill"], "killed", 2),
    (["hang", "hang"], "HUNG", 2),
    (["hang", "pass"], "SURVIVED", 2),
    (["wait", "crash"], "CRASHED", 2),  # the first run's wait is not read again as the second's
    (["pass"], "SURVIVED", 1),
])
def test_a_hung_mutant_runs_once_more_and_the_second_run_decides(
        tmp_path: pathlib.Path, script: list[str], result: str, runs: int) -> None:
    """A hang asserts nothing either way: the mutant runs again from the start, once; a kill still needs a named
    test's assertion, the hang is named in the detail, and each run is bounded by its suite's baseline."""
    scratch = _ScriptedScratch(tmp_path, script)
    m = mutants.Mutant(pathlib.Path("m.patch"), "w", "-", "pi-rpc", ["tests/test_a.py::test_a"])
    base = mutants.Baseline(True, 5.0)
    out = mutants.run_mutant(scratch, m, {"tests": base})  # type: ignore[arg-type]
    assert (out.result, out.runs) == (result, runs) and not scratch.script
    assert scratch.bounds == [base.bound()] * runs
    assert ("the first run hung" in out.detail) == (runs == 2)
    assert not out.by_signal
    if script[-1] == "hang":  # the test it was in, and where it waited
        assert "bound, 140s, in tests/test_a.py::test_a" in out.detail and "line 1 in stuck_here" in out.detail
    if script == ["hang", "kill"]:
        assert "in tests/test_a.py::test_a" in out.detail  # the first hang's line names its test


def test_under_the_table_each_mutant_not_killed_is_named_with_why_and_each_second_run_kill_too(
        capsys: pytest.CaptureFixture[str]) -> None:
    """CI shows the end of a long log: why a mutant was not killed must be there, not only in its line."""
    def m(stem: str) -> mutants.Mutant:
        return mutants.Mutant(pathlib.Path(f"{stem}.patch"), "w", "-", "pi-rpc", ["tests/t.py::t"])
    mutants.report_after_the_table([
        (m("a"), mutants.Outcome("killed", "", 1.0)),
        (m("b"), mutants.Outcome("HUNG", "hung, not killed: the named tests ran past their bound, 140s\nTAIL", 280.0, runs=2)),
        (m("c"), mutants.Outcome("killed", "the first run hung (x), so it ran again", 3.0, runs=2)),
    ])
    out = capsys.readouterr().out
    assert "NOT KILLED: b (pi-rpc): HUNG\nhung, not killed: the named tests ran past their bound, 140s\nTAIL" in out
    assert "killed on a second run: c (pi-rpc): the first run hung (x), so it ran again" in out
    assert " a (" not in out


def test_without_a_lane_lock_every_copy_starts_at_once() -> None:
    assert mutants.LaneGate(None).is_open and mutants.OPEN.is_open


# Issue 26, item 1: the pass makes its venvs with the tool venv's uv by its path (nox puts only the session's
# venv on PATH, and ci/bootstrap's uv lives in .cache/tools/venv), or with the venv module and pip where there
# is no uv at all; never `uv` by bare name. Each run below has only the system directories on PATH.
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
REPO = pathlib.Path(__file__).resolve().parents[2]
CHEAP_MUTANT = "safe-open--size-limit-off-by-one"  # one safe-open test of a few milliseconds


def _path_without_uv(tmp: pathlib.Path) -> str:
    """The system directories, or (on a machine with a uv of its own there) a directory holding only the
    `patch` the pass runs, so that the no-uv case is what is tested either way."""
    if shutil.which("uv", path=SYSTEM_PATH) is None:
        return SYSTEM_PATH
    bindir = tmp / "bin"
    bindir.mkdir()
    patch = shutil.which("patch", path=SYSTEM_PATH)
    assert patch is not None, "the mutation pass needs patch(1) (ci/bootstrap installs it)"
    (bindir / "patch").symlink_to(patch)
    return str(bindir)


@pytest.mark.parametrize("uv", ["tool-venv", "none"])
def test_the_pass_runs_a_mutant_with_only_the_system_directories_on_path(scratch_repo: pathlib.Path,
                                                                          uv: str) -> None:
    """A checkout-shaped copy holding the pass, safe-open and one of its mutants: with the tool venv's uv
    (linked into the copy's .cache/tools/venv) and with none anywhere, the pass makes its venv, installs the
    package and kills the mutant."""
    for name in ("mutants.py", "workspace.py", "mutant_signal.py", "pytest_forkserver.py"):
        shutil.copy(REPO / "ci" / name, scratch_repo / "ci" / name)
    shutil.copytree(REPO / "packages" / "safe-open", scratch_repo / "packages" / "safe-open",
                    ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    (scratch_repo / "mutants").mkdir()
    shutil.copy(REPO / "mutants" / f"{CHEAP_MUTANT}.patch", scratch_repo / "mutants")
    path = SYSTEM_PATH
    if uv == "tool-venv":
        real = REPO / ".cache" / "tools" / "venv" / "bin" / "uv"
        if not os.access(real, os.X_OK):
            pytest.fail(f"no uv in the tool venv {real.parent}: run bash ci/bootstrap first")
        bindir = scratch_repo / ".cache" / "tools" / "venv" / "bin"
        bindir.mkdir(parents=True)
        (bindir / "uv").symlink_to(real.resolve())
        said = f"venvs made with {bindir / 'uv'}"
    else:
        path = _path_without_uv(scratch_repo)
        said = "venvs made with the venv module and pip (no uv in the tool venv or on PATH)"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV")}
    env["PATH"] = path
    done = subprocess.run([sys.executable, str(scratch_repo / "ci" / "mutants.py"), CHEAP_MUTANT],
                          capture_output=True, text=True, timeout=600, env=env, cwd=scratch_repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert said in done.stdout.splitlines()[0], done.stdout
    assert done.stdout.splitlines()[-1].startswith("mutants: 1 killed"), done.stdout


def test_nox_s_mutants_runs_with_only_the_system_directories_on_path(tmp_path: pathlib.Path) -> None:
    """The session itself, as `bash ci/test` runs it: the tool venv's nox, no uv on PATH, one mutant."""
    nox = REPO / ".cache" / "tools" / "venv" / "bin" / "nox"
    if not os.access(nox, os.X_OK):
        pytest.fail(f"no nox in the tool venv {nox.parent}: run bash ci/bootstrap first")
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "UV") and not k.startswith("NOX_")}
    env["PATH"] = SYSTEM_PATH
    done = subprocess.run([str(nox), "-f", str(REPO / "noxfile.py"), "--envdir", str(tmp_path / "nox"),
                           "-s", "mutants", "--", CHEAP_MUTANT], capture_output=True, text=True, timeout=600,
                          env=env, cwd=REPO)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "FileNotFoundError" not in out
    assert "mutants: 1 killed" in out and "Session mutants was successful" in out, out


def _synthetic_scratch(tmp_path: pathlib.Path) -> mutants.Scratch:
    """A Scratch over a made-up tree (no copy of the repository, no venv): one package with one source file
    and one test file."""
    scratch = object.__new__(mutants.Scratch)
    scratch.dir = tmp_path
    scratch.tree = tmp_path / "tree"
    src = scratch.tree / "packages" / "pi-rpc" / "src" / "m.py"
    src.parent.mkdir(parents=True)
    src.write_text("def f(x):\n    if x:\n        return 1\n    return 2\n")
    tests = scratch.tree / "packages" / "pi-rpc" / "tests"
    tests.mkdir()
    (tests / "test_m.py").write_text("def test_f():\n    pass\n")
    scratch.venvs = {}
    return scratch


def _patch_file(tmp_path: pathlib.Path, name: str, context: str, *, killer: str = "tests/test_m.py::test_f") -> pathlib.Path:
    p = tmp_path / f"{name}.patch"
    p.write_text(f"# mutant: x\n# brief: -\n# package: pi-rpc\n# killed-by: {killer}\n"
                 "--- a/packages/pi-rpc/src/m.py\n+++ b/packages/pi-rpc/src/m.py\n"
                 f"@@ -1,4 +1,4 @@\n def f(x):\n-    if x:\n+    if not x:\n {context}\n     return 2\n")
    return p


def test_apply_only_accepts_a_patch_at_its_place_and_changes_nothing(tmp_path: pathlib.Path) -> None:
    scratch = _synthetic_scratch(tmp_path)
    before = (scratch.tree / "packages/pi-rpc/src/m.py").read_text()
    m = mutants.parse(_patch_file(tmp_path, "good", "        return 1"))
    assert mutants.place_problems(scratch, m) == []
    assert (scratch.tree / "packages/pi-rpc/src/m.py").read_text() == before  # a dry run


def test_apply_only_names_a_patch_whose_context_moved_and_a_killer_file_that_is_gone(tmp_path: pathlib.Path) -> None:
    """Issue 31 (S1a): when code moves, a patch whose context no longer matches (`--fuzz=0`) or whose killer's
    file was renamed is named before any test runs."""
    scratch = _synthetic_scratch(tmp_path)
    moved = mutants.parse(_patch_file(tmp_path, "moved", "        return 10"))
    problems = mutants.place_problems(scratch, moved)
    assert len(problems) == 1 and problems[0].startswith("does not apply"), problems
    gone = mutants.parse(_patch_file(tmp_path, "gone", "        return 1", killer="tests/test_gone.py::test_f"))
    problems = mutants.place_problems(scratch, gone)
    assert problems == ["killed-by names tests/test_gone.py, which is not a file of pi-rpc"], problems


def test_apply_only_is_chosen_by_its_flag_and_still_checks_the_names_given() -> None:
    assert mutants.main(["--apply-only", "no-such-mutant"]) == 2



def _import_x(src: pathlib.Path, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run([sys.executable, "-c", "import m; print(m.X)"], capture_output=True, text=True,
                          env={**environ, "PYTHONPATH": str(src), **env}, check=True)
    return done.stdout.strip()


def _rewrite(module: pathlib.Path, text: str, stamp: int) -> None:
    module.write_text(text)
    os.utime(module, ns=(stamp, stamp))  # the same modification time: a patch within the same second


def test_a_patch_that_keeps_a_modules_size_and_second_is_what_the_next_run_imports(tmp_path: pathlib.Path) -> None:
    """The scratch copy's sources are compiled before any patch, and the runs write bytecode: a mutant that
    changes a module without changing its size, within the same second, must still be what the tests import,
    and the reverted module what the next run imports (timestamp bytecode would load a stale module)."""
    src = tmp_path / "src"
    src.mkdir()
    module = src / "m.py"
    module.write_text("X = 1\n")
    stamp = module.stat().st_mtime_ns
    mutants.compile_checked([src])
    assert list((src / "__pycache__").glob("m.*.pyc")), "nothing was compiled"
    assert _import_x(src) == "1"
    _rewrite(module, "X = 2\n", stamp)  # the mutant: same size, same second
    assert _import_x(src) == "2"
    _rewrite(module, "X = 1\n", stamp)  # reverted
    assert _import_x(src) == "1"
    # The same with timestamp bytecode runs the stale module: the reason for the hash.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-f", "--invalidation-mode", "timestamp", str(src)],
                   check=True)
    _rewrite(module, "X = 2\n", stamp)
    assert _import_x(src) == "1"
