"""Claude's permission requests through the core (issue 32 item 4: P7 and H5-H8 on Claude), on recorded
orders only: every line the real Claude Code 2.1.283 wrote (fixtures/claude-2.1.283/recordings, sealed-*),
fed as it wrote them; every line the core writes checked against the recorded client line. A `can_use_tool`
is a decision answered `allow once` or `deny` (no `answer_dialogs` option: P7 is not gated on C-2), each one
`control_response` with Claude's exact request id; the widening suggestions refused; no cancel."""

from __future__ import annotations

import json
from typing import Any

from claude_recorded import (
    claude_harness,
    feed,
    feed_each,
    initialized,
    ins,
    is_control,
    outs,
    recording,
    upto,
)
from claude_recorded import wire as claude_wire
from core_harness import Harness, refused

from mosaic.claude_rpc.testing.recordings import U1
from mosaic.controller.engines.claude import CLAUDE_RULES, read

Record = dict[str, Any]


def _asked(h: Harness, name: str) -> tuple[Record, list[Record]]:
    """`name` through the core up to Claude's `can_use_tool`: an observer, the controller, its prompt (the
    recorded user line, byte for byte), the binary's lines as recorded. The request and the rest."""
    rest = initialized(h, recording(name))
    h.observe("o")
    h.controller()
    line, rest = rest[0], rest[1:]
    assert h.prompt("c1", line["msg"]["message"]["content"])["outcome"] == "admitted"
    assert h.written()[-1] == line["msg"]
    before, rest = upto(rest, is_control("can_use_tool"))
    feed_each(h, outs(before))
    request = rest[0]["msg"]
    feed(h, request)
    return request, rest[1:]


def _decisions(h: Harness) -> list[Record]:
    return h.clients["o"].records("nativeDecision")


def _responses(h: Harness) -> list[Record]:
    """The control_responses the core wrote (its permission answers)."""
    return [r for r in h.written() if r["type"] == "control_response"]


def _approve(h: Harness, decision: str, choice: str, conn: str = "c1", generation: int | None = None) -> Any:
    return h.call(conn, "approval", generation=h.core.generation if generation is None else generation,
                  decision=decision, choice=choice)


def _line(msg: Record) -> bytes:
    """A client line as claude-rpc writes it (compact JSON, one LF)."""
    return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode("ascii") + b"\n"


def _choice(request: Record, label: str) -> Record:
    ask = read(request).dialog
    assert ask is not None and ask.choices is not None
    return dict(dict(ask.choices)[label])


def test_P7_a_permission_request_is_allow_once_or_deny_only_the_widening_suggestions_refused() -> None:
    """sealed-permission-allow: with the option off (a Claude seat needs none), the `can_use_tool` is a
    decision `open` to the controller: Claude's exact request id as `native`, the tool, its input and Claude's
    description as data, choices exactly `allow once` and `deny`; the three widening suggestions (a rule saved
    to localSettings, a directory for the session, acceptEdits) listed refused with why, never offered; no
    cancel. Every other label (a generic yes, a cancel, a suggestion's words) is refused `decision` and writes
    nothing. `allow once` writes one control_response: the recorded allow, byte for byte (the exact id, the
    request's own input as `updatedInput`, nothing widened). The tool runs (Claude's result is the evidence):
    the decision is settled, the run finished completed, a stop after it resolved."""
    h = claude_harness(U1)
    assert h.core.config.answer_dialogs is False
    request, rest = _asked(h, "sealed-permission-allow")
    (shown,) = _decisions(h)
    body = request["request"]
    assert shown["state"] == "open" and shown["method"] == "can_use_tool"
    assert shown["native"] == request["request_id"] and shown["nativeDecision"] != request["request_id"]
    assert shown["choices"] == ["allow once", "deny"]
    assert (shown["tool"], shown["input"], shown["description"]) == (body["tool_name"], body["input"],
                                                                     body["description"])
    assert (shown["blockedPath"], shown["toolUseId"]) == (body["blocked_path"], body["tool_use_id"])
    assert shown["title"] == "Claude asks to use Bash"
    widening = shown["refusedChoices"]
    assert [s["type"] for s in body["permission_suggestions"]] == ["addRules", "addDirectories", "setMode"]
    assert len(widening) == 3 and all("widens" in w["reason"] for w in widening)
    assert "touch made-by-allow *" in widening[0]["choice"] and "localSettings" in widening[0]["choice"]
    assert "<scratch>/proj" in widening[1]["choice"] and "acceptEdits" in widening[2]["choice"]
    assert not any("cancel" in w["choice"] for w in widening)
    for other in ("yes", "allow", "Allow once", "allow always", "cancel", *[w["choice"] for w in widening]):
        refused(_approve(h, shown["nativeDecision"], other), "decision")
    assert _responses(h) == []
    reply = _approve(h, shown["nativeDecision"], "allow once")
    assert isinstance(reply, dict), reply
    assert reply["decision"]["state"] == "answered" and reply["decision"]["answer"] == "allow once"
    answer, after = rest[0], rest[1:]
    assert answer["dir"] == "in" and answer["msg"]["type"] == "control_response"
    assert _responses(h) == [answer["msg"]]
    assert bytes(h.engine_bytes).endswith(_line(answer["msg"]))
    assert _choice(request, "allow once") == answer["msg"]["response"]["response"]
    feed_each(h, outs(after))
    assert _decisions(h)[-1]["state"] == "settled" and _decisions(h)[-1]["how"] == "answered"
    (end,) = [e for e in h.clients["o"].events() if e["eventType"] == "tool-end"]
    assert end["payload"]["isError"] is False  # the tool ran
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "completed"
    assert len(_responses(h)) == 1
    stop = h.call("c1", "force-stop", confirmation=h.confirm("c1"))["stop"]
    assert stop["approvalDisposition"] == "resolved"  # every decision settled by Claude's evidence


