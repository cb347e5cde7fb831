"""Events (brief §3 "Events", §9 E1-E6), the seam (E4), dialogs (P3) and the tables walked row by row."""

from __future__ import annotations

import json

import pytest
from core_harness import Harness, deltas, full_run, queues, refused, run_end, run_start, state, validate

from mosaic.controller.core import IllegalTransition, Request
from mosaic.controller.tables import (
    CHAT01_EVENT_TYPES,
    DIALOG,
    EVENT_MAP,
    INTERNAL,
    MESSAGE_UPDATE_MAP,
    RECEIPT_STATES,
    RECEIPT_TRANSITIONS,
    classify_native,
)


def tool_turn(h: Harness, text: str) -> None:
    """FACTS Part 2 C: the tool-call turn as pinned Pi streams it."""
    call = {"type": "toolCall", "id": "call_fake_2", "name": "bash", "arguments": {"command": "printf tool-ran-ok"}}
    tool_msg = {"role": "assistant", "content": [call], "stopReason": "toolUse"}
    result = {"role": "toolResult", "toolCallId": "call_fake_2", "toolName": "bash",
              "content": [{"type": "text", "text": "tool-ran-ok"}], "isError": False}
    h.respond("prompt")
    h.engine(*run_start(text))
    h.respond("get_state", data=state(True))
    h.engine(
        {"type": "message_update", "assistantMessageEvent": {"type": "toolcall_start", "contentIndex": 0,
                                                             "id": "call_fake_2", "toolName": "bash"}},
        {"type": "message_update", "assistantMessageEvent": {"type": "toolcall_end", "contentIndex": 0, "toolCall": call}},
        {"type": "message_end", "message": tool_msg},
        {"type": "tool_execution_start", "toolCallId": "call_fake_2", "toolName": "bash",
         "args": {"command": "printf tool-ran-ok"}},
        {"type": "tool_execution_update", "toolCallId": "call_fake_2", "toolName": "bash",
         "args": {"command": "printf tool-ran-ok"}, "partialResult": {"content": []}},
        {"type": "tool_execution_end", "toolCallId": "call_fake_2", "toolName": "bash",
         "result": {"content": [{"type": "text", "text": "tool-ran-ok"}]}, "isError": False},
        {"type": "message_start", "message": result}, {"type": "message_end", "message": result},
        {"type": "turn_end", "message": tool_msg, "toolResults": [result]}, {"type": "turn_start"},
        {"type": "message_start", "message": {"role": "assistant", "content": [], "stopReason": "pending"}},
        *deltas("Tool ", "result ", "was: ", "tool-ran-ok."),
        *run_end("Tool result was: tool-ran-ok."))


def test_E1_the_return_flow_reaches_every_observer_once_in_order_with_no_duplication() -> None:
    h = Harness()
    observers = [h.observe(f"o{i}") and f"o{i}" for i in range(3)]
    h.controller("c1")
    h.prompt("c1", "TOOLCALL please run it")
    tool_turn(h, "TOOLCALL please run it")
    streams = [h.clients[c].events() for c in [*observers, "c1"]]
    assert all(s == streams[0] for s in streams)  # the same stream to every client
    kinds = [e["eventType"] for e in streams[0]]
    assert kinds == ["message-start", "message-end",  # the user message
                     "message-start", "message-end",  # the toolCall
                     "tool-start", "tool-update", "tool-end",
                     "message-start", "message-end",  # the toolResult
                     "message-start", "text-delta", "text-delta", "text-delta", "text-delta", "message-end",
                     "run-settled"]
    assert [e["sequence"] for e in streams[0]] == list(range(1, len(kinds) + 1))
    assert {e["execution"] for e in streams[0]} == {"exec-1"}
    final = streams[0][-2]
    assert final["payload"]["content"] == [{"type": "text", "text": "Tool result was: tool-ran-ok."}]
    assert final["payload"]["updateMode"] == "replace"
    assert "".join(e["payload"]["delta"] for e in streams[0] if e["eventType"] == "text-delta") == \
        "Tool result was: tool-ran-ok."
    receipts = h.clients["o0"].records("receipt")
    assert [r["state"] for r in receipts] == ["admitted", "dispatched", "acknowledged", "working", "finished"]


def test_E2_separators_inside_json_strings_stay_one_record_and_one_event() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    h.respond("prompt")
    h.engine(*run_start("hello"))
    h.respond("get_state", data=state(True))
    h.engine(*deltas("line\u2028sep and para\u2029sep\r\nCRLF"))
    (delta,) = [e for e in h.clients["c1"].events() if e["eventType"] == "text-delta"]
    assert delta["payload"]["delta"] == "line\u2028sep and para\u2029sep\r\nCRLF"


