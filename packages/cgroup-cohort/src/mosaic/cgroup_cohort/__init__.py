"""mosaic.cgroup_cohort: launchers, the supervisor shim, freeze/kill force stop with cohort and boot proofs.

The producer of seeds/003 §6 ("Stop, cohort proof and recovery", fixtures K1-K18) and of the seed
README's src/cohort.mjs and src/shim.mjs. Depends on nothing Mosaic; cffi (ABI mode) for the syscalls.

    launcher = DirectCgroupLauncher(parent, socket_dir, engine=Credentials(uid, gid))   # or ScopeLauncher
    handle = launcher.launch(name, engine_argv)           # engine born in engine/ (clone3)
    record(handle.claim.to_dict())                        # into the writer claim, before relying on it
    result = force_stop(handle.claim, StopRequest(...), verifier=registry)
    result.outcome.state                                  # "stopped" (with result.proof) or "uncertain"
"""

from ._cgroupfs import Cgroup2Mount, CgroupEvents, find_cgroup2, parse_events, parse_mountinfo, read_events
from ._channel import ShimChannel
from ._driver import StopResult, force_stop
from ._errors import CODES, UNCERTAIN_REASONS, CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials
from ._launchers import (
    CohortHandle,
    DirectCgroupLauncher,
    PgroupLauncher,
    ScopeLauncher,
    UserManager,
    unit_name_for,
)
from ._model import CohortClaim, Containment, Death, MemberRef, ObservedIdentity, StopRequest
from ._proc import boot_id, machine_id, parse_stat, start_time
from ._proof import (
    FixtureVerifier,
    build_boot_proof,
    build_cohort_proof,
    classify_host,
    proof_digest,
    proof_json_schema,
)
from ._stop import PgroupStopMachine, StopEvidence, StopMachine, StopOutcome, check_identity

__all__ = [
    "CODES",
    "UNCERTAIN_REASONS",
    "CgroupEvents",
    "Cgroup2Mount",
    "CohortClaim",
    "CohortHandle",
    "CohortRefusal",
    "Containment",
    "Credentials",
    "Death",
    "DirectCgroupLauncher",
    "EvidenceUnavailable",
    "FixtureVerifier",
    "MemberRef",
    "ObservedIdentity",
    "PgroupLauncher",
    "PgroupStopMachine",
    "ScopeLauncher",
    "ShimChannel",
    "StopEvidence",
    "StopMachine",
    "StopOutcome",
    "StopRequest",
    "StopResult",
    "UserManager",
    "boot_id",
    "build_boot_proof",
    "build_cohort_proof",
    "check_identity",
    "classify_host",
    "find_cgroup2",
    "force_stop",
    "machine_id",
    "parse_events",
    "parse_mountinfo",
    "parse_stat",
    "proof_digest",
    "proof_json_schema",
    "read_events",
    "start_time",
    "unit_name_for",
]
