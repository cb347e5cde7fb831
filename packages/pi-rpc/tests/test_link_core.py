"""The sans-io engine link (brief §1 write outcomes and poison, mutant 16; FACTS.md a5 / Part 2 F).

Every race is an exact order of events fed to the core: no processes, no clock but the numbers passed in.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
import tracemalloc
import weakref
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc import Command, LinkCore
from mosaic.pi_rpc.framing import encode_record
from mosaic.pi_rpc.link import (
    OUTCOME_TABLE,
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LateResponse,
    LinkPoisoned,
    LinkUsageError,
    NotEvidence,
    OutcomeInput,
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
        assert core.write_done(cmd, accepted=len(cmd.data), error=None, now=now) == [CommandWritten(cmd)]
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
    assert core.in_flight == ()  # nothing was queued after the poison


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
    assert not s.written_after_ack_of(p)
    with pytest.raises(NotEvidence):
        core.prompt_state(p, s)


def test_get_state_sent_after_ack_read_but_answered_before_events_is_evidence() -> None:
    core = LinkCore()
    p = core.send_prompt("hi", now=0)
    write_all(core)
    core.feed(resp(p), now=1)
    s = core.send({"type": "get_state"}, now=1)
    write_all(core)
    assert s.written_after_ack_of(p)
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


# --------------------------------------------------------------------------------------------------------
# The outcome table (the core as a table): every row walked on a real core, every other pair unchanged
# --------------------------------------------------------------------------------------------------------

Q, W, WR = CommandOutcome.QUEUED, CommandOutcome.WRITING, CommandOutcome.WRITTEN
ACK, UNK, NW = CommandOutcome.ACKNOWLEDGED, CommandOutcome.UNKNOWN, CommandOutcome.NOT_WRITTEN
In = OutcomeInput

# Brief §1 "Write outcomes" and the link's rules, written out by hand: the core's table must be exactly this.
RULES: dict[tuple[CommandOutcome, OutcomeInput], tuple[CommandOutcome, str | None]] = {
    (Q, In.WRITE_STARTED): (W, None),
    (Q, In.RESPONSE): (NW, None),
    (Q, In.BOUND_PASSED): (NW, None),
    (Q, In.OUTPUT_ENDED): (NW, None),
    (Q, In.OUTPUT_UNREADABLE): (NW, None),
    (Q, In.POISON_DROPS_OUTBOX): (NW, None),
    (W, In.WRITE_WHOLE): (WR, None),
    (W, In.WRITE_PARTIAL): (UNK, "partial-write"),
    (W, In.WRITE_ERROR): (UNK, "write-error"),
    (W, In.RESPONSE): (ACK, None),
    (W, In.BOUND_PASSED): (UNK, "write-stalled"),
    (W, In.OUTPUT_ENDED): (UNK, "engine-output-ended"),
    (W, In.OUTPUT_UNREADABLE): (UNK, "output-unreadable"),
    (WR, In.RESPONSE): (ACK, None),
    (WR, In.BOUND_PASSED): (UNK, "no-response"),
    (WR, In.OUTPUT_ENDED): (UNK, "engine-output-ended"),
    (WR, In.OUTPUT_UNREADABLE): (UNK, "output-unreadable"),
}

BOUND = 5.0


def _queued_head() -> tuple[LinkCore, Command]:
    core = LinkCore()
    return core, core.send({"type": "get_state"}, now=0, bound=BOUND)


def _queued_behind() -> tuple[LinkCore, Command]:
    core = LinkCore()
    core.send({"type": "abort"}, now=0, bound=None)
    cmd = core.send({"type": "get_state"}, now=0, bound=BOUND)
    assert core.next_write() is not cmd  # the abort is being written; cmd waits behind it
    return core, cmd


def _writing() -> tuple[LinkCore, Command]:
    core, cmd = _queued_head()
    assert core.next_write() is cmd
    return core, cmd


def _written() -> tuple[LinkCore, Command]:
    core, cmd = _writing()
    core.write_done(cmd, accepted=len(cmd.data), error=None, now=0)
    return core, cmd


def _acked_after_write() -> tuple[LinkCore, Command]:
    core, cmd = _written()
    core.feed(resp(cmd), now=1)
    return core, cmd


def _acked_while_writing() -> tuple[LinkCore, Command]:
    core, cmd = _writing()
    core.feed(resp(cmd), now=1)  # Pi answered before the shell reported the end of the write
    return core, cmd


def _unknown_no_response() -> tuple[LinkCore, Command]:
    core, cmd = _written()
    core.tick(now=BOUND)
    return core, cmd


def _unknown_stalled() -> tuple[LinkCore, Command]:
    core, cmd = _writing()
    core.tick(now=BOUND)  # still the write in progress: the shell may be blocked in it
    return core, cmd


def _not_written() -> tuple[LinkCore, Command]:
    core = LinkCore()
    head = core.send({"type": "abort"}, now=0, bound=None)
    cmd = core.send({"type": "get_state"}, now=0, bound=BOUND)
    assert core.next_write() is head
    core.write_done(head, accepted=1, error=None, now=0)  # partial: the poison drops cmd
    return core, cmd


SETUPS = {
    "queued-head": (Q, _queued_head),
    "queued-behind-a-write": (Q, _queued_behind),
    "writing": (W, _writing),
    "written": (WR, _written),
    "acknowledged": (ACK, _acked_after_write),
    "acknowledged-while-writing": (ACK, _acked_while_writing),
    "unknown-no-response": (UNK, _unknown_no_response),
    "unknown-write-stalled": (UNK, _unknown_stalled),
    "not-written": (NW, _not_written),
}

NO_ID_RESPONSE = encode_record({"type": "response", "command": "parse", "success": False, "error": "x"})


def _apply(core: LinkCore, cmd: Command, what: OutcomeInput) -> list[Any]:
    """Give ``what`` to the core the way its callers do; the events it returns."""
    if what is In.WRITE_STARTED:
        core.next_write()
        return []
    if what is In.WRITE_WHOLE:
        return list(core.write_done(cmd, accepted=len(cmd.data), error=None, now=2))
    if what is In.WRITE_PARTIAL:
        return list(core.write_done(cmd, accepted=len(cmd.data) - 1, error=None, now=2))
    if what is In.WRITE_ERROR:
        return list(core.write_done(cmd, accepted=0, error=BrokenPipeError(32, "EPIPE"), now=2))
    if what is In.RESPONSE:
        return list(core.feed(resp(cmd), now=2))
    if what is In.BOUND_PASSED:
        assert cmd.deadline is not None
        return list(core.tick(now=cmd.deadline))
    if what is In.OUTPUT_ENDED:
        return list(core.output_ended(now=2))
    if what is In.OUTPUT_UNREADABLE:
        return list(core.feed(b"\xff not UTF-8\n", now=2))
    assert what is In.POISON_DROPS_OUTBOX
    return list(core.feed(NO_ID_RESPONSE, now=2))  # a protocol violation by no command: the poison alone


def test_the_outcome_table_is_the_rules() -> None:
    assert dict(OUTCOME_TABLE) == RULES


@pytest.mark.parametrize("what", list(OutcomeInput), ids=[i.value for i in OutcomeInput])
@pytest.mark.parametrize("setup", list(SETUPS), ids=list(SETUPS))
def test_every_state_and_input_follows_the_table(setup: str, what: OutcomeInput) -> None:
    state, make = SETUPS[setup]
    core, cmd = make()
    assert cmd.outcome is state
    reason_before = cmd.unknown_reason
    if (setup, what) == ("queued-behind-a-write", In.WRITE_STARTED):
        # One write at a time: next_write() hands out nothing while the write ahead is in progress.
        assert core.next_write() is None and cmd.outcome is Q
        return
    try:
        events = _apply(core, cmd, what)
    except LinkUsageError:
        # Only a write input for a command that is not the write in progress (an owner's bug).
        assert what in (In.WRITE_WHOLE, In.WRITE_PARTIAL, In.WRITE_ERROR)
        assert setup not in ("writing", "acknowledged-while-writing", "unknown-write-stalled")
        assert (cmd.outcome, cmd.unknown_reason) == (state, reason_before)
        return
    row = RULES.get((state, what))
    if row is not None:
        assert (cmd.outcome, cmd.unknown_reason or None) == row
        if row[0] is ACK:
            assert OutcomeKnown(cmd) in events
        elif row[0] is UNK:
            assert OutcomeUnknown(cmd) in events and core.poisoned is not None
        elif row[0] is NW:
            assert core.poisoned is not None and cmd not in core.in_flight
        return
    # Not in the table: the outcome stays; the only effects are the ones the rules name.
    assert (cmd.outcome, cmd.unknown_reason) == (state, reason_before)
    about_cmd = [e for e in events if getattr(e, "command", None) is cmd]
    if (state, what) == (UNK, In.RESPONSE):
        assert about_cmd == [LateResponse(cmd, core.records_read - 1, json.loads(resp(cmd)))]
    elif (state, what) in ((ACK, In.RESPONSE), (NW, In.RESPONSE)):
        assert isinstance(events[0], ProtocolViolation) and events[0].record == json.loads(resp(cmd))
        assert core.poisoned is not None and about_cmd == []
    else:
        assert about_cmd == []


def test_every_table_row_is_reached_by_a_setup() -> None:
    reached = {(state, what) for state, _ in SETUPS.values() for what in OutcomeInput}
    assert set(OUTCOME_TABLE) <= reached


# --------------------------------------------------------------------------------------------------------
# The in-flight set: only queued / writing / written commands are kept
# --------------------------------------------------------------------------------------------------------


def _round_trip(core: LinkCore, now: float = 0.0) -> Command:
    cmd = core.send({"type": "get_state"}, now=now)
    assert core.next_write() is cmd
    core.write_done(cmd, accepted=len(cmd.data), error=None, now=now)
    assert core.feed(ev("message_update") + resp(cmd), now=now)[-1] == OutcomeKnown(cmd)
    return cmd


def test_acknowledged_commands_are_forgotten_and_the_caller_keeps_them() -> None:
    core = LinkCore()
    held = _round_trip(core)
    refs = [weakref.ref(_round_trip(core)) for _ in range(50)]
    gc.collect()
    assert all(r() is None for r in refs)  # the core holds no acknowledged command
    assert core.in_flight == ()
    assert held.outcome is CommandOutcome.ACKNOWLEDGED and held.response is not None
    pending = core.send({"type": "abort"}, now=1, bound=None)
    assert core.in_flight == (pending,)


def test_second_response_for_a_forgotten_command_is_a_violation_and_poisons() -> None:
    core = LinkCore()
    first = _round_trip(core)
    for _ in range(100):
        _round_trip(core)
    events = core.feed(resp(first), now=1)
    assert isinstance(events[0], ProtocolViolation) and events[0].detail == f"a second response for {first.id}"
    assert isinstance(events[1], Poisoned) and core.poisoned is not None
    assert first.outcome is CommandOutcome.ACKNOWLEDGED


@pytest.mark.parametrize("rid", ["m0", "m01", "m+5", "m 5", "m\u0665", "x5", "m999", "M5", 5, None])
def test_a_response_for_an_id_never_issued_poisons(rid: Any) -> None:
    core = LinkCore()
    for _ in range(10):
        _round_trip(core)
    rec = {"type": "response", "command": "get_state", "success": True}
    if rid is not None:
        rec["id"] = rid
    events = core.feed(encode_record(rec), now=1)
    assert isinstance(events[0], ProtocolViolation)
    assert events[0].detail == ("a response with no id (Pi could not parse a line it read)" if rid is None
                                else f"a response for id {rid!r}, which the link never wrote")
    assert events[1:] == [Poisoned(f"protocol: {events[0].detail}")]


def test_late_response_to_an_unknown_command_is_still_reported_after_many_commands() -> None:
    core = LinkCore(default_bound=5.0)
    for i in range(1000):
        _round_trip(core, now=i * 0.001)
    lost = core.send({"type": "get_state"}, now=10)
    queued = core.send({"type": "get_tree"}, now=10)
    assert core.next_write() is lost
    core.write_done(lost, accepted=len(lost.data), error=None, now=10)
    core.tick(now=15)
    assert lost.outcome is CommandOutcome.UNKNOWN and queued.outcome is CommandOutcome.NOT_WRITTEN
    assert core.feed(resp(lost), now=16) == [LateResponse(lost, core.records_read - 1, json.loads(resp(lost)))]
    assert lost.outcome is CommandOutcome.UNKNOWN and lost.late_responses
    violation = core.feed(resp(queued), now=17)
    assert isinstance(violation[0], ProtocolViolation) and "never wrote" in violation[0].detail


def test_core_memory_does_not_grow_with_the_number_of_commands() -> None:
    # Bounded commands whose deadlines never pass (the clock stands still): the deadline heap's settled
    # entries must be dropped, not kept. Measured as the memory allocated in _link.py and still held.
    core = LinkCore(default_bound=30.0)
    for _ in range(2000):
        _round_trip(core)
    link_file = sys.modules[LinkCore.__module__].__file__
    assert link_file is not None
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(20000):
            _round_trip(core)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    growth = sum(s.size_diff for s in after.compare_to(before, "filename") if s.traceback[0].filename == link_file)
    # 20,000 kept commands or heap entries would be megabytes; a few KiB is dict and heap slack.
    assert growth < 32 * 1024, growth
    assert core.in_flight == () and core.next_deadline() is None


def test_readme_outcome_table_matches_the_core_table() -> None:
    readme = (Path(os.environ.get("MOSAIC_REPO") or Path(__file__).resolve().parents[3])
              / "packages" / "pi-rpc" / "README.md").read_text()
    section = readme.split("### The outcome table", 1)
    assert len(section) == 2, "README.md has no '### The outcome table' section"
    rows = re.findall(r"^\| `([a-z-]+)` \| `([a-z-]+)` \| `([a-z-]+)` \| (?:`([a-z-]+)`)? *\|$",
                      section[1].split("\n#", 1)[0], flags=re.M)
    table = {(CommandOutcome(a), OutcomeInput(b)): (CommandOutcome(c), d or None) for a, b, c, d in rows}
    assert table == dict(OUTCOME_TABLE)
