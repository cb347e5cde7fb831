"""The asyncio link shell over real pipes and real processes: partial write, EPIPE, silence, EOF."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

import pytest

from mosaic.pi_rpc._link import CommandOutcome, EngineEvent, LinkPoisoned, OutcomeKnown
from mosaic.pi_rpc._shell import EngineLink, OutcomeUnknownError

# A toy engine: answers get_state, ignores "hang", emits an event on "emit", exits on "exit",
# closes its stdin on "close-stdin", and never reads again after "stop-reading".
RESPONDER = textwrap.dedent(
    r"""
    import json, os, sys
    out = sys.stdout.buffer
    def w(obj):
        out.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n"); out.flush()
    w({"type": "ready"})
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd = json.loads(line)
            t = cmd.get("type")
            if t == "get_state":
                w({"id": cmd["id"], "type": "response", "command": t, "success": True,
                   "data": {"isStreaming": False, "note": "a\u2028b"}})
            elif t == "emit":
                w({"type": "agent_start"})
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
            elif t == "exit":
                sys.exit(0)
            elif t == "close-stdin":
                os.close(0)
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
                import time
                while True:
                    time.sleep(1)
            elif t == "stop-reading":
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
                import time
                while True:
                    time.sleep(1)
            # "hang": no answer
    """
)

BOUND = 20.0  # generous: only a broken link reaches it


@pytest.fixture
def responder(tmp_path: Path) -> list[str]:
    script = tmp_path / "responder.py"
    script.write_text(RESPONDER)
    return [sys.executable, str(script)]


async def _start(argv: list[str], tmp_path: Path, **kw: object) -> EngineLink:
    link = await EngineLink.spawn(argv, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), **kw)  # type: ignore[arg-type]
    ready = await link.next_event(BOUND)
    assert isinstance(ready, EngineEvent) and ready.type == "ready"
    return link


def test_request_roundtrip_and_events_in_read_order(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            s = await link.request({"type": "get_state"})
            assert s.outcome is CommandOutcome.ACKNOWLEDGED
            assert s.response is not None and s.response["data"]["note"] == "a\u2028b"
            assert isinstance(await link.next_event(BOUND), OutcomeKnown)
            e = link.send({"type": "emit"})
            first = await link.next_event(BOUND)
            assert isinstance(first, EngineEvent) and first.type == "agent_start"
            assert await link.next_event(BOUND) == OutcomeKnown(e)
            link.close_stdin()
            assert await link.wait(BOUND) == 0
            await link.wait_output_end(BOUND)
        finally:
            await link.aclose()

    asyncio.run(main())


def test_epipe_makes_outcome_unknown_and_poisons(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            await link.request({"type": "close-stdin"})
            p = link.send_prompt("hello")
            with pytest.raises(OutcomeUnknownError) as info:
                await link.outcome(p)
            assert info.value.command.unknown_reason == "write-error"
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_partial_write_then_death_is_unknown_with_bytes_accepted(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            await link.request({"type": "stop-reading"})
            big = link.send({"type": "get_state", "pad": "x" * (4 << 20)}, bound=None)
            # The pipe takes what fits (64 KiB on Linux) and the shell waits for room that never comes.
            for _ in range(1000):
                if big.accepted > 0:
                    break
                await asyncio.sleep(0)
            assert 0 < big.accepted < len(big.data)
            assert big.outcome is CommandOutcome.WRITING
            link.kill()
            with pytest.raises(OutcomeUnknownError):
                await asyncio.wait_for(link.outcome(big), BOUND)
            assert big.unknown_reason in ("write-error", "engine-output-ended")
            assert 0 < big.accepted < len(big.data)
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_no_response_within_bound_is_unknown(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            h = link.send({"type": "hang"}, bound=0.2)
            with pytest.raises(OutcomeUnknownError) as info:
                await asyncio.wait_for(link.outcome(h), BOUND)
            assert info.value.command.unknown_reason == "no-response"
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_engine_exit_makes_in_flight_unknown(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            h = link.send({"type": "hang"}, bound=None)
            await link.request({"type": "get_state"})
            link.send({"type": "exit"}, bound=None)
            with pytest.raises(OutcomeUnknownError) as info:
                await asyncio.wait_for(link.outcome(h), BOUND)
            assert info.value.command.unknown_reason == "engine-output-ended"
            assert await link.wait(BOUND) == 0
        finally:
            await link.aclose()

    asyncio.run(main())


def test_spawn_passes_exactly_the_given_environment(tmp_path: Path) -> None:
    script = tmp_path / "env.py"
    script.write_text("import json, os\nprint(json.dumps({'type': 'env', 'env': dict(os.environ)}), flush=True)\n")

    async def main() -> None:
        link = await EngineLink.spawn([sys.executable, str(script)], env={"ONLY": "this"}, cwd=str(tmp_path))
        try:
            ev = await link.next_event(BOUND)
            assert isinstance(ev, EngineEvent)
            env = dict(ev.record["env"])
            env.pop("LC_CTYPE", None)  # Python's C-locale coercion may add it in the child
            assert env == {"ONLY": "this"}
            assert await link.wait(BOUND) == 0
        finally:
            await link.aclose()

    os.environ.setdefault("MOSAIC_TEST_MARKER", "1")  # must not leak into the child
    asyncio.run(main())
