"""The lifecycle: a controller that launches its engine under a writer claim, in a cohort, and stops it
with a proof (brief §2 as the controller uses the claim, §6).

`Controller` is built from constructor arguments only (§2 "Location and live-session guard": no
production default): the fixture root, the claim root, the session file, the socket directory, the
engine (the pinned Pi, or a test hook command such as the fake engine) and a cgroup-cohort `Launcher`.
Its `start()`:

1. checks every path with the live-session guard (G1), reads the session's header ID (the claim's
   session key, D1) and the leaf Pi will load, and checks the pin and the seal (`engine-pin-mismatch`,
   `unsealed-engine`) before anything is claimed or spawned;
2. classifies what an earlier controller left on the pair (`ClaimStore.restart`): a free pair is
   acquired; an owner that is alive refuses `already-active` (W12, H16); a claim whose owner is proven
   gone is never launched over: an orphan (engine or unit alive: W6, W13) is served uncertain with force
   stop as the only way on, and a stop in progress is continued from TERM for the same stop record (K10,
   K11);
3. reserves (the intended unit name recorded), checks the paths again at bind (G2, G3), publishes the
   spawn marker, launches through the launcher with the recorded name, records the invocation ID, the
   engine identity and the cohort reference, and publishes active;
4. runs the load check before admission opens (K8): `get_state` must name this session file and header
   ID and `get_entries since=<recorded leaf>` the recorded leaf as Pi's `leafId` (Pi's own startup append
   of model and thinking entries, FACTS (d), is the engine's and allowed): two flat answers at any length;
   otherwise the binding is uncertain and prompts refuse `preflight`;
5. serves the socket. The core's effects are carried out here: a force stop drives cgroup-cohort's stop
   machine, publishing each phase into the claim before its action, and releases the claim with the
   proof's digest when the proof says stopped; anything else leaves the claim uncertain. A generation taken
   after that (a client's recovery control, to recover) is not published: stopped is the claim's last step.

The checks of steps 1 and 4 are `engines/pi/_launch`'s functions, a recover's record's (step 3) `_checks`'; the stop of step 5
and what it leaves in the claim is `_cohort.stop_and_release`.

Disconnect, agent_settled, EOF, SIGTERM, idle and an abort acknowledgement never release a claim (§2
"What never releases a claim"): nothing here releases except with a proof. `aclose()` stops serving and
leaves the engine, its cohort and its claim as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.cgroup_cohort import (
    CohortRef,
    Credentials,
    EngineLimits,
    FixtureVerifier,
    Launcher,
    StopRequest,
    UserManager,
    release_cohort,
)
from mosaic.cgroup_cohort.limits import held_to_dict
from mosaic.chat_pages import conversation_id
from mosaic.pi_rpc import EngineLink, LinkCore
from mosaic.pi_rpc.link import LinkEvent
from mosaic.safe_open import Refusal
from mosaic.writer_claim import (
    BarrierHook,
    Binding,
    Claim,
    ClaimRefusal,
    ClaimStore,
    ClaimWriteError,
    Outcome,
    Pins,
    ProofKind,
    ProofRef,
    SeatKey,
    SessionKey,
    State,
)

from .._refusal import ControlRefusal
from ..core._access import AccessPolicy, Grants
from ..core._receive import Bounds, ControllerCore, CoreConfig, engine_link_core
from ..engines._verdict import DriftConfig
from ..engines.pi._history import history_reader
from ..engines.pi._launch import current_pins, load_check, loadable, sealed_argv
from ..engines.pi._session import SessionIdentity, SessionPlace, read_session, session_place
from ..server._runtime import ControllerRuntime
from ..server._socket_server import ServerLimits, socket_state
from ._checks import effect_report, pins_dict, refused, revalidate
from ._cohort import ClaimCohortProbe, boot_stop_id, stop_and_release
from ._eligibility import (
    EligibilityRecord,
    hold_record,
    mint_eligibility_id,
    read_record,
    record_state,
    settle_record,
    write_record,
)
from ._engine_uids import EngineUids, hand_over
from ._guard import LiveRoots, LiveSessionGuard
from ._ports import Execution, LifecyclePorts
from ._session_reader import SessionFileReader

__all__ = ["Controller", "EngineSpec", "Hooks", "Placement"]

logger = logging.getLogger("mosaic.controller.lifecycle")

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)

@dataclass(frozen=True)
class Placement:
    """Where a controller may act. Every path is an argument (DESIGN principle 3); `home` says whose
    `~/.pi`, `~/.claude` and `~/.mosaic-dev` are live (the guard refuses them), `repository` a checkout
    whose `.pi/state/` is live, `registrations` the paths seat registrations name."""

    fixture_root: str
    claim_root: str
    session_file: str
    socket_dir: str
    home: str
    repository: str | None = None
    data_root: str | None = None
    registrations: tuple[str, ...] = ()
    workspace: str | None = None  # the seat tuple's workspace; the project root when None


@dataclass(frozen=True)
class EngineSpec:
    """How to run the engine, sealed: the pinned Pi in `pi_dir` (the pin is checked before spawn), or a
    test hook `command` (`[program, *pre_args]`: the fake engine; not the pinned engine, so not
    pin-checked, its pre-arguments still are). `env` is exactly the engine's environment. `limits` are the
    engine's task, memory, CPU and core limits, set where the kernel can hold them (cgroup-cohort README
    "Limits"; None: cgroup-cohort's defaults); where each one holds goes on the binding record."""

    env: Mapping[str, str]
    pi_dir: str | None = None
    command: tuple[str, ...] | None = None
    provider: str | None = None
    model: str | None = None
    thinking: str | None = None
    pin_tree: str | None = None  # a command engine's install tree: its content digest enters the binary pin
    limits: EngineLimits | None = None
    # The directories whose content is the engine's (its agent dir, its HOME): with a uid per execution
    # (`EngineUids`), what an earlier execution's uid owns in them is handed to each new one before its
    # launch (systemd's StateDirectory=); each must be inside the fixture root (the guard checks them).
    state_dirs: tuple[str, ...] = ()


