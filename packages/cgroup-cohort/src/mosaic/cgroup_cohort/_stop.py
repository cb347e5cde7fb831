"""The force-stop decision core (sans-io): events in, one action out, an outcome at the end.

Rules this file keeps (seeds/003 §6 "Force stop", "Unavailable is not empty", "Proof"; K1-K3, K10-K15):

1. Identity first. The claim's epoch (invocation ID for a scope, cgroup ids for a direct cgroup) is
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
8. A restart (K10, K11) builds a new machine from the same claim and stop request: it starts again at the
   identity check and re-runs from TERM; it carries over nothing as done.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from ._errors import UNCERTAIN_REASONS
from ._model import CohortClaim, Death, MemberRef, ObservedIdentity, StopRequest

__all__ = [
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
    "ObserveGroup",
    "Killed",
    "PgroupStopMachine",
    "Reaped",
    "RecheckFrozen",
    "SendTerm",
    "StopEvidence",
    "StopMachine",
    "StopOutcome",
    "TermSent",
    "Unavailable",
    "check_identity",
]

FEATURES = ("cgroup.freeze", "cgroup.kill")


# ----------------------------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class CheckIdentity:
    """Read the identity of the cohort under the claim's name (manager, shim hello, cgroup ids)."""


@dataclass(frozen=True)
class SendTerm:
    """SIGTERM, through a pidfd, to every member still in engine/ (checked per member before signalling)."""


@dataclass(frozen=True)
class AwaitGrace:
    """Wait up to ``seconds`` for populated 0 (ends early when it is reached)."""

    seconds: float


@dataclass(frozen=True)
class Freeze:
    """Write cgroup.freeze=1 and wait up to ``timeout`` for frozen 1."""

    timeout: float


@dataclass(frozen=True)
class Enumerate:
    """Read every member (pid, start time) recursively, twice, while frozen."""


@dataclass(frozen=True)
class RecheckFrozen:
    """Read cgroup.events again: still frozen 1?"""


@dataclass(frozen=True)
class Kill:
    """Write cgroup.kill and wait up to ``timeout`` for populated 0."""

    timeout: float


@dataclass(frozen=True)
class Collect:
    """Collect the death of each enumerated member (reaped by the shim, or gone from /proc)."""

    members: tuple[MemberRef, ...]
    timeout: float


@dataclass(frozen=True)
class KillGroup:
    """Process-group fallback: SIGKILL every process still in the group, through pidfds."""


@dataclass(frozen=True)
class ObserveGroup:
    """Process-group fallback: list the processes that still carry the group id."""


@dataclass(frozen=True)
class Finish:
    """The machine is done; ``outcome`` is final."""

    outcome: StopOutcome


Action = (
    CheckIdentity
    | SendTerm
    | AwaitGrace
    | Freeze
    | Enumerate
    | RecheckFrozen
    | Kill
    | Collect
    | KillGroup
    | ObserveGroup
    | Finish
)


# ------------------------------------------------------------------------------------------------ events
@dataclass(frozen=True)
class IdentityObserved:
    identity: ObservedIdentity


@dataclass(frozen=True)
class IdentityUnavailable:
    reason: str
    detail: str


@dataclass(frozen=True)
class TermSent:
    termed: tuple[MemberRef, ...]
    skipped: tuple[MemberRef, ...] = ()  # no longer in engine/ or no longer that process: not signalled


@dataclass(frozen=True)
class GraceEnded:
    populated: bool


@dataclass(frozen=True)
class Frozen:
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Enumerated:
    members: tuple[MemberRef, ...]
    stable: bool


@dataclass(frozen=True)
class FrozenRechecked:
    frozen: bool


@dataclass(frozen=True)
class Killed:
    populated0: bool
    at: float
    written: bool = True


@dataclass(frozen=True)
class Reaped:
    deaths: tuple[Death, ...]
    survivors: tuple[MemberRef, ...] = ()


@dataclass(frozen=True)
class GroupObserved:
    """Process-group fallback: the processes still carrying the group id after the kill."""

    remaining: tuple[MemberRef, ...]


