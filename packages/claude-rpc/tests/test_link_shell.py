"""The asyncio shell of the Claude link (README "The link"): real pipes, a real process (the fake engine, or a
small Python writer), the core's rules unchanged: a turn end to end, a write that fails poisons, backpressure
without loss, a deadline acted on only after the output was read, an undecodable line ends reading."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.claude_rpc.link import (
    ClaudeEngineLink,
    ClaudeLinkCore,
    LinkEvent,
    LinkPoisoned,
    Outcome,
    OutcomeUnknownError,
    Poisoned,
    ProtocolViolation,
    TurnFinished,
    UnknownRecord,
)
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.fake_engine import fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID, U1
from mosaic.claude_rpc.testing.replay import line_of

WAIT = 30.0


def test_a_turn_through_the_shell_over_the_fake_engine_and_exit_0_at_eof(tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server:
            (tmp_path / "proj").mkdir()
            launch = fake_launch(tmp_path / "s", tmp_path / "proj", session_id=SESSION_UUID, resume=False,
                                 base_url=server.base_url)
            link = await ClaudeEngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd)
            try:
                init = link.send_initialize()
                prompt = link.send_user("hello shell", uuid=U1)
                events: list[LinkEvent] = []
                while not any(isinstance(e, TurnFinished) for e in events):
                    events.append(await link.next_event(WAIT))
                assert (await link.outcome(init)).succeeded and (await link.outcome(prompt)).outcome is Outcome.ACKNOWLEDGED
                finished = next(e for e in events if isinstance(e, TurnFinished))
                assert finished.result.record["result"] == "Reply to: hello shell"
                link.close_stdin()
                assert await link.wait(WAIT) == 0
                await link.wait_output_end(WAIT)
            finally:
                await link.aclose()

    asyncio.run(scenario())


def test_a_write_into_a_closed_pipe_is_unknown_write_error_and_poisons(tmp_path: Path) -> None:
    async def scenario() -> None:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        os.close(in_r)  # nobody reads the engine's stdin: EPIPE
        link = await ClaudeEngineLink.from_fds(in_w, out_r)
        out = link.send_initialize()
        with pytest.raises(OutcomeUnknownError):
            await link.outcome(out)
        assert out.unknown_reason == "write-error" and link.core.poisoned is not None
        with pytest.raises(LinkPoisoned):
            link.send_user("x", uuid=U1)
        os.close(out_w)
        await link.aclose()

    asyncio.run(scenario())


WRITER = """
import os, sys
n = int(sys.argv[1])
line = b'{"type":"mosaic_probe","n":%d}\\n'
data = b"".join(line % i for i in range(n))
view = memoryview(data)
while view:
    view = view[os.write(1, view):]
"""


def test_backpressure_bounds_the_queue_and_loses_nothing() -> None:
    async def scenario() -> None:
        n, bound = 20000, 16
        link = await ClaudeEngineLink.spawn([sys.executable, "-c", WRITER, str(n)], env={"PATH": "/usr/bin:/bin"},
                                            cwd="/", max_queued_events=bound)
        try:
            seen, most = [], 0
            while len(seen) < n:
                most = max(most, link.queued_events)
                ev = await link.next_event(WAIT)
                assert isinstance(ev, UnknownRecord)
                seen.append(ev.record["n"])
                if len(seen) % 4 == 0:
                    await asyncio.sleep(0)
            assert seen == list(range(n)) and most <= bound
            assert link.core.unknown_types == {"mosaic_probe": n}
            assert await link.wait(WAIT) == 0
        finally:
            await link.aclose()

    asyncio.run(scenario())


def test_a_deadline_is_acted_on_only_after_what_the_engine_wrote_has_been_read() -> None:
    """The acknowledgement is in the pipe when the bound has passed: the link reads it before it ticks."""
    async def scenario() -> None:
        now = [0.0]
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        core = ClaudeLinkCore(default_bound=1.0)
        link = await ClaudeEngineLink.from_fds(in_w, out_r, core=core, clock=lambda: now[0])
        out = link.send_initialize()
        assert os.read(in_r, 4096) == out.data
        os.write(out_w, line_of({"type": "control_response",
                                 "response": {"subtype": "success", "request_id": out.key, "response": {}}}))
        now[0] = 10.0  # the bound passed before the loop looked at the pipe
        link.flush()
        assert out.outcome is Outcome.ACKNOWLEDGED and core.poisoned is None
        kinds = [type(await link.next_event(WAIT)).__name__ for _ in range(2)]
        assert kinds == ["Written", "Acknowledged"]
        for fd in (in_r, out_w):
            os.close(fd)
        await link.aclose()

    asyncio.run(scenario())


def test_a_line_the_decoder_cannot_take_ends_reading_with_a_named_violation() -> None:
    async def scenario() -> None:
        script = "import sys; sys.stdout.buffer.write(b'{\"type\":\"a\",\"n\":1e999}\\n{\"type\":\"b\"}\\n')"
        link = await ClaudeEngineLink.spawn([sys.executable, "-c", script], env={"PATH": "/usr/bin:/bin"}, cwd="/",
                                            stderr=subprocess.DEVNULL)
        try:
            first = await link.next_event(WAIT)
            second = await link.next_event(WAIT)
            assert isinstance(first, ProtocolViolation) and first.reason == "number-out-of-range"
            assert isinstance(second, Poisoned)
            await link.wait_output_end(WAIT)
            assert link.core.output_closed and link.core.records_read == 1
        finally:
            await link.aclose()

    asyncio.run(scenario())
