"""The controller's flows on the real Pi 0.85.1 (on the real binary, not only the fake): the return
flow with a tool call (E1), a streamed reply fanned out to several observers, two prompts back to back
(N8/H18: the real binary acks a pipelined prompt and drops it, FACTS Part 2 F; the controller must make
that impossible), an interrupt mid-stream following R3-1 (N9), and S7's exact bytes in the session file.
Every record a client receives is validated against the control schema."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core_harness import validated_client

from mosaic.controller.testing import FakeRig, event_is, real_controller, receipt_is, stop_is
from mosaic.pi_rpc.testing import ModelServer


def session_lines(rig: FakeRig) -> list[dict[str, Any]]:
    return [json.loads(line) for line in rig.session.read_bytes().split(b"\n") if line]


def user_texts(rig: FakeRig) -> list[str]:
    return [x["message"]["content"][0]["text"] for x in session_lines(rig)
            if x.get("type") == "message" and x["message"]["role"] == "user"]


def test_E1_fan_out_return_flow_with_a_tool_call_on_the_real_pi(tmp_path: Path, pi_dir: Path,
                                                                  model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            observers = [await validated_client(rig.socket_path) for _ in range(3)]
            for o in observers:
                (await o.call("observe"))["result"]
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            reply = await client.call("prompt", **auth, clientRequestId="e1", text="TOOLCALL please run it")
            assert reply["result"]["outcome"] == "admitted"
            for o in [*observers, client]:
                await o.until(receipt_is("finished"))
                await o.until(event_is("run-settled"))
            streams = [o.events() for o in [*observers, client]]
            assert all(s == streams[0] for s in streams)  # the same stream to every client, once
            kinds = [e["eventType"] for e in streams[0]]
            assert kinds.count("tool-start") == 1 and kinds.count("tool-end") == 1
            assert kinds.count("run-settled") == 1 and kinds[-1] == "run-settled"
            (end,) = [e for e in streams[0] if e["eventType"] == "tool-end"]
            assert end["payload"]["result"]["content"][0]["text"] == "tool-ran-ok"
            finals = [e for e in streams[0] if e["eventType"] == "message-end" and e["payload"]["role"] == "assistant"]
            assert finals[-1]["payload"]["content"] == [{"type": "text", "text": "Tool result was: tool-ran-ok."}]
            receipts = [r["state"] for r in client.records("receipt")]
            assert receipts == ["admitted", "dispatched", "acknowledged", "working", "finished"]
            assert user_texts(rig) == ["TOOLCALL please run it"]  # shown once, persisted once
            for c in [*observers, client]:
                await c.close()

    asyncio.run(main())


def test_N8_H18_two_prompts_back_to_back_one_engine_write_one_turn(tmp_path: Path, pi_dir: Path,
                                                                   model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            first = await client.send("prompt", **auth, clientRequestId="a", text="PIPE-1 hello")
            second = await client.send("prompt", **auth, clientRequestId="b", text="PIPE-2 hello")
            r1, r2 = await client.reply(first), await client.reply(second)
            assert r1["result"]["outcome"] == "admitted"
            assert r2["error"]["data"]["refusal"]["code"] == "busy"  # never pipelined behind the first
            await client.until(receipt_is("finished"))
            assert user_texts(rig) == ["PIPE-1 hello"]
            # Once settled, the next prompt goes through: one slot, released by reconciliation.
            r3 = await client.call("prompt", **auth, clientRequestId="c", text="PIPE-2 hello")
            assert r3["result"]["outcome"] == "admitted"
            await client.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == "c")
            assert user_texts(rig) == ["PIPE-1 hello", "PIPE-2 hello"]
            await client.close()

    asyncio.run(main())


def test_N9_interrupt_mid_stream_follows_R3_1_on_the_real_pi(tmp_path: Path, pi_dir: Path,
                                                             model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await client.call("prompt", **auth, clientRequestId="slow", text="SLOW stream please")
            await client.until(event_is("text-delta"))
            assert (await client.call("interrupt", **auth))["result"]["stop"]["kind"] == "interrupt"
            await client.until(stop_is("reconciled"))
            (proof,) = client.records("turnProof")
            assert proof["nativeQueue"] == "cleared" and proof["aborts"] == 1 and proof["slot"] == "run-started"
            assert [c["steering"] + c["followUp"] for c in proof["clears"]] == [0, 0]  # before abort, after settle
            receipt = client.records("receipt")[-1]
            assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted"
            binding = client.records("binding")[-1]
            assert binding["admission"] == "open" and binding["state"] == "active"
            # Pi persisted the aborted assistant message; nothing else ran.
            assistants = [x["message"] for x in session_lines(rig)
                          if x.get("type") == "message" and x["message"]["role"] == "assistant"]
            assert assistants[-1]["stopReason"] == "aborted"
            assert user_texts(rig) == ["SLOW stream please"]
            # Admission reopened under current control: the next prompt runs.
            await client.call("prompt", **auth, clientRequestId="after", text="Say hello")
            await client.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == "after")
            await client.close()

    asyncio.run(main())


def test_S7_control_characters_reach_the_session_file_exactly(tmp_path: Path, pi_dir: Path,
                                                              model: ModelServer) -> None:
    text = "esc \x1b[31m red \x1b[200~pasted\x1b[201~ line\u2028sep para\u2029sep tab\tend"

    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await client.call("prompt", **auth, clientRequestId="s7", text=text)
            await client.until(receipt_is("finished"))
            assert user_texts(rig) == [text]
            (user,) = [e for e in client.events() if e["eventType"] == "message-start" and e["payload"]["role"] == "user"]
            assert user["payload"]["content"][0]["text"] == text
            await client.close()

    asyncio.run(main())


def test_slash_text_never_reaches_the_real_pi(tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            for i, text in enumerate(["/llama", "  /skill:x", "\t/goal now"]):
                reply = await client.call("prompt", **auth, clientRequestId=f"s{i}", text=text)
                assert reply["error"]["data"]["refusal"]["code"] == "text-policy"
            assert not rig.core.requests and not model.requests  # nothing reached Pi, so no model call
            await client.close()

    asyncio.run(main())


def test_a_streamed_reply_is_shown_once_although_the_real_message_start_already_holds_its_first_delta(
        tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    """The real binary serialises the assistant's message-start after the first chunk landed in it (FACTS
    "responseId when the first chunk has already arrived"): its content holds "tick00 " and the text-delta
    "tick00 " follows. The library's Transcript shows the stream as it grew, never a delta twice: at every
    change the text is a prefix of the scripted ticks, and it ends equal to what Pi persisted."""
    from mosaic.controller.client import Admitted, ControllerClient, LiveMessage, Transcript

    ticks = "".join(f"tick{i:02d} " for i in range(60))

    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await ControllerClient.connect(rig.socket_path)
            view = Transcript(client)
            view.start()
            shown: list[str] = []

            def texts(v: Transcript) -> list[str]:
                return [i.text for i in v.items if isinstance(i, LiveMessage) and i.role == "assistant"]

            view.add_listener(lambda v: shown.extend(texts(v)))
            await client.observe()
            await client.takeover()
            assert isinstance(await client.prompt("SLOW stream please"), Admitted)
            await asyncio.wait_for(view.wait_until(lambda v: any(len(t) >= len("tick00 tick01 ") for t in texts(v))),
                                   30)
            stop = await client.interrupt()
            await asyncio.wait_for(client.wait_stop(str(stop["stop"])), 30)
            await asyncio.wait_for(view.wait_until(
                lambda v: any(i.ended for i in v.items if isinstance(i, LiveMessage) and i.role == "assistant")), 30)
            assert shown and all(ticks.startswith(t) for t in shown), shown
            persisted = [x["message"] for x in session_lines(rig)
                         if x.get("type") == "message" and x["message"]["role"] == "assistant"][-1]
            assert texts(view) == ["".join(b.get("text", "") for b in persisted["content"])]
            await view.aclose()
            await client.aclose()

    asyncio.run(main())


def _sized(chars: int, unit: str = "x") -> str:
    """`chars` UTF-16 units of text: the unit repeated, ASCII `x` (one byte each), a BMP character (three
    UTF-8 bytes each, the most bytes per unit) or an astral one (two units, four bytes)."""
    width = 2 if ord(unit) > 0xFFFF else 1
    return unit * (chars // width)


@pytest.mark.parametrize(("chars", "unit"), [
    (65_535, "x"), (65_536, "x"), (65_537, "x"),  # around the pipe's 64 KiB (the line is a little longer)
    (200_000, "x"), (262_144, "x"),  # the seed's limit, ASCII
    (262_144, "\u8a9e"),  # the limit at its most bytes: 786,432 bytes of UTF-8
    (262_144, "\U0001F600"),  # the limit in astral characters: 131,072 of them, 524,288 bytes
], ids=["65535", "65536", "65537", "200000", "262144", "262144-bmp-3-bytes", "262144-astral"])
def test_a_prompt_up_to_the_limit_reaches_the_model_and_the_session_file_exactly_once(
        tmp_path: Path, pi_dir: Path, model: ModelServer, chars: int, unit: str) -> None:
    """The README allows 262,144 characters (UTF-16 units, as the seed counts them). Each size reaches the
    real Pi whole: the model gets the exact text once, the session file holds it once, the receipt
    finishes (the link once wrote a line over 64 KiB from byte 0 again, and Pi never saw its end)."""
    text = _sized(chars, unit)
    before = len(model.requests)

    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            reply = await client.call("prompt", **auth, clientRequestId="big", text=text)
            assert reply["result"]["outcome"] == "admitted", reply
            await client.until(receipt_is("finished"))
            assert [r["state"] for r in client.records("receipt")][-1] == "finished"
            assert user_texts(rig) == [text]
            asked = [r for r in model.requests[before:] if r.last_user_text == text]
            assert len(asked) == 1 and len(model.requests) - before == 1
            binding = client.records("binding")[-1]
            assert binding["admission"] == "open" and binding["state"] == "active"
            await client.close()

    asyncio.run(main())


def test_a_prompt_one_unit_over_the_limit_is_refused_draft_with_zero_engine_bytes(
        tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            for crid, text in (("x", "x" * 262_145), ("astral", "a" + "\U0001F600" * 131_072)):
                reply = await client.call("prompt", **auth, clientRequestId=crid, text=text)
                assert reply["error"]["data"]["refusal"]["code"] == "draft", reply
            assert not rig.core.requests and not rig.session.exists()
            await client.close()

    asyncio.run(main())
