"""The mutation pass: every patch in mutants/ must be killed by the test it names.

For each mutant file (a header, then a unified diff relative to the repository root):

    # mutant: what the mutation breaks
    # brief: the brief's mutant number, or -
    # package: the package whose tests kill it
    # killed-by: tests/test_x.py::test_name[, more]     (relative to packages/<package>/)
    # signal: builtins.TimeoutError                     (optional: an exception that counts as a kill)

A mutant's killers may be in more than one suite of its package (a fast killer in tests/ beside the
kernel's in tests_cohort/): each suite's named tests run on their own (its own rootdir), and the mutant is
killed only when every suite kills it.

the pass works in one scratch copy of the tree (never in the checkout), with one virtualenv per package
holding an *editable* install of that package and the Mosaic packages it and its tests declare from the
scratch copy, so a patch applied to the scratch sources is what the tests import (made with the tool venv's
uv by its path, else a uv on PATH, else the venv module and pip: `venv_commands`). Then:

1. baseline: the named tests must pass on the unpatched copy (a test that fails anyway kills nothing;
   checked once per package suite for all its named tests together, the unit suites' runs shared out among the
   scratch copies as the mutants are, each cohort suite's just before its mutants, in their line);
2. the patch must apply cleanly (`patch -p1 --fuzz=0`: its context exactly as in the tree, a line offset
   allowed), else the mutant is an error;
3. the named tests run again (all of them: one test's crash never hides another's assertion), with the
   `mutant_signal` plugin (ci/mutant_signal.py) recording how each failed and where, and with plain asserts
   (no explanation of a failed comparison: on a CI machine pytest diffs both sides, minutes for two long
   texts; `pytest_argv`). The mutant is killed
   only when a named test failed in its call phase on an assertion (`AssertionError` or pytest's `Failed`:
   a `pytest.raises` that saw nothing, `pytest.fail`) raised in the suite's own code (the raising frame's
   file is in packages/<package>/<suite>/: a test or a helper of the suite) and not in place of a timeout,
   or on the exception the mutant's `signal:` line declares (reported apart). Otherwise:
   - "HUNG": a wait ran out: a TimeoutError, the AssertionError a harness raised while handling one, or
     the named tests still running at their bound (HANG_FLOOR_S plus HANG_FACTOR times the suite's
     baseline, at most TEST_TIMEOUT_S). The mutation stopped something from happening in time, which asserts
     no rule either way, so a hung mutant is run once more from the start and the second run's result is
     its result (`run_mutant`; the first hang is named in the report);
   - "CRASHED": anything else: an `assert` in the product (or a package's `testing` module), an exception
     the code raised before the test's assertion could run, a failure in setup or teardown.
   Exit 0 means it survived; any other exit (no such test, collection error) is an error, never a kill;
4. the patch is reverted before the next mutant.

It prints a table (mutant, package, brief, killed by, result, time), under it each mutant not killed with why
(and each killed only on its second run), then a count of each result, and exits 1 unless every mutant was
killed.

`python ci/mutants.py --apply-only [STEM...]` runs no test: it proves every patch still has its place, on one
scratch copy of the tree (no venv is made): each header parses, each file its `killed-by:` names exists, and
each patch applies there with `--dry-run` (the same `--fuzz=0`: its context exactly as in the tree). It is
what a commit that moves code runs before the full pass (`nox -s lint` runs it); it exits 1 naming every
patch that lost its place. `python ci/mutants.py STEM...` runs only the named mutants; `--jobs N`
(default: the CPU count, at most 2) runs the mutants of the unit suites on N scratch copies side by side, each copy patched by one
mutant at a time. The mutants whose killers are in a cohort suite (`tests_cohort`: real cgroups, a systemd
sandbox) run in a line of their own on the first copy, each cohort suite's baseline first, one at a time, so
that two labs never share the machine's cgroup tree at once; the other copies go on with the unit suites'
mutants beside the line (a unit suite's test makes no lab), and the first copy joins them when it ends.

Beside the engine lane (`bash ci/test`: ci/run_sessions.py starts the pass while the engine sessions may still
run, and names a file it holds an exclusive lock on until they have ended in `MOSAIC_ENGINE_LANE_LOCK`), the
pass works on its first scratch copy only until it can take a shared lock on that file, then on all of them,
and runs no cohort suite (baseline or mutant) before it took it (`LaneGate`). Without the variable it starts
on every copy at once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import workspace
from pytest_forkserver import TIMED_OUT  # the returncode of a pytest run killed at its bound

T = TypeVar("T")

MUTANTS_DIR = workspace.ROOT / "mutants"
TEST_TIMEOUT_S = 600  # the most any one pytest run of the pass may take
# A mutated run's bound: HANG_FLOOR_S plus HANG_FACTOR times its suite's baseline (every named test of the
# suite, unpatched, on this machine), at most TEST_TIMEOUT_S. A killer is one of the baseline's tests and
# takes seconds; a mutated run past the bound is hung, whatever it would have done after.
HANG_FLOOR_S = 120.0
HANG_FACTOR = 4.0
COPY_IGNORE = shutil.ignore_patterns(".git", ".nox", ".cache", "node_modules", "__pycache__", ".hypothesis",
                                     "*.pyc", ".venv")


@dataclasses.dataclass
class Mutant:
    path: pathlib.Path
    what: str
    brief: str
    package: str
    killed_by: list[str]
    signals: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def suites(self) -> list[str]:
        return suites_of(self.killed_by)

    def killers_in(self, suite: str) -> list[str]:
        return [k for k in self.killed_by if suite_of(k) == suite]

    @property
    def serial(self) -> bool:
        return any(s in SERIAL_SUITES for s in self.suites)


def suite_of(killer: str) -> str:
    """The package's test directory a killer is in (tests, tests_cohort, ...): one pytest run per suite, with
    the suite as its rootdir (tests_cohort/ brings its own conftest and plugins)."""
    return pathlib.PurePosixPath(killer).parts[0]


def suites_of(killers: list[str]) -> list[str]:
    """The suites a mutant's killers are in. A mutant may name killers in several (a fast one in tests/ beside
    the kernel's in tests_cohort/): it is killed only when each suite's named tests kill it."""
    return sorted({suite_of(k) for k in killers})


@dataclasses.dataclass
class Outcome:
    result: str  # killed | SURVIVED | CRASHED | HUNG | ERROR
    detail: str
    seconds: float
    runs: int = 1  # 2 when the first run hung and the mutant was run once more (`run_mutant`)
    by_signal: bool = False  # killed by the exception its `signal:` line declares, not by an assertion


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A package suite's named tests, all of them on the unpatched copy: whether they passed, and how long."""

    ok: bool
    seconds: float

    def bound(self) -> float:
        """How long a mutated run of some of these tests may take before it is hung (HANG_FLOOR_S, HANG_FACTOR)."""
        if not self.ok:
            return float(TEST_TIMEOUT_S)
        return min(float(TEST_TIMEOUT_S), HANG_FLOOR_S + HANG_FACTOR * self.seconds)


