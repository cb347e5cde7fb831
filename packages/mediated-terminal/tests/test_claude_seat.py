"""The terminal on a Claude seat (issue 32 item 7): a real tmux terminal over a controller of claude-rpc's fake
Claude engine (held to the pinned binary by claude-rpc's conformance suite), spawned sealed against claude-rpc's
scripted model, driven through pi-rpc's `EngineLink` over `ClaudeWire`, as the controller's
`tests/test_claude_fake_engine.py` drives it. The header names the engine the controller's observe reply names
("Claude"); the status says what Claude does; taking control, a prompt answered, an interrupt of a slow reply
work as on a Pi seat. (No history reader: Claude's lifecycle half gives the page; the history says so.)"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

from term_harness import HEADER, WAIT, notes, run, status, take_control, transcript

from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.fake_engine import fake_launch
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller.core import ControllerCore, CoreConfig
from mosaic.controller.engines.claude import CLAUDE_RULES
from mosaic.controller.runtime import ControllerRuntime
from mosaic.controller.testing import private_socket_dir
from mosaic.mediated_terminal.testing import TmuxTerminal, tmux_terminal
from mosaic.pi_rpc import EngineLink


@contextlib.asynccontextmanager
async def claude_terminal(root: Path) -> AsyncIterator[tuple[ControllerRuntime, TmuxTerminal]]:
    """A controller of the fake Claude engine on a private socket, and the terminal attached to it."""
    with ModelServer() as server, private_socket_dir() as sockets:
        (root / "proj").mkdir(parents=True)
        launch = fake_launch(root / "s", root / "proj", session_id=SESSION_UUID, resume=False,
                             base_url=server.base_url)
        wire = CLAUDE_RULES.new_wire(command_bound=30.0)
        link = await EngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, core=wire, clock=time.time)
        try:
            core = ControllerCore(CoreConfig(conversation="claude-conversation", execution="exec-1",
                                             binding="binding-1", incarnation="inc-" + "c" * 32,
                                             engine=CLAUDE_RULES), now=time.time(), link=wire)
            runtime = ControllerRuntime(core, link, os.path.join(sockets, "controller.sock"))
            await runtime.start()
            try:
                async with tmux_terminal(runtime.socket_path, width=120, height=40) as term:
                    yield runtime, term
            finally:
                await runtime.aclose()
        finally:
            await link.aclose()


def test_the_terminal_on_a_claude_seat_names_the_engine_and_prompts_and_interrupts_as_on_pi(tmp_path: Path) -> None:
    async def main() -> None:
        async with claude_terminal(tmp_path / "rig") as (runtime, term):
            rows = await term.wait_text("composer disabled: observer")
            assert rows[HEADER].startswith(" mosaic-terminal · Claude · conversation claude-conv")
            assert status(rows) == "Watching (Ctrl-T takes control) · Claude is idle"
            await take_control(term)
            await term.type("hello fake")
            await term.keys("Enter")
            rows = await term.wait_text('prompt "hello fake": done')
            assert "assistant: Reply to: hello fake" in "\n".join(transcript(rows))
            await term.type("SLOW please")
            await term.keys("Enter")
            rows = await term.wait_for(lambda r: status(r).startswith("You control this conversation · Claude is "
                                                                      "answering "), "Claude answering")
            await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
            await term.keys("C-g")
            # The note names the engine the controller names (never Pi on a Claude seat).
            rows = await term.wait_text("interrupt sent: the controller clears ")
            assert "interrupt sent: the controller clears Claude's queue, then aborts the turn" in "\n".join(rows)
            rows = await term.wait_for(lambda r: "interrupt: reconciled" in notes(r), "the stop")
            assert re.search(r"\bPi\b", notes(rows)) is None, notes(rows)
            rows = await term.wait_text('prompt "SLOW please": done (interrupted)')
            assert status(rows) == "You control this conversation · Claude is idle"

    run(main)
