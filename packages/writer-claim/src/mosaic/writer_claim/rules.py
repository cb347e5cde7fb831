"""The decision core, sans I/O: how a pair of keys is observed and classified after a crash (`classify`,
`GroupDecision`), what an acquisition refuses (`refusal_for`), which owner transitions are allowed
(`check_owner_transition`), and the questions it asks an `Oracle`."""

from __future__ import annotations

from ._core import (
    GroupDecision,
    KeyObservation,
    Oracle,
    PairObservation,
    Publication,
    Unreadable,
    check_owner_transition,
    classify,
    refusal_for,
)

__all__ = [
    "GroupDecision",
    "KeyObservation",
    "Oracle",
    "PairObservation",
    "Publication",
    "Unreadable",
    "check_owner_transition",
    "classify",
    "refusal_for",
]


def __dir__() -> list[str]:
    return list(__all__)
