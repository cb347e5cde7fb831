"""The command line: ``mosaic-terminal --socket PATH [--log FILE]``."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Sequence

from ._app import run_terminal

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mosaic-terminal",
                                     description="The mediated terminal: observe and control a conversation "
                                                 "through its controller's socket.")
    parser.add_argument("--socket", required=True, help="the controller's Unix socket")
    parser.add_argument("--log", help="write the client library's log here (nothing is logged to the screen)")
    args = parser.parse_args(argv)
    # A full-screen application owns the terminal: no log line may be drawn over it.
    handler: logging.Handler = logging.FileHandler(args.log) if args.log else logging.NullHandler()
    logging.basicConfig(level=logging.INFO if args.log else logging.WARNING, handlers=[handler])
    asyncio.run(run_terminal(args.socket))
    return 0
