"""The whole controller through its socket, on the fake engine process: raw JSON-RPC lines in, the
engine's exact bytes and the session file out. The fake is held to the real Pi by pi-rpc's conformance
suite; the real Pi runs the same flows in `nox -s smoke` (tests_smoke/)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core_harness import validated_client

from mosaic.controller.testing import FakeRig, RawClient, fake_controller, receipt_is

WAIT = 30.0


async def control(rig: FakeRig) -> tuple[RawClient, dict[str, Any]]:
    client = await validated_client(rig.socket_path)
    return client, await client.control()


def test_E1_a_prompt_streams_to_the_controller_and_an_observer_and_lands_in_the_session_file(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            observer = await validated_client(rig.socket_path)
            seen = (await observer.call("observe"))["result"]
            assert seen["seam"]["replay"] == "unavailable" and seen["history"]["ok"] is False  # no file yet
            client, auth = await control(rig)
            reply = await client.call("prompt", **auth, clientRequestId="req-1", text="Say hello")
            assert reply["result"]["outcome"] == "admitted"
            await observer.until(receipt_is("finished"))
            kinds = [e["eventType"] for e in observer.events()]
            assert kinds[0] == "message-start" and kinds[-1] == "run-settled" and "text-delta" in kinds
            assert [e["eventType"] for e in client.events()] == kinds  # the same stream, once each
            text = "".join(e["payload"]["delta"] for e in observer.events() if e["eventType"] == "text-delta")
            assert text == "Hello from the fake model."
            lines = [json.loads(x) for x in rig.session.read_text().splitlines()]
            users = [x for x in lines if x.get("type") == "message" and x["message"]["role"] == "user"]
            assert [u["message"]["content"][0]["text"] for u in users] == ["Say hello"]
            # After the run settled, the history page holds the turn (the client re-reads it: E4).
            again = (await observer.call("observe"))["result"]
            assert again["history"]["ok"] is True
            await client.close()
            await observer.close()

    asyncio.run(main())


@pytest.mark.parametrize("text", ["esc \x1b[31m\x1b[200~pasted\x1b[201~ \u2028 line \u2029 end"])
def test_S7_the_engine_receives_and_persists_the_exact_text(tmp_path: Path, text: str) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client, auth = await control(rig)
            await client.call("prompt", **auth, clientRequestId="req-1", text=text)
            await client.until(receipt_is("finished"))
            lines = [json.loads(x) for x in rig.session.read_bytes().split(b"\n") if x]
            (user,) = [x for x in lines if x.get("type") == "message" and x["message"]["role"] == "user"]
            assert user["message"]["content"][0]["text"] == text
            await client.close()

    asyncio.run(main())


def test_S5_an_observer_paste_and_enter_sends_zero_engine_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            observer = await validated_client(rig.socket_path)
            token = (await observer.call("observe"))["result"]["incarnation"]
            reply = await observer.call("prompt", incarnation=token, generation=1, clientRequestId="p",
                                        text="pasted reply\n")
            assert reply["error"]["data"]["refusal"]["code"] == "controller"
            assert not rig.core.link.in_flight and rig.core.requests == {}
            await observer.close()

    asyncio.run(main())


def test_N8_H18_a_second_prompt_is_busy_and_pi_never_sees_a_pipelined_prompt(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client, auth = await control(rig)
            first = client.call("prompt", **auth, clientRequestId="a", text="SLOW stream please")
            second = client.call("prompt", **auth, clientRequestId="b", text="second")
            r1, r2 = await asyncio.gather(first, second)
            assert r1["result"]["outcome"] == "admitted"
            assert r2["error"]["data"]["refusal"]["code"] == "busy"
            await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "text-delta")
            stop = await client.call("interrupt", **auth)
            assert stop["result"]["stop"]["kind"] == "interrupt"
            await client.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "stop"
                               and n["params"]["state"] == "reconciled")
            receipts = [n["params"] for n in client.notes if n.get("method") == "record"
                        and n["params"].get("type") == "receipt"]
            assert receipts[-1]["state"] == "finished" and receipts[-1]["turnState"] == "interrupted"
            lines = [json.loads(x) for x in rig.session.read_text().splitlines()]
            users = [x["message"]["content"][0]["text"] for x in lines
                     if x.get("type") == "message" and x["message"]["role"] == "user"]
            assert users == ["SLOW stream please"]
            await client.close()

    asyncio.run(main())


def test_K5_a_tool_the_engine_reports_ended_during_the_force_stop_is_still_an_uncertain_effect(tmp_path: Path) -> None:
    """The order the real Pi showed in 2 of 34 runs: the stop's SIGTERM made Pi end the running tool call
    before it exited. Here the fake is held at its `tool` hold point (after tool_execution_start), and the
    force stop's effect lets the tool run to its tool_execution_end before it reports the stop."""

    async def main() -> None:
        rig_box: list[FakeRig] = []

        async def effects(effect: Any) -> dict[str, Any]:
            if effect.kind != "force-stop":
                return {"ok": True}
            rig = rig_box[0]
            await asyncio.to_thread(rig.ctl.release, "tool")
            for _ in range(2000):  # until the core has read the tool's end (bounded)
                if not rig.core.run.open_tools:
                    break
                await asyncio.sleep(0.005)
            assert not rig.core.run.open_tools, "the fake never reported the tool's end"
            return {"state": "uncertain", "reason": "no-cohort", "detail": "the fake rig has no cohort"}

        async with fake_controller(tmp_path / "rig", effects=effects) as rig:
            rig_box.append(rig)
            client, auth = await control(rig)
            await asyncio.to_thread(rig.ctl.hold, "tool")
            await client.call("prompt", **auth, clientRequestId="t", text="TOOLCALL please run it")
            await asyncio.to_thread(rig.ctl.wait_held, "tool", WAIT)
            await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "tool-start")
            await client.force_stop(auth)
            await client.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "effectReport")
            (report,) = client.records("effectReport")
            assert [e["toolName"] for e in report["effects"]] == ["bash"]
            assert report["effects"][0]["state"] == "uncertain" and report["rollback"] is False
            assert any(e["eventType"] == "tool-end" for e in client.events())  # the engine did report it ended
            await client.close()

    asyncio.run(main())