def parse(path: pathlib.Path) -> Mutant:
    fields: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].partition(":")
        fields[key.strip()] = value.strip()
    missing = [k for k in ("mutant", "brief", "package", "killed-by") if not fields.get(k)]
    if missing:
        raise SystemExit(f"{path.name}: header lacks {', '.join(missing)}")
    if fields["package"] not in workspace.PACKAGES:
        raise SystemExit(f"{path.name}: unknown package {fields['package']!r}")
    killers = [k.strip() for k in fields["killed-by"].split(",") if k.strip()]
    signals = tuple(s.strip() for s in fields.get("signal", "").split(",") if s.strip())
    return Mutant(path, fields["mutant"], fields["brief"], fields["package"], killers, signals)


def classify(signals_file: pathlib.Path, declared: tuple[str, ...]) -> tuple[str, str]:
    """(result, detail) from the failures the plugin recorded (ci/mutant_signal.py):

    - "killed": some named test failed in its call phase on an assertion raised in the suite's own code (a
      test or a helper module of its directory), not while handling a timeout; or on an exception the
      mutant's `signal:` line declares;
    - "HUNG": no such failure, and one was a wait that ran out (a TimeoutError, or an AssertionError a wait
      raised in its place): the mutant stopped something from happening in time, which asserts no rule;
    - "CRASHED": any other failure: an `assert` in the product (or in a package's `testing` module), an
      exception the code under test raised, a failure in setup or teardown.
    """
    failures = []
    if signals_file.exists():
        failures = [json.loads(line) for line in signals_file.read_text().splitlines() if line.strip()]
    if not failures:
        return "CRASHED", "pytest failed but recorded no failed test"
    calls = [f for f in failures if f["when"] == "call"]
    if any(f.get("assertion") and f.get("in_suite") and not f.get("timeout") for f in calls):
        return "killed", ""
    for f in calls:
        if f["type"] in declared:
            return "killed", f"by its declared signal {f['type']} at {f.get('raised_at') or '?'}"

    def why(f: dict[str, object]) -> str:
        if f["when"] != "call":
            return f"failed in {f['when']} on {f['type']}"
        if f.get("timeout"):
            return f"a wait ran out ({f['type']})"
        if f.get("assertion"):
            return f"an assertion outside the suite ({f['type']})"
        return f"the code raised {f['type']}"

    detail = "; ".join(f"{f['nodeid']}: {why(f)} at {f.get('raised_at') or '?'}" for f in failures)
    if any(f.get("timeout") for f in failures):
        return "HUNG", detail
    return "CRASHED", detail


