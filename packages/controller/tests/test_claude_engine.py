"""The Claude adapter (`engines/claude`, issue 32) through the core, on recorded orders only: the lines the
real Claude Code 2.1.283 wrote (fixtures/claude-2.1.283/recordings), fed as it wrote them; the lines the core
writes checked against the recorded client lines. Admission, a run and its settle; an interrupt reconciled;
Claude's overlap rows; the CHAT-01 events in the shape Pi's adapter gives the same turn."""

from __future__ import annotations

from typing import Any

import pytest
from claude_recorded import (
    FIXTURES,
    claude_harness,
    feed,
    feed_each,
    initialized,
    is_control,
    outs,
    recording,
    upto,
)
from core_harness import Harness, refused

from mosaic.claude_rpc.testing.recordings import U1, U2
from mosaic.claude_rpc.testing.replay import line_of, send_for
from mosaic.controller.engines.claude import CLAUDE_OVERLAP_SIGNALS as OVERLAP_SIGNALS
from mosaic.controller.engines.claude import CLAUDE_RULES, ClaudeRules, read
from mosaic.controller.engines.pi import OVERLAP_SIGNALS as PI_OVERLAP_SIGNALS
from mosaic.pi_rpc.link import OutcomeKnown


def test_claude_prompt_runs_and_settles_finished_completed_on_sealed_text() -> None:
    """sealed-text: the prompt is a stream-json user message with the slot's uuid; its `queued` frame is the
    ack (acknowledged), `started` makes it working, `result` settles it finished completed; admission opens."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-text"))
    h.controller()
    refused(h.prompt("c1", " /compact"), "text-policy")  # a slash command is never sent
    rest = _prompted_line(h, rest, "hello text")
    msgs = outs(rest)
    feed(h, msgs[0])  # command_lifecycle queued
    assert h.receipt()["state"] == "acknowledged"
    assert h.core.slot is not None and h.core.slot.probe is None  # no probe on Claude
    feed(h, msgs[1])  # started
    assert h.receipt()["state"] == "working"
    refused(h.prompt("c1", "again"), "busy")
    feed_each(h, msgs[2:])
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "completed"
    assert h.core.slot is None and h.core.admission_open and not h.core.overlaps
    assert [r["type"] for r in h.written()] == ["control_request", "user"]


def _prompted_line(h: Harness, rest: list, text: str) -> list:
    assert h.prompt("c1", text)["outcome"] == "admitted"
    line, after = rest[0], rest[1:]
    assert line["dir"] == "in" and h.written()[-1] == line["msg"]
    return after


def test_claude_events_have_the_shape_pi_gives_the_same_turn() -> None:
    """The same reply through Pi's adapter and Claude's: the assistant message's CHAT-01 events (start, one
    delta, end with the whole content and stopReason, then run-settled) have the same types and payload
    keys, numbered by the core alike. Claude does not echo the person's prompt: Pi's user message events
    are the only ones Claude's turn lacks."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-text"))
    h.controller()
    rest = _prompted_line(h, rest, "hello text")
    feed_each(h, outs(rest))
    claude_events = h.clients["c1"].events()
    pi = Harness()
    pi.controller()
    pi.prompt("c1", "hello text")
    pi.turn("hello text", "Reply to: hello text")
    pi_events = [e for e in pi.clients["c1"].events() if e["payload"].get("role") != "user"]
    assert [e["eventType"] for e in claude_events] == ["message-start", "text-delta", "message-end", "run-settled"]
    shape = [(e["eventType"], e["payload"].get("role")) for e in pi_events]
    assert [(e["eventType"], e["payload"].get("role")) for e in claude_events] == \
        [shape[0], ("text-delta", None), *shape[-2:]]
    for mine, theirs in ((claude_events[0], pi_events[0]), (claude_events[2], pi_events[-2]),
                         (claude_events[3], pi_events[-1])):
        assert set(mine["payload"]) == set(theirs["payload"]) - {"usage", "timestamp"} or \
            set(mine["payload"]) <= set(theirs["payload"]), (mine, theirs)
    end = claude_events[2]["payload"]
    assert end["content"] == [{"type": "text", "text": "Reply to: hello text"}] and end["stopReason"] == "stop"
    assert end["message"] == claude_events[0]["payload"]["message"]
    assert all(e["request"] == h.receipt()["request"] for e in claude_events)


def _idle_answer() -> dict[str, Any]:
    """An idle interrupt's answer as the binary wrote it (recordings/sealed-controls: `still_queued` [],
    `cancelled` []), for the chain's abort and for the post-settle clear (with the id the core wrote)."""
    idle: dict[str, Any] = recording("sealed-controls")[3]["msg"]
    assert idle["response"]["response"] == {"still_queued": [], "cancelled": []}
    return idle


