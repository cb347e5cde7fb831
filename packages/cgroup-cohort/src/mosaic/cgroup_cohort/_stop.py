"""The force-stop decision core (sans-io): events in, one action out, an outcome at the end.

Rules this file keeps (seeds/003 §6 "Force stop", "Unavailable is not empty", "Proof"; K1-K3, K10-K15):

1. Identity first. The reference's epoch (invocation ID for a scope, cgroup ids for a direct cgroup) is
   checked against what the live system says before any signal. A mismatch or an unreadable identity
   ends the stop ``uncertain`` with NO signal at all (K14, K15, mutant 22).
2. TERM phase, then a bounded grace, then the kill phase, always in that order. The kill phase always
   runs, even when the cohort looks empty after TERM: emptiness is only ever read in the kill phase.
3. SIGTERM acknowledgements, EOF, agent_settled and idle are recorded and change nothing: they never
   promote a stop (K3, CHAT-01 line 325, mutant 6).
4. Kill phase: freeze and observe frozen 1, enumerate (two identical readings), re-check frozen 1,
   cgroup.kill, observe populated 0, collect deaths. A re-check that fails (or an unstable reading)
   re-establishes the freeze and reads again, at most ``freeze_rounds`` times in all. Once the identity
   has been checked, a failure in any step is recorded and the escalation still goes as far as it can
   (so the cohort is killed if at all possible), but the outcome is then ``uncertain`` with the FIRST
   failure as its reason.
5. ``stopped`` needs: identity matched, containment held at launch and at the check, both kernel
   features present, frozen 1, a stable enumeration, frozen 1 again, populated 0, and a death observed
   for every enumerated member with none alive. Only then is ``membership_complete`` True.
6. An unavailable observation (missing cgroup, gone shim) after the identity check ends the stop at once:
   there is nothing left to act through, and absent is never empty (K15, mutant 21).
7. The process-group fallback has its own machine and can only end ``uncertain`` (K2, mutant 7).
8. A restart (K10, K11) builds a new machine from the same reference and stop request: it starts again at
   the identity check and re-runs from TERM; it carries over nothing as done.
9. The transitions are data: the two tables below map (phase, event type) to the handler that decides.
   An event with no row for the current phase changes nothing (the pending action stays, nothing is
   recorded); once the machine has finished, every event is ignored.
10. No clock: any time the core needs arrives in an event (``Killed.at``, ``Death.time``).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar, get_args

from ._errors import UNCERTAIN_REASONS
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
from ._model import CohortRef, ObservedIdentity, StopRequest

__all__ = [
    "PGROUP_TRANSITIONS",
    "STOP_TRANSITIONS",
    "PgPhase",
    "PgroupStopMachine",
    "Phase",
    "StopMachine",
    "check_identity",
    "machine_for",
]

Phase = Literal["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill", "collect", "done"]
PgPhase = Literal["identity", "term", "grace", "kill", "observe", "done"]
Transitions = Mapping[tuple[str, type[Any]], str]

# ------------------------------------------------------------------------------------ transition tables
# (phase, event type) -> the name of the machine's handler. The handler records what the event says and
# returns the next action. No row: the event is ignored (rule 9).


def _in_every_phase(phases: tuple[str, ...]) -> dict[tuple[str, type[Any]], str]:
    live = [p for p in phases if p != "done"]
    return {
        # Rule 3: recorded, and the pending action stays, whatever the phase.
        **{(p, Acknowledged): "_acknowledged" for p in live},
        # Rule 6: an action that could not be performed or observed ends the stop (absent is not empty).
        **{(p, Unavailable): "_unavailable" for p in live},
    }


STOP_TRANSITIONS: Transitions = MappingProxyType({
    **_in_every_phase(get_args(Phase)),
    ("identity", IdentityObserved): "_identity_observed",  # rule 1: check, then TERM or finish unsignalled
    ("identity", IdentityUnavailable): "_unavailable",  # rule 1: no signal
    ("term", TermSent): "_term_sent",  # rule 2: then the bounded grace
    ("grace", GraceEnded): "_grace_ended",  # rule 2: the kill phase runs whatever the grace saw
    ("freeze", Frozen): "_frozen",
    ("enumerate", Enumerated): "_enumerated",
    ("recheck", FrozenRechecked): "_rechecked",  # rule 4: bracketed by frozen 1, else freeze again
    ("kill", Killed): "_killed",
    ("collect", Reaped): "_reaped",  # rule 5: the outcome
})

PGROUP_TRANSITIONS: Transitions = MappingProxyType({
    **_in_every_phase(get_args(PgPhase)),
    ("identity", IdentityObserved): "_identity_observed",  # host and boot only: a group has no epoch
    ("identity", IdentityUnavailable): "_unavailable",
    ("term", TermSent): "_term_sent",
    ("grace", GraceEnded): "_grace_ended",
    ("kill", Killed): "_killed",
    ("observe", GroupObserved): "_group_observed",  # rule 7: uncertain, whatever remains
})

FEATURES = ("cgroup.freeze", "cgroup.kill")


def check_identity(ref: CohortRef, seen: ObservedIdentity) -> tuple[str, str] | None:
    """None when ``seen`` is the cohort ``ref`` names; else (uncertain reason, detail). Pure.

    Unknown values are ``identity-unavailable``; known but different ones are ``identity-mismatch``.
    A different boot or host is a mismatch here: those references go to the boot proof or foreign-host.
    """
    if seen.host is None:
        return ("identity-unavailable", "host or boot id unreadable")
    if seen.host.machine_id != ref.host.machine_id:
        return ("identity-mismatch", f"machine id {seen.host.machine_id} != recorded {ref.host.machine_id}")
    if seen.host.boot_id != ref.host.boot_id:
        return ("identity-mismatch", f"boot id {seen.host.boot_id} != recorded {ref.host.boot_id}")
    if ref.kind == "scope":
        # The invocation ID is the membership epoch (brief §6 "Identity and epoch"): the manager's value
        # and the shim's value must both be the reference's.
        if ref.invocation_id is None or seen.invocation_id is None or seen.shim_invocation_id is None:
            return ("identity-unavailable", "invocation ID unknown")
        if seen.invocation_id != ref.invocation_id:
            return ("identity-mismatch", f"unit {ref.unit} has invocation {seen.invocation_id}, "
                                         f"recorded {ref.invocation_id}")
        if seen.shim_invocation_id != ref.invocation_id:
            return ("identity-mismatch", f"shim reports invocation {seen.shim_invocation_id}, "
                                         f"recorded {ref.invocation_id}")
    if ref.kind in ("scope", "direct"):
        if ref.engine_cgroup_id is None or ref.unit_cgroup_id is None:
            return ("identity-unavailable", "reference records no cgroup id")
        if seen.engine_cgroup_id is None or seen.shim_unit_cgroup_id is None:
            return ("identity-unavailable", "cgroup id unreadable")
        if ref.kind == "direct" and seen.unit_cgroup_id is None:
            return ("identity-unavailable", f"cgroup {ref.cgroup_path} unreadable")
        for label, value in (("cgroup", seen.unit_cgroup_id), ("the shim's cgroup", seen.shim_unit_cgroup_id)):
            if value is not None and value != ref.unit_cgroup_id:
                return ("identity-mismatch", f"{label} under {ref.cgroup_path} has id {value}, "
                                             f"recorded {ref.unit_cgroup_id}")
        if seen.engine_cgroup_id != ref.engine_cgroup_id:
            return ("identity-mismatch", f"engine cgroup id {seen.engine_cgroup_id}, recorded "
                                         f"{ref.engine_cgroup_id}")
    return None


# Constrained, not bounded: mypy checks the shared code once per machine's phase set, so a phase name
# used there ("term", "grace", "done") must exist in both.
_P = TypeVar("_P", Phase, PgPhase)


class _StopCore(Generic[_P]):
    """What both force-stop machines share: their state, the identity-first start, the phase log, the
    table lookup (rule 9), acknowledgements that change nothing (rule 3), and TERM -> grace (rule 2).

    It never builds a ``StopOutcome``: each machine's own ``_end``/``_finish`` does, so which outcomes a
    machine can reach is decided by that machine alone (the process-group machine has no path to
    ``stopped``, rule 7).
    """

    TRANSITIONS: Transitions

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A row naming a handler the machine lacks is a programming error: refuse it at import.
        missing = sorted({h for h in cls.TRANSITIONS.values() if not callable(getattr(cls, h, None))})
        if missing:
            raise TypeError(f"{cls.__name__}.TRANSITIONS names missing handlers {missing}")

    def __init__(self, ref: CohortRef, request: StopRequest, grace: float, phase: _P) -> None:
        self.ref = ref
        self.request = request
        self.grace = grace
        self.evidence = StopEvidence()
        self.outcome: StopOutcome | None = None
        self.phase: _P = phase
        self._signalled = False
        self.action: Action = CheckIdentity()
        self.evidence.phases.append(phase)

    @property
    def state(self) -> Literal["stopping", "stopped", "uncertain"]:
        """``stopping`` until the outcome is final."""
        return "stopping" if self.outcome is None else self.outcome.state

    def feed(self, event: Event) -> Action:
        """Advance on ``event`` and return the next action (also kept as ``self.action``).

        Looks up (phase, type of event) in the machine's table; an event with no row for the current phase
        returns the pending action unchanged and records nothing (rule 9). After ``Finish`` every event
        returns that ``Finish`` again. Never raises for an event of the wrong phase.
        """
        if self.outcome is not None:
            return self.action
        handler = self.TRANSITIONS.get((self.phase, type(event)))
        if handler is None:
            return self.action
        action: Action = getattr(self, handler)(event)
        return action

    def _go(self, phase: _P, action: Action) -> Action:
        self.phase = phase
        self.evidence.phases.append(phase)
        self.action = action
        return action

    def _end(self, reason: str, detail: str) -> Action:
        """Record the failure ``reason`` and finish (each machine decides what it can still reach)."""
        raise NotImplementedError

    # -- handlers both tables name
    def _acknowledged(self, event: Acknowledged) -> Action:
        # SIGTERM, EOF, an abort acknowledgement, agent_settled and idle never promote a stop (seeds/003
        # §6 "Proof", CHAT-01 line 325; K3). They are recorded and the pending action stays.
        self.evidence.acknowledgements.append(event.what)
        return self.action

    def _unavailable(self, event: Unavailable | IdentityUnavailable) -> Action:
        return self._end(event.reason, event.detail)

    def _term_sent(self, event: TermSent) -> Action:
        self.evidence.termed, self.evidence.term_skipped = event.termed, event.skipped
        return self._go("grace", AwaitGrace(self.grace))


class StopMachine(_StopCore[Phase]):
    """Force stop of a cgroup cohort (scope or direct launcher). Feed events, perform the returned action.

    ``machine.action`` is the pending action and ``machine.phase`` the phase to publish; ``feed(event)``
    returns the next action. When it is a ``Finish``, ``machine.outcome`` is set and further events are
    ignored (returned Finish again). Raises ValueError for a process-group reference.
    """

    TRANSITIONS = STOP_TRANSITIONS

    def __init__(
        self,
        ref: CohortRef,
        request: StopRequest,
        *,
        grace: float = 2.0,
        freeze_timeout: float = 10.0,
        kill_timeout: float = 10.0,
        collect_timeout: float = 5.0,
        freeze_rounds: int = 3,
    ) -> None:
        if ref.kind == "pgroup":
            raise ValueError("a process-group reference needs PgroupStopMachine")
        super().__init__(ref, request, grace, "identity")
        self.freeze_timeout = freeze_timeout
        self.freeze_rounds = freeze_rounds
        self.kill_timeout = kill_timeout
        self.collect_timeout = collect_timeout

    # -- helpers
    def _fail(self, reason: str, detail: str) -> None:
        assert reason in UNCERTAIN_REASONS, reason
        self.evidence.failures.append((reason, detail))

    def _end(self, reason: str, detail: str) -> Action:
        self._fail(reason, detail)
        return self._finish()

    def _finish(self) -> Action:
        ev = self.evidence
        failures = ev.failures
        containment = ev.identity.containment if ev.identity is not None else None
        # Where containment does not hold, no proof from the cohort may say stopped (K13): a member may
        # have left engine/ before the freeze and survived the kill.
        if not self.ref.containment.held:
            failures.append(("containment-not-held", f"launch canary: {self.ref.containment.to_dict()}"))
        elif containment is None or not containment.held:
            failures.append(("containment-not-held", "the live shim does not report containment"))
        complete = (
            not failures
            and ev.frozen is True
            and ev.enumeration_stable is True
            and ev.frozen_rechecked is True
            and ev.populated0 is True
            and not ev.survivors
            and {d.member for d in ev.deaths} >= set(ev.members)
        )
        if not failures and not complete:
            failures.append(("enumeration-incomplete", "a death was not observed for every enumerated member"))
        if failures:
            reason, detail = failures[0]
            outcome = StopOutcome("uncertain", reason, detail, False, self._signalled, ev)
        else:
            outcome = StopOutcome("stopped", None, "", True, self._signalled, ev)
        self.outcome = outcome
        return self._go("done", Finish(outcome))

    def _kill_or_finish(self) -> Action:
        if "cgroup.kill" not in (self.evidence.identity.features if self.evidence.identity else ()):
            return self._finish()
        return self._go("kill", Kill(self.kill_timeout))

    # -- handlers STOP_TRANSITIONS names
    def _identity_observed(self, event: IdentityObserved) -> Action:
        self.evidence.identity = event.identity
        problem = check_identity(self.ref, event.identity)
        if problem is not None:
            # No signal for a cohort that is not (provably) the reference's (K14, K15).
            return self._end(*problem)
        missing = [f for f in FEATURES if f not in event.identity.features]
        if missing:
            self._fail("kernel-feature-missing", f"missing {', '.join(missing)}")
        self._signalled = True
        return self._go("term", SendTerm())

    def _grace_ended(self, event: GraceEnded) -> Action:
        ev = self.evidence
        ev.grace_populated = event.populated
        # Empty after TERM or not, the kill phase runs: TERM alone never stops (K3).
        if "cgroup.freeze" not in (ev.identity.features if ev.identity else ()):
            return self._finish()
        return self._go("freeze", Freeze(self.freeze_timeout))

    def _frozen(self, event: Frozen) -> Action:
        self.evidence.frozen = event.ok
        if not event.ok:
            self._fail("freeze-failed", event.detail or "frozen 1 not observed")
            return self._kill_or_finish()
        return self._go("enumerate", Enumerate())

    def _enumerated(self, event: Enumerated) -> Action:
        self.evidence.members, self.evidence.enumeration_stable = event.members, event.stable
        return self._go("recheck", RecheckFrozen())

    def _rechecked(self, event: FrozenRechecked) -> Action:
        ev = self.evidence
        ev.frozen_rechecked = event.frozen
        if event.frozen and ev.enumeration_stable:
            return self._kill_or_finish()
        # The enumeration counts only when it is bracketed by frozen 1 (everywhere below engine/) and read
        # the same twice. frozen 0 was seen here now and then (a frozen task is woken by a signal and
        # re-enters the freezer trap), so the freeze is re-established and the members read again, a
        # bounded number of times; nothing from a failed round is kept.
        if ev.freeze_rounds < self.freeze_rounds:
            ev.freeze_rounds += 1
            return self._go("freeze", Freeze(self.freeze_timeout))
        if not ev.enumeration_stable:
            self._fail("enumeration-incomplete", "two readings while frozen differed")
        else:
            self._fail("freeze-failed", "frozen 0 after the enumeration")
        return self._kill_or_finish()

    def _killed(self, event: Killed) -> Action:
        ev = self.evidence
        ev.kill_written = event.written
        ev.populated0 = event.populated0
        ev.populated0_at = event.at if event.populated0 else None
        if not event.written:
            self._fail("kill-failed", "cgroup.kill could not be written")
        elif not event.populated0:
            self._fail("populated-timeout", f"populated 1 after {self.kill_timeout}s")
        return self._go("collect", Collect(ev.members, self.collect_timeout))

    def _reaped(self, event: Reaped) -> Action:
        self.evidence.deaths, self.evidence.survivors = event.deaths, event.survivors
        if event.survivors:
            self._fail("member-survived", f"{len(event.survivors)} enumerated member(s) alive after populated 0")
        return self._finish()


class PgroupStopMachine(_StopCore[PgPhase]):
    """Force stop of the process-group fallback (no cgroup). Always ends ``uncertain`` (K2).

    A process group cannot be enumerated: a member that called setsid() (or setpgid) has left it and no
    signal to the group reaches it. So even an empty group after SIGKILL proves nothing about the cohort.
    The machine still escalates (TERM to the group, grace, SIGKILL to every process left in it) because a
    best-effort kill is better than none, but its outcome is ``uncertain`` with reason
    ``process-group-fallback`` whatever it observes. Raises ValueError for a cgroup reference.
    """

    TRANSITIONS = PGROUP_TRANSITIONS

    def __init__(
        self,
        ref: CohortRef,
        request: StopRequest,
        *,
        grace: float = 2.0,
    ) -> None:
        if ref.kind != "pgroup":
            raise ValueError("PgroupStopMachine takes a process-group reference")
        super().__init__(ref, request, grace, "identity")

    def _end(self, reason: str, detail: str) -> Action:
        self.evidence.failures.append((reason, detail))
        r, d = self.evidence.failures[0]
        self.outcome = StopOutcome("uncertain", r, d, False, self._signalled, self.evidence)
        return self._go("done", Finish(self.outcome))

    # -- handlers PGROUP_TRANSITIONS names
    def _identity_observed(self, event: IdentityObserved) -> Action:
        self.evidence.identity = event.identity
        if event.identity.host is None:
            return self._end("identity-unavailable", "host or boot id unreadable")
        if event.identity.host != self.ref.host:
            return self._end("identity-mismatch", "host or boot differs from the reference")
        self._signalled = True
        return self._go("term", SendTerm())

    def _grace_ended(self, event: GraceEnded) -> Action:
        self.evidence.grace_populated = event.populated
        return self._go("kill", KillGroup())

    def _killed(self, event: Killed) -> Action:
        self.evidence.kill_written = event.written
        return self._go("observe", ObserveGroup())

    def _group_observed(self, event: GroupObserved) -> Action:
        self.evidence.survivors = event.remaining
        self.evidence.populated0 = not event.remaining
        # An empty group is not an empty cohort: a setsid() child is outside every group test (K2).
        return self._end("process-group-fallback",
                         "a process group cannot be enumerated; members that left it are unseen")


def machine_for(
    ref: CohortRef,
    request: StopRequest,
    *,
    grace: float = 2.0,
    freeze_timeout: float = 10.0,
    kill_timeout: float = 10.0,
    collect_timeout: float = 5.0,
    freeze_rounds: int = 3,
) -> StopMachine | PgroupStopMachine:
    """A new force-stop machine for ``ref``: ``PgroupStopMachine`` for a process group, else ``StopMachine``.

    A new machine starts at the identity check (``machine.action`` is ``CheckIdentity()``); built again
    from the same reference and request after a crash, it re-runs the stop from TERM (K10, K11). The
    timeouts are the bounds of the kill phase; the process-group machine uses only ``grace``.
    """
    if ref.kind == "pgroup":
        return PgroupStopMachine(ref, request, grace=grace)
    return StopMachine(ref, request, grace=grace, freeze_timeout=freeze_timeout, kill_timeout=kill_timeout,
                       collect_timeout=collect_timeout, freeze_rounds=freeze_rounds)
