"""The Claude link's sans-io core, fed the committed recordings of the pinned binary (README "The link").

Each test replays a recording through :class:`mosaic.claude_rpc.testing.replay.Replay`: the binary's lines in
the recorded order, the client's lines made by the core's own API and checked byte for byte against the
recording. The two orders of each race are two recordings, never an invented sequence:

* interrupt vs a user message: the message written before the interrupt (``sealed-interrupt-still-queued``,
  ``sealed-interrupt-cancel-queued``) and after it (``sealed-interrupt-then-message``);
* interrupt vs a pending permission: the interrupt first, then a late answer
  (``sealed-interrupt-pending-permission``), and the answer first (``sealed-allow-then-interrupt``).

Where a test needs a line no recording can hold (a type the binary never wrote, an order the binary never
showed) it says so in its name or docstring.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import REPO

from mosaic.claude_rpc import ClaudeRpcRefusal
from mosaic.claude_rpc.link import (
    OUTCOME_TABLE,
    Acknowledged,
    ClaudeLinkCore,
    EngineRequest,
    InterruptSettled,
    Lifecycle,
    LinkPoisoned,
    Outcome,
    OutcomeInput,
    OutcomeUnknown,
    Outgoing,
    OutKind,
    PermissionAsked,
    PermissionCancelled,
    PermissionResolved,
    PermissionState,
    Poisoned,
    ProtocolViolation,
    RanAfterInterrupt,
    SessionMismatch,
    StatusChanged,
    StreamEvent,
    TurnFinished,
    TurnStarted,
    UnknownRecord,
    Written,
)
from mosaic.claude_rpc.testing.recordings import RECORDINGS, SESSION_UUID, U1, U2
from mosaic.claude_rpc.testing.replay import NotReplayable, Replay, line_of, load_recording, split_at

FIXTURES = REPO / "fixtures"
REPLAYABLE = [r.name for r in RECORDINGS if r.sealed and r.name not in ("sealed-interrupt-no-uuid", "sealed-controls")]


def load(name: str) -> list[dict[str, Any]]:
    return load_recording(FIXTURES, name)


def replay(name: str, **core: Any) -> Replay:
    r = Replay(core=ClaudeLinkCore(**core))
    r.feed(load(name))
    return r


def is_answer(msg: dict[str, Any]) -> bool:
    return msg.get("type") == "control_response" and "behavior" in (msg["response"].get("response") or {})


def is_can_use_tool(msg: dict[str, Any]) -> bool:
    return msg.get("type") == "control_request" and msg["request"].get("subtype") == "can_use_tool"


def written(r: Replay) -> int:
    """How many lines the core has written (every queued line is written by the replay)."""
    return sum(1 for e in r.events if isinstance(e, Written))


# -- every sealed recording ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REPLAYABLE)
def test_every_sealed_recording_replays_through_the_core_byte_for_byte_and_acknowledges_every_line(name: str) -> None:
    r = replay(name, expected_session_id=SESSION_UUID)
    assert r.core.poisoned is None and r.core.unknown_types == {}
    sent = [s for s in r.sent if isinstance(s, Outgoing)]
    assert sent and all(s.outcome is Outcome.ACKNOWLEDGED for s in sent), [(s.key, s.outcome) for s in sent]
    assert not r.of(SessionMismatch) and not r.of(ProtocolViolation)
    starts, ends = r.of(TurnStarted), r.of(TurnFinished)
    assert len(starts) == len(ends) >= 1 and not r.core.turn_active
    assert all(s.init.session_id == SESSION_UUID and "interrupt_cancel_queued_v1" in s.init.capabilities
               and "msg_lifecycle_v1" in s.init.capabilities for s in starts)


def test_a_user_message_is_acknowledged_by_its_queued_lifecycle_frame_and_forgotten_at_completed() -> None:
    r = replay("sealed-text")
    message = next(s for s in r.sent if isinstance(s, Outgoing) and s.kind is OutKind.USER)
    assert message.ack == {"type": "command_lifecycle", "command_uuid": U1, "state": "queued",
                           "uuid": message.ack["uuid"], "session_id": SESSION_UUID}
    assert message.lifecycle == ["queued", "started", "completed"]
    kinds = [type(e).__name__ for e in r.events if getattr(e, "out", None) is message]
    assert kinds == ["Written", "Acknowledged"]
    assert r.core.message(U1) is None  # terminal: the core keeps nothing of it
    finished = r.of(TurnFinished)[0].result
    assert (finished.subtype, finished.is_error, finished.stop_reason, finished.num_turns) == \
        ("success", False, "end_turn", 1)


def test_a_control_request_is_acknowledged_by_the_response_with_its_request_id() -> None:
    r = replay("sealed-text")
    init = r.sent[0]
    assert isinstance(init, Outgoing) and init.key == "r1" and init.succeeded and init.error is None
    assert init.ack is not None and init.ack["response"]["request_id"] == "r1"


# -- permissions (P7, H5-H8) ------------------------------------------------------------------------------


def test_P7_allow_once_sends_exactly_the_requests_own_input_and_never_the_widening_suggestions() -> None:
    records = load("sealed-permission-allow")
    before, after = split_at(records, is_answer)
    r = Replay()
    r.feed(before)
    request = r.core.pending_permissions[0]
    assert [s["type"] for s in request.suggestions] == ["addRules", "addDirectories", "setMode"]
    answer = r.core.allow(request.request_id, now=r.now)
    assert isinstance(answer, Outgoing)
    r.write_all()
    assert json.loads(answer.data) == {"type": "control_response", "response": {
        "subtype": "success", "request_id": request.request_id,
        "response": {"behavior": "allow", "updatedInput": dict(request.input)}}}
    assert b"addRules" not in answer.data and b"updatedPermissions" not in answer.data
    assert answer.data == json.dumps(after[0]["msg"], separators=(",", ":")).encode() + b"\n"  # the recorded line
    r.feed(after[1:])
    assert request.state is PermissionState.RESOLVED and request.behavior == "allow"
    assert request.resolution is not None and request.resolution["is_error"] is False
    assert answer.outcome is Outcome.ACKNOWLEDGED and r.of(PermissionResolved)[0].request is request


def test_P7_deny_carries_the_message_and_the_tool_result_shows_it() -> None:
    r = replay("sealed-permission-deny")
    request = r.of(PermissionAsked)[0].request
    assert request.behavior == "deny" and request.state is PermissionState.RESOLVED
    assert request.resolution is not None and request.resolution["content"] == "denied by the test client"
    with pytest.raises(ValueError):
        ClaudeLinkCore().deny("x", "", now=0.0)


def test_H6_H7_a_request_is_answered_once_a_second_answer_same_or_other_is_refused_and_nothing_is_written() -> None:
    records = load("sealed-permission-allow")
    before, after = split_at(records, is_answer)
    r = Replay()
    r.feed(before)
    rid = r.core.pending_permissions[0].request_id
    first = r.core.allow(rid, now=r.now)
    assert isinstance(first, Outgoing)
    again, other = r.core.allow(rid, now=r.now), r.core.deny(rid, "no", now=r.now)
    assert isinstance(again, ClaudeRpcRefusal) and again.code == "permission-answered"
    assert isinstance(other, ClaudeRpcRefusal) and other.code == "permission-answered"
    r.write_all()
    assert written(r) == 3  # initialize, the prompt, one answer
    assert r.core.next_write() is None and r.core.pending_permissions == ()
    r.feed(after[1:])
    late = r.core.deny(rid, "too late", now=r.now)
    assert isinstance(late, ClaudeRpcRefusal) and late.code == "permission-answered" and written(r) == 3


def test_H8_an_answer_after_the_engine_cancelled_the_request_is_refused_with_the_cancelled_state() -> None:
    """Interrupt first, then the late allow the recording wrote: the core refuses it and writes nothing."""
    r = replay("sealed-interrupt-pending-permission")
    cancelled = r.of(PermissionCancelled)
    assert len(cancelled) == 1 and cancelled[0].after_answer is False
    request = cancelled[0].request
    assert request.state is PermissionState.CANCELLED and request.answer is None
    late = r.sent[-1]
    assert isinstance(late, ClaudeRpcRefusal) and late.code == "permission-cancelled"
    assert written(r) == 3  # initialize, the prompt, the interrupt: never the late allow
    # the rejection's tool_result is read after the cancel: the request keeps the cancelled state
    assert request.resolution is not None and request.resolution["is_error"] is True
    again = r.core.allow(request.request_id, now=r.now)
    assert isinstance(again, ClaudeRpcRefusal) and again.code == "permission-cancelled"


def test_H8_the_other_order_an_answer_written_before_the_interrupt_is_not_cancelled_and_is_settled_by_the_tool_result() -> None:
    r = replay("sealed-allow-then-interrupt")
    assert r.of(PermissionCancelled) == []
    request = r.of(PermissionAsked)[0].request
    assert request.state is PermissionState.RESOLVED and request.behavior == "allow"
    assert request.answer is not None and request.answer.outcome is Outcome.ACKNOWLEDGED
    # the interrupt won the race all the same: the engine rejected the tool use
    assert request.resolution is not None and request.resolution["is_error"] is True
    evidence = r.of(InterruptSettled)[0].evidence
    assert evidence is not None and evidence.nothing_queued_runs and [m.key for m in evidence.running] == [U1]


def test_an_answer_to_a_request_the_engine_settled_at_stdin_eof_is_refused_resolved() -> None:
    r = replay("sealed-eof-pending-permission")
    request = r.of(PermissionAsked)[0].request
    assert request.state is PermissionState.RESOLVED and request.answer is None
    assert request.resolution is not None and "stream closed" in str(request.resolution["content"])
    late = r.core.allow(request.request_id, now=r.now)
    assert isinstance(late, ClaudeRpcRefusal) and late.code == "permission-resolved"


def test_an_answer_for_an_id_never_asked_is_refused_unknown() -> None:
    r = replay("sealed-text")
    refused = r.core.allow("00000000-0000-4000-8000-0000000000ff", now=r.now)
    assert isinstance(refused, ClaudeRpcRefusal) and refused.code == "permission-unknown"
    assert r.core.next_write() is None


def test_the_settled_history_is_bounded_and_a_forgotten_request_is_refused_unknown() -> None:
    r = Replay(core=ClaudeLinkCore(permission_history=1))
    r.feed(load("sealed-permission-deny"))
    rid = r.of(PermissionAsked)[0].request.request_id
    assert r.core.permission(rid) is not None
    r.feed(split_at(load("sealed-eof-pending-permission"), is_can_use_tool)[1][:1])  # a second request, asked
    other = r.of(PermissionAsked)[1].request
    r.core.deny(other.request_id, "no", now=r.now)
    # the first is still remembered (one settled); settling the second pushes it out
    r.feed([{"dir": "out", "msg": {"type": "control_cancel_request", "request_id": other.request_id}}])
    assert r.core.permission(rid) is None
    refused = r.core.allow(rid, now=r.now)
    assert isinstance(refused, ClaudeRpcRefusal) and refused.code == "permission-unknown"


# -- interrupts (R3-1) ------------------------------------------------------------------------------------


def test_R3_1_an_interrupt_with_cancel_queued_proves_nothing_queued_runs_and_names_what_it_cancelled() -> None:
    r = replay("sealed-interrupt-cancel-queued")
    settled = r.of(InterruptSettled)
    assert len(settled) == 1 and settled[0].evidence is not None
    ev = settled[0].evidence
    assert ev.cancel_queued and ev.still_queued == () and ev.cancelled == (U2,)
    assert [m.key for m in ev.ours_cancelled] == [U2] and [m.key for m in ev.running] == [U1]
    assert ev.foreign == () and ev.unacknowledged == () and ev.unaccounted == ()
    assert ev.nothing_queued_runs and r.of(RanAfterInterrupt) == []
    assert [(e.command_uuid, e.state) for e in r.of(Lifecycle)][-2:] == [(U2, "cancelled"), (U1, "cancelled")]


def test_R3_1_a_plain_interrupt_lists_the_queued_message_as_still_queued_proves_nothing_and_it_then_runs() -> None:
    r = replay("sealed-interrupt-still-queued")
    ev = r.of(InterruptSettled)[0].evidence
    assert ev is not None and not ev.cancel_queued
    assert ev.still_queued == (U2,) and [m.key for m in ev.ours_still_queued] == [U2]
    assert not ev.nothing_queued_runs
    ran = r.of(RanAfterInterrupt)
    assert [(e.message.key, e.interrupt.key) for e in ran] == [(U2, "r2")]
    assert len(r.of(TurnStarted)) == 2  # the queued message got a turn of its own


def test_R3_1_the_other_order_a_message_written_after_the_interrupt_is_not_covered_by_it_and_runs() -> None:
    r = replay("sealed-interrupt-then-message")
    ev = r.of(InterruptSettled)[0].evidence
    assert ev is not None and ev.nothing_queued_runs and [m.key for m in ev.running] == [U1]
    assert ev.ours_still_queued == () and ev.ours_cancelled == ()
    assert r.of(RanAfterInterrupt) == []  # a new prompt, not something the interrupt was to stop
    assert [e.command_uuid for e in r.of(Lifecycle) if e.state == "completed"] == [U2]


def test_R3_1_withheld_frame_a_receipt_read_before_a_messages_queued_frame_proves_nothing() -> None:
    """Not an order the binary showed: the still-queued recording with U2's ``queued`` frame withheld until after
    the receipt, the defensive branch (a message the receipt cannot speak for)."""
    records = load("sealed-interrupt-cancel-queued")
    receipt = next(i for i, rec in enumerate(records) if rec["msg"].get("type") == "control_response"
                   and rec["msg"]["response"]["request_id"] == "r2")
    withheld = [rec for rec in records[:receipt + 1] if rec["msg"].get("command_uuid") != U2]
    withheld[-1] = {"dir": "out", "msg": {"type": "control_response", "response": {
        "subtype": "success", "request_id": "r2", "response": {"still_queued": [], "cancelled": []}}}}
    r = Replay()
    r.feed(withheld)
    ev = r.of(InterruptSettled)[0].evidence
    assert ev is not None and [m.key for m in ev.unacknowledged] == [U2] and not ev.nothing_queued_runs


def test_the_mid_turn_fold_a_message_queued_during_a_tool_call_starts_inside_the_running_turn() -> None:
    r = replay("sealed-queued-mid-turn")
    folded = [(e.command_uuid, e.state) for e in r.of(Lifecycle) if e.folded]
    assert folded == [(U2, "started")]
    assert len(r.of(TurnStarted)) == 1 and len(r.of(TurnFinished)) == 1
    order = [type(e).__name__ if not isinstance(e, Lifecycle) else f"{e.command_uuid[-1]}:{e.state}"
             for e in r.events if isinstance(e, (Lifecycle, TurnFinished))]
    assert order == ["1:queued", "1:started", "2:queued", "2:started", "2:completed", "TurnFinished", "1:completed"]


def test_an_interrupt_at_idle_and_the_permission_modes_are_acknowledged_and_the_mode_change_reported() -> None:
    records = load("sealed-controls")
    before, rest = split_at(records, lambda m: m.get("request_id") == "x1")
    r = Replay()
    r.feed(before)
    ev = r.of(InterruptSettled)[0].evidence
    assert ev is not None and ev.nothing_queued_runs and ev.running == () and ev.still_queued == ()
    assert [s.subtype for s in r.sent if isinstance(s, Outgoing)] == ["initialize", "interrupt",
                                                                      "set_permission_mode", "set_permission_mode"]
    assert [e.record["permissionMode"] for e in r.of(StatusChanged)] == ["plan", "default"]
    with pytest.raises(NotReplayable):
        r.feed(rest[:1])  # the link never sends an unsupported subtype
    for mode in ("acceptEdits", "bypassPermissions", "auto", "dontAsk", "nonsense"):
        with pytest.raises(ValueError):
            r.core.send_set_permission_mode(mode, now=r.now)


def test_control_responses_are_correlated_by_request_id_only_and_one_for_an_id_never_written_poisons() -> None:
    records = load("sealed-controls")
    before, rest = split_at(records, lambda m: m.get("request_id") == "x1")
    r = Replay()
    r.feed(before)
    error = next(rec for rec in rest if rec["msg"].get("type") == "control_response")
    events = r.feed([error])  # the recorded error answer to x1, an id this core never wrote
    assert [type(e).__name__ for e in events if not isinstance(e, StatusChanged)] == ["ProtocolViolation", "Poisoned"]
    assert isinstance(events[-2], ProtocolViolation) and events[-2].reason == "response-for-unwritten"
    with pytest.raises(LinkPoisoned):
        r.core.send_initialize(now=r.now)


def test_an_error_response_acknowledges_its_request_with_the_error_text() -> None:
    """The recorded error answer (to the unsupported subtype x1), re-addressed to the core's own request id."""
    records = load("sealed-controls")
    error = next(rec["msg"] for rec in records if rec["msg"].get("type") == "control_response"
                 and rec["msg"]["response"]["request_id"] == "x1")
    r = Replay()
    out = r.core.send_set_permission_mode("plan", now=0.0)
    r.write_all()
    readdressed = {"type": "control_response", "response": {**error["response"], "request_id": out.key}}
    events = r.core.feed(line_of(readdressed), now=1.0)
    assert [type(e) for e in events] == [Acknowledged]
    assert out.error == "Unsupported control request subtype: no_such_thing" and not out.succeeded