def _answer(idle: dict[str, Any], request_id: str) -> dict[str, Any]:
    return {**idle, "response": {**idle["response"], "request_id": request_id}}


def _interrupt(h: Harness, name: str, answer_at: str) -> str:
    """`name` through the core: the controller's prompt (U1), its interrupt (`cancel_queued`) where the
    recording's driver interrupted, the binary's lines as recorded, the chain's abort answered before or
    after the turn's `result`. Lines of the recording's driver that are not the controller's (another
    message, an answer to a permission request) are input from elsewhere: not written by the core, and
    what the binary wrote after them is fed as recorded. Returns the stop's id."""
    rest = initialized(h, recording(name))
    h.controller()
    rest = _prompted_line(h, rest, rest[0]["msg"]["message"]["content"])
    before, rest = upto(rest, is_control("interrupt"))
    feed_each(h, outs(before))
    assert h.receipt()["state"] == "working"
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]["stop"]
    assert h.written()[-1] == rest[0]["msg"]  # exactly the recorded interrupt r2, `cancel_queued`
    answer, after = upto(rest[1:], lambda m: m.get("type") == "control_response")
    feed_each(h, outs(answer))
    feed(h, after[0]["msg"])  # r2: the receipt
    assert [r.get("request", {}).get("subtype") for r in h.written()][-2:] == ["interrupt", "interrupt"]
    idle = _idle_answer()
    abort = _answer(idle, h.written()[-1]["request_id"])
    tail = outs(after[1:])
    if answer_at == "before-result":
        feed(h, abort)
        assert h.core.stop is not None and h.core.stop.step == "abort"  # held by the wire: a turn still runs
        feed_each(h, tail)
    else:
        feed_each(h, tail)
        assert h.core.stop is not None and h.core.stop.step == "abort"
        feed(h, abort)
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted"
    post = h.written()[-1]
    assert post["request"] == {"subtype": "interrupt", "cancel_queued": True}  # the post-settle clear
    assert not h.core.admission_open
    feed(h, _answer(idle, post["request_id"]))
    return stop


@pytest.mark.parametrize("answer_at", ["before-result", "after-result"])
def test_claude_interrupt_is_reconciled_interrupted(answer_at: str) -> None:
    """R3-1 on Claude (sealed-interrupt-pending-permission: one message, a permission request pending): the
    interrupt is one `interrupt` request with `cancel_queued` (it clears and aborts: `clear_aborts`); its
    receipt (nothing still queued, nothing cancelled) proves nothing queued runs, so the chain's abort, a
    second interrupt, goes out; its answer is taken only once the turn ended (held by the wire when it
    arrives first); the turn ends interrupted (the `[Request interrupted by user]` record is the chain's,
    never O4); the post-settle clear is answered empty and the stop reconciled; admission opens again."""
    h = claude_harness(U1)
    stop = _interrupt(h, "sealed-interrupt-pending-permission", answer_at)
    final = h.clients["c1"].records("stop")[-1]
    assert final["stop"] == stop and final["state"] == "reconciled", final
    assert h.core.admission_open and h.core.stop is None and not h.core.overlaps


def test_claude_interrupt_that_cancelled_anothers_message_ends_uncertain() -> None:
    """sealed-interrupt-cancel-queued: a message from elsewhere (U2, the recording driver's) was queued when
    the controller interrupted; the receipt lists it cancelled. Nothing queued runs (the proof holds, so the
    abort goes out and the turn ends interrupted), but the interrupt removed input from outside Mosaic: the
    core's C-1 rule ends the stop uncertain (external-items-removed), the removed uuid in evidence."""
    h = claude_harness(U1)
    stop = _interrupt(h, "sealed-interrupt-cancel-queued", "after-result")
    final = h.clients["c1"].records("stop")[-1]
    assert final["stop"] == stop and final["state"] == "uncertain" and final["reason"] == "external-items-removed"
    (proof,) = h.clients["c1"].records("turnProof")
    assert proof["clears"][0]["followUp"] == 1 and proof["removedExternal"] == 1 and not h.core.overlaps
    (removed,) = [e for e in h.evidence if e.kind == "removed-external-items"]
    assert removed.detail["items"][0]["bytes"] == len(U2)  # the uuid the receipt listed cancelled


