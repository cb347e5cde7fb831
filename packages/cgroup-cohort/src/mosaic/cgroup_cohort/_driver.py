"""The I/O shell around the stop machines: executors that perform each action and report what they saw.

Nothing here decides anything; every decision is in ``_stop.py``. An executor only moves requests to the
shim (or, for the process-group fallback, to the kernel through pidfds) and turns every failure to
observe into an ``Unavailable``/``IdentityUnavailable`` event, never into a value and never into an
exception.

The stop loop: build the machine (``machine_for``) and the executor (``executor_for``), then repeatedly
read ``machine.action``, ``event = executor.perform(action)`` (blocking: run it in a thread) and
``machine.feed(event)``, until the action is a ``Finish``; then ``executor.close()``. ``force_stop`` is that
loop, written once: a controller that publishes each phase into its claim before the phase's first action
passes ``on_phase``; a test that lands an event at an exact step passes ``on_action``.
"""

from __future__ import annotations

import os
import selectors
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from mosaic.safe_open import ProcessRef, current_host, read_stat

from . import cgroupfs as cg
from ._channel import ShimChannel
from ._errors import CohortRefusal, EvidenceUnavailable
from ._events import (
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
    StopOutcome,
    TermSent,
    Unavailable,
)
from ._model import CohortRef, Containment, Death, ObservedIdentity, StopRequest
from ._proof import FixtureVerifier, build_cohort_proof
from ._scope import UserManager
from ._stop import PgroupStopMachine, StopMachine, machine_for

__all__ = ["StopExecutor", "StopResult", "executor_for", "force_stop"]

Machine = StopMachine | PgroupStopMachine
Hook = Callable[[Machine, Action], None]


class StopExecutor(Protocol):
    """Performs a stop machine's actions for one cohort reference.

    ``perform(action)`` blocks for at most the action's own bound (plus I/O slack) and returns the event
    it observed; it never raises for an unobservable world (that is an ``Unavailable`` or
    ``IdentityUnavailable`` event) and raises TypeError only for an action its machine never asks for
    (``Finish`` included). ``close()`` lets go of what it holds (the shim channel, pidfds); idempotent.
    """

    def perform(self, action: Action) -> Event: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class StopResult:
    """The outcome, and the cohortProof when (and only when) the outcome is ``stopped``."""

    outcome: StopOutcome
    proof: dict[str, Any] | None


def _members(raw: Any) -> tuple[ProcessRef, ...]:
    return tuple(ProcessRef(int(p), int(s)) for p, s in raw)


