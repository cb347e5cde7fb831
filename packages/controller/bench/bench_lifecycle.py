#!/usr/bin/env python3
"""Benchmark: the lifecycle's three figures (launch, force stop, restart classification), each against a
floor measured in the same run.

Not a test; nothing is asserted. Needs root and a writable cgroup2 (a parent cgroup is made under the
mount found in /proc/self/mountinfo and removed by name at the end). The engine is the sealed pinned Pi
0.85.1 when ``MOSAIC_PI_DIR`` names its install (``nox -s bench`` prepares it and runs this inside the
loopback-only network namespace); otherwise pi-rpc's fake engine, and the table says so. Under the
controller the engine runs as the engine account (`cohorttest`: cgroup-cohort `testing.account`), as a contained
cohort must, from a hard-linked copy of the install it can read (`readable_install`); the floor's direct
spawn runs the same copy as this process's uid.

1. Launch: a `LaunchingController` on a fresh claim root and session, from the claim reservation (the "acquiring"
   step: before `acquire`) to the engine answering its first ``get_state`` (the load check's first
   request), through the direct-cgroup launcher; also the whole ``start()`` (restart classification, the
   rest of the load check, the socket up). Floor: the same sealed argv spawned directly (a plain child,
   no claim, no cgroup) until the same first ``get_state`` answer. Goal: <= 1.2x.
2. Force stop: through the controller's socket, from the answered confirmation (the ``force-stop`` call) to
   the ``stop`` record ``stopped``, by which time both claim keys are stopped with the proof's digest.
   Floor: cgroup-cohort's own ``force_stop`` of the same engine launched by the same launcher (same grace
   bound), from the call to the proof. Goal: <= 1.3x.
3. Restart classification of N claims whose owner is gone (N = 200 and 1,000): one claim root, N pairs,
   each reserved by a child process that then exits; then `ClaimStore.restart` on every pair with the
   controller's cohort probe (each is classified stopped-no-unit, W14, and published). Reported: time per
   claim, the floor per claim (reading both heads of the pair: `observe`), and how the per-claim time
   grows from N=200 to N=1,000 (1.0 = linear).

    python packages/controller/bench/bench_lifecycle.py [--rounds R] [--claims 200 1000] [--grace G]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mosaic.pi_rpc as pi_rpc_package
import mosaic.safe_open as safe_open_package
from mosaic.cgroup_cohort import (
    Credentials,
    DirectCgroupLauncher,
    FixtureVerifier,
    StopRequest,
    force_stop,
    release_cohort,
)
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2
from mosaic.cgroup_cohort.testing.account import engine_account
from mosaic.controller import Hooks, LaunchingController, PiSpec, Placement
from mosaic.controller.lifecycle import ClaimCohortProbe
from mosaic.controller.testing import FixtureTree, RawClient, readable_install, readable_packages
from mosaic.pi_rpc import EngineLink, LinkCore, sealed_engine_argv
from mosaic.writer_claim import ClaimStore, SeatKey, SessionKey

REPO = Path(__file__).resolve().parents[3]
OWNER = """
import sys
from mosaic.writer_claim import Binding, ClaimStore, Pins, SeatKey, SessionKey
root, n = sys.argv[1], int(sys.argv[2])
store = ClaimStore(root)
pins = Pins("0.85.1", "sha256:" + "0" * 64, "sha256:" + "1" * 64)
for i in range(n):
    store.acquire(SeatKey(f"seat-{i}", f"/p/{i}", f"/p/{i}"), SessionKey("pi", f"session-{i}"),
                  Binding(f"b-{i}", "pi", f"conv-{i}", "main", None, pins))
