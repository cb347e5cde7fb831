"""Session drift (brief §2 "Session drift, not foreign-writer attribution"): the engine's own entries
(`engine_list`, `EngineList`) against the session file's bytes (`session_bytes`, `SessionBytes`), in full
(`check_drift`) or from a checkpoint (`check_appended`, `Checkpoint`); the verdict (`Verdict`) and its
reasons (`DRIFT_REASONS`, `PERSISTENCE_DRIFT`)."""

from __future__ import annotations

from ._drift import (
    DRIFT_REASONS,
    PERSISTENCE_DRIFT,
    Checkpoint,
    DriftConfig,
    EngineList,
    FileIdentity,
    SessionBytes,
    Verdict,
    check_appended,
    check_drift,
    engine_list,
    session_bytes,
)

__all__ = [
    "DRIFT_REASONS",
    "PERSISTENCE_DRIFT",
    "Checkpoint",
    "DriftConfig",
    "EngineList",
    "FileIdentity",
    "SessionBytes",
    "Verdict",
    "check_appended",
    "check_drift",
    "engine_list",
    "session_bytes",
]


def __dir__() -> list[str]:
    return list(__all__)
