"""The values of the Claude link (:mod:`mosaic.claude_rpc._link`): what it sends, what it tracks, what it
reports. No behaviour beyond small derived properties; the rules are in ``_link.py``.

* :class:`Outgoing`: one line the link writes (a user message, a control request, a permission answer)
  and its write outcome, moved only through :data:`OUTCOME_TABLE`.
* :class:`PermissionRequest`: one ``can_use_tool`` the engine asked, with its exact id and the state the
  evidence put it in (:class:`PermissionState`).
* :class:`InterruptEvidence`: what an interrupt's receipt proves about the user messages written before it.
* The events (:data:`LinkEvent`), in the order they happened.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

__all__ = [
    "OUTCOME_TABLE",
    "Acknowledged",
    "EngineRequest",
    "InitInfo",
    "InterruptEvidence",
    "InterruptSettled",
    "Lifecycle",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "OutKind",
    "Outgoing",
    "Outcome",
    "OutcomeInput",
    "OutcomeUnknown",
    "PermissionAsked",
    "PermissionCancelled",
    "PermissionRequest",
    "PermissionResolved",
    "PermissionState",
    "Poisoned",
    "ProtocolViolation",
    "RanAfterInterrupt",
    "ResultInfo",
    "SessionMismatch",
    "StatusChanged",
    "StreamEvent",
    "SystemEvent",
    "TruncatedOutput",
    "TurnFinished",
    "TurnMessage",
    "TurnStarted",
    "UnknownReason",
    "UnknownRecord",
    "Written",
]

UnknownReason = Literal[
    "partial-write",  # fewer bytes than the line were accepted, then the write stopped
    "write-error",  # the write raised (EPIPE, EBADF, ...)
    "write-stalled",  # the bound passed before the pipe accepted the whole line
    "no-response",  # the whole line was accepted, no acknowledgement within the bound
    "engine-output-ended",  # the engine's stdout reached EOF before the acknowledgement
    "output-unreadable",  # the engine's stdout broke the framing (a line the decoder cannot take)
]


class Outcome(enum.Enum):
    """Where an outgoing line stands (brief §1 "Write outcomes", plus the states before any outcome)."""

    QUEUED = "queued"
    WRITING = "writing"
    WRITTEN = "written"
    ACKNOWLEDGED = "acknowledged"
    UNKNOWN = "unknown"
    NOT_WRITTEN = "not-written"


class OutcomeInput(enum.Enum):
    WRITE_STARTED = "write-started"
    WRITE_WHOLE = "write-accepted-whole"
    WRITE_PARTIAL = "write-partial"
    WRITE_ERROR = "write-error"
    ACK = "ack"  # the line's acknowledgement was read (table in _link.py's docstring)
    BOUND_PASSED = "bound-passed"
    OUTPUT_ENDED = "output-ended"
    OUTPUT_UNREADABLE = "output-unreadable"
    POISON_DROPS_OUTBOX = "poison-drops-outbox"


_Q, _W, _WR = Outcome.QUEUED, Outcome.WRITING, Outcome.WRITTEN
_ACK, _UNK, _NW = Outcome.ACKNOWLEDGED, Outcome.UNKNOWN, Outcome.NOT_WRITTEN
_I = OutcomeInput

OUTCOME_TABLE: Mapping[tuple[Outcome, OutcomeInput], tuple[Outcome, UnknownReason | None]] = MappingProxyType({
    (_Q, _I.WRITE_STARTED): (_W, None),
    (_Q, _I.ACK): (_NW, None),  # an acknowledgement of a line never written: a violation, the link poisons
    (_Q, _I.BOUND_PASSED): (_NW, None),
    (_Q, _I.OUTPUT_ENDED): (_NW, None),
    (_Q, _I.OUTPUT_UNREADABLE): (_NW, None),
    (_Q, _I.POISON_DROPS_OUTBOX): (_NW, None),
    (_W, _I.WRITE_WHOLE): (_WR, None),
    (_W, _I.WRITE_PARTIAL): (_UNK, "partial-write"),
    (_W, _I.WRITE_ERROR): (_UNK, "write-error"),
    (_W, _I.ACK): (_ACK, None),  # the engine answers once it read the whole line, maybe before write_done
    (_W, _I.BOUND_PASSED): (_UNK, "write-stalled"),
    (_W, _I.OUTPUT_ENDED): (_UNK, "engine-output-ended"),
    (_W, _I.OUTPUT_UNREADABLE): (_UNK, "output-unreadable"),
    (_WR, _I.ACK): (_ACK, None),
    (_WR, _I.BOUND_PASSED): (_UNK, "no-response"),
    (_WR, _I.OUTPUT_ENDED): (_UNK, "engine-output-ended"),
    (_WR, _I.OUTPUT_UNREADABLE): (_UNK, "output-unreadable"),
})
"""``(outcome, input) -> (new outcome, unknown reason)``; a pair not listed changes nothing. The same rows as
pi-rpc's table: acknowledged, unknown and not-written are final."""

