"""Benchmark: one full claim cycle against the floor of its own durability calls, at 0, 1,000 and 10,000
cycles of history.

A cycle is acquire -> spawn marker -> active -> stopping -> stopped (release with a cohort proof) for one
pair: 5 steps on 2 keys, 10 publications. The floor, measured in the same run in the same kind of
directory on the same file system, is the same 10 publications done bare: create a temporary file, write
the same number of bytes, fsync it, link() it to the next revision name, fsync the directory, unlink the
temporary name, alternating between two directories. The ratio cycle / floor is what the store costs on
top of the fsync + link + directory fsync it cannot avoid (finding both heads, deciding, encoding).

History: each level has its own claim root whose pair already has H cycles behind it (5 H revisions per
key: one real lifecycle, hard-linked placeholders, and a real stopped head at 5 H, made at bench time in
about a second, never committed), and its own floor directories holding as many names, so that the floor
links into a directory of the same size. One long-lived store per level runs the cycles, as a controller
does. A head lookup that listed and parsed every name would grow with the history; the figures to read
are the cycle at H against the cycle at 0 (goal: within 1.1x at 10,000) and each cycle against its floor
(goal: at most 1.15x, issue 34). Also reported per level: what a store's first look at the pair costs (a new process;
existence checks, no listing) and, for comparison, what listing both chains costs (the lookup the head
search replaced: CHANGELOG.md has the history).

    python packages/writer-claim/bench/bench_claim.py [--cycles N] [--history 0,1000,10000] [--dir DIR] [--json]

Rounds alternate floor and cycle, level after level, so drift in the machine's load hits all alike; the
medians are reported, with this process's CPU time per cycle (less sensitive to other load than wall time).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mosaic.safe_open import ProcessRef
from mosaic.writer_claim import Binding, Claim, ClaimStore, Pins, ProofKind, ProofRef, SeatKey, SessionKey
from mosaic.writer_claim.internals import encode_revision

SEAT = SeatKey("bench-seat", "/bench/project", "main")
SESSION = SessionKey("pi", "01a22a58-944f-7072-a9ab-f808835fc6a2")
BINDING = Binding("bench-binding", "pi", "pi-bench", "main", "leaf", Pins("0.85.1", "ab" * 32, "sha256:" + "cd" * 32))
PROOF = ProofRef(ProofKind.COHORT, "sha256:" + "ef" * 32, {"bench": True})
GOAL_VS_FIRST = 1.1
GOAL_VS_FLOOR = 1.15  # the cycle against its floor (README "Benchmark", issue 34)

ENGINE = ProcessRef(4242, 99)
REVISION_NAME = re.compile(r"r([0-9]{10})\.json")


def parse_revision_name(name: str) -> int | None:
    m = REVISION_NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def cohort_reference(claim_id: str, store: ClaimStore) -> dict[str, object]:
    """A cohort reference of the size and shape a scope launcher records (cgroup-cohort's
    `CohortRef.to_dict()`), so the revisions measured are as large as real ones."""
    unit = f"cohort-{claim_id}.scope"
    return {
        "kind": "scope", "claimId": claim_id, "unit": unit, **store.host.to_dict(), "engine": ENGINE.to_dict(),
        "socketPath": f"/run/user/1000/mosaic/{claim_id}.sock", "invocationId": "bench-invocation",
        "cgroupPath": f"/user.slice/user-1000.slice/user@1000.service/app.slice/{unit}/engine",
        "unitCgroupId": 7001, "engineCgroupId": 7002, "shim": {"pid": 4241, "startTime": 98}, "pgid": None,
        "containment": {"held": True, "method": "nsdelegate", "attempts": [["/", "EACCES"]]},
        "features": ["cgroup.freeze", "cgroup.kill"],
    }


def one_cycle(store: ClaimStore) -> Claim:
    """One full cycle; returns its claim."""
    c = store.acquire(SEAT, SESSION, BINDING)
    c.mark_spawn()
    c.activate(invocation_id="bench-invocation", engine=ENGINE, cohort=cohort_reference(c.claim_id, store))
    c.begin_stop("bench-stop")
    c.release(PROOF)
    return c


def revision_sizes(c: Claim) -> list[int]:
    """The sizes of the 10 revisions a cycle publishes, for the floor (taken outside the timed cycle)."""
    return [len(encode_revision(c.head("seat")))] * 10


def fill(directory: Path, upto: int) -> None:
    """Names r1 .. r<upto> in `directory` as hard links of one placeholder (only a head is ever read)."""
    have = max((n for n in (parse_revision_name(x) for x in os.listdir(directory)) if n is not None), default=0)
    if have >= upto:
        return
    filler = directory / ".bench-filler"
    filler.write_bytes(b"{}")
    for n in range(have + 1, upto + 1):
        os.link(filler, directory / f"r{n:010d}.json")
    filler.unlink()


def make_history(root: Path, cycles: int) -> None:
    """`cycles` whole claim cycles on the pair: a real lifecycle, placeholders, and a real stopped head at
    5 * cycles on each key, so the pair is free and the next acquisition links 5 * cycles + 1."""
    if cycles == 0:
        return
    with ClaimStore(root) as store:
        one_cycle(store)
        heads = {key: store.observe_key(key).revision for key in (SEAT, SESSION)}
    for key, rev in heads.items():
        assert rev is not None
        if cycles > 1:
            os.unlink(root / key.dirname / "r0000000005.json")
            fill(root / key.dirname, 5 * cycles - 1)
            (root / key.dirname / f"r{5 * cycles:010d}.json").write_bytes(encode_revision(rev.evolve(number=5 * cycles)))


@dataclass
class Level:
    history: int
    root: Path
    store: ClaimStore
    dirs: tuple[int, int]
    counter: list[int]
    cycle_s: list[float] = field(default_factory=list)
    floor_s: list[float] = field(default_factory=list)
    cycle_cpu: list[float] = field(default_factory=list)
    floor_cpu: list[float] = field(default_factory=list)


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


def _median_us(fn: object, repeat: int = 15) -> float:
    assert callable(fn)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def first_look_us(root: Path) -> float:
    """A new store's first look at both heads (a new process, a restart): existence checks, no listing."""
    def look() -> None:
        with ClaimStore(root) as s:
            s.observe(SEAT, SESSION)
    return _median_us(look)