def test_a_second_response_for_an_acknowledged_request_poisons() -> None:
    records = load("sealed-text")
    r = Replay()
    r.feed(records)
    response = next(rec for rec in records if rec["msg"].get("type") == "control_response")
    events = r.feed([response])
    assert isinstance(events[0], ProtocolViolation) and events[0].reason == "second-response"
    assert isinstance(events[1], Poisoned)


# -- turn evidence ----------------------------------------------------------------------------------------


def test_K8_an_init_that_names_another_session_than_the_claimed_one_is_reported() -> None:
    ok = replay("sealed-resume", expected_session_id=SESSION_UUID)
    assert ok.of(SessionMismatch) == [] and ok.core.session_id == SESSION_UUID
    other = "00000000-0000-4000-8000-0000000000aa"
    bad = replay("sealed-resume", expected_session_id=other)
    assert [(e.expected, e.found) for e in bad.of(SessionMismatch)] == [(other, SESSION_UUID)]


def test_stream_events_and_the_requesting_status_come_out_in_order_with_partial_messages() -> None:
    r = replay("sealed-partial-messages")
    assert [e.event_type for e in r.of(StreamEvent)] == ["message_start", "content_block_start",
                                                         "content_block_delta", "content_block_delta",
                                                         "content_block_stop", "message_delta", "message_stop"]
    assert [e.record["status"] for e in r.of(StatusChanged)] == ["requesting"]