def test_E3_a_multipart_final_is_one_message_end_that_replaces() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "THINK")
    h.respond("prompt")
    h.engine(*run_start("THINK"))
    two = {"role": "assistant", "stopReason": "stop",
           "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "done"}]}
    h.engine({"type": "message_end", "message": two}, {"type": "agent_settled"})
    (end,) = [e for e in h.clients["c1"].events() if e["eventType"] == "message-end" and e["payload"]["role"] == "assistant"]
    assert end["payload"]["content"] == two["content"] and end["payload"]["updateMode"] == "replace"


def test_E4_the_seam_replay_unavailable_quiet_only_when_nothing_ran_or_was_pending() -> None:
    h = Harness()
    quiet = h.observe("o1")["seam"]
    assert quiet == {"replay": "unavailable", "streamEpoch": "exec-1", "fromSequence": 1, "reconcile": True,
                     "quiet": True}
    h.controller()
    h.prompt("c1", "hello")
    h.respond("prompt")
    h.engine(*run_start("hello"))
    loud = h.observe("o2")["seam"]  # a page read just after message_end but before the run settled
    assert loud["quiet"] is False and loud["fromSequence"] == h.core.sequence + 1
    h.respond("get_state", data=state(True))
    h.engine(*deltas("x"), *run_end("x"))
    # o2 got exactly what came after its seam; it re-reads the page after run-settled (the client's part).
    assert [e["sequence"] for e in h.clients["o2"].events()] == list(range(loud["fromSequence"], h.core.sequence + 1))
    assert h.clients["o2"].events()[-1]["eventType"] == "run-settled"


def test_E4_events_between_subscribing_and_the_page_make_the_seam_not_quiet() -> None:
    h = Harness()
    h.controller("c1")
    h.connect("o")
    from mosaic.controller.core import Call, PageRead

    h.auto_page = False
    h.feed(Call("o", 99, "observe", {}))  # subscribed; the page is read off the loop ...
    assert 99 not in h.clients["o"].replies
    h.engine({"type": "agent_start"}, {"type": "message_start", "message": {"role": "user", "content": []}})
    h.feed(PageRead("o", 99, {"ok": True, "page": {}}))  # ... and lands after an event
    assert h.clients["o"].replies[99]["seam"]["quiet"] is False


def test_E5_an_unknown_native_event_is_counted_in_evidence_with_no_client_event() -> None:
    h = Harness()
    h.observe("o")
    h.controller()
    record = {"type": "brand_new_event", "payload": "x" * 10}
    h.engine(record, {"type": "message_update", "assistantMessageEvent": {"type": "new_kind"}})
    assert h.clients["o"].events() == []
    binding = h.clients["o"].records("binding")[-1]
    assert binding["evidence"]["unknownNativeEvents"] == 2
    first = [e for e in h.evidence if e.kind == "unknown-native-event"][0]
    assert first.detail == {"type": "brand_new_event", "bytes": len(json.dumps(record, separators=(",", ":")))}


def test_E6_an_observer_that_reconnects_mid_tool_gets_the_result_after_its_seam() -> None:
    h = Harness()
    h.controller()
    h.observe("o")
    h.prompt("c1", "TOOLCALL")
    h.respond("prompt")
    h.engine(*run_start("TOOLCALL"), {"type": "tool_execution_start", "toolCallId": "t1", "toolName": "bash", "args": {}})
    h.disconnect("o")
    h.respond("get_state", data=state(True))
    seam = h.observe("o2")["seam"]
    assert seam["quiet"] is False  # a reconcile marker at the seam; the result arrives as an event
    h.engine({"type": "tool_execution_end", "toolCallId": "t1", "toolName": "bash", "result": {"content": []},
              "isError": False}, *run_end("done"))
    kinds = [e["eventType"] for e in h.clients["o2"].events()]
    assert kinds[0] == "tool-end" and kinds[-1] == "run-settled"


def test_P3_a_native_dialog_is_shown_disabled_and_never_answered() -> None:
    h = Harness()
    h.observe("o")
    h.controller()
    for method in ("input", "editor", "select", "confirm"):
        h.engine({"type": "extension_ui_request", "id": f"ui-{method}", "method": method, "title": "Pick \u202e",
                  "options": ["a", "b"]})
    dialogs = h.clients["o"].records("nativeDecision")
    assert [d["method"] for d in dialogs] == ["input", "editor", "select", "confirm"]
    assert all(d["state"] == "disabled" and d["reason"] for d in dialogs)
    assert h.engine_bytes == b""  # never answered
    h.engine({"type": "extension_ui_request", "id": "n", "method": "notify", "message": "/llama ..."})
    assert len(h.clients["o"].records("nativeDecision")) == 4 and h.core.dialogs == 4


# The first dialog of the Pi 0.85.1 recording (/work/shared/claude-2.1.283/recordings/
# pi-0.85.1-dialogs-rpc.jsonl, line 4: an extension's confirm, as Pi's RPC mode wrote it).
RECORDED_CONFIRM = {"type": "extension_ui_request", "id": "6b820d16-61c3-452b-850f-6d86f4a6ce11", "method": "confirm",
                    "title": "Allow <b>rm</b>?", "message": "Run \u202erm -rf\u202c now?"}


def _stop_records(h: Harness, stop_id: str) -> list[dict[str, object]]:
    return [r for r in h.clients["o"].records("stop") if r["stop"] == stop_id]


def test_P3_a_stop_without_a_dialog_is_resolved_and_one_begun_after_a_pi_dialog_is_uncertain() -> None:
    """Seed "Approval": a stop's record says approvalDisposition `resolved` while the execution showed no
    dialog, and `uncertain` for a stop begun after Pi showed one (the controller never answers it, so
    what Pi decided is unknown)."""
    h = Harness()
    h.observe("o")
    h.controller()
    h.engine(*run_start("an extension's message"))  # something to interrupt
    first = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert first["approvalDisposition"] == "resolved"
    h.respond("clear_queue", data=queues())
    h.respond("abort")
    h.engine(*run_end("an extension's message", "aborted"))
    assert {r["approvalDisposition"] for r in _stop_records(h, first["stop"])} == {"resolved"}
    h.engine(RECORDED_CONFIRM)
    assert [d["state"] for d in h.clients["o"].records("nativeDecision")] == ["disabled"]
    force = h.call("c1", "force-stop", confirmation=h.confirm("c1"))["stop"]
    assert force["approvalDisposition"] == "uncertain"
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="stopped", proofDigest="sha256:" + "0" * 64)
    assert {r["approvalDisposition"] for r in _stop_records(h, force["stop"])} == {"uncertain"}


