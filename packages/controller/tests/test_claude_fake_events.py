"""E1's library leg on Claude: claude-rpc's fake Claude engine (held to the pinned binary's recordings by
claude-rpc's conformance suite) spawned sealed against the scripted model server, the controller's runtime
over `ClaudeWire` on a private socket, two clients each with the library's `Transcript`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from claude_rig import claude_controller

from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.fake_engine import fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller.client import (
    Admitted,
    ControllerClient,
    HistoryUnavailable,
    LiveMessage,
    ToolRun,
    Transcript,
    TranscriptItem,
)
from mosaic.controller.testing import private_socket_dir

WAIT = 30.0


def _project(items: tuple[TranscriptItem, ...]) -> list[tuple[str, Any, str]]:
    out: list[tuple[str, Any, str]] = []
    for item in items:
        if isinstance(item, LiveMessage):
            out.append(("live", item.role, item.text))
        elif isinstance(item, ToolRun):
            out.append(("tool", item.tool_name, json.dumps(item.args, sort_keys=True)))
        elif isinstance(item, HistoryUnavailable):
            out.append(("unavailable", item.refusal.get("code"), ""))
        else:
            out.append((type(item).__name__, None, ""))
    return out


def test_E1_claude_a_tool_turn_streams_to_two_transcripts_once_each_without_a_refresh(tmp_path: Path) -> None:
    """`BASH: echo e1` on the fake (a read-only command: Claude runs it without a permission request): the
    tool call, its result and the final answer reach both clients' transcripts once each, the same items,
    with no re-read and no dropped repeat; the receipt finished completed. Claude does not echo the
    person's prompt (the seal has no `--replay-user-messages`), so no live user item shows it: what a
    terminal on a Claude seat shows of the person's own text is item 7's."""
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = fake_launch(tmp_path / "s", tmp_path / "proj", session_id=SESSION_UUID, resume=False,
                                 base_url=server.base_url)
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                core = runtime.core
                a = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                b = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                views = [Transcript(a), Transcript(b)]
                try:
                    for view in views:
                        view.start()
                    await a.observe()
                    await b.observe()
                    await a.takeover()
                    outcome = await a.prompt("BASH: echo e1")
                    assert isinstance(outcome, Admitted), outcome
                    async with asyncio.timeout(WAIT):
                        done = await a.wait_settled(outcome.request.client_request_id)
                    assert done.receipt is not None and done.receipt_state == "finished", done
                    assert done.receipt["turnState"] == "completed", done

                    def shown(view: Transcript) -> bool:
                        return sum(isinstance(i, LiveMessage) and i.role == "assistant" and i.ended
                                   for i in view.items) >= 2

                    for view in views:
                        async with asyncio.timeout(WAIT):
                            await view.wait_until(shown)
                    first, second = (_project(v.items) for v in views)
                    assert first == second, (first, second)
                    kinds = [(kind, role) for kind, role, _ in first if kind != "unavailable"]
                    assert kinds == [("live", "assistant"), ("tool", "Bash"), ("live", "assistant")], first
                    assert sum(1 for k, _, _ in first if k == "tool") == 1
                    final = [t for k, r, t in first if k == "live" and r == "assistant"][-1]
                    assert final, first  # the new final answer, shown once
                    tool = next(i for i in views[0].items if isinstance(i, ToolRun))
                    assert tool.args == {"command": "echo e1", "description": "scripted bash"}
                    assert not tool.running and tool.is_error is False and "e1" in json.dumps(tool.result)
                    assert all(v.reads == 0 and v.dropped_repeats == 0 and v.held == 0 for v in views)
                    assert not core.overlaps and core.admission_open
                finally:
                    for view in views:
                        await view.aclose()
                    await a.aclose()
                    await b.aclose()

    asyncio.run(scenario())
