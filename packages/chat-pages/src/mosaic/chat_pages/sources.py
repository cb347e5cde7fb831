"""Where conversations come from (seed "Sources"): repository specs, seat registrations, the roots they
approve, and conversation ids.

`roots_from_specs(specs, registrations)` returns `Roots(sessions, unsupported, refused, claude)`: the
approved Pi roots (`SessionRoot`), the unsupported seats (`UnsupportedRoot`), the specs that name no usable
root (`RefusedSpec`) and the approved Claude Code seats (`ClaudeRoot`). `PI_HARNESS` and `CLAUDE_HARNESS`
are the `harness` of a Pi and a Claude Code seat, `conversation_id(project_root, seat, name)` the id of a Pi
conversation and `claude_conversation_id(project_root, seat, session_id)` that of a Claude one.
"""

from __future__ import annotations

from . import _sources
from ._sources import *  # noqa: F403

__all__: list[str] = []
__all__ += _sources.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
