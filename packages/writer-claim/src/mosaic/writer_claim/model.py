"""The writer claim's record, as values: a revision and what it holds (brief §2 "Writer-claim record (D1)",
"Fields"), the two keys, the states and outcomes, and the names on disk."""

from __future__ import annotations

from ._model import (
    JSON,
    MAX_COHORT_BYTES,
    Binding,
    Eligibility,
    KeyKind,
    Outcome,
    Owner,
    Pins,
    ProcessIdentity,
    ProofKind,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    StopInfo,
    UnitObservation,
    Writer,
    revision_name,
    unit_name_for,
)

__all__ = [
    "JSON",
    "MAX_COHORT_BYTES",
    "Binding",
    "Eligibility",
    "KeyKind",
    "Outcome",
    "Owner",
    "Pins",
    "ProcessIdentity",
    "ProofKind",
    "ProofRef",
    "Revision",
    "SeatKey",
    "SessionKey",
    "State",
    "StopInfo",
    "UnitObservation",
    "Writer",
    "revision_name",
    "unit_name_for",
]


def __dir__() -> list[str]:
    return list(__all__)
