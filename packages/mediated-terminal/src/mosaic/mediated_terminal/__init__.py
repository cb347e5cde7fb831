"""mosaic.mediated_terminal: the mediated terminal, a thin view over `mosaic.controller.client`.

`TerminalApp` is the full-screen prompt_toolkit application (``mosaic-terminal --socket PATH``);
`TerminalModel` its state and actions, testable without a terminal; `inert` and the `_render` functions
turn the library's values into lines of inert text."""

from ._app import KEYS_LINE, BufferComposer, TerminalApp, run_terminal
from ._cli import main
from ._inert import inert, inert_lines, is_hazard
from ._model import NOT_CONTROLLER, Composer, TerminalModel
from ._render import (
    INCARNATION_SHOWN,
    binding_line,
    confirmation_lines,
    item_lines,
    receipt_words,
    request_line,
    status_line,
    stop_words,
    transcript_lines,
)

__all__ = [
    "INCARNATION_SHOWN",
    "KEYS_LINE",
    "NOT_CONTROLLER",
    "BufferComposer",
    "Composer",
    "TerminalApp",
    "TerminalModel",
    "binding_line",
    "confirmation_lines",
    "inert",
    "inert_lines",
    "is_hazard",
    "item_lines",
    "main",
    "receipt_words",
    "request_line",
    "run_terminal",
    "status_line",
    "stop_words",
    "transcript_lines",
]
