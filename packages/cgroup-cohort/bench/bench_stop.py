#!/usr/bin/env python3
"""Force stop of ~100 and ~800 members (with a fork loop), against a floor measured in the same run.

Not a test. Needs root and a writable cgroup2; the engine runs as the engine account (``cohorttest`` by
default, created as a system account: ``mosaic.cgroup_cohort.testing.account``).

For each size N:
* stop:  DirectCgroupLauncher, engine as cohorttest: N-2 TERM-ignoring sleepers, a TERM-ignoring fork
         loop and one more TERM-ignoring member; ``force_stop`` from the request to the proof. The grace
         period runs to its bound (every member ignores TERM), so it is reported on its own.
* floor: the same tree started straight into a plain cgroup of the same kind (clone3 into it), then by
         hand: write cgroup.freeze=1, poll for frozen 1, write cgroup.kill, poll for populated 0.

Prints, per size, medians over the repeats: total stop time, grace, stop time without the grace,
floor, and the ratio (stop without grace) / floor; then the time per phase, and the kill phase alone
(freeze, enumeration twice, re-check, cgroup.kill, populated 0, deaths collected) against the floor.

Then the launch (``--launches`` rounds, 0 to skip; ``--sizes`` with no value skips the stops), medians, for
the direct launcher (shim, canary, engine as cohorttest) and the process-group launcher (engine as
cohorttest), each cold (the launch starts its spawn helper) and prewarmed (``prewarm()``, then ``--lead``
seconds of other work, then the launch; README "Threads"):
* ``launch()``: the call until it returns the handle (the direct one waits for the shim's hello);
* engine up: the call until the engine runs. The engine is ``sh -c 'date +%s.%N; exec cat'``: its first
  line is the wall clock when it ran. Floor: the same engine started with ``subprocess.Popen`` here.
Then ``spawn`` of ``/bin/true`` through a cold spawn helper against the same ``spawn`` in this
(single-threaded) process.
Usage:
    python packages/cgroup-cohort/bench/bench_stop.py [--sizes 100 800] [--repeats 5] [--grace 0.5]
                                                      [--launches 10] [--lead 0.05]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from mosaic.cgroup_cohort import (
    Credentials,
    DirectCgroupLauncher,
    FixtureVerifier,
    Launcher,
    PgroupLauncher,
    StopRequest,
    force_stop,
)
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2

# The floor is the kernel interface driven by hand with the package's own primitives (no shim, no
# machine): measuring against those mechanisms (public in .bindings, .cgroupfs, .spawn_helper) is the point.
from mosaic.cgroup_cohort.internals import (
    O_DIR,
    remove_tree,
    set_child_subreaper,
    spawn,
    spawn_in_helper,
    wait_events,
    write_value,
)
from mosaic.cgroup_cohort.stop import AwaitGrace
from mosaic.cgroup_cohort.testing import stage_tree
from mosaic.cgroup_cohort.testing.account import EngineAccountError, engine_account


def spec(n: int) -> dict[str, object]:
    return {"fanout": max(0, n - 3), "fanout_ignore_term": True, "fork_loop": True, "fork_cap": 40,
            "term_ignorers": 1}


def first_line(fd: int, timeout: float, *, chunk: int = 65536) -> bytes:
    """Read ``fd`` until a line ends (``chunk`` bytes at a time: 1 reads nothing past the line); the bytes."""
    buf = b""
    while not buf.endswith(b"\n"):
        r, _, _ = select.select([fd], [], [], timeout)
        if not r:
            raise TimeoutError("the engine said nothing")
        got = os.read(fd, chunk)
        if not got:
            raise EOFError("the engine's stdout closed")
        buf += got
    return buf


def read_line(fd: int, timeout: float = 120.0) -> dict[str, object]:
    return json.loads(first_line(fd, timeout).split(b"\n", 1)[0])


def run_stop(launcher: DirectCgroupLauncher, tree: str, stage: str, n: int, grace: float) -> dict[str, float]:
    unit = f"cohort-bench-{secrets.token_hex(8)}.scope"  # the shape a claim records (cohort-<id>.scope)
    handle = launcher.launch(unit, ["/usr/bin/python3", tree, json.dumps(spec(n))], env={"PATH": "/usr/bin:/bin"},
                             cwd=stage)
    stdin_fd, stdout_fd = handle.take_stdio()
    try:
        read_line(stdout_fd)
        marks: dict[str, float] = {}

        def hook(machine: object, action: object) -> None:
            marks[type(action).__name__] = time.monotonic()

        verifier = FixtureVerifier()
        t0 = time.monotonic()
        result = force_stop(handle.ref, StopRequest("bench", "bench", "bench", {"confirmation": "bench"}),
                            grace=grace, verifier=verifier, on_action=hook)
        t1 = time.monotonic()
        if result.outcome.state != "stopped" or result.proof is None:
            raise RuntimeError(f"stop not proven: {result.outcome.reason} {result.outcome.detail}")
        verifier.verify(result.proof)
        grace_spent = marks["Freeze"] - marks[AwaitGrace.__name__]
        order = ["CheckIdentity", "SendTerm", "AwaitGrace", "Freeze", "Enumerate", "RecheckFrozen", "Kill",
                 "Collect"]
        phases = {k: (marks[order[i + 1]] if i + 1 < len(order) else t1) - marks[k] for i, k in enumerate(order)}
        return {"total": t1 - t0, "grace": grace_spent, "members": float(len(result.proof["members"])),
                **{f"phase:{k}": v for k, v in phases.items()}}
    finally:
        os.close(stdin_fd)
        os.close(stdout_fd)
        handle.release(force=True)


def reap_all(timeout: float = 10.0) -> None:
    """Reap every child (the floor's tree, adopted as a subreaper) until none is left, bounded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG) is None:
                time.sleep(0.005)
        except ChildProcessError:
            return


def run_floor(parent: str, tree: str, stage: str, n: int, creds: Credentials) -> dict[str, float]:
    path = os.path.join(parent, f"floor-{secrets.token_hex(4)}")
    os.mkdir(path)
    for rel in (".", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
        os.chown(os.path.join(path, rel), creds.uid, creds.gid)
    r, w = os.pipe2(os.O_CLOEXEC)
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    fd = os.open(path, O_DIR)
    try:
        child = spawn(["/usr/bin/python3", tree, json.dumps(spec(n))], env={"PATH": "/usr/bin:/bin"},
                      fds={0: devnull, 1: w, 2: devnull}, cgroup_fd=fd, credentials=creds, no_new_privs=True,
                      cwd=stage)
        os.close(w)
        read_line(r)
        t0 = time.monotonic()
        write_value(fd, "cgroup.freeze", "1")
        ok, _ = wait_events(fd, lambda e: e.frozen is True, 30)
        t1 = time.monotonic()
        write_value(fd, "cgroup.kill", "1")
        ok2, _ = wait_events(fd, lambda e: not e.populated, 30)
        t2 = time.monotonic()
        if not (ok and ok2):
            raise RuntimeError("floor: freeze or kill did not settle")
        child.close()
        reap_all()
        return {"floor": t2 - t0, "freeze": t1 - t0, "kill": t2 - t1}
    finally:
        os.close(fd)
        os.close(r)
        os.close(devnull)
        remove_tree(path)


ENGINE = ["/bin/sh", "-c", "date +%s.%N; exec cat"]  # says when it runs, then waits for EOF


def time_launches(launcher: Launcher, rounds: int, *, prewarm: float | None = None) -> tuple[float, float]:
    """Medians in seconds of ``launcher.launch`` and of the call until the engine runs (``ENGINE``), each
    cohort released after; with ``prewarm`` (a lead in seconds), ``prewarm()`` that long before each launch."""
    launches, ups = [], []
    for _ in range(rounds + 1):  # the first one warms the caches and is not counted
        unit = f"cohort-bench-{secrets.token_hex(8)}.scope"
        if prewarm is not None:
            launcher.prewarm()
            time.sleep(prewarm)
        t0, m0 = time.time(), time.monotonic()
        handle = launcher.launch(unit, ENGINE, env={"PATH": "/usr/bin:/bin"})
        launches.append(time.monotonic() - m0)
        stdin_fd, stdout_fd = handle.take_stdio()
        ups.append(float(first_line(stdout_fd, 30.0, chunk=1)) - t0)
        os.close(stdin_fd)  # cat exits on EOF
        os.close(stdout_fd)
        handle.release(force=True)
    launcher.close()
    return statistics.median(launches[1:]), statistics.median(ups[1:])


def time_floor_engine(rounds: int) -> float:
    """Median seconds from ``subprocess.Popen`` of ``ENGINE`` (as this process's uid) until it runs."""
    ups = []
    for _ in range(rounds + 1):
        t0 = time.time()
        proc = subprocess.Popen(ENGINE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={"PATH": "/usr/bin:/bin"})
        assert proc.stdout is not None and proc.stdin is not None
        ups.append(float(first_line(proc.stdout.fileno(), 30.0, chunk=1)) - t0)
        proc.stdin.close()
        proc.stdout.close()
        proc.wait()
    return statistics.median(ups[1:])


def time_spawns(rounds: int, *, helper: bool) -> float:
    """Median seconds of one ``spawn`` of ``/bin/true``, in this process or through the spawn helper."""
    times = []
    for _ in range(rounds + 1):
        t0 = time.monotonic()
        child = (spawn_in_helper(sys.executable, ["/bin/true"], env={}, fds={}) if helper
                 else spawn(["/bin/true"], env={}))
        times.append(time.monotonic() - t0)
        os.waitpid(child.pid, 0)
        child.close()
    return statistics.median(times[1:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="*", default=[100, 800])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--grace", type=float, default=0.5)
    ap.add_argument("--launches", type=int, default=10)
    ap.add_argument("--lead", type=float, default=0.05, help="seconds between prewarm() and launch()")
    ap.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    a = ap.parse_args()
    if a.quick:
        a.sizes = [100]
        a.repeats = 1
        a.launches = 2
    if os.geteuid() != 0:
        print("bench_stop: needs root (cgroups under the cgroup2 root, an engine uid)", file=sys.stderr)
        return 2
    try:
        creds = engine_account()
    except EngineAccountError as e:
        print(f"bench_stop: the engine account: {e}", file=sys.stderr)
        return 2
    parent = os.path.join(find_cgroup2().mount_point, f"mosaic-cohort-bench-{secrets.token_hex(4)}")
    os.mkdir(parent)
    stage = tempfile.mkdtemp(prefix="mosaic-cohort-bench-")
    socks = tempfile.mkdtemp(prefix="mosaic-cohort-bench-sock-")
    os.chmod(socks, 0o700)
    tree = stage_tree(stage)
    # The floor's tree is this process's grandchildren: adopt and reap them (PID 1 here reaps late).
    set_child_subreaper(True)
    try:
        launcher = DirectCgroupLauncher(parent, socks, engine=creds)
        print(f"{'N':>5} {'members':>8} {'stop s':>8} {'grace s':>8} {'stop-grace':>10} {'floor s':>8} "
              f"{'ratio':>6}   (medians of {a.repeats}; grace bound {a.grace}s)")
        for n in a.sizes:
            stops = [run_stop(launcher, tree, stage, n, a.grace) for _ in range(a.repeats)]
            floors = [run_floor(parent, tree, stage, n, creds) for _ in range(a.repeats)]
            total = statistics.median(s["total"] for s in stops)
            grace = statistics.median(s["grace"] for s in stops)
            net = statistics.median(s["total"] - s["grace"] for s in stops)
            members = statistics.median(s["members"] for s in stops)
            floor = statistics.median(f["floor"] for f in floors)
            print(f"{n:>5} {members:>8.0f} {total:>8.3f} {grace:>8.3f} {net:>10.3f} {floor:>8.3f} "
                  f"{net / floor:>6.1f}")
            phases = {k.split(":", 1)[1]: statistics.median(s[k] for s in stops) for k in stops[0]
                      if k.startswith("phase:")}
            print("       phases (median s): " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
            kill_phase = statistics.median(
                sum(s[f"phase:{k}"] for k in ("Freeze", "Enumerate", "RecheckFrozen", "Kill", "Collect"))
                for s in stops)
            print(f"       kill phase (freeze .. deaths collected) {kill_phase:.3f} s = "
                  f"{kill_phase / floor:.1f} x floor; TERM phase {phases['SendTerm']:.3f} s")
            print(f"       floor: freeze {statistics.median(f['freeze'] for f in floors):.3f}, "
                  f"kill {statistics.median(f['kill'] for f in floors):.3f}")
        if a.launches > 0:
            print(f"launch (medians of {a.launches}; prewarmed: prewarm(), {a.lead * 1000:.0f} ms of other work, "
                  "launch): launch() returns / the engine runs")
            for name, make in (("direct", lambda: launcher),
                               ("process group", lambda: PgroupLauncher(engine=creds))):
                cold = time_launches(make(), a.launches)
                warm = time_launches(make(), a.launches, prewarm=a.lead)
                print(f"  {name:>13}: cold {cold[0] * 1000:5.1f} / {cold[1] * 1000:5.1f} ms; "
                      f"prewarmed {warm[0] * 1000:5.1f} / {warm[1] * 1000:5.1f} ms")
            print(f"  floor: the same engine started with subprocess.Popen runs after "
                  f"{time_floor_engine(a.launches) * 1000:.1f} ms")
            inproc, helped = time_spawns(a.launches, helper=False), time_spawns(a.launches, helper=True)
            print(f"  spawn of /bin/true in this process {inproc * 1000:.1f} ms, through a cold spawn helper "
                  f"{helped * 1000:.1f} ms (+{(helped - inproc) * 1000:.1f} ms)")
    finally:
        remove_tree(parent)
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(socks, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
