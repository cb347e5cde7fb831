"""The force stop's vocabulary: the actions a stop machine asks for, the events it is fed, what it observed.

All are frozen values (``StopEvidence`` excepted: the machine appends to it as it runs). They are the
public seam between the sans-io machines of ``_stop.py`` and whoever performs the actions: ``force_stop``,
a controller driving a machine step by step (publishing the current phase into its claim between actions,
seeds/003 §6 "Force stop"), or a test feeding events in an exact order.

Time enters only through events (``Killed.at``, ``Death.time``): the machines never read a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from mosaic.safe_open import ProcessRef

from ._model import Death, ObservedIdentity

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
    "Killed",
    "ObserveGroup",
    "Reaped",
    "RecheckFrozen",
    "SendTerm",
    "StopEvidence",
    "StopOutcome",
    "TermSent",
    "Unavailable",
]


# ----------------------------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class CheckIdentity:
    """Read the identity of the cohort under the reference's unit name (manager, shim hello, cgroup ids)."""


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

    members: tuple[ProcessRef, ...]
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
    """What the live system says about the cohort under the reference's name (manager, shim, cgroup ids)."""

    identity: ObservedIdentity


@dataclass(frozen=True)
class IdentityUnavailable:
    """The identity could not be read (no loaded unit, shim gone, cgroup missing): no signal may follow."""

    reason: str
    detail: str


@dataclass(frozen=True)
class TermSent:
    """The members SIGTERM was sent to, through pidfds; and those skipped (gone, or no longer in engine/)."""

    termed: tuple[ProcessRef, ...]
    skipped: tuple[ProcessRef, ...] = ()  # no longer in engine/ or no longer that process: not signalled


@dataclass(frozen=True)
class GraceEnded:
    """The grace ended (at its bound, or early on populated 0); ``populated`` as read then. Proves nothing."""

    populated: bool


@dataclass(frozen=True)
class Frozen:
    """cgroup.freeze was written; ``ok`` when frozen 1 was observed in engine/ and every cgroup below it."""

    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Enumerated:
    """The members read while frozen; ``stable`` when two complete readings were identical."""

    members: tuple[ProcessRef, ...]
    stable: bool


@dataclass(frozen=True)
class FrozenRechecked:
    """frozen 1 read again, everywhere below engine/, after the enumeration."""

    frozen: bool


@dataclass(frozen=True)
class Killed:
    """cgroup.kill (or, for a process group, SIGKILL) was ``written``; ``populated0`` observed at ``at``
    (Unix seconds, the proof's observation time: the machine reads no clock of its own)."""

    populated0: bool
    at: float
    written: bool = True


@dataclass(frozen=True)
class Reaped:
    """The death observed for each enumerated member, and the enumerated members still alive."""

    deaths: tuple[Death, ...]
    survivors: tuple[ProcessRef, ...] = ()


@dataclass(frozen=True)
class GroupObserved:
    """Process-group fallback: the processes still carrying the group id after the kill."""

    remaining: tuple[ProcessRef, ...]


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
    """Everything observed during one run of the machine, in order. Input to the proof builder.

    ``phases`` lists every phase the machine entered, in order (the phase a controller publishes into its
    claim is ``machine.phase``); ``failures`` every (uncertain reason, detail), the first of which is the
    outcome's reason.
    """

    identity: ObservedIdentity | None = None
    termed: tuple[ProcessRef, ...] = ()
    term_skipped: tuple[ProcessRef, ...] = ()
    grace_populated: bool | None = None
    frozen: bool | None = None
    members: tuple[ProcessRef, ...] = ()
    enumeration_stable: bool | None = None
    frozen_rechecked: bool | None = None
    freeze_rounds: int = 1
    kill_written: bool | None = None
    populated0: bool | None = None
    populated0_at: float | None = None
    deaths: tuple[Death, ...] = ()
    survivors: tuple[ProcessRef, ...] = ()
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