class _ShimExecutor:
    """Scope or direct cohort: the identity from the manager, the cgroup and the shim's hello; every other
    action through the shim's private channel."""

    def __init__(self, ref: CohortRef, manager: UserManager | None, io_slack: float) -> None:
        self.ref = ref
        self.manager = manager
        self.io_slack = io_slack
        self.ch: ShimChannel | None = None

    def close(self) -> None:
        if self.ch is not None:
            self.ch.close()
            self.ch = None

    def _call(self, op: str, wait: float = 0.0, **params: Any) -> dict[str, Any]:
        if self.ch is None:
            raise EvidenceUnavailable("shim-gone", "no channel")
        try:
            return self.ch.call(op, io_timeout=wait + self.io_slack, **params)
        except CohortRefusal as e:
            raise EvidenceUnavailable("shim-gone", f"{op} refused: {e.message}") from e

    def identity(self) -> Event:
        ref = self.ref
        try:
            host = current_host()
        except (OSError, ValueError) as e:
            return IdentityUnavailable("identity-unavailable", f"host identity: {e}")
        invocation = None
        unit_id = None
        try:
            if ref.kind == "scope":
                if self.manager is None:
                    return IdentityUnavailable("identity-unavailable", "no manager access to read InvocationID")
                invocation = self.manager._invocation_id(ref.unit)
                if invocation is None:
                    # A collected scope is an absent observation, never an empty one (brief §6).
                    return IdentityUnavailable("identity-unavailable", f"no loaded unit {ref.unit}")
            else:
                assert ref.cgroup_path is not None  # CohortRef: every direct reference has one
                mount = cg.find_cgroup2()
                unit_id = cg.cgroup_id(os.path.normpath(mount.mount_point + ref.cgroup_path))
            assert ref.socket_path is not None  # CohortRef: every scope or direct reference has one
            self.close()  # a second identity check (a re-used executor) starts on a new connection
            self.ch = ShimChannel(ref.socket_path, timeout=30.0 + self.io_slack)
            hello = self._call("hello")
        except EvidenceUnavailable as e:
            known = ("shim-gone", "identity-unavailable", "cgroup-unavailable")
            return IdentityUnavailable(e.reason if e.reason in known else "identity-unavailable", e.detail)
        try:
            return IdentityObserved(
                ObservedIdentity(
                    host=host,
                    invocation_id=invocation,
                    shim_invocation_id=hello.get("invocationId"),
                    unit_cgroup_id=unit_id,
                    shim_unit_cgroup_id=hello.get("unitCgroupId"),
                    engine_cgroup_id=hello.get("engineCgroupIdNow"),
                    containment=Containment.from_dict(hello["containment"]) if hello.get("containment") else None,
                    features=tuple(hello.get("features", ())),
                )
            )
        except (KeyError, TypeError, ValueError) as e:
            return IdentityUnavailable("shim-gone", f"malformed hello: {e!r}")

    def perform(self, action: Action) -> Event:
        try:
            if isinstance(action, CheckIdentity):
                return self.identity()
            if isinstance(action, SendTerm):
                r = self._call("term")
                return TermSent(_members(r["termed"]), _members(r["skipped"]))
            if isinstance(action, AwaitGrace):
                r = self._call("events", action.seconds, until="populated0", timeout=action.seconds)
                return GraceEnded(bool(r["populated"]))
            if isinstance(action, Freeze):
                r = self._call("freeze", action.timeout, timeout=action.timeout)
                return Frozen(bool(r["frozen"]), str(r.get("detail", "")))
            if isinstance(action, Enumerate):
                r = self._call("members")
                return Enumerated(_members(r["members"]), bool(r["stable"]))
            if isinstance(action, RecheckFrozen):
                r = self._call("events")
                return FrozenRechecked(r.get("frozen") is True and r.get("treeFrozen") is True)
            if isinstance(action, Kill):
                r = self._call("kill", action.timeout, timeout=action.timeout)
                at = r.get("at")
                return Killed(bool(r["populated0"]), float(at) if at is not None else time.time(),
                              bool(r["written"]))
            if isinstance(action, Collect):
                r = self._call("deaths", action.timeout, members=[[m.pid, m.start_time] for m in action.members],
                               timeout=action.timeout)
                deaths = tuple(Death.from_dict(d) for d in r["deaths"])
                return Reaped(deaths, _members(r["survivors"]))
        except EvidenceUnavailable as e:
            return Unavailable(e.reason, e.detail)
        except (KeyError, TypeError, ValueError) as e:
            # A reply without the fields asked for is no observation at all.
            return Unavailable("shim-gone", f"malformed reply to {type(action).__name__}: {e!r}")
        raise TypeError(f"a cgroup cohort's executor cannot perform {action!r}")


class _PgroupExecutor:
    """Process-group fallback: finds the group's processes in /proc and signals them through pidfds."""

    def __init__(self, ref: CohortRef) -> None:
        assert ref.pgid is not None  # CohortRef: every pgroup reference has one
        self.ref = ref
        self.pgid: int = ref.pgid
        self.killed: list[tuple[ProcessRef, int]] = []

    def close(self) -> None:
        for _, fd in self.killed:
            os.close(fd)
        self.killed = []

    def _group(self) -> list[ProcessRef]:
        leader = read_stat(self.pgid)
        if leader is not None and leader.start_time != self.ref.engine.start_time:
            return []  # the number now leads another group: nothing there is ours
        found: list[ProcessRef] = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                st = read_stat(int(name))
            except (OSError, ValueError):
                continue
            if st is not None and st.pgid == self.pgid and not st.dead:
                found.append(st.ref)
        return sorted(found)

    def _signal(self, members: list[ProcessRef], sig: int, keep: bool) -> tuple[list[ProcessRef], list[ProcessRef]]:
        done: list[ProcessRef] = []
        skipped: list[ProcessRef] = []
        for m in members:
            try:
                fd = os.pidfd_open(m.pid)
            except ProcessLookupError:
                skipped.append(m)
                continue
            st = read_stat(m.pid)
            if st is None or st.start_time != m.start_time or st.pgid != self.pgid:
                os.close(fd)
                skipped.append(m)
                continue
            try:
                signal.pidfd_send_signal(fd, sig)
                done.append(m)
            except ProcessLookupError:
                skipped.append(m)
            if keep:
                self.killed.append((m, fd))
            else:
                os.close(fd)
        return done, skipped

    def _wait_exit(self, fds: list[int], timeout: float) -> None:
        sel = selectors.DefaultSelector()
        for fd in fds:
            sel.register(fd, selectors.EVENT_READ)
        pending = set(fds)
        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                sel.unregister(key.fd)
                pending.discard(int(key.fd))
        sel.close()

    def perform(self, action: Action) -> Event:
        if isinstance(action, CheckIdentity):
            try:
                return IdentityObserved(ObservedIdentity(current_host()))
            except (OSError, ValueError) as e:
                return IdentityUnavailable("identity-unavailable", str(e))
        if isinstance(action, SendTerm):
            done, skipped = self._signal(self._group(), signal.SIGTERM, keep=True)
            return TermSent(tuple(done), tuple(skipped))
        if isinstance(action, AwaitGrace):
            self._wait_exit([fd for _, fd in self.killed], action.seconds)
            self.close()
            return GraceEnded(bool(self._group()))
        if isinstance(action, KillGroup):
            self._signal(self._group(), signal.SIGKILL, keep=True)
            return Killed(False, time.time(), True)
        if isinstance(action, ObserveGroup):
            self._wait_exit([fd for _, fd in self.killed], 5.0)
            self.close()
            return GroupObserved(tuple(self._group()))
        raise TypeError(f"a process group's executor cannot perform {action!r}")


