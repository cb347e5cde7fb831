"""The terminal as a person uses it: a real tmux server (its own socket name, 120x40) running
``python -m mosaic.mediated_terminal`` on a pty of its own behind a relay, keys sent with send-keys and
paste-buffer (raw chunks with `TmuxTerminal.chunk`: test_person.py), the screen read with capture-pane, against a real controller on pi-rpc's fake engine process (`fake_controller`). What the
engine received is the tap on the controller's engine link (`EngineTap`): every byte written to its stdin.

tmux is required: a missing tmux fails these tests (TmuxError), it never skips them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path

from term_harness import (
    KEYS,
    LABEL,
    REQUESTS,
    TRANSCRIPT_ROWS,
    WAIT,
    WIDTH,
    composer,
    composer_empty,
    ctl,
    held_turn,
    notes,
    raw,
    run,
    scene,
    seed,
    send_held,
    status,
    take_control,
    transcript,
    with_details,
)

from mosaic.controller.testing import fake_controller
from mosaic.controller_client import ControllerClient, LiveMessage, Transcript
from mosaic.mediated_terminal.render import transcript_rows
from mosaic.mediated_terminal.testing import EngineTap, tmux_terminal

INC_ONE = "inc-" + "1" * 32
INC_TWO = "inc-" + "2" * 32


def test_observer_attach_shows_the_history_the_seam_marker_and_the_status_observer(tmp_path: Path) -> None:
    async def main() -> None:
        history = seed(("user", "earlier question"), ("assistant", "earlier answer"))
        async with fake_controller(tmp_path / "rig", seed=history, incarnation=INC_ONE) as rig, \
                raw(rig.socket_path) as other:
            auth = await other.control()
            await ctl(rig, "hold", "model-chunk")
            await other.call("prompt", **auth, clientRequestId="r1", text="Say hello")
            await ctl(rig, "wait_held", "model-chunk", WAIT)
            # The terminal attaches mid-run: its seam is not quiet, so the marker sits between the history
            # page and the live items.
            async with tmux_terminal(rig.socket_path) as term:
                rows = await term.wait_text("reconcile marker")
                shown = transcript(rows)
                # The page already holds the new user message (Pi appends it before the model call).
                assert shown[:3] == ["user: earlier question", "assistant: earlier answer", "user: Say hello"]
                assert shown[3].startswith("~~ reconcile marker (not-quiet")
                assert "a message near here may repeat or be missing" in shown[3]
                assert status(rows).startswith("Watching (Ctrl-T takes control) · Pi is answering ")
                assert status(rows).endswith("re-reading the history")
                rows = await with_details(term, lambda d: d.startswith(
                    f"role observer | generation 2 | incarnation {INC_ONE[:12]} | binding active | "
                    "engine streaming |") and "markers reconciling" in d, "the details")
                assert rows[LABEL].strip() == "composer disabled: observer (Ctrl-T takes control)"
                # The run settles; the transcript re-reads the page and the marker goes (E4).
                await ctl(rig, "release", "model-chunk")
                rows = await term.wait_for(lambda r: "re-reading" not in status(r)
                                           and "reconcile marker" not in "\n".join(r), "a quiet seam")
                assert transcript(rows)[:4] == ["user: earlier question", "assistant: earlier answer",
                                                "user: Say hello", "assistant: Hello from the fake model."]
                assert status(rows) == "Watching (Ctrl-T takes control) · Pi is idle"

    run(main)


def test_S5_paste_then_enter_as_an_observer_is_not_admitted_and_sends_zero_engine_bytes(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            assert status(rows).startswith("Watching")
            mark = tap.mark()
            await term.paste("pasted reply\n")  # as send-message.sh does: a paste, then Enter
            await term.keys("Enter")
            rows = await term.wait_text("not admitted: controller - you do not control this conversation")
            assert "paste ignored: not admitted: controller" in notes(rows)
            assert composer_empty(rows)  # the composer is disabled: the paste never entered it
            assert "pasted reply" not in "\n".join(rows)
            assert all(r == "" for r in rows[REQUESTS])  # no prompt was sent, so none is listed
            assert tap.since(mark) == b""  # zero engine bytes
            assert rig.core.requests == {}  # nothing reached admission either
            state = await ctl(rig, "state")
            assert state["messageCount"] == 0 and state["isStreaming"] is False

    run(main)


def test_S4_a_control_transfer_clears_the_composer_and_the_next_submit_sends_only_the_new_text(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            assert status(rows).startswith("Watching") and composer_empty(rows)
            await with_details(term, lambda d: d.startswith("role observer | generation 1 |"), "generation 1")
            rows = await take_control(term)
            assert status(rows).startswith("You control this conversation") and composer_empty(rows)
            assert "you control the conversation now (generation 2)" in notes(rows)
            await term.type("/abandoned edit")
            rows = await term.wait_for(lambda r: composer(r)[0] == "/abandoned edit", "the typed text")
            # Another client takes control: the terminal's composer is cleared (S4; mutant 10 keeps it).
            async with raw(rig.socket_path) as other:
                observed = (await other.call("observe"))["result"]
                took = await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
                assert took["result"]["generation"] == 3
                rows = await term.wait_text("composer disabled: observer")
                rows = await term.wait_text("took control (generation 3); you are watching now")
                assert composer_empty(rows), composer(rows)
                assert 'composer cleared at a control transfer; set aside, never sent: "/abandoned edit"' \
                    in notes(rows)
                # Control returns to the terminal: still empty; the next submit sends only the new text.
                mark = tap.mark()
                await term.keys("C-t")
                rows = await term.wait_text("you control the conversation now (generation 4)")
                assert composer_empty(rows)
                await term.type("new text")
                await term.keys("Enter")
                rows = await term.wait_text('prompt "new text": done')
                assert composer_empty(rows)
                prompts = tap.prompts(mark)
                assert len(prompts) == 1, prompts
                command_id = json.loads(prompts[0])["id"]
                assert prompts[0] == b'{"id":"%s","type":"prompt","message":"new text"}\n' % command_id.encode()
                assert b"abandoned" not in tap.since(0)

    run(main)


def test_a_prompt_as_controller_streams_deltas_in_place_and_its_receipt_reads_sent_working_done(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            await send_held(rig, term, "Say hello", "preflight")
            rows = await term.wait_text('prompt "Say hello": sent')
            assert composer_empty(rows)  # cleared on submit
            await ctl(rig, "hold", "model-chunk", -1)  # stop before every delta
            await ctl(rig, "release", "preflight")
            await ctl(rig, "wait_held", "model-chunk", WAIT)
            await term.wait_text('prompt "Say hello": working')
            seen = []
            for expected in ("Hello", "Hello from the"):
                await ctl(rig, "release", "model-chunk")
                await ctl(rig, "wait_held", "model-chunk", WAIT)
                rows = await term.wait_text(f"assistant (streaming): {expected}")
                seen.append([r for r in transcript(rows) if r.startswith("assistant")])
            # In place: one assistant row that grows, never a second one.
            assert seen == [["assistant (streaming): Hello"], ["assistant (streaming): Hello from the"]]
            await ctl(rig, "unhold", "model-chunk")
            await ctl(rig, "release", "model-chunk")
            rows = await term.wait_text('prompt "Say hello": done')
            rows = await term.wait_text("assistant: Hello from the fake model.")
            assert [r for r in transcript(rows) if r] == ["[history unavailable: unavailable] the session file "
                                                         "does not exist yet (Pi writes it at the first "
                                                         "assistant message)",
                                                         "user: Say hello", "assistant: Hello from the fake model."]
            assert tap.prompts() == [tap.prompts()[0]] and b'"message":"Say hello"' in tap.prompts()[0]

    run(main)


def test_a_tool_call_shows_its_arguments_and_its_result(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term, "TOOLCALL please run it", "tool")
            rows = await term.wait_text("tool bash (running)")
            text = "\n".join(transcript(rows))
            assert 'tool bash (running): args {"command": "printf tool-ran-ok"}' in text
            assert '[tool call bash] {"command": "printf tool-ran-ok"}' in text
            await ctl(rig, "release", "tool")
            rows = await term.wait_text("assistant: Tool result was: tool-ran-ok.")
            text = "\n".join(transcript(rows))
            assert "tool result bash: tool-ran-ok" in text
            await term.wait_text('prompt "TOOLCALL please run it": done')

    run(main)


def test_ctrl_g_interrupts_the_turn_and_the_receipt_reads_done_interrupted(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term)
            mark = tap.mark()
            await term.keys("C-g")
            rows = await term.wait_text("interrupt: reconciled")
            rows = await term.wait_text('prompt "Say hello": done (interrupted)')
            assert status(rows).startswith("You control this conversation")
            written = [r["type"] for r in EngineTap.records(tap.since(mark))]
            assert written[:2] == ["clear_queue", "abort"]  # R3-1, through the terminal's key

    run(main)


def test_the_force_stop_key_confirms_what_it_kills_then_shows_why_the_stop_is_uncertain(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await term.wait_text("composer disabled: observer")
            await term.keys("C-k")  # an observer cannot force stop: the controller refuses
            await term.wait_text("force stop refused: controller")
            await take_control(term)
            await term.keys("C-k")
            rows = await term.wait_text("Force stop execution exec-1?")
            text = "\n".join(rows)
            assert "It kills: every process of the execution's engine cgroup (the cohort), frozen then killed" in text
            assert "Scope: no cohort attached to this controller (the stop cannot be proven)" in text
            assert "Processes in it now: not counted (no cohort is counted by this controller)" in text
            assert "y: force stop    n: cancel" in text
            await term.keys("n")
            rows = await term.wait_text("force stop cancelled: nothing was done")
            assert "Force stop execution" not in "\n".join(rows)
            assert status(rows) == "You control this conversation · Pi is idle"
            await term.keys("C-k")
            await term.wait_text("Force stop execution exec-1?")
            await term.keys("y")
            rows = await term.wait_text("force stop: UNCERTAIN (no-cohort)")
            rows = await term.wait_text("UNCERTAIN: Ctrl-K force stops it, Ctrl-C quits")
            await with_details(term, lambda d: "binding uncertain | engine uncertain | admission closed (" in d,
                               "binding uncertain")

    run(main)


HOSTILE_HISTORY = "hist \x1b]0;pwned-title\x07 \x1b[2J \x1b[31mred \u202eevil\u202c \u2066iso\u2069 \x9b2J tail"
HOSTILE_LIVE = "live \x1b[2J\x1b]0;live-title\x07 \u202eflip\u202c end"


def test_hostile_strings_from_the_engine_and_the_history_are_shown_escaped_and_change_nothing(
        tmp_path: Path) -> None:
    async def main() -> None:
        history = seed(("user", HOSTILE_HISTORY), ("assistant", "lone \ud800 surrogate \u200f"))
        async with scene(tmp_path / "rig", seed=history) as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            title = await term.title()
            shown = transcript(rows)
            assert shown[0] == ("user: hist ^[]0;pwned-title^G ^[[2J ^[[31mred <U+202E>evil<U+202C> "
                                "<U+2066>iso<U+2069> <U+009B>2J tail")
            assert shown[1] == "assistant: lone <U+D800> surrogate <U+200F>"
            # Each escape is drawn in its own style (reverse), so it differs from the same characters typed.
            styled = (await term.styled_screen())[1]
            assert "\x1b[7m^[\x1b[" in styled or "\x1b[7m^[" in styled, repr(styled)
            # Live engine text: another controller's prompt, echoed by the engine as the user message.
            async with raw(rig.socket_path) as other:
                auth = await other.control()
                await other.call("prompt", **auth, clientRequestId="h1", text=HOSTILE_LIVE)
                rows = await term.wait_text("assistant: Hello from the fake model.")
            shown = transcript(rows)
            assert "user: live ^[[2J^[]0;live-title^G <U+202E>flip<U+202C> end" in shown
            # The screen was not cleared (the history rows are still there) and the title did not change.
            assert shown[0].startswith("user: hist ^[]0;pwned-title")
            assert await term.title() == title
            assert "pwned-title" not in title and "live-title" not in title

    run(main)


def test_the_controller_going_away_is_shown_the_composer_is_kept_and_reconnect_marks_outcome_unknown(
        tmp_path: Path) -> None:
    async def main() -> None:
        links = tempfile.mkdtemp(prefix="mosaic-link-", dir="/tmp")
        link = os.path.join(links, "controller.sock")  # the path the terminal knows; it points at a controller
        try:
            first = fake_controller(tmp_path / "one", incarnation=INC_ONE)
            one = await first.__aenter__()
            try:
                os.symlink(one.socket_path, link)
                async with tmux_terminal(link) as term:
                    await take_control(term)
                    await ctl(one, "hold", "model-chunk")
                    await term.type("Say hello")
                    await term.keys("Enter")
                    await term.wait_text('prompt "Say hello": working')
                    await term.type("draft kept")
                    await term.wait_for(lambda r: composer(r)[0] == "draft kept", "the draft")
                    await first.__aexit__(None, None, None)  # the controller goes away mid-turn
                    one = None
                    # The status and the note change in one model update: wait for the frame that shows both.
                    rows = await term.wait_for(lambda r: "NOT CONNECTED" in status(r) and "connection is gone"
                                               in notes(r), "the lost connection in the status and the notes")
                    assert status(rows).startswith("NOT CONNECTED (shutdown): Ctrl-O reconnects; your draft is kept")
                    assert "the controller connection is gone (shutdown); the composer text is kept" in notes(rows)
                    assert composer(rows)[0] == "draft kept"
                    assert rows[LABEL].strip().startswith("composer disabled: not connected")
                    assert 'prompt "Say hello": working' in "\n".join(rows[REQUESTS])  # not "unsent"
                    async with fake_controller(tmp_path / "two", incarnation=INC_TWO, execution="exec-2") as two:
                        tap = EngineTap(two.core.link)
                        os.unlink(link)
                        os.symlink(two.socket_path, link)
                        await term.keys("C-o")
                        rows = await term.wait_text(f"reconnected to a new controller (incarnation {INC_TWO[:12]})")
                        rows = await term.wait_text('prompt "Say hello": outcome unknown, check the transcript (never resent)')
                        assert status(rows).startswith("Watching")
                        assert "1 request(s) under the old one: outcome unknown" in notes(rows)
                        # The new controller is another control context: the kept draft is set aside, unsent.
                        assert composer_empty(rows)
                        assert 'set aside, never sent: "draft kept"' in notes(rows)
                        assert tap.since(0) == b"" and two.core.requests == {}  # never resent
                        await with_details(term, lambda d: d.startswith(
                            f"role observer | generation 1 | incarnation {INC_TWO[:12]}"), "the new controller")
            finally:
                if one is not None:
                    await first.__aexit__(None, None, None)
        finally:
            shutil.rmtree(links, ignore_errors=True)

    run(main)


def test_E7_the_terminal_renders_the_same_stream_as_the_library_as_observer_then_as_controller(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            library = await ControllerClient.connect(rig.socket_path)
            view = Transcript(library)
            view.start()
            try:
                await term.wait_text("composer disabled: observer")  # both attach while idle: the same seam
                await library.observe()

                async def same(done: str) -> None:
                    def ended(v: Transcript) -> bool:
                        return any(isinstance(i, LiveMessage) and i.ended and done in i.text for i in v.items)
                    await asyncio.wait_for(view.wait_until(ended), WAIT)
                    await view.wait_until(lambda v: v.status.engine_state == "idle")
                    expected = transcript_rows(view.items, WIDTH)
                    await term.wait_for(lambda r: transcript(r)[:len(expected)] == expected
                                        and not any(transcript(r)[len(expected):]), "the library's lines")
                    assert len(expected) >= 3

                # Observer: another client controls and prompts; the terminal only renders.
                async with raw(rig.socket_path) as other:
                    auth = await other.control()
                    await other.call("prompt", **auth, clientRequestId="e7", text="THINK about it")
                    await same("Hello from the fake model.")
                    assert b'"message":"THINK about it"' in tap.prompts()[0]
                    # Controller: the terminal takes control and submits; the library renders the same.
                    await take_control(term)
                    await term.type("TOOLCALL please run it")
                    await term.keys("Enter")
                    await same("Tool result was: tool-ran-ok.")
                    assert len(tap.prompts()) == 2 and b'"message":"TOOLCALL please run it"' in tap.prompts()[1]
            finally:
                await view.aclose()
                await library.aclose()

    run(main)


def test_page_keys_scroll_alt_enter_and_ctrl_j_add_a_line_and_ctrl_d_quits(tmp_path: Path) -> None:
    async def main() -> None:
        history = seed(*[("user" if i % 2 == 0 else "assistant", f"message {i:02d}") for i in range(40)])
        async with scene(tmp_path / "rig", seed=history) as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            shown = transcript(rows)
            assert shown[-1] == "assistant: message 39" and "message 12" not in "\n".join(shown)
            above = 40 - TRANSCRIPT_ROWS
            await term.keys("PPage")  # a page (the height less 2), held at the top
            rows = await term.wait_text("scrolled up: 0 new below (PgDn)")
            assert transcript(rows)[0] == "user: message 00"
            assert transcript(rows)[-1] == f"{'user' if (39 - above) % 2 == 0 else 'assistant'}: message {39 - above:02d}"
            await term.keys("NPage")
            rows = await term.wait_gone("scrolled up")
            assert transcript(rows)[-1] == "assistant: message 39"
            # Alt-Enter and Ctrl-J: a newline in the composer, nothing sent; Enter sends all as one prompt.
            await take_control(term)
            mark = tap.mark()
            await term.type("first line")
            await term.keys("Escape", "Enter")
            await term.type("second line")
            await term.keys("C-j")
            await term.type("third line")
            rows = await term.wait_for(lambda r: composer(r) == ["first line", "second line", "third line"],
                                       "three lines")
            assert tap.since(mark) == b""
            await term.keys("Enter")
            await term.wait_text('prompt "first line^Jsecond line^Jthird line": done')
            (line,) = tap.prompts(mark)
            assert json.loads(line)["message"] == "first line\nsecond line\nthird line"
            assert rows[KEYS].startswith("Enter send  ^J newline  ^T control  ^G interrupt  ^O re-read")
            await term.keys("C-d")
            await term.wait_text("[terminal exited 0 ]")

    run(main)