def pytest_argv(pkg_dir: pathlib.Path, killed_by: list[str], *, mutated: bool) -> list[str]:
    """pytest's arguments for a run of a package's named tests (all in one suite, its rootdir).

    The baseline stops at its first failure; a mutated run runs every named test, so that one test's crash
    never hides another's assertion. A mutated run's asserts are plain: its verdict needs only which test
    failed on what (ci/mutant_signal.py), never pytest's explanation of a failed comparison, which on a CI
    machine (`CI` set) is a difflib diff of both sides: 4 minutes for one failed compare of two 1 MiB texts
    (chat-pages--raw-long-string-spliced hung at its bound so, twice, in stop 40's CI).
    """
    first = ["--assert=plain"] if mutated else ["-x"]
    return ["-p", "no:cacheprovider", "-p", "mutant_signal", *first, "-q", "--import-mode=importlib",
            "--rootdir", str(pkg_dir / suite_of(killed_by[0])), *(str(pkg_dir / k) for k in killed_by)]


def venv_commands(venv: pathlib.Path) -> tuple[list[str], list[str]]:
    """How to make a package's venv and install into it (the install command takes the requirements after
    it): with uv by its path (the tool venv's, else one on PATH: `workspace.tool`), never by bare name, since
    nox puts only the session's venv on PATH; where there is no uv at all, with the venv module and pip, as
    the noxfile's `uv|virtualenv` backend falls back."""
    python = str(venv / "bin" / "python")
    uv = workspace.tool("uv")
    if uv is not None:
        return ([uv, "venv", "-q", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "-q", "--python", python])
    return ([sys.executable, "-m", "venv", str(venv)],
            [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"])


def compile_checked(dirs: list[pathlib.Path]) -> None:
    """Compile every module under ``dirs`` to bytecode that each import checks against its source's hash."""
    out = _run([sys.executable, "-m", "compileall", "-q", "-j", "0", "--invalidation-mode", "checked-hash",
                *map(str, dirs)])
    if out.returncode:
        raise SystemExit(f"compiling {', '.join(map(str, dirs))} failed:\n{out.stdout}{out.stderr}")


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, text=True, capture_output=True, **kw)  # type: ignore[call-overload,no-any-return]


class Scratch:
    """A scratch copy of the tree with one editable venv per package, made on first use."""

    def __init__(self) -> None:
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="mosaic-mutants-"))
        self.tree = self.dir / "tree"
        shutil.copytree(workspace.ROOT, self.tree, ignore=COPY_IGNORE, symlinks=True)
        self.venvs: dict[str, pathlib.Path] = {}
        self.servers: dict[str, subprocess.Popen[str]] = {}

    def compile_sources(self) -> None:
        """Bytecode for the unpatched sources, checked against each source's hash at every import: a module
        a mutant patched no longer matches its hash and is compiled from the patched source (its bytecode
        written again, checked the same way, and again when the patch is reverted), every other module loads
        from its bytecode. Timestamp bytecode would not do: a patch that keeps a file's size within the same
        second looks unchanged. Made before any patch is applied (every mutant patches a `src/` module)."""
        compile_checked(sorted((self.tree / "packages").glob("*/src")))

    def python(self, package: str) -> pathlib.Path:
        if package not in self.venvs:
            venv = self.dir / f"venv-{package}"
            python = venv / "bin" / "python"
            make, install = venv_commands(venv)
            out = _run(make)
            if out.returncode:
                raise SystemExit(f"{' '.join(make[:3])} failed for {package}:\n{out.stderr}")
            pkgs = self.tree / "packages"
            args: list[str] = []
            for dep in workspace.closure(package, tests=True):  # what its tests declare too (the terminal's)
                spec = str(pkgs / dep) + ("[test]" if dep == package else "")
                args += ["-e", spec]
            out = _run([*install, *args])
            if out.returncode:
                raise SystemExit(f"installing {package} for the mutation pass failed:\n{out.stderr}")
            self.venvs[package] = python
        return self.venvs[package]

    def _env(self) -> dict[str, str]:
        """What every pytest run of this copy shares. Bytecode is written: the third-party modules' on their
        first import (they never change), the scratch sources' checked against their hash (`compile_sources`),
        so a patched module is always compiled from its source. Without it every run compiled pytest and
        hypothesis again, a second or more each."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "MOSAIC_MUTANT_SIGNALS")}
        env["MOSAIC_REPO"] = str(self.tree)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(self.tree / "ci"), env.get("PYTHONPATH", "")) if p)
        return env

    def _server(self, package: str) -> subprocess.Popen[str]:
        """The package's pytest fork server (ci/pytest_forkserver.py), started on first use in its venv and
        directory: pytest and Hypothesis imported once, each run a fork of it (no module of the tree imported
        before the fork)."""
        server = self.servers.get(package)
        if server is None or server.poll() is not None:
            server = subprocess.Popen([str(self.python(package)), "-m", "pytest_forkserver"],
                                      cwd=str(self.tree / "packages" / package), env=self._env(),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
            self.servers[package] = server
        return server

    def pytest(self, package: str, killed_by: list[str], signals_file: pathlib.Path | None = None,
               timeout: float = TEST_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        pkg_dir = self.tree / "packages" / package
        extra = {} if signals_file is None else {"MOSAIC_MUTANT_SIGNALS": str(signals_file),
                                                 "MOSAIC_MUTANT_BOUND": f"{timeout:.0f}"}
        argv = pytest_argv(pkg_dir, killed_by, mutated=signals_file is not None)
        server = self._server(package)
        assert server.stdin is not None and server.stdout is not None
        try:
            server.stdin.write(json.dumps({"argv": argv, "env": extra, "timeout": timeout}) + "\n")
            server.stdin.flush()
            answer = json.loads(server.stdout.readline())
        except (OSError, ValueError) as exc:
            raise SystemExit(f"the pytest fork server for {package} failed ({exc!r}); its exit status: {server.poll()}") from exc
        cmd = [str(self.python(package)), "-m", "pytest", *argv]
        if answer["returncode"] == TIMED_OUT:
            return subprocess.CompletedProcess(cmd, TIMED_OUT, answer["output"], f"timeout after {timeout:.0f}s")
        return subprocess.CompletedProcess(cmd, answer["returncode"], answer["output"], "")

    def patch(self, mutant: Mutant, *, reverse: bool = False, dry: bool = False) -> subprocess.CompletedProcess[str]:
        cmd = ["patch", "-p1", "--fuzz=0", "--batch", "--forward", "-s", "-d", str(self.tree), "-i", str(mutant.path)]
        if reverse:
            cmd.remove("--forward")
            cmd.insert(1, "-R")
        if dry:
            cmd.append("--dry-run")
        return _run(cmd)

    def remove(self) -> None:
        for server in self.servers.values():
            if server.stdin is not None:
                server.stdin.close()  # the server ends at the end of its requests
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            if server.stdout is not None:
                server.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _tail(proc: subprocess.CompletedProcess[str], n: int = 12) -> str:
    text = (proc.stdout or "") + (proc.stderr or "")
    return "\n".join(text.strip().splitlines()[-n:])


def _beside(signals_file: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    """What the plugin (ci/mutant_signal.py) leaves beside the signals file: the test under way, and every
    thread's stack dumped 5 s before the run's bound."""
    return pathlib.Path(f"{signals_file}.running"), pathlib.Path(f"{signals_file}.stacks")


def _past_its_bound(signals_file: pathlib.Path, bound: float, run: subprocess.CompletedProcess[str]) -> str:
    """Why a run killed at its bound is hung: the test it was in, its output's tail, where it waited."""
    running, stacks = (p.read_text(encoding="utf-8", errors="replace").strip() if p.exists() else ""
                       for p in _beside(signals_file))
    return (f"hung, not killed: the named tests ran past their bound, {bound:.0f}s, in {running or '?'}\n"
            + _tail(run) + (f"\nevery thread's stack 5 s before the bound:\n{stacks[-6000:]}" if stacks else ""))