def executor_for(ref: CohortRef, *, manager: UserManager | None = None, io_slack: float = 15.0) -> StopExecutor:
    """The executor that performs the stop actions for ``ref``: through its shim for a scope or direct
    cohort, through /proc and pidfds for a process group.

    ``manager`` reaches the user manager that owns a scope (its InvocationID is the epoch); without it a
    scope's identity is unavailable and the stop ends uncertain with no signal. ``io_slack`` is added to
    every action's own bound when waiting for the shim. Nothing is opened until the first action.
    """
    if ref.kind == "pgroup":
        return _PgroupExecutor(ref)
    return _ShimExecutor(ref, manager, io_slack)


def force_stop(
    ref: CohortRef,
    request: StopRequest,
    *,
    manager: UserManager | None = None,
    grace: float = 2.0,
    freeze_timeout: float = 10.0,
    kill_timeout: float = 10.0,
    collect_timeout: float = 5.0,
    verifier: FixtureVerifier | None = None,
    on_action: Hook | None = None,
    on_phase: Callable[[str], None] | None = None,
    executor: StopExecutor | None = None,
) -> StopResult:
    """Run the brief's force-stop sequence for ``ref`` (seeds/003 §6 "Force stop") and return its result.

    The convenience loop over ``machine_for`` and ``executor_for``: identity check, TERM through pidfds
    (each member checked to be still in engine/), a bounded grace, freeze and frozen 1, enumeration,
    frozen 1 again, cgroup.kill, populated 0, deaths. ``stopped`` comes with a cohortProof, registered
    with ``verifier`` when one is given (the trusted party here is the caller that ran the stop). Anything
    unobservable ends ``uncertain``; nothing raises for it.

    ``on_phase(phase)`` is called with the machine's phase (``machine.phase``) whenever it differs from the
    last one reported, before the first action of that phase is performed and before ``on_action``: the
    seam a controller publishes each phase into its claim through (brief §6: the phase is recorded before
    any signal of it). ``on_action(machine, action)`` is called before each action is performed: the seam
    tests use to inject events at an exact step (when it moves the machine to another phase, that phase is
    reported before anything of it is performed). A raise from either hook ends the loop there: the
    executor is closed and the exception propagates. ``executor`` performs the actions
    (``executor_for(ref, manager=manager)`` when None: a test passes a scripted one). A restart (K10, K11)
    calls ``force_stop`` again with the same reference and request: it re-checks identity and re-runs from
    TERM; nothing from the interrupted run is carried over.
    """
    machine = machine_for(ref, request, grace=grace, freeze_timeout=freeze_timeout, kill_timeout=kill_timeout,
                          collect_timeout=collect_timeout)
    executor = executor if executor is not None else executor_for(ref, manager=manager)
    reported: str | None = None
    try:
        action = machine.action
        while not isinstance(action, Finish):
            if on_phase is not None and machine.phase != reported:
                reported = machine.phase
                on_phase(reported)
            if on_action is not None:
                on_action(machine, action)
                action = machine.action  # the hook may have fed events
                if isinstance(action, Finish):
                    break
                if on_phase is not None and machine.phase != reported:
                    continue  # the hook moved the machine on: its new phase is reported first
            action = machine.feed(executor.perform(action))
    finally:
        executor.close()
    outcome = action.outcome
    proof = None
    if outcome.state == "stopped":
        proof = build_cohort_proof(ref, request, outcome)
        if verifier is not None:
            verifier.register(proof)
    return StopResult(outcome, proof)