def test_E5_a_record_of_unknown_type_is_counted_and_reported_not_fatal() -> None:
    """No recording holds a type this link does not know; the line here is the link's own invention."""
    r = replay("sealed-text")
    events = r.core.feed(b'{"type":"rate_limit_event","x":1}\n{"type":"rate_limit_event"}\n', now=r.now)
    assert [type(e) for e in events] == [UnknownRecord, UnknownRecord]
    assert r.core.unknown_types == {"rate_limit_event": 2} and r.core.poisoned is None


def test_an_engine_control_request_of_another_subtype_is_reported_and_never_answered() -> None:
    """The seal leaves no hook or MCP server that would ask; the line here is invented."""
    core = ClaudeLinkCore()
    events = core.feed(b'{"type":"control_request","request_id":"h1","request":{"subtype":"hook_callback"}}\n'
                       b'{"type":"control_cancel_request","request_id":"h1"}\n', now=0.0)
    assert isinstance(events[0], EngineRequest) and events[0].subtype == "hook_callback"
    assert core.unknown_types == {"control_request:hook_callback": 1} and core.next_write() is None
    assert core.poisoned is None
    cancel_unknown = core.feed(b'{"type":"control_cancel_request","request_id":"zz"}\n', now=1.0)
    assert isinstance(cancel_unknown[0], ProtocolViolation) and cancel_unknown[0].reason == "cancel-for-unknown-request"


