"""Benchmark: what `import mosaic.safe_open` and the first openat2 call cost, against `python -c pass`.

    python packages/safe-open/bench/bench_import.py [--runs N] [--json]

Each round starts fresh interpreters, in alternation so that drift in the machine's load hits every
measure alike:

- `pass`: `python -c pass`, the floor (the interpreter's own start);
- `import`: `python -c "import mosaic.safe_open"`;
- `first call`: `import mosaic.safe_open`, then `open_root(<a scratch directory>)` (which loads the openat2
  binding and runs the kernel probe, one openat2 call) and one `open_dir` beneath it (an openat2 call).

It reports the medians of the wall time of each interpreter, the import's and the first call's cost over
the floor, the in-process time of the first `open_root` + `open_dir` (measured inside the interpreter with
perf_counter, so without the interpreter's start), and `-X importtime`'s cumulative microseconds for
`mosaic.safe_open` and for the binding module. Nothing is asserted: these are figures for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

FIRST_CALL = (
    "import sys, os; import mosaic.safe_open as s; r = s.open_root(sys.argv[1]); "
    "os.close(r.open_dir('d')); r.close()"
)
FIRST_CALL_AFTER_IMPORT = (
    "import sys, time, os, mosaic.safe_open as s; t = time.perf_counter(); r = s.open_root(sys.argv[1]); "
    "os.close(r.open_dir('d')); r.close(); print(time.perf_counter() - t)"
)


# Bytecode may be written: an installed package has its .pyc files (pip compiles them at install), and
# a shell with PYTHONDONTWRITEBYTECODE would time the compiler on every run instead of the import.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True, env=ENV)
    return time.perf_counter() - t, r.stdout + r.stderr


def _importtime(code: str) -> dict[str, int]:
    """-X importtime's cumulative microseconds per module of `code`'s imports."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                         check=True, env=ENV).stderr
    cumulative: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s+(.*)$", line)
        if m:
            cumulative[m.group(3).strip()] = int(m.group(2))
    return cumulative


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 3

    floor: list[float] = []
    imp: list[float] = []
    first: list[float] = []
    in_process: list[float] = []
    binding: list[int] = []
    package: list[int] = []
    scratch = tempfile.mkdtemp(prefix="safe-open-bench-")
    os.mkdir(os.path.join(scratch, "d"))
    for _ in range(args.runs):
        floor.append(_wall(["-c", "pass"])[0])
        imp.append(_wall(["-c", "import mosaic.safe_open"])[0])
        first.append(_wall(["-c", FIRST_CALL, scratch])[0])
        in_process.append(float(_wall(["-c", FIRST_CALL_AFTER_IMPORT, scratch])[1].split()[0]))
        times = _importtime("import mosaic.safe_open as s; s.open_root('/').close()")
        package.append(times.get("mosaic.safe_open", 0))
        binding.append(times.get("mosaic.safe_open._kernel", 0))
    os.rmdir(os.path.join(scratch, "d"))
    os.rmdir(scratch)
    med = statistics.median
    result = {
        "runs": args.runs,
        "pass_ms": round(med(floor) * 1000, 2),
        "import_ms": round(med(imp) * 1000, 2),
        "import_over_pass_ms": round((med(imp) - med(floor)) * 1000, 2),
        "import_ratio": round(med(imp) / med(floor), 2),
        "first_call_ms": round(med(first) * 1000, 2),
        "first_call_over_pass_ms": round((med(first) - med(floor)) * 1000, 2),
        "first_call_ratio": round(med(first) / med(floor), 2),
        "first_call_in_process_ms": round(med(in_process) * 1000, 2),
        "importtime_package_us": int(med(package)),
        "importtime_binding_us": int(med(binding)),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"safe-open start, medians of {args.runs} fresh interpreters each")
        print(f"  python -c pass                 {result['pass_ms']} ms (the floor)")
        print(f"  import mosaic.safe_open        {result['import_ms']} ms: +{result['import_over_pass_ms']} ms, "
              f"{result['import_ratio']}x the floor")
        print(f"  import + first open_root/open_dir {result['first_call_ms']} ms: +{result['first_call_over_pass_ms']} ms, "
              f"{result['first_call_ratio']}x the floor")
        print(f"  first open_root + open_dir in-process (binding load, probe, 2 openat2): "
              f"{result['first_call_in_process_ms']} ms")
        print(f"  -X importtime cumulative: mosaic.safe_open {result['importtime_package_us']} us, "
              f"the openat2 binding (_kernel) {result['importtime_binding_us']} us")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
