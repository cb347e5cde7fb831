"""`mosaic-read`, the reader on the command line (also `python -m mosaic.chat_pages`): `main(argv, out)` runs
it and returns its exit status, one of `EXIT_CODES` (status -> (name, meaning)). `--url` takes the server's
token from `--token-file` or the environment variable named `TOKEN_ENV`, never from argv. Importing this
module loads neither the reader nor the server: a command imports what it needs, so `--help` stays fast.
"""

from __future__ import annotations

from . import _cli
from ._cli import *  # noqa: F403

__all__: list[str] = []
__all__ += _cli.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
