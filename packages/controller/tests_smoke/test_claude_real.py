"""The Claude adapter on the real pinned Claude Code 2.1.283 (issue 32), sealed by claude-rpc's `seal_launch`
(the pin, L7, checked at construction), in the loopback-only namespace against claude-rpc's scripted Anthropic
Messages server: pi-rpc's `EngineLink` shell over `ClaudeWire`, the controller's runtime on a private socket, a
client: take control, prompt, finished completed (every init names the sealed session); a slow reply
interrupted, finished interrupted and the stop reconciled. Run by `nox -s claude-smoke` (it needs
`MOSAIC_CLAUDE_DIR`, the install `smoke prepare` verified; a missing one fails, never skips). Not yet through
`LaunchingController`: Claude's lifecycle half is not built. The permission flows (issue 32 item 4: P7,
H5-H8) are `tests/claude_permission_flows.py`'s, the same as on the fake engine."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import claude_permission_flows
import pytest

from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.seal import check_launch, seal_launch
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller.client import Admitted, ControllerClient
from mosaic.controller.core import ControllerCore, CoreConfig
from mosaic.controller.engines.claude import CLAUDE_RULES, ClaudeWire
from mosaic.controller.runtime import ControllerRuntime
from mosaic.controller.testing import private_socket_dir
from mosaic.pi_rpc import EngineLink

WAIT = 60.0


@pytest.fixture(scope="module")
def claude() -> ClaudeInstall:
    value = os.environ.get("MOSAIC_CLAUDE_DIR")
    if not value or not Path(value).is_dir():
        pytest.fail(f"MOSAIC_CLAUDE_DIR must name the install `smoke prepare` verified (nox -s claude-smoke); got {value!r}")
    return ClaudeInstall(Path(value).resolve())


def test_claude_real_take_control_prompt_finish_interrupt(claude: ClaudeInstall, tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=tmp_path / "proj", base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            wire = CLAUDE_RULES.new_wire(command_bound=30.0)
            assert isinstance(wire, ClaudeWire)
            link = await EngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, core=wire, clock=time.time)
            try:
                core = ControllerCore(CoreConfig(conversation="claude-conversation", execution="exec-1",
                                                 binding="binding-1", incarnation="inc-" + "a" * 32,
                                                 engine=CLAUDE_RULES), now=time.time(), link=wire)
                runtime = ControllerRuntime(core, link, os.path.join(sockets, "c.sock"))
                await runtime.start()
                try:
                    client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                    try:
                        await client.observe()
                        await client.takeover()
                        admitted = await client.prompt("hello real")
                        assert isinstance(admitted, Admitted), admitted
                        async with asyncio.timeout(WAIT):
                            done = await client.wait_settled(admitted.request.client_request_id)
                        assert done.receipt is not None
                        assert done.receipt_state == "finished" and done.receipt["turnState"] == "completed", done
                        assert wire.claude.session_id == SESSION_UUID
                        slow = await client.prompt("SLOW please")
                        assert isinstance(slow, Admitted), slow
                        await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
                        stop = await client.interrupt()
                        async with asyncio.timeout(WAIT):
                            record = await client.wait_stop(stop["stop"])
                            cut = await client.wait_settled(slow.request.client_request_id)
                        assert record["state"] == "reconciled", record
                        assert cut.receipt is not None
                        assert cut.receipt_state == "finished" and cut.receipt["turnState"] == "interrupted", cut
                        assert core.admission_open and not core.overlaps
                    finally:
                        await client.aclose()
                finally:
                    await runtime.aclose()
            finally:
                await link.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("flow", claude_permission_flows.FLOWS)
def test_P7_H5_H6_H7_H8_claude_permission_flows_on_the_real_binary(flow: str, claude: ClaudeInstall,
                                                                   tmp_path: Path) -> None:
    """Issue 32 item 4 on the real pinned binary, sealed, in the namespace: a `BASH: touch ...` prompt makes
    the scripted model call Bash, Claude asks `can_use_tool`; allow once runs the command once (H6, H7),
    deny never runs it, an interrupt makes Claude cancel the request and a late answer is refused (H8, P6),
    a takeover answers once through the new projection (H5). What Claude did is read from the project
    directory and its tool result."""
    run = getattr(claude_permission_flows, flow)

    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            project = tmp_path / "proj"
            project.mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=project, base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            async with claude_permission_flows.claude_controller(launch.argv, launch.env, launch.cwd,
                                                                 sockets) as runtime:
                async with asyncio.timeout(WAIT * 2):
                    await run(runtime.socket_path, project)

    asyncio.run(scenario())


def test_H9_claude_real_an_interrupt_written_right_after_a_prompt_ends_reconciled(claude: ClaudeInstall,
                                                                                  tmp_path: Path) -> None:
    """H9 on the real binary: the interrupt is written right after the prompt, with no wait for any frame of
    it. Whichever order the binary reads them in (the turn started, or the message cancelled while queued:
    `tests/test_claude_fake_races.py` holds the fake there), the stop is reconciled, the receipt settles (finished
    interrupted, or failed ack-without-start when the message never started) and admission reopens: nothing
    hangs, nothing runs after."""
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=tmp_path / "proj", base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            wire = CLAUDE_RULES.new_wire(command_bound=30.0)
            assert isinstance(wire, ClaudeWire)
            link = await EngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, core=wire, clock=time.time)
            try:
                core = ControllerCore(CoreConfig(conversation="claude-conversation", execution="exec-1",
                                                 binding="binding-1", incarnation="inc-" + "a" * 32,
                                                 engine=CLAUDE_RULES), now=time.time(), link=wire)
                runtime = ControllerRuntime(core, link, os.path.join(sockets, "c.sock"))
                await runtime.start()
                try:
                    client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                    try:
                        await client.observe()
                        await client.takeover()
                        admitted = await client.prompt("SLOW please")
                        assert isinstance(admitted, Admitted), admitted
                        stop = await client.interrupt()
                        await runtime.wait_core(lambda c: c.stop is None or c.stop.step == "slot-wait", WAIT)
                        assert core.slot is None and core.stops[-1].state == "reconciled", core.stops[-1].record()
                        async with asyncio.timeout(WAIT):
                            record = await client.wait_stop(stop["stop"])
                            done = await client.wait_settled(admitted.request.client_request_id)
                        assert record["state"] == "reconciled", record
                        assert done.receipt is not None
                        outcome = (done.receipt_state, done.receipt.get("turnState") or done.receipt.get("reason"))
                        assert outcome in {("finished", "interrupted"), ("failed", "ack-without-start")}, done
                        print(f"H9 on the real binary: the prompt {outcome}")
                        assert core.admission_open and not core.overlaps and not core.run.active
                    finally:
                        await client.aclose()
                finally:
                    await runtime.aclose()
            finally:
                await link.aclose()

    asyncio.run(scenario())