def test_P7_deny_writes_one_control_response_with_the_exact_id_and_the_tool_is_refused() -> None:
    """sealed-permission-deny: `deny` writes one control_response, the recorded deny with the controller's
    message (the recording's driver wrote its own words): the exact request id, `behavior: deny`; Claude's tool
    result is an error (the tool did not run) and settles the decision; the turn goes on and finishes."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-permission-deny")
    (shown,) = _decisions(h)
    _approve(h, shown["nativeDecision"], "deny")
    answer, after = rest[0], rest[1:]
    deny = _choice(request, "deny")
    assert set(deny) == {"behavior", "message"} and deny["behavior"] == "deny" and deny["message"]
    expected = {"type": "control_response", "response": {**answer["msg"]["response"], "response": deny}}
    assert answer["msg"]["response"]["request_id"] == request["request_id"]
    assert _responses(h) == [expected] and bytes(h.engine_bytes).endswith(_line(expected))
    feed_each(h, outs(after))
    (end,) = [e for e in h.clients["o"].events() if e["eventType"] == "tool-end"]
    assert end["payload"]["isError"] is True
    assert _decisions(h)[-1]["state"] == "settled" and _decisions(h)[-1]["how"] == "answered"
    assert h.receipt()["state"] == "finished" and len(_responses(h)) == 1


def test_H6_claude_the_same_answer_twice_writes_one_control_response() -> None:
    """sealed-permission-allow: `allow once` twice, before and after Claude's result: the same reply each
    time, one native response."""
    h = claude_harness(U1)
    _, rest = _asked(h, "sealed-permission-allow")
    projection = _decisions(h)[0]["nativeDecision"]
    first = _approve(h, projection, "allow once")
    again = _approve(h, projection, "allow once")
    assert again == first and len(_responses(h)) == 1
    feed_each(h, outs(rest[1:]))
    late = _approve(h, projection, "allow once")
    assert late["decision"]["answer"] == "allow once" and late["decision"]["state"] == "settled"
    assert len(_responses(h)) == 1


def test_H7_claude_a_conflicting_answer_to_the_same_request_is_refused() -> None:
    """sealed-permission-allow: `allow once`, then `deny` for the same request: the second is refused
    `decision` (H7, naming the first answer); one native response, the allow."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-permission-allow")
    projection = _decisions(h)[0]["nativeDecision"]
    _approve(h, projection, "allow once")
    second = refused(_approve(h, projection, "deny"), "decision")
    assert "H7" in second["message"] and "'allow once'" in second["message"]
    assert _responses(h) == [rest[0]["msg"]]
    assert _responses(h)[0]["response"]["request_id"] == request["request_id"]


