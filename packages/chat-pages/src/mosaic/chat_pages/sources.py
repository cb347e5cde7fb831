"""Where conversations come from (seed "Sources"): repository specs, seat registrations, the roots they
approve, and conversation ids.

`roots_from_specs(specs, registrations)` returns `Roots(sessions, unsupported, refused, claude)`: the
approved Pi roots (`SessionRoot`), the unsupported seats (`UnsupportedRoot`), the specs that name no usable
root (`RefusedSpec`) and the approved Claude Code seats (`ClaudeRoot`). `sessions_rel(seat)` is a seat's
sessions directory below its project root, `receipts_rel(seat)` where its launcher receipts are,
`PI_HARNESS` and `CLAUDE_HARNESS` the `harness` of a Pi and a Claude Code seat,
`conversation_id(project_root, seat, name)` the id of a Pi conversation and
`claude_conversation_id(project_root, seat, session_id)` that of a Claude one, and `same_path(a, b)` the
samePath rule registrations are matched by (both absolute and equal after `os.path.realpath`; a missing
path compares as written).
"""

from __future__ import annotations

from ._sources import (
    CLAUDE_HARNESS,
    PI_HARNESS,
    ClaudeRoot,
    RefusedSpec,
    RepositorySpec,
    Roots,
    SeatRegistration,
    SessionRoot,
    UnsupportedRoot,
    claude_conversation_id,
    conversation_id,
    receipts_rel,
    roots_from_specs,
    same_path,
    sessions_rel,
)

__all__ = [
    "CLAUDE_HARNESS",
    "PI_HARNESS",
    "ClaudeRoot",
    "RefusedSpec",
    "RepositorySpec",
    "Roots",
    "SeatRegistration",
    "SessionRoot",
    "UnsupportedRoot",
    "claude_conversation_id",
    "conversation_id",
    "receipts_rel",
    "roots_from_specs",
    "same_path",
    "sessions_rel",
]


def __dir__() -> list[str]:
    return sorted(__all__)