def test_P3_a_pi_dialog_during_a_stop_makes_that_stops_approval_uncertain() -> None:
    """The dialog comes while the force stop runs (begun `resolved`): from then on its record says
    `uncertain`, so the stop's end reports it."""
    h = Harness()
    h.observe("o")
    h.controller()
    h.engine(*run_start("an extension's message"))
    force = h.call("c1", "force-stop", confirmation=h.confirm("c1"))["stop"]
    assert force["approvalDisposition"] == "resolved"
    h.engine(RECORDED_CONFIRM)
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="stopped", proofDigest="sha256:" + "0" * 64)
    final = _stop_records(h, force["stop"])[-1]
    assert final["state"] == "stopped" and final["approvalDisposition"] == "uncertain"


def test_E3_events_carry_the_request_inferred_from_order_and_null_otherwise() -> None:
    h = Harness()
    h.controller()
    h.engine(*full_run("an extension's message"))  # no Mosaic request started this run
    h.prompt("c1", "hello")
    h.respond("prompt")
    h.engine(*run_start("hello"))
    h.respond("get_state", data=state(True))
    h.engine(*deltas("Hi"), *run_end("Hi"))
    events = h.clients["c1"].events()
    request = h.receipt()["request"]
    cut = [e["eventType"] for e in events].index("run-settled") + 1
    external, ours = events[:cut], events[cut:]
    assert {e["request"] for e in external} == {None} and external[-1]["eventType"] == "run-settled"
    assert {e["request"] for e in ours} == {request} and ours[-1]["eventType"] == "run-settled"
    # After an overlap signal the inference is withdrawn: the rest of that run correlates with nothing.
    h.prompt("c1", "again")
    h.respond("prompt")
    h.engine(*run_start("again"), {"type": "agent_settled"})  # O3
    h.engine(*deltas("late"))
    assert h.clients["c1"].events()[-1]["request"] is None