def test_H5_claude_after_a_takeover_the_old_controller_is_refused_and_the_new_projection_answers_once() -> None:
    """sealed-permission-deny: c1 controls when Claude asks; c2 takes over: the decision is reprojected (a new
    id for the same request, the old one superseded). c1's answer is refused (its generation, then not the
    controller), the old projection is refused to c2 (H5), nothing is written; c2 denies through the new
    projection: one control_response with Claude's exact id."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-permission-deny")
    old = _decisions(h)[0]["nativeDecision"]
    stale = h.core.generation
    h.controller("c2")
    superseded, new = _decisions(h)[1:]
    assert superseded["state"] == "superseded" and superseded["supersededBy"] == new["nativeDecision"] != old
    assert new["state"] == "open" and new["native"] == request["request_id"]
    refused(_approve(h, old, "allow once", conn="c1", generation=stale), "generation")
    refused(_approve(h, old, "allow once", conn="c1"), "controller")
    assert "H5" in refused(_approve(h, old, "deny", conn="c2"), "decision")["message"]
    assert _responses(h) == []
    _approve(h, new["nativeDecision"], "deny", conn="c2")
    (written,) = _responses(h)
    assert written["response"]["request_id"] == request["request_id"] == rest[0]["msg"]["response"]["request_id"]
    assert written["response"]["response"] == _choice(request, "deny")
    feed_each(h, outs(rest[1:]))
    assert _decisions(h)[-1]["state"] == "settled" and len(_responses(h)) == 1


def _idle_answer(request_id: str) -> Record:
    """An idle interrupt's answer as the binary wrote it (recordings/sealed-controls), with the id the core
    wrote: the chain's abort and the post-settle clear."""
    idle: Record = recording("sealed-controls")[3]["msg"]
    assert idle["response"]["response"] == {"still_queued": [], "cancelled": []}
    return {**idle, "response": {**idle["response"], "request_id": request_id}}


def test_H8_claude_after_the_interrupt_cancelled_the_request_a_late_answer_is_refused() -> None:
    """sealed-interrupt-pending-permission: the controller interrupts with the request pending. The stop's
    approval is uncertain and the decision uncertain (P6: never denied on the person's behalf; no answer is
    written). Claude then cancels the request (`control_cancel_request`, before the interrupt's receipt): the
    decision is settled from that evidence (`how: cancelled`), and a late answer is refused (H8) with no line
    written. The recording shows why: the driver's own late allow for that id got no output at all (the
    binary's last line is before it), and the tool never ran (its result is the rejection)."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-interrupt-pending-permission")
    projection = _decisions(h)[0]["nativeDecision"]
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "uncertain"
    assert _decisions(h)[-1]["state"] == "uncertain" and _decisions(h)[-1]["how"] == "stop"
    assert h.written()[-1] == rest[0]["msg"]  # the recorded interrupt, `cancel_queued`
    cancel, receipt = rest[1]["msg"], rest[2]["msg"]
    assert cancel == {"type": "control_cancel_request", "request_id": request["request_id"]}
    feed(h, cancel)
    assert _decisions(h)[-1]["state"] == "settled" and _decisions(h)[-1]["how"] == "cancelled"
    late = refused(_approve(h, projection, "allow once"), "decision")
    assert "H8" in late["message"] and "cancelled" in late["message"]
    feed(h, receipt)
    abort = h.written()[-1]
    assert abort["request"]["subtype"] == "interrupt"  # the chain's abort, answered once the turn ended
    tail = rest[3:]
    driver_late = tail[-1]  # the recording's last line: the binary wrote nothing after it
    assert driver_late["dir"] == "in" and driver_late["msg"]["response"]["request_id"] == request["request_id"]
    assert driver_late["msg"]["response"]["response"]["behavior"] == "allow"
    feed_each(h, outs(tail))
    feed(h, _idle_answer(abort["request_id"]))
    feed(h, _idle_answer(h.written()[-1]["request_id"]))  # the post-settle clear
    (end,) = [e for e in h.clients["o"].events() if e["eventType"] == "tool-end"]
    assert end["payload"]["isError"] is True  # the tool was rejected, never run
    final = h.clients["o"].records("stop")[-1]
    assert final["state"] == "reconciled" and final["approvalDisposition"] == "uncertain"
    refused(_approve(h, projection, "deny"), "decision")
    assert _responses(h) == []  # never answered on the person's behalf, never after the cancel


def test_H8_claude_a_request_claude_cancelled_while_open_takes_no_answer() -> None:
    """sealed-interrupt-pending-permission with the interrupt as another's input (not the controller's: no
    stop of the core's runs): the decision is open when Claude cancels it; the cancel alone settles it
    (`how: cancelled`, the state from native evidence) and any answer from then on is refused (H8), naming
    the cancel; nothing is written."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-interrupt-pending-permission")
    projection = _decisions(h)[0]["nativeDecision"]
    assert rest[0]["dir"] == "in" and h.core.stop is None
    feed(h, rest[1]["msg"])  # control_cancel_request
    assert _decisions(h)[-1]["state"] == "settled" and _decisions(h)[-1]["how"] == "cancelled"
    for choice in ("allow once", "deny"):
        assert "cancelled" in refused(_approve(h, projection, choice), "decision")["message"]
    assert _responses(h) == [] and ins(rest[1:2]) == []


