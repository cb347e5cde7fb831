"""Claude's permission requests answered through the controller's socket (issue 32 item 4: P7, H5-H8), run
on claude-rpc's fake Claude engine (`test_claude_fake_engine.py`) and on the real pinned Claude Code 2.1.283
(`tests_smoke/test_claude_real.py`), each against claude-rpc's scripted model server, whose `BASH: <command>`
cue makes the model call Bash: `touch <name>` is not read-only, so Claude asks `can_use_tool`. What Claude did
with the answer is read from the project directory (the file the command makes) and the tool's result.

`claude_controller` (`claude_rig`) is the rig: pi-rpc's `EngineLink` shell over `ClaudeWire`, the core on
Claude's rules (no `answer_dialogs`: P7 needs none), the runtime on a private socket."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core_harness import validated_client
from dialog_flows import code, decision_is, decisions

from mosaic.controller.testing import RawClient, event_is, receipt_is, stop_is


async def _asked(c: RawClient, auth: Mapping[str, Any], crid: str, command: str, cue: str = "BASH: ") -> dict[str, Any]:
    reply = await c.call("prompt", **auth, clientRequestId=crid, text=f"{cue}{command}")
    assert reply["result"]["outcome"] == "admitted", reply
    shown: dict[str, Any] = (await c.until(decision_is("open")))["params"]
    assert shown["method"] == "can_use_tool" and shown["choices"] == ["allow once", "deny"], shown
    assert shown["input"]["command"] == command and shown["tool"] == "Bash", shown
    return shown


def _tool_end(c: RawClient) -> dict[str, Any]:
    (end,) = [e for e in c.events() if e["eventType"] == "tool-end"]
    payload: dict[str, Any] = end["payload"]
    return payload


async def P7_H6_H7_allow_once_runs_the_tool_once(socket_path: str, project: Path) -> None:
    """Allow once: the decision offers exactly `allow once` and `deny`, the three widening suggestions
    refused with why; a generic yes and a suggestion are refused; `allow once` runs the command once (its file
    exists, its result is not an error); the same answer again is the same reply (H6), `deny` after it is
    refused (H7); Claude's result settles the decision, the turn finishes completed."""
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await _asked(c, auth, "allow", "touch made-by-allow")
    widening = shown["refusedChoices"]
    assert len(widening) == 3 and all("widens" in w["reason"] for w in widening), widening
    for other in ("yes", "cancel", widening[0]["choice"]):
        assert code(await c.call("approval", **auth, decision=shown["nativeDecision"], choice=other)) == "decision"
    first = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="allow once")
    again = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="allow once")
    assert first["result"]["decision"]["answer"] == again["result"]["decision"]["answer"] == "allow once", (first, again)
    other = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="deny")
    assert code(other) == "decision"
    finished = (await c.until(receipt_is("finished")))["params"]
    assert finished["turnState"] == "completed", finished
    assert _tool_end(c)["isError"] is False
    assert (project / "made-by-allow").exists()
    assert decisions(c, "settled")[-1]["how"] == "answered"
    await c.close()


async def P7_deny_the_tool_does_not_run(socket_path: str, project: Path) -> None:
    """Deny: Claude's tool result is an error carrying the controller's message, the command never ran (no
    file), the turn goes on and finishes completed; the decision settled."""
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await _asked(c, auth, "deny", "touch made-by-deny")
    reply = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="deny")
    assert reply["result"]["decision"]["state"] == "answered", reply
    finished = (await c.until(receipt_is("finished")))["params"]
    assert finished["turnState"] == "completed", finished
    end = _tool_end(c)
    assert end["isError"] is True and "denied" in str(end["result"]), end
    assert not (project / "made-by-deny").exists()
    assert decisions(c, "settled")[-1]["how"] == "answered"
    await c.close()


async def H8_P6_an_interrupt_cancels_the_pending_request_and_a_late_answer_is_refused(
        socket_path: str, project: Path, cue: str = "BASH: ") -> None:
    """An interrupt with the request pending: the stop's approval is uncertain (P6, never denied: nothing is
    written); Claude cancels the request (`control_cancel_request`): the decision settles `how: cancelled`,
    and an answer from then on is refused (H8); the tool never ran (no file) and the stop is reconciled.
    `cue` "BASH-LATE: " asks while the model's reply still streams (the real binary's turn then ends
    `aborted_streaming`, not `aborted_tools`: `tests_smoke/test_claude_real.py`)."""
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await _asked(c, auth, "pending", "touch pending-one", cue)
    stop = (await c.call("interrupt", **auth))["result"]["stop"]
    assert stop["approvalDisposition"] == "uncertain", stop
    cancelled = (await c.until(lambda n: decision_is("settled")(n) and n["params"].get("how") == "cancelled"))
    assert cancelled["params"]["native"] == shown["native"]
    late = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="allow once")
    assert code(late) == "decision" and "cancelled" in late["error"]["message"], late
    final = (await c.until(stop_is("reconciled")))["params"]
    assert final["approvalDisposition"] == "uncertain", final
    await c.until(event_is("run-settled"))
    assert _tool_end(c)["isError"] is True
    assert not (project / "pending-one").exists()
    await c.close()


async def H5_the_new_controller_answers_once_through_the_new_projection(socket_path: str, project: Path) -> None:
    """A takeover with the request pending: the new controller sees the decision under a new id; the old
    controller's answer is refused (its generation), the old id is refused to the new one; the new id's
    `allow once` runs the command once."""
    old = await validated_client(socket_path)
    old_auth = await old.control()
    shown = await _asked(old, old_auth, "takeover", "touch made-after-takeover")
    new = await validated_client(socket_path)
    new_auth = await new.control()
    fresh = (await new.until(decision_is("open")))["params"]
    assert fresh["nativeDecision"] != shown["nativeDecision"] and fresh["native"] == shown["native"]
    assert code(await old.call("approval", **old_auth, decision=shown["nativeDecision"],
                               choice="allow once")) == "generation"
    assert code(await new.call("approval", **new_auth, decision=shown["nativeDecision"],
                               choice="allow once")) == "decision"
    answered = await new.call("approval", **new_auth, decision=fresh["nativeDecision"], choice="allow once")
    assert answered["result"]["decision"]["state"] == "answered", answered
    await new.until(event_is("run-settled"))
    assert (project / "made-after-takeover").exists()
    assert _tool_end(new)["isError"] is False
    await old.close()
    await new.close()


FLOWS = ("P7_H6_H7_allow_once_runs_the_tool_once", "P7_deny_the_tool_does_not_run",
         "H8_P6_an_interrupt_cancels_the_pending_request_and_a_late_answer_is_refused",
         "H5_the_new_controller_answers_once_through_the_new_projection")
