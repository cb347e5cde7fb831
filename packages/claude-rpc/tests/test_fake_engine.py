"""The fake Claude engine (README "The fake engine"): held to the real binary's committed recordings by the
conformance suite, refusing anything outside the seal, and stopping at its hold points so a race lands at an
exact step. The races here go through the real link shell (:class:`mosaic.claude_rpc.link.ClaudeEngineLink`)
over the fake's pipes; the smoke suite runs the same scenarios against the binary."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from helpers import REPO

from mosaic.claude_rpc import ClaudeRpcRefusal
from mosaic.claude_rpc.link import (
    ClaudeEngineLink,
    InterruptSettled,
    LinkEvent,
    PermissionAsked,
    PermissionCancelled,
    RanAfterInterrupt,
    TurnFinished,
    TurnStarted,
)
from mosaic.claude_rpc.seal import SealedLaunch, build_sealed_args, sealed_env
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.conformance import CONFORMANCE, NOT_MODELLED, Run, differences, run_fake
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.fake_control import FakeControl
from mosaic.claude_rpc.testing.fake_engine import fake_engine_command, fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID, U1, U2

WAIT = 30.0


@pytest.mark.parametrize("recording", CONFORMANCE, ids=lambda r: r.name)
def test_the_fake_conforms_to_the_real_binarys_committed_recording(recording: object, tmp_path: Path) -> None:
    from mosaic.claude_rpc.testing.recordings import Recording

    assert isinstance(recording, Recording)
    fake = run_fake(recording, tmp_path / "s")
    committed = Run.committed(REPO / "fixtures", recording.name)
    assert differences(fake, committed, names=("fake", "real"), ignore=NOT_MODELLED) == []


def test_the_conformance_comparison_sees_a_difference() -> None:
    """The comparison cannot pass everything: two different recordings of the binary differ."""
    a = Run.committed(REPO / "fixtures", "sealed-interrupt-still-queued")
    b = Run.committed(REPO / "fixtures", "sealed-interrupt-cancel-queued")
    found = differences(a, b)
    assert any(d.startswith("out record") for d in found) and any(d.startswith("exit") for d in found)


def _run_fake(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*fake_engine_command(), *args], env=env, cwd=cwd, input=b"", capture_output=True,
                          timeout=WAIT, check=False)


def test_the_fake_refuses_an_argv_or_an_environment_outside_the_seal_with_exit_2(tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "s", base_url="http://127.0.0.1:9", api_key=FAKE_KEY)
    cwd = tmp_path
    args = build_sealed_args(session_id=SESSION_UUID, resume=False)
    extra = _run_fake([*args, "--settings", "{}"], env, cwd)
    assert extra.returncode == 2 and b"unsealed-engine" in extra.stderr and extra.stdout == b""
    leaky = _run_fake(args, {**env, "ANTHROPIC_AUTH_TOKEN": "x"}, cwd)
    assert leaky.returncode == 2 and b"ANTHROPIC_AUTH_TOKEN" in leaky.stderr
    ok = _run_fake(args, env, cwd)
    assert ok.returncode == 0 and ok.stdout == b"" and ok.stderr == b""  # EOF at once, nothing ran


def test_a_line_that_is_not_json_ends_the_fake_with_exit_1(tmp_path: Path) -> None:
    env = sealed_env(tmp_path / "s", base_url="http://127.0.0.1:9", api_key=FAKE_KEY)
    done = subprocess.run([*fake_engine_command(), *build_sealed_args(session_id=SESSION_UUID, resume=False)],
                          env=env, cwd=tmp_path, input=b'{"type":"user", bad json\n', capture_output=True,
                          timeout=WAIT, check=False)
    assert done.returncode == 1 and b"Error parsing streaming input line (type=user" in done.stderr


@asynccontextmanager
async def fake_link(tmp_path: Path, server: ModelServer, control: FakeControl | None = None) \
        -> AsyncIterator[ClaudeEngineLink]:
    (tmp_path / "proj").mkdir(exist_ok=True)
    launch = fake_launch(tmp_path / "s", tmp_path / "proj", session_id=SESSION_UUID, resume=False,
                         base_url=server.base_url, control=control.path if control else None)
    assert isinstance(launch, SealedLaunch) and not launch.pinned
    link = await ClaudeEngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, stderr=subprocess.PIPE,
                                        expected_session_id=SESSION_UUID)
    try:
        if control is not None:
            await asyncio.get_running_loop().run_in_executor(None, control.accept, WAIT)
        yield link
    finally:
        await link.aclose()


async def collect(link: ClaudeEngineLink, until: type, into: list[LinkEvent]) -> LinkEvent:
    """Take events (keeping them) until one of class ``until``."""
    while True:
        ev = await link.next_event(WAIT)
        into.append(ev)
        if isinstance(ev, until):
            return ev


async def held(control: FakeControl, point: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(None, control.wait_held, point, WAIT)


def test_R3_1_a_hold_lands_the_interrupt_mid_stream_and_the_receipt_proves_the_queued_message_never_runs(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server, FakeControl() as control:
            async with fake_link(tmp_path, server, control) as link:
                events: list[LinkEvent] = []
                control.hold("model-chunk", 3)  # message_start, content_block_start, then the first delta
                link.send_initialize()
                link.send_user("SLOW please", uuid=U1)
                for i in range(3):
                    assert await held(control, "model-chunk")
                    if i < 2:
                        control.release("model-chunk")  # the third stays held: the stream is mid-way
                second = link.send_user("queued while busy", uuid=U2)
                await link.outcome(second)  # its queued frame: the engine holds it
                interrupt = link.send_interrupt(cancel_queued=True)
                control.release("model-chunk")
                settled = await collect(link, InterruptSettled, events)
                assert isinstance(settled, InterruptSettled) and settled.interrupt is interrupt
                ev = settled.evidence
                assert ev is not None and ev.nothing_queued_runs and [m.key for m in ev.ours_cancelled] == [U2]
                finished = await collect(link, TurnFinished, events)
                assert isinstance(finished, TurnFinished) and finished.result.subtype == "error_during_execution"
                link.close_stdin()
                await link.wait_output_end(WAIT)  # a few events: the queue never fills, reading never pauses
                while link.queued_events:
                    events.append(await link.next_event(WAIT))
                assert [e for e in events if isinstance(e, RanAfterInterrupt)] == []
                assert sum(isinstance(e, TurnStarted) for e in events) == 1
                assert await link.wait(WAIT) == 1
            assert [r.last_user_text for r in server.requests if r.route == "/v1/messages"] == ["SLOW please"]

    asyncio.run(scenario())


def test_H8_on_the_fake_the_interrupt_cancels_the_pending_request_and_the_link_refuses_the_late_answer(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server:
            async with fake_link(tmp_path, server) as link:
                events: list[LinkEvent] = []
                link.send_initialize()
                link.send_user("BASH: touch never-made", uuid=U1)
                asked = await collect(link, PermissionAsked, events)
                assert isinstance(asked, PermissionAsked)
                link.send_interrupt()
                cancelled = await collect(link, PermissionCancelled, events)
                assert isinstance(cancelled, PermissionCancelled) and cancelled.request is asked.request
                late = link.allow(asked.request.request_id)
                assert isinstance(late, ClaudeRpcRefusal) and late.code == "permission-cancelled"
                await collect(link, TurnFinished, events)
                link.close_stdin()
                assert await link.wait(WAIT) == 1
            assert not (tmp_path / "proj" / "never-made").exists()

    asyncio.run(scenario())


def test_a_hold_before_the_permission_request_lets_an_interrupt_land_first_and_nothing_is_asked(tmp_path: Path) -> None:
    """A step only the fake can hold (the binary's own order here is not recorded): the interrupt is read after
    the tool use and before the request is written; the fake rejects the tool use without asking."""
    async def scenario() -> None:
        with ModelServer() as server, FakeControl() as control:
            async with fake_link(tmp_path, server, control) as link:
                events: list[LinkEvent] = []
                control.hold("permission")
                link.send_initialize()
                link.send_user("BASH: touch held-back", uuid=U1)
                # the server numbers requests as they arrive: the start-up probe (HEAD /api/hello) races the
                # first turn's request, so the tool id's number is not fixed, only its form
                assert re.fullmatch(r"toolu_\d{4}", await held(control, "permission"))
                interrupt = link.send_interrupt()
                await link.outcome(interrupt)
                control.release("permission")
                finished = await collect(link, TurnFinished, events)
                assert isinstance(finished, TurnFinished) and finished.result.stop_reason == "tool_use"
                assert not any(isinstance(e, PermissionAsked) for e in events)
                link.close_stdin()
                assert await link.wait(WAIT) == 1

    asyncio.run(scenario())


def test_fake_engine_command_runs_this_interpreter_and_module() -> None:
    cmd = fake_engine_command("/x/ctl.sock")
    assert cmd == [sys.executable, "-m", "mosaic.claude_rpc.testing.fake_engine", "--fake-control", "/x/ctl.sock"]
