"""The engine seam: what the controller's core and lifecycle use of an engine, and what every engine adapter
provides (its folder: `engines/pi`). For now the values a session drift check takes and returns, for every
engine (`DriftConfig`, `FileIdentity`, `SessionBytes`, `session_bytes`, `Checkpoint`, `EngineList`,
`Verdict`) and a prompt's look at the file against the last verified point (`stat_verdict`)."""

from __future__ import annotations

from ._verdict import (
    Checkpoint,
    DriftConfig,
    EngineList,
    FileIdentity,
    SessionBytes,
    Verdict,
    session_bytes,
    stat_verdict,
)

__all__ = ["Checkpoint", "DriftConfig", "EngineList", "FileIdentity", "SessionBytes", "Verdict", "session_bytes",
           "stat_verdict"]


def __dir__() -> list[str]:
    return list(__all__)