def run_mutant(scratch: Scratch, mutant: Mutant, baseline: dict[str, Baseline]) -> Outcome:
    """`run_one`, and once more when it hung: a hang asserts nothing either way (a wait ran out, or the run
    passed its bound), so it is run again from the start, and the second run's result is the mutant's, with the
    first hang named in its detail. Killed only by a named test's assertion (or declared signal), as always."""
    first = run_one(scratch, mutant, baseline)
    if first.result != "HUNG":
        return first
    second = run_one(scratch, mutant, baseline)
    hung = "the first run hung (" + first.detail.splitlines()[0] + "), so it ran again"
    return Outcome(second.result, "; ".join(d for d in (hung, second.detail) if d),
                   first.seconds + second.seconds, runs=2, by_signal=second.by_signal)


def run_one(scratch: Scratch, mutant: Mutant, baseline: dict[str, Baseline]) -> Outcome:
    start = time.monotonic()
    for suite in mutant.suites:
        if not baseline[suite].ok:
            base = scratch.pytest(mutant.package, mutant.killers_in(suite))
            if base.returncode != 0:
                return Outcome("ERROR", "named test does not pass on the unpatched tree:\n" + _tail(base),
                               time.monotonic() - start)
    dry = scratch.patch(mutant, dry=True)
    if dry.returncode != 0:
        return Outcome("ERROR", "patch does not apply:\n" + _tail(dry), time.monotonic() - start)
    applied = scratch.patch(mutant)
    if applied.returncode != 0:
        return Outcome("ERROR", "patch failed:\n" + _tail(applied), time.monotonic() - start)
    runs: list[tuple[str, pathlib.Path, float, subprocess.CompletedProcess[str]]] = []
    try:
        for suite in mutant.suites:
            signals_file = scratch.dir / f"signals-{mutant.stem}-{suite}.jsonl"
            for left in (signals_file, *_beside(signals_file)):  # the plugin appends: a second run records its own
                left.unlink(missing_ok=True)
            bound = baseline[suite].bound()
            runs.append((suite, signals_file, bound,
                         scratch.pytest(mutant.package, mutant.killers_in(suite), signals_file, bound)))
    finally:
        undone = scratch.patch(mutant, reverse=True)
        if undone.returncode != 0:
            raise SystemExit(f"could not revert {mutant.path.name}; scratch tree left at {scratch.tree}")
    took = time.monotonic() - start
    details: list[str] = []
    for suite, signals_file, bound, mutated in runs:  # killed only when every suite's named tests killed it
        where = f"{suite}: " if len(runs) > 1 else ""
        if mutated.returncode == 1:
            result, detail = classify(signals_file, mutant.signals)
            if result != "killed":
                return Outcome(result, f"{where}{result.lower()}, not killed: {detail}\n{_tail(mutated)}", took)
            if detail:
                details.append(f"{where}{detail}")
        elif mutated.returncode == TIMED_OUT:
            return Outcome("HUNG", f"{where}{_past_its_bound(signals_file, bound, mutated)}", took)
        elif mutated.returncode == 0:
            return Outcome("SURVIVED", f"{where}the named tests pass with the mutation applied", took)
        else:
            return Outcome("ERROR", f"{where}pytest exit {mutated.returncode} (not a test failure):\n"
                           + _tail(mutated), took)
    return Outcome("killed", "; ".join(details), took, by_signal=bool(details))