def listing_us(root: Path) -> float:
    """Listing both chains and parsing every name: the lookup the head search replaced."""
    def listing() -> None:
        for key in (SEAT, SESSION):
            d = root / key.dirname
            if d.exists():
                max((n for n in (parse_revision_name(x) for x in os.listdir(d)) if n is not None), default=0)
    return _median_us(listing)


def _ms(x: float) -> float:
    return round(x * 1000, 3)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200, help="measured cycles per history level")
    parser.add_argument("--history", default="0,1000,10000", help="cycles of history before each level")
    parser.add_argument("--dir", default=None, help="parent directory for the scratch claim roots (same FS)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args(argv)
    if args.quick:
        args.cycles = 10
        args.history = '0,100'
    histories = [int(h) for h in args.history.split(",")]

    with tempfile.TemporaryDirectory(prefix="claim-bench-", dir=args.dir) as tmp:
        levels: list[Level] = []
        setup = time.perf_counter()
        try:
            for h in histories:
                root = Path(tmp) / f"claims-{h}"
                root.mkdir()
                make_history(root, h)
                fds = []
                for d in ("a", "b"):
                    (Path(tmp) / f"floor-{h}" / d).mkdir(parents=True)
                    fill(Path(tmp) / f"floor-{h}" / d, 5 * h)
                    fds.append(os.open(Path(tmp) / f"floor-{h}" / d, os.O_RDONLY | os.O_DIRECTORY))
                levels.append(Level(h, root, ClaimStore(root), (fds[0], fds[1]), [5 * h, 5 * h]))
            setup_s = time.perf_counter() - setup
            looks = {lv.history: (first_look_us(lv.root), listing_us(lv.root)) for lv in levels}
            sizes: list[int] = []
            for lv in levels:  # warm-up: the store's first look, and the revision size for the floor
                sizes = revision_sizes(one_cycle(lv.store))
                floor_cycle(lv.dirs, lv.counter, sizes)
            for i in range(args.cycles):
                for lv in levels[i % len(levels):] + levels[: i % len(levels)]:
                    t0, c0 = time.perf_counter(), time.process_time()
                    floor_cycle(lv.dirs, lv.counter, sizes)
                    t1, c1 = time.perf_counter(), time.process_time()
                    one_cycle(lv.store)
                    t2, c2 = time.perf_counter(), time.process_time()
                    lv.floor_s.append(t1 - t0)
                    lv.cycle_s.append(t2 - t1)
                    lv.floor_cpu.append(c1 - c0)
                    lv.cycle_cpu.append(c2 - c1)
        finally:
            for lv in levels:
                lv.store.close()
                for d in lv.dirs:
                    os.close(d)
        med = statistics.median
        first = levels[0]
        rows = []
        for lv in levels:
            cycle, floor = med(lv.cycle_s), med(lv.floor_s)
            rows.append({
                "history_cycles": lv.history,
                "cycle_median_ms": _ms(cycle),
                "cycle_p90_ms": _ms(statistics.quantiles(lv.cycle_s, n=10)[-1]),
                "floor_median_ms": _ms(floor),
                "floor_p90_ms": _ms(statistics.quantiles(lv.floor_s, n=10)[-1]),
                "cycle_vs_floor": round(cycle / floor, 2),
                "cycle_vs_first": round(cycle / med(first.cycle_s), 2),
                "cycle_cpu_median_ms": _ms(med(lv.cycle_cpu)),
                "floor_cpu_median_ms": _ms(med(lv.floor_cpu)),
                "cycle_cpu_vs_first": round(med(lv.cycle_cpu) / med(first.cycle_cpu), 2),
                "first_look_us": round(looks[lv.history][0], 1),
                "listing_both_chains_us": round(looks[lv.history][1], 1),
            })
        result = {
            "cycles_per_level": args.cycles,
            "publications_per_cycle": 10,
            "setup_s": round(setup_s, 2),
            "levels": rows,
            "goal_cycle_vs_first": GOAL_VS_FIRST,
            "goal_cycle_vs_floor": GOAL_VS_FLOOR,
            "filesystem_dir": str(Path(tmp).resolve()),
        }
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"claim cycle (acquire -> spawn marker -> active -> stopping -> stopped), {args.cycles} rounds per level, "
          f"medians; floor = 10 x (temp write + fsync + link + dir fsync + unlink) in directories of the same size")
    print(f"{'history':>8} {'cycle ms':>9} {'(p90)':>8} {'floor ms':>9} {'(p90)':>8} {'cyc/floor':>9} "
          f"{'cyc/first':>9} {'cpu ms':>7} {'cpu/first':>9} {'floor cpu':>9} {'1st look us':>11} {'listing us':>10}")
    for r in rows:
        print(f"{r['history_cycles']:>8} {r['cycle_median_ms']:>9} {r['cycle_p90_ms']:>8} {r['floor_median_ms']:>9} "
              f"{r['floor_p90_ms']:>8} {r['cycle_vs_floor']:>9} {r['cycle_vs_first']:>9} "
              f"{r['cycle_cpu_median_ms']:>7} {r['cycle_cpu_vs_first']:>9} {r['floor_cpu_median_ms']:>9} {r['first_look_us']:>11} "
              f"{r['listing_both_chains_us']:>10}")
    last = rows[-1]
    vs_first = "met" if last["cycle_vs_first"] <= GOAL_VS_FIRST else "missed"
    vs_floor = "met" if all(r["cycle_vs_floor"] <= GOAL_VS_FLOOR for r in rows) else "missed"
    print(f"goal: cycle after {last['history_cycles']} cycles of history <= {GOAL_VS_FIRST}x the first: "
          f"{last['cycle_vs_first']}x ({vs_first}; CPU {last['cycle_cpu_vs_first']}x)")
    print(f"goal: cycle <= {GOAL_VS_FLOOR}x its fsync floor at every level: "
          f"{', '.join(str(r['cycle_vs_floor']) for r in rows)} ({vs_floor})")
    cpu_over = [float(r["cycle_cpu_median_ms"]) - float(r["floor_cpu_median_ms"]) for r in rows]  # type: ignore[arg-type]
    print(f"row: claim cycle vs its fsync floor at history {' / '.join(str(r['history_cycles']) for r in rows)}: "
          f"{' / '.join(str(r['cycle_vs_floor']) for r in rows)} (goal <= {GOAL_VS_FLOOR} at every history: {vs_floor}); "
          f"cycle {' / '.join(str(r['cycle_median_ms']) for r in rows)} ms, floor "
          f"{' / '.join(str(r['floor_median_ms']) for r in rows)} ms; CPU over the floor "
          f"{' / '.join(f'+{over:.2f}' for over in cpu_over)} ms")
    print(f"(history made in {result['setup_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
