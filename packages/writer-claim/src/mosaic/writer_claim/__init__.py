"""mosaic.writer_claim: the two-key writer claim (brief §2 "Writer-claim record (D1)").

At most one controller owns a session: a claim holds two keys, the seat tuple (seat, project, workspace)
and the native session identity, tied by a random claim ID. Revisions are published with
temp-file + fsync + link() + directory fsync, never rewritten, and read back strictly. Restart
classification completes or classifies what a dead owner left, under the same claim ID, and never
touches a claim whose owner is alive.

    store = ClaimStore(claim_root)                     # no default root: a required argument
    claim = store.acquire(seat, session, binding)      # reserved on both keys (or ClaimRefusal)
    claim.mark_spawn()                                 # spawn marker; then the caller spawns
    claim.activate(invocation_id=..., engine=..., cohort=...)  # active; engine a safe-open ProcessRef
    claim.begin_stop(stop_id)                          # stopping, before any signal
    claim.release(cohort_proof)                        # stopped with the proof, session key first
    report = store.restart(seat, session, probe)       # after a crash: classify under the same claim ID

    # recovery (§6 "Recover"): the recovering controller reserves for a launcher, which takes it over once
    claim = store.acquire(seat, session, binding, generation=g + 1, eligibility=eligibility_id)
    claim = launcher_store.take_over(seat, session, claim_id, eligibility=eligibility_id)  # then mark_spawn

Unit and cohort questions come from an injected `CohortProbe` (the controller's `ClaimCohortProbe` answers them, through cgroup-cohort); owner
liveness from an injected `OwnerLiveness` (`ProcLiveness`, /proc, by default). The host, a process and
the digest form are `mosaic.safe_open`'s (`HostIdentity`, `ProcessRef`, `sha256_digest`): import them
from there.

The top level holds what a controller needs; the rest is in public submodules: `.model` (the record's
values), `.codec` (its bytes), `.rules` (the decision core, sans I/O), `.store` (the store, its claims and
its seams) and `.testing` (test seams).
"""

from ._claim import Claim
from ._disk import RESERVE_REVISIONS, BarrierHook, ClaimWriteError
from ._model import (
    Binding,
    Outcome,
    Pins,
    ProofKind,
    ProofRef,
    Revision,
    SeatKey,
    SessionKey,
    State,
    UnitObservation,
)
from ._refusal import ClaimRefusal
from ._store import ClaimStore, CohortProbe, PairObservation, RestartReport

__all__ = [
    "RESERVE_REVISIONS",
    "BarrierHook",
    "Binding",
    "Claim",
    "ClaimRefusal",
    "ClaimStore",
    "ClaimWriteError",
    "CohortProbe",
    "Outcome",
    "PairObservation",
    "Pins",
    "ProofKind",
    "ProofRef",
    "RestartReport",
    "Revision",
    "SeatKey",
    "SessionKey",
    "State",
    "UnitObservation",
]


def __dir__() -> list[str]:
    return list(__all__)
