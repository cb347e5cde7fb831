"""The command line, ``mosaic-terminal --socket PATH [--grant ID] [--log FILE]`` (also ``python -m
mosaic.mediated_terminal``): `main(argv)` runs it and returns its exit code, `EXIT_OK` (0: quit), `EXIT_REFUSED`
(1: could not start, one line on stderr), `EXIT_USAGE` (2) or `EXIT_CRASH` (70: a bug, with its traceback);
a signal n ends it with 128 + n. Importing this module imports neither prompt_toolkit nor the controller.
"""

from __future__ import annotations

from . import _cli
from ._cli import *  # noqa: F403

__all__: list[str] = []
__all__ += _cli.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
