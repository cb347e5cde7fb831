"""Run every nox session one after another and end with a table: passed, failed, or skipped with the reason.

A session counts as passed only when nox exits 0 and did not report it skipped. A skipped session is never
shown as passed, and its reason is printed beside it. Exit status: 1 if any session failed, else 0.
`python3 ci/run_sessions.py lint safe-open` runs only those sessions. nox is the tool venv's
(`.cache/tools/venv/bin/nox`, installed by ci/bootstrap), so the nox sessions use that venv's uv too.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import workspace

SESSIONS = [*workspace.PACKAGES, "lint", "build", "mutants", "cohort", "smoke", "bench", "demo"]
# What the test command passes to a session. The benchmarks assert nothing: the test command runs each in
# its quick mode, which proves it still runs; the figures in the READMEs come from `nox -s bench` (full).
POSARGS = {"bench": ["--quick"]}
SKIP_RE = re.compile(r"^nox > Session (\S+) skipped: (.*?)(?: \(took .*\))?\.?$")


def run(name: str) -> tuple[str, str, float]:
    start = time.monotonic()
    extra = POSARGS.get(name, [])
    argv = [str(workspace.TOOLS_BIN / "nox"), "-s", name, *(["--", *extra] if extra else [])]
    proc = subprocess.Popen(argv, cwd=workspace.ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    reason = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stdout.write(line)
        m = SKIP_RE.match(line.rstrip("\n"))
        if m and m.group(1) == name:
            reason = m.group(2)
    code = proc.wait()
    took = time.monotonic() - start
    if code != 0:
        return "failed", f"nox exit {code}", took
    if reason:
        return "skipped", reason, took
    return "passed", "", took


def main(argv: list[str]) -> int:
    if not (workspace.TOOLS_BIN / "nox").exists():
        print(f"run_sessions: no nox in {workspace.TOOLS_BIN}: run bash ci/bootstrap first (bash ci/test does)")
        return 1
    names = argv or SESSIONS
    rows = []
    for name in names:
        extra = POSARGS.get(name, [])
        print(f"\n===== nox -s {name}{' -- ' + ' '.join(extra) if extra else ''} =====", flush=True)
        label = f"{name} ({' '.join(extra)})" if extra else name
        rows.append((label, *run(name)))
    width = max(len(r[0]) for r in rows)
    print("\n===== sessions =====")
    for name, status, why, took in rows:
        print(f"{name.ljust(width)}  {status:<8} {took:7.1f}s  {why}")
    counts = {s: sum(1 for r in rows if r[1] == s) for s in ("passed", "failed", "skipped")}
    total = sum(r[3] for r in rows)
    print(f"total time {total:.0f}s")
    print(f"sessions: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
