"""The brief's §9 return flow and events again, on Claude (issue 32 item 6): the core on `ClaudeRules` fed the
lines the real Claude Code 2.1.283 wrote (fixtures/claude-2.1.283/recordings), every client record validated
against the control schema (`core_harness`). Each test is named `test_E<n>_claude_...`; what cannot apply to
Claude, and why, is in the controller README "The §5 and §9 fixtures on Claude"."""

from __future__ import annotations

import json
from typing import Any

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

from mosaic.claude_rpc.testing.recordings import U1
from mosaic.claude_rpc.testing.replay import load_recording
from mosaic.controller.engines.claude import read

Record = dict[str, Any]


def _prompted(name: str, *, observers: int = 0) -> tuple[Harness, list[Record]]:
    """`name`'s initialize, `observers` observers o0.., c1 in control, its prompt written as the recorded line;
    the binary's lines after it."""
    h = claude_harness(U1)
    rest = initialized(h, recording(name))
    for i in range(observers):
        h.observe(f"o{i}")
    h.controller("c1")
    line = rest[0]["msg"]
    assert h.prompt("c1", line["message"]["content"])["outcome"] == "admitted" and h.written()[-1] == line
    return h, rest[1:]


def _kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["eventType"] for e in events]


# ---------------------------------------------------------------------------------------------- E1

def test_E1_claude_the_return_flow_reaches_every_observer_once_in_order_with_no_duplication() -> None:
    """sealed-permission-allow: send, acknowledge, the assistant's tool call, the tool's result, the new final
    answer; the permission request is shown as an open decision (P7), settled as the engine's once its tool
    ran (the recording's driver allowed it, a line the core never wrote). Every client gets the same stream, once each, numbered
    in order; the receipt walks admitted .. finished."""
    h, rest = _prompted("sealed-permission-allow", observers=3)
    feed_each(h, [m for m in outs(rest)])
    streams = [h.clients[c].events() for c in ("o0", "o1", "o2", "c1")]
    assert all(s == streams[0] for s in streams)
    kinds = _kinds(streams[0])
    assert kinds == ["message-start", "message-end", "tool-start",  # the tool call
                     "tool-end",  # its result
                     "message-start", "text-delta", "message-end",  # the new final answer
                     "run-settled"]
    assert [e["sequence"] for e in streams[0]] == list(range(1, len(kinds) + 1))
    assert {e["request"] for e in streams[0]} == {h.receipt()["request"]}
    call = streams[0][1]["payload"]["content"][0]
    assert call["type"] == "toolCall" and streams[0][2]["payload"]["toolCallId"] == call["id"]
    assert streams[0][3]["payload"]["toolCallId"] == call["id"] and streams[0][3]["payload"]["isError"] is False
    final = streams[0][-2]["payload"]
    assert final["updateMode"] == "replace" and final["content"][0]["text"].startswith("tool result seen")
    assert final["message"] != streams[0][1]["payload"]["message"]  # a new message, not the tool call's again
    receipts = h.clients["o0"].records("receipt")
    assert [r["state"] for r in receipts] == ["admitted", "dispatched", "acknowledged", "working", "finished"]
    assert receipts[-1]["turnState"] == "completed"
    shown = h.clients["o0"].records("nativeDecision")
    assert [(d["method"], d["state"], d.get("how")) for d in shown] == [("can_use_tool", "open", None),
                                                                       ("can_use_tool", "settled", "engine")]


# ---------------------------------------------------------------------------------------------- E2

def test_E2_claude_separators_inside_json_strings_stay_one_record_and_one_event() -> None:
    """sealed-text's recorded turn with its assistant text holding U+2028, U+2029 and CRLF (raw in the line, as
    the binary writes non-ASCII: `ensure_ascii` off; CR and LF escaped by JSON): one record, one text-delta
    with the exact text."""
    h, rest = _prompted("sealed-text")
    text = "line\u2028sep and para\u2029sep\r\nCRLF"
    msgs = outs(rest)
    for m in msgs:
        if m["type"] == "assistant":
            m["message"]["content"][0]["text"] = text
    before = h.core.link.records_read
    feed_each(h, msgs)
    assert h.core.link.records_read == before + len(msgs)
    (delta,) = [e for e in h.clients["c1"].events() if e["eventType"] == "text-delta"]
    assert delta["payload"]["delta"] == text
    end = next(e for e in h.clients["c1"].events() if e["eventType"] == "message-end")
    assert end["payload"]["content"] == [{"type": "text", "text": text}]
    assert h.receipt()["state"] == "finished"


# ---------------------------------------------------------------------------------------------- E3

