"""The sans-io engine link (brief §1 write outcomes and poison, mutant 16; FACTS.md a5 / Part 2 F).

Every race is an exact order of events fed to the core: no processes, no clock but the numbers passed in.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mosaic.pi_rpc._framing import encode_record
from mosaic.pi_rpc._link import (
    Command,
    CommandOutcome,
    EngineEvent,
    LateResponse,
    LinkCore,
    LinkPoisoned,
    NotEvidence,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    PromptNotAcknowledged,
    ProtocolViolation,
    TruncatedOutput,
)


def write_all(core: LinkCore, now: float = 0.0) -> list[Command]:
    """The shell's job in one step: every queued line accepted whole."""
    done = []
    while (cmd := core.next_write()) is not None:
        assert core.write_done(cmd, accepted=len(cmd.data), error=None, now=now) == []
        assert cmd.outcome is CommandOutcome.WRITTEN
        done.append(cmd)
    return done


def resp(cmd: Command, success: bool = True, **extra: Any) -> bytes:
    rec: dict[str, Any] = {"id": cmd.id, "type": "response", "command": cmd.type, "success": success, **extra}
    return encode_record(rec)


def ev(kind: str, **extra: Any) -> bytes:
    return encode_record({"type": kind, **extra})


def state(cmd: Command, streaming: bool) -> bytes:
    return resp(cmd, data={"isStreaming": streaming, "messageCount": 0})


# --------------------------------------------------------------------------------------------------------
# Write outcomes
# --------------------------------------------------------------------------------------------------------


def test_written_then_acknowledged_by_id() -> None:
    core = LinkCore()
    cmd = core.send({"type": "get_state"}, now=0)
    assert cmd.outcome is CommandOutcome.QUEUED
    assert json.loads(cmd.data) == {"id": cmd.id, "type": "get_state"}
    assert cmd.data.endswith(b"\n") and cmd.data.count(b"\n") == 1
    write_all(core)
    assert cmd.outcome is CommandOutcome.WRITTEN
    events = core.feed(state(cmd, False), now=1)
    assert events == [OutcomeKnown(cmd)]
    assert cmd.outcome is CommandOutcome.ACKNOWLEDGED and cmd.succeeded


def test_error_response_is_acknowledged_not_unknown() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    core.feed(resp(p, False, error="No API key found for fakeprov."), now=1)
    assert p.outcome is CommandOutcome.ACKNOWLEDGED and not p.succeeded
    assert core.can_send_prompt()


def test_responses_out_of_command_order_are_matched_by_id() -> None:
    # FACTS.md Part 2 F: ps1 answered before pp1.
    core = LinkCore()
    p = core.send_prompt("PIPE-1", now=0)
    s = core.send({"type": "get_state"}, now=0)
    write_all(core)
    out = core.feed(state(s, False) + resp(p), now=1)
    assert out == [OutcomeKnown(s), OutcomeKnown(p)]
    assert p.response_index == 1 and s.response_index == 0


def test_response_before_write_done_is_acknowledged() -> None:
    core = LinkCore()
    cmd = core.send({"type": "abort"}, now=0)
    w = core.next_write()
    assert w is cmd and cmd.outcome is CommandOutcome.WRITING
    core.feed(resp(cmd), now=0.5)
    assert cmd.outcome is CommandOutcome.ACKNOWLEDGED
    assert core.write_done(cmd, accepted=len(cmd.data), error=None, now=1) == []
    assert cmd.outcome is CommandOutcome.ACKNOWLEDGED


def test_partial_write_is_unknown_and_poisons() -> None:
    core = LinkCore()
    a = core.send({"type": "get_state"}, now=0)
    b = core.send({"type": "get_tree"}, now=0)
    w = core.next_write()
    assert w is a
    events = core.write_done(a, accepted=5, error=None, now=0.1)
    assert OutcomeUnknown(a) in events and any(isinstance(e, Poisoned) for e in events)
    assert a.outcome is CommandOutcome.UNKNOWN and a.unknown_reason == "partial-write"
    # The command queued behind it never left: not written, and the pipe is never written again.
    assert b.outcome is CommandOutcome.NOT_WRITTEN
    assert core.next_write() is None


def test_epipe_is_unknown_and_poisons() -> None:
    core = LinkCore()
    p = core.send_prompt("hello", now=0)
    w = core.next_write()
    assert w is p
    core.write_done(p, accepted=0, error=BrokenPipeError(32, "EPIPE"), now=0)
    assert p.outcome is CommandOutcome.UNKNOWN and p.unknown_reason == "write-error"
    assert core.poisoned is not None