def test_K5_a_tool_that_starts_during_the_force_stop_and_is_open_at_its_end_is_an_uncertain_effect(
        tmp_path: Path) -> None:
    """The other half of K5's union (open when the stop began, *or* when it ends): the run is held after its
    user message, so no tool is open when the force stop begins; during the stop (the TERM grace, here the
    force stop's effect) the engine starts a tool call, held open at the fake's `tool` point, and it is still
    open when the stop ends. The effect report lists it uncertain."""

    async def main() -> None:
        rig_box: list[FakeRig] = []
        began: list[dict[str, str]] = []

        async def effects(effect: Any) -> dict[str, Any]:
            if effect.kind != "force-stop":
                return {"ok": True}
            rig = rig_box[0]
            began.append(dict(effect.payload["openTools"]))
            await asyncio.to_thread(rig.ctl.hold, "tool")
            await asyncio.to_thread(rig.ctl.release, "user-message")
            await asyncio.to_thread(rig.ctl.wait_held, "tool", WAIT)
            for _ in range(2000):  # until the core has read the tool's start (bounded)
                if rig.core.run.open_tools:
                    break
                await asyncio.sleep(0.005)
            assert rig.core.run.open_tools, "the fake never reported the tool's start"
            return {"state": "uncertain", "reason": "no-cohort", "detail": "the fake rig has no cohort"}

        async with fake_controller(tmp_path / "rig", effects=effects) as rig:
            rig_box.append(rig)
            client, auth = await control(rig)
            await asyncio.to_thread(rig.ctl.hold, "user-message")
            await client.call("prompt", **auth, clientRequestId="t", text="TOOLCALL please run it")
            await asyncio.to_thread(rig.ctl.wait_held, "user-message", WAIT)
            await client.force_stop(auth)
            await client.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "effectReport")
            assert began == [{}]  # no tool call was open when the stop began
            (report,) = client.records("effectReport")
            assert [(e["toolName"], e["state"]) for e in report["effects"]] == [("bash", "uncertain")]
            assert report["rollback"] is False
            assert [e["eventType"] for e in client.events()].count("tool-start") == 1
            assert not any(e["eventType"] == "tool-end" for e in client.events())  # open at the stop's end
            await client.close()

    asyncio.run(main())


async def _records_until(client: RawClient, kind: str, predicate: Any) -> dict[str, Any]:
    note = await client.until(lambda n: n.get("method") == "record" and n["params"].get("type") == kind
                              and predicate(n["params"]))
    return dict(note["params"])


