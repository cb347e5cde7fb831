"""The Claude adapter on a running engine: claude-rpc's fake Claude engine (held to the pinned binary by
claude-rpc's conformance suite), spawned sealed (`fake_launch`) against the scripted model server, driven
through pi-rpc's `EngineLink` shell over `ClaudeWire` and the controller's runtime on a private socket, with a
client: take control, prompt, finished completed; prompt a slow reply, interrupt, finished interrupted and the
stop reconciled. (Not yet through `LaunchingController`: Claude's lifecycle half is not built.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import claude_permission_flows
import pytest
from claude_rig import claude_controller
from claude_rig import wire as rig_wire

from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.fake_engine import fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller.client import Admitted, ControllerClient
from mosaic.controller.testing import private_socket_dir

WAIT = 30.0


def test_claude_fake_engine_take_control_prompt_finish_interrupt(tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = fake_launch(tmp_path / "s", tmp_path / "proj", session_id=SESSION_UUID, resume=False,
                                 base_url=server.base_url)
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                core, wire = runtime.core, rig_wire(runtime)
                client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    assert client.role == "controller"
                    admitted = await client.prompt("hello fake")
                    assert isinstance(admitted, Admitted), admitted
                    async with asyncio.timeout(WAIT):
                        done = await client.wait_settled(admitted.request.client_request_id)
                    assert done.receipt is not None, done
                    assert done.receipt_state == "finished" and done.receipt["turnState"] == "completed", done
                    assert wire.claude.session_id == SESSION_UUID
                    slow = await client.prompt("SLOW please")
                    assert isinstance(slow, Admitted), slow
                    async with asyncio.timeout(WAIT):
                        await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
                    stop = await client.interrupt()
                    async with asyncio.timeout(WAIT):
                        record = await client.wait_stop(stop["stop"])  # the stop record: its id
                        cut = await client.wait_settled(slow.request.client_request_id)
                    assert record["state"] == "reconciled", record
                    assert cut.receipt is not None, cut
                    assert cut.receipt_state == "finished" and cut.receipt["turnState"] == "interrupted", cut
                    assert core.admission_open and not core.overlaps
                finally:
                    await client.aclose()

    asyncio.run(scenario())


@pytest.mark.parametrize("flow", claude_permission_flows.FLOWS)
def test_P7_H5_H6_H7_H8_claude_permission_flows_on_the_fake_engine(flow: str, tmp_path: Path) -> None:
    """Issue 32 item 4 on the fake Claude engine (its `can_use_tool`, cancel at an interrupt and tool runs are
    held to the pinned binary by claude-rpc's conformance suite): the flows of `claude_permission_flows`, the
    same as on the real binary in tests_smoke."""
    run = getattr(claude_permission_flows, flow)

    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            project = tmp_path / "proj"
            project.mkdir()
            launch = fake_launch(tmp_path / "s", project, session_id=SESSION_UUID, resume=False,
                                 base_url=server.base_url)
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                async with asyncio.timeout(WAIT * 2):
                    await run(runtime.socket_path, project)

    asyncio.run(scenario())
