"""The terminal against a controller on the real Pi 0.85.1 with the scripted model (one of the terminal's
flows also runs against the real Pi): observer, take control, a prompt with a tool call streamed to the screen
with its arguments and result, the receipt reading done, and the exact prompt bytes the engine received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from term_harness import HEIGHT, WIDTH, composer_empty, notes, run, status, take_control, transcript

from mosaic.controller.testing import real_controller
from mosaic.mediated_terminal.testing import EngineTap, tmux_terminal


def test_the_terminal_on_the_real_pi_observes_takes_control_and_runs_a_tool_call(
        tmp_path: Path, pi_dir: Path, model: Any) -> None:
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url) as rig:
            tap = EngineTap(rig.core.link)
            async with tmux_terminal(rig.socket_path, width=WIDTH, height=HEIGHT) as term:
                rows = await term.wait_text("composer disabled: observer")
                assert status(rows).startswith("Watching (Ctrl-T takes control)")
                rows = await take_control(term)
                assert status(rows).startswith("You control this conversation") and composer_empty(rows)
                assert "you control the conversation now (generation 2)" in notes(rows)
                mark = tap.mark()
                await term.type("TOOLCALL please run it")
                await term.keys("Enter")
                rows = await term.wait_text('prompt "TOOLCALL please run it": done')
                rows = await term.wait_text("assistant: Tool result was: tool-ran-ok.")
                text = "\n".join(transcript(rows))
                assert "user: TOOLCALL please run it" in text
                assert '[tool call bash] {"command": "printf tool-ran-ok"}' in text
                assert "tool result bash: tool-ran-ok" in text
                prompts = tap.prompts(mark)
                assert len(prompts) == 1
                assert json.loads(prompts[0])["message"] == "TOOLCALL please run it"
                command_id = json.loads(prompts[0])["id"]
                assert prompts[0] == (b'{"id":"%s","type":"prompt","message":"TOOLCALL please run it"}\n'
                                      % command_id.encode())

    run(main)