def test_brief16_pipe_is_never_written_again_after_unknown() -> None:
    core = LinkCore()
    p = core.send_prompt("hello", now=0)
    assert core.next_write() is p
    core.write_done(p, accepted=3, error=BrokenPipeError(32, "EPIPE"), now=0)
    assert p.outcome is CommandOutcome.UNKNOWN
    with pytest.raises(LinkPoisoned):
        core.send({"type": "get_state"}, now=1)
    with pytest.raises(LinkPoisoned):
        core.send_prompt("again", now=1)
    assert core.next_write() is None
    assert [c.id for c in core.commands] == [p.id]


def test_no_response_within_bound_is_unknown_then_late_response_changes_nothing() -> None:
    core = LinkCore(default_bound=5.0)
    p = core.send_prompt("hi", now=10)
    write_all(core, now=10)
    assert core.next_deadline() == 15
    assert core.tick(now=14.9) == []
    events = core.tick(now=15)
    assert events[0] == OutcomeUnknown(p) and p.unknown_reason == "no-response"
    assert core.poisoned is not None
    late = core.feed(resp(p), now=16)
    assert late == [LateResponse(p, 0, json.loads(resp(p)))]
    assert p.outcome is CommandOutcome.UNKNOWN  # never relabelled
    assert p.late_responses


def test_stalled_write_is_unknown_and_queued_ones_not_written() -> None:
    core = LinkCore(default_bound=1.0)
    a = core.send({"type": "get_state"}, now=0)
    b = core.send({"type": "get_tree"}, now=0.5)
    assert core.next_write() is a  # the shell is blocked: the pipe is full
    events = core.tick(now=1.0)
    assert OutcomeUnknown(a) in events and a.unknown_reason == "write-stalled"
    assert b.outcome is CommandOutcome.NOT_WRITTEN
    # The shell gives up on the write later; the outcome stays unknown.
    assert core.write_done(a, accepted=2, error=None, now=1.1) == []
    assert a.outcome is CommandOutcome.UNKNOWN


def test_unbounded_command_never_times_out() -> None:
    core = LinkCore(default_bound=1.0)
    a = core.send({"type": "abort"}, now=0, bound=None)
    write_all(core)
    assert core.next_deadline() is None
    assert core.tick(now=1e9) == []
    assert a.outcome is CommandOutcome.WRITTEN


def test_engine_output_end_makes_in_flight_unknown() -> None:
    core = LinkCore()
    a = core.send({"type": "get_state"}, now=0)
    b = core.send_prompt("x", now=0)
    write_all(core)
    core.feed(state(a, False), now=1)
    events = core.output_ended(now=2)
    assert OutcomeUnknown(b) in events and b.unknown_reason == "engine-output-ended"
    assert a.outcome is CommandOutcome.ACKNOWLEDGED


def test_truncated_tail_at_eof_is_reported() -> None:
    core = LinkCore()
    core.feed(b'{"type":"agent_start"}\n{"type":"mess', now=0)
    assert core.output_ended(now=1)[0] == TruncatedOutput('{"type":"mess')


def test_response_without_id_poisons() -> None:
    # Pi's answer to a line it could not parse has no id (rpc-mode.js 610): some line was not whole.
    core = LinkCore()
    a = core.send({"type": "get_state"}, now=0)
    write_all(core)
    events = core.feed(encode_record({"type": "response", "command": "parse", "success": False,
                                      "error": "Failed to parse command: Unexpected end of JSON input"}), now=1)
    assert isinstance(events[0], ProtocolViolation) and isinstance(events[1], Poisoned)
    with pytest.raises(LinkPoisoned):
        core.send({"type": "get_state"}, now=2)
    # The written command can still be answered (the engine read it whole before).
    assert core.feed(state(a, True), now=3) == [OutcomeKnown(a)]


def test_non_object_record_and_framing_error_poison() -> None:
    core = LinkCore()
    a = core.send({"type": "get_state"}, now=0)
    write_all(core)
    events = core.feed(b"not json\n", now=1)
    assert isinstance(events[0], ProtocolViolation)
    assert a.outcome is CommandOutcome.UNKNOWN and a.unknown_reason == "output-unreadable"
    core2 = LinkCore(max_record_bytes=10)
    b = core2.send({"type": "get_state"}, now=0)
    write_all(core2)
    core2.feed(b"x" * 50, now=1)
    assert b.outcome is CommandOutcome.UNKNOWN and core2.poisoned is not None