SERIAL_SUITES = ("tests_cohort",)  # suites that bring up a cohort lab: never two at once


def _jobs(argv: list[str]) -> tuple[int, list[str]]:
    value, rest = workspace.split_jobs(argv)
    return (workspace.DEFAULT_JOBS if value is None else max(1, int(value or "1"))), rest


class LaneGate:
    """Whether the engine lane has ended: open at once without a lane lock file; else it opens when a thread
    of its own has taken a shared lock on the file (held exclusively by ci/run_sessions.py while the engine
    sessions run; released, never held, once taken)."""

    def __init__(self, lock_path: str | None) -> None:
        self._open = threading.Event()
        if not lock_path:
            self._open.set()
            return
        threading.Thread(target=self._take, args=(lock_path,), name="mutants-lane-gate", daemon=True).start()

    def _take(self, lock_path: str) -> None:
        try:
            fd = os.open(lock_path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # the runner's lock file is gone: its lane has ended with it
            self._open.set()
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)
            self._open.set()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._open.wait(timeout)


OPEN = LaneGate(None)


def _run_all(mutants: list[Mutant], scratches: list[Scratch],
             baseline: dict[tuple[str, str], Baseline], gate: LaneGate = OPEN) -> dict[str, Outcome]:
    """Each mutant on one scratch copy: the unit suites' mutants shared out among the copies (a queue each
    worker takes from; the copies past the first once `gate` is open); the serial line, each serial suite's
    baseline and then the serial suites' mutants, in order, one at a time, on the first copy once `gate` is
    open, while the other copies go on with the unit suites' mutants beside it. `baseline` holds the unit
    suites' (`_baselines`); the serial suites' are added to it by their line."""
    outcomes: dict[str, Outcome] = {}
    report = threading.Lock()  # one worker's line at a time
    killers = _killers(mutants)
    base = _baseline_step(killers, baseline, report)

    def one(scratch: Scratch, step: Mutant | tuple[str, str]) -> None:
        if isinstance(step, tuple):  # a serial suite's baseline, before its mutants in the line
            base(scratch, step)
            return
        m = step
        out = run_mutant(scratch, m, {s: baseline[m.package, s] for s in m.suites})
        with report:
            outcomes[m.stem] = out
            print(f"mutant {m.stem} ({m.package}): {out.result} in {out.seconds:.1f}s"
                  + (f"\n{out.detail}" if out.detail else ""), flush=True)

    serial: list[Mutant | tuple[str, str]] = [k for k in sorted(killers) if k[1] in SERIAL_SUITES]
    serial += [m for m in mutants if m.serial]
    if serial and not gate.is_open:
        print("mutants: the cohort suites (baselines and mutants) wait for the engine lane to end", flush=True)
    units: list[Mutant | tuple[str, str]] = [m for m in mutants if not m.serial]
    _share_out(units, scratches, one, gate, serial)
    return outcomes