IN_FLIGHT = frozenset({_Q, _W, _WR})


class LinkUsageError(RuntimeError):
    """A programming error in the caller (a rule of the link broken); never a refusal."""


class LinkPoisoned(LinkUsageError):
    """The link is poisoned: nothing may be written. ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the engine pipe is poisoned ({reason}); it is never written again")
        self.reason = reason


class OutKind(enum.Enum):
    USER = "user"  # a user message; acknowledged by its command_lifecycle frame
    CONTROL = "control"  # a control_request; acknowledged by the control_response with its request_id
    ANSWER = "answer"  # a control_response to a can_use_tool; acknowledged by the tool_result of its tool use


LifecycleState = Literal["queued", "started", "completed", "cancelled", "discarded", "refused"]
TERMINAL_LIFECYCLE = frozenset({"completed", "cancelled", "discarded", "refused"})


@dataclass(eq=False)
class Outgoing:
    """One line the link writes. Fields are read-only for callers.

    ``key`` is the user message's uuid, the control request's ``request_id`` or the answered request's id;
    ``subtype`` the control subtype (``initialize``, ``interrupt``, ``set_permission_mode``) or the answer's
    behaviour (``allow``, ``deny``). ``ack`` is the record that acknowledged it; ``lifecycle`` every
    ``command_lifecycle`` state read for a user message, in order; ``evidence`` an interrupt's
    :class:`InterruptEvidence` once its receipt is read.
    """

    seq: int
    kind: OutKind
    key: str
    subtype: str
    record: Mapping[str, Any]
    data: bytes
    queued_at: float
    bound: float | None
    read_count_at_send: int
    outcome: Outcome = Outcome.QUEUED
    unknown_reason: UnknownReason | None = None
    accepted: int = 0
    written_at: float | None = None
    ack: Mapping[str, Any] | None = None
    ack_index: int | None = None
    late: list[Mapping[str, Any]] = field(default_factory=list)
    lifecycle: list[str] = field(default_factory=list)
    evidence: InterruptEvidence | None = None
    # a user message: the interrupt written after it whose receipt did not prove it would not run
    interrupted_by: Outgoing | None = None

    @property
    def deadline(self) -> float | None:
        return None if self.bound is None else self.queued_at + self.bound

    @property
    def succeeded(self) -> bool:
        """A control request acknowledged with ``subtype: success``."""
        body = self.ack.get("response") if self.ack is not None else None
        return isinstance(body, Mapping) and body.get("subtype") == "success"

    @property
    def error(self) -> str | None:
        """A control request's error text when it was acknowledged with ``subtype: error``."""
        body = self.ack.get("response") if self.ack is not None else None
        if isinstance(body, Mapping) and body.get("subtype") == "error":
            return str(body.get("error"))
        return None

    @property
    def lifecycle_state(self) -> str | None:
        return self.lifecycle[-1] if self.lifecycle else None


