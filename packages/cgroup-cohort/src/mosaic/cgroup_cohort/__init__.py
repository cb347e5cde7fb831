"""mosaic.cgroup_cohort: launchers, the supervisor shim, freeze/kill force stop with cohort and boot proofs.

The producer of seeds/003 §6 ("Stop, cohort proof and recovery", fixtures K1-K18) and of the seed
README's src/cohort.mjs and src/shim.mjs. Depends on mosaic.safe_open (the refusal base and the shared
host, process and digest identities) and cffi (ABI mode) for the syscalls.

    launcher: Launcher = DirectCgroupLauncher(parent, socket_dir, engine=Credentials(uid, gid))  # or Scope...
    launcher.prewarm()                              # optional: the launch's spawn helper boots meanwhile
    handle = launcher.launch(unit, engine_argv)     # unit: the name the writer claim recorded
    stdin_w, stdout_r = handle.take_stdio()         # the engine link owns these now
    record(handle.ref.to_dict())                    # into the writer claim, before relying on the engine
    ...
    ref = CohortRef.from_dict(stored)               # later, maybe in a fresh process
    machine, executor = machine_for(ref, request), executor_for(ref, manager=manager)
    while not isinstance(action := machine.action, Finish):
        publish(machine.phase)                      # into the claim, between actions
        machine.feed(executor.perform(action))      # blocking: run it in a thread
    executor.close()
    proof = build_cohort_proof(ref, request, action.outcome)   # when action.outcome.state == "stopped"
"""

from ._census import Census, census
from ._cgroupfs import Cgroup2Mount, find_cgroup2
from ._direct import DirectCgroupLauncher
from ._driver import StopExecutor, StopResult, executor_for, force_stop
from ._errors import CODES, UNCERTAIN_REASONS, CohortRefusal
from ._events import (
    Acknowledged,
    Action,
    AwaitGrace,
    CheckIdentity,
    Collect,
    Enumerate,
    Enumerated,
    Event,
    Finish,
    Freeze,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    GroupObserved,
    IdentityObserved,
    IdentityUnavailable,
    Kill,
    Killed,
    KillGroup,
    ObserveGroup,
    Reaped,
    RecheckFrozen,
    SendTerm,
    StopEvidence,
    StopOutcome,
    TermSent,
    Unavailable,
)
from ._ffi import Credentials
from ._launcher import CohortHandle, Launcher, Presence, release_cohort
from ._limits import LIMITS, EngineLimits, LimitHeld, held_to_dict
from ._model import (
    MAX_REF_BYTES,
    CohortRef,
    Containment,
    Death,
    LauncherKind,
    ObservedIdentity,
    StopRequest,
    UnlaunchedCohort,
)
from ._pgroup import PgroupLauncher
from ._proc import boot_time
from ._proof import (
    PROOF_SCHEMA,
    FixtureVerifier,
    HostRelation,
    build_boot_proof,
    build_cohort_proof,
    classify_host,
    proof_digest,
    proof_json_schema,
)
from ._scope import ScopeLauncher, UserManager
from ._stop import (
    PGROUP_TRANSITIONS,
    STOP_TRANSITIONS,
    PgPhase,
    PgroupStopMachine,
    Phase,
    StopMachine,
    check_identity,
    machine_for,
)

__all__ = [
    # refusals and the reasons a stop ends uncertain
    "CODES",
    "UNCERTAIN_REASONS",
    "CohortRefusal",
    # launching
    "Cgroup2Mount",
    "CohortHandle",
    "Credentials",
    "DirectCgroupLauncher",
    "Launcher",
    "PgroupLauncher",
    "Presence",
    "ScopeLauncher",
    "UserManager",
    "release_cohort",
    "find_cgroup2",
    # the engine's limits (README "Limits"): what to set, and where each one holds after a launch
    "LIMITS",
    "EngineLimits",
    "LimitHeld",
    "held_to_dict",
    # what a force-stop confirmation shows: the cohort's size now (a count, not a proof)
    "Census",
    "census",
    # the cohort reference and the records around a stop
    "MAX_REF_BYTES",
    "CohortRef",
    "Containment",
    "Death",
    "LauncherKind",
    "ObservedIdentity",
    "StopRequest",
    "UnlaunchedCohort",
    # the stop machines, their tables, actions, events and executors
    "PGROUP_TRANSITIONS",
    "STOP_TRANSITIONS",
    "Acknowledged",
    "Action",
    "AwaitGrace",
    "CheckIdentity",
    "Collect",
    "Enumerate",
    "Enumerated",
    "Event",
    "Finish",
    "Freeze",
    "Frozen",
    "FrozenRechecked",
    "GraceEnded",
    "GroupObserved",
    "IdentityObserved",
    "IdentityUnavailable",
    "Kill",
    "KillGroup",
    "Killed",
    "ObserveGroup",
    "PgPhase",
    "PgroupStopMachine",
    "Phase",
    "Reaped",
    "RecheckFrozen",
    "SendTerm",
    "StopEvidence",
    "StopExecutor",
    "StopMachine",
    "StopOutcome",
    "StopResult",
    "TermSent",
    "Unavailable",
    "check_identity",
    "executor_for",
    "force_stop",
    "machine_for",
    # proofs
    "PROOF_SCHEMA",
    "FixtureVerifier",
    "HostRelation",
    "boot_time",
    "build_boot_proof",
    "build_cohort_proof",
    "classify_host",
    "proof_digest",
    "proof_json_schema",
]

from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    # mypy proves here that every launcher is a Launcher (the controller holds one without knowing which).
    def _conforms(s: ScopeLauncher, d: DirectCgroupLauncher, p: PgroupLauncher) -> tuple[Launcher, ...]:
        return (s, d, p)
