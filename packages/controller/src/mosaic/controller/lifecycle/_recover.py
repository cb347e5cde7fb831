"""Recover, the launcher's call and releasing a reservation (brief §6 "Recover (Q15)"): the lifecycle's half
that works from an eligibility record (`_eligibility`), as a part of `LaunchingController`.

The rules it keeps:

1. Recover (the `recover` effect, off the loop under the claim lock) needs the claim stopped with a proof,
   the same pins, the same session file and header and a clean tail; then it reserves the pair under a new
   claim (generation + 1, the leaf the stopped engine left) carrying the record's id, and writes the
   single-use record. Nothing is launched: no client command launches. A record that cannot be written
   gives the reservation back (`no-space`, `eligibility`).
2. The launcher's call (start with `eligibility`): the record is revalidated against the claim, the pins and
   the session now, held (one launcher: K17), the reservation taken over, then the engine is spawned under
   it exactly as a first launch; the record is consumed (`used`) only when that launch's load check passed
   (K8's and the takeover drift check), `spent` when it did not.
3. A reservation that will not launch is released with the never-spawned proof (`release_reservation`),
   its record spent, never used.
"""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Callable, Mapping
from typing import Any

from mosaic.controller_client import ControlRefusal
from mosaic.safe_open import Refusal
from mosaic.writer_claim import (
    Binding,
    Claim,
    ClaimRefusal,
    ClaimWriteError,
    Pins,
    ProofKind,
    ProofRef,
    SeatKey,
    SessionKey,
    State,
)

from ..core._receive import Bounds, ControllerCore
from ..engines._seam import Engine, Place, SessionRead
from ..server._runtime import ControllerRuntime
from ._checks import pins_dict, refused, revalidate
from ._eligibility import (
    EligibilityRecord,
    hold_record,
    mint_eligibility_id,
    read_record,
    record_state,
    write_record,
)
from ._guard import LiveSessionGuard
from ._placement import Placement
from ._ports import ClaimsPort, CohortPort, Execution, Pool
from ._steps import StartStep

__all__ = ["Recovering"]

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