def _share_out(items: list[T], scratches: list[Scratch], one: Callable[[Scratch, T], None],
               gate: LaneGate = OPEN, serial: list[T] | None = None) -> None:
    """Run `one(scratch, item)` for every item, the items shared out among the scratch copies (a queue each
    copy's worker takes from, in order); the first exception a worker raised is raised once all have ended.
    Every copy but the first takes an item only once `gate` is open (it ends if the queue ran dry first).
    The `serial` items run on the first copy alone, in order, one at a time, and only once `gate` is open:
    it takes the next of them before its next shared item, so the other copies go on beside it."""
    work: queue.SimpleQueue[T] = queue.SimpleQueue()
    for item in items:
        work.put(item)
    line = list(serial or [])
    line.reverse()  # popped from the end: in order
    failures: list[BaseException] = []

    def worker(scratch: Scratch) -> None:
        first = scratch is scratches[0]
        try:
            if not first:
                while not gate.wait(0.2):
                    if work.empty():
                        return
            while True:
                if first and line and gate.is_open:
                    one(scratch, line.pop())  # only the first copy's worker touches the line
                    continue
                try:
                    item = work.get_nowait()
                except queue.Empty:
                    if first and line:
                        gate.wait()  # nothing left but the line, which waits for the gate
                        continue
                    return
                one(scratch, item)
        except BaseException as e:  # noqa: BLE001 - re-raised by the main thread once every worker ended
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(sc,), name=f"mutants-{i}") for i, sc in enumerate(scratches)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def _killers(mutants: list[Mutant]) -> dict[tuple[str, str], set[str]]:
    """(package, suite) -> every test its mutants name there."""
    killers = {(m.package, s): set[str]() for m in mutants for s in m.suites}
    for m in mutants:
        for s in m.suites:
            killers[m.package, s].update(m.killers_in(s))
    return killers


