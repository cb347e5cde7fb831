"""The lifecycle: a controller that launches its engine under a writer claim, in a cohort, and stops it
with a proof (brief §2 as the controller uses the claim, §6).

`LaunchingController` is built from constructor arguments only (§2 "Location and live-session guard": no
production default): the fixture root, the claim root, the session file, the socket directory, the
engine (the pinned Pi, or a test hook command such as the fake engine) and a cgroup-cohort `Launcher` (or a
`CohortPort`).
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

`start()` is a walk over named steps (`_steps.START_STEPS`), each handing on to the next it names; a test
can crash it at each named point (`_steps.LAUNCH_POINTS`). Everything it asks of the claim and the cohort
goes through its two ports (`_ports`: claims, cohort), every blocking call on its one pool, which the
runtime shares. The checks of steps 1 and 4 are `engines/pi/_launch`'s functions, a recover's record's
(step 3) `_checks`'; the stop of step 5 and what it leaves in the claim is `_cohort.stop_and_release`;
recover, the launcher's call and releasing a reservation are `_recover`'s.

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
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mosaic.cgroup_cohort import CohortRef, Credentials, FixtureVerifier, Launcher, StopRequest, UserManager
from mosaic.cgroup_cohort.limits import held_to_dict
from mosaic.controller_client import ControlRefusal
from mosaic.pi_rpc import EngineLink, LinkCore
from mosaic.safe_open import Refusal
from mosaic.writer_claim import (
    Binding,
    Claim,
    ClaimRefusal,
    ClaimWriteError,
    Outcome,
    Pins,
    ProofRef,
    SeatKey,
    SessionKey,
    State,
)

from ..core._access import AccessPolicy, Grants
from ..core._receive import Bounds, ControllerCore, CoreConfig
from ..engines._seam import Engine, EngineFactory, Place, SessionRead
from ..server._runtime import ControllerRuntime
from ..server._socket_server import ServerLimits, socket_state
from ._checks import effect_report
from ._cohort import ClaimCohortProbe, boot_stop_id, stop_and_release
from ._eligibility import EligibilityRecord
from ._engine_uids import EngineUids, hand_over
from ._guard import LiveRoots, LiveSessionGuard
from ._placement import Hooks, Placement
from ._ports import (
    CgroupCohort,
    ClaimsOwner,
    ClaimsPort,
    CohortPort,
    Execution,
    LifecyclePorts,
    Pool,
    WriterClaims,
    launch,
)
from ._recover import Recovering
from ._session_reader import SessionFileReader
from ._steps import START_STEPS, StartStep

__all__ = ["LaunchingController", "Hooks", "Placement"]

logger = logging.getLogger("mosaic.controller.lifecycle")

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT)


class LaunchingController(Recovering):
    """One controller process for one execution (see the module docstring)."""

    def __init__(
        self,
        placement: Placement,
        engine: EngineFactory,
        launcher: Launcher | None,
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
        cohort: CohortPort | None = None,
        pool: Pool | None = None,
        claims_owner: ClaimsOwner | None = None,
        dialogs: bool = False,
    ) -> None:
        """Construction checks, before anything is claimed or spawned: the guard (G1), the session file's
        place and header, the pin and the seal, the grants (who besides this uid may connect and do what:
        `Grants`; none by default). `engine_uids`: a uid for each execution's engine, allocated from that
        range at each launch and recorded in the claim and the binding; None runs the engine as the
        launcher's one account. Raises the refusal (live-session-refused, configuration,
        engine-pin-mismatch, unsealed-engine).

        The engine's cohort is `launcher`'s (cgroup-cohort's, with `manager` for a scope), or `cohort`, a
        `CohortPort` given instead (a test's in-memory one: `mosaic.controller.testing.MemoryCohort`).
        `pool` runs every blocking call of the lifecycle and of its runtime (`Pool()` by default).
        `claims_owner`: who its claims name as their owner, and how an owner's liveness is told (this
        process and /proc by default; a test's runners in one process).

        `on_recovered(record)` is called on the event loop when a client's recover has written its
        eligibility record (nothing is launched here: brief §6 "Recover"); what it returns, if anything,
        goes into the recover's reply as ``next``: how this controller's launcher launches from the record
        (`mosaic-controller serve` names its exact command line).

        `dialogs`: answer the engine's dialogs (issue 33, the brief's I2 after C-2: `CoreConfig.answer_dialogs`);
        off by default, every dialog is shown disabled and never answered (P3)."""
        if cohort is None:
            if launcher is None:
                raise ControlRefusal("configuration", "a controller needs a cgroup-cohort launcher or a cohort port")
            cohort = CgroupCohort(launcher, manager=manager)
        self.placement = placement
        self.engine: Engine = engine.engine()
        self.cohort: CohortPort = cohort
        self.verifier = verifier
        self.bounds = bounds or Bounds()
        self.limits = limits
        self.stop_grace = stop_grace
        self.clock = clock
        self.evidence_path = evidence_path
        self.hooks = hooks or Hooks()
        self.eligibility = eligibility
        self.access = AccessPolicy(grants=grants or Grants())
        self.engine_uids = engine_uids
        self.dialogs = dialogs
        self.inherited: tuple[Mapping[str, Any], ...] = ()
        self.recovered: EligibilityRecord | None = None
        self.on_recovered = on_recovered
        self.reserved_for: str | None = None  # start() refused: the pair waits for this eligibility's launch
        self.guard = LiveSessionGuard(LiveRoots(
            fixture_root=placement.fixture_root, home=placement.home, repository=placement.repository,
            data_root=placement.data_root, registrations=placement.registrations))
        self.session_real = self.guard.check(placement.session_file, what="session file")
        self.claim_root_real = self.guard.check(placement.claim_root, what="claim root")
        self.place: Place = self.engine.place(self.session_real)
        self.identity: SessionRead = self.engine.read(self.place)
        # The engine's state directories (Claude's: the seal's HOME, config and temp directories too, named
        # before the seal makes them), handed to each allocated uid before its launch: never a live one, here
        # and at bind (G3: the same real paths).
        self.state_real = {d: self.guard.check(d, what="engine state directory") for d in self.engine.state_dirs}
        self.argv = self.engine.argv(self.session_real, uids=None if engine_uids is None else engine_uids.uids)
        self.pins = self.engine.pins(self.argv)
        self.conversation = self.engine.conversation(self.place)
        self.seat_key = SeatKey(self.place.seat, self.place.project, placement.workspace or self.place.project)
        self.session_key = SessionKey(self.engine.name, self.identity.header_id)
        self.pool = pool if pool is not None else Pool()
        self.claims: ClaimsPort = WriterClaims(self.claim_root_real, self.seat_key, self.session_key,
                                               pool=self.pool, barrier=self.hooks.barrier, owner=claims_owner)
        self.execution: Execution | None = None
        self.runtime: ControllerRuntime | None = None
        self.mode = "new"
        # Every claim publication, one at a time and in the order the core asked (`_ports` rule 1).
        self._claim_lock = asyncio.Lock()
        self._session_reader: SessionFileReader | None = None
        self._letting_go: list[asyncio.Future[bool]] = []  # proven cohorts being let go
        # What one start step hands the next: the claim to spawn under, what restart classified, the load
        # check's finding, and the core configuration the serve step serves.
        self._claim: Claim | None = None
        self._report: tuple[tuple[Outcome, ...], ClaimRefusal | None] = ((), None)
        self._load_problem: str | None = None
        self._serving: tuple[CoreConfig, EngineLink | None, LinkCore | None] | None = None

    # ----------------------------------------------------------------------------------------- set-up

    def _binding(self, identity: SessionRead | None = None, pins: Pins | None = None) -> Binding:
        """The binding a claim records: the session's branch and leaf as read (`identity`, default the one
        read at construction) and the engine's pins."""
        identity = identity or self.identity
        return Binding(f"binding-{secrets.token_hex(8)}", self.engine.name, self.conversation, identity.branch,
                       identity.leaf, pins or self.pins)

    def _step(self, name: str) -> None:
        """A named crash point (`_steps.LAUNCH_POINTS`): what it names is durable."""
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
        """Classify, then launch (or serve an orphan, or continue a stop), then serve the socket: the steps of
        `START_STEPS`, from `bind` to `done`. Raises the claim's refusal when the pair cannot be taken
        (already-active, unsafe-replacement, foreign-host) and cgroup-cohort's when the launch fails; in both
        cases nothing is left running.

        The launcher's spawn helper is started first (`prewarm`): its interpreter boots while the claim is
        classified, reserved and marked, so the engine starts as soon as the spawn marker is durable; a path
        that launches nothing lets it go (`close`)."""
        launcher = self.cohort.launcher()
        launcher.prewarm()
        try:
            step: StartStep = "bind"
            while step != "done":
                after = await self._STEPS[step](self)
                if after not in START_STEPS[step]:
                    raise AssertionError(f"start step {step} handed on to {after}, not one of "
                                         f"{sorted(START_STEPS[step])}")
                step = after
        finally:
            if self.execution is None or self.execution.handle is None:
                launcher.close()  # nothing launched: the unused helper goes, by its recorded pid

    def _bind_paths(self) -> None:
        """The guard at bind (G2, G3): the session file and the claim root resolve to the real paths checked
        at construction, and neither is live now. Raises `live-session-refused`."""
        self.guard.bind(self.placement.session_file, what="session file", expected=self.session_real)
        self.guard.bind(self.placement.claim_root, what="claim root", expected=self.claim_root_real)
        for state_dir, real in self.state_real.items():
            self.guard.bind(state_dir, what="engine state directory", expected=real)

    async def _bind(self) -> StartStep:
        self._bind_paths()  # before the claim root is opened: a swapped path gets no claim written into it
        return "socket"

    async def _check_socket(self) -> StartStep:
        """Another controller serving this placement's socket (a connect there is accepted) refuses
        `already-active` before the claim is touched: nothing read, reserved, consumed or adopted. A socket
        nobody accepts on (a controller killed before its `aclose`) is not a refusal: the bind removes it
        and binds again, as tmux and systemd do (`SocketServer.start`)."""
        if socket_state(self.socket_path) == "live":
            raise ClaimRefusal("already-active", f"a controller is serving {self.socket_path} (a connect there "
                                                 "was accepted): one controller per placement")
        return "open-claims"

    async def _open_claims(self) -> StartStep:
        await self.claims.open()
        return "use-eligibility" if self.eligibility is not None else "classify"

    async def _classify(self) -> StartStep:
        probe = ClaimCohortProbe(self.cohort.launcher(), verifier=self.verifier, clock=self.clock)
        report = await self.claims.restart(probe)
        self.inherited = tuple(effect_report(self.engine, self.place, d.claim_id, boot_stop_id(d.claim_id))
                               for d in report.decisions
                               if d.outcome is Outcome.STOPPED_BOOT_PROOF and d.claim_id is not None)
        if report.free:
            return "launch-new"
        self._report = (tuple(report.outcomes), report.refusal)
        return "take-over-held"

    async def _launch_new(self) -> StartStep:
        self.engine.loadable(await self.pool.run(lambda: self.engine.read(self.place)))
        self._step("acquiring")
        try:
            claim = await self.claims.acquire(self._binding())
        except ClaimWriteError as exc:
            if exc.errno not in _NO_ROOM:
                raise
            raise ControlRefusal("no-space", f"the pair cannot be reserved: {exc}; nothing was spawned") from None
        self._step("reserved")
        self._claim = claim
        return "spawn"

    async def _spawn(self) -> StartStep:
        """From a reservation this store owns: bind, the stop's room reserved, spawn marker, launch, active,
        load check; then serve."""
        claim = self._claim
        assert claim is not None
        # Bind again, right before anything is spawned: a swap since start() (G3) stops it here.
        self._bind_paths()
        await self._reserve_stop_room(claim)
        engine = await self._engine_uid(claim)
        await self._bind_engine(claim, None if engine is None else engine.uid)
        await self.claims.mark_spawn(claim, None if engine is None else engine.uid)
        self._step("spawn-marker")
        handle = await launch(self.pool, self.cohort, claim.unit_name, self.argv, env=self.engine.env,
                              cwd=self.place.project, limits=self.engine.limits, engine=engine)
        self._step("launched")
        ref = handle.ref
        core_link = self.engine.rules.new_wire(command_bound=self.bounds.command)
        wfd, rfd = handle.take_stdio()
        link = EngineLink(wfd, rfd, core=core_link, clock=self.clock)
        self.execution = Execution(claim, ref, link, handle)
        # The load check's queries are read-only and admission opens only after both are done, so they go out
        # now: the engine boots while active is published (two fsynced writes off its critical path).
        check = asyncio.ensure_future(self.engine.load_check(link, bound=self.bounds.command,
                                                             session_file=self.session_real, identity=self.identity,
                                                             step=self._step))
        try:
            await self.claims.activate(claim, ref)
        except BaseException:
            check.cancel()
            raise
        self._step("active")
        problem = self._load_problem = await check
        config = self._config(claim, unit=ref.unit)
        if problem is not None:
            await self.claims.mark_uncertain(claim)
            config = self._config(claim, unit=ref.unit, state="uncertain", fences={"preflight": problem})
        self._serving = (config, link, core_link)
        return "serve"

    async def _bind_engine(self, claim: Claim, uid: int | None) -> None:
        """At bind, right before the spawn marker: the engine's launch made the execution's `uid`'s (Claude's
        private directories) and checked again (`Engine.bind`: Claude's L7 and seal). A refusal releases the
        reservation with the never-spawned proof; nothing is spawned."""
        try:
            await self.pool.run(lambda: self.engine.bind(self.argv, uid=uid))
        except Refusal as refusal:
            note = await self._never_spawned(claim, f"the engine failed its check at bind: {refusal.code}")
            if note:
                logger.warning("after the bind check refused: %s", note)
            raise
        except OSError as exc:  # its directories could not be given to its uid
            note = await self._never_spawned(claim, "the engine's directories could not be given to its uid")
            raise ControlRefusal("configuration", f"the engine's directories could not be given to engine uid "
                                                  f"{uid}: {exc}; nothing was spawned{note}") from None

    async def _reserve_stop_room(self, claim: Claim) -> None:
        """Before the spawn marker: preallocate, in both key directories, room for the claim revisions the
        engine's stop must publish (writer-claim `Claim.reserve_space`), so a full disk later does not stop
        a stop. A file system without that room now refuses `no-space`: the reservation is released with the
        never-spawned proof (its publications may draw on what was reserved), nothing is spawned."""
        try:
            await self.claims.reserve_space(claim)
        except OSError as exc:
            note = await self._never_spawned(claim, "no room for the stop's claim revisions")
            name = errno.errorcode.get(exc.errno or 0, "error")
            raise ControlRefusal("no-space", f"the claim root has no room for the claim revisions a force stop "
                                             f"must publish ({name}: {exc.strerror}); nothing was spawned{note}") \
                from None

    async def _never_spawned(self, claim: Claim, why: str) -> str:
        """Give a reservation nothing was spawned under back, with the never-spawned proof, and spend a held
        record (never used); what could not be done, as words."""
        note = ""
        try:
            await self.claims.release(claim, ProofRef.never_spawned(claim.claim_id, why))
        except (OSError, ClaimRefusal) as also:
            note = f"; the reservation stays (restart frees it: no spawn marker, no unit): {also}"
        record = self.recovered
        if record is not None:  # held, never launched under: spent, never used
            with contextlib.suppress(OSError, Refusal):
                await self.claims.settle_record(record.id, passed=False)
        return note

    async def _engine_uid(self, claim: Claim) -> Credentials | None:
        """Before the spawn marker: the credentials of this execution's engine, a uid leased to this claim
        from `engine_uids` (in the engine group), or None for the launcher's one account. No uid proven free:
        the reservation is released with the never-spawned proof (nothing ran under it) and the refusal,
        `no-engine-uid`, is raised."""
        if self.engine_uids is None:
            return None
        uids = self.engine_uids
        try:
            uid = await self.pool.run(lambda: uids.allocate(claim, self.claim_root_real))
        except ControlRefusal as refusal:
            await self._never_spawned(claim, "no engine uid was free")
            raise refusal from None
        # What the engine keeps (Pi's credential store is 0600, Claude's transcript too) is this uid's now
        # (`_engine_uids` rule 4); the paths are the ones checked at construction and again at bind.
        dirs = tuple(self.guard.bind(d, what="engine state directory", expected=real)
                     for d, real in self.state_real.items())
        await self.pool.run(lambda: hand_over(dirs, uid, uids.uids))
        self._step("engine-uid")
        return Credentials(uid, uids.gid, ())

    async def _take_over_held(self) -> StartStep:
        """A claim an earlier controller left (restart classified it). An alive owner keeps it
        (already-active, W12); another machine's never becomes ours (foreign-host, W17); an unreadable head
        stays held (W16). An orphan is adopted and served uncertain (W6, W13); a stop in progress is
        continued from TERM for the same stop record (K10, K11). Nothing is launched over it."""
        outcomes, refusal = self._report
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
            rev = self.claims.observe().seat.revision
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
        head = self.claims.observe().seat.head
        claim_id = getattr(head, "claim_id", None)
        if not isinstance(claim_id, str):
            raise refusal or ClaimRefusal("unsafe-replacement", "the pair is held by no readable claim")
        claim = await self.claims.adopt(claim_id)
        try:  # the room a stop needs, topped up (the dead controller's reserves are the claim's, kept)
            await self.claims.reserve_space(claim)
        except OSError as exc:
            logger.warning("no room to top up the stop's claim revisions for %s: %s", claim.claim_id, exc)
        ref = CohortRef.from_dict(claim.cohort) if claim.cohort is not None else None
        if ref is None and claim.spawn_marker:
            # A crash after the launch, before the reference was recorded (W13): find the live cohort by the
            # recorded unit name (its shim answers there); the stop machine checks its identity again.
            launcher = self.cohort.launcher()
            ref = await self.pool.run(lambda: launcher.rediscover(claim.unit_name))
        self.execution = Execution(claim, ref, None)
        stop = claim.head("seat").stop
        # The dead controller's open tool calls are gone with its memory; the file still shows them.
        self.inherited += (effect_report(self.engine, self.place, claim.claim_id, stop.stop_id if stop is not None else None),)
        if claim.state is State.STOPPING and stop is not None and ref is not None:
            return "continue-stop"
        return "serve-orphan"

    async def _continue_stop(self) -> StartStep:
        """K10, K11: the stop the dead controller recorded is re-run from TERM, for the same stop record."""
        assert self.execution is not None and self.execution.ref is not None
        claim, ref = self.execution.claim, self.execution.ref
        stop = claim.head("seat").stop
        assert stop is not None
        self.mode = "continued-stop"
        result = await self._run_stop(stop.stop_id, stop.confirmation)
        state = "stopped" if result.get("state") == "stopped" else "uncertain"
        fences = {"force-stop": stop.stop_id} if state == "stopped" else {"uncertain": str(result.get("reason"))}
        self._serving = (self._config(claim, unit=ref.unit, state=state, fences=fences), None, None)
        return "serve"

    async def _serve_orphan(self) -> StartStep:
        """W6, W13: an engine a dead controller launched is served uncertain; force stop is the way on."""
        assert self.execution is not None
        claim, ref = self.execution.claim, self.execution.ref
        self.mode = "orphan"
        if claim.state is not State.UNCERTAIN:
            await self.claims.mark_uncertain(claim)
        detail = "the engine was launched by a controller that is gone; its stdin is gone with it (W6)"
        self._serving = (self._config(claim, unit=ref.unit if ref else claim.unit_name, state="uncertain",
                                      fences={"orphan": detail}), None, None)
        return "serve"

    def _config(self, claim: Claim, *, unit: str, state: str = "active",
                fences: Mapping[str, str] | None = None) -> CoreConfig:
        # Where the engine's limits hold, as this incarnation's launch left them; None (unknown) for an engine
        # it did not launch (an orphan, a continued stop).
        handle = self.execution.handle if self.execution is not None else None
        limits = held_to_dict(handle.limits) if handle is not None and handle.limits else None
        return CoreConfig(conversation=self.conversation, execution=claim.claim_id,
                          binding=claim.head("seat").binding.binding_id, incarnation=self.claims.incarnation,
                          generation=claim.head("seat").generation, unit=unit, census=True, bounds=self.bounds,
                          engine=self.engine.rules,
                          state=state, fences=dict(fences or {}),  # type: ignore[arg-type]
                          drift=self.engine.drift(self.identity), inherited=self.inherited, access=self.access,
                          limits=limits, engine_uid=claim.engine_uid, answer_dialogs=self.dialogs)

    # ------------------------------------------------------------------------------------------- serve

    async def _serve(self) -> StartStep:
        assert self._serving is not None
        config, link, core_link = self._serving
        core = ControllerCore(config, now=self.clock(), link=core_link)
        if link is None:
            # No engine is attached (an orphan, or a stopped execution): nothing can ever be written.
            core.link.output_ended(now=self.clock())
        if config.drift is not None:  # an engine with no drift check has its session file read for nothing
            # `sessions_rel` is relative to the directory the place's path starts with (Pi: the project; Claude:
            # its config directory), so the reader opens that one.
            root = self.place.path.removesuffix(f"/{self.place.sessions_rel}/{self.place.name}")
            self._session_reader = SessionFileReader(root, self.place.sessions_rel, self.place.name)
        _cid, pages = self.engine.history(self.place)
        self.runtime = ControllerRuntime(core, link, self.socket_path, page_reader=pages,
                                         effects=LifecyclePorts(self), limits=self.limits, clock=self.clock,
                                         evidence_path=self.evidence_path, session_reader=self._session_reader,
                                         engine_hook=self.hooks.on_engine_events, pool=self.pool.executor)
        await self.runtime.start()
        return "settle-eligibility" if self.recovered is not None else "done"

    async def aclose(self) -> None:
        """Stop serving. Nothing is stopped or released: the engine, its cohort and the claim stay (a cohort
        already proven stopped is let go first, if that is still under way)."""
        self.cohort.launcher().close()
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
        self.pool.shutdown()

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
            await self.claims.mark_uncertain(claim)
            return {"state": "uncertain", "reason": "identity-unavailable",
                    "detail": "no cohort reference was recorded in the claim"}
        request = StopRequest(stop_id, self.conversation, claim.claim_id,
                              {"confirmation": confirmation, "actor": "local-operator"})

        def stop() -> Mapping[str, Any]:
            return stop_and_release(claim, ref, request,
                                    confirmation=None if confirmation is None else str(confirmation),
                                    executor=self.cohort.executor(ref), verifier=self.verifier,
                                    grace=self.stop_grace, on_phase=self.hooks.on_stop_phase)

        result = dict(await self.pool.run(stop))
        if result["state"] == "stopped":
            # The proof is taken and both keys are stopped: what is left is letting the shim go and removing
            # the empty cgroup, which waits for the shim to exit. It runs after the stop is reported, not
            # before; `aclose` waits for it. A crash in between leaves the proven, empty cohort held by its
            # shim (as a crash just before the release did in the old order): never an engine process.
            cohort = self.cohort
            self._letting_go.append(asyncio.ensure_future(self.pool.run(lambda: cohort.let_go(ref))))
        return result

    # the start steps, each handing on to the next (`_steps.START_STEPS`)
    _STEPS: Mapping[StartStep, Callable[[LaunchingController], Awaitable[StartStep]]] = {
        "bind": _bind, "socket": _check_socket, "open-claims": _open_claims,
        "use-eligibility": Recovering._launch_eligible, "classify": _classify, "launch-new": _launch_new,
        "take-over-held": _take_over_held, "spawn": _spawn, "continue-stop": _continue_stop,
        "serve-orphan": _serve_orphan, "serve": _serve, "settle-eligibility": Recovering._settle_eligibility,
    }