@pytest.mark.parametrize("order", ["pi-refuses", "losing-settle-first", "seeds-run-order"])
def test_N8_a_prompt_racing_an_extensions_run_through_the_controller_on_the_fake(tmp_path: Path, order: str) -> None:
    """N8 with the fake's hold points, through the whole controller (seed README "Run order"). An extension
    starts a run (the fake's inject_prompt) while a Mosaic prompt is on its way:

    - pi-refuses: the extension's run has set isStreaming (held at `run-start`, before agent_start) when Pi
      reads the prompt: Pi refuses it (agent-session.js 860): failed with the native error, nothing else;
    - losing-settle-first: the prompt is in preflight when the extension's run takes the agent; Pi acks it,
      its run throws at once and settles before the other run's agent_start: failed, ack-without-start;
    - seeds-run-order: as before, but the losing settle comes after the other run's agent_start and user
      message (held at `settle`): O3, admission closed, the binding uncertain, the item delivery-unknown
      (run-overlap; or handled-without-run when the get_state after the ack was answered once the losing
      run had cleared isStreaming, a Pi race of its own: FACTS a3). The core tests land each order exactly.
    Never finished (completed) for a prompt that never ran."""

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client, auth = await control(rig)
            ctl = rig.ctl

            async def call(op: str, *args: Any, **kw: Any) -> Any:
                return await asyncio.to_thread(getattr(ctl, op), *args, **kw)

            if order == "pi-refuses":
                await call("hold", "run-start")
                await call("request", "inject_prompt", text="from an extension")
                await call("wait_held", "run-start", WAIT)
                await client.call("prompt", **auth, clientRequestId="mine", text="mine")
                receipt = await _records_until(client, "receipt", lambda r: r["state"] == "failed")
                assert receipt["nativeError"].startswith("Agent is already processing")
                await call("release", "run-start")
                await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "run-settled")
                await rig.runtime.wait_core(lambda c: c.admission_open and c.drift_check is None, WAIT)
                assert not rig.core.overlaps
            else:
                await call("hold", "preflight")
                await client.call("prompt", **auth, clientRequestId="mine", text="mine")
                await call("wait_held", "preflight", WAIT)
                await call("hold", "run-start")
                await call("request", "inject_prompt", text="from an extension")
                await call("wait_held", "run-start", WAIT)
                if order == "seeds-run-order":
                    await call("hold", "settle")
                    await call("hold", "model-chunk")
                await call("release", "preflight")  # the ack; the prompt's run throws: the agent is taken
                if order == "seeds-run-order":
                    await call("wait_held", "settle", WAIT)  # the losing settle waits
                    await call("release", "run-start")  # the extension's run: agent_start, its user message
                    await call("wait_held", "model-chunk", WAIT)
                    await client.until(lambda n: n.get("method") == "event" and n["params"]["eventType"] == "message-end"
                                       and n["params"]["payload"]["role"] == "user")
                    await call("release", "settle")
                    await rig.runtime.wait_core(lambda c: "overlap" in c.fences, WAIT)
                    assert [s for s, _ in rig.core.overlaps] == ["O3"]
                    # The get_state written after the ack may be answered once the losing run has cleared
                    # isStreaming (agent-session.js 348, before its settle: FACTS a3, Part 2 F): then the
                    # item settled handled-without-run first, else the overlap settled it. Either way it is
                    # delivery-unknown, never working to finished.
                    receipt = await _records_until(client, "receipt", lambda r: r["state"] == "delivery-unknown")
                    assert receipt["reason"] in ("run-overlap", "handled-without-run")
                    binding = rig.core.binding_record()
                    assert binding["state"] == "uncertain" and binding["admission"] == "closed"
                    refused = await client.call("prompt", **auth, clientRequestId="next", text="next")
                    assert refused["error"]["data"]["refusal"]["code"] == "fenced"
                    await call("release", "model-chunk", all_held=True)
                    await call("unhold", "model-chunk")
                else:
                    receipt = await _records_until(client, "receipt", lambda r: r["state"] == "failed")
                    assert receipt["reason"] == "ack-without-start"
                    await call("release", "run-start")
                    await client.until(lambda n: n.get("method") == "event"
                                       and n["params"]["eventType"] == "run-settled" and n["params"]["request"] is None)
                    await rig.runtime.wait_core(lambda c: c.admission_open and c.drift_check is None, WAIT)
                    assert not rig.core.overlaps
            states = [r["state"] for r in client.records("receipt") if r["clientRequest"] == "mine"]
            assert "finished" not in states
            text = rig.session.read_text() if rig.session.exists() else ""  # a new session: maybe no file yet
            users = [json.loads(x)["message"]["content"][0]["text"] for x in text.splitlines() if '"role":"user"' in x]
            assert "mine" not in users  # it never ran: no user entry of it on disk
            await client.close()

    asyncio.run(main())


# ---------------------------------------------------------------- a bug in the core never costs an answer

def _core_raising_on(rig: FakeRig, predicate: Any) -> list[Any]:
    """Make the rig's core raise (a bug) on every input `predicate` picks; the inputs it raised on."""
    core = rig.core
    receive = core.receive
    raised: list[Any] = []

    def buggy(event: Any, *, now: float) -> Any:
        if predicate(event):
            raised.append(event)
            raise ZeroDivisionError("core bug")
        return receive(event, now=now)

    core.receive = buggy  # type: ignore[method-assign]
    return raised