def test_E2_separators_in_engine_output_do_not_split_records() -> None:
    core = LinkCore()
    s = core.send({"type": "get_state"}, now=0)
    write_all(core)
    data = ev("message_start", message={"content": [{"type": "text", "text": "a\u2028b\u2029c\rd"}]}) + state(s, False)
    events = core.feed(data, now=1)
    assert isinstance(events[0], EngineEvent)
    assert events[0].record["message"]["content"][0]["text"] == "a\u2028b\u2029c\rd"
    assert events[1] == OutcomeKnown(s)


def test_send_refuses_what_the_link_must_not_write() -> None:
    core = LinkCore()
    with pytest.raises(ValueError):
        core.send({"type": "prompt", "message": "x"}, now=0)
    with pytest.raises(ValueError):
        core.send({"type": "extension_ui_response", "id": "x", "value": "y"}, now=0)
    with pytest.raises(ValueError):
        core.send({"type": "get_state", "id": "mine"}, now=0)
    with pytest.raises(ValueError):
        core.send({"message": "no type"}, now=0)


# --------------------------------------------------------------------------------------------------------
# The two prompt rules (FACTS.md a5 and Part 2 F)
# --------------------------------------------------------------------------------------------------------


def test_second_prompt_refused_while_first_unacknowledged() -> None:
    core = LinkCore()
    p1 = core.send_prompt("PIPE-1", now=0)
    with pytest.raises(PromptNotAcknowledged):
        core.send_prompt("PIPE-2", now=0)  # queued, not even written yet
    write_all(core)
    with pytest.raises(PromptNotAcknowledged):
        core.send_prompt("PIPE-2", now=0)  # written, not answered
    assert not core.can_send_prompt()
    core.feed(resp(p1), now=1)
    p2 = core.send_prompt("PIPE-2", now=1)  # now allowed
    assert p2.seq == p1.seq + 1


def test_get_state_written_before_ack_is_not_evidence() -> None:
    # The F order: prompt and get_state in one write; get_state answered first, isStreaming false.
    core = LinkCore()
    p = core.send_prompt("PIPE-1", now=0)
    s = core.send({"type": "get_state"}, now=0)
    write_all(core)
    core.feed(state(s, False) + resp(p) + ev("agent_start"), now=1)
    assert p.seq not in s.written_after_ack_of
    with pytest.raises(NotEvidence):
        core.prompt_state(p, s)


def test_get_state_sent_after_ack_read_but_answered_before_events_is_evidence() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    core.feed(resp(p), now=1)
    s = core.send({"type": "get_state"}, now=1)
    write_all(core)
    assert p.seq in s.written_after_ack_of
    core.feed(state(s, False), now=2)
    evid = core.prompt_state(p, s)
    assert evid.is_streaming is False and evid.agent_start_between is False


def test_agent_start_between_ack_and_state_reply_is_reported() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    core.feed(resp(p), now=1)
    s = core.send({"type": "get_state"}, now=1)
    write_all(core)
    core.feed(ev("agent_start") + ev("agent_settled") + state(s, False), now=2)
    evid = core.prompt_state(p, s)
    assert evid.agent_start_between is True


def test_agent_start_before_ack_does_not_count_as_between() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    core.feed(ev("agent_start") + resp(p), now=1)
    s = core.send({"type": "get_state"}, now=1)
    write_all(core)
    core.feed(state(s, True), now=2)
    assert core.prompt_state(p, s).agent_start_between is False


def test_prompt_state_refuses_unacked_failed_or_wrong_commands() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    s0 = core.send({"type": "get_state"}, now=0)
    write_all(core)
    core.feed(state(s0, False), now=0)
    with pytest.raises(NotEvidence):
        core.prompt_state(p, s0)  # prompt not acked
    core.feed(resp(p, False, error="boom"), now=1)
    s1 = core.send({"type": "get_state"}, now=1)
    write_all(core)
    core.feed(state(s1, False), now=1)
    with pytest.raises(NotEvidence):
        core.prompt_state(p, s1)  # failed prompt
    with pytest.raises(NotEvidence):
        core.prompt_state(s1, p)  # wrong way round
