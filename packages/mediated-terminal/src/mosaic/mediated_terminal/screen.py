"""The screen: `TerminalApp`, the full-screen prompt_toolkit application over a `TerminalModel`, and
`run_terminal(socket_path)`, which runs it and returns the exit code. `KEYS` is the key table (the seed's
keys first) and `STYLE` the styles. Importing this module loads prompt_toolkit and the controller's
client library.
"""

from __future__ import annotations

from . import _app
from ._app import *  # noqa: F403

__all__: list[str] = []
__all__ += _app.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
