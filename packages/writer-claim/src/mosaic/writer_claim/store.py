"""The claim store and its claims: `ClaimStore` (acquire, observe, restart, adopt, take over) over one claim
root, the `Claim` handle of a claim this process owns, the questions a restart asks (`CohortProbe`,
`OwnerLiveness`, `ProcLiveness`), the barrier seam of every file-system step (`Barrier`, `BARRIER_POINTS`)
and the room a stop reserves (`RESERVE_REVISIONS`, `RESERVE_STEPS`, `reserve_name`)."""

from __future__ import annotations

from ._claim import Claim
from ._disk import (
    BARRIER_POINTS,
    RESERVE_REVISIONS,
    RESERVE_STEPS,
    Barrier,
    BarrierHook,
    ClaimWriteError,
    reserve_name,
)
from ._host import ProcLiveness
from ._store import MAX_ROUNDS, ClaimStore, CohortProbe, OwnerLiveness, RestartReport

__all__ = [
    "BARRIER_POINTS",
    "MAX_ROUNDS",
    "RESERVE_REVISIONS",
    "RESERVE_STEPS",
    "Barrier",
    "BarrierHook",
    "Claim",
    "ClaimStore",
    "ClaimWriteError",
    "CohortProbe",
    "OwnerLiveness",
    "ProcLiveness",
    "RestartReport",
    "reserve_name",
]


def __dir__() -> list[str]:
    return list(__all__)
