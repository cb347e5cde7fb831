"""Benchmark: how fast `mosaic-terminal --help` answers, against `python -c pass`.

    python packages/mediated-terminal/bench/bench_start.py [--runs N] [--json]

Each round starts fresh interpreters, in alternation so that drift in the machine's load hits every measure
alike, and times each whole process from the outside (start to exit):

- `pass`: `python -c pass`, the floor (the interpreter's own start);
- `help`: `python -m mosaic.mediated_terminal --help`;
- `script`: the `mosaic-terminal --help` console script beside this interpreter, when it is installed;
- `version`: `python -m mosaic.mediated_terminal --version`;
- `screen imports`: `python -c "import mosaic.mediated_terminal.screen"`, what the terminal imports before it
  can draw (prompt_toolkit and the controller package): what `--help` no longer waits for.

It reports the medians, each one's cost over the floor and its ratio to it. Nothing is asserted: these are
figures for the README (the goal elsewhere is 120 ms for a command's `--help`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "mosaic-terminal"


# Bytecode may be written: an installed package has its .pyc files (pip compiles them at install), and
# a shell with PYTHONDONTWRITEBYTECODE would time the compiler on every run instead of the import.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=True, env=ENV)
    return time.perf_counter() - t


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 3
    py = sys.executable
    commands = {
        "pass": [py, "-c", "pass"],
        "help": [py, "-m", "mosaic.mediated_terminal", "--help"],
        "version": [py, "-m", "mosaic.mediated_terminal", "--version"],
        "screen imports": [py, "-c", "import mosaic.mediated_terminal.screen"],
    }
    if SCRIPT.exists():
        commands["script"] = [str(SCRIPT), "--help"]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for cmd in commands.values():
        _wall(cmd)  # one warm-up each: the page cache, the .pyc files
    for _ in range(args.runs):
        for name, cmd in commands.items():
            times[name].append(_wall(cmd))
    floor = statistics.median(times["pass"])
    result: dict[str, object] = {"runs": args.runs}
    for name, runs in times.items():
        med = statistics.median(runs)
        result[name] = {"ms": round(med * 1000, 1), "over_pass_ms": round((med - floor) * 1000, 1),
                        "ratio": round(med / floor, 2)}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"mosaic-terminal start, medians of {args.runs} fresh processes each (whole process, start to exit)")
    for name, cmd in commands.items():
        figures = result[name]
        assert isinstance(figures, dict)
        shown = " ".join(Path(cmd[0]).name if i == 0 else part for i, part in enumerate(cmd))
        print(f"  {name:<15} {figures['ms']:>7} ms  +{figures['over_pass_ms']} ms over the floor, "
              f"{figures['ratio']}x   ({shown})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