def test_E3_claude_events_carry_the_request_inferred_from_order_and_null_otherwise() -> None:
    """sealed-queued-mid-turn: the recording driver's turn (U1) is not the controller's: its events carry a
    null request. Then the controller's own turn (sealed-text's recorded order) carries its request. After an
    overlap signal (the folded message of sealed-queued-mid-turn with the controller as U1's writer: O1) the
    inference is withdrawn: the rest of that turn correlates with nothing."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-queued-mid-turn"))
    h.controller()
    feed_each(h, [m for m in outs(rest) if m["type"] != "control_response"])
    external = h.clients["c1"].events()
    assert external and {e["request"] for e in external} == {None} and external[-1]["eventType"] == "run-settled"

    h, rest = _prompted("sealed-text")
    feed_each(h, outs(rest))
    ours = h.clients["c1"].events()
    assert {e["request"] for e in ours} == {h.receipt()["request"]} and ours[-1]["eventType"] == "run-settled"

    h, rest = _prompted("sealed-queued-mid-turn")
    before, after = upto(rest, lambda m: m.get("type") == "command_lifecycle" and m["state"] == "started"
                         and m["command_uuid"] != U1)
    feed_each(h, outs(before))
    assert {e["request"] for e in h.clients["c1"].events()} == {h.receipt()["request"]}
    seen = len(h.clients["c1"].events())
    feed_each(h, [m for m in outs(after) if m["type"] != "control_response"])
    assert [o[0] for o in h.core.overlaps][:1] == ["O1"]
    late = h.clients["c1"].events()[seen:]
    assert late and {e["request"] for e in late} == {None}


# ---------------------------------------------------------------------------------------------- E4

def test_E4_claude_the_seam_is_quiet_only_when_nothing_ran_and_a_mid_turn_observer_gets_what_follows() -> None:
    """sealed-text: an observer before the prompt gets a quiet seam; one that observes mid-turn (after the
    `started` frame and `system/init`) gets a loud seam at the next sequence and exactly the events after it,
    ending with run-settled (its cue to re-read the page); a re-observe once the turn settled is quiet."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-text"))
    quiet = h.observe("o1")["seam"]
    assert quiet == {"replay": "unavailable", "streamEpoch": "exec-1", "fromSequence": 1, "reconcile": True,
                     "quiet": True}
    h.controller()
    h.prompt("c1", "hello text")
    msgs = outs(rest[1:])
    feed_each(h, msgs[:3])  # queued, started, init
    loud = h.observe("o2")["seam"]
    assert loud["quiet"] is False and loud["fromSequence"] == h.core.sequence + 1
    feed_each(h, msgs[3:])
    assert [e["sequence"] for e in h.clients["o2"].events()] == list(range(loud["fromSequence"], h.core.sequence + 1))
    assert h.clients["o2"].events()[-1]["eventType"] == "run-settled"
    again = h.observe("o2")["seam"]
    assert again["quiet"] is True and again["fromSequence"] == h.core.sequence + 1


# ---------------------------------------------------------------------------------------------- E5

def test_E5_claude_an_unknown_native_record_is_counted_in_evidence_with_no_client_event() -> None:
    """`system/background_tasks_changed`, as the real binary wrote it under stream-json (recordings/
    interrupt-pending-permission.jsonl, an unsealed run of the pinned binary), is no record the adapter
    maps: no client event, the binding's evidence counts it, the evidence names its type and its bytes."""
    (record,) = [m for m in outs(load_recording(FIXTURES, "interrupt-pending-permission"))
                 if m["type"] == "system" and m.get("subtype") == "background_tasks_changed"]
    assert read(record).unknown is not None
    h = claude_harness(U1)
    initialized(h, recording("sealed-text"))
    h.observe("o")
    h.controller()
    feed(h, record)
    assert h.clients["o"].events() == []
    assert h.clients["o"].records("binding")[-1]["evidence"]["unknownNativeEvents"] == 1
    (evidence,) = [e for e in h.evidence if e.kind == "unknown-native-event"]
    size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode())
    assert evidence.detail == {"type": "system", "bytes": size}
    assert h.core.binding_state == "active" and h.core.admission_open


# ---------------------------------------------------------------------------------------------- E6

def test_E6_claude_a_tool_result_delayed_across_a_pause_and_a_reconnect_reaches_the_new_connection() -> None:
    """sealed-permission-allow: the tool call is out and the permission request pending (the pause); the
    observer disconnects and reconnects; its seam is loud, and the tool's result, read after, reaches it as
    a tool-end with the call's id, then the final answer and run-settled, with no manual refresh."""
    h, rest = _prompted("sealed-permission-allow")
    h.observe("o")
    before, after = upto(rest, is_control("can_use_tool"))
    feed_each(h, outs(before))
    feed(h, after[0]["msg"])  # can_use_tool: the turn waits
    call = next(e for e in h.clients["o"].events() if e["eventType"] == "tool-start")["payload"]["toolCallId"]
    h.disconnect("o")
    seam = h.observe("o2")["seam"]
    assert seam["quiet"] is False
    feed_each(h, outs(after[1:]))
    kinds = _kinds(h.clients["o2"].events())
    assert kinds[0] == "tool-end" and kinds[-1] == "run-settled"
    assert h.clients["o2"].events()[0]["payload"]["toolCallId"] == call


# ---------------------------------------------------------------------------------------------- E7

def test_E7_claude_an_observer_renders_the_same_stream_and_submits_only_as_controller() -> None:
    """The core's half of E7 on Claude (the terminal's own half is mediated-terminal's): an observer's prompt
    is refused `controller` with zero engine bytes; the observer sees the same stream as the controller;
    after it takes control its prompt is the recorded line and its turn streams to it."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-text"))
    h.controller("c1")
    h.observe("b")
    refused(h.prompt("b", "hello text"), "controller")
    assert [r["type"] for r in h.written()] == ["control_request"]
    assert isinstance(h.call("b", "takeover", expectedGeneration=h.core.generation), dict)
    assert h.prompt("b", "hello text")["outcome"] == "admitted" and h.written()[-1] == rest[0]["msg"]
    feed_each(h, outs(rest[1:]))
    assert h.clients["b"].events() == h.clients["c1"].events() and h.clients["b"].events()
    assert h.receipt()["state"] == "finished"
