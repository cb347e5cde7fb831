"""Where the writer claim meets the cohort: the controller is the one layer that may import both.

writer-claim asks unit and boot questions through its `CohortProbe` protocol and stores the cohort
reference opaquely; cgroup-cohort launches, stops and proves, knowing nothing of claims. This module is
the adapter between them, over the real packages (tests_cohort/test_claim_cohort_contract.py):

- `ClaimCohortProbe` answers `observe_unit` with the launcher's `presence` of the recorded unit name, and
  `boot_proof` from what the claim stored: the full `CohortRef` when the launcher's reference was
  recorded, else only the recorded unit name and host (a crash after the spawn marker, brief W20);
- `run_force_stop` runs cgroup-cohort's `force_stop` (the one stop loop) with a phase hook that publishes
  each recorded phase into the claim before that phase's first action (brief §6: "the stop ID, the
  answered confirmation and the current phase go into the stopping revision before any signal"), so a
  restarted controller re-runs the same stop from TERM (K10, K11);
- `stop_and_release` runs that stop and ends the claim as its proof says: released with the proof's
  digest when stopped, uncertain otherwise, and when a revision cannot be published (a full disk past the
  reserved room) uncertain with which key, why and how far the stop got;
- `cohort_proof_ref` turns a cohortProof into the claim's `ProofRef`, with the proof's own
  `verification.digest` byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mosaic.cgroup_cohort import (
    CohortRef,
    CohortRefusal,
    FixtureVerifier,
    Launcher,
    StopRequest,
    UnlaunchedCohort,
    UserManager,
    build_boot_proof,
    force_stop,
)
from mosaic.cgroup_cohort.proof import boot_time
from mosaic.cgroup_cohort.stop import StopExecutor, StopOutcome
from mosaic.safe_open import HostIdentity
from mosaic.writer_claim import Claim, ClaimWriteError, ProofKind, ProofRef, Revision, State, UnitObservation

__all__ = ["ClaimCohortProbe", "StopRun", "cohort_proof_ref", "run_force_stop", "stop_and_release"]


def _proof_ref(kind: ProofKind, proof: Mapping[str, Any]) -> ProofRef:
    cohort = proof.get("cohort") or {}
    return ProofRef(kind, str(proof["verification"]["digest"]), {
        "stop": str(proof["stop"]),
        "unit": str(cohort.get("unit")) if isinstance(cohort, Mapping) else None,
        "members": len(proof.get("members") or ()),
        "membershipComplete": proof.get("membershipComplete") is True,
    })


def cohort_proof_ref(proof: Mapping[str, Any]) -> ProofRef:
    """The claim's reference to a cohortProof: kind cohort-proof, the proof's `verification.digest`."""
    return _proof_ref(ProofKind.COHORT, proof)


class ClaimCohortProbe:
    """writer-claim's `CohortProbe`, answered by cgroup-cohort for one launcher route.

    Boot proofs are registered with `verifier` (the fixture's trusted registry: the party issuing the proof
    registers it, CHAT-01 lines 330-333) and kept in `proofs` by digest, for the controller's evidence.
    """

    def __init__(self, launcher: Launcher, *, verifier: FixtureVerifier,
                 clock: Callable[[], float] = time.time) -> None:
        self.launcher = launcher
        self.verifier = verifier
        self.proofs: dict[str, dict[str, Any]] = {}
        self._clock = clock

    def observe_unit(self, unit_name: str) -> UnitObservation:
        """The launcher's reading of the unit name: absent, present, or unavailable (never absent for a
        reading that failed: brief §6 "Unavailable is not empty")."""
        return UnitObservation(unit_name, self.launcher.presence(unit_name), {"launcher": self.launcher.kind})

    def boot_proof(self, revision: Revision, host: HostIdentity) -> ProofRef | None:
        """A boot proof for a claim recorded on an earlier boot of this host, from the claim alone; None
        when none can be issued (another machine: foreign-host, K16; the same boot; a stored reference
        that does not read back)."""
        recorded: CohortRef | UnlaunchedCohort
        try:
            recorded = (CohortRef.from_dict(revision.cohort) if revision.cohort is not None
                        else UnlaunchedCohort(revision.unit_name, revision.host))
        except ValueError:
            return None
        request = StopRequest(boot_stop_id(revision.claim_id), revision.binding.conversation,
                              revision.binding.binding_id,
                              {"basis": "boot-change", "claim": revision.claim_id, "actor": "restart"})
        try:
            proof = build_boot_proof(recorded, request, current=host, boot_time=boot_time(),
                                     observed_at=self._clock())
        except CohortRefusal:
            return None
        digest = self.verifier.register(proof)
        self.proofs[digest] = proof
        return _proof_ref(ProofKind.BOOT, proof)


# The phases a stop records in the claim, each published before its first action (brief §6 "Force stop":
# "The stop ID, the confirmation and the current phase go into the stopping revision before any signal"):
# `term` (the stopping revision with the stop ID and the confirmation; the invocation-ID check, SIGTERM and
# the grace run under it) and `kill` (before the freeze; freeze, enumeration, re-check, cgroup.kill and the
# collection of deaths run under it). The machine's finer steps are not published: a restart re-runs from
# TERM whatever was recorded (K10, K11), so they would change nothing a restart does, and each publication
# is two fsynced writes on both keys, on the stop's critical path.
RECORDED_PHASE = {"identity": "term", "term": "term", "grace": "term", "freeze": "kill", "enumerate": "kill",
                  "recheck": "kill", "kill": "kill", "collect": "kill", "observe": "kill"}


def boot_stop_id(claim_id: str) -> str:
    """The stop ID of the boot proof restart issues for a claim (§6 "Boot proof")."""
    return f"boot-{claim_id}"


@dataclass(frozen=True)
class StopRun:
    """A force stop driven under a claim: the machine's outcome, the cohortProof (stopped only), and every
    phase published into the claim, in order."""

    outcome: StopOutcome
    proof: dict[str, Any] | None
    published: tuple[str, ...]


def run_force_stop(
    claim: Claim,
    ref: CohortRef,
    request: StopRequest,
    *,
    confirmation: str | None,
    manager: UserManager | None = None,
    verifier: FixtureVerifier | None = None,
    on_phase: Callable[[str], None] | None = None,
    grace: float = 2.0,
    freeze_timeout: float = 10.0,
    kill_timeout: float = 10.0,
    collect_timeout: float = 5.0,
    executor: StopExecutor | None = None,
) -> StopRun:
    """Run brief §6's force stop of `ref` for `claim`, publishing each recorded phase before its action.

    cgroup-cohort's `force_stop` runs the stop (the one loop); its phase hook publishes here: the machine's
    phase as the claim records it (`RECORDED_PHASE`), into the stopping revision (`Claim.begin_stop`),
    whenever that differs from the last one published, before the phase's first action; then `on_phase`.
    Blocking (the shim calls wait on the kernel): the controller's shell runs it off the event loop. The
    first publication ("term") is the stopping revision with the stop ID and confirmation, before any
    signal; a publication that cannot be written raises (`ClaimWriteError`) with nothing of its phase
    done. A restart calls this again with the same request on the adopted claim and
    `CohortRef.from_dict(claim.cohort)`: it re-checks identity and re-runs from TERM (K10, K11). A stopped
    outcome's proof is registered with `verifier` (when given) before it is returned; this function
    never releases the claim (the caller does, with `cohort_proof_ref(proof)`). `executor`: what performs
    the actions (cgroup-cohort's for `ref` when None).
    """
    published: list[str] = []

    def publish(phase: str) -> None:
        recorded = RECORDED_PHASE.get(phase, phase)
        if not published or published[-1] != recorded:
            claim.begin_stop(request.stop_id, confirmation=confirmation, phase=recorded)
            published.append(recorded)
            if on_phase is not None:
                on_phase(recorded)

    result = force_stop(ref, request, manager=manager, grace=grace, freeze_timeout=freeze_timeout,
                        kill_timeout=kill_timeout, collect_timeout=collect_timeout, verifier=verifier,
                        on_phase=publish, executor=executor)
    return StopRun(result.outcome, result.proof, tuple(published))


def stop_and_release(claim: Claim, ref: CohortRef, request: StopRequest, *, confirmation: str | None,
                     verifier: FixtureVerifier | None, grace: float, on_phase: Callable[[str], None] | None,
                     manager: UserManager | None = None, executor: StopExecutor | None = None) -> dict[str, Any]:
    """Brief §6 "Force stop" on the recorded cohort (`run_force_stop`), then the claim as the proof says:
    stopped (released by the proof's digest) only when the cohort proof says so; otherwise the claim stays
    held, uncertain. Blocking. Returns the stop's result for the core: ``state`` "stopped" (with
    ``proofDigest``, ``members``, ``published``, ``proof``) or "uncertain" (with ``reason``, ``detail``).
    `executor` performs the stop's actions (cgroup-cohort's for `ref` and `manager` when None)."""
    stop_id = request.stop_id
    try:
        run = run_force_stop(claim, ref, request, confirmation=confirmation, manager=manager, verifier=verifier,
                             grace=grace, on_phase=on_phase, executor=executor)
    except ClaimWriteError as exc:
        return unwritten(claim, exc, stop_reach(claim))
    if run.outcome.state == "stopped" and run.proof is not None:
        try:
            claim.release(cohort_proof_ref(run.proof), stop_id=stop_id)
        except ClaimWriteError as exc:
            # Proven stopped, not released: the claim keeps its stopping revision (a restart re-runs the stop
            # from TERM and finds the cohort empty), and no client is told stopped.
            return {"state": "uncertain", "reason": "claim-publication",
                    "detail": f"{exc}; the cohort was proven stopped (proof "
                              f"{run.proof['verification']['digest']}) but the claim could not be "
                              "released: it stays stopping", "published": list(run.published)}
        return {"state": "stopped", "proofDigest": run.proof["verification"]["digest"],
                "members": len(run.proof["members"]), "published": list(run.published), "proof": run.proof}
    try:
        claim.mark_uncertain()
    except ClaimWriteError as exc:
        return {"state": "uncertain", "reason": run.outcome.reason,
                "detail": f"{run.outcome.detail}; and the uncertain revision: {exc}",
                "published": list(run.published)}
    return {"state": "uncertain", "reason": run.outcome.reason, "detail": run.outcome.detail,
            "published": list(run.published)}


def stop_reach(claim: Claim) -> str:
    """How far a stop whose phase could not be recorded got, from the last phase both keys show (brief §6:
    each phase is recorded before its first action)."""
    stop = claim.head("session").stop if claim.state is State.STOPPING else None
    if stop is None or stop.phase not in ("term", "kill"):
        return "nothing was signalled: a stop is recorded before its first signal"
    if stop.phase == "term":
        return "the TERM phase ran; the kill phase (freeze, kill) was not begun, its record not written"
    return "the kill phase ran, but its end could not be recorded"


def unwritten(claim: Claim, exc: ClaimWriteError, reach: str) -> dict[str, Any]:
    """A stop whose claim revision could not be published (a full disk past the reserved room, an I/O
    error): uncertain, saying which key could not be written and why (the errno's name) and how far the
    stop got; the claim is marked uncertain where that can still be written."""
    detail = f"{exc}; {reach}"
    try:
        claim.mark_uncertain()
    except ClaimWriteError as also:
        detail += f"; the uncertain revision could not be written either: {also}"
    return {"state": "uncertain", "reason": "claim-publication", "detail": detail}
