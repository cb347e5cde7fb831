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
5. A native dialog goes to the dialogs room (`_dialogs`: P3 by default; answered when the deployment opts
   in), and so do the tool ends and the run's settle that settle one.
6. Any engine event during a drift check makes it void (`core/_drift` rule 2).
"""

from __future__ import annotations

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

from . import _answers, _chain, _dialogs, _drift, _slot
from ._io import EngineEvents, Notify
from ._slot import Settle
from ._state import CoreState
from ._values import Run

# The CHAT-01 events that belong to a message: the core numbers messages (`m1`, `m2`, ...) at each
# message-start, whatever the engine calls them.
_MESSAGE_EVENTS = frozenset({"message-start", "text-delta", "thinking-delta", "message-end"})


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
    reading = s.config.engine.read(event.record)
    kind = reading.kind
    if reading.unknown is not None:
        # C-4 interim: counted in evidence with its type and byte count (as the engine wrote it); no client event.
        name, size = reading.unknown
        s.unknown_native[name] = s.unknown_native.get(name, 0) + 1
        s.evidence("unknown-native-event", type=event.type, bytes=size)
        s.broadcast_binding()
        return
    if reading.run_event and not s.run.active:
        _answers.overlap(s, "O6", f"{kind} with no run active")
    if reading.run_start:
        _agent_start(s)
    if reading.turn_end:
        s.run.in_turn = False
    if reading.user_message_start:
        _message_start(s)
    if reading.aborted_message:
        _message_end(s)
    if reading.queued_input:
        _queue_update(s)
    if reading.tool_start is not None:
        tool_id, tool_name = reading.tool_start
        s.run.open_tools[tool_id] = tool_name
    if reading.tool_end is not None:
        s.run.open_tools.pop(reading.tool_end, None)
        if s.decisions:
            _dialogs.tool_ended(s, reading.tool_end)
    if reading.dialog_withdrawn is not None and s.decisions:
        _dialogs.withdrawn(s, reading.dialog_withdrawn)
    if reading.dialog is not None:
        _dialogs.asked(s, reading.dialog)
    elif reading.event is not None:
        _client_event(s, *reading.event)
        for more in reading.events:
            _client_event(s, *more)
    if reading.run_settled:
        _agent_settled(s)


def reset_run(s: CoreState) -> None:
    """The engine's run is over whatever the stream showed (a force stop's end): no run, its messages still
    numbered on (`message_seq`)."""
    s.run = Run(message_seq=s.run.message_seq)
    if s.decisions:
        _dialogs.run_over(s)


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


def _message_start(s: CoreState) -> None:
    slot = s.slot
    if s.run.ours and slot is not None and not slot.user_started:
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
    if s.decisions:
        _dialogs.run_over(s)  # `_dialogs` rule 6: no dialog of a settled run is pending
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


def _message_end(s: CoreState) -> None:
    """An aborted assistant message (the chain's abort, or O4)."""
    stop = s.stop
    if stop is not None and stop.state == "stopping" and _chain.abort_written(s, stop):
        return  # the abort of this stop's chain (or of the interrupt it superseded)
    # O4: an aborted run with no abort of ours outstanding is never a stop link (lead decision 34, N9).
    _answers.overlap(s, "O4", "an aborted assistant message with no abort of the controller's outstanding")


def _queue_update(s: CoreState) -> None:
    """External input was queued (O5 in an interrupt's pause)."""
    stop = _chain.running(s)
    if stop is not None and stop.step == "abort-due":
        _answers.overlap(s, "O5", "external input was queued between the interrupt's clear and its abort")


def _client_event(s: CoreState, event_type: str, fields: Mapping[str, Any]) -> None:
    payload = _payload(s, event_type, fields)
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


def _payload(s: CoreState, event_type: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The event's payload as the engine's reading gave it; a message's events carry the message's number."""
    if event_type not in _MESSAGE_EVENTS:
        return dict(fields)
    if event_type == "message-start":
        s.run.message_seq += 1
        s.run.current_message = f"m{s.run.message_seq}"
    return {"message": s.run.current_message, **fields}
