"""The screen: `TerminalApp`, the full-screen prompt_toolkit application over a `TerminalModel`, and
`run_terminal(socket_path)`, which runs it and returns the exit code. `KEYS` is the key table (the seed's
keys first), `BufferComposer` the composer over a prompt_toolkit buffer, `STYLE` the styles, `ESC_WAIT`
how long an ESC at the end of a read waits for the next chunk (a year: the next chunk decides what it was),
`LoneEscape` the wrapper that takes an ESC read alone as the Esc key, and `COMPOSER_ROWS` and `NOTES_ROWS`
how far the composer and the notes grow. Importing this module loads prompt_toolkit and the controller's
client library.
"""

from __future__ import annotations

from ._app import (
    COMPOSER_ROWS,
    ESC_WAIT,
    KEYS,
    NOTES_ROWS,
    STYLE,
    BufferComposer,
    LoneEscape,
    TerminalApp,
    run_terminal,
)

__all__ = ["COMPOSER_ROWS", "ESC_WAIT", "KEYS", "NOTES_ROWS", "STYLE", "BufferComposer", "LoneEscape", "TerminalApp",
           "run_terminal"]


def __dir__() -> list[str]:
    return sorted(__all__)