@dataclass(frozen=True)
class Unavailable:
    """An observation or an action could not be made (missing cgroup, gone shim). Never "empty"."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Acknowledged:
    """A SIGTERM acknowledgement, EOF, agent_settled or idle from the engine. Evidence of nothing."""

    what: Literal["sigterm-ack", "eof", "agent_settled", "idle", "abort-ack"]


Event = (
    IdentityObserved
    | IdentityUnavailable
    | TermSent
    | GraceEnded
    | Frozen
    | Enumerated
    | FrozenRechecked
    | Killed
    | Reaped
    | GroupObserved
    | Unavailable
    | Acknowledged
)


# -------------------------------------------------------------------------------------------- evidence
@dataclass
class StopEvidence:
    """Everything observed during one run of the machine, in order. Input to the proof builder."""

    identity: ObservedIdentity | None = None
    termed: tuple[MemberRef, ...] = ()
    term_skipped: tuple[MemberRef, ...] = ()
    grace_populated: bool | None = None
    frozen: bool | None = None
    members: tuple[MemberRef, ...] = ()
    enumeration_stable: bool | None = None
    frozen_rechecked: bool | None = None
    freeze_rounds: int = 1
    kill_written: bool | None = None
    populated0: bool | None = None
    populated0_at: float | None = None
    deaths: tuple[Death, ...] = ()
    survivors: tuple[MemberRef, ...] = ()
    acknowledgements: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "termed": [m.to_dict() for m in self.termed],
            "termSkipped": [m.to_dict() for m in self.term_skipped],
            "gracePopulated": self.grace_populated,
            "frozen": self.frozen,
            "members": [m.to_dict() for m in self.members],
            "enumerationStable": self.enumeration_stable,
            "frozenRechecked": self.frozen_rechecked,
            "freezeRounds": self.freeze_rounds,
            "killWritten": self.kill_written,
            "populated0": self.populated0,
            "populated0At": self.populated0_at,
            "deaths": [d.to_dict() for d in self.deaths],
            "survivors": [m.to_dict() for m in self.survivors],
            "acknowledgements": list(self.acknowledgements),
            "failures": [list(f) for f in self.failures],
            "phases": list(self.phases),
        }


@dataclass(frozen=True)
class StopOutcome:
    """``stopped`` (with ``membership_complete`` True) or ``uncertain`` with a reason from UNCERTAIN_REASONS.

    ``signalled`` says whether any signal or cgroup.kill was sent: it is False for every identity
    failure (K14, K15).
    """

    state: Literal["stopped", "uncertain"]
    reason: str | None
    detail: str
    membership_complete: bool
    signalled: bool
    evidence: StopEvidence


def check_identity(claim: CohortClaim, seen: ObservedIdentity) -> tuple[str, str] | None:
    """None when ``seen`` is the claim's cohort; else (uncertain reason, detail). Pure.

    Unknown values are ``identity-unavailable``; known but different ones are ``identity-mismatch``.
    A different boot or host is a mismatch here: those claims go to the boot proof or foreign-host.
    """
    if seen.machine_id is None or seen.boot_id is None:
        return ("identity-unavailable", "host or boot id unreadable")
    if seen.machine_id != claim.machine_id:
        return ("identity-mismatch", f"machine id {seen.machine_id} != recorded {claim.machine_id}")
    if seen.boot_id != claim.boot_id:
        return ("identity-mismatch", f"boot id {seen.boot_id} != recorded {claim.boot_id}")
    if claim.kind == "scope":
        # The invocation ID is the membership epoch (brief §6 "Identity and epoch"): the manager's value
        # and the shim's value must both be the claim's.
        if claim.invocation_id is None or seen.invocation_id is None or seen.shim_invocation_id is None:
            return ("identity-unavailable", "invocation ID unknown")
        if seen.invocation_id != claim.invocation_id:
            return ("identity-mismatch", f"unit {claim.unit} has invocation {seen.invocation_id}, "
                                         f"recorded {claim.invocation_id}")
        if seen.shim_invocation_id != claim.invocation_id:
            return ("identity-mismatch", f"shim reports invocation {seen.shim_invocation_id}, "
                                         f"recorded {claim.invocation_id}")
    if claim.kind in ("scope", "direct"):
        if claim.engine_cgroup_id is None or claim.unit_cgroup_id is None:
            return ("identity-unavailable", "claim records no cgroup id")
        if seen.engine_cgroup_id is None or seen.shim_unit_cgroup_id is None:
            return ("identity-unavailable", "cgroup id unreadable")
        if claim.kind == "direct" and seen.unit_cgroup_id is None:
            return ("identity-unavailable", f"cgroup {claim.cgroup_path} unreadable")
        for label, value in (("cgroup", seen.unit_cgroup_id), ("the shim's cgroup", seen.shim_unit_cgroup_id)):
            if value is not None and value != claim.unit_cgroup_id:
                return ("identity-mismatch", f"{label} under {claim.cgroup_path} has id {value}, "
                                             f"recorded {claim.unit_cgroup_id}")
        if seen.engine_cgroup_id != claim.engine_cgroup_id:
            return ("identity-mismatch", f"engine cgroup id {seen.engine_cgroup_id}, recorded "
                                         f"{claim.engine_cgroup_id}")
    return None


Phase = Literal["identity", "term", "grace", "freeze", "enumerate", "recheck", "kill", "collect", "done"]
PgPhase = Literal["identity", "term", "grace", "kill", "observe", "done"]
# Constrained, not bounded: mypy checks the shared code once per machine's phase set, so a phase name
# used there ("grace", "done") must exist in both.
_P = TypeVar("_P", Phase, PgPhase)


class _StopCore(Generic[_P]):
    """What both force-stop machines do identically: their state, the identity-first start, the phase log,
    acknowledgements that change nothing (rule 3), and TERM -> grace (rule 2).

    It never builds a ``StopOutcome``: each machine's own ``_finish`` does, so which outcomes a machine can
    reach is decided by that machine alone (the process-group machine has no path to ``stopped``, rule 7).
    """

    def __init__(self, claim: CohortClaim, request: StopRequest, grace: float, phase: _P) -> None:
        self.claim = claim
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

    def _go(self, phase: _P, action: Action) -> Action:
        self.phase = phase
        self.evidence.phases.append(phase)
        self.action = action
        return action

    def _on_acknowledgement(self, event: Acknowledged) -> Action:
        # SIGTERM, EOF, an abort acknowledgement, agent_settled and idle never promote a stop (seeds/003
        # §6 "Proof", CHAT-01 line 325; K3). They are recorded and the pending action stays.
        self.evidence.acknowledgements.append(event.what)
        return self.action

    def feed(self, event: Event) -> Action:
        """Advance on ``event``; returns the next action. Events that do not fit the phase are ignored."""
        if self.outcome is not None:
            return self.action
        if isinstance(event, Acknowledged):
            return self._on_acknowledgement(event)
        if self.phase == "term" and isinstance(event, TermSent):
            self.evidence.termed, self.evidence.term_skipped = event.termed, event.skipped
            return self._go("grace", AwaitGrace(self.grace))
        return self._step(event)

    def _step(self, event: Event) -> Action:
        """The machine's own transitions (anything but an acknowledgement or TERM sent)."""
        raise NotImplementedError


