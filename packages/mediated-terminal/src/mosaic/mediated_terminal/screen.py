"""The screen: `TerminalApp`, the full-screen prompt_toolkit application over a `TerminalModel`, and
`run_terminal(socket_path)`, which runs it and returns the exit code. `KEYS` is the key table (the seed's
keys first), `BufferComposer` the composer over a prompt_toolkit buffer, `STYLE` the styles, and `ESC_WAIT`
how long a lone ESC waits for the next chunk (a year: the next chunk decides what it was). Importing this
module loads prompt_toolkit and the controller's client library.
"""

from __future__ import annotations

from ._app import ESC_WAIT, KEYS, STYLE, BufferComposer, TerminalApp, run_terminal

__all__ = ["ESC_WAIT", "KEYS", "STYLE", "BufferComposer", "TerminalApp", "run_terminal"]


def __dir__() -> list[str]:
    return sorted(__all__)
