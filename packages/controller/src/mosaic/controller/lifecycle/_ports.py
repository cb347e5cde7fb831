"""The lifecycle's two ports and its one pool: what it asks of the writer claim (`ClaimsPort`, over
writer-claim: `WriterClaims`) and of the engine's cohort (`CohortPort`, over a cgroup-cohort launcher:
`CgroupCohort`), every blocking call of either on one bounded pool (`Pool`) that the runtime shares; the
lifecycle's `EffectPorts` (`LifecyclePorts`, the rows of `core/_effects.EFFECTS` the lifecycle runs), and
the engine it launched (`Execution`).

A test gives the lifecycle other ports (`mosaic.controller.testing.MemoryCohort`: the fake engine as a plain
child, the real stop machine over a scripted world), so the lifecycle's rules run without root; the
cohort suites hold the real ports to the kernel.

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
5. No blocking call runs on the event loop or on the loop's default executor: the ports run them on the
   lifecycle's pool, whose size is bounded (`POOL_WORKERS`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from mosaic.cgroup_cohort import (
    CohortHandle,
    CohortRef,
    Credentials,
    EngineLimits,
    Launcher,
    UserManager,
    release_cohort,
)
from mosaic.cgroup_cohort.stop import Census, StopExecutor, census, executor_for
from mosaic.pi_rpc import EngineLink
from mosaic.writer_claim import (
    BarrierHook,
    Binding,
    Claim,
    ClaimStore,
    ClaimWriteError,
    CohortProbe,
    PairObservation,
    ProofRef,
    RestartReport,
    SeatKey,
    SessionKey,
    State,
)
from mosaic.writer_claim.model import ProcessIdentity
from mosaic.writer_claim.store import OwnerLiveness

from ..core._effects import EFFECTS
from ..core._io import CENSUS, CLAIM_GENERATION, CLAIM_UNCERTAIN, FORCE_STOP, RECOVER, Effect, EffectName
from ..server._runtime import ControllerRuntime
from ._eligibility import EligibilityRecord, record_state, settle_record

__all__ = ["POOL_WORKERS", "CgroupCohort", "ClaimsOwner", "ClaimsPort", "CohortPort", "Execution", "LifecyclePorts",
           "Pool", "WriterClaims"]

T = TypeVar("T")

# The lifecycle's one pool (rule 5), shared with its runtime: claim fsyncs, a force stop (its grace and kill
# phase can hold a worker for seconds), letting a proven cohort go (it waits for the shim's exit), history
# pages and the drift check's reads. Four, so a stop in progress leaves room for a page or a read.
POOL_WORKERS = 4


class Pool:
    """The lifecycle's bounded pool of worker threads (rule 5); `run` awaits one blocking call on it."""

    def __init__(self, workers: int = POOL_WORKERS) -> None:
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mosaic-controller")

    async def run(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn)

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class ClaimsPort(Protocol):
    """What the lifecycle asks of the writer claim for its pair (seat, session), and of the eligibility
    records beside it; each call blocking on disk runs on the pool."""

    @property
    def store(self) -> ClaimStore: ...
    @property
    def incarnation(self) -> str: ...
    async def open(self) -> None: ...
    async def restart(self, probe: CohortProbe) -> RestartReport: ...
    async def acquire(self, binding: Binding) -> Claim: ...
    async def adopt(self, claim_id: str) -> Claim: ...
    def observe(self) -> PairObservation: ...
    async def mark_spawn(self, claim: Claim, engine_uid: int | None) -> None: ...
    async def activate(self, claim: Claim, ref: CohortRef) -> None: ...
    async def reserve_space(self, claim: Claim) -> None: ...
    async def mark_uncertain(self, claim: Claim) -> None: ...
    async def set_generation(self, claim: Claim, generation: int) -> None: ...
    async def release(self, claim: Claim, proof: ProofRef) -> None: ...
    async def record_state(self, record_id: str) -> str: ...
    async def settle_record(self, record_id: str, *, passed: bool) -> None: ...