class StopMachine(_StopCore[Phase]):
    """Force stop of a cgroup cohort (scope or direct launcher). Feed events, perform the returned action.

    ``machine.action`` is the pending action; ``feed(event)`` returns the next one. When it is a
    ``Finish``, ``machine.outcome`` is set and further events are ignored (returned Finish again).
    """

    def __init__(
        self,
        claim: CohortClaim,
        request: StopRequest,
        *,
        grace: float = 2.0,
        freeze_timeout: float = 10.0,
        kill_timeout: float = 10.0,
        collect_timeout: float = 5.0,
        freeze_rounds: int = 3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if claim.kind == "pgroup":
            raise ValueError("a process-group claim needs PgroupStopMachine")
        super().__init__(claim, request, grace, "identity")
        self.freeze_timeout = freeze_timeout
        self.freeze_rounds = freeze_rounds
        self.kill_timeout = kill_timeout
        self.collect_timeout = collect_timeout
        self.clock = clock

    # -- helpers
    def _fail(self, reason: str, detail: str) -> None:
        assert reason in UNCERTAIN_REASONS, reason
        self.evidence.failures.append((reason, detail))

    def _finish(self) -> Action:
        ev = self.evidence
        failures = ev.failures
        containment = ev.identity.containment if ev.identity is not None else None
        # Where containment does not hold, no proof from the cohort may say stopped (K13): a member may
        # have left engine/ before the freeze and survived the kill.
        if not self.claim.containment.held:
            failures.append(("containment-not-held", f"launch canary: {self.claim.containment.to_dict()}"))
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

    # -- the transition table (acknowledgements and TERM sent: _StopCore.feed)
    def _step(self, event: Event) -> Action:
        if isinstance(event, Unavailable):
            self._fail(event.reason, event.detail)
            return self._finish()
        ev = self.evidence
        if self.phase == "identity":
            if isinstance(event, IdentityUnavailable):
                self._fail(event.reason, event.detail)
                return self._finish()
            if not isinstance(event, IdentityObserved):
                return self.action
            ev.identity = event.identity
            problem = check_identity(self.claim, event.identity)
            if problem is not None:
                # No signal for a cohort that is not (provably) the claim's (K14, K15).
                self._fail(*problem)
                return self._finish()
            missing = [f for f in FEATURES if f not in event.identity.features]
            if missing:
                self._fail("kernel-feature-missing", f"missing {', '.join(missing)}")
            self._signalled = True
            return self._go("term", SendTerm())
        if self.phase == "grace" and isinstance(event, GraceEnded):
            ev.grace_populated = event.populated
            # Empty after TERM or not, the kill phase runs: TERM alone never stops (K3).
            if "cgroup.freeze" not in (ev.identity.features if ev.identity else ()):
                return self._finish()
            return self._go("freeze", Freeze(self.freeze_timeout))
        if self.phase == "freeze" and isinstance(event, Frozen):
            ev.frozen = event.ok
            if not event.ok:
                self._fail("freeze-failed", event.detail or "frozen 1 not observed")
                return self._kill_or_finish()
            return self._go("enumerate", Enumerate())
        if self.phase == "enumerate" and isinstance(event, Enumerated):
            ev.members, ev.enumeration_stable = event.members, event.stable
            return self._go("recheck", RecheckFrozen())
        if self.phase == "recheck" and isinstance(event, FrozenRechecked):
            ev.frozen_rechecked = event.frozen
            if event.frozen and ev.enumeration_stable:
                return self._kill_or_finish()
            # The enumeration counts only when it is bracketed by frozen 1 (everywhere below engine/) and
            # read the same twice. frozen 0 was seen here now and then (a frozen task is woken by a signal
            # and re-enters the freezer trap), so the freeze is re-established and the members read
            # again, a bounded number of times; nothing from a failed round is kept.
            if ev.freeze_rounds < self.freeze_rounds:
                ev.freeze_rounds += 1
                return self._go("freeze", Freeze(self.freeze_timeout))
            if not ev.enumeration_stable:
                self._fail("enumeration-incomplete", "two readings while frozen differed")
            else:
                self._fail("freeze-failed", "frozen 0 after the enumeration")
            return self._kill_or_finish()
        if self.phase == "kill" and isinstance(event, Killed):
            ev.kill_written = event.written
            ev.populated0 = event.populated0
            ev.populated0_at = event.at if event.populated0 else None
            if not event.written:
                self._fail("kill-failed", "cgroup.kill could not be written")
            elif not event.populated0:
                self._fail("populated-timeout", f"populated 1 after {self.kill_timeout}s")
            return self._go("collect", Collect(ev.members, self.collect_timeout))
        if self.phase == "collect" and isinstance(event, Reaped):
            ev.deaths, ev.survivors = event.deaths, event.survivors
            if event.survivors:
                self._fail("member-survived", f"{len(event.survivors)} enumerated member(s) alive after populated 0")
            return self._finish()
        return self.action

    def _kill_or_finish(self) -> Action:
        if "cgroup.kill" not in (self.evidence.identity.features if self.evidence.identity else ()):
            return self._finish()
        return self._go("kill", Kill(self.kill_timeout))


class PgroupStopMachine(_StopCore[PgPhase]):
    """Force stop of the process-group fallback (no cgroup). Always ends ``uncertain`` (K2).

    A process group cannot be enumerated: a member that called setsid() (or setpgid) has left it and no
    signal to the group reaches it. So even an empty group after SIGKILL proves nothing about the cohort.
    The machine still escalates (TERM to the group, grace, SIGKILL to every process left in it) because a
    best-effort kill is better than none, but its outcome is ``uncertain`` with reason
    ``process-group-fallback`` whatever it observes.
    """

    def __init__(
        self,
        claim: CohortClaim,
        request: StopRequest,
        *,
        grace: float = 2.0,
    ) -> None:
        if claim.kind != "pgroup":
            raise ValueError("PgroupStopMachine takes a process-group claim")
        super().__init__(claim, request, grace, "identity")

    def _finish(self, reason: str, detail: str) -> Action:
        self.evidence.failures.append((reason, detail))
        r, d = self.evidence.failures[0]
        self.outcome = StopOutcome("uncertain", r, d, False, self._signalled, self.evidence)
        return self._go("done", Finish(self.outcome))

    # -- the transition table (acknowledgements and TERM sent: _StopCore.feed)
    def _step(self, event: Event) -> Action:
        if isinstance(event, (Unavailable, IdentityUnavailable)):
            return self._finish(event.reason, event.detail)
        if self.phase == "identity" and isinstance(event, IdentityObserved):
            self.evidence.identity = event.identity
            seen = event.identity
            if seen.machine_id != self.claim.machine_id or seen.boot_id != self.claim.boot_id:
                return self._finish("identity-mismatch", "host or boot differs from the claim")
            self._signalled = True
            return self._go("term", SendTerm())
        if self.phase == "grace" and isinstance(event, GraceEnded):
            self.evidence.grace_populated = event.populated
            return self._go("kill", KillGroup())
        if self.phase == "kill" and isinstance(event, Killed):
            self.evidence.kill_written = event.written
            return self._go("observe", ObserveGroup())
        if self.phase == "observe" and isinstance(event, GroupObserved):
            self.evidence.survivors = event.remaining
            self.evidence.populated0 = not event.remaining
            # An empty group is not an empty cohort: a setsid() child is outside every group test (K2).
            return self._finish("process-group-fallback",
                                "a process group cannot be enumerated; members that left it are unseen")
        return self.action
