"""`mosaic-claims`, the command line (also `python -m mosaic.writer_claim`): `main(argv)` runs it and returns
its exit status: 0 done, `EXIT_REFUSED` (1: one line), `EXIT_USAGE` (2), `EXIT_OUTPUT_CLOSED` (4: the output
was closed before the end), `EXIT_CRASH` (70: a bug), `EXIT_INTERRUPTED` (130: Ctrl-C). The console script
points here. Importing this module loads no claim store: a command imports what it needs when it runs.
"""

from __future__ import annotations

from . import _cli
from ._cli import *  # noqa: F403

__all__: list[str] = []
__all__ += _cli.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