def test_fan_out_sends_each_event_once_per_subscriber_in_one_notify() -> None:
    h = Harness()
    for i in range(64):
        h.observe(f"o{i}")
    h.controller()
    h.prompt("c1", "hello")
    h.respond("prompt")
    from mosaic.controller.core import EngineEvents, Notify

    events = h.core.link.feed(b"".join(__import__("json").dumps(r).encode() + b"\n" for r in run_start("hello")), now=h.now)
    out = h.core.receive(EngineEvents("exec-1", events), now=h.now)
    notes = [a for a in out if isinstance(a, Notify) and a.method == "event"]
    # run_start holds three client events (the user message's start and end, the assistant's start): one
    # Notify each, addressed to all 65 subscribers at once, in sequence order.
    assert [n.params["eventType"] for n in notes] == ["message-start", "message-end", "message-start"]
    assert all(sorted(n.to) == sorted([*(f"o{i}" for i in range(64)), "c1"]) for n in notes)
    assert [n.params["sequence"] for n in notes] == [1, 2, 3]


# --------------------------------------------------------------------------------------------- tables

def test_event_map_is_walked_every_row_maps_to_a_chat01_type_internal_or_dialog() -> None:
    allowed = set(CHAT01_EVENT_TYPES) | {INTERNAL, DIALOG, "message_update"}
    for native, mapped in EVENT_MAP.items():
        assert mapped in allowed, native
        if native == "message_update":
            for sub, sub_mapped in MESSAGE_UPDATE_MAP.items():
                assert classify_native({"type": native, "assistantMessageEvent": {"type": sub}}) == sub_mapped
        elif native == "extension_ui_request":
            assert classify_native({"type": native, "method": "confirm"}) == DIALOG
            assert classify_native({"type": native, "method": "notify"}) == INTERNAL
            assert classify_native({"type": native, "method": "novel"}) is None
        else:
            assert classify_native({"type": native}) == mapped
    assert set(CHAT01_EVENT_TYPES) <= set(EVENT_MAP.values()) | set(MESSAGE_UPDATE_MAP.values())
    for unknown in ({"type": "nope"}, {"type": 3}, {}, {"type": "message_update"}):
        assert classify_native(unknown) is None


def test_every_record_type_documented_in_facts_is_in_the_event_map() -> None:
    # FACTS (b) "Every record type written to stdout", the AgentSessionEvent list.
    facts = ("agent_start agent_end agent_settled turn_start turn_end message_start message_update message_end "
             "tool_execution_start tool_execution_update tool_execution_end queue_update compaction_start "
             "compaction_end auto_retry_start auto_retry_end summarization_retry_scheduled "
             "summarization_retry_attempt_start summarization_retry_finished bash_execution_update "
             "entry_appended session_info_changed thinking_level_changed extension_ui_request extension_error")
    assert set(facts.split()) == set(EVENT_MAP)


def test_receipt_transitions_are_walked_and_nothing_else_moves() -> None:
    for old in RECEIPT_STATES:
        for new in RECEIPT_STATES:
            request = Request("r1", "cr", "local-operator", "c", "exec-1", "inc", 1, "c1", "sha256:" + "0" * 64, 1, 0.0)
            request.receipt = old
            if (old, new) in RECEIPT_TRANSITIONS:
                request.move(new, 1.0)
                assert request.receipt == new
                validate(request.receipt_record())
            else:
                with pytest.raises(IllegalTransition):
                    request.move(new, 1.0)
    assert "unsent" not in RECEIPT_STATES
    assert not [t for t in RECEIPT_TRANSITIONS if t[0] in ("finished", "failed", "delivery-unknown")]


def test_a_finished_run_leaves_a_quiet_engine_and_no_open_slot() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    h.turn("hello")
    assert h.core.slot is None and not h.core.run.active and h.core.binding_record()["engineState"] == "idle"
    refused(h.call("c1", "interrupt", generation=h.core.generation), "no-turn")
    assert queues() == {"steering": [], "followUp": []}


def test_E4_a_re_observe_on_a_subscribed_connection_reports_its_own_cut() -> None:
    # A client reconciling at a seam re-reads the page on the same connection: that read has its own
    # fromSequence and quiet, so the marker can clear once the engine is idle.
    h = Harness()
    h.controller()
    h.observe("o")
    h.prompt("c1", "hello")
    h.turn("hello")
    again = h.observe("o")["seam"]
    assert again["quiet"] is True and again["fromSequence"] == h.core.sequence + 1
    receipts = h.observe("o")["receipts"]
    assert [r["state"] for r in receipts] == ["finished"] and receipts[0]["incarnation"] == h.core.config.incarnation
