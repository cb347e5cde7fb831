"""`mosaic-read`, the reader on the command line (also `python -m mosaic.chat_pages`): `main(argv, out)` runs
it and returns its exit status, one of `EXIT_CODES` (status -> (name, meaning)). `--url` takes the server's
token from `--token-file` or the environment variable named `TOKEN_ENV`, never from argv. `serve` sets its own
process's GIL hand-over interval to `SERVE_SWITCH_INTERVAL` seconds. Importing this module loads neither
the reader nor the server: a command imports what it needs, so `--help` stays fast.
"""

from __future__ import annotations

from ._cli import EXIT_CODES, SERVE_SWITCH_INTERVAL, TOKEN_ENV, main

__all__ = ["EXIT_CODES", "SERVE_SWITCH_INTERVAL", "TOKEN_ENV", "main"]


def __dir__() -> list[str]:
    return sorted(__all__)
