"""What the lifecycle's core asks of its claim and its cohort, carried out: the lifecycle's `EffectPorts`
(`LifecyclePorts`, the rows of `core/_effects.EFFECTS` the lifecycle runs), and the engine it launched
(`Execution`).

The rules it keeps:

1. Every claim publication goes one at a time, in the order the core asked (a `Claim` and its store are
   not thread-safe, and two steps racing would make the second lose its `link()` to the first): the
   effects whose row says `claim_lock` run under the lifecycle's claim lock; a census (a read of the
   cohort, no claim write) never waits behind a stop's lock.
2. A generation taken after the claim was released with its stop's proof is not published: stopped is the
   claim's last step (a client's recovery control or takeover, to recover, has nothing left to fence there).
3. An uncertain binding makes the claim uncertain once, unless it is already uncertain, stopping or stopped.
4. A publication that cannot be written comes back to the core as `{"ok": False, "error"}` (which key and
   why, no traceback): the binding goes uncertain (claim-publication).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mosaic.cgroup_cohort import CohortHandle, CohortRef
from mosaic.cgroup_cohort.stop import Census, census
from mosaic.pi_rpc import EngineLink
from mosaic.writer_claim import Claim, ClaimWriteError, State

from ..core._effects import EFFECTS
from ..core._io import CENSUS, CLAIM_GENERATION, CLAIM_UNCERTAIN, FORCE_STOP, RECOVER, Effect, EffectName
from ..server._runtime import ControllerRuntime
from ._eligibility import EligibilityRecord

__all__ = ["Execution", "LifecyclePorts"]


@dataclass
class Execution:
    """One launched engine: its claim, its cohort, its link."""

    claim: Claim
    ref: CohortRef | None
    link: EngineLink | None
    handle: CohortHandle | None = None


class Lifecycle(Protocol):
    """What the ports read of the lifecycle they carry out effects for (`Controller`)."""

    execution: Execution | None
    runtime: ControllerRuntime | None
    on_recovered: Callable[[EligibilityRecord], str | None] | None
    _claim_lock: asyncio.Lock

    async def _run_stop(self, stop_id: str, confirmation: Any) -> Mapping[str, Any]: ...
    def _recover(self, payload: Mapping[str, Any]) -> Mapping[str, Any]: ...


class LifecyclePorts:
    """The lifecycle's `EffectPorts`: each effect its row gives the lifecycle, on the claim and the cohort of
    the execution it serves (module rules 1-4)."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle

    async def _run(self, kind: EffectName, body: Callable[[], Awaitable[Mapping[str, Any]]]) -> Mapping[str, Any]:
        """The one dispatcher: under the claim lock when the effect's row says so (rule 1)."""
        if not EFFECTS[kind].claim_lock:
            return await body()
        async with self._lifecycle._claim_lock:
            return await body()

    def _serving(self) -> tuple[Execution, ControllerRuntime]:
        execution, runtime = self._lifecycle.execution, self._lifecycle.runtime
        assert execution is not None and runtime is not None
        return execution, runtime

    async def census(self, effect: Effect) -> Mapping[str, Any]:
        """The cohort's size now, for a force-stop confirmation's summary (cgroup-cohort `census`)."""
        async def count() -> Mapping[str, Any]:
            execution, runtime = self._lifecycle.execution, self._lifecycle.runtime
            ref = execution.ref if execution is not None else None
            if ref is None or runtime is None:
                return {"members": None, "complete": False, "detail": "no cohort reference is recorded"}
            counted: Census = await runtime.run_blocking(lambda: census(ref))
            return counted.to_dict()

        return await self._run(CENSUS, count)

    async def read_session(self, effect: Effect) -> Mapping[str, Any]:
        """Never called: the runtime reads the session file itself (its row runs in the runtime)."""
        return EFFECTS[effect.kind].unattached

    async def publish_generation(self, effect: Effect) -> Mapping[str, Any]:
        async def publish() -> Mapping[str, Any]:
            execution, runtime = self._serving()
            claim = execution.claim
            if claim.state is State.STOPPED:
                # Released with its stop's proof: stopped is the claim's last step, so a generation taken after
                # it (a client's recovery control or takeover, to recover) has nothing left to fence there.
                return {"ok": True, "published": False}
            generation = int(effect.payload["generation"])
            try:
                await runtime.run_blocking(lambda: claim.set_generation(generation))
            except ClaimWriteError as exc:  # which key and why, to the core (no traceback)
                return {"ok": False, "error": str(exc)}
            return {"ok": True}

        return await self._run(CLAIM_GENERATION, publish)

    async def mark_uncertain(self, effect: Effect) -> Mapping[str, Any]:
        async def mark() -> Mapping[str, Any]:
            execution, runtime = self._serving()
            claim = execution.claim
            if claim.state not in (State.UNCERTAIN, State.STOPPED, State.STOPPING):
                try:
                    await runtime.run_blocking(claim.mark_uncertain)
                except ClaimWriteError as exc:
                    return {"ok": False, "error": str(exc)}
            return {"ok": True}

        return await self._run(CLAIM_UNCERTAIN, mark)

    async def force_stop(self, effect: Effect) -> Mapping[str, Any]:
        async def stop() -> Mapping[str, Any]:
            return await self._lifecycle._run_stop(str(effect.payload["stop"]), effect.payload.get("confirmation"))

        return await self._run(FORCE_STOP, stop)

    async def recover(self, effect: Effect) -> Mapping[str, Any]:
        async def recover() -> Mapping[str, Any]:
            _execution, runtime = self._serving()
            payload = effect.payload
            result = dict(await runtime.run_blocking(lambda: self._lifecycle._recover(payload)))
            issued = result.get("eligibility")
            on_recovered = self._lifecycle.on_recovered
            if on_recovered is not None and isinstance(issued, Mapping):
                hint = on_recovered(EligibilityRecord.from_dict(issued))
                if hint:
                    result["next"] = hint  # how this controller's launcher launches from the record
            return result

        return await self._run(RECOVER, recover)
