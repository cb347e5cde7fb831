"""The engine seam: what the controller's core and lifecycle use of an engine, and what every engine adapter
provides (its folder: `engines/pi`; issue 32 adds `engines/claude`). The core's half, `EngineRules` (the
commands it writes and what their answers mean, a native record read into a neutral `Reading`, the overlap
table, the drift comparison; values `Answer`, `Cleared`, `DialogAsk`, `OverlapSignal`), the lifecycle's half,
`Engine` and `EngineFactory` (with the `Place` and `SessionRead` it hands back), and the values a
session drift check takes and returns, for every engine (`DriftConfig`, `FileIdentity`, `SessionBytes`,
`session_bytes`, `Checkpoint`, `EngineList`, `Verdict`) with a prompt's look at the file against the last
verified point (`stat_verdict`)."""

from __future__ import annotations

from ._seam import (
    Answer,
    Cleared,
    DialogAsk,
    Engine,
    EngineFactory,
    EngineRules,
    OverlapSignal,
    PageReader,
    Place,
    Reading,
    SessionRead,
    Wire,
)
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

__all__ = ["Answer", "Checkpoint", "Cleared", "DialogAsk", "DriftConfig", "Engine", "EngineFactory", "EngineList",
           "EngineRules", "FileIdentity", "OverlapSignal", "PageReader", "Place", "Reading", "SessionBytes",
           "SessionRead", "Verdict", "Wire", "session_bytes", "stat_verdict"]


def __dir__() -> list[str]:
    return list(__all__)
