#!/usr/bin/env python3
"""Benchmark: a controller on sessions of any length (issue 27), on the sealed real Pi 0.85.1: start-up and
turn end at 100, 200, 400, 800, 3,000 and 11,265 entries and at 93 MB, as ratios against floors measured in
the same run.

Not a test; nothing is asserted. Needs root and a writable cgroup2, like bench_lifecycle.py (whose set-up it
reuses: the engine account, a readable copy of the install, a parent cgroup removed by name at the end);
``nox -s bench`` runs it inside the loopback-only network namespace with the scripted model server here.
Without ``MOSAIC_PI_DIR`` it runs pi-rpc's fake engine, and says so.

Every session is written at run time by pi-rpc's generator (`mosaic.pi_rpc.testing.sessions`: realistic
entries in one chain, assistant messages with usage, tool calls and results, thinking-level and model
changes, a compaction near the end) into a scratch tree, and removed with it. Per length, each round:

1. start-up: `LaunchingController.start()` (restart classification, the claim, the launch in a cgroup, K8's load
   check) until a client's first `observe` is answered (the core holds it until the takeover drift check,
   which reads every entry and every line, has ended): the moment a client can take control. Also shown:
   the engine's own part, from the launch to its first `get_state` answer (Pi reading the file).
2. turn end: a prompt runs; from the link reading the run's `agent_settled` to the client receiving the
   finished receipt, which the core holds until the drift check after the turn (incremental: one read and
   one SHA-256 pass over the file, the turn's own lines decoded) gave its verdict.
3. the execution is force stopped with a proof and its cohort released.

Floors, in the same run: the same figures on a 100-entry session, and one SHA-256 pass over the session
file (`hashlib.file_digest`, the file in the page cache). Ratios: start-up / start-up at 100 entries;
turn end / (turn end at 100 entries + one SHA-256 pass over this file).

    python packages/controller/bench/bench_length.py [--rounds R] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import bench_lifecycle  # this directory: the engine account, the install copy, the cgroup parent, the launcher

from mosaic.cgroup_cohort import FixtureVerifier, release_cohort
from mosaic.controller import Hooks, LaunchingController, Placement
from mosaic.controller.testing import FixtureTree, RawClient, receipt_is
from mosaic.pi_rpc.link import EngineEvent
from mosaic.pi_rpc.testing import ModelServer
from mosaic.pi_rpc.testing.sessions import write_session

LENGTHS: list[tuple[str, dict[str, int]]] = [
    ("100 entries", {"entries": 100}), ("200 entries", {"entries": 200}), ("400 entries", {"entries": 400}),
    ("800 entries", {"entries": 800}), ("3,000 entries", {"entries": 3000}),
    ("11,265 entries", {"entries": 11265}), ("93 MB", {"size": 93_000_000}),
]
WAIT = 300.0


def make_tree(bench: bench_lifecycle.Bench, model_url: str, length: dict[str, int]) -> tuple[FixtureTree, int, int]:
    """A fixture tree with a generated session of `length`; (tree, entries, bytes)."""
    tree = FixtureTree(Path(tempfile.mkdtemp(prefix="len-", dir=bench.base)))
    os.chmod(tree.root, 0o755)
    tree.make((bench.creds.uid, bench.creds.gid), model_url=model_url)
    made = write_session(tree.session, cwd=str(tree.project), session_id=tree.session_id, **length)
    os.chown(tree.session, bench.creds.uid, bench.creds.gid)
    return tree, made.entries, made.size


async def one_round(bench: bench_lifecycle.Bench, model_url: str, length: dict[str, int]) -> dict[str, float]:
    tree, entries, size = make_tree(bench, model_url, length)
    socket_dir = tempfile.mkdtemp(prefix="c-", dir=bench.sockets)
    marks: dict[str, float] = {}
    settled: list[float] = []

    def on_events(batch: list[Any]) -> None:
        if any(isinstance(e, EngineEvent) and e.type == "agent_settled" for e in batch):
            settled.append(time.monotonic())

    hooks = Hooks(on_launch_step=lambda name: marks.setdefault(name, time.monotonic()), on_engine_events=on_events)
    controller = LaunchingController(Placement(**tree.placement(socket_dir)), bench.spec(tree), bench.launcher,
                                     verifier=FixtureVerifier(), stop_grace=bench.args.grace, hooks=hooks)
    ref = None
    try:
        t0 = time.monotonic()
        await controller.start()
        ref = controller.execution.ref if controller.execution else None
        c = await RawClient.connect(controller.socket_path)
        observed = (await c.call("observe"))["result"]
        startup = time.monotonic() - t0
        binding = observed["binding"]
        if (binding["state"], binding["admission"]) != ("active", "open"):
            raise RuntimeError(f"the controller did not take control: {binding}")
        auth = await c.control()
        reply = await c.call("prompt", **auth, clientRequestId="t1", text="Say hello")
        if reply.get("result", {}).get("outcome") != "admitted":
            raise RuntimeError(f"the prompt was not admitted: {reply}")
        await c.until(receipt_is("finished"), WAIT)
        turn_end = time.monotonic() - settled[-1]
        await c.force_stop(auth)
        final = await c.stop_outcome(WAIT)
        if final["state"] != "stopped":
            raise RuntimeError(f"the stop was not proven: {final}")
        await c.close()
        with open(tree.session, "rb") as f:
            t1 = time.monotonic()
            hashlib.file_digest(f, "sha256")
            sha = time.monotonic() - t1
        return {"startup": startup, "engine": marks["first-get-state"] - marks["launched"], "turn_end": turn_end,
                "sha": sha, "entries": entries, "bytes": size}
    finally:
        await controller.aclose()
        if ref is not None:
            release_cohort(ref, force=True)
        shutil.rmtree(tree.root, ignore_errors=True)
        shutil.rmtree(socket_dir, ignore_errors=True)


async def run(bench: bench_lifecycle.Bench, rounds: int, lengths: list[tuple[str, dict[str, int]]]) \
        -> dict[str, list[dict[str, float]]]:
    out: dict[str, list[dict[str, float]]] = {name: [] for name, _ in lengths}
    with ModelServer() as model:
        await one_round(bench, model.base_url, {"entries": 100})  # warm the page cache and the engine; not counted
        for r in range(rounds):
            order = lengths if r % 2 == 0 else lengths[::-1]
            for name, length in order:
                out[name].append(await one_round(bench, model.base_url, length))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--grace", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true", help="one round, without the 93 MB session (CI's quick pass)")
    a = ap.parse_args()
    lengths = LENGTHS[:-1] if a.quick else LENGTHS
    if a.quick:
        a.rounds = 1
    if os.geteuid() != 0:
        print("bench_length: needs root (a cgroup under the cgroup2 root)", file=sys.stderr)
        return 2
    bench = bench_lifecycle.Bench(a)
    try:
        t0 = time.monotonic()
        results = asyncio.run(run(bench, a.rounds, lengths))
        took = time.monotonic() - t0
    finally:
        bench.close()

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    base_start, base_turn = med("100 entries", "startup"), med("100 entries", "turn_end")
    print(f"engine: {bench.engine_name}; {a.rounds} round(s) per length, the order reversed every other round; "
          f"medians; {took:.0f} s")
    print("| session | entries | size | start-up (of it the engine's own) | ratio to 100 entries | turn end | "
          "one SHA-256 pass | ratio to (100-entry turn end + SHA pass) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, _ in lengths:
        start, engine, turn, sha = (med(name, k) for k in ("startup", "engine", "turn_end", "sha"))
        first = results[name][0]
        print(f"| {name} | {int(first['entries']):,} | {first['bytes'] / 1e6:.1f} MB | {start * 1000:.0f} ms "
              f"({engine * 1000:.0f} ms) | {start / base_start:.2f} | {turn * 1000:.1f} ms | {sha * 1000:.1f} ms | "
              f"{turn / (base_turn + sha):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
