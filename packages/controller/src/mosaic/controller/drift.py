"""Session drift (brief §2 "Session drift, not foreign-writer attribution"): the engine's own entries
(`engine_list`, `EngineList`) against the session file's bytes (`session_bytes`, `SessionBytes`), in full
(`check_drift`) or from a checkpoint (`check_appended`, `Checkpoint`); the verdict (`Verdict`) and its
reasons (`DRIFT_REASONS`, `PERSISTENCE_DRIFT`); a prompt's look at the file against the last verified point
(`stat_verdict`)."""

from __future__ import annotations

from .engines._verdict import (
    Checkpoint,
    DriftConfig,
    EngineList,
    FileIdentity,
    SessionBytes,
    Verdict,
    session_bytes,
    stat_verdict,
)
from .engines.pi._drift import DRIFT_REASONS, PERSISTENCE_DRIFT, check_appended, check_drift, engine_list

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
    "stat_verdict",
]


def __dir__() -> list[str]:
    return list(__all__)
