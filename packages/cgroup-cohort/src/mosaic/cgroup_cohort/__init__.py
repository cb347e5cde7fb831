"""mosaic.cgroup_cohort: launch an engine in a cohort it cannot leave, and force stop it with a proof.

The producer of seeds/003 §6 ("Stop, cohort proof and recovery", fixtures K1-K18) and of the seed
README's src/cohort.mjs and src/shim.mjs. Depends on mosaic.safe_open (the refusal base and the shared
host, process and digest identities) and cffi (ABI mode) for the syscalls.

    launcher = DirectCgroupLauncher(parent, socket_dir, engine=Credentials(uid, gid))  # or ScopeLauncher, ...
    handle = launcher.launch(claim_unit, engine_argv)   # the unit name the writer claim recorded
    record(handle.ref.to_dict())                        # into the claim, before relying on the engine
    result = force_stop(CohortRef.from_dict(stored), StopRequest(stop_id, conversation, execution, answer),
                        verifier=verifier)              # result.proof when result.outcome.state == "stopped"

What a consumer needs is here; the rest is in named public modules: ``launchers`` (the three launchers,
presence, release), ``reference`` (the cohort reference), ``stop`` (the machines, actions, events and
executors a controller drives step by step; ``census``), ``proof`` (cohort and boot proofs, the verifier),
``limits`` (the engine's limits), ``cgroupfs`` (the cgroup2 and /proc readers), ``bindings`` (the cffi
syscalls), ``shim`` and ``spawn_helper`` (the two programs a launch starts), ``testing`` (test support).
"""

from ._direct import DirectCgroupLauncher
from ._driver import StopResult, force_stop
from ._errors import CODES, CohortRefusal
from ._ffi import Credentials
from ._launcher import CohortHandle, Launcher, release_cohort
from ._limits import EngineLimits
from ._model import CohortRef, StopRequest, UnlaunchedCohort
from ._pgroup import PgroupLauncher
from ._proof import FixtureVerifier, build_boot_proof
from ._scope import ScopeLauncher, UserManager

__all__ = [
    # the refusal, and its table (code -> reconcile)
    "CODES",
    "CohortRefusal",
    # launch under the unit name the claim recorded
    "CohortHandle",
    "Credentials",
    "DirectCgroupLauncher",
    "EngineLimits",
    "Launcher",
    "PgroupLauncher",
    "ScopeLauncher",
    "UserManager",
    # the reference a claim stores
    "CohortRef",
    "UnlaunchedCohort",
    # stop with a proof (or a boot proof for a cohort of an earlier boot), and let the shim go
    "FixtureVerifier",
    "StopRequest",
    "StopResult",
    "build_boot_proof",
    "force_stop",
    "release_cohort",
]


def __dir__() -> list[str]:
    return sorted(__all__)
