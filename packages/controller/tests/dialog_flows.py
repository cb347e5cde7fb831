"""The dialog flows (issue 33, the controller answering dialogs) over the socket, run on the fake engine
(`test_dialogs_fake.py`) and on the real pinned Pi 0.85.1 (`tests_smoke/test_dialogs_real.py`), both with
pi-rpc's fixture extension raising each dialog on the scripted model's `DIALOG` cue. What reached the
extension is read from the tool's result (`<kind> answered <value>`)."""

from __future__ import annotations

from typing import Any

from core_harness import validated_client

from mosaic.controller.testing import RawClient, event_is, stop_is
from mosaic.pi_rpc.testing.dialogs import dialog_prompt


def decision_is(state: str) -> Any:
    return lambda n: (n.get("method") == "record" and n["params"].get("type") == "nativeDecision"
                      and n["params"]["state"] == state)


def decisions(c: RawClient, state: str) -> list[dict[str, Any]]:
    return [r for r in c.records("nativeDecision") if r["state"] == state]


def tool_result(c: RawClient) -> str:
    (end,) = [e for e in c.events() if e["eventType"] == "tool-end"]
    text: str = end["payload"]["result"]["content"][0]["text"]
    return text


async def ask(c: RawClient, auth: dict[str, Any], crid: str, prompt: str) -> dict[str, Any]:
    reply = await c.call("prompt", **auth, clientRequestId=crid, text=prompt)
    assert reply["result"]["outcome"] == "admitted", reply
    return (await c.until(decision_is("open")))["params"]


def code(reply: dict[str, Any]) -> str:
    refusal: str = reply["error"]["data"]["refusal"]["code"]
    return refusal




async def P1_H6_H7_a_confirm_answered_reaches_the_extension_once(socket_path: str) -> None:
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await ask(c, auth, "p1", dialog_prompt("confirm"))
    assert shown["choices"] == ["confirm", "decline"] and shown["method"] == "confirm"
    assert code(await c.call("approval", **auth, decision=shown["nativeDecision"], choice="yes")) == "decision"
    first = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="confirm")
    again = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="confirm")
    # H6: the same answer again gets the same decision back (answered, or settled if Pi already went on), and
    # writes nothing: the extension ran once with it (below)
    assert again["result"]["decision"]["answer"] == first["result"]["decision"]["answer"] == "confirm"
    assert again["result"]["decision"]["nativeDecision"] == shown["nativeDecision"]
    other = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="decline")
    assert code(other) == "decision"  # H7
    await c.until(event_is("run-settled"))
    assert tool_result(c) == "confirm answered true"
    assert decisions(c, "settled")[-1]["how"] == "answered"
    await c.close()


async def P2_the_select_labels_are_exact_and_the_exact_label_reaches_the_extension(socket_path: str) -> None:
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await ask(c, auth, "p2", dialog_prompt("select"))
    assert shown["choices"] == shown["options"] and "<i>Deny</i>" in shown["choices"]
    assert any("\u202e" in label for label in shown["choices"])
    assert code(await c.call("approval", **auth, decision=shown["nativeDecision"], choice="Deny")) == "decision"
    await c.call("approval", **auth, decision=shown["nativeDecision"], choice="<i>Deny</i>")
    await c.until(event_is("run-settled"))
    assert tool_result(c) == 'select answered "<i>Deny</i>"'
    await c.close()


async def P4_H8_a_native_timeout_is_uncertain_then_settled_from_the_tool_end_and_a_late_answer_refused(socket_path: str) -> None:
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await ask(c, auth, "p4", dialog_prompt("confirm", timeout=1500))
    await c.until(decision_is("uncertain"))
    late = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="confirm")
    assert code(late) == "decision"
    await c.until(event_is("run-settled"))
    assert tool_result(c) == "confirm answered false"  # Pi's default: nothing was sent
    assert decisions(c, "settled")[-1]["how"] == "engine"
    await c.close()


async def P5_H5_takeover_while_pending_the_new_projection_answers_once(socket_path: str) -> None:
    old = await validated_client(socket_path)
    old_auth = await old.control()
    shown = await ask(old, old_auth, "p5", dialog_prompt("confirm"))
    new = await validated_client(socket_path)
    new_auth = await new.control()
    fresh = (await new.until(decision_is("open")))["params"]
    assert fresh["nativeDecision"] != shown["nativeDecision"] and fresh["native"] == shown["native"]
    assert code(await old.call("approval", **old_auth, decision=shown["nativeDecision"],
                               choice="confirm")) == "generation"
    assert code(await new.call("approval", **new_auth, decision=shown["nativeDecision"],
                               choice="confirm")) == "decision"
    await new.call("approval", **new_auth, decision=fresh["nativeDecision"], choice="decline")
    await new.until(event_is("run-settled"))
    assert tool_result(new) == "confirm answered false"
    await old.close()
    await new.close()


async def P6_H8_an_interrupt_while_pending_makes_it_uncertain_never_denied(socket_path: str) -> None:
    c = await validated_client(socket_path)
    auth = await c.control()
    shown = await ask(c, auth, "p6", dialog_prompt("select", abortable=True))
    stop = (await c.call("interrupt", **auth))["result"]["stop"]
    assert stop["approvalDisposition"] == "uncertain"
    await c.until(decision_is("uncertain"))
    await c.until(stop_is("reconciled"))
    assert tool_result(c) == "select answered undefined"
    assert decisions(c, "settled")[-1]["how"] == "engine"
    late = await c.call("approval", **auth, decision=shown["nativeDecision"], choice="Allow once")
    assert code(late) == "decision"
    await c.close()
