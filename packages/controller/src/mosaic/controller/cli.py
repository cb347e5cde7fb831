"""`mosaic-controller`, the command line (also `python -m mosaic.controller`): `main(argv)` runs it and
returns its exit status: 0 done, `EXIT_REFUSED` (1: one line on stderr), `EXIT_USAGE` (2),
`EXIT_NOT_STOPPED` (3: the engine could not be proven stopped), `EXIT_CRASH` (70: a bug). The console
script points here. Importing this module loads nothing of the controller's server side: `serve` imports
what it needs when it runs, so `--help` and `--version` stay quick.
"""

from __future__ import annotations

from ._cli import EXIT_CRASH, EXIT_NOT_STOPPED, EXIT_REFUSED, EXIT_USAGE, main

__all__ = ["EXIT_CRASH", "EXIT_NOT_STOPPED", "EXIT_REFUSED", "EXIT_USAGE", "main"]


def __dir__() -> list[str]:
    return sorted(__all__)