# -- write outcomes, poison, bounds ----------------------------------------------------------------------


def test_the_outcome_table_is_pi_rpcs() -> None:
    q, w, wr, ack, unk, nw = (Outcome.QUEUED, Outcome.WRITING, Outcome.WRITTEN, Outcome.ACKNOWLEDGED, Outcome.UNKNOWN,
                              Outcome.NOT_WRITTEN)
    i = OutcomeInput
    assert dict(OUTCOME_TABLE) == {
        (q, i.WRITE_STARTED): (w, None), (q, i.ACK): (nw, None), (q, i.BOUND_PASSED): (nw, None),
        (q, i.OUTPUT_ENDED): (nw, None), (q, i.OUTPUT_UNREADABLE): (nw, None), (q, i.POISON_DROPS_OUTBOX): (nw, None),
        (w, i.WRITE_WHOLE): (wr, None), (w, i.WRITE_PARTIAL): (unk, "partial-write"), (w, i.WRITE_ERROR): (unk, "write-error"),
        (w, i.ACK): (ack, None), (w, i.BOUND_PASSED): (unk, "write-stalled"), (w, i.OUTPUT_ENDED): (unk, "engine-output-ended"),
        (w, i.OUTPUT_UNREADABLE): (unk, "output-unreadable"), (wr, i.ACK): (ack, None),
        (wr, i.BOUND_PASSED): (unk, "no-response"), (wr, i.OUTPUT_ENDED): (unk, "engine-output-ended"),
        (wr, i.OUTPUT_UNREADABLE): (unk, "output-unreadable")}