def _baseline_step(killers: dict[tuple[str, str], set[str]], results: dict[tuple[str, str], Baseline],
                   report: threading.Lock) -> Callable[[Scratch, tuple[str, str]], None]:
    """The baseline of one package suite on a scratch copy: all its named tests on the unpatched copy, the
    result put in `results` and printed."""
    def one(scratch: Scratch, key: tuple[str, str]) -> None:
        named = sorted(killers[key])
        start = time.monotonic()
        proc = scratch.pytest(key[0], named)
        with report:
            results[key] = Baseline(proc.returncode == 0, time.monotonic() - start)
            print(f"baseline {key[0]} {key[1]}: {len(named)} named test(s) on the unpatched tree: "
                  f"{'passed' if results[key].ok else 'FAILED'} in {results[key].seconds:.1f}s", flush=True)
            if not results[key].ok:
                print(_tail(proc), flush=True)

    return one


def _baselines(mutants: list[Mutant], scratches: list[Scratch],
               gate: LaneGate = OPEN) -> dict[tuple[str, str], Baseline]:
    """Once per unit package suite: do its named tests all pass on the unpatched copy? The runs are shared out
    among the scratch copies as the mutants are (the largest first; each copy makes the venvs it will need;
    the copies past the first once `gate` is open). The serial suites' baselines run in their line
    (`_run_all`), just before their mutants. Only when a suite fails here are its mutants checked one by one,
    to name the test that fails anyway."""
    killers = _killers(mutants)
    results: dict[tuple[str, str], Baseline] = {}
    unit = sorted((k for k in killers if k[1] not in SERIAL_SUITES), key=lambda k: (-len(killers[k]), k))
    _share_out(unit, scratches, _baseline_step(killers, results, threading.Lock()), gate)
    return results


def place_problems(scratch: Scratch, mutant: Mutant) -> list[str]:
    """Why `mutant` has lost its place in the scratch tree: a killer's test file that does not exist, a patch
    that does not apply with `--dry-run --fuzz=0`. Empty when it still has it; nothing is changed."""
    problems: list[str] = []
    pkg_dir = scratch.tree / "packages" / mutant.package
    for killer in mutant.killed_by:
        test_file = killer.split("::", 1)[0]
        if not (pkg_dir / test_file).is_file():
            problems.append(f"killed-by names {test_file}, which is not a file of {mutant.package}")
    dry = scratch.patch(mutant, dry=True)
    if dry.returncode != 0:
        problems.append("does not apply: " + " / ".join(_tail(dry, 6).splitlines()))
    return problems