def test_P6_claude_an_interrupt_after_the_answer_leaves_the_stop_uncertain_until_claudes_result() -> None:
    """sealed-allow-then-interrupt: the controller allows, then interrupts before Claude acted on it. The stop
    begins with the decision answered but not settled, so its approval is uncertain; Claude did not run the
    tool (the interrupt overtook the allow: its result is the rejection) and wrote no cancel; the result
    settles the decision (`how: answered`). The same answer again is the same reply (H6), another refused
    (H7); one native response."""
    h = claude_harness(U1)
    request, rest = _asked(h, "sealed-allow-then-interrupt")
    projection = _decisions(h)[0]["nativeDecision"]
    _approve(h, projection, "allow once")
    assert _responses(h) == [rest[0]["msg"]]
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "uncertain"
    assert h.written()[-1] == rest[1]["msg"]
    receipt, tail = rest[2]["msg"], rest[3:]
    assert not any(m["type"] == "control_cancel_request" for m in outs(tail))
    feed(h, receipt)
    abort = h.written()[-1]
    feed_each(h, outs(tail))
    feed(h, _idle_answer(abort["request_id"]))
    feed(h, _idle_answer(h.written()[-1]["request_id"]))
    (end,) = [e for e in h.clients["o"].events() if e["eventType"] == "tool-end"]
    assert end["payload"]["isError"] is True
    assert _decisions(h)[-1]["state"] == "settled" and _decisions(h)[-1]["how"] == "answered"
    assert h.clients["o"].records("stop")[-1]["approvalDisposition"] == "uncertain"
    assert _approve(h, projection, "allow once")["decision"]["answer"] == "allow once"
    refused(_approve(h, projection, "deny"), "decision")
    assert len(_responses(h)) == 1 and request["request_id"] == _responses(h)[0]["response"]["request_id"]


def test_P7_a_force_stop_with_a_request_pending_ends_uncertain_and_initialize_cannot_reread_it() -> None:
    """A restart cannot re-show a pending request on this pin: the recorded `initialize` sent while a
    `can_use_tool` was pending (interrupt-pending-permission, B1's study) answers `session_state:
    requires_action` with no `pending_permission_requests`, so the brief's "re-read from initialize" does not
    apply. So a force stop with the request pending leaves it uncertain (never denied, nothing written) and the
    stop's approval uncertain: what Claude did with it is not known to the next execution."""
    study = [r["msg"] for r in recording("interrupt-pending-permission")]
    asked_at = next(i for i, m in enumerate(study) if is_control("can_use_tool")(m))
    reinit = next(m for m in study[asked_at:] if m.get("type") == "control_response")
    answer = reinit["response"]["response"]
    assert answer["session_state"] == "requires_action" and "pending_permission_requests" not in answer
    h = claude_harness(U1)
    _asked(h, "sealed-interrupt-pending-permission")
    stop = h.call("c1", "force-stop", confirmation=h.confirm("c1"))["stop"]
    assert stop["approvalDisposition"] == "uncertain"
    assert _decisions(h)[-1]["state"] == "uncertain" and _decisions(h)[-1]["how"] == "stop"
    assert _responses(h) == []


def test_P7_the_wire_writes_no_widening_body_no_other_input_and_no_second_answer() -> None:
    """`ClaudeRules.answer` on the core's wire fed the recorded request (sealed-permission-allow): a body that is not
    exactly one of the dialog's choices (an allow carrying a suggestion as `updatedPermissions`, an allow of
    another input, a bare allow, an unknown behaviour) and an id Claude did not ask (the tool use's id, a
    generic one) are not written (None); the allow is written once, with the exact id; a second answer to the
    same request (the same or another) is not written."""
    h = claude_harness(U1)
    request, _ = _asked(h, "sealed-permission-allow")
    wire = claude_wire(h)
    assert wire.next_write() is None
    rid = request["request_id"]
    allow = _choice(request, "allow once")
    for body in ({**allow, "updatedPermissions": request["request"]["permission_suggestions"][:1]},
                 {**allow, "updatedInput": {"command": "rm -rf /"}}, {"behavior": "allow"},
                 {"behavior": "ask"}, {"behavior": "deny", "message": ""}):
        assert CLAUDE_RULES.answer(wire, rid, body, now=0.0) is None
    for other in (request["request"]["tool_use_id"], "r1", "req_1"):
        assert CLAUDE_RULES.answer(wire, other, allow, now=0.0) is None
    command = CLAUDE_RULES.answer(wire, rid, allow, now=0.0)
    assert command is not None and command.record == {"type": "control_response", "response": {
        "subtype": "success", "request_id": rid, "response": allow}}
    assert CLAUDE_RULES.answer(wire, rid, allow, now=0.0) is None
    assert CLAUDE_RULES.answer(wire, rid, _choice(request, "deny"), now=0.0) is None
    assert wire.next_write() is command and wire.next_write() is None
