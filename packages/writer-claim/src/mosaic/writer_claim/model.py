"""The writer claim's record, as values: a revision and what it holds (brief §2 "Writer-claim record (D1)",
"Fields"), the two keys, the states and outcomes.
"""

from __future__ import annotations

from . import _model
from ._model import *  # noqa: F403

__all__: list[str] = []
__all__ += _model.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
