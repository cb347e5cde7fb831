"""The claim-backed lifecycle (brief §2, §6): a `LaunchingController` for one execution (`Placement`, `PiSpec`,
`Hooks`), the live-session guard it keeps (`LiveSessionGuard`, `LiveRoots`, `RULES`), the session it reads
(`SessionPlace`, `SessionIdentity`), an engine uid per execution (`EngineUids`, its `Lease`s, `claim_over`,
`live_uids`, `hand_over`), the recover eligibility records (`EligibilityRecord` and its
single-use steps), and where the writer claim meets the cohort (`ClaimCohortProbe`, `run_force_stop`,
`stop_and_release`, `cohort_proof_ref`)."""

from __future__ import annotations

from ..engines.pi._session import SessionIdentity, SessionPlace, read_session, session_place
from ..engines.pi._spec import PiSpec
from ._cohort import ClaimCohortProbe, StopRun, cohort_proof_ref, run_force_stop, stop_and_release
from ._eligibility import (
    RECORD_DIR,
    EligibilityRecord,
    hold_record,
    mint_eligibility_id,
    read_record,
    record_state,
    settle_record,
    write_record,
)
from ._engine_uids import EngineUids, Lease, claim_over, hand_over, live_uids
from ._guard import RULES, LiveRoots, LiveSessionGuard
from ._launching import Hooks, LaunchingController, Placement
from ._ports import (
    POOL_WORKERS,
    CgroupCohort,
    ClaimsOwner,
    ClaimsPort,
    CohortPort,
    Execution,
    LifecyclePorts,
    Pool,
    WriterClaims,
)
from ._steps import LAUNCH_POINTS, START_STEPS, STOP_POINTS

__all__ = [
    "LAUNCH_POINTS",
    "POOL_WORKERS",
    "START_STEPS",
    "STOP_POINTS",
    "CgroupCohort",
    "ClaimsOwner",
    "ClaimsPort",
    "CohortPort",
    "Pool",
    "WriterClaims",
    "RECORD_DIR",
    "RULES",
    "ClaimCohortProbe",
    "LaunchingController",
    "EligibilityRecord",
    "PiSpec",
    "EngineUids",
    "Execution",
    "Hooks",
    "LifecyclePorts",
    "LiveRoots",
    "Lease",
    "LiveSessionGuard",
    "Placement",
    "SessionIdentity",
    "SessionPlace",
    "StopRun",
    "claim_over",
    "cohort_proof_ref",
    "hand_over",
    "hold_record",
    "live_uids",
    "mint_eligibility_id",
    "read_record",
    "read_session",
    "record_state",
    "run_force_stop",
    "session_place",
    "settle_record",
    "stop_and_release",
    "write_record",
]


def __dir__() -> list[str]:
    return list(__all__)
