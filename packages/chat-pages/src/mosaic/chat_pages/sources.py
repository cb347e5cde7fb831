"""Where conversations come from (seed "Sources"): repository specs, seat registrations, the roots they
approve, and conversation ids.

`roots_from_specs(specs, registrations)` returns `Roots(sessions, unsupported, refused)`: the approved Pi
roots (`SessionRoot`), the unsupported seats (`UnsupportedRoot`) and the specs that name no usable root
(`RefusedSpec`). `sessions_rel(seat)` is a seat's sessions directory below its project root, `PI_HARNESS`
the `harness` of a Pi registration, `conversation_id(project_root, seat, name)` the id of a conversation,
and `same_path(a, b)` the samePath rule registrations are matched by (both absolute and equal after
`os.path.realpath`; a missing path compares as written).
"""

from __future__ import annotations

from ._sources import (
    PI_HARNESS,
    RefusedSpec,
    RepositorySpec,
    Roots,
    SeatRegistration,
    SessionRoot,
    UnsupportedRoot,
    conversation_id,
    roots_from_specs,
    same_path,
    sessions_rel,
)

__all__ = [
    "PI_HARNESS",
    "RefusedSpec",
    "RepositorySpec",
    "Roots",
    "SeatRegistration",
    "SessionRoot",
    "UnsupportedRoot",
    "conversation_id",
    "roots_from_specs",
    "same_path",
    "sessions_rel",
]


def __dir__() -> list[str]:
    return sorted(__all__)
