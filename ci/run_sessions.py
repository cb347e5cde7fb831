"""Run every nox session and end with a table: passed, failed, or skipped with the reason.

A session counts as passed only when nox exits 0 and did not report it skipped. A skipped session is never
shown as passed, and its reason is printed beside it. Exit status: 1 if any session failed, else 0.
`python3 ci/run_sessions.py lint safe-open` runs only those sessions. nox is the tool venv's
(`.cache/tools/venv/bin/nox`, installed by ci/bootstrap), so the nox sessions use that venv's uv too.

With two jobs (`--jobs N`, default the CPU count, at most 2) the sessions run in two lanes, then one:
- the engine lane, one after another: `cohort`, `smoke`, `claude-smoke`, `bench`, `demo`, which share the
  cgroup tree, the real engines and the user manager, so no two of them ever run at once;
- beside it, the package suites, `lint` and `build`, which touch nothing outside their own venv, the
  repository's `dist/` (build only) and temporary directories (no cgroup, no real Pi, no user manager);
  a worker that is free takes the next of them;
- `mutants` on the first worker free once every package suite, `lint` and `build` has started, beside what
  is left of the engine lane: run_sessions holds an exclusive lock on a file of its own (named to the pass in
  `MOSAIC_ENGINE_LANE_LOCK`) for as long as the engine lane runs, and the pass works on one scratch copy
  until it can take that lock, then on all of them; its cohort suites (real cgroups, the user manager) run
  only after it took it, so they never meet an engine session.
Each session's output is printed whole when it ends, so no two interleave. `--jobs 1` runs every session
one after another in the order given, streamed as it goes.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

import workspace

SESSIONS = [*workspace.PACKAGES, "lint", "build", "mutants", "cohort", "smoke", "claude-smoke", "bench", "demo"]
SIDE_BY_SIDE = frozenset([*workspace.PACKAGES, "lint", "build"])
ENGINE_LANE = ("cohort", "smoke", "claude-smoke", "bench", "demo")
# What the test command passes to a session. The benchmarks assert nothing: the test command runs each in
# its quick mode, which proves it still runs; the figures in the READMEs come from `nox -s bench` (full).
POSARGS = {"bench": ["--quick"]}
SKIP_RE = re.compile(r"^nox > Session (\S+) skipped: (.*?)(?: \(took .*\))?\.?$")
_PRINT = threading.Lock()


def header(name: str) -> str:
    extra = POSARGS.get(name, [])
    return f"\n===== nox -s {name}{' -- ' + ' '.join(extra) if extra else ''} ====="


def run(name: str, *, stream: bool = True, env: dict[str, str] | None = None) -> tuple[str, str, float]:
    """Run one session; its output goes to stdout as it comes (`stream`) or whole, with its header, at its end.
    `env`: variables added to this process's environment for the session."""
    start = time.monotonic()
    extra = POSARGS.get(name, [])
    argv = [str(workspace.TOOLS_BIN / "nox"), "-s", name, *(["--", *extra] if extra else [])]
    proc = subprocess.Popen(argv, cwd=workspace.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, env=None if env is None else {**os.environ, **env})
    reason = ""
    kept: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if stream:
            sys.stdout.write(line)
        else:
            kept.append(line)
        m = SKIP_RE.match(line.rstrip("\n"))
        if m and m.group(1) == name:
            reason = m.group(2)
    code = proc.wait()
    took = time.monotonic() - start
    if not stream:
        with _PRINT:
            print(header(name) + f" (ran side by side, {took:.1f}s)", flush=True)
            sys.stdout.write("".join(kept))
            sys.stdout.flush()
    if code != 0:
        return "failed", f"nox exit {code}", took
    if reason:
        return "skipped", reason, took
    return "passed", "", took


def parse(argv: list[str]) -> tuple[list[str], int]:
    """The sessions asked for (all, when none is named) and --jobs N."""
    value, names = workspace.split_jobs(argv)
    if value is not None and (not value.isdigit() or int(value) < 1):
        raise SystemExit(f"run_sessions: --jobs needs a whole number of at least 1, not {value!r}")
    return names or list(SESSIONS), workspace.DEFAULT_JOBS if value is None else int(value)


def main(argv: list[str]) -> int:
    if not (workspace.TOOLS_BIN / "nox").exists():
        print(f"run_sessions: no nox in {workspace.TOOLS_BIN}: run bash ci/bootstrap first (bash ci/test does)")
        return 1
    names, jobs = parse(argv)
    started = time.monotonic()
    results: dict[str, tuple[str, str, float]] = {}
    lane = [n for n in names if n in ENGINE_LANE]
    beside = [n for n in names if n in SIDE_BY_SIDE]
    two_lanes = jobs > 1 and len(lane) + len(beside) > 1
    if two_lanes:
        gated = ["mutants"] if "mutants" in names and lane else []
        print(f"\n===== {jobs} at a time: {' '.join(lane) or '-'} one after another (the engine lane), beside "
              f"{' '.join(beside) or '-'}{', then mutants (its cohort suites after the engine lane)' if gated else ''}"
              f"; then the rest =====", flush=True)
        with contextlib.ExitStack() as stack:
            env: dict[str, str] = {}
            lock_fd = -1
            if gated:
                lock_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="mosaic-lane-"))
                env[workspace.LANE_LOCK_ENV] = os.path.join(lock_dir, "engine-lane.lock")
                lock_fd = os.open(env[workspace.LANE_LOCK_ENV], os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                stack.callback(os.close, lock_fd)
                fcntl.flock(lock_fd, fcntl.LOCK_EX)  # held for as long as the engine lane runs

            def one(name: str) -> None:
                results[name] = run(name, stream=False, env=env if name in gated else None)

            def engine_lane() -> None:
                try:
                    for name in lane:
                        one(name)
                finally:
                    if lock_fd >= 0:
                        fcntl.flock(lock_fd, fcntl.LOCK_UN)

            with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
                done = [pool.submit(engine_lane)] if lane else []
                done += [pool.submit(one, n) for n in [*beside, *gated]]  # mutants once a worker is free
                for future in done:
                    future.result()
    for name in names:
        if name not in results:
            print(header(name), flush=True)
            results[name] = run(name)
    label = {n: f"{n} ({' '.join(POSARGS[n])})" if n in POSARGS else n for n in names}
    width = max(len(v) for v in label.values())
    print("\n===== sessions =====")
    for name in names:
        status, why, took = results[name]
        print(f"{label[name].ljust(width)}  {status:<8} {took:7.1f}s  {why}")
    counts = {s: sum(1 for r in results.values() if r[0] == s) for s in ("passed", "failed", "skipped")}
    wall = time.monotonic() - started
    side = f" ({jobs} at a time)" if two_lanes else ""
    print(f"total time {wall:.0f}s; the sessions' own times add to {sum(r[2] for r in results.values()):.0f}s{side}")
    print(f"sessions: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