class ClaimsOwner(NamedTuple):
    """Who a controller's claims name as their owner (writer-claim's `process`), and how the owner check
    tells whether an owner lives (`liveness`): this process and /proc by default; a test's runners, many in
    one process (`mosaic.controller.testing.Liveness`)."""

    process: ProcessIdentity
    liveness: OwnerLiveness


class WriterClaims:
    """The claims port over writer-claim's `ClaimStore` on `claim_root` for one pair, on `pool`."""

    def __init__(self, claim_root: str, seat: SeatKey, session: SessionKey, *, pool: Pool,
                 barrier: BarrierHook | None = None, owner: ClaimsOwner | None = None) -> None:
        self.claim_root, self.seat, self.session = claim_root, seat, session
        self._pool = pool
        self._barrier = barrier
        self._owner = owner
        self._store: ClaimStore | None = None

    @property
    def store(self) -> ClaimStore:
        assert self._store is not None, "the claims port is not open"
        return self._store

    @property
    def incarnation(self) -> str:
        return self.store.incarnation

    async def open(self) -> None:
        root, barrier, owner = self.claim_root, self._barrier, self._owner
        if owner is None:
            self._store = await self._pool.run(lambda: ClaimStore(root, barrier=barrier))
        else:
            self._store = await self._pool.run(lambda: ClaimStore(root, barrier=barrier, process=owner.process,
                                                                  liveness=owner.liveness))

    async def restart(self, probe: CohortProbe) -> RestartReport:
        store = self.store
        return await self._pool.run(lambda: store.restart(self.seat, self.session, probe))

    async def acquire(self, binding: Binding) -> Claim:
        store = self.store
        return await self._pool.run(lambda: store.acquire(self.seat, self.session, binding))

    async def adopt(self, claim_id: str) -> Claim:
        store = self.store
        return await self._pool.run(lambda: store.adopt(self.seat, self.session, claim_id))

    def observe(self) -> PairObservation:
        return self.store.observe(self.seat, self.session)

    async def mark_spawn(self, claim: Claim, engine_uid: int | None) -> None:
        await self._pool.run(lambda: claim.mark_spawn(engine_uid=engine_uid))

    async def activate(self, claim: Claim, ref: CohortRef) -> None:
        await self._pool.run(lambda: claim.activate(invocation_id=ref.epoch_id, engine=ref.engine,
                                                    cohort=ref.to_dict()))

    async def reserve_space(self, claim: Claim) -> None:
        await self._pool.run(claim.reserve_space)

    async def mark_uncertain(self, claim: Claim) -> None:
        await self._pool.run(claim.mark_uncertain)

    async def set_generation(self, claim: Claim, generation: int) -> None:
        await self._pool.run(lambda: claim.set_generation(generation))

    async def release(self, claim: Claim, proof: ProofRef) -> None:
        await self._pool.run(lambda: claim.release(proof))

    async def record_state(self, record_id: str) -> str:
        return await self._pool.run(lambda: record_state(self.claim_root, record_id))

    async def settle_record(self, record_id: str, *, passed: bool) -> None:
        await self._pool.run(lambda: settle_record(self.claim_root, record_id, passed=passed))


class CohortPort(Protocol):
    """What the lifecycle asks of the engine's cohort: cgroup-cohort's `Launcher` (launch, presence,
    rediscover, prewarm, close: each blocking call of the lifecycle's on the pool), and for a recorded
    cohort its census, the executor a force stop's actions are performed by, and letting it go once it
    was proven stopped."""

    @property
    def kind(self) -> str: ...
    def launcher(self) -> Launcher: ...
    def census(self, ref: CohortRef) -> Census: ...
    def executor(self, ref: CohortRef) -> StopExecutor: ...
    def let_go(self, ref: CohortRef) -> bool: ...