def test_claude_O1_a_message_folded_into_the_running_turn() -> None:
    """sealed-queued-mid-turn: a message from elsewhere (U2) is `started` inside the slot's turn (folded
    into it, no init of its own): O1, the slot settles delivery-unknown (run-overlap) and admission closes.
    The turn's `can_use_tool` is a decision open to the controller (P7); the recording's driver answered it
    (not the controller), so the tool's result settles it as the engine's (`how: engine`)."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-queued-mid-turn"))
    h.controller()
    rest = _prompted_line(h, rest, rest[0]["msg"]["message"]["content"])
    before, rest = upto(rest, lambda m: m.get("type") == "command_lifecycle" and m["state"] == "started"
                        and m["command_uuid"] != U1)
    feed_each(h, outs(before))
    assert not h.core.overlaps
    shown = h.clients["c1"].records("nativeDecision")
    assert [(d["method"], d["state"], d.get("how")) for d in shown] == [("can_use_tool", "open", None),
                                                                       ("can_use_tool", "settled", "engine")]
    feed(h, rest[0]["msg"])
    assert [o[0] for o in h.core.overlaps] == ["O1"]
    assert h.receipt()["state"] == "delivery-unknown" and not h.core.admission_open


def test_claude_O5_a_message_queued_in_the_interrupts_pause() -> None:
    """sealed-interrupt-then-message: a message from elsewhere reaches the engine just after the interrupt
    (its `queued` frame comes after the receipt, in the same read): the interrupt did not cancel it, and it
    runs after as a new turn (the recording's next turn). The core sees it before the abort goes out: O5,
    no abort written, the stop ends uncertain."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-interrupt-then-message"))
    h.controller()
    rest = _prompted_line(h, rest, "SLOW please")
    before, rest = upto(rest, is_control("interrupt"))
    feed_each(h, outs(before))
    h.call("c1", "interrupt", generation=h.core.generation)
    assert h.written()[-1] == rest[0]["msg"]
    assert rest[1]["dir"] == "in"  # the message from elsewhere, written after the interrupt
    receipt, queued = rest[2]["msg"], rest[3]["msg"]
    assert receipt["type"] == "control_response" and queued["state"] == "queued"
    feed(h, receipt, queued)
    assert [o[0] for o in h.core.overlaps] == ["O5"]
    assert [r.get("request", {}).get("subtype") for r in h.written()].count("interrupt") == 1  # no abort
    assert h.clients["c1"].records("stop")[-1]["state"] == "uncertain"


def test_claude_overlap_table_has_pis_codes_in_claudes_orders() -> None:
    """Claude's overlap table is beside Pi's with the same codes (the core decides by code) and its own
    wire orders in every row."""
    assert set(OVERLAP_SIGNALS) == set(PI_OVERLAP_SIGNALS)
    assert all(OVERLAP_SIGNALS[k].when != PI_OVERLAP_SIGNALS[k].when for k in OVERLAP_SIGNALS)
    assert CLAUDE_RULES.overlap_signals is OVERLAP_SIGNALS and CLAUDE_RULES.clear_aborts


def test_claude_reads_every_record_type_the_recordings_hold() -> None:
    """Every record the binary wrote in the sealed recordings (but the control responses the wire takes as
    answers) reads as a known fact, never as unknown; a type the recordings do not hold is counted unknown
    with its size (C-4 interim)."""
    seen: dict[str, int] = {}
    for path in sorted((FIXTURES / "claude-2.1.283" / "recordings").glob("sealed-*.jsonl")):
        for msg in outs(recording(path.stem)):
            if msg["type"] == "control_response":
                continue
            reading = read(msg)
            assert reading.unknown is None, msg
            seen[reading.kind] = seen.get(reading.kind, 0) + 1
    assert set(seen) == {"command_lifecycle", "system", "assistant", "user", "result", "stream_event",
                         "control_request", "control_cancel_request"}
    odd = {"type": "keep_alive"}
    assert read(odd).unknown == ("keep_alive", len(b'{"type":"keep_alive"}'))
    assert read({"type": "system", "subtype": "compact_boundary"}).unknown is not None


