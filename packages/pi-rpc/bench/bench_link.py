"""Benchmark: what one command costs the engine link's core at minute 1 and at hour 10 of a session.

One cycle is a command's whole life in the core, as the shell drives it: ``send`` (bounded, 30 s),
``next_write``, ``write_done`` (whole), ``next_deadline`` (the shell re-arms its timer on every dispatch),
then ``feed`` of one chunk holding three streamed events and the command's response. The clock advances
1 ms per cycle, so bounds never pass and the deadline heap only ever sees settled entries (the case lazy
deletion must not turn into a leak).

In one run, on one core: 100 cycles of warm-up, then ``--windows`` windows of ``--window`` cycles
("early", from command 100), then cycles until ``--commands`` commands have gone through, then the same
windows again ("late"). Reported: the median cost per cycle of each (wall and CPU), the ratio late / early
(the goal is at most 1.1: a session costs the same per record at hour 10 as at minute 1), and what the
core retains: its in-flight, kept and deadline structures, and (second pass, under tracemalloc, not timed)
the memory allocated in the link's modules still held at each point.

    python packages/pi-rpc/bench/bench_link.py [--commands N] [--window W] [--windows K] [--json]

Nothing here asserts a time; the figures go in the package README.
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable

from mosaic.pi_rpc import LinkCore
from mosaic.pi_rpc.framing import encode_record
from mosaic.pi_rpc.link import OutcomeKnown

EVENT = encode_record({"type": "message_update", "usage": {"input": 40, "output": 7, "totalTokens": 47},
                       "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "tick07 "}})


class Driver:
    """One core and its clock; :meth:`cycle` runs one command through it."""

    def __init__(self) -> None:
        self.core = LinkCore(default_bound=30.0)
        self.now = 0.0
        self.count = 0

    def cycle(self) -> None:
        core = self.core
        self.now += 0.001
        cmd = core.send({"type": "get_state"}, now=self.now)
        w = core.next_write()
        assert w is cmd
        core.write_done(cmd, accepted=len(cmd.data), error=None, now=self.now)
        core.next_deadline()
        response = encode_record({"id": cmd.id, "type": "response", "command": "get_state", "success": True,
                                  "data": {"isStreaming": True, "messageCount": self.count}})
        events = core.feed(EVENT * 3 + response, now=self.now)
        assert events[-1] == OutcomeKnown(cmd)
        self.count += 1

    def run_until(self, total: int) -> None:
        while self.count < total:
            self.cycle()


def _windows(driver: Driver, window: int, windows: int) -> tuple[list[float], list[float]]:
    """Per-cycle wall and CPU seconds of each window."""
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(windows):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(window):
            driver.cycle()
        wall.append((time.perf_counter() - t0) / window)
        cpu.append((time.process_time() - c0) / window)
    return wall, cpu


def structures(core: LinkCore) -> dict[str, int]:
    """The sizes of what the core holds (private structures: this benchmark is part of the package)."""
    return {"in_flight": len(core.in_flight), "kept": len(core._kept), "deadline_heap": len(core._deadlines),
            "outbox": len(core._outbox)}


def retained_bytes(at: list[int]) -> list[int]:
    """Memory allocated in _link.py and _framing.py and still held, after ``at[i]`` commands (tracemalloc)."""
    files = {inspect.getfile(LinkCore), inspect.getfile(encode_record)}  # the modules that define them
    driver = Driver()
    out: list[int] = []
    tracemalloc.start()
    try:
        for total in at:
            driver.run_until(total)
            gc.collect()
            snap = tracemalloc.take_snapshot()
            out.append(sum(s.size for s in snap.statistics("filename") if s.traceback[0].filename in files))
    finally:
        tracemalloc.stop()
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--commands", type=int, default=100_000, help="commands before the late windows")
    parser.add_argument("--window", type=int, default=500, help="cycles per timed window")
    parser.add_argument("--windows", type=int, default=7, help="timed windows at each point")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args(argv)
    if args.quick:
        args.commands = 5000
        args.window = 100
        args.windows = 2

    driver = Driver()
    driver.run_until(100)
    early_wall, early_cpu = _windows(driver, args.window, args.windows)
    early_structures = structures(driver.core)
    driver.run_until(args.commands)
    late_wall, late_cpu = _windows(driver, args.window, args.windows)
    late_structures = structures(driver.core)
    early_mem, late_mem = retained_bytes([100, args.commands])

    med: Callable[[list[float]], float] = statistics.median
    result = {
        "cycle": "send + next_write + write_done + next_deadline + feed(3 events + response)",
        "early_after_commands": 100,
        "late_after_commands": args.commands,
        "early_us_per_cycle": round(med(early_wall) * 1e6, 2),
        "late_us_per_cycle": round(med(late_wall) * 1e6, 2),
        "ratio_wall": round(med(late_wall) / med(early_wall), 3),
        "early_cpu_us_per_cycle": round(med(early_cpu) * 1e6, 2),
        "late_cpu_us_per_cycle": round(med(late_cpu) * 1e6, 2),
        "ratio_cpu": round(med(late_cpu) / med(early_cpu), 3),
        "goal_ratio": 1.1,
        "core_structures_early": early_structures,
        "core_structures_late": late_structures,
        "retained_bytes_early": early_mem,
        "retained_bytes_late": late_mem,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"pi-rpc link core, one cycle = {result['cycle']}")
        print(f"  after {100:>7} commands: {result['early_us_per_cycle']:8.2f} us wall "
              f"{result['early_cpu_us_per_cycle']:8.2f} us cpu")
        print(f"  after {args.commands:>7} commands: {result['late_us_per_cycle']:8.2f} us wall "
              f"{result['late_cpu_us_per_cycle']:8.2f} us cpu")
        print(f"  ratio late/early: wall {result['ratio_wall']}, cpu {result['ratio_cpu']} (goal <= 1.1)")
        print(f"  core structures: early {early_structures}, late {late_structures}")
        print(f"  retained by _link.py/_framing.py: early {early_mem} B, late {late_mem} B")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