class CgroupCohort:
    """The cohort port over a cgroup-cohort `Launcher` (a scope, a direct cgroup or a process group) and the
    user manager that owns a scope (`manager`)."""

    def __init__(self, launcher: Launcher, *, manager: UserManager | None = None) -> None:
        self._launcher = launcher
        self.manager = manager

    @property
    def kind(self) -> str:
        return self._launcher.kind

    def launcher(self) -> Launcher:
        return self._launcher

    def census(self, ref: CohortRef) -> Census:
        return census(ref)

    def executor(self, ref: CohortRef) -> StopExecutor:
        return executor_for(ref, manager=self.manager)

    def let_go(self, ref: CohortRef) -> bool:
        return release_cohort(ref, force=False)


async def launch(pool: Pool, cohort: CohortPort, unit: str, argv: Sequence[str], *, env: Mapping[str, str],
                 cwd: str, limits: EngineLimits | None, engine: Credentials | None) -> CohortHandle:
    """Launch the engine under `unit` through the cohort port's launcher, on the pool."""
    launcher = cohort.launcher()
    return await pool.run(lambda: launcher.launch(unit, argv, env=dict(env), cwd=cwd, limits=limits,
                                                  engine=engine))


@dataclass
class Execution:
    """One launched engine: its claim, its cohort, its link."""

    claim: Claim
    ref: CohortRef | None
    link: EngineLink | None
    handle: CohortHandle | None = None


class Lifecycle(Protocol):
    """What the ports read of the lifecycle they carry out effects for (`LaunchingController`)."""

    execution: Execution | None
    runtime: ControllerRuntime | None
    on_recovered: Callable[[EligibilityRecord], str | None] | None
    claims: ClaimsPort
    cohort: CohortPort
    pool: Pool
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

    def _execution(self) -> Execution:
        execution = self._lifecycle.execution
        assert execution is not None
        return execution

    async def census(self, effect: Effect) -> Mapping[str, Any]:
        """The cohort's size now, for a force-stop confirmation's summary (cgroup-cohort `census`)."""
        async def count() -> Mapping[str, Any]:
            execution = self._lifecycle.execution
            ref = execution.ref if execution is not None else None
            if ref is None:
                return {"members": None, "complete": False, "detail": "no cohort reference is recorded"}
            cohort = self._lifecycle.cohort
            counted: Census = await self._lifecycle.pool.run(lambda: cohort.census(ref))
            return counted.to_dict()

        return await self._run(CENSUS, count)

    async def read_session(self, effect: Effect) -> Mapping[str, Any]:
        """Never called: the runtime reads the session file itself (its row runs in the runtime)."""
        return EFFECTS[effect.kind].unattached

    async def publish_generation(self, effect: Effect) -> Mapping[str, Any]:
        async def publish() -> Mapping[str, Any]:
            claim = self._execution().claim
            if claim.state is State.STOPPED:
                # Released with its stop's proof: stopped is the claim's last step, so a generation taken after
                # it (a client's recovery control or takeover, to recover) has nothing left to fence there.
                return {"ok": True, "published": False}
            try:
                await self._lifecycle.claims.set_generation(claim, int(effect.payload["generation"]))
            except ClaimWriteError as exc:  # which key and why, to the core (no traceback)
                return {"ok": False, "error": str(exc)}
            return {"ok": True}

        return await self._run(CLAIM_GENERATION, publish)

    async def mark_uncertain(self, effect: Effect) -> Mapping[str, Any]:
        async def mark() -> Mapping[str, Any]:
            claim = self._execution().claim
            if claim.state not in (State.UNCERTAIN, State.STOPPED, State.STOPPING):
                try:
                    await self._lifecycle.claims.mark_uncertain(claim)
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
            payload = effect.payload
            result = dict(await self._lifecycle.pool.run(lambda: self._lifecycle._recover(payload)))
            issued = result.get("eligibility")
            on_recovered = self._lifecycle.on_recovered
            if on_recovered is not None and isinstance(issued, Mapping):
                hint = on_recovered(EligibilityRecord.from_dict(issued))
                if hint:
                    result["next"] = hint  # how this controller's launcher launches from the record
            return result

        return await self._run(RECOVER, recover)