def test_claude_interrupt_receipt_without_the_proof_is_a_failed_clear() -> None:
    """R3-1 fenced: sealed-interrupt-still-queued at the wire, its client lines written as recorded (the
    recording's driver sent a plain interrupt, which the controller never does): the receipt lists the
    queued message (U2) still queued, so the clear is refused (`clear_answer` not ok: the chain writes no
    abort and the stop ends uncertain); the recording then shows why: U2 starts as a new turn after the
    interrupted turn's `result`."""
    rules = ClaudeRules(uuids=iter([U1]).__next__)
    link = rules.new_wire(command_bound=30.0)
    answers = []
    started_after_result: list[str] = []
    seen_result = False
    for rec in recording("sealed-interrupt-still-queued"):
        msg = rec["msg"]
        if rec["dir"] == "in":
            if msg.get("type") == "user" and msg["uuid"] == U1:
                link.send_prompt(msg["message"]["content"], now=0.0)
            else:
                send_for(link.claude, msg, now=0.0)
            while (cmd := link.next_write()) is not None:
                assert cmd.record == msg
                link.write_done(cmd, accepted=len(cmd.data), error=None, now=0.0)
            continue
        for event in link.feed(line_of(msg), now=0.0):
            if isinstance(event, OutcomeKnown) and event.command.type == "interrupt":
                answers.append(rules.clear_answer(event.command))
        seen_result = seen_result or msg.get("type") == "result"
        if seen_result and msg.get("type") == "command_lifecycle" and msg["state"] == "started":
            started_after_result.append(msg["command_uuid"])
    (cleared,) = answers
    assert not cleared.ok and f"still queued ['{U2}']" in cleared.error
    assert started_after_result == [U2]


def test_claude_reads_a_tool_call_and_its_result_as_pi_shows_them() -> None:
    """sealed-permission-allow's records: the assistant's `tool_use` is a message ending `toolUse` whose
    content names a `toolCall` with its `arguments`, then a `tool-start` (its id opens a tool call, K5); the
    user record's `tool_result` is a `tool-end` with the same id (it closes the call)."""
    msgs = outs(recording("sealed-permission-allow"))
    assistant = next(m for m in msgs if m["type"] == "assistant"
                     and any(b.get("type") == "tool_use" for b in m["message"]["content"]))
    use = next(b for b in assistant["message"]["content"] if b["type"] == "tool_use")
    reading = read(assistant)
    assert reading.event == ("message-start", {"role": "assistant", "content": []})
    kinds = [e[0] for e in reading.events]
    assert kinds[-2:] == ["message-end", "tool-start"]
    end, start = reading.events[-2][1], reading.events[-1][1]
    assert end["stopReason"] == "toolUse" and {"type": "toolCall", "id": use["id"], "name": use["name"],
                                               "arguments": use["input"]} in end["content"]
    assert start == {"toolCallId": use["id"], "toolName": use["name"], "args": use["input"]}
    assert reading.tool_start == (use["id"], use["name"])
    result = next(m for m in msgs if m["type"] == "user" and isinstance(m["message"]["content"], list)
                  and any(b.get("type") == "tool_result" for b in m["message"]["content"]))
    back = read(result)
    assert back.tool_end == use["id"] and back.event is not None and back.event[0] == "tool-end"
    assert back.event[1]["toolCallId"] == use["id"] and not back.aborted_message


def test_claude_a_turn_from_elsewhere_is_shown_unattributed_and_the_prompt_refused_busy() -> None:
    """sealed-queued-mid-turn with the controller as the second writer: a turn from elsewhere (U1, the
    recording driver's) runs; its events carry no request (E3). The controller does not write the
    recording's second message while that turn streams: its prompt is refused busy (no broker queue), so
    O2 (an ack while another's run goes) cannot arise from admission on this order; the engine's later
    frames for that message (queued, then started inside the turn) are another's input: O1."""
    h = claude_harness(U2)
    rest = initialized(h, recording("sealed-queued-mid-turn"))
    h.controller()
    before, rest = upto(rest, lambda m: m.get("type") == "user" and m.get("uuid") == U2)
    feed_each(h, outs(before))  # U1 queued, started, init, assistant, can_use_tool: not the controller's
    assert h.core.slot is None and not h.core.overlaps
    events = h.clients["c1"].events()
    assert [e["eventType"] for e in events][:1] == ["message-start"] and all(e["request"] is None for e in events)
    refused(h.prompt("c1", rest[0]["msg"]["message"]["content"]), "busy")
    assert [r["type"] for r in h.written()] == ["control_request"]  # only the lifecycle's initialize
    after = [m for m in outs(rest) if m.get("type") != "control_response"]
    feed_each(h, after)
    assert [o[0] for o in h.core.overlaps][:1] == ["O1"]


def test_claude_overlap_table_is_the_readmes() -> None:
    """The controller README's Claude overlap table lists exactly `CLAUDE_OVERLAP_SIGNALS`, row by row."""
    readme = (FIXTURES.parent / "packages" / "controller" / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Claude Code (issue 32, first slice)", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| O")]
    assert rows == [f"| {k} | {v.when} | {v.why} |" for k, v in OVERLAP_SIGNALS.items()]