"""
def new_tree(base: str, creds: Credentials) -> FixtureTree:
    """One fixture tree (home, agent dir, project with its session file, claim root) in a new directory."""
    tree = FixtureTree(Path(tempfile.mkdtemp(prefix="tree-", dir=base)))
    os.chmod(tree.root, 0o755)
    tree.make((creds.uid, creds.gid))
    return tree


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.pi_dir = os.environ.get("MOSAIC_PI_DIR") or None
        self.creds = engine_account()
        self.base = tempfile.mkdtemp(prefix="mosaic-ctl-bench-")
        os.chmod(self.base, 0o755)
        if self.pi_dir:
            self.install = str(readable_install(self.pi_dir, self.base))
        else:  # the fake engine and the one package it imports, for /usr/bin/python3 as the engine uid
            self.install = str(readable_packages([pi_rpc_package, safe_open_package], self.base))
        self.sockets = tempfile.mkdtemp(prefix="mosaic-ctl-bench-sock-")
        os.chmod(self.sockets, 0o700)
        self.parent = os.path.join(find_cgroup2().mount_point, f"mosaic-ctl-bench-{secrets.token_hex(4)}")
        os.mkdir(self.parent)
        self.launcher = DirectCgroupLauncher(self.parent, self.sockets, engine=self.creds)
        self.engine_name = "pinned Pi 0.85.1 (sealed)" if self.pi_dir else "pi-rpc fake engine (no MOSAIC_PI_DIR)"

    def spec(self, tree: FixtureTree) -> PiSpec:
        extra = {} if self.pi_dir else {"PYTHONPATH": self.install}
        command = None if self.pi_dir else ("/usr/bin/python3", "-m", "mosaic.pi_rpc.testing.fake_engine")
        return PiSpec(env=tree.engine_env(**extra), pi_dir=self.install if self.pi_dir else None, command=command,
                          provider="fakeprov", model="fake-model-1")

    def argv(self, tree: FixtureTree) -> list[str]:
        spec = self.spec(tree)
        return sealed_engine_argv(spec.pi_dir or "", str(tree.session), provider="fakeprov", model="fake-model-1",
                                  command=spec.command)

    # -------------------------------------------------------------------------------- 1 and 2, paired

    async def controller_round(self) -> dict[str, float]:
        tree = new_tree(self.base, self.creds)
        socket_dir = tempfile.mkdtemp(prefix="c-", dir=self.sockets)
        marks: dict[str, float] = {}
        hooks = Hooks(on_launch_step=lambda name: marks.setdefault(name, time.monotonic()))
        controller = LaunchingController(
            Placement(**tree.placement(socket_dir)),
            self.spec(tree), self.launcher, verifier=FixtureVerifier(), stop_grace=self.args.grace, hooks=hooks)
        t0 = time.monotonic()
        await controller.start()
        started = time.monotonic() - t0
        launch = marks["first-get-state"] - marks["acquiring"]
        ref = controller.execution.ref if controller.execution else None
        try:
            c = await RawClient.connect(controller.socket_path)
            auth = await c.control()
            cid = await c.confirm("force-stop", auth)
            t1 = time.monotonic()
            await c.call("force-stop", incarnation=auth["incarnation"], confirmation=cid)
            final = await c.stop_outcome(120)
            stop = time.monotonic() - t1
            await c.close()
            if final["state"] != "stopped":
                raise RuntimeError(f"the controller's stop was not proven: {final}")
        finally:
            await controller.aclose()
            if ref is not None:
                release_cohort(ref, force=True)
            shutil.rmtree(tree.root, ignore_errors=True)
            shutil.rmtree(socket_dir, ignore_errors=True)
        return {"launch": launch, "start": started, "stop": stop}

    async def floor_launch(self) -> float:
        tree = new_tree(self.base, self.creds)
        try:
            t0 = time.monotonic()
            link = await EngineLink.spawn(self.argv(tree), env=self.spec(tree).env, cwd=str(tree.project),
                                          core=LinkCore(default_bound=30.0), clock=time.time)
            try:
                await asyncio.wait_for(link.request({"type": "get_state"}), 30)
                return time.monotonic() - t0
            finally:
                await link.aclose()
        finally:
            shutil.rmtree(tree.root, ignore_errors=True)

    def floor_stop(self) -> float:
        tree = new_tree(self.base, self.creds)
        unit = f"cohort-bench-{secrets.token_hex(8)}.scope"
        handle = self.launcher.launch(unit, self.argv(tree), env=dict(self.spec(tree).env), cwd=str(tree.project))
        wfd, rfd = handle.take_stdio()
        try:
            os.write(wfd, b'{"type":"get_state","id":"b1"}\n')
            buf = b""
            while b'"get_state"' not in buf:
                chunk = os.read(rfd, 65536)
                if not chunk:
                    raise RuntimeError("the engine ended before answering")
                buf += chunk
            t0 = time.monotonic()
            result = force_stop(handle.ref, StopRequest("bench", "bench", "bench", {"confirmation": "bench"}),
                                grace=self.args.grace, verifier=FixtureVerifier())
            took = time.monotonic() - t0
            if result.outcome.state != "stopped":
                raise RuntimeError(f"floor stop not proven: {result.outcome.reason}")
            return took
        finally:
            os.close(wfd)
            os.close(rfd)
            handle.release(force=True)
            shutil.rmtree(tree.root, ignore_errors=True)

    # ------------------------------------------------------------------------------------------ 3

    def restart(self, n: int) -> dict[str, float]:
        root = tempfile.mkdtemp(prefix="claims-", dir=self.base)
        os.chmod(root, 0o700)
        pairs = [(SeatKey(f"seat-{i}", f"/p/{i}", f"/p/{i}"), SessionKey("pi", f"session-{i}")) for i in range(n)]
        # The owner that reserves every pair, then is gone: a process of its own (this one has threads).
        subprocess.run([sys.executable, "-c", OWNER, root, str(n)], check=True)
        try:
            store = ClaimStore(root)
            probe = ClaimCohortProbe(self.launcher, verifier=FixtureVerifier())
            t0 = time.monotonic()
            for seat, session in pairs:
                store.observe(seat, session)
            floor = time.monotonic() - t0
            t0 = time.monotonic()
            outcomes = set()
            for seat, session in pairs:
                report = store.restart(seat, session, probe)
                outcomes.update(o.value for o in report.outcomes)
            took = time.monotonic() - t0
            if outcomes != {"stopped-no-unit"}:
                raise RuntimeError(f"unexpected restart outcomes {outcomes}")
            store.close()
            return {"per_claim": took / n, "floor_per_claim": floor / n}
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def close(self) -> None:
        os.rmdir(self.parent)  # every cohort under it was released by its reference
        shutil.rmtree(self.base, ignore_errors=True)
        shutil.rmtree(self.sockets, ignore_errors=True)


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    return f"{(max(values) - min(values)) / med * 100:.0f}%" if med else "-"


async def paired(bench: Bench, rounds: int) -> tuple[list[dict[str, float]], list[float], list[float]]:
    ctl, fl, fs = [], [], []
    await bench.floor_launch()  # warm the page cache for both sides; not counted
    for i in range(rounds):
        if i % 2:
            ctl.append(await bench.controller_round())
            fl.append(await bench.floor_launch())
        else:
            fl.append(await bench.floor_launch())
            ctl.append(await bench.controller_round())
        fs.append(await asyncio.get_running_loop().run_in_executor(None, bench.floor_stop))
    return ctl, fl, fs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--claims", type=int, nargs="+", default=[200, 1000])
    ap.add_argument("--grace", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    a = ap.parse_args()
    if a.quick:
        a.rounds = 1
        a.claims = [20]
    if os.geteuid() != 0:
        print("bench_lifecycle: needs root (a cgroup under the cgroup2 root)", file=sys.stderr)
        return 2
    bench = Bench(a)
    try:
        print(f"engine: {bench.engine_name}; {a.rounds} rounds, floor and controller alternating; grace bound "
              f"{a.grace}s")
        ctl, fl, fs = asyncio.run(paired(bench, a.rounds))
        launch = statistics.median(r["launch"] for r in ctl)
        start = statistics.median(r["start"] for r in ctl)
        floor_launch = statistics.median(fl)
        print(f"1. launch, reservation -> first get_state: {launch * 1000:.0f} ms (spread "
              f"{spread([r['launch'] for r in ctl])}); floor, the same argv spawned directly: "
              f"{floor_launch * 1000:.0f} ms (spread {spread(fl)}); ratio {launch / floor_launch:.2f} (goal <= 1.2)")
        print(f"   whole start() (restart classification, load check, socket up): {start * 1000:.0f} ms")
        stop = statistics.median(r["stop"] for r in ctl)
        floor_stop = statistics.median(fs)
        print(f"2. force stop, confirmation answered -> both keys stopped with the proof: {stop * 1000:.0f} ms "
              f"(spread {spread([r['stop'] for r in ctl])}); floor, cgroup-cohort force_stop of the same engine: "
              f"{floor_stop * 1000:.0f} ms (spread {spread(fs)}); ratio {stop / floor_stop:.2f} (goal <= 1.3)")
        per: dict[int, dict[str, float]] = {}
        for n in a.claims:
            per[n] = bench.restart(n)
            print(f"3. restart classification of {n} claims (owner gone, no unit -> stopped-no-unit): "
                  f"{per[n]['per_claim'] * 1000:.2f} ms per claim; floor (read both heads) "
                  f"{per[n]['floor_per_claim'] * 1000:.3f} ms per claim; ratio "
                  f"{per[n]['per_claim'] / per[n]['floor_per_claim']:.1f}")
        if len(a.claims) >= 2:
            lo, hi = min(a.claims), max(a.claims)
            print(f"   per-claim time at {hi} / at {lo}: {per[hi]['per_claim'] / per[lo]['per_claim']:.2f} "
                  f"(1.0 = linear growth of the total)")
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