class Recovering:
    """The recover half of `LaunchingController` (module rules 1-3); the attributes it reads are the
    controller's."""

    claims: ClaimsPort
    cohort: CohortPort
    pool: Pool
    guard: LiveSessionGuard
    execution: Execution | None
    runtime: ControllerRuntime | None
    recovered: EligibilityRecord | None
    eligibility: str | None
    identity: SessionRead
    place: Place
    session_real: str
    claim_root_real: str
    conversation: str
    seat_key: SeatKey
    session_key: SessionKey
    pins: Pins
    argv: list[str]
    bounds: Bounds
    mode: str
    _claim: Claim | None
    _load_problem: str | None

    engine: Engine
    placement: Placement
    clock: Callable[[], float]

    def _step(self, name: str) -> None:
        raise NotImplementedError

    def _binding(self, identity: SessionRead | None = None, pins: Pins | None = None) -> Binding:
        raise NotImplementedError

    async def _launch_eligible(self) -> StartStep:
        """The launcher's call (brief §6 "Recover"): read the record, revalidate it against the claim, the
        pins and the current session (leaf, header, a clean tail), hold it (one launcher: K17), take the
        reservation over, then spawn under it exactly as a first launch (spawn marker, launch, active, the
        load check against the recorded leaf: K8, the takeover drift check); then the record is consumed
        (`used`) when that load check passed, `spent` when it did not. A refusal before the hold leaves the
        record and the reservation as they were (K18); after it, the reservation stays held until released
        with a proof (`release_reservation`)."""
        record_id = self.eligibility
        assert record_id is not None
        try:
            record, claim = await self.pool.run(lambda: self._use_record(record_id, check=True))
        except ClaimRefusal as refusal:
            raise ControlRefusal("eligibility", f"the reservation could not be taken over: {refusal.code}: "
                                                f"{refusal.message}") from None
        self.mode = "recovered"
        self.recovered = record
        self._claim = claim
        return "spawn"

    def _use_record(self, record_id: str, *, check: bool) -> tuple[EligibilityRecord, Claim]:
        """Blocking: read the record, (revalidate it), hold it (one launcher: K17), take the reservation over.
        Raises the record's refusals (`eligibility`, and with `check` (`revalidate`) `target`, `engine-pin-mismatch`,
        `session-drift`) and the take-over's `ClaimRefusal`. The record is consumed only once the launch
        passed its load check (`_settle_eligibility`)."""
        store = self.claims.store
        record = read_record(self.claim_root_real, record_id)
        if check:
            self.identity = revalidate(store, self.seat_key, self.session_key, record, engine=self.engine, place=self.place,
                                       session_file=self.session_real, header_id=self.identity.header_id,
                                       conversation=self.conversation, pins=self.pins)
            self._step("revalidated")
        hold_record(self.claim_root_real, record_id)
        self._step("held")
        claim = store.take_over(self.seat_key, self.session_key, record.claim_id, eligibility=record.id)
        self._step("taken-over")
        return record, claim

    async def _settle_eligibility(self) -> StartStep:
        """The launch under a held record ends its load check: K8's (the engine's session file, header and
        leaf) and the drift check the runtime runs when it starts (the file is the engine's). Passed: the
        record is consumed (`used`) and admission is open. Failed: the record is `spent`, never `used`
        (the engine stays claimed and contained until a force stop proves it stopped, K8). A check that
        does not end within its bounds counts as failed (the core fences it `drift-check` meanwhile). An engine with
        no drift check (`Engine.drift` None) passes on K8 alone."""
        assert self.runtime is not None and self.recovered is not None
        runtime, record_id, problem = self.runtime, self.recovered.id, self._load_problem
        bound = 2 * self.bounds.drift + self.bounds.command

        def ended(core: ControllerCore) -> bool:
            return core.drift_verdict is not None or not core.admission_open

        passed = False
        if problem is None and self.engine.drift(self.identity) is None:
            passed = runtime.core.admission_open  # an engine with no drift check: K8's load check alone
        elif problem is None:
            with contextlib.suppress(TimeoutError):
                await runtime.wait_core(ended, bound)
                verdict = runtime.core.drift_verdict
                passed = runtime.core.admission_open and verdict is not None and not verdict.drift
        await self.claims.settle_record(record_id, passed=passed)
        self._step("settled")
        return "done"

    async def release_reservation(self, record_id: str) -> ProofRef:
        """The operator's way out of an eligibility that will not launch (K18: "The reservation stays until
        released with proof"): hold the record, take the reservation over and release it with the no-unit
        reference of a claim that never spawned; the record ends `spent`. Returns that reference.

        A reservation still pending whose record is held (a launcher crashed between its hold and its
        take-over) or was never written (the recovering controller crashed before writing it) is released
        the same way, by taking it over: the take-over has one winner, so a launcher still on its way to it is
        refused and no engine is spawned."""
        self.cohort.launcher().close()  # this path launches nothing
        await self.claims.open()
        state = await self.claims.record_state(record_id)
        claim = await self.pool.run(lambda: self._reservation_to_release(record_id))
        proof = ProofRef.never_spawned(claim.claim_id, "eligibility released without a launch")
        await self.claims.release(claim, proof)
        if state in ("unused", "launching"):
            # Held here, or by a launcher that died before its take-over (the take-over just made was the
            # first): nothing was launched under it, so it ends spent, never used.
            await self.claims.settle_record(record_id, passed=False)
        return proof

    def _reservation_to_release(self, record_id: str) -> Claim:
        """Blocking: the reservation pending under `record_id`, taken over. An unused record is held first
        (no launcher can use it after). A held one (a launcher crashed between its hold and its take-over)
        or a missing one (the recovering controller crashed between the reservation and the record) is not
        needed: the pair's heads name the claim, and the take-over checks both keys."""
        store = self.claims.store
        if record_state(self.claim_root_real, record_id) == "unused":
            return self._use_record(record_id, check=False)[1]
        head = store.observe(self.seat_key, self.session_key).seat.revision
        pending = head.eligibility if head is not None else None
        if head is None or pending is None or pending.id != record_id or pending.taken:
            raise ControlRefusal("eligibility", f"no reservation is pending for eligibility {record_id}")
        return store.take_over(self.seat_key, self.session_key, head.claim_id, eligibility=record_id)

    def _recover(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        """The `recover` effect (brief §6 "Recover (Q15)"), run off the loop under the claim lock. The core has
        checked the caller, the stopped binding and the exact confirmation (consumed). Here: the claim is
        stopped with a proof, the effects are reconciled or explicitly uncertain (the core's effectReport at
        the stop marks every open tool call uncertain: K5), the pins are the same, the session is the same
        file and header. Then a new reserved claim under a new claim ID on both keys (generation + 1, the
        leaf the stopped engine left), carrying the eligibility id, and the single-use record. Nothing is
        launched here: no client command launches."""
        execution = self.execution
        assert execution is not None
        store = self.claims.store
        claim = execution.claim
        head = claim.head("session")
        proof = head.proof
        if claim.state is not State.STOPPED or proof is None or proof.kind not in (ProofKind.COHORT, ProofKind.BOOT):
            return refused("stop-proof", f"the claim is {claim.state.value} without a stop proof")
        try:
            pins = self.engine.pins(self.argv)
        except Refusal as refusal:
            return {"refusal": refusal.to_dict()}
        if pins != head.binding.pins:
            return refused("engine-pin-mismatch", "the engine's pins changed since the stopped launch (K6)")
        try:
            self.guard.bind(self.placement.session_file, what="session file", expected=self.session_real)
            now = self.engine.read(self.place)
        except Refusal as refusal:
            return {"refusal": refusal.to_dict()}
        if now.header_id != self.identity.header_id:
            return refused("target", "the session file's header ID changed")
        torn = now.torn_tail()
        if torn is not None:  # before anything is reserved: a relaunch on it would fence at once
            return refused("session-drift", torn)
        record_id = mint_eligibility_id()
        generation = head.generation + 1
        try:
            new = store.acquire(self.seat_key, self.session_key, self._binding(now, pins),
                                     generation=generation, eligibility=record_id)
        except ClaimRefusal as refusal:
            return refused("eligibility", f"the pair cannot be reserved: {refusal.code}: {refusal.message}")
        except ClaimWriteError as exc:  # nothing half-written: at most a reservation restart frees (no marker)
            return refused("no-space" if exc.errno in _NO_ROOM else "eligibility",
                            f"the pair cannot be reserved: {exc}")
        self._step("recover-reserved")
        stop = payload.get("stop")
        record = EligibilityRecord(
            id=record_id, claim_id=new.claim_id, previous_claim_id=claim.claim_id,
            stop=stop if isinstance(stop, str) else None, proof_digest=proof.digest, pins=pins_dict(pins),
            session_id=now.header_id, session_file=self.session_real, conversation=self.conversation,
            branch=now.branch, leaf=now.leaf, generation=generation, incarnation=str(payload.get("incarnation")),
            issued_at=self.clock())
        try:
            write_record(self.claim_root_real, record)
        except OSError as exc:
            # The reservation is this controller's and nothing was spawned under it: give it back.
            note = "the reservation was released"
            try:
                new.release(ProofRef.never_spawned(new.claim_id, "the eligibility record could not be written"))
            except (OSError, ClaimRefusal) as also:
                note = f"the reservation stays: release it with eligibility {record_id} ({also})"
            return refused("no-space" if exc.errno in _NO_ROOM else "eligibility",
                            f"the eligibility record could not be written ({errno.errorcode.get(exc.errno or 0, 'error')}:"
                            f" {exc.strerror}); {note}")
        self._step("recover-recorded")
        return {"eligibility": record.to_dict(), "digest": record.digest}

