"""The Claude link, sans-io: the controller's side of a sealed Claude Code's stdin and stdout (stream-json).

No I/O happens here; the shell (:mod:`mosaic.claude_rpc._shell`) or any other owner moves bytes and reports
what happened, and this core decides. Every time input is an explicit ``now=``; every uuid is the
caller's. The rules it keeps (docs/claude-2.1.283.md "stream-json and the control protocol" has the
evidence for each, in the committed recordings):

1. **Framing, strict.** The engine's stdout is LF-framed JSON objects (:mod:`mosaic.claude_rpc._jsonl`). The
   first line the decoder cannot take (too long, not UTF-8, not JSON, too deep, a number out of range, a
   duplicate key, not an object with a ``type``) is a :class:`ProtocolViolation` naming that reason, and the
   link is poisoned and stops reading at once: no exception escapes, nothing waits for more bytes.

2. **Write outcomes and poison**, as pi-rpc's link: every line the link writes (:class:`Outgoing`) ends
   ``written`` (the pipe took every byte), ``acknowledged`` or ``unknown`` with a reason, each change a row of
   :data:`OUTCOME_TABLE`. The first ``unknown`` poisons: nothing is written again (a partial line would
   join the next one). What acknowledges a line:

   ==================  =========================================================================================
   line                acknowledgement
   ==================  =========================================================================================
   user message        the first ``command_lifecycle`` frame for its uuid (``queued``; ``refused``/``discarded``
                       when the engine declined it): the engine read it (``msg_lifecycle_v1``). The link stamps
                       every user message with the caller's uuid; uuid-less messages get no frame
   control request     the ``control_response`` with its ``request_id`` (``r<n>``), success or error
   permission answer   the ``tool_result`` for the request's tool use (the engine acted on the request)
   ==================  =========================================================================================

   Control responses are correlated by ``request_id`` alone. One for an id never written, or a second one,
   poisons (a line was not whole), as does a lifecycle frame or answer evidence for a line never written.

3. **Permission requests** (P7, H5-H8). Each ``can_use_tool`` becomes a :class:`PermissionRequest` kept by
   its exact id. The link answers it at most once, only while it is ``pending``, and only with ``allow``
   (``updatedInput`` = the request's own input, nothing else: the engine's widening
   ``permission_suggestions`` are never sent) or ``deny`` with a message. A ``control_cancel_request`` marks
   it ``cancelled`` (native H8 evidence); a tool_result for its tool use marks it resolved. Any later answer
   is refused with a :class:`~mosaic.claude_rpc.ClaudeRpcRefusal` naming the state that evidence set:
   ``permission-answered``, ``permission-cancelled``, ``permission-resolved``, or ``permission-unknown``.

4. **Interrupts prove or report what runs after them** (R3-1). At an interrupt the link notes every user
   message it wrote before it and has not seen finish. The receipt (``still_queued``, with
   ``cancel_queued`` also ``cancelled``) is checked against those messages' lifecycle frames
   (:class:`InterruptEvidence`): ``nothing_queued_runs`` holds only when ``cancel_queued`` was asked, nothing
   is still queued and every such message is running, finished or listed cancelled. A message left in doubt
   that later starts is reported (:class:`RanAfterInterrupt`).

5. **Turn evidence** comes out as events in read order: :class:`TurnStarted` at each ``system``/``init``
   (session id, capabilities, model, cwd; a :class:`SessionMismatch` when it names another session than
   the expected one), :class:`TurnMessage`, :class:`StreamEvent`, :class:`TurnFinished`,
   :class:`StatusChanged`, :class:`Lifecycle` (``folded`` when a queued message starts inside a running turn),
   :class:`SystemEvent`; an unknown ``type`` is counted (``unknown_types``, E5) and reported
   (:class:`UnknownRecord`); a control request of the engine's other than ``can_use_tool`` is reported
   (:class:`EngineRequest`) and never answered.

6. **Only what is in flight is kept**: lines awaiting an outcome, user messages until their terminal
   lifecycle frame, open permission requests, and a bounded history of settled requests (so a late answer
   still gets the state it deserves). Deadlines are a heap with lazy deletion.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

from mosaic.claude_rpc._jsonl import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE_BYTES,
    LineDecoder,
    Undecodable,
    encode_line,
)
from mosaic.claude_rpc._link_model import (
    IN_FLIGHT,
    OUTCOME_TABLE,
    TERMINAL_LIFECYCLE,
    Acknowledged,
    EngineRequest,
    InitInfo,
    InterruptEvidence,
    InterruptSettled,
    Lifecycle,
    LinkEvent,
    LinkPoisoned,
    LinkUsageError,
    Outcome,
    OutcomeInput,
    OutcomeUnknown,
    Outgoing,
    OutKind,
    PermissionAsked,
    PermissionCancelled,
    PermissionRequest,
    PermissionResolved,
    PermissionState,
    Poisoned,
    ProtocolViolation,
    RanAfterInterrupt,
    ResultInfo,
    SessionMismatch,
    StatusChanged,
    StreamEvent,
    SystemEvent,
    TruncatedOutput,
    TurnFinished,
    TurnMessage,
    TurnStarted,
    UnknownRecord,
    Written,
)
from mosaic.claude_rpc._refusal import ClaudeRpcRefusal
from mosaic.claude_rpc._seal import is_session_uuid

__all__ = ["DEFAULT_BOUND", "DEFAULT_PERMISSION_HISTORY", "KNOWN_TYPES", "NARROW_MODES", "ClaudeLinkCore"]

# Seconds for an acknowledgement: the engine acknowledges a user message and answers a control request as
# soon as it reads them (the recordings); only a stuck engine or a lost line passes this.
DEFAULT_BOUND = 30.0
# Settled permission requests remembered, so a late answer is refused with the state the engine's evidence set.
DEFAULT_PERMISSION_HISTORY = 1024
# set_permission_mode: only the modes that do not widen what runs without asking.
NARROW_MODES = ("default", "plan")
KNOWN_TYPES = frozenset({"system", "assistant", "user", "result", "stream_event", "command_lifecycle",
                         "control_request", "control_response", "control_cancel_request"})

_DEFAULT: Any = object()
_SETTLED: Any = object()


def _blocks(message: Any, kind: str) -> tuple[Mapping[str, Any], ...]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        return ()
    return tuple(b for b in content if isinstance(b, Mapping) and b.get("type") == kind)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _refuse_answer(req: PermissionRequest | None, request_id: Any) -> ClaudeRpcRefusal | None:
    """``None`` when ``req`` may be answered now (pending), else the refusal naming the state the engine's
    evidence (or this link's own answer) put it in."""
    if req is None:
        return ClaudeRpcRefusal("permission-unknown", f"no can_use_tool {request_id!r} was read from this engine")
    if req.state is PermissionState.PENDING:
        return None
    if req.state is PermissionState.CANCELLED:
        return ClaudeRpcRefusal("permission-cancelled", f"the engine cancelled {request_id} (control_cancel_request)")
    if req.answer is not None:
        return ClaudeRpcRefusal("permission-answered", f"{request_id} was already answered {req.answer.subtype}")
    return ClaudeRpcRefusal("permission-resolved", f"the engine settled {request_id} without an answer")


def _lookup(open_ids: Mapping[str, Outgoing], issued: int, rid: Any) -> Any:
    """The control request a response names: an :class:`Outgoing` (in flight or kept), ``_SETTLED`` (an id
    issued and acknowledged since: a second response), or ``None`` (an id never issued)."""
    if not isinstance(rid, str):
        return None
    out = open_ids.get(rid)
    if out is not None:
        return out
    digits = rid[1:]
    if rid.startswith("r") and digits.isascii() and digits.isdigit() and digits[0] != "0" and int(digits) <= issued:
        return _SETTLED
    return None


def _evidence(interrupt: Outgoing, before: Sequence[Outgoing], still: list[str],
              cancelled: list[str]) -> InterruptEvidence:
    """Classify the messages written before ``interrupt`` by the receipt and their lifecycle (rule 4); a
    message the receipt cannot rule out is marked ``interrupted_by`` so a later start is reported."""
    listed_still, listed_cancelled = set(still), set(cancelled)
    ours_still, ours_cancelled, running, unacked, unaccounted = [], [], [], [], []
    for msg in before:
        state = msg.lifecycle_state
        if msg.key in listed_cancelled:
            ours_cancelled.append(msg)
        elif msg.key in listed_still:
            ours_still.append(msg)
        elif state is None:
            unacked.append(msg)
        elif state == "queued":
            unaccounted.append(msg)
        elif state == "started":
            running.append(msg)
        else:
            continue  # finished before the receipt
        if msg.key not in listed_cancelled and state != "started":
            msg.interrupted_by = interrupt
    ours = {m.key for m in before}
    return InterruptEvidence(
        interrupt=interrupt, cancel_queued=interrupt.record["request"].get("cancel_queued") is True,
        still_queued=tuple(still), cancelled=tuple(cancelled), ours_still_queued=tuple(ours_still),
        ours_cancelled=tuple(ours_cancelled), foreign=tuple(u for u in [*still, *cancelled] if u not in ours),
        running=tuple(running), unacknowledged=tuple(unacked), unaccounted=tuple(unaccounted))


class ClaudeLinkCore:
    """The sans-io Claude link (module docstring). ``expected_session_id``, when given, is the session the
    engine must report in every init (K8); ``permission_history`` bounds the settled requests remembered.

    Who calls what: the owner calls the ``send_*`` methods, :meth:`allow` and :meth:`deny`; whoever moves
    the bytes calls :meth:`next_write`/:meth:`write_done`, :meth:`feed`/:meth:`output_ended` and
    :meth:`tick`. Each call returns its events, in order.
    """

    def __init__(self, *, default_bound: float | None = DEFAULT_BOUND, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 max_depth: int = DEFAULT_MAX_DEPTH, expected_session_id: str | None = None,
                 permission_history: int = DEFAULT_PERMISSION_HISTORY) -> None:
        if permission_history < 1:
            raise ValueError("permission_history must be positive")
        self.default_bound = default_bound
        self.expected_session_id = expected_session_id
        self._history = permission_history
        self._decoder = LineDecoder(max_line_bytes=max_line_bytes, max_depth=max_depth)
        self._seq = 0
        self._controls = 0  # control request ids are r<n>, n counting control requests only
        self._in_flight: dict[int, Outgoing] = {}
        self._kept: dict[int, Outgoing] = {}  # unknown / not-written: only from the poison on
        self._control_ids: dict[str, Outgoing] = {}
        self._users: dict[str, Outgoing] = {}
        self._before_interrupt: dict[int, tuple[Outgoing, ...]] = {}
        self._open: dict[str, PermissionRequest] = {}
        self._settled: OrderedDict[str, PermissionRequest] = OrderedDict()
        self._by_tool_use: dict[str, PermissionRequest] = {}
        self._engine_requests: OrderedDict[str, None] = OrderedDict()
        self._deadlines: list[tuple[float, int]] = []
        self._outbox: deque[Outgoing] = deque()
        self._writing: Outgoing | None = None
        self._read_count = 0
        self._poison: str | None = None
        self._output_closed = False
        self._turn_active = False
        self._session_id: str | None = None
        self._unknown: Counter[str] = Counter()

    # -- state ------------------------------------------------------------------------------------------

    @property
    def poisoned(self) -> str | None:
        return self._poison

    @property
    def output_closed(self) -> bool:
        return self._output_closed

    @property
    def records_read(self) -> int:
        return self._read_count

    @property
    def in_flight(self) -> tuple[Outgoing, ...]:
        return tuple(self._in_flight.values())

    @property
    def turn_active(self) -> bool:
        """True from a ``system``/``init`` to its ``result``."""
        return self._turn_active

    @property
    def session_id(self) -> str | None:
        """The session id of the last init read."""
        return self._session_id

    @property
    def unknown_types(self) -> Mapping[str, int]:
        """Records of unknown ``type`` (and engine control requests of unhandled subtypes), counted (E5)."""
        return dict(self._unknown)

    @property
    def pending_permissions(self) -> tuple[PermissionRequest, ...]:
        """The requests still waiting for this link's answer, in the order asked."""
        return tuple(r for r in self._open.values() if r.state is PermissionState.PENDING)

    def permission(self, request_id: str) -> PermissionRequest | None:
        """The request with exactly this id, open or remembered; ``None`` otherwise."""
        return self._open.get(request_id) or self._settled.get(request_id)

    def message(self, uuid: str) -> Outgoing | None:
        """This link's user message with ``uuid``, until its terminal lifecycle frame."""
        return self._users.get(uuid)

    # -- sending ----------------------------------------------------------------------------------------

    def send_user(self, content: str | Sequence[Mapping[str, Any]], *, uuid: str, now: float,
                  bound: float | None = _DEFAULT) -> Outgoing:
        """Queue a user message stamped with ``uuid`` (a lowercase canonical UUID the caller made, not in
        use). ``content`` is a string or a list of content blocks. Raises :class:`LinkPoisoned` when
        poisoned, ``ValueError`` for a bad uuid or content."""
        if not is_session_uuid(uuid):
            raise ValueError(f"a user message needs a lowercase canonical uuid, got {uuid!r}")
        if uuid in self._users:
            raise ValueError(f"uuid {uuid} is already in use by a message of this link")
        if not isinstance(content, str):
            content = [dict(b) for b in content]
            if not content or not all(isinstance(b.get("type"), str) for b in content):
                raise ValueError("content is a string or a non-empty list of blocks with a 'type'")
        record = {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                  "session_id": "default", "uuid": uuid}
        out = self._queue(OutKind.USER, uuid, "user", record, now=now, bound=bound)
        self._users[uuid] = out
        return out

    def send_initialize(self, *, now: float, bound: float | None = _DEFAULT) -> Outgoing:
        return self._control({"subtype": "initialize", "hooks": None}, now=now, bound=bound)

    def send_interrupt(self, *, cancel_queued: bool = True, now: float, bound: float | None = _DEFAULT) -> Outgoing:
        """Queue an interrupt. ``cancel_queued`` (the default) asks the engine to cancel every uuid-stamped
        message still queued: only then can the receipt prove that nothing queued runs (rule 4)."""
        request: dict[str, Any] = {"subtype": "interrupt"}
        if cancel_queued:
            request["cancel_queued"] = True
        before = tuple(self._users.values())
        out = self._control(request, now=now, bound=bound)
        self._before_interrupt[out.seq] = before
        return out

    def send_set_permission_mode(self, mode: str, *, now: float, bound: float | None = _DEFAULT) -> Outgoing:
        """Queue ``set_permission_mode``; only :data:`NARROW_MODES` (``ValueError`` for a mode that would let
        more run without asking)."""
        if mode not in NARROW_MODES:
            raise ValueError(f"set_permission_mode {mode!r} would widen permissions; only {NARROW_MODES}")
        return self._control({"subtype": "set_permission_mode", "mode": mode}, now=now, bound=bound)

    def allow(self, request_id: str, *, now: float) -> Outgoing | ClaudeRpcRefusal:
        """Answer the pending ``request_id`` with allow once: ``updatedInput`` is the request's own input.
        Returns the refusal (rule 3) when the request cannot be answered; raises :class:`LinkPoisoned`."""
        return self._answer(request_id, "allow", None, now)

    def deny(self, request_id: str, message: str, *, now: float) -> Outgoing | ClaudeRpcRefusal:
        """Answer the pending ``request_id`` with deny and ``message`` (non-empty)."""
        if not isinstance(message, str) or not message:
            raise ValueError("a deny needs a non-empty message")
        return self._answer(request_id, "deny", message, now)

    def _answer(self, request_id: str, behavior: str, message: str | None, now: float) -> Outgoing | ClaudeRpcRefusal:
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        req = self.permission(request_id) if isinstance(request_id, str) else None
        refusal = _refuse_answer(req, request_id)
        if refusal is not None:
            return refusal
        assert req is not None
        body: dict[str, Any] = ({"behavior": "allow", "updatedInput": req.input} if behavior == "allow"
                                else {"behavior": "deny", "message": message})
        record = {"type": "control_response",
                  "response": {"subtype": "success", "request_id": req.request_id, "response": body}}
        out = self._queue(OutKind.ANSWER, req.request_id, behavior, record, now=now, bound=None)
        req.answer = out
        req.state = PermissionState.ANSWERED
        return out

    def _control(self, request: Mapping[str, Any], *, now: float, bound: float | None) -> Outgoing:
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        self._controls += 1
        rid = f"r{self._controls}"
        record = {"type": "control_request", "request_id": rid, "request": dict(request)}
        out = self._queue(OutKind.CONTROL, rid, str(request["subtype"]), record, now=now, bound=bound)
        self._control_ids[rid] = out
        return out

    def _queue(self, kind: OutKind, key: str, subtype: str, record: Mapping[str, Any], *, now: float,
               bound: float | None) -> Outgoing:
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        data = encode_line(record)
        self._seq += 1
        out = Outgoing(seq=self._seq, kind=kind, key=key, subtype=subtype, record=record, data=data, queued_at=now,
                       bound=self.default_bound if bound is _DEFAULT else bound, read_count_at_send=self._read_count)
        self._in_flight[out.seq] = out
        self._outbox.append(out)
        deadline = out.deadline
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, out.seq))
            if len(self._deadlines) > 2 * len(self._in_flight) + 64:
                self._deadlines = [e for e in self._deadlines if e[1] in self._in_flight]
                heapq.heapify(self._deadlines)
        return out

    # -- the write side ---------------------------------------------------------------------------------

    def next_write(self) -> Outgoing | None:
        """The next line whose bytes (``out.data``) the shell must write, or ``None`` (one at a time, in
        send order; none while a write is in progress or once poisoned)."""
        if self._poison is not None or self._writing is not None or not self._outbox:
            return None
        out = self._outbox.popleft()
        self._apply(out, OutcomeInput.WRITE_STARTED)
        self._writing = out
        return out

    def write_done(self, out: Outgoing, *, accepted: int, error: BaseException | None, now: float) -> list[LinkEvent]:
        """The end of ``out``'s write: ``accepted`` bytes taken, ``error`` if one stopped it. Raises
        :class:`LinkUsageError` when ``out`` is not the write in progress."""
        if out is not self._writing:
            raise LinkUsageError(f"write_done for {out.key}, which is not the write in progress")
        self._writing = None
        out.accepted = accepted
        if error is not None:
            what = OutcomeInput.WRITE_ERROR
        elif accepted == len(out.data):
            what = OutcomeInput.WRITE_WHOLE
        else:
            what = OutcomeInput.WRITE_PARTIAL
        if out.outcome is Outcome.WRITING and what is OutcomeInput.WRITE_WHOLE:
            out.written_at = now
        reason = "write-error" if error is not None else "partial-write"
        return self._step(out, what, poison=f"{reason} on {out.kind.value} {out.key}")

    # -- the read side ----------------------------------------------------------------------------------

    def feed(self, data: bytes, *, now: float) -> list[LinkEvent]:
        """Bytes read from the engine's stdout; what they mean, in order. Raises :class:`LinkUsageError`
        once :attr:`output_closed`."""
        if self._output_closed:
            raise LinkUsageError("feed() after the engine's output ended or became unreadable")
        events: list[LinkEvent] = []
        for item in self._decoder.feed(data):
            index = self._read_count
            self._read_count += 1
            if isinstance(item, Undecodable):
                events.append(ProtocolViolation(index, item.reason, item.detail, None))
                events += self._output_broken(f"{item.reason}: {item.detail}")
                break
            events += self._record(index, item)
            if self._output_closed:
                break
        return events

    def output_ended(self, *, now: float) -> list[LinkEvent]:
        """The engine's stdout reached EOF. Idempotent."""
        if self._output_closed:
            return []
        events: list[LinkEvent] = []
        tail = self._decoder.close()
        if tail is not None:
            events.append(TruncatedOutput(tail.size))
        self._output_closed = True
        for out in list(self._in_flight.values()):
            events += self._step(out, OutcomeInput.OUTPUT_ENDED, poison="the engine's output ended")
        for req in self._open.values():
            if req.state in (PermissionState.PENDING, PermissionState.ANSWERED):
                req.state = PermissionState.ENDED
        events += self._poison_now("the engine's output ended")
        return events

    def _record(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        kind = record["type"]
        if kind == "control_response":
            return self._control_response(index, record)
        if kind == "command_lifecycle":
            return self._lifecycle(index, record)
        if kind == "control_request":
            return self._engine_request(index, record)
        if kind == "control_cancel_request":
            return self._cancel(index, record)
        if kind == "system":
            return self._system(index, record)
        if kind == "result":
            self._turn_active = False
            return [TurnFinished(index, ResultInfo(
                _str(record.get("subtype")), record.get("is_error") if isinstance(record.get("is_error"), bool) else None,
                _str(record.get("stop_reason")), record.get("num_turns") if isinstance(record.get("num_turns"), int)
                else None, _str(record.get("terminal_reason")), _str(record.get("session_id")), record))]
        if kind in ("assistant", "user"):
            return self._message(index, kind, record)
        if kind == "stream_event":
            event = record.get("event")
            return [StreamEvent(index, _str(event.get("type")) if isinstance(event, Mapping) else None, record)]
        self._unknown[kind] += 1
        return [UnknownRecord(index, kind, record)]

    def _system(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        subtype = record.get("subtype")
        if subtype == "status":
            return [StatusChanged(index, record)]
        if subtype != "init":
            return [SystemEvent(index, _str(subtype), record)]
        caps = record.get("capabilities")
        init = InitInfo(_str(record.get("session_id")),
                        tuple(c for c in caps if isinstance(c, str)) if isinstance(caps, list) else (),
                        _str(record.get("model")), _str(record.get("cwd")), _str(record.get("permissionMode")),
                        _str(record.get("claude_code_version")), _str(record.get("uuid")), record)
        self._turn_active = True
        self._session_id = init.session_id
        events: list[LinkEvent] = [TurnStarted(index, init)]
        if self.expected_session_id is not None and init.session_id != self.expected_session_id:
            events.append(SessionMismatch(index, self.expected_session_id, init.session_id))
        return events

    def _message(self, index: int, role: str, record: dict[str, Any]) -> list[LinkEvent]:
        message = record.get("message")
        results = _blocks(message, "tool_result")
        events: list[LinkEvent] = [TurnMessage(index, role, _str(record.get("uuid")),
                                               _str(record.get("parent_tool_use_id")), _blocks(message, "tool_use"),
                                               results, record)]
        if role != "user":
            return events
        for block in results:
            req = self._by_tool_use.pop(str(block.get("tool_use_id")), None)
            if req is None:
                continue
            req.resolution = block
            if req.state in (PermissionState.PENDING, PermissionState.ANSWERED):
                req.state = PermissionState.RESOLVED
            events.append(PermissionResolved(index, req))
            self._settle(req)
            answer = req.answer
            # The tool_result is evidence about the request; it acknowledges the answer only once the answer's
            # bytes went out (an answer still queued was not read, whatever settled the request).
            if answer is not None and answer.outcome in (Outcome.WRITING, Outcome.WRITTEN, Outcome.UNKNOWN):
                if answer.outcome is not Outcome.UNKNOWN:
                    answer.ack = record
                    answer.ack_index = index
                events += self._ack(answer, index, record, what=f"evidence for the answer to {req.request_id}")
        return events

    def _ack(self, out: Outgoing, index: int, record: Mapping[str, Any], *, what: str) -> list[LinkEvent]:
        """``record`` acknowledges ``out``: its outcome moves (table), or it is a late acknowledgement of an
        ``unknown`` line, or a violation for a line never written."""
        if out.outcome is Outcome.UNKNOWN:
            out.late.append(record)
            return []
        if out.outcome in (Outcome.QUEUED, Outcome.NOT_WRITTEN):
            detail = f"{what}, a line never written"
            violation = ProtocolViolation(index, "ack-for-unwritten", detail, record)
            return [violation, *self._step(out, OutcomeInput.ACK, poison=f"protocol: {detail}"),
                    *self._poison_now(f"protocol: {detail}")]
        return self._step(out, OutcomeInput.ACK, poison="")

    def _lifecycle(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        uid = str(record.get("command_uuid"))
        state = str(record.get("state"))
        out = self._users.get(uid)
        folded = state == "started" and self._turn_active
        events: list[LinkEvent] = [Lifecycle(index, uid, state, out, folded)]
        if out is None:
            return events
        first = not out.lifecycle
        out.lifecycle.append(state)
        if first:
            out.ack = record
            out.ack_index = index
            events += self._ack(out, index, record, what=f"a lifecycle frame for {uid}")
        if state == "started" and out.interrupted_by is not None:
            events.append(RanAfterInterrupt(index, out, out.interrupted_by))
            out.interrupted_by = None
        if state in TERMINAL_LIFECYCLE:
            del self._users[uid]
        return events

    def _engine_request(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        rid = record.get("request_id")
        request = record.get("request")
        subtype = request.get("subtype") if isinstance(request, Mapping) else None
        if not isinstance(rid, str) or rid in self._open or rid in self._settled or rid in self._engine_requests:
            detail = f"an engine control_request with a missing or repeated id {rid!r}"
            return [ProtocolViolation(index, "repeated-request-id", detail, record),
                    *self._poison_now(f"protocol: {detail}")]
        if subtype != "can_use_tool" or not isinstance(request, Mapping):
            self._unknown[f"control_request:{subtype}"] += 1
            self._engine_requests[rid] = None
            while len(self._engine_requests) > self._history:
                self._engine_requests.popitem(last=False)
            return [EngineRequest(index, rid, _str(subtype), record)]
        tool_input = request.get("input")
        suggestions = request.get("permission_suggestions")
        req = PermissionRequest(
            request_id=rid, tool_name=str(request.get("tool_name")), tool_use_id=_str(request.get("tool_use_id")),
            input=dict(tool_input) if isinstance(tool_input, Mapping) else {},
            suggestions=tuple(s for s in suggestions if isinstance(s, Mapping)) if isinstance(suggestions, list) else (),
            record=record, index=index)
        self._open[rid] = req
        if req.tool_use_id is not None:
            self._by_tool_use[req.tool_use_id] = req
        return [PermissionAsked(index, req)]

    def _cancel(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        rid = record.get("request_id")
        req = self.permission(rid) if isinstance(rid, str) else None
        if req is None:
            if isinstance(rid, str) and rid in self._engine_requests:
                return [SystemEvent(index, "control_cancel_request", record)]
            detail = f"a control_cancel_request for {rid!r}, which the engine never asked"
            return [ProtocolViolation(index, "cancel-for-unknown-request", detail, record),
                    *self._poison_now(f"protocol: {detail}")]
        if req.state not in (PermissionState.PENDING, PermissionState.ANSWERED):
            return []
        after = req.state is PermissionState.ANSWERED
        req.state = PermissionState.CANCELLED
        req.cancelled_after_answer = after
        self._settle(req)
        return [PermissionCancelled(index, req, after)]

    def _settle(self, req: PermissionRequest) -> None:
        """Move a cancelled or resolved request to the bounded history (its tool_result may still come)."""
        self._open.pop(req.request_id, None)
        self._settled[req.request_id] = req
        self._settled.move_to_end(req.request_id)
        while len(self._settled) > self._history:
            _rid, old = self._settled.popitem(last=False)
            if old.tool_use_id is not None and self._by_tool_use.get(old.tool_use_id) is old:
                del self._by_tool_use[old.tool_use_id]

    def _control_response(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        body = record.get("response")
        rid = body.get("request_id") if isinstance(body, Mapping) else None
        found = _lookup(self._control_ids, self._controls, rid)
        if found is _SETTLED:
            detail = f"a second control_response for {rid}"
            return [ProtocolViolation(index, "second-response", detail, record), *self._poison_now(f"protocol: {detail}")]
        out: Outgoing | None = found
        if out is None:
            detail = f"a control_response for {rid!r}, which the link never wrote"
            return [ProtocolViolation(index, "response-for-unwritten", detail, record),
                    *self._poison_now(f"protocol: {detail}")]
        if out.outcome is Outcome.UNKNOWN:
            out.late.append(record)
            return []
        out.ack = record
        out.ack_index = index
        events = self._ack(out, index, record, what=f"a control_response for {rid}")
        if out.outcome is Outcome.ACKNOWLEDGED:
            self._control_ids.pop(str(rid), None)
            if out.subtype == "interrupt":
                events += self._interrupt_receipt(index, out, body)
        return events

    def _interrupt_receipt(self, index: int, interrupt: Outgoing, body: Any) -> list[LinkEvent]:
        before = self._before_interrupt.pop(interrupt.seq, ())
        if not interrupt.succeeded:
            return [InterruptSettled(index, interrupt, None)]
        receipt = body.get("response") if isinstance(body, Mapping) else None
        still = receipt.get("still_queued") if isinstance(receipt, Mapping) else None
        cancelled = receipt.get("cancelled", []) if isinstance(receipt, Mapping) else None
        if not (isinstance(still, list) and isinstance(cancelled, list)
                and all(isinstance(u, str) for u in [*still, *cancelled])):
            detail = f"an interrupt receipt without still_queued/cancelled lists: {receipt!r}"[:300]
            return [ProtocolViolation(index, "bad-interrupt-receipt", detail, None),
                    *self._poison_now(f"protocol: {detail}")]
        evidence = _evidence(interrupt, before, still, cancelled)
        interrupt.evidence = evidence
        return [InterruptSettled(index, interrupt, evidence)]

    # -- the clock --------------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        heap = self._deadlines
        while heap and heap[0][1] not in self._in_flight:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tick(self, *, now: float) -> list[LinkEvent]:
        """Every line past its bound without an acknowledgement becomes ``unknown`` (or ``not-written``)."""
        heap = self._deadlines
        due: list[int] = []
        while heap and heap[0][0] <= now:
            seq = heapq.heappop(heap)[1]
            if seq in self._in_flight:
                due.append(seq)
        events: list[LinkEvent] = []
        for seq in sorted(due):
            out = self._in_flight.get(seq)
            if out is None:
                continue
            if out.outcome is Outcome.QUEUED:
                head = self._writing
                if head is not None and head.outcome is Outcome.WRITING:
                    events += self._step(head, OutcomeInput.BOUND_PASSED, poison=f"{head.key} not accepted in time")
                events += self._step(out, OutcomeInput.BOUND_PASSED, poison=f"{out.key} not written within {out.bound} s")
            elif out.outcome is Outcome.WRITING:
                events += self._step(out, OutcomeInput.BOUND_PASSED, poison=f"{out.key} not accepted in time")
            else:
                events += self._step(out, OutcomeInput.BOUND_PASSED,
                                     poison=f"no acknowledgement of {out.kind.value} {out.key} within {out.bound} s")
        return events

    # -- internals --------------------------------------------------------------------------------------

    def _apply(self, out: Outgoing, what: OutcomeInput) -> Outcome | None:
        row = OUTCOME_TABLE.get((out.outcome, what))
        if row is None:
            return None
        new, reason = row
        out.outcome = new
        if reason is not None:
            out.unknown_reason = reason
        if new not in IN_FLIGHT:
            self._in_flight.pop(out.seq, None)
            if new is not Outcome.ACKNOWLEDGED:
                self._kept[out.seq] = out
        return new

    def _step(self, out: Outgoing, what: OutcomeInput, *, poison: str) -> list[LinkEvent]:
        new = self._apply(out, what)
        if new is Outcome.WRITTEN:
            return [Written(out)]
        if new is Outcome.ACKNOWLEDGED:
            return [Acknowledged(out)]
        if new is Outcome.UNKNOWN:
            return [OutcomeUnknown(out), *self._poison_now(poison)]
        if new is Outcome.NOT_WRITTEN:
            return self._poison_now(poison)
        return []

    def _poison_now(self, reason: str) -> list[LinkEvent]:
        if self._poison is not None:
            return []
        self._poison = reason
        while self._outbox:
            self._apply(self._outbox.popleft(), OutcomeInput.POISON_DROPS_OUTBOX)
        return [Poisoned(reason)]

    def _output_broken(self, why: str) -> list[LinkEvent]:
        self._output_closed = True
        reason = f"engine output unreadable: {why}"
        events: list[LinkEvent] = []
        for out in list(self._in_flight.values()):
            events += self._step(out, OutcomeInput.OUTPUT_UNREADABLE, poison=reason)
        events += self._poison_now(reason)
        return events
