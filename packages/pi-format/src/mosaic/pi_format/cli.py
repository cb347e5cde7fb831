"""The command line, `python -m mosaic.pi_format [--project DIR] FILE.jsonl...`: one JSON summary line per
file; `main(argv)` runs it and `summary(result)` is the summary it prints.

This is the package's only I/O: it reads each named file and prints `summary(parse(...))` with a "file"
key. With --project, the cwd rule compares real paths (os.path.realpath). `--version` prints the installed
distribution's version. Exit status: 0 when every file was read (parsed or refused), and for --help and
--version; 2 when a file could not be read or the arguments are wrong.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import NoReturn

from ._parse import parse
from ._summary import summary

__all__ = ["main", "summary"]


class _Version(argparse.Action):
    """--version: the installed distribution's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, default: str = argparse.SUPPRESS,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> NoReturn:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            number = version("mosaic-pi-format")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        print(f"python -m mosaic.pi_format {number} (mosaic-pi-format)")
        parser.exit(0)


def main(argv: list[str] | None = None) -> int:
    """Print one JSON summary line per file in `argv` (default: the command line's); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m mosaic.pi_format",
                                 description="python -m mosaic.pi_format [--project DIR] FILE.jsonl...: one JSON "
                                             "summary line per file.")
    ap.add_argument("--version", action=_Version, help="print the version and exit")
    ap.add_argument("--project", help="absolute project directory the header cwd must be inside")
    ap.add_argument("files", nargs="+", help="session files (*.jsonl)")
    args = ap.parse_args(argv)
    project = os.path.abspath(args.project) if args.project else None
    status = 0
    for path in args.files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            print(json.dumps({"file": path, "ok": False, "error": f"{type(exc).__name__}: {exc.strerror}"}))
            status = 2
            continue
        result = parse(data, project=project, realpath=os.path.realpath if project else None)
        print(json.dumps({"file": path, **summary(result)}))
    return status


def __dir__() -> list[str]:
    return sorted(__all__)
