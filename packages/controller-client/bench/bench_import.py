"""Benchmark: what importing the client package costs, installed alone, against `python -c pass` and
against `import asyncio` (which the client, an asyncio library, cannot do without).

    python packages/controller-client/bench/bench_import.py [--runs N] [--json] [--quick]

Each round starts fresh interpreters, in alternation so that drift in the machine's load hits every measure
alike, and times each whole process from the outside (start to exit):

- `pass`: `python -c pass`, the floor (the interpreter's own start);
- `asyncio`: `python -c "import asyncio"`, the client's own floor;
- `client`: `from mosaic.controller_client import ControllerClient` (the package loads its client, its
  transcript, the protocol table and the refusal: one facade, and safe-open's refusal base and `safe_id`).

It reports the medians, each one's cost over the floor and its ratio to it, and the client's cost over
`import asyncio`. Nothing is asserted: these are figures for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "pass": "pass",
    "asyncio": "import asyncio",
    "client": "from mosaic.controller_client import ControllerClient",
}


# Bytecode may be written: an installed package has its .pyc files (pip compiles them at install), and
# a shell with PYTHONDONTWRITEBYTECODE would time the compiler on every run instead of the import.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(code: str) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=ENV)
    return time.perf_counter() - t


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 3
    for code in COMMANDS.values():
        _wall(code)  # one warm-up each: the page cache, the .pyc files
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.runs):
        for name, code in COMMANDS.items():
            times[name].append(_wall(code))
    medians = {name: statistics.median(runs) for name, runs in times.items()}
    floor, aio = medians["pass"], medians["asyncio"]
    result: dict[str, object] = {"runs": args.runs}
    for name, med in medians.items():
        result[name] = {"ms": round(med * 1000, 1), "over_pass_ms": round((med - floor) * 1000, 1),
                        "ratio": round(med / floor, 2), "over_asyncio_ms": round((med - aio) * 1000, 1)}
    # Issue 34's goal: the client's whole process within 1.1x `import asyncio`'s, as the median of the
    # rounds' paired ratios (each round ran both back to back), with the rounds' min and max beside it.
    for name in ['client']:
        ratios = sorted(c / a for c, a in zip(times[name], times["asyncio"], strict=True))
        result[name]["over_asyncio_ratio"] = {"min": round(ratios[0], 3), "median": round(statistics.median(ratios), 3),
                                              "max": round(ratios[-1], 3), "goal": 1.1,
                                              "met": statistics.median(ratios) <= 1.1,
                                              # the fastest run of each (the least disturbed by other jobs)
                                              "of_minima": round(min(times[name]) / min(times["asyncio"]), 3)}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"controller-client imports, medians of {args.runs} fresh processes each (whole process, start to exit)")
    for name, code in COMMANDS.items():
        f = result[name]
        assert isinstance(f, dict)
        print(f"  {name:<20} {f['ms']:>7} ms  +{f['over_pass_ms']} ms over pass ({f['ratio']}x), "
              f"{f['over_asyncio_ms']:+} ms over asyncio   (python -c {code!r})")
    for name in ['client']:
        f = result[name]
        assert isinstance(f, dict)
        r = f["over_asyncio_ratio"]
        print(f"  {name} / asyncio, paired per round: {r['median']:.3f}x ({r['min']:.3f}-{r['max']:.3f}); "
              f"goal <= 1.1x: {'met' if r['met'] else 'missed'}; fastest run over fastest run: {r['of_minima']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
