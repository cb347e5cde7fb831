"""Benchmark: one full claim cycle against the floor of its own durability calls.

A cycle is acquire -> spawn marker -> active -> stopping -> stopped (release with a cohort proof) for one
pair: 5 steps on 2 keys, 10 publications. The floor, measured in the same run in the same kind of
directory on the same file system, is the same 10 publications done bare: create a temporary file, write
the same number of bytes, fsync it, link() it to the next revision name, fsync the directory, unlink the
temporary name, alternating between two directories. The ratio cycle / floor is what the store costs on
top of the fsync + link + directory fsync it cannot avoid (reading both chains, deciding, encoding).

    python packages/writer-claim/bench/bench_claim.py [--cycles N] [--dir DIR] [--json]

Rounds alternate floor and cycle so drift in the machine's load hits both; the medians are reported,
with this process's CPU time per round (less sensitive to other load than wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mosaic.safe_open import ProcessRef
from mosaic.writer_claim import (
    Binding,
    ClaimStore,
    Pins,
    ProofKind,
    ProofRef,
    SeatKey,
    SessionKey,
    encode_revision,
)

SEAT = SeatKey("bench-seat", "/bench/project", "main")
SESSION = SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2")
BINDING = Binding("bench-binding", "pi", "pi-bench", "main", "leaf", Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32))
PROOF = ProofRef(ProofKind.COHORT, "sha256:" + "ef" * 32, {"bench": True})


ENGINE = ProcessRef(4242, 99)


def cohort_reference(claim_id: str, store: ClaimStore) -> dict[str, object]:
    """A cohort reference of the size and shape a scope launcher records (cgroup-cohort's
    `CohortClaim.to_dict()`), so the revisions measured are as large as real ones."""
    unit = f"cohort-{claim_id}.scope"
    return {
        "kind": "scope", "claimId": claim_id, "unit": unit, **store.host.to_dict(), "engine": ENGINE.to_dict(),
        "socketPath": f"/run/user/1000/mosaic/{claim_id}.sock", "invocationId": "bench-invocation",
        "cgroupPath": f"/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}/engine",
        "unitCgroupId": 7001, "engineCgroupId": 7002, "shim": {"pid": 4241, "startTime": 98}, "pgid": None,
        "containment": {"held": True, "method": "nsdelegate", "attempts": [["/", "EACCES"]]},
        "features": ["cgroup.freeze", "cgroup.kill"],
    }


def one_cycle(store: ClaimStore) -> list[int]:
    """One full cycle; returns the sizes of the revisions it published (for the floor)."""
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="bench-invocation", engine=ENGINE, cohort=cohort_reference(c.claim_id, store))
    c.begin_stop("bench-stop")
    c.release(PROOF)
    return [len(encode_revision(c.head("seat")))] * 10


def floor_cycle(dirs: tuple[int, int], counter: list[int], sizes: list[int]) -> None:
    """The same 10 publications with nothing but the durability calls."""
    for i, size in enumerate(sizes):
        dfd = dirs[i % 2]
        counter[i % 2] += 1
        temp = f".tmp-{secrets.token_hex(4)}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        os.write(fd, b"x" * size)
        os.fsync(fd)
        os.close(fd)
        os.link(temp, f"r{counter[i % 2]:010d}.json", src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
        os.unlink(temp, dir_fd=dfd)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--dir", default=None, help="parent directory for the scratch claim root (same FS)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="claim-bench-", dir=args.dir) as tmp:
        root = Path(tmp) / "claims"
        floor_root = Path(tmp) / "floor"
        root.mkdir()
        for d in ("a", "b"):
            (floor_root / d).mkdir(parents=True)
        dirs = (os.open(floor_root / "a", os.O_RDONLY | os.O_DIRECTORY), os.open(floor_root / "b", os.O_RDONLY | os.O_DIRECTORY))
        counter = [0, 0]
        store = ClaimStore(root)
        sizes = one_cycle(store)  # warm-up, and the revision size for the floor
        floor_cycle(dirs, counter, sizes)
        cycle_s: list[float] = []
        floor_s: list[float] = []
        cycle_cpu: list[float] = []
        floor_cpu: list[float] = []
        try:
            for _ in range(args.cycles):
                t0, c0 = time.perf_counter(), time.process_time()
                floor_cycle(dirs, counter, sizes)
                t1, c1 = time.perf_counter(), time.process_time()
                one_cycle(store)
                t2, c2 = time.perf_counter(), time.process_time()
                floor_s.append(t1 - t0)
                cycle_s.append(t2 - t1)
                floor_cpu.append(c1 - c0)
                cycle_cpu.append(c2 - c1)
        finally:
            for d in dirs:
                os.close(d)
            store.close()
        cycle = statistics.median(cycle_s)
        floor = statistics.median(floor_s)
        result = {
            "cycles": args.cycles,
            "publications_per_cycle": 10,
            "cycle_median_ms": round(cycle * 1000, 3),
            "floor_median_ms": round(floor * 1000, 3),
            "ratio": round(cycle / floor, 2),
            "cycle_p90_ms": round(statistics.quantiles(cycle_s, n=10)[-1] * 1000, 3),
            "floor_p90_ms": round(statistics.quantiles(floor_s, n=10)[-1] * 1000, 3),
            "cycle_cpu_median_ms": round(statistics.median(cycle_cpu) * 1000, 3),
            "floor_cpu_median_ms": round(statistics.median(floor_cpu) * 1000, 3),
            "filesystem_dir": str(Path(tmp).resolve()),
        }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"claim cycle (acquire -> spawn marker -> active -> stopping -> stopped), {args.cycles} rounds")
        print(f"  cycle median {result['cycle_median_ms']} ms (p90 {result['cycle_p90_ms']} ms)")
        print(f"  floor median {result['floor_median_ms']} ms (p90 {result['floor_p90_ms']} ms): "
              "10 x (temp write + fsync + link + dir fsync + unlink)")
        print(f"  ratio cycle/floor: {result['ratio']}")
        print(f"  CPU time per round: cycle {result['cycle_cpu_median_ms']} ms, floor {result['floor_cpu_median_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
