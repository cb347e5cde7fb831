"""The terminal's state and actions, with no terminal needed: `TerminalModel` (the client, the transcript,
the composer rules, notes, dialogs, the actions: take control, interrupt, the confirmation flows, take the
composer and send, refresh, reconnect), the `Composer` it reads and clears, a `Note`, `CannotAttach` (the
one-line reason it could not start), `NOT_CONTROLLER` (the note of an observer's Enter), and `ReadingView`
with its `Row`s (the reading position: anchored by name, never moved by rows arriving below).
"""

from __future__ import annotations

from . import _model, _view
from ._model import *  # noqa: F403
from ._view import *  # noqa: F403

__all__: list[str] = []
__all__ += _model.__all__
__all__ += _view.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
