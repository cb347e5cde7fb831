"""The core's events room: the engine's output, event by event, into runs, receipts and CHAT-01 events.

The rules it keeps (the core's rules 6 and 7a; brief §3, §9; seed README "Overlap", "Run order"):

1. Native events map through `engines/pi/_tables.EVENT_MAP` to CHAT-01 events carrying the execution and a
   per-execution sequence, sent to the subscribers at or before that sequence; agent_settled is
   run-settled, never termination; an unknown native event is counted in evidence with its type and byte
   count (C-4 interim) and shown as no event; events of another execution are dropped and counted (H14).
   Replay is unavailable: observe returns the seam and the client reconciles at it (E4, `_clients`).
2. Attribution by order (brief §3 "Seal and attribution"): the slot's run is the one whose agent_start
   follows the slot's ack with no overlap signal between (Pi writes the ack before the run's events,
   FACTS a5); a run that starts before the ack is another's, and its events carry no request (E3).
   `working` is inferred from the run's first user message_start.
3. The run settles at agent_settled outside a turn (the slot's receipt finished, completed or
   interrupted; reconciliation releases the slot, never agent_start: mutant 15). N11 on the wire Pi
   writes: an ack, then agent_settled with no agent_start (the run threw before it began:
   agent-session.js 780-785) is failed, reason ack-without-start; so is a run with no user message.
4. The overlap signals read from events (`_answers.overlap` decides what they do): O1 an agent_start
   inside a run's turn; O3 an agent_settled inside a turn (the losing prompt's finally, FACTS Part 2 F);
   O4 an aborted assistant message with no abort of the controller's outstanding (N9); O5 input queued
   between the interrupt's clear and its abort (H10); O6 a run event with no run active.
5. A native dialog (P3) is shown disabled with a reason, never answered; once one was seen every stop's
   approval disposition is uncertain (seed "Approval").
6. Any engine event during a drift check makes it void (`core/_drift` rule 2).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mosaic.pi_rpc.link import (
    CommandWritten,
    EngineEvent,
    LateResponse,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    ProtocolViolation,
    TruncatedOutput,
)

from ..engines.pi._tables import DIALOG, INTERNAL, classify_native
from . import _answers, _chain, _drift, _slot
from ._io import EngineEvents, Notify
from ._slot import Settle
from ._state import CoreState
from ._values import Run

# The run grammar's events (FACTS "What a Python fake engine must mimic" 6): read while no run is active
# they are O6. agent_settled is judged in `_agent_settled` (an ack without a start explains it: N11).
_RUN_EVENTS = frozenset({"turn_start", "turn_end", "message_start", "message_update", "message_end",
                         "tool_execution_start", "tool_execution_update", "tool_execution_end", "agent_end",
                         "agent_settled"})


def engine_events(s: CoreState, batch: EngineEvents) -> None:
    """What the engine link produced, in read order: events here, answers and poison in `_answers`."""
    if batch.execution != s.execution:
        # H14: late stdout of an old engine: dropped by execution incarnation, counted, never rendered.
        s.late_events += len(batch.events)
        s.evidence("late-events", execution=batch.execution, count=len(batch.events))
        return
    for event in batch.events:
        if isinstance(event, EngineEvent):
            _native(s, event)
        elif isinstance(event, OutcomeKnown):
            _answers.known(s, event.command)
        elif isinstance(event, CommandWritten):
            _answers.written(s, event.command)
        elif isinstance(event, OutcomeUnknown):
            _answers.unknown_outcome(s, event.command)
        elif isinstance(event, Poisoned):
            _answers.poisoned(s, event.reason)
        elif isinstance(event, LateResponse):
            s.evidence("late-response", command=event.command.id, type=event.command.type)
        elif isinstance(event, ProtocolViolation):
            s.evidence("protocol-violation", detail=event.detail)
        elif isinstance(event, TruncatedOutput):
            s.evidence("truncated-output", bytes=len(event.tail.encode("utf-8", "surrogatepass")))


def _native(s: CoreState, event: EngineEvent) -> None:
    _drift.engine_busy(s)  # rule 6: the engine is not idle; a check in flight can prove nothing
    record = event.record
    mapped = classify_native(record)
    kind = event.type
    if mapped is None:
        # C-4 interim: counted in evidence with its type and byte count; no client event.
        # Its size as Pi wrote it: JSON.stringify is compact, non-ASCII raw (FACTS (b) "Framing").
        size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
        s.unknown_native[kind or "?"] = s.unknown_native.get(kind or "?", 0) + 1
        s.evidence("unknown-native-event", type=kind, bytes=size)
        s.broadcast_binding()
        return
    if kind in _RUN_EVENTS and not s.run.active and kind != "agent_settled":
        _answers.overlap(s, "O6", f"{kind} with no run active")
    if kind == "agent_start":
        _agent_start(s)
    elif kind == "agent_end":
        s.run.in_turn = False
    elif kind == "message_start":
        _message_start(s, record)
    elif kind == "message_end":
        _message_end(s, record)
    elif kind == "queue_update":
        _queue_update(s, record)
    elif kind == "tool_execution_start":
        s.run.open_tools[str(record.get("toolCallId"))] = str(record.get("toolName"))
    elif kind == "tool_execution_end":
        s.run.open_tools.pop(str(record.get("toolCallId")), None)
    if mapped == DIALOG:
        _dialog(s, record)
    elif mapped != INTERNAL:
        _client_event(s, mapped, record)
    if kind == "agent_settled":
        _agent_settled(s)


def reset_run(s: CoreState) -> None:
    """The engine's run is over whatever the stream showed (a force stop's end): no run, its messages still
    numbered on (`message_seq`)."""
    s.run = Run(message_seq=s.run.message_seq)


def _agent_start(s: CoreState) -> None:
    if s.run.active:
        if s.run.in_turn:
            _answers.overlap(s, "O1", "an agent_start inside a run's turn")
        # Otherwise a continuation inside the same run (retry, queued follow-up: FACTS conformance 7).
        s.run.in_turn = True
        return
    # The slot's run is the one that starts after its ack: Pi writes the ack before the run's events
    # (the ack is queued on the output chain first, FACTS a5), so a run starting while the prompt is
    # in preflight is another's.
    slot = s.slot
    ours = slot is not None and slot.prompt.succeeded and not slot.run_started
    s.run = Run(active=True, ours=ours, in_turn=True, message_seq=s.run.message_seq)
    if ours and slot is not None:
        _slot.run_started(s)
    s.broadcast_binding()


def _message_start(s: CoreState, record: Mapping[str, Any]) -> None:
    message = record.get("message")
    role = message.get("role") if isinstance(message, Mapping) else None
    slot = s.slot
    if role == "user" and s.run.ours and slot is not None and not slot.user_started:
        _slot.user_started(s)


def _agent_settled(s: CoreState) -> None:
    run = s.run
    slot = s.slot
    if run.active and run.in_turn:
        # O3: a settle inside a turn is not this run's: the losing prompt's finally (FACTS Part 2 F).
        _answers.overlap(s, "O3", "an agent_settled inside a run's turn")
        return
    _drift.due(s)  # `core/_drift` rule 1: check when next idle (brief §2 "after agent_settled")
    if not run.active:
        if slot is not None and slot.prompt.succeeded and not slot.run_started:
            # N11 as Pi writes it: the ack, then agent_settled and no agent_start: the run threw before
            # it began (its finally settles, agent-session.js 780-785); no user message can be on disk.
            _slot.reconcile(s, Settle("ack-without-start", "failed", reason="ack-without-start"))
        else:
            _answers.overlap(s, "O6", "an agent_settled with no run active")
        return
    s.run = Run(message_seq=run.message_seq)
    if run.ours and slot is not None:
        request = slot.request
        settle = Settle("run-settled", None)
        if slot.user_started:
            if request.receipt == "working":
                settle = Settle("run-settled", "finished", turn_state="interrupted" if run.aborted else "completed")
        elif request.receipt == "acknowledged":
            # A run that started and settled with no user message_start: it threw before the message.
            settle = Settle("ack-without-start", "failed", reason="ack-without-start")
        _slot.reconcile(s, settle)  # reconciliation, never agent_start (mutant 15)
    else:
        s.broadcast_binding()


def _message_end(s: CoreState, record: Mapping[str, Any]) -> None:
    message = record.get("message")
    if not isinstance(message, Mapping) or message.get("role") != "assistant":
        return
    if message.get("stopReason") != "aborted":
        return
    stop = s.stop
    if stop is not None and stop.state == "stopping" and _chain.abort_written(s, stop):
        return  # the abort of this stop's chain (or of the interrupt it superseded)
    # O4: an aborted run with no abort of ours outstanding is never a stop link (lead decision 34, N9).
    _answers.overlap(s, "O4", "an aborted assistant message with no abort of the controller's outstanding")


def _queue_update(s: CoreState, record: Mapping[str, Any]) -> None:
    queued = [q for q in (record.get("steering"), record.get("followUp")) if isinstance(q, list) and q]
    if not queued:
        return
    stop = _chain.running(s)
    if stop is not None and stop.step == "abort-due":
        _answers.overlap(s, "O5", "external input was queued between the interrupt's clear and its abort")


def _client_event(s: CoreState, event_type: str, record: Mapping[str, Any]) -> None:
    payload = _payload(s, event_type, record)
    s.sequence += 1
    subs = s.subscribers()  # each subscribed at or before this sequence (fromSequence <= it)
    # The request whose run this is, inferred from order as `working` is (brief §3); null for a run no
    # Mosaic request started (an extension's, or one after an overlap signal: E3's null correlation).
    slot = s.slot
    request = slot.request.request_id if (s.run.ours and slot is not None and "overlap" not in s.fences) \
        else None
    event = {"type": "event", "event": f"{s.execution}.{s.sequence}", "execution": s.execution,
             "sequence": s.sequence, "eventType": event_type, "visibility": "visible",
             "at": s.now, "request": request, "payload": payload}
    if subs:
        s.emit(Notify(subs, "event", event))


def _payload(s: CoreState, event_type: str, record: Mapping[str, Any]) -> dict[str, Any]:
    if event_type == "message-start":
        s.run.message_seq += 1
        s.run.current_message = f"m{s.run.message_seq}"
        message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
        assert isinstance(message, Mapping)
        return {"message": s.run.current_message, "role": message.get("role"),
                "content": message.get("content", [])}
    if event_type in ("text-delta", "thinking-delta"):
        sub = record.get("assistantMessageEvent")
        assert isinstance(sub, Mapping)
        return {"message": s.run.current_message, "contentIndex": sub.get("contentIndex"),
                "delta": sub.get("delta", "")}
    if event_type == "message-end":
        message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
        assert isinstance(message, Mapping)
        payload: dict[str, Any] = {"message": s.run.current_message, "role": message.get("role"),
                                   "content": message.get("content", []), "updateMode": "replace"}
        for key in ("stopReason", "errorMessage", "toolCallId", "toolName", "isError"):
            if key in message:
                payload[key] = message[key]
        return payload
    if event_type in ("tool-start", "tool-update", "tool-end"):
        keys = {"tool-start": ("toolCallId", "toolName", "args"),
                "tool-update": ("toolCallId", "toolName", "partialResult"),
                "tool-end": ("toolCallId", "toolName", "result", "isError")}[event_type]
        return {k: record.get(k) for k in keys if k in record}
    return {}


def _dialog(s: CoreState, record: Mapping[str, Any]) -> None:
    # P3 (and I2 not built): a native dialog is shown disabled with a reason, never answered.
    s.dialogs += 1
    _chain.approval_uncertain(s)  # seed "Approval": once a dialog was seen, every stop says so
    decision: dict[str, Any] = {"type": "nativeDecision", "nativeDecision": str(record.get("id", s.new_id("d"))),
                                "method": record.get("method"), "title": record.get("title"),
                                "options": record.get("options"), "state": "disabled",
                                # Plain words for the person; the rule is P3 (CHAT-03D not adopted).
                                "reason": "Pi asks a question here; this controller shows it but never "
                                          "answers it, so Pi decides on its own (its default or timeout)"}
    for key in ("message", "placeholder", "prefill", "timeout"):  # rpc-mode.js 47-192: the rest of the ask
        if key in record:
            decision[key] = record[key]
    s.record(decision)