@dataclass
class Hooks:
    """Test seams (never set in production): called at each launch or recover step, each published stop
    phase and each batch of engine link events before the core sees it, so a test can SIGKILL the
    controller at an exact step (W13, W14, W20, K10, K11, recover and the launcher's call) or between a
    prompt's complete write and its ack (H20)."""

    on_launch_step: Callable[[str], None] | None = None
    on_stop_phase: Callable[[str], None] | None = None
    barrier: BarrierHook | None = None
    on_engine_events: Callable[[list[LinkEvent]], None] | None = None


class Controller:
    """One controller process for one execution (see the module docstring)."""

    def __init__(
        self,
        placement: Placement,
        engine: EngineSpec,
        launcher: Launcher,
        *,
        verifier: FixtureVerifier,
        manager: UserManager | None = None,
        bounds: Bounds | None = None,
        limits: ServerLimits | None = None,
        stop_grace: float = 2.0,
        clock: Callable[[], float] = time.time,
        evidence_path: str | None = None,
        hooks: Hooks | None = None,
        eligibility: str | None = None,
        grants: Grants | None = None,
        on_recovered: Callable[[EligibilityRecord], str | None] | None = None,
        engine_uids: EngineUids | None = None,
    ) -> None:
        """Construction checks, before anything is claimed or spawned: the guard (G1), the session file's
        place and header, the pin and the seal, the grants (who besides this uid may connect and do what:
        `Grants`; none by default). `engine_uids`: a uid for each execution's engine, allocated from that
        range at each launch and recorded in the claim and the binding; None runs the engine as the
        launcher's one account. Raises the refusal (live-session-refused, configuration,
        engine-pin-mismatch, unsealed-engine).

        `on_recovered(record)` is called on the event loop when a client's recover has written its
        eligibility record (nothing is launched here: brief §6 "Recover"); what it returns, if anything,
        goes into the recover's reply as ``next``: how this controller's launcher launches from the record
        (`mosaic-controller serve` names its exact command line)."""
        self.placement = placement
        self.engine = engine
        self.launcher = launcher
        self.verifier = verifier
        self.manager = manager
        self.bounds = bounds or Bounds()
        self.limits = limits
        self.stop_grace = stop_grace
        self.clock = clock
        self.evidence_path = evidence_path
        self.hooks = hooks or Hooks()
        self.eligibility = eligibility
        self.access = AccessPolicy(grants=grants or Grants())
        self.engine_uids = engine_uids
        self.inherited: tuple[Mapping[str, Any], ...] = ()
        self.recovered: EligibilityRecord | None = None
        self.on_recovered = on_recovered
        self.reserved_for: str | None = None  # start() refused: the pair waits for this eligibility's launch
        self.guard = LiveSessionGuard(LiveRoots(
            fixture_root=placement.fixture_root, home=placement.home, repository=placement.repository,
            data_root=placement.data_root, registrations=placement.registrations))
        self.session_real = self.guard.check(placement.session_file, what="session file")
        self.claim_root_real = self.guard.check(placement.claim_root, what="claim root")
        self.place: SessionPlace = session_place(self.session_real)
        self.identity: SessionIdentity = read_session(self.place)
        # The engine's state directories, handed to each allocated uid before its launch: never a live one.
        for state_dir in engine.state_dirs:
            self.guard.check(state_dir, what="engine state directory")
        self.argv = sealed_argv(engine, self.session_real)
        self.pins = current_pins(engine, self.argv)
        self.conversation = conversation_id(self.place.project, self.place.seat, self.place.name)
        self.seat_key = SeatKey(self.place.seat, self.place.project, placement.workspace or self.place.project)
        self.session_key = SessionKey("pi", self.identity.header_id)
        self.store: ClaimStore | None = None
        self.execution: Execution | None = None
        self.runtime: ControllerRuntime | None = None
        self.mode = "new"
        # Every claim publication, one at a time and in the order the core asked: a Claim (and its store) is
        # not thread-safe, and two steps racing would make the second lose its link() to the first
        # (`LifecyclePorts` takes it for the effects whose row says so).
        self._claim_lock = asyncio.Lock()
        self._session_reader: SessionFileReader | None = None
        self._letting_go: list[asyncio.Future[bool]] = []  # release_cohort of proven stops, under way

    # ----------------------------------------------------------------------------------------- set-up

    def _binding(self, identity: SessionIdentity | None = None, pins: Pins | None = None) -> Binding:
        """The binding a claim records: the session's branch and leaf as read (`identity`, default the one
        read at construction) and the engine's pins."""
        identity = identity or self.identity
        return Binding(f"binding-{secrets.token_hex(8)}", "pi", self.conversation, identity.branch,
                       identity.leaf, pins or self.pins)

    def _step(self, name: str) -> None:
        if self.hooks.on_launch_step is not None:
            self.hooks.on_launch_step(name)

    @property
    def socket_path(self) -> str:
        return os.path.join(self.placement.socket_dir, "controller.sock")

    @property
    def core(self) -> ControllerCore:
        assert self.runtime is not None
        return self.runtime.core

    # ------------------------------------------------------------------------------------------- start

    async def start(self) -> None:
        """Classify, then launch (or serve an orphan, or continue a stop), then serve the socket. Raises the
        claim's refusal when the pair cannot be taken (already-active, unsafe-replacement, foreign-host) and
        cgroup-cohort's when the launch fails; in both cases nothing is left running.

        The launcher's spawn helper is started first (`prewarm`): its interpreter boots while the claim is
        classified, reserved and marked, so the engine starts as soon as the spawn marker is durable; a path
        that launches nothing lets it go (`close`)."""
        self.launcher.prewarm()
        try:
            await self._start()
        finally:
            if self.execution is None or self.execution.handle is None:
                self.launcher.close()  # nothing launched: the unused helper goes, by its recorded pid

    def _bind_paths(self) -> None:
        """The guard at bind (G2, G3): the session file and the claim root resolve to the real paths checked
        at construction, and neither is live now. Raises `live-session-refused`."""
        self.guard.bind(self.placement.session_file, what="session file", expected=self.session_real)
        self.guard.bind(self.placement.claim_root, what="claim root", expected=self.claim_root_real)

    def _check_socket(self) -> None:
        """Another controller serving this placement's socket (a connect there is accepted) refuses
        `already-active` before the claim is touched: nothing read, reserved, consumed or adopted. A socket
        nobody accepts on (a controller killed before its `aclose`) is not a refusal: the bind removes it
        and binds again, as tmux and systemd do (`SocketServer.start`)."""
        if socket_state(self.socket_path) == "live":
            raise ClaimRefusal("already-active", f"a controller is serving {self.socket_path} (a connect there "
                                                 "was accepted): one controller per placement")

    async def _start(self) -> None:
        loop = asyncio.get_running_loop()
        self._bind_paths()  # before the claim root is opened: a swapped path gets no claim written into it
        self._check_socket()
        self.store = await loop.run_in_executor(None, lambda: ClaimStore(self.claim_root_real,
                                                                         barrier=self.hooks.barrier))
        if self.eligibility is not None:
            await self._launch_eligible(self.eligibility)
            return
        probe = ClaimCohortProbe(self.launcher, verifier=self.verifier, clock=self.clock)
        report = await loop.run_in_executor(None, self.store.restart, self.seat_key, self.session_key, probe)
        self.inherited = tuple(effect_report(self.place, d.claim_id, boot_stop_id(d.claim_id))
                               for d in report.decisions
                               if d.outcome is Outcome.STOPPED_BOOT_PROOF and d.claim_id is not None)
        if report.free:
            await self._launch_new()
        else:
            await self._take_over_held(report.outcomes, report.refusal)

    async def _launch_new(self) -> None:
        assert self.store is not None
        loop = asyncio.get_running_loop()
        store = self.store
        loadable(await loop.run_in_executor(None, read_session, self.place))
        self._step("acquiring")
        try:
            claim = await loop.run_in_executor(None, store.acquire, self.seat_key, self.session_key, self._binding())
        except ClaimWriteError as exc:
            if exc.errno not in _NO_ROOM:
                raise
            raise ControlRefusal("no-space", f"the pair cannot be reserved: {exc}; nothing was spawned") from None
        self._step("reserved")
        await self._spawn(claim)

    async def _spawn(self, claim: Claim) -> None:
        """From a reservation this store owns: bind, the stop's room reserved, spawn marker, launch, active,
        load check, serve."""
        loop = asyncio.get_running_loop()
        # Bind again, right before anything is spawned: a swap since start() (G3) stops it here.
        self._bind_paths()
        await self._reserve_stop_room(claim)
        engine = await self._engine_uid(claim)
        await loop.run_in_executor(None, lambda: claim.mark_spawn(engine_uid=None if engine is None else engine.uid))
        self._step("spawn-marker")
        handle = await loop.run_in_executor(None, lambda: self.launcher.launch(
            claim.unit_name, self.argv, env=dict(self.engine.env), cwd=self.place.project,
            limits=self.engine.limits, engine=engine))
        self._step("launched")
        ref = handle.ref
        core_link = engine_link_core(self.bounds)
        wfd, rfd = handle.take_stdio()
        link = EngineLink(wfd, rfd, core=core_link, clock=self.clock)
        self.execution = Execution(claim, ref, link, handle)
        # The load check's queries are read-only and admission opens only after both are done, so they go out
        # now: the engine boots while active is published (two fsynced writes off its critical path).
        check = asyncio.ensure_future(load_check(link, bound=self.bounds.command, session_file=self.session_real,
                                                 identity=self.identity, step=self._step))
        try:
            await loop.run_in_executor(None, lambda: claim.activate(invocation_id=ref.epoch_id, engine=ref.engine,
                                                                     cohort=ref.to_dict()))
        except BaseException:
            check.cancel()
            raise
        self._step("active")
        problem = await check
        config = self._config(claim, unit=ref.unit)
        if problem is not None:
            await loop.run_in_executor(None, claim.mark_uncertain)
            config = self._config(claim, unit=ref.unit, state="uncertain", fences={"preflight": problem})
        await self._serve(config, link, core_link)
        if self.recovered is not None:
            await self._settle_eligibility(self.recovered.id, problem)

    async def _reserve_stop_room(self, claim: Claim) -> None:
        """Before the spawn marker: preallocate, in both key directories, room for the claim revisions the
        engine's stop must publish (writer-claim `Claim.reserve_space`), so a full disk later does not stop
        a stop. A file system without that room now refuses `no-space`: the reservation is released with the
        never-spawned proof (its publications may draw on what was reserved), nothing is spawned."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, claim.reserve_space)
        except OSError as exc:
            note = ""
            try:
                proof = ProofRef.never_spawned(claim.claim_id, "no room for the stop's claim revisions")
                await loop.run_in_executor(None, lambda: claim.release(proof))
            except (OSError, ClaimRefusal) as also:
                note = f"; the reservation stays (restart frees it: no spawn marker, no unit): {also}"
            record = self.recovered
            if record is not None:  # held, never launched under: spent, never used
                with contextlib.suppress(OSError, Refusal):
                    await loop.run_in_executor(None, lambda: settle_record(self.claim_root_real, record.id,
                                                                           passed=False))
            name = errno.errorcode.get(exc.errno or 0, "error")
            raise ControlRefusal("no-space", f"the claim root has no room for the claim revisions a force stop "
                                             f"must publish ({name}: {exc.strerror}); nothing was spawned{note}") \
                from None

    async def _engine_uid(self, claim: Claim) -> Credentials | None:
        """Before the spawn marker: the credentials of this execution's engine, a uid leased to this claim
        from `engine_uids` (in the engine group), or None for the launcher's one account. No uid proven free:
        the reservation is released with the never-spawned proof (nothing ran under it) and the refusal,
        `no-engine-uid`, is raised."""
        if self.engine_uids is None:
            return None
        uids = self.engine_uids
        loop = asyncio.get_running_loop()
        try:
            uid = await loop.run_in_executor(None, uids.allocate, claim, self.claim_root_real)
        except ControlRefusal as refusal:
            with contextlib.suppress(OSError, ClaimRefusal):
                proof = ProofRef.never_spawned(claim.claim_id, "no engine uid was free")
                await loop.run_in_executor(None, lambda: claim.release(proof))
            record = self.recovered
            if record is not None:  # held, never launched under: spent, never used
                with contextlib.suppress(OSError, Refusal):
                    await loop.run_in_executor(None, lambda: settle_record(self.claim_root_real, record.id,
                                                                           passed=False))
            raise refusal from None
        # What the engine keeps (Pi's credential store is 0600) is this uid's now (`_engine_uids` rule 4).
        dirs = tuple(self.guard.check(d, what="engine state directory") for d in self.engine.state_dirs)
        await loop.run_in_executor(None, hand_over, dirs, uid, uids.uids)
        self._step("engine-uid")
        return Credentials(uid, uids.gid, ())

    async def _settle_eligibility(self, record_id: str, problem: str | None) -> None:
        """The launch under a held record ends its load check: K8's (the engine's session file, header and
        leaf) and the drift check the runtime runs when it starts (the file is the engine's). Passed: the
        record is consumed (`used`) and admission is open. Failed: the record is `spent`, never `used`
        (the engine stays claimed and contained until a force stop proves it stopped, K8). A check that
        does not end within its bounds counts as failed (the core fences it `drift-check` meanwhile)."""
        assert self.runtime is not None
        runtime = self.runtime
        bound = 2 * self.bounds.drift + self.bounds.command

        def ended(core: ControllerCore) -> bool:
            return core.drift_verdict is not None or not core.admission_open

        passed = False
        if problem is None:
            with contextlib.suppress(TimeoutError):
                await runtime.wait_core(ended, bound)
                verdict = runtime.core.drift_verdict
                passed = runtime.core.admission_open and verdict is not None and not verdict.drift
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: settle_record(self.claim_root_real, record_id, passed=passed))
        self._step("settled")

    # ------------------------------------------------------------------------------ recover and launch

    def _use_record(self, record_id: str, *, check: bool) -> tuple[EligibilityRecord, Claim]:
        """Blocking: read the record, (revalidate it), hold it (one launcher: K17), take the reservation over.
        Raises the record's refusals (`eligibility`, and with `check` (`revalidate`) `target`, `engine-pin-mismatch`,
        `session-drift`) and the take-over's `ClaimRefusal`. The record is consumed only once the launch
        passed its load check (`_settle_eligibility`)."""
        store = self.store
        assert store is not None
        record = read_record(self.claim_root_real, record_id)
        if check:
            self.identity = revalidate(store, self.seat_key, self.session_key, record, place=self.place,
                                       session_file=self.session_real, header_id=self.identity.header_id,
                                       conversation=self.conversation, pins=self.pins)
            self._step("revalidated")
        hold_record(self.claim_root_real, record_id)
        self._step("held")
        claim = store.take_over(self.seat_key, self.session_key, record.claim_id, eligibility=record.id)
        self._step("taken-over")
        return record, claim

    async def _launch_eligible(self, record_id: str) -> None:
        """The launcher's call (brief §6 "Recover"): read the record, revalidate it against the claim, the
        pins and the current session (leaf, header, a clean tail), hold it (one launcher: K17), take the
        reservation over, then spawn under it exactly as a first launch (spawn marker, launch, active, the
        load check against the recorded leaf: K8, the takeover drift check); then the record is consumed
        (`used`) when that load check passed, `spent` when it did not. A refusal before the hold leaves the
        record and the reservation as they were (K18); after it, the reservation stays held until released
        with a proof (`release_reservation`)."""
        loop = asyncio.get_running_loop()
        try:
            record, claim = await loop.run_in_executor(None, lambda: self._use_record(record_id, check=True))
        except ClaimRefusal as refusal:
            raise ControlRefusal("eligibility", f"the reservation could not be taken over: {refusal.code}: "
                                                f"{refusal.message}") from None
        self.mode = "recovered"
        self.recovered = record
        await self._spawn(claim)

    async def release_reservation(self, record_id: str) -> ProofRef:
        """The operator's way out of an eligibility that will not launch (K18: "The reservation stays until
        released with proof"): hold the record, take the reservation over and release it with the no-unit
        reference of a claim that never spawned; the record ends `spent`. Returns that reference.

        A reservation still pending whose record is held (a launcher crashed between its hold and its
        take-over) or was never written (the recovering controller crashed before writing it) is released
        the same way, by taking it over: the take-over has one winner, so a launcher still on its way to it is
        refused and no engine is spawned."""
        loop = asyncio.get_running_loop()
        self.launcher.close()  # this path launches nothing
        self.store = await loop.run_in_executor(None, lambda: ClaimStore(self.claim_root_real,
                                                                         barrier=self.hooks.barrier))
        state = await loop.run_in_executor(None, lambda: record_state(self.claim_root_real, record_id))
        claim = await loop.run_in_executor(None, lambda: self._reservation_to_release(record_id))
        proof = ProofRef.never_spawned(claim.claim_id, "eligibility released without a launch")
        await loop.run_in_executor(None, lambda: claim.release(proof))
        if state in ("unused", "launching"):
            # Held here, or by a launcher that died before its take-over (the take-over just made was the
            # first): nothing was launched under it, so it ends spent, never used.
            await loop.run_in_executor(None, lambda: settle_record(self.claim_root_real, record_id, passed=False))
        return proof

    def _reservation_to_release(self, record_id: str) -> Claim:
        """Blocking: the reservation pending under `record_id`, taken over. An unused record is held first
        (no launcher can use it after). A held one (a launcher crashed between its hold and its take-over)
        or a missing one (the recovering controller crashed between the reservation and the record) is not
        needed: the pair's heads name the claim, and the take-over checks both keys."""
        assert self.store is not None
        if record_state(self.claim_root_real, record_id) == "unused":
            return self._use_record(record_id, check=False)[1]
        head = self.store.observe(self.seat_key, self.session_key).seat.revision
        pending = head.eligibility if head is not None else None
        if head is None or pending is None or pending.id != record_id or pending.taken:
            raise ControlRefusal("eligibility", f"no reservation is pending for eligibility {record_id}")
        return self.store.take_over(self.seat_key, self.session_key, head.claim_id, eligibility=record_id)

    def _recover(self, payload: Mapping[str, Any]) -> Mapping[str, Any]:
        """The `recover` effect (brief §6 "Recover (Q15)"), run off the loop under the claim lock. The core has
        checked the caller, the stopped binding and the exact confirmation (consumed). Here: the claim is
        stopped with a proof, the effects are reconciled or explicitly uncertain (the core's effectReport at
        the stop marks every open tool call uncertain: K5), the pins are the same, the session is the same
        file and header. Then a new reserved claim under a new claim ID on both keys (generation + 1, the
        leaf the stopped engine left), carrying the eligibility id, and the single-use record. Nothing is
        launched here: no client command launches."""
        execution = self.execution
        assert execution is not None and self.store is not None
        claim = execution.claim
        head = claim.head("session")
        proof = head.proof
        if claim.state is not State.STOPPED or proof is None or proof.kind not in (ProofKind.COHORT, ProofKind.BOOT):
            return refused("stop-proof", f"the claim is {claim.state.value} without a stop proof")
        try:
            pins = current_pins(self.engine, self.argv)
        except Refusal as refusal:
            return {"refusal": refusal.to_dict()}
        if pins != head.binding.pins:
            return refused("engine-pin-mismatch", "the engine's pins changed since the stopped launch (K6)")
        try:
            self.guard.bind(self.placement.session_file, what="session file", expected=self.session_real)
            now = read_session(self.place)
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
            new = self.store.acquire(self.seat_key, self.session_key, self._binding(now, pins),
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

    async def _take_over_held(self, outcomes: Sequence[Outcome], refusal: ClaimRefusal | None) -> None:
        """A claim an earlier controller left (restart classified it). An alive owner keeps it
        (already-active, W12); another machine's never becomes ours (foreign-host, W17); an unreadable head
        stays held (W16). An orphan is adopted and served uncertain (W6, W13); a stop in progress is
        continued from TERM for the same stop record (K10, K11). Nothing is launched over it."""
        assert self.store is not None
        if Outcome.FOREIGN_HOST in outcomes or Outcome.UNREADABLE in outcomes:
            raise refusal or ClaimRefusal("unsafe-replacement", "the pair is held by no readable claim")
        if Outcome.OWNER_ALIVE in outcomes:
            # A live owner holds it: another start is (or was just now) live on it. Its state says nothing
            # here: an orphan another controller adopted a moment ago is uncertain, and the pair's state-based
            # refusal would send an operator to repair a claim that is fine (issue 28 item 6).
            raise ClaimRefusal("already-active", "the pair is held by a controller that is alive (W12): one "
                                                 "controller per pair")
        if Outcome.ELIGIBILITY_PENDING in outcomes:
            # A recover reserved the pair for its eligibility record: only that record's launch (or its
            # release with a proof) moves it on, whether or not the recovering controller is alive.
            rev = self.store.observe(self.seat_key, self.session_key).seat.revision
            if rev is not None and rev.eligibility is not None:
                self.reserved_for = rev.eligibility.id
            named = f"eligibility {rev.eligibility.id} (claim {rev.claim_id})" \
                if rev is not None and rev.eligibility is not None else "an eligibility launch"
            raise ClaimRefusal("already-active", f"the pair is reserved for {named}: launch with that record, "
                                                 f"or release the reservation")
        if Outcome.UNCERTAIN_SPAWN_MARKER in outcomes or Outcome.BOOT_PROOF_UNAVAILABLE in outcomes:
            # W20: a spawn marker and no unit: the engine may have run and exited; a collected scope is an
            # absent observation, not proof that every process ended. Only a boot proof frees it: nothing here
            # can control or stop it, so this controller does not start.
            raise ClaimRefusal("unsafe-replacement", "the pair has a spawn marker and no unit: only a boot proof "
                                                     "frees it (W20)")
        loop = asyncio.get_running_loop()
        pair = self.store.observe(self.seat_key, self.session_key)
        head = pair.seat.head
        claim_id = getattr(head, "claim_id", None)
        if not isinstance(claim_id, str):
            raise refusal or ClaimRefusal("unsafe-replacement", "the pair is held by no readable claim")
        claim = await loop.run_in_executor(None, self.store.adopt, self.seat_key, self.session_key, claim_id)
        try:  # the room a stop needs, topped up (the dead controller's reserves are the claim's, kept)
            await loop.run_in_executor(None, claim.reserve_space)
        except OSError as exc:
            logger.warning("no room to top up the stop's claim revisions for %s: %s", claim.claim_id, exc)
        ref = CohortRef.from_dict(claim.cohort) if claim.cohort is not None else None
        if ref is None and claim.spawn_marker:
            # A crash after the launch, before the reference was recorded (W13): find the live cohort by the
            # recorded unit name (its shim answers there); the stop machine checks its identity again.
            ref = await loop.run_in_executor(None, self.launcher.rediscover, claim.unit_name)
        self.execution = Execution(claim, ref, None)
        stop = claim.head("seat").stop
        # The dead controller's open tool calls are gone with its memory; the file still shows them.
        self.inherited += (effect_report(self.place, claim.claim_id, stop.stop_id if stop is not None else None),)
        if claim.state is State.STOPPING and stop is not None and ref is not None:
            self.mode = "continued-stop"
            result = await self._run_stop(stop.stop_id, stop.confirmation)
            state = "stopped" if result.get("state") == "stopped" else "uncertain"
            fences = {"force-stop": stop.stop_id} if state == "stopped" else {"uncertain": str(result.get("reason"))}
            await self._serve(self._config(claim, unit=ref.unit, state=state, fences=fences), None, None)
            return
        self.mode = "orphan"
        if claim.state is not State.UNCERTAIN:
            await loop.run_in_executor(None, claim.mark_uncertain)
        detail = "the engine was launched by a controller that is gone; its stdin is gone with it (W6)"
        await self._serve(self._config(claim, unit=ref.unit if ref else claim.unit_name, state="uncertain",
                                       fences={"orphan": detail}), None, None)

    def _config(self, claim: Claim, *, unit: str, state: str = "active",
                fences: Mapping[str, str] | None = None) -> CoreConfig:
        assert self.store is not None
        # Where the engine's limits hold, as this incarnation's launch left them; None (unknown) for an engine
        # it did not launch (an orphan, a continued stop).
        handle = self.execution.handle if self.execution is not None else None
        limits = held_to_dict(handle.limits) if handle is not None and handle.limits else None
        return CoreConfig(conversation=self.conversation, execution=claim.claim_id,
                          binding=claim.head("seat").binding.binding_id, incarnation=self.store.incarnation,
                          generation=claim.head("seat").generation, unit=unit, census=True, bounds=self.bounds,
                          state=state, fences=dict(fences or {}),  # type: ignore[arg-type]
                          drift=DriftConfig(self.identity.header_id), inherited=self.inherited, access=self.access,
                          limits=limits, engine_uid=claim.engine_uid)

    # ------------------------------------------------------------------------------------------- serve

    async def _serve(self, config: CoreConfig, link: EngineLink | None, core_link: LinkCore | None) -> None:
        core = ControllerCore(config, now=self.clock(), link=core_link)
        if link is None:
            # No engine is attached (an orphan, or a stopped execution): nothing can ever be written.
            core.link.output_ended(now=self.clock())
        self._session_reader = SessionFileReader(self.place.project, self.place.sessions_rel, self.place.name)
        _cid, pages = history_reader(Path(self.place.project), Path(self.place.path), seat=self.place.seat)
        self.runtime = ControllerRuntime(core, link, self.socket_path, page_reader=pages,
                                         effects=LifecyclePorts(self), limits=self.limits, clock=self.clock,
                                         evidence_path=self.evidence_path, session_reader=self._session_reader,
                                         engine_hook=self.hooks.on_engine_events)
        await self.runtime.start()

    async def aclose(self) -> None:
        """Stop serving. Nothing is stopped or released: the engine, its cohort and the claim stay (a cohort
        already proven stopped is let go first, if that is still under way)."""
        self.launcher.close()
        letting_go, self._letting_go = self._letting_go, []
        for release in letting_go:
            with contextlib.suppress(Exception):
                await release
        if self.runtime is not None:
            await self.runtime.aclose()
        elif self.execution is not None and self.execution.link is not None:
            await self.execution.link.aclose()
        if self._session_reader is not None:
            self._session_reader.close()

    # ----------------------------------------------------------------------------------------- effects

    async def _run_stop(self, stop_id: str, confirmation: Any) -> Mapping[str, Any]:
        """Brief §6 "Force stop" on the recorded cohort, publishing each phase into the claim before its
        action; stopped (with the claim released by the proof's digest, and the shim let go) only when the
        cohort proof says so; otherwise the claim stays held, uncertain."""
        execution = self.execution
        assert execution is not None
        ref = execution.ref
        claim = execution.claim
        if ref is None:
            await asyncio.get_running_loop().run_in_executor(None, claim.mark_uncertain)
            return {"state": "uncertain", "reason": "identity-unavailable",
                    "detail": "no cohort reference was recorded in the claim"}
        request = StopRequest(stop_id, self.conversation, claim.claim_id,
                              {"confirmation": confirmation, "actor": "local-operator"})

        def stop() -> Mapping[str, Any]:
            return stop_and_release(claim, ref, request,
                                    confirmation=None if confirmation is None else str(confirmation),
                                    manager=self.manager, verifier=self.verifier, grace=self.stop_grace,
                                    on_phase=self.hooks.on_stop_phase)

        if self.runtime is not None:
            result = dict(await self.runtime.run_blocking(stop))
        else:
            result = dict(await asyncio.get_running_loop().run_in_executor(None, stop))
        if result["state"] == "stopped":
            # The proof is taken and both keys are stopped: what is left is letting the shim go and removing
            # the empty cgroup, which waits for the shim to exit. It runs after the stop is reported, not
            # before; `aclose` waits for it. A crash in between leaves the proven, empty cohort held by its
            # shim (as a crash just before the release did in the old order): never an engine process.
            self._letting_go.append(asyncio.get_running_loop().run_in_executor(
                None, lambda: release_cohort(ref, force=False)))
        return result
