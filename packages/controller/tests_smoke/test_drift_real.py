"""The idle drift check on the real Pi 0.85.1 (brief §2 "Session drift"; the core's rule 8), through
`real_controller`: W18 on the real binary's own appends (the startup append into an existing session with
no messages, then turns with a tool call, an HTTP 500 and its auto-retry, and an aborted turn), W19 (a new
session file Pi creates only at the first assistant message_end) and W10 (another writer appends an entry
with a new id while the engine is idle: session-drift at the next idle check, then nothing written).
Every record a client receives is validated against the control schema."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from core_harness import validated_client

from mosaic.controller.testing import FakeRig, RawClient, event_is, real_controller, receipt_is, stop_is
from mosaic.pi_rpc.testing import ModelServer

HEADER = json.dumps({"type": "session", "version": 3, "id": "0199cccc-3333-7000-8000-000000000003",
                     "timestamp": "2026-11-30T02:46:17.936Z", "cwd": "{cwd}"}, separators=(",", ":")) + "\n"


async def run_turn(client: RawClient, auth: dict[str, Any], crid: str, text: str) -> None:
    """One prompt to its finished receipt; the core holds a turn's last records until the idle check after
    it ended, so that check is over when this returns."""
    reply = await client.call("prompt", **auth, clientRequestId=crid, text=text)
    assert reply["result"]["outcome"] == "admitted", reply
    await client.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == crid)


def no_drift(rig: FakeRig) -> int:
    """The last check found no drift and the file holds exactly the engine's list; its entry count."""
    verdict = rig.core.drift_verdict
    assert verdict is not None and not verdict.drift, verdict
    assert verdict.disk_entries == verdict.engine_entries
    return verdict.disk_entries


def session_types(rig: FakeRig) -> list[str]:
    return [json.loads(x)["type"] for x in rig.session.read_bytes().split(b"\n")[1:] if x]


@pytest.mark.parametrize("seed", ["header-only", "zero-bytes"])
def test_W18_the_real_pi_own_appends_startup_tool_call_retry_and_abort_are_no_drift(
        tmp_path: Path, pi_dir: Path, model: ModelServer, seed: str) -> None:
    async def main() -> None:
        # An existing session with no messages: at start Pi appends model_change + thinking_level_change to
        # the file (a 0-byte file first gets Pi's own header; FACTS (c) "Writes at load", (d) K1).
        text = HEADER if seed == "header-only" else ""
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url, seed=text) as rig:
            counts = [no_drift(rig)]  # the takeover check
            assert session_types(rig) == ["model_change", "thinking_level_change"]
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            counts.append(no_drift(rig))
            await run_turn(client, auth, "t2", "TOOLCALL please run it")
            counts.append(no_drift(rig))
            await run_turn(client, auth, "t3", "FAILONCE please")  # HTTP 500, Pi's auto-retry after 2 s
            counts.append(no_drift(rig))
            await client.call("prompt", **auth, clientRequestId="t4", text="SLOW stream please")
            await client.until(event_is("text-delta"))
            assert (await client.call("interrupt", **auth))["result"]["stop"]["kind"] == "interrupt"
            await client.until(stop_is("reconciled"))  # held until the check after the aborted run ended
            counts.append(no_drift(rig))
            await run_turn(client, auth, "t5", "Say hello")
            counts.append(no_drift(rig))
            # user+reply; user, toolCall, toolResult, reply; user, error, retried reply; user, aborted; user+reply
            assert counts == [2, 4, 8, 11, 13, 15]
            assert [e.kind for e in rig.runtime.evidence if "drift" in e.kind] == []
            binding = client.records("binding")[-1]
            assert (binding["state"], binding["admission"]) == ("active", "open")
            assistants = [json.loads(x)["message"].get("stopReason") for x in rig.session.read_bytes().split(b"\n")
                          if x and json.loads(x).get("type") == "message"
                          and json.loads(x)["message"]["role"] == "assistant"]
            assert assistants == ["stop", "toolUse", "stop", "error", "stop", "aborted", "stop"]
            await client.close()

    asyncio.run(main())


def test_W19_a_new_session_file_absent_until_the_first_reply_is_no_drift_on_the_real_pi(
        tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            verdict = rig.core.drift_verdict  # the takeover check: Pi holds its startup append in memory
            assert verdict is not None and not verdict.drift and verdict.seen is None
            assert verdict.engine_entries == 2 and not rig.session.exists()
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            assert no_drift(rig) == 4 and rig.session.exists()
            seen = rig.core.drift_verdict.seen if rig.core.drift_verdict else None
            assert seen is not None and seen.size == rig.session.stat().st_size
            assert seen.ino == rig.session.stat().st_ino
            await client.close()

    asyncio.run(main())


def test_W10_a_foreign_entry_appended_while_the_real_pi_is_idle_is_session_drift(
        tmp_path: Path, pi_dir: Path, model: ModelServer) -> None:
    """Another writer appends between two prompts: the second prompt is refused `session-drift` before any
    byte of it reaches the real Pi (issue 27: seen before the next prompt runs)."""
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            client = await validated_client(rig.socket_path)
            auth = await client.control()
            await run_turn(client, auth, "t1", "Say hello")
            assert no_drift(rig) == 4
            last = json.loads(rig.session.read_bytes().split(b"\n")[-2])
            foreign = {"type": "message", "id": "f0000001", "parentId": last["id"], "timestamp": last["timestamp"],
                       "message": {"role": "user", "content": [{"type": "text", "text": "from another writer"}],
                                   "timestamp": 1796006777976}}
            with open(rig.session, "ab") as f:
                f.write(json.dumps(foreign, separators=(",", ":")).encode() + b"\n")
            link = rig.core.link
            written: list[str] = []
            take = link.next_write

            def next_write() -> Any:
                command = take()
                if command is not None:
                    written.append(command.type)
                return command

            link.next_write = next_write  # type: ignore[method-assign]
            on_disk = rig.session.read_bytes()
            reply = await client.call("prompt", **auth, clientRequestId="t2", text="Say hello again")
            assert reply["error"]["data"]["refusal"]["code"] == "session-drift", reply
            marker = (await client.until(lambda n: n.get("method") == "marker"))["params"]
            assert marker["reason"] == "session-drift" and marker["drift"] == "unknown-id"
            binding = client.records("binding")[-1]
            assert (binding["state"], binding["admission"]) == ("uncertain", "closed")
            assert "session-drift" in binding["fences"]
            # The check the prompt waited for: incremental first (since t1's last entry); the ids that follow
            # are not the engine's, so the full check runs at once and names the reason. No prompt written.
            checks = ["get_entries", "get_entries"]
            assert written == checks
            reply = await client.call("prompt", **auth, clientRequestId="t3", text="after the drift")
            assert reply["error"]["data"]["refusal"]["code"] == "session-drift"
            assert written == checks and not link.in_flight
            assert rig.session.read_bytes() == on_disk
            assert len(model.requests) == 1  # no second turn reached Pi
            await client.close()

    asyncio.run(main())
