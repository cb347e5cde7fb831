"""A §5 race on Claude whose order no recording holds, derived from claude-rpc's fake Claude engine (held to the
pinned binary's recordings by claude-rpc's conformance suite; its hold points land the race at an exact
step): H9's interrupt written right after the prompt, read by the engine before the prompt's turn started.
The fake engine is spawned sealed against the scripted model server and driven through pi-rpc's
`EngineLink` shell over `ClaudeWire`, the controller's runtime on a private socket, and a client."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.fake_control import FakeControl
from mosaic.claude_rpc.testing.fake_engine import fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller.client import Admitted, ControllerClient
from mosaic.controller.core import ControllerCore, CoreConfig
from mosaic.controller.engines.claude import CLAUDE_RULES, ClaudeCommand, ClaudeWire
from mosaic.controller.runtime import ControllerRuntime
from mosaic.controller.testing import private_socket_dir
from mosaic.pi_rpc import EngineLink
from mosaic.pi_rpc.link import CommandOutcome

WAIT = 30.0


def test_H9_claude_an_interrupt_read_before_the_prompts_turn_started_cancels_it_and_reconciles(
        tmp_path: Path) -> None:
    """The fake holds its first stdout record (the prompt's `queued` frame) while the controller writes its
    interrupt (`cancel_queued`); released, it reads the interrupt before the prompt's turn starts: the
    prompt's `cancelled` frame, then the receipt listing it cancelled (the binary's order for a message
    cancelled while queued: recordings/sealed-interrupt-cancel-queued). The prompt never ran: its receipt
    is failed, ack-without-start (not held acknowledged for ever); the controller's own message is not input
    from outside Mosaic (no removed items), so the chain's abort and post-settle clear reconcile the stop and
    admission reopens; nothing starts after."""
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets, FakeControl() as control:
            (tmp_path / "proj").mkdir()
            launch = fake_launch(tmp_path / "s", tmp_path / "proj", session_id=SESSION_UUID, resume=False,
                                 base_url=server.base_url, control=control.path)
            wire = CLAUDE_RULES.new_wire(command_bound=30.0)
            assert isinstance(wire, ClaudeWire)
            link = await EngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, core=wire, clock=time.time)
            loop = asyncio.get_running_loop()
            try:
                await loop.run_in_executor(None, control.accept, WAIT)
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
                        await loop.run_in_executor(None, control.hold, "stdout", 1)
                        admitted = await client.prompt("SLOW please")
                        assert isinstance(admitted, Admitted), admitted
                        detail = await loop.run_in_executor(None, control.wait_held, "stdout", WAIT)
                        assert detail == "command_lifecycle"  # the prompt's `queued` frame, held
                        prompt = core.slot.prompt if core.slot is not None else None
                        assert isinstance(prompt, ClaudeCommand) and prompt.response is None
                        stop = await client.interrupt()
                        clear = core.stop.pending if core.stop is not None else None
                        assert isinstance(clear, ClaudeCommand) and core.stop is not None
                        assert core.stop.slot_case == "preflight"
                        await runtime.wait_core(lambda c: clear.outcome is not CommandOutcome.QUEUED
                                                and clear.outcome is not CommandOutcome.WRITING, WAIT)
                        control.release("stdout")
                        # The chain is over, or waits on a slot nothing will settle (the stuck state the
                        # assertions below refuse: its post-settle clear answered, the slot acknowledged).
                        await runtime.wait_core(lambda c: c.stop is None or c.stop.step == "slot-wait", WAIT)
                        assert core.slot is None, core.slot.request.receipt_record() if core.slot else None
                        assert core.stops[-1].state == "reconciled", core.stops[-1].record()
                        async with asyncio.timeout(WAIT):
                            record = await client.wait_stop(stop["stop"])
                            done = await client.wait_settled(admitted.request.client_request_id)
                        assert clear.out is not None and clear.out.evidence is not None
                        assert [o.key for o in clear.out.evidence.ours_cancelled] == [prompt.id]
                        assert clear.out.evidence.nothing_queued_runs
                        assert done.receipt is not None, done
                        assert done.receipt_state == "failed" and done.receipt["reason"] == "ack-without-start", done
                        assert record["state"] == "reconciled", record
                        assert core.admission_open and not core.overlaps and core.stop is None
                        assert core.stops[-1].clears and all(c.empty for c in core.stops[-1].clears)
                        assert wire.claude.message(prompt.id) is None  # its terminal frame was read
                        assert not core.run.active  # nothing started after
                    finally:
                        await client.aclose()
                finally:
                    await runtime.aclose()
            finally:
                await link.aclose()

    asyncio.run(scenario())