def test_a_call_the_core_raises_on_is_answered_internal_error_and_serving_goes_on(tmp_path: Path) -> None:
    """README "Errors": -32603 is a controller bug, answered. The runtime catches the core's exception (it
    must not take the controller down), so it answers the call itself: a prompt fed after its look at the
    session file (never through the server's own catch) and a call the server fed directly, alike."""
    from mosaic.controller.core import Call
    from mosaic.controller.protocol import INTERNAL_ERROR

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client, auth = await control(rig)
            raised = _core_raising_on(rig, lambda e: isinstance(e, Call) and e.method in ("prompt", "interrupt"))
            for method, params in (("prompt", {"clientRequestId": "p", "text": "hello"}), ("interrupt", {})):
                rid = await client.send(method, **auth, **params)
                later = await client.send("observe")  # the core takes it after the call: its reply comes after
                assert "result" in await client.reply(later)  # serving goes on, in order
                assert client.replies.get(rid, {}).get("error", {}).get("code") == INTERNAL_ERROR, method
            assert [e.session is not None for e in raised] == [True, False]  # the prompt was fed after its look
            assert rig.runtime.internal_errors == 2
            await client.close()

    asyncio.run(main())


def test_an_observe_whose_page_read_the_core_raises_on_is_answered_internal_error_not_held_forever(
        tmp_path: Path) -> None:
    """An observe's reply has its place held while the page is read off the loop; when the core raises on
    the page read fed back, that place is filled with -32603 (else it would hold every later line to that
    connection until it ends)."""
    from mosaic.controller.core import PageRead
    from mosaic.controller.protocol import INTERNAL_ERROR

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client = await validated_client(rig.socket_path)
            raised = _core_raising_on(rig, lambda e: isinstance(e, PageRead))
            first = await client.send("observe")
            second = await client.send("ping")  # queued behind the observe's held place
            waiting = asyncio.ensure_future(client.reply(second))
            done, _ = await asyncio.wait({waiting}, timeout=WAIT / 3)  # the runtime answers at once: a wide margin
            assert done, "the observe's place was never filled: nothing after it reached the client"
            assert (await waiting)["result"] == {}
            assert (await client.reply(first))["error"]["code"] == INTERNAL_ERROR
            assert len(raised) == 1 and rig.runtime.internal_errors == 1
            await client.close()

    asyncio.run(main())


def test_an_action_that_cannot_be_carried_out_costs_only_itself(tmp_path: Path) -> None:
    """A core bug that returns an action the server refuses (a close reason outside CLOSE_REASONS): it is
    logged and counted, and the actions after it are still carried out, so the call is still answered."""
    from mosaic.controller.core import Call, CloseConnection

    async def main() -> None:
        async with fake_controller(tmp_path / "rig") as rig:
            client = await validated_client(rig.socket_path)
            core = rig.core
            receive = core.receive

            def buggy(event: Any, *, now: float) -> Any:
                actions = receive(event, now=now)
                if isinstance(event, Call) and event.method == "observe":
                    return [CloseConnection(event.conn, "no-such-reason"), *actions]
                return actions

            core.receive = buggy  # type: ignore[method-assign]
            reply = await client.call("observe")
            assert "result" in reply, reply
            assert reply["result"]["incarnation"] == core.config.incarnation
            assert rig.runtime.internal_errors == 1
            await client.close()

    asyncio.run(main())


def test_a_recover_whose_runner_raised_is_refused_eligibility_never_answered_as_a_result(tmp_path: Path) -> None:
    """A recover's reply waits for its effect. When what runs it raised (a bug), the core is given the row's
    failure answer (`EFFECTS[...].failed`): the client reads a refusal, never a result that looks issued."""
    proof = {"members": [{"pid": 4242, "startTime": 1, "death": "reaped:signal 9", "deathTime": 2}],
             "membershipComplete": True, "verification": {"digest": "sha256:" + "ab" * 32}}

    async def effects(effect: Any) -> dict[str, Any]:
        if effect.kind == "force-stop":
            return {"state": "stopped", "proof": proof}
        if effect.kind == "recover":
            raise OSError(5, "Input/output error")
        return {"ok": True}

    async def main() -> None:
        async with fake_controller(tmp_path / "rig", effects=effects) as rig:
            client = await RawClient.connect(rig.socket_path)  # the scripted proof is no schema's cohortProof
            auth = await client.control()
            await client.force_stop(auth)
            assert (await client.stop_outcome())["state"] == "stopped"
            cid = await client.confirm("recover", auth)
            reply = await client.call("recover", incarnation=auth["incarnation"], confirmation=cid)
            assert "result" not in reply
            refusal = reply["error"]["data"]["refusal"]
            assert refusal["code"] == "eligibility" and "Input/output error" in refusal["message"]
            await client.close()

    asyncio.run(main())
