"""The command line: ``mosaic-terminal --socket PATH [--grant ID] [--log FILE]`` (also ``python -m
mosaic.mediated_terminal``), ``--version``, ``--help``.

Exit codes (the package README lists them):

- 0: quit with Ctrl-C or Ctrl-D (and ``--help``, ``--version``);
- 1: could not start: no controller socket at the path, nothing listening, the attach refused, no
  terminal, or a log file that cannot be opened. One line on stderr, before the screen is taken;
- 2: a usage error (argparse's line);
- 70: a crash (a bug): one line, then the traceback, on stderr after the screen is given back;
- 128 + n: ended by signal n: 129 SIGHUP (the terminal closed), 130 SIGINT before the screen, 143 SIGTERM.

`main` parses the arguments before it imports anything else, so ``--help`` and ``--version`` answer
without importing prompt_toolkit or the controller package (the package README has the figures).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from . import __version__

__all__ = ["EXIT_CRASH", "EXIT_OK", "EXIT_REFUSED", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_CRASH = 70  # EX_SOFTWARE (sysexits.h): an internal error, never a refusal's code
PROG = "mosaic-terminal"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The mediated terminal: observe and control a Pi or Claude Code conversation "
                               "through its controller's socket. It attaches as an observer; Ctrl-T takes control.",
        epilog="keys: Enter send, Ctrl-J or Alt-Enter newline, Ctrl-T take control, Ctrl-G interrupt, "
               "Ctrl-O reconnect and re-read, PageUp/PageDown scroll, Ctrl-C or Ctrl-D quit (while the engine "
               "answers, asked once); Ctrl-K force stop, Ctrl-R recover (each asks y/n first), F2 details, Esc interrupt "
               "(while the engine answers). Exit codes: 0 quit, 1 could not "
               "start (one line on stderr), 2 usage, 70 crash, 128+n a signal.")
    parser.add_argument("--socket", required=True, metavar="PATH", help="the controller's Unix socket")
    parser.add_argument("--grant", metavar="ID",
                        help="say the seed's hello naming this grant of the controller's grants file on each "
                             "connection: the terminal may then do what that grant allows, never more")
    parser.add_argument("--log", metavar="FILE",
                        help="write the client library's log here (nothing is logged to the screen)")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    return parser


def _fail(text: str, code: int = EXIT_REFUSED) -> int:
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)
    return code


def _let_go_of_a_closed_terminal() -> None:
    """The screen's last bytes (leaving the alternate screen) may still sit in stdout's buffer when the
    terminal is gone (SIGHUP: writes fail EIO); point stdout at /dev/null then, so the flush at exit goes
    nowhere instead of printing "Exception ignored ... Input/output error" on stderr."""
    try:
        sys.stdout.flush()
    except OSError:
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, sys.stdout.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError):
            pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the terminal; return the exit code (module docstring). Never raises but SystemExit from
    argparse (``--help``, ``--version``, a usage error)."""
    args = _parser().parse_args(argv)
    import asyncio
    import logging
    import traceback

    try:
        # A full-screen application owns the terminal: no log line may be drawn over it.
        handler: logging.Handler = logging.FileHandler(args.log) if args.log else logging.NullHandler()
    except OSError as exc:
        return _fail(f"cannot open the log file {args.log}: {exc.strerror or exc}")
    logging.basicConfig(level=logging.INFO if args.log else logging.WARNING, handlers=[handler])
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return _fail("needs a terminal: stdin and stdout must be a tty")
    try:
        from ._app import run_terminal
        from ._model import CannotAttach

        try:
            return asyncio.run(run_terminal(args.socket, args.grant))
        except CannotAttach as exc:
            return _fail(str(exc))
        finally:
            _let_go_of_a_closed_terminal()
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:  # noqa: BLE001 - a crash: one line, the traceback, its own exit code
        logging.getLogger("mosaic.mediated_terminal").exception("crashed")
        _fail(f"crashed: {type(exc).__name__}: {exc} (a bug; the traceback follows)", EXIT_CRASH)
        traceback.print_exc()
        return EXIT_CRASH
