"""mosaic.mediated_terminal: the mediated terminal, a thin view over `mosaic.controller_client`.

    mosaic-terminal --socket /run/ctl/controller.sock          # or: python -m mosaic.mediated_terminal
    code = asyncio.run(run_terminal("/run/ctl/controller.sock")) # the same, from Python

`run_terminal` runs `TerminalApp`, the full-screen prompt_toolkit application; `TerminalModel` is its state
and actions, testable without a terminal; `inert` turns any string into inert text. What a consumer needs is
here (`__all__`); the rest is in named public modules: `mosaic.mediated_terminal.cli` (the command line and
its exit codes), `.screen` (the application, its keys and styles), `.model` (the state, the composer, the
reading position), `.render` (the library's values as lines of inert text), `.text` (inert text) and
`.testing` (the terminal in a private tmux server, the engine tap).

The names load on first use (PEP 562), so ``mosaic-terminal --help`` and ``--version`` answer without
importing prompt_toolkit or the controller package.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

TYPE_CHECKING = False  # not typing's: importing typing costs --help about 5 ms (mypy reads this one too)

if TYPE_CHECKING:
    from ._app import TerminalApp, run_terminal
    from ._inert import inert
    from ._model import TerminalModel

_LAZY = {"TerminalApp": "_app", "run_terminal": "_app", "inert": "_inert", "TerminalModel": "_model"}

__all__ = ["TerminalApp", "TerminalModel", "__version__", "inert", "run_terminal"]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