class PermissionState(enum.Enum):
    PENDING = "pending"  # asked, not answered, not cancelled
    ANSWERED = "answered"  # this link queued its one answer
    CANCELLED = "cancelled"  # the engine sent control_cancel_request for it (native evidence, H8)
    RESOLVED = "resolved"  # a tool_result for its tool use was read
    ENDED = "ended"  # the engine's output ended with the request unresolved


@dataclass(eq=False)
class PermissionRequest:
    """One ``can_use_tool`` request, as the engine asked it. ``input`` is the exact input to allow (an allow
    sends it back unchanged as ``updatedInput``); ``suggestions`` are the engine's widening
    ``permission_suggestions``, kept to be shown disabled and never sent."""

    request_id: str
    tool_name: str
    tool_use_id: str | None
    input: Mapping[str, Any]
    suggestions: tuple[Mapping[str, Any], ...]
    record: Mapping[str, Any]
    index: int
    state: PermissionState = PermissionState.PENDING
    answer: Outgoing | None = None
    cancelled_after_answer: bool = False
    resolution: Mapping[str, Any] | None = None  # the tool_result block

    @property
    def behavior(self) -> str | None:
        """``allow`` / ``deny`` when this link answered, else ``None``."""
        return None if self.answer is None else self.answer.subtype


@dataclass(frozen=True)
class InterruptEvidence:
    """What an interrupt's receipt (``still_queued``, ``cancelled``) proves about the user messages this
    link wrote before the interrupt, each classified by the lifecycle read when the receipt arrived.

    ``nothing_queued_runs`` is the R3-1 proof: the interrupt asked ``cancel_queued``, its receipt lists
    nothing still queued, and every message written before it is accounted for (running in the interrupted
    turn, finished, or listed as cancelled). Otherwise a message may run after the interrupt, and
    :class:`RanAfterInterrupt` reports it if one does.
    """

    interrupt: Outgoing
    cancel_queued: bool
    still_queued: tuple[str, ...]
    cancelled: tuple[str, ...]
    ours_still_queued: tuple[Outgoing, ...]
    ours_cancelled: tuple[Outgoing, ...]
    foreign: tuple[str, ...]  # listed uuids this link never sent (the engine's own: cron, auto-resume)
    running: tuple[Outgoing, ...]  # started and not finished: the interrupted turn consumed them
    unacknowledged: tuple[Outgoing, ...]  # written before the interrupt, no lifecycle read by the receipt
    unaccounted: tuple[Outgoing, ...]  # queued (not started) at the receipt, yet in neither list

    @property
    def nothing_queued_runs(self) -> bool:
        return (self.cancel_queued and not self.still_queued and not self.unacknowledged
                and not self.unaccounted)


@dataclass(frozen=True)
class InitInfo:
    """A ``system``/``init`` message: the start of a turn."""

    session_id: str | None
    capabilities: tuple[str, ...]
    model: str | None
    cwd: str | None
    permission_mode: str | None
    version: str | None
    uuid: str | None
    record: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class ResultInfo:
    """A ``result`` message: the end of a turn."""

    subtype: str | None
    is_error: bool | None
    stop_reason: str | None
    num_turns: int | None
    terminal_reason: str | None
    session_id: str | None
    record: Mapping[str, Any] = field(repr=False)


# ---------------------------------------------------------------------------------------------------------
# Events. ``index`` is the record's position among every record read from the engine.
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    """The whole line of ``out`` was accepted by the pipe (not consumption)."""

    out: Outgoing


@dataclass(frozen=True)
class Acknowledged:
    """``out`` was acknowledged (``out.ack``): a control_response, a lifecycle frame, a tool_result."""

    out: Outgoing


@dataclass(frozen=True)
class OutcomeUnknown:
    """``out``'s outcome is unknown (``out.unknown_reason``); the link is poisoned."""

    out: Outgoing


@dataclass(frozen=True)
class ProtocolViolation:
    """A record that breaks the protocol (``reason``): an undecodable line (the decoder's reason), a response
    or cancel for an id this link never wrote or never read, a second response, a repeated request id.
    ``record`` is the decoded record when there is one. It poisons the link."""

    index: int
    reason: str
    detail: str
    record: Mapping[str, Any] | None