def test_brief16_after_the_first_unknown_outcome_nothing_is_written_again() -> None:
    core = ClaudeLinkCore()
    first = core.send_user("one", uuid=U1, now=0.0)
    second = core.send_initialize(now=0.0)
    out = core.next_write()
    assert out is first
    events = core.write_done(first, accepted=5, error=None, now=0.1)
    assert [type(e) for e in events] == [OutcomeUnknown, Poisoned]
    assert first.unknown_reason == "partial-write" and second.outcome is Outcome.NOT_WRITTEN
    assert core.next_write() is None
    for send in (lambda: core.send_user("x", uuid=U2, now=1.0), lambda: core.send_initialize(now=1.0),
                 lambda: core.send_interrupt(now=1.0), lambda: core.allow("a", now=1.0)):
        with pytest.raises(LinkPoisoned):
            send()


def test_a_line_written_whole_and_never_acknowledged_is_unknown_when_its_bound_passes() -> None:
    core = ClaudeLinkCore(default_bound=5.0)
    out = core.send_user("hi", uuid=U1, now=0.0)
    behind = core.send_initialize(now=1.0)
    w = core.next_write()
    assert w is out
    assert [type(e) for e in core.write_done(out, accepted=len(out.data), error=None, now=0.0)] == [Written]
    assert core.next_deadline() == 5.0
    assert core.tick(now=4.999) == []
    events = core.tick(now=5.0)
    assert [type(e) for e in events] == [OutcomeUnknown, Poisoned] and out.unknown_reason == "no-response"
    assert behind.outcome is Outcome.NOT_WRITTEN
    # a late frame for it is kept, and changes nothing
    late = core.feed(line_of({"type": "command_lifecycle", "command_uuid": U1, "state": "queued", "uuid": "u",
                              "session_id": "s"}), now=6.0)
    assert [type(e) for e in late] == [Lifecycle] and out.outcome is Outcome.UNKNOWN and len(out.late) == 1


