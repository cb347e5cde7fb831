"""The terminal against a controller on the real Pi 0.85.1 with the scripted model (one of the terminal's
flows also runs against the real Pi): observer, take control, a prompt with a tool call streamed to the screen
with its arguments and result, the receipt reading done, and the exact prompt bytes the engine received; and
the whole loop a person runs from the commands (issue 29): serve, force stop, recover, serve again from the
record, prompt, with the terminal in tmux."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from term_harness import (
    HEIGHT,
    WAIT,
    WIDTH,
    composer_empty,
    dialog_prompt,
    notes,
    notes_whole,
    run,
    status,
    take_control,
    transcript,
)

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


def test_P2_the_terminal_answers_a_select_on_the_real_pi_with_the_fixture_extension(
        tmp_path: Path, pi_dir: Path, model: Any) -> None:
    """Issue 33 item 4 on the real sealed Pi 0.85.1 with pi-rpc's fixture extension and the controller
    answering dialogs: the select's labels drawn inert beside their keys, key 2 (one read) writes one
    `extension_ui_response` with the exact label, and the extension got exactly it."""
    async def main() -> None:
        async with real_controller(tmp_path / "rig", pi_dir, model.base_url, dialogs=True) as rig:
            tap = EngineTap(rig.core.link)
            async with tmux_terminal(rig.socket_path, width=WIDTH, height=HEIGHT) as term:
                await take_control(term)
                await term.type(dialog_prompt("select"))
                await term.keys("Enter")
                rows = await term.wait_text("Pi asks (select)")
                text = "\n".join(rows)
                assert "  2  <i>Deny</i>" in text and "  3  Always <U+202E>wolla<U+202C>" in text
                mark = tap.mark()
                await term.chunk(b"2")
                rows = await term.wait_text("tool result mosaic_fixture_dialog: ")
                assert 'tool result mosaic_fixture_dialog: select answered "<i>Deny</i>"' in "\n".join(transcript(rows))
                written = [r for r in EngineTap.records(tap.since(mark)) if r["type"] == "extension_ui_response"]
                assert [r["value"] for r in written] == ["<i>Deny</i>"]

    run(main)


class Serve:
    """`mosaic-controller serve` on a pseudo-terminal of its own, as a person runs it in another window
    (`setsid -c`: the pty is its controlling terminal, so Ctrl-C is a SIGINT); every read is bounded."""

    def __init__(self, argv: list[str]) -> None:
        master, slave = os.openpty()
        self.master = master
        self.proc = subprocess.Popen([shutil.which("setsid") or "setsid", "-c", *argv], stdin=slave, stdout=slave,
                                     stderr=slave, env={**os.environ, "LC_ALL": "C.UTF-8"}, close_fds=True)
        os.close(slave)
        self.output = ""

    def _read(self, timeout: float) -> bool:
        if not select.select([self.master], [], [], timeout)[0]:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:
            return False
        self.output += chunk.decode(errors="replace").replace("\r\n", "\n")
        return bool(chunk)

    def read_until(self, pattern: str, timeout: float = WAIT) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := re.search(pattern, self.output)) is None:
            left = deadline - time.monotonic()
            assert left > 0, f"no {pattern!r} within {timeout}s: {self.output}"
            assert self._read(min(left, 0.5)), f"serve ended before {pattern!r}: {self.output}"
        return found

    def ctrl_c(self) -> int:
        os.write(self.master, b"\x03")
        code = self.proc.wait(WAIT)
        while self._read(0.2):  # what it said last, up to its end
            pass
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)


def test_the_whole_loop_from_the_commands_serve_terminal_force_stop_recover_serve_again_prompt(pi_dir: Path) -> None:
    """Issue 29 as a person runs it: `mosaic-controller fixture` and `serve` in one window, `mosaic-terminal` in
    tmux; Ctrl-T, a prompt, Ctrl-K y (its next step once), Ctrl-R y (the note names serve's exact command);
    Ctrl-C on serve: one line, exit 0; the command as printed serves the recovered conversation; Ctrl-O,
    Ctrl-T, a prompt answered; Esc interrupts an answer; Ctrl-C asks once during an answer, then quits."""
    if os.geteuid() != 0:
        pytest.fail("serve needs root here (a direct cgroup under the cgroup2 root, the engine account)")
    world = Path(tempfile.mkdtemp(prefix="mosaic-loop-", dir="/tmp"))
    os.chmod(world, 0o755)
    cli = [sys.executable, "-m", "mosaic.controller"]
    sock = world / "ctl" / "controller.sock"
    session = world / "fx" / "proj" / ".pi" / "state" / "seat" / "sessions" / "s.jsonl"
    serves: list[Serve] = []

    async def main() -> None:
        made = subprocess.run([*cli, "fixture", str(world / "fx")], capture_output=True, text=True, timeout=WAIT)
        assert made.returncode == 0, made
        serves.append(Serve([*cli, "serve", "--fixture-root", str(world / "fx"), "--session", str(session),
                             "--socket", str(sock), "--pi-dir", str(pi_dir), "--scripted-model"]))
        first = serves[0]
        first.read_until(r"serving \S+: claim ")
        async with tmux_terminal(str(sock), width=WIDTH, height=HEIGHT) as term:
            await take_control(term)
            await term.type("Say hello")
            await term.keys("Enter")
            await term.wait_text('prompt "Say hello": done')
            await term.keys("C-k")
            await term.wait_text("y: force stop    n: cancel")
            await term.keys("y")
            rows = await term.wait_for(lambda r: "next: Ctrl-R recovers" in notes(r), "the next step after the stop")
            assert notes_whole(rows).count("next:") == 1, notes_whole(rows)
            await term.keys("C-r")
            await term.wait_text("y: recover    n: cancel")
            await term.keys("y")
            command = first.read_until(r"\n  (\S.*--eligibility elig-[0-9a-f]{32})\n").group(1)
            rows = await term.wait_for(lambda r: command in notes_whole(r), "the command in the terminal's note")
            assert f"next: stop this controller's serve (Ctrl-C there), then run: {command}" in notes_whole(rows)
            assert first.ctrl_c() == 0, first.output
            assert "already proven stopped" in first.output
            for wrong in ("Traceback", "lifecycle step", "could not be force stopped"):
                assert wrong not in first.output, first.output
            await term.wait_for(lambda r: status(r).startswith("NOT CONNECTED"), "the connection to go")
            serves.append(Serve(shlex.split(command)))
            serves[1].read_until(r"serving \S+: claim \S+ \(recovered\) in ")
            await term.keys("C-o")
            await term.wait_text("reconnected to a new controller")
            await term.keys("C-t")
            await term.wait_text("composer: you control")
            await term.type("Say hello again")
            await term.keys("Enter")
            await term.wait_text('prompt "Say hello again": done')
            await term.wait_text("assistant: Hello from the fake model.")
            await term.type("SLOW stream please")
            await term.keys("Enter")
            await term.wait_for(lambda r: any(x.startswith("assistant (streaming): tick") for x in transcript(r)),
                                "the slow answer to stream")
            await term.keys("C-c")
            await term.wait_text("the answer keeps running in the engine; Ctrl-C again to leave")
            await term.keys("Escape")
            await term.wait_text('prompt "SLOW stream please": done (interrupted)')
            await term.keys("C-c")
            rows = await term.wait_text("[terminal exited 0 ]")
            assert "Traceback" not in "\n".join(rows) + term.read_stderr()
        assert serves[1].ctrl_c() == 0, serves[1].output
        assert re.search(r"force stop \S+: stopped \(the cohort proof says every process ended\)", serves[1].output)
        assert "Traceback" not in serves[1].output

    try:
        run(main)
    finally:
        for s in serves:
            s.close()
        subprocess.run(["rm", "-rf", "--one-file-system", str(world)], check=False)