@dataclass(frozen=True)
class TruncatedOutput:
    """The engine's output ended inside a line (``size`` bytes after the last LF)."""

    size: int


@dataclass(frozen=True)
class Poisoned:
    """The link became poisoned now, for ``reason`` (emitted once)."""

    reason: str


@dataclass(frozen=True)
class TurnStarted:
    index: int
    init: InitInfo


@dataclass(frozen=True)
class TurnFinished:
    index: int
    result: ResultInfo


@dataclass(frozen=True)
class SessionMismatch:
    """An init named another session than the one the link was told to expect (K8: the load check)."""

    index: int
    expected: str
    found: str | None


@dataclass(frozen=True)
class TurnMessage:
    """An ``assistant`` or ``user`` message of the conversation (``role``), with its tool uses and results."""

    index: int
    role: str
    uuid: str | None
    parent_tool_use_id: str | None
    tool_uses: tuple[Mapping[str, Any], ...]
    tool_results: tuple[Mapping[str, Any], ...]
    record: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class StreamEvent:
    """A ``stream_event`` (only with ``--include-partial-messages``): ``event_type`` is the API event's type."""

    index: int
    event_type: str | None
    record: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class StatusChanged:
    """A ``system``/``status`` message (``status``, ``permissionMode``)."""

    index: int
    record: Mapping[str, Any]


@dataclass(frozen=True)
class SystemEvent:
    """Any other ``system`` message (``background_tasks_changed``, ``task_started``, ...)."""

    index: int
    subtype: str | None
    record: Mapping[str, Any] = field(repr=False)


@dataclass(frozen=True)
class Lifecycle:
    """A ``command_lifecycle`` frame. ``message`` is this link's user message with that uuid, ``None`` for a
    uuid it never sent (an overlap signal). ``folded`` is True for a ``started`` read while a turn is
    running: the message was folded into that turn, with no init of its own."""

    index: int
    command_uuid: str
    state: str
    message: Outgoing | None
    folded: bool


@dataclass(frozen=True)
class PermissionAsked:
    index: int
    request: PermissionRequest


@dataclass(frozen=True)
class PermissionCancelled:
    """The engine cancelled ``request`` (``control_cancel_request``); ``after_answer`` when this link had
    already queued its answer (the engine says it will not use it)."""

    index: int
    request: PermissionRequest
    after_answer: bool


@dataclass(frozen=True)
class PermissionResolved:
    """A tool_result for ``request``'s tool use was read: the request is settled (answered or not)."""

    index: int
    request: PermissionRequest


@dataclass(frozen=True)
class InterruptSettled:
    """An interrupt's receipt was read; ``evidence`` is ``None`` when it was an error response."""

    index: int
    interrupt: Outgoing
    evidence: InterruptEvidence | None


@dataclass(frozen=True)
class RanAfterInterrupt:
    """``message``, written before ``interrupt``, started after that interrupt's receipt: it ran."""

    index: int
    message: Outgoing
    interrupt: Outgoing


@dataclass(frozen=True)
class EngineRequest:
    """A control_request of the engine's that this link does not answer (any subtype but can_use_tool)."""

    index: int
    request_id: str | None
    subtype: str | None
    record: Mapping[str, Any]


@dataclass(frozen=True)
class UnknownRecord:
    """A record whose ``type`` this link does not know (counted in ``unknown_types``, E5)."""

    index: int
    type: str
    record: Mapping[str, Any] = field(repr=False)


LinkEvent = (Written | Acknowledged | OutcomeUnknown | ProtocolViolation | TruncatedOutput | Poisoned | TurnStarted
             | TurnFinished | SessionMismatch | TurnMessage | StreamEvent | StatusChanged | SystemEvent | Lifecycle
             | PermissionAsked | PermissionCancelled | PermissionResolved | InterruptSettled | RanAfterInterrupt
             | EngineRequest | UnknownRecord)