def apply_only(paths: list[pathlib.Path]) -> int:
    """`--apply-only`: every patch dry-run on one scratch copy, its killers' files looked up; no test runs."""
    mutants = [parse(p) for p in paths]
    scratch = Scratch()
    bad = 0
    try:
        for m in mutants:
            problems = place_problems(scratch, m)
            for problem in problems:
                print(f"mutant {m.stem} ({m.package}): {problem}", flush=True)
            bad += bool(problems)
    finally:
        scratch.remove()
    print(f"mutants --apply-only: {len(mutants) - bad} of {len(mutants)} patches apply at their place "
          f"(--dry-run --fuzz=0) and name existing test files; {bad} do not")
    return 1 if bad else 0


def report_after_the_table(rows: list[tuple[Mutant, Outcome]]) -> int:
    """Under the table, where the end of a long log shows it: each mutant not killed with why (its detail
    and the tail of its run), and each one killed only on a second run after a hang (how many: returned)."""
    for m, out in rows:
        if out.result != "killed":
            print(f"\nNOT KILLED: {m.stem} ({m.package}): {out.result}\n{out.detail}")
    again = [(m, out) for m, out in rows if out.runs > 1 and out.result == "killed"]
    for m, out in again:
        print(f"\nkilled on a second run: {m.stem} ({m.package}): {out.detail.splitlines()[0]}")
    return len(again)


def main(argv: list[str]) -> int:
    apply = "--apply-only" in argv
    argv = [a for a in argv if a != "--apply-only"]
    jobs, argv = _jobs(argv)
    paths = sorted(MUTANTS_DIR.glob("*.patch"))
    if argv:
        wanted = set(argv)
        paths = [p for p in paths if p.stem in wanted]
        unknown = wanted - {p.stem for p in paths}
        if unknown:
            print(f"no such mutant: {', '.join(sorted(unknown))}")
            return 2
    if not paths:
        print("mutants: no mutant files in mutants/ (nothing was checked, which is a failure)")
        return 1
    if apply:
        return apply_only(paths)
    mutants = [parse(p) for p in paths]
    jobs = min(jobs, max(1, sum(1 for m in mutants if not m.serial)))
    scratches = [Scratch() for _ in range(jobs)]
    for sc in scratches:
        sc.compile_sources()
    rows: list[tuple[Mutant, Outcome]] = []
    uv = workspace.tool("uv")
    print(f"mutants: {len(mutants)} on {jobs} scratch cop{'y' if jobs == 1 else 'ies'}; venvs made with "
          + (uv if uv is not None else "the venv module and pip (no uv in the tool venv or on PATH)"), flush=True)
    gate = LaneGate(os.environ.get(workspace.LANE_LOCK_ENV))
    if not gate.is_open:
        print("mutants: beside the engine lane: one scratch copy until it ends, the cohort line (baselines and mutants) after it",
              flush=True)
    try:
        outcomes = _run_all(mutants, scratches, _baselines(mutants, scratches, gate), gate)
        rows = [(m, outcomes[m.stem]) for m in mutants]
    finally:
        for sc in scratches:
            sc.remove()
    width = max(len(m.stem) for m, _ in rows)
    print()
    print(f"{'mutant'.ljust(width)}  {'package':<17} {'brief':<5} {'result':<8} {'time':>7}  killed by")
    for m, out in rows:
        print(f"{m.stem.ljust(width)}  {m.package:<17} {m.brief:<5} {out.result:<8} {out.seconds:6.1f}s  "
              f"{', '.join(m.killed_by)}")
    again = report_after_the_table(rows)
    bad = [m.stem for m, out in rows if out.result != "killed"]
    count = {r: sum(1 for _, out in rows if out.result == r) for r in ("SURVIVED", "CRASHED", "HUNG", "ERROR")}
    by_signal = sum(1 for _, out in rows if out.result == "killed" and out.by_signal)
    print(f"\nmutants: {len(rows) - len(bad)} killed ({len(rows) - len(bad) - by_signal} by a test's assertion, "
          f"{by_signal} by their declared signal), "
          f"{len(bad)} not killed ({count['SURVIVED']} survived, {count['CRASHED']} crashed, "
          f"{count['HUNG']} hung, {count['ERROR']} errors); {again} killed only on a second run after a hang")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
