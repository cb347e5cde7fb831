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
