"""mosaic.mediated_terminal: the mediated terminal, a thin view over `mosaic.controller.client`.

`TerminalApp` is the full-screen prompt_toolkit application (``mosaic-terminal --socket PATH``);
`TerminalModel` its state and actions, testable without a terminal; `ReadingView` the transcript's
reading position; `inert` and the `_render` functions turn the library's values into lines of inert text.

The names load on first use (PEP 562), so ``mosaic-terminal --help`` and ``--version`` answer without
importing prompt_toolkit or the controller package.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: importing typing costs --help about 5 ms (mypy reads this one too)

if TYPE_CHECKING:
    from ._app import KEYS, BufferComposer, TerminalApp, run_terminal
    from ._cli import EXIT_CRASH, EXIT_OK, EXIT_REFUSED, EXIT_USAGE, main
    from ._inert import PASSING, inert, inert_spans, is_hazard
    from ._model import NOT_CONTROLLER, CannotAttach, Composer, Note, TerminalModel
    from ._render import (
        INCARNATION_SHOWN,
        confirmation_lines,
        details_line,
        dialog_line,
        header_line,
        item_fragments,
        item_lines,
        plain,
        receipt_words,
        request_line,
        status_line,
        stop_words,
        styled,
        transcript_lines,
        transcript_rows,
        wrap,
    )
    from ._view import ReadingView, Row

_WHERE = {
    "KEYS": "_app", "BufferComposer": "_app", "TerminalApp": "_app", "run_terminal": "_app",
    "EXIT_CRASH": "_cli", "EXIT_OK": "_cli", "EXIT_REFUSED": "_cli", "EXIT_USAGE": "_cli", "main": "_cli",
    "PASSING": "_inert", "inert": "_inert", "inert_spans": "_inert", "is_hazard": "_inert",
    "NOT_CONTROLLER": "_model", "CannotAttach": "_model", "Composer": "_model", "Note": "_model", "TerminalModel": "_model",
    "INCARNATION_SHOWN": "_render", "confirmation_lines": "_render", "details_line": "_render",
    "dialog_line": "_render", "header_line": "_render", "item_fragments": "_render", "item_lines": "_render",
    "plain": "_render", "receipt_words": "_render", "request_line": "_render", "status_line": "_render",
    "stop_words": "_render", "styled": "_render", "transcript_lines": "_render", "transcript_rows": "_render",
    "wrap": "_render",
    "ReadingView": "_view", "Row": "_view",
}

__all__ = [
    "BufferComposer",
    "CannotAttach",
    "Composer",
    "EXIT_CRASH",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "INCARNATION_SHOWN",
    "KEYS",
    "NOT_CONTROLLER",
    "Note",
    "PASSING",
    "ReadingView",
    "Row",
    "TerminalApp",
    "TerminalModel",
    "__version__",
    "confirmation_lines",
    "details_line",
    "dialog_line",
    "header_line",
    "inert",
    "inert_spans",
    "is_hazard",
    "item_fragments",
    "item_lines",
    "main",
    "plain",
    "receipt_words",
    "request_line",
    "run_terminal",
    "status_line",
    "stop_words",
    "styled",
    "transcript_lines",
    "transcript_rows",
    "wrap",
]


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
