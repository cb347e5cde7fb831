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
"""

from ._codec import (
    FORMAT,
    FORMAT_ELIGIBILITY,
    MAX_REVISION_BYTES,
    RecordError,
    decode_revision,
    encode_revision,
    revision_to_json,
)
from ._core import (
    GroupDecision,
    KeyObservation,
    Oracle,
    PairObservation,
    Publication,
    Unreadable,
    classify,
    refusal_for,
)
from ._host import ProcLiveness
from ._model import (
    JSON,
    MAX_COHORT_BYTES,
    Binding,
    Eligibility,
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
from ._refusal import ClaimRefusal
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
from ._store import ClaimStore, CohortProbe, OwnerLiveness, RestartReport

__all__ = [
    "BARRIER_POINTS",
    "FORMAT",
    "FORMAT_ELIGIBILITY",
    "JSON",
    "MAX_COHORT_BYTES",
    "MAX_REVISION_BYTES",
    "RESERVE_REVISIONS",
    "RESERVE_STEPS",
    "Barrier",
    "BarrierHook",
    "Binding",
    "Claim",
    "ClaimRefusal",
    "ClaimStore",
    "ClaimWriteError",
    "CohortProbe",
    "Eligibility",
    "GroupDecision",
    "KeyObservation",
    "Outcome",
    "Oracle",
    "Owner",
    "OwnerLiveness",
    "PairObservation",
    "Pins",
    "ProcLiveness",
    "ProcessIdentity",
    "ProofKind",
    "ProofRef",
    "Publication",
    "RecordError",
    "RestartReport",
    "Revision",
    "SeatKey",
    "SessionKey",
    "State",
    "StopInfo",
    "UnitObservation",
    "Unreadable",
    "Writer",
    "classify",
    "decode_revision",
    "encode_revision",
    "refusal_for",
    "reserve_name",
    "revision_name",
    "revision_to_json",
    "unit_name_for",
]