def test_an_answer_has_no_bound_and_the_output_ending_leaves_its_outcome_unknown() -> None:
    before = split_at(load("sealed-permission-allow"), is_answer)[0]
    r = Replay(core=ClaudeLinkCore(default_bound=1.0))
    r.feed(before)
    answer = r.core.allow(r.core.pending_permissions[0].request_id, now=r.now)
    assert isinstance(answer, Outgoing) and answer.bound is None
    r.write_all()
    assert r.core.tick(now=r.now + 1000) == []
    r.core.output_ended(now=r.now)
    assert answer.outcome is Outcome.UNKNOWN and answer.unknown_reason == "engine-output-ended"
    assert r.of(PermissionAsked)[0].request.state is PermissionState.ENDED


def test_send_user_needs_a_fresh_lowercase_canonical_uuid_and_real_content() -> None:
    core = ClaudeLinkCore()
    lettered = "0000000a-0000-4000-8000-00000000000b"
    for bad in ("", "not-a-uuid", lettered.upper(), "{" + U1 + "}", U1 + "\n"):
        with pytest.raises(ValueError):
            core.send_user("x", uuid=bad, now=0.0)
    core.send_user("x", uuid=U1, now=0.0)
    with pytest.raises(ValueError):
        core.send_user("again", uuid=U1, now=0.0)
    with pytest.raises(ValueError):
        core.send_user([], uuid=U2, now=0.0)
    blocks = core.send_user([{"type": "text", "text": "t"}], uuid=U2, now=0.0)
    assert json.loads(blocks.data)["message"]["content"] == [{"type": "text", "text": "t"}]


def test_write_done_for_a_line_that_is_not_being_written_is_a_usage_error() -> None:
    from mosaic.claude_rpc.link import LinkUsageError

    core = ClaudeLinkCore()
    out = core.send_initialize(now=0.0)
    with pytest.raises(LinkUsageError):
        core.write_done(out, accepted=0, error=None, now=0.0)
    core.output_ended(now=0.0)
    with pytest.raises(LinkUsageError):
        core.feed(b"{}", now=0.0)
