"""The terminal as a person uses it (seed README "The terminal"), one test or more per promise, each
driving the real terminal in tmux (120x40 unless it says) against a controller on pi-rpc's fake engine.
Input arrives as a person's keyboard and paste produce it: raw byte chunks written to the terminal's pty
with one write(2) each (`TmuxTerminal.chunk`, through the relay), besides send-keys. What the engine
received is the tap on the controller's engine link.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from term_harness import (
    HEADER,
    REQUESTS,
    STATUS,
    WAIT,
    WIDTH,
    composer,
    composer_empty,
    ctl,
    flat,
    held_turn,
    label_row,
    notes,
    notes_whole,
    raw,
    run,
    scene,
    seed,
    status,
    style_at,
    take_control,
    transcript,
    with_details,
)

from mosaic.controller.core import Effect
from mosaic.controller.testing import no_cohort_effects
from mosaic.mediated_terminal.testing import EngineTap

UNCERTAIN = "approval uncertain (a Pi dialog was seen during this execution)"
TRANSCRIPT_END = STATUS - 6  # the dialogs panel (two dialogs, up to three rows each) sits above the status


def messages(tap: EngineTap, mark: int = 0) -> list[str]:
    """The text of every prompt the engine received since `mark`, in order."""
    return [json.loads(line)["message"] for line in tap.prompts(mark)]


INTERRUPT_SENT = "interrupt sent: the controller clears Pi's queue, then aborts the turn"
ESC_GRACE = 10  # seconds of the status's clock an Esc key has to interrupt before the test takes it as not


def asked_to_interrupt(rows: list[str]) -> bool:
    """Whether the frame shows the answer to an interrupt the terminal asked for (sent, or refused)."""
    return any(INTERRUPT_SENT in row or "interrupt refused" in row for row in rows)


def interrupted(rows: list[str]) -> bool:
    """Whether the frame shows an interrupt asked for, or the held turn ("Say hello") ended."""
    return asked_to_interrupt(rows) or any('prompt "Say hello": done' in row for row in rows)


def exited(rows: list[str]) -> bool:
    """Whether the terminal has exited (the harness's line after it)."""
    return any("[terminal exited" in row for row in rows)


def seconds(rows: list[str]) -> int | None:
    """The seconds the status says Pi has been answering, or None."""
    found = re.search(r"Pi is answering \S (\d+)s", status(rows))
    return int(found.group(1)) if found else None


# ------------------------------------------------------------------------ 1. Enter takes the composer there


def test_1_enter_mid_chunk_takes_the_composer_at_that_key_and_the_rest_starts_the_next_message(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            mark = tap.mark()
            await ctl(rig, "hold", "preflight")
            await term.chunk(b"first\rsecond")  # one read: the Enter is in the middle
            await ctl(rig, "wait_held", "preflight", WAIT)
            rows = await term.wait_for(lambda r: "sent" in "\n".join(r[REQUESTS]), "the prompt sent")
            assert 'prompt "first": sent' in "\n".join(rows[REQUESTS])
            rows = await term.wait_for(lambda r: composer(r)[0] == "second", "the rest in the composer")
            await ctl(rig, "release", "preflight")
            await term.wait_text('prompt "first": done')
            assert messages(tap, mark) == ["first"]  # never "firstsecond"
            # Two Enters in one chunk: each takes its own text. CHAT-03 has no queue, so the second is refused
            # busy (H18) while the first holds the slot, and its text comes back to the composer, unsent.
            await ctl(rig, "hold", "preflight")
            await term.chunk(b"\x15one\rtwo\r")  # Ctrl-U first: clear "second"
            await ctl(rig, "wait_held", "preflight", WAIT)
            rows = await term.wait_text('prompt "two": not admitted: busy')
            rows = await term.wait_for(lambda r: composer(r)[0] == "two", "the refused text back")
            assert "not admitted: busy" in notes(rows)
            await ctl(rig, "release", "preflight")
            await term.wait_text('prompt "one": done')
            assert messages(tap, mark) == ["first", "one"]
            await term.chunk(b"\r")
            await term.wait_text('prompt "two": done')
            assert messages(tap, mark) == ["first", "one", "two"]

    run(main)


def test_1_enter_then_a_paste_in_one_chunk_sends_the_text_before_and_keeps_the_paste(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            mark = tap.mark()
            await term.chunk(b"first\r\x1b[200~pasted\rline two\r\x1b[201~")
            await term.wait_text('prompt "first": done')
            await term.wait_for(lambda r: composer(r)[:2] == ["pasted", "line two"], "the paste kept")
            assert messages(tap, mark) == ["first"]  # the paste's newlines never submit
            await term.chunk(b"\x7f\r")  # Backspace (the paste's last newline), Enter: the paste is one message
            await term.wait_text('prompt "pasted^Jline two": done')
            assert messages(tap, mark) == ["first", "pasted\nline two"]
            assert composer_empty(await term.screen())

    run(main)


def test_1_a_paste_marker_split_across_chunks_even_right_after_its_esc_is_still_a_paste(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            mark = tap.mark()
            for chunk in (b"abc\x1b", b"[20", b"0~one\rtwo\x1b", b"[201", b"~"):
                await term.chunk(chunk)
            rows = await term.wait_for(lambda r: composer(r)[:2] == ["abcone", "two"], "the paste inserted")
            assert "[200~" not in "\n".join(rows) and "201~" not in "\n".join(rows)
            assert tap.since(mark) == b""  # nothing submitted by the paste's newline
            await term.chunk(b"\r")
            await term.wait_text('prompt "abcone^Jtwo": done')
            assert messages(tap, mark) == ["abcone\ntwo"]

    run(main)


def test_1_a_lone_trailing_esc_waits_for_the_next_chunk(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term)  # a run streams: the status counts seconds
            rows = await term.wait_for(lambda r: seconds(r) is not None, "the run's seconds")
            mark = tap.mark()
            await term.chunk(b"ab\x1b")  # a read that ends in ESC: a paste marker split after its ESC
            begun = seconds(rows)
            assert begun is not None
            # The status's own clock: two more seconds, far past prompt_toolkit's 0.5 s ESC flush; or the frame
            # of an ESC taken for the Esc key (the interrupt, the run ended), which must not come.
            rows = await term.wait_for(lambda r: (seconds(r) or 0) >= begun + 2 or interrupted(r),
                                       "two seconds to pass, or an interrupt")
            assert not interrupted(rows), "a trailing ESC was taken for the Esc key:\n" + "\n".join(rows)
            assert (seconds(rows) or 0) >= begun + 2  # the run still streams, its clock two seconds on
            await term.chunk(b"[200~late paste\x1b[201~")
            rows = await term.wait_for(lambda r: "late paste" in composer(r)[0], "the late paste")
            assert composer(rows)[0] == "ablate paste"  # never "[200~late paste..." typed as text
            assert tap.since(mark) == b""  # and the ESC was never the Esc key: no interrupt
            await ctl(rig, "release", "model-chunk")
            await term.wait_text('prompt "Say hello": done')

    run(main)


def test_1_a_multi_line_paste_grows_the_composer_shows_its_first_line_and_counts_its_lines(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            mark = tap.mark()
            five = [f"line {i}" for i in range(1, 6)]
            await term.chunk(b"\x1b[200~" + "\r".join(five).encode() + b"\x1b[201~")  # a paste: one read
            # Grown or not, the composer shows the paste's last line (where the cursor is) once it is in.
            rows = await term.wait_for(lambda r: "line 5" in composer(r), "the paste in the composer")
            assert composer(rows)[:5] == five, "the composer did not grow to the paste:\n" + "\n".join(rows)
            assert rows[label_row(rows)].strip() == "composer: 5 lines; Enter sends them, Ctrl-J adds a line"
            assert status(rows).startswith("You control this conversation")  # the rest moved up, whole
            assert tap.since(mark) == b""  # a paste never submits
            await term.chunk(b"\r")
            await term.wait_text('prompt "line 1^Jline 2^Jline 3^Jline 4^Jline 5": done')
            mark = tap.mark()
            thirty = [f"row {i:02d} of a long paste" for i in range(1, 31)]
            await term.chunk(b"\x1b[200~" + "\r".join(thirty).encode() + b"\x1b[201~")
            rows = await term.wait_for(lambda r: "30 lines" in r[label_row(r)], "the composer at its bound")
            label = rows[label_row(rows)].strip()
            assert label == ('composer: 30 lines, the last shown; the first: "row 01 of a long paste"; Enter sends '
                             'them all, Ctrl-J adds a line')
            assert composer(rows) == thirty[-10:]  # ten rows at most: the end, where the cursor types
            assert tap.since(mark) == b""  # a paste never submits
            await term.chunk(b"\r")
            await term.wait_text('prompt "row 01 of a long paste^Jrow 02')
            assert messages(tap, mark) == ["\n".join(thirty)]
            rows = await term.wait_for(lambda r: composer_empty(r), "the composer empty")
            assert len(composer(rows)) == 3  # back to its three rows

    run(main)


# ------------------------------------------------------------------------------------ 2. the seed's keys


def test_2_ctrl_c_during_an_answer_asks_once_then_quits_and_never_interrupts_it(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term)
            mark = tap.mark()
            question = "the answer keeps running in the engine; Ctrl-C again to leave (Esc or Ctrl-G interrupts it)"
            await term.keys("C-c")
            # The question, or what a wrong Ctrl-C does instead: the terminal gone, or the answer interrupted.
            rows = await term.wait_for(lambda r: any(question in row for row in r) or exited(r) or interrupted(r)
                                       or tap.since(mark) != b"", "the question, the exit or an interrupt")
            assert any(question in row for row in rows), "Ctrl-C did not ask first:\n" + "\n".join(rows)
            assert "[terminal exited" not in "\n".join(rows)
            assert tap.since(mark) == b""  # no clear_queue, no abort
            await term.keys("C-c")
            rows = await term.wait_for(lambda r: exited(r) or interrupted(r) or tap.since(mark) != b"",
                                       "the exit or an interrupt")
            assert "[terminal exited 0 ]" in "\n".join(rows)
            assert tap.since(mark) == b""  # no clear_queue, no abort
            assert (await ctl(rig, "state"))["isStreaming"] is True
            await ctl(rig, "release", "model-chunk")

    run(main)


def test_2_esc_read_alone_interrupts_a_running_answer_and_alt_enter_does_not(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term)
            mark = tap.mark()
            await term.chunk(b"x\x1b\ry")  # Alt-Enter (ESC and CR in one read) between x and y: a newline
            rows = await term.wait_for(lambda r: composer(r)[:2] == ["x", "y"] and seconds(r) is not None,
                                       "the newline")
            assert tap.since(mark) == b""  # not an interrupt
            begun = seconds(rows)
            assert begun is not None
            await term.chunk(b"\x1b")  # the Esc key: one ESC, alone in its read
            # The interrupt, or the run still streaming ESC_GRACE seconds on by the status's own clock (an Esc
            # key left waiting for a next chunk: nothing else would ever show).
            rows = await term.wait_for(lambda r: asked_to_interrupt(r) or (seconds(r) or 0) >= begun + ESC_GRACE,
                                       "the interrupt, or the run going on", timeout=WAIT + ESC_GRACE)
            assert any(INTERRUPT_SENT in row for row in rows), "the Esc key did not interrupt:\n" + "\n".join(rows)
            await term.wait_text('prompt "Say hello": done (interrupted)')
            kinds = [r["type"] for r in EngineTap.records(tap.since(mark))]
            assert kinds.index("clear_queue") < kinds.index("abort")  # R3-1, as Ctrl-G does
            assert composer(rows)[:2] == ["x", "y"]  # the draft is kept
            await term.wait_for(lambda r: "Pi is idle" in status(r), "the run to settle")
            idle = tap.mark()
            await term.chunk(b"\r")  # the Esc was the Esc key, never joined to this Enter as Alt-Enter: it sends
            await term.wait_text('prompt "x^Jy": done')
            assert [r["type"] for r in EngineTap.records(tap.since(idle))].count("abort") == 0

    run(main)


def test_2_ctrl_o_re_reads_the_page_and_the_extra_keys_take_none_of_the_seeds(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", seed=seed(("user", "earlier"))) as (rig, tap, term):
            await term.wait_text("composer disabled: observer")
            await with_details(term, lambda d: "re-reads 0" in d, "no re-read yet")
            await term.keys("C-o")
            rows = await term.wait_text("re-reading the history page")
            await with_details(term, lambda d: "re-reads 1" in d, "one re-read")
            assert transcript(rows)[0] == "user: earlier"
            keys = rows[-1]
            for seed_key in ("Enter send", "^J newline", "^T control", "^G interrupt", "^O re-read", "PgUp/PgDn",
                             "^C quit"):
                assert seed_key in keys
            assert "^K force stop" in keys and "^R recover" in keys and "F2 details" in keys

    run(main)


# --------------------------------------------------------------------------- 3. the reading position (E1)


LONG = seed(*[("user" if i % 2 == 0 else "assistant", f"message {i:02d}") for i in range(60)])


def test_E1_a_tool_turn_is_shown_once_with_no_refresh_while_the_draft_and_the_reading_position_are_kept(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", seed=LONG) as (rig, tap, term):
            await held_turn(rig, term, "TOOLCALL please run it", "tool")  # send, ack, user, toolCall: held
            await term.wait_text("tool bash (running)")
            await term.keys("PPage")
            rows = await term.wait_text("scrolled up:")
            held = transcript(rows)
            assert held[0].startswith(("user: message", "assistant: message"))
            await term.type("a draft in progress")
            await term.wait_for(lambda r: composer(r)[0] == "a draft in progress", "the draft")
            await ctl(rig, "release", "tool")  # toolResult, final answer
            rows = await term.wait_text('prompt "TOOLCALL please run it": done')
            rows = await term.wait_for(lambda r: "Pi is idle" in status(r), "the run to settle")
            assert transcript(rows) == held  # the reading position is kept: not one row moved
            below = re.search(r"scrolled up: (\d+) new below", status(rows))
            assert below is not None and int(below.group(1)) >= 2, status(rows)  # the result and the answer
            assert composer(rows)[0] == "a draft in progress"
            await with_details(term, lambda d: "re-reads 0" in d and "markers none" in d, "no refresh")
            await term.keys("NPage", "NPage", "NPage")
            rows = await term.wait_gone("scrolled up")
            turn = "\n".join(transcript(rows))
            for line in ("user: TOOLCALL please run it", '[tool call bash] {"command": "printf tool-ran-ok"}',
                         "tool result bash: tool-ran-ok", "assistant: Tool result was: tool-ran-ok."):
                assert turn.count(line) == 1, (line, turn)  # each shown once: no duplication
            assert "reconcile marker" not in turn
            assert messages(tap) == ["TOOLCALL please run it"]
            assert composer(rows)[0] == "a draft in progress"  # still the draft, unsent

    run(main)


def test_3_scrolled_up_the_view_holds_still_while_a_reply_streams_and_counts_the_new_rows_below(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", seed=LONG) as (rig, tap, term):
            await held_turn(rig, term, "THINK about it")  # thinking deltas, then text
            await term.wait_text("assistant (streaming):")  # the reply's row is there before the first delta
            await term.keys("PPage")
            rows = await term.wait_text("scrolled up: 0 new below")
            held = transcript(rows)
            await ctl(rig, "hold", "model-chunk", 2)
            for _ in range(2):  # the two thinking deltas grow the reply's first row in place
                await ctl(rig, "release", "model-chunk")
                await ctl(rig, "wait_held", "model-chunk", WAIT)
                rows = await term.screen()
                assert transcript(rows) == held and "scrolled up: 0 new below" in status(rows)
            await ctl(rig, "release", "model-chunk")  # the text: a row of its own, below the view
            await term.wait_text('prompt "THINK about it": done')
            # The frame that counts the text's row, or one where the view moved, whichever is drawn first: a view
            # that follows the end is an assertion here, never a wait that runs out.
            rows = await term.wait_for(lambda r: "scrolled up: 1 new below" in status(r) or transcript(r) != held,
                                       "the new row counted below a view that held still")
            assert transcript(rows) == held
            assert "scrolled up: 1 new below" in status(rows)
            await term.keys("NPage", "NPage", "NPage")
            rows = await term.wait_gone("scrolled up")
            assert transcript(rows)[-2:] == ["assistant: (thinking) Let me think about this.",
                                             "  Thought about it. Hello from the fake model."]

    run(main)


# ------------------------------------------------------------------------------------------ 4. dialogs


def test_4_a_pi_dialog_is_shown_disabled_with_its_reason_never_answered_and_the_stop_shows_approval_uncertain(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await held_turn(rig, term)
            mark = tap.mark()
            reason = ("disabled, not answered here: Pi asks a question here; this controller shows it but never "
                      "answers it, so Pi decides on its own (its default or timeout)")
            for method, extra, options in (("select", {"options": ["Allow", "Deny"]}, " options [Allow | Deny]"),
                                           ("confirm", {"message": "Sure?"}, ' message "Sure?"'),
                                           ("input", {"placeholder": "name"}, ' placeholder "name"'),
                                           ("editor", {"prefill": "text"}, ' prefill "text"')):
                await asyncio.to_thread(rig.ctl.request, "dialog", method=method, title=f"{method}\ntitle", **extra)
                line = f'Pi dialog ({method}) "{method}^Jtitle"{options}: {reason}'
                await term.wait_for(lambda r, line=line: line in flat(r[TRANSCRIPT_END:STATUS]), line)
                await term.wait_for(lambda r, line=line: line in notes(r), f"{line} in the notes")
            await term.keys("y", "Enter", "n")  # nothing a person types answers a dialog
            await term.keys("C-g")
            rows = await term.wait_for(lambda r: "interrupt: reconciled" in notes(r), "the stop")
            assert ("interrupt: reconciled (the queue was cleared and the turn ended); "
                    f"{UNCERTAIN}") in notes(rows)
            written = EngineTap.records(tap.since(mark))
            kinds = [r["type"] for r in written]
            assert "abort" in kinds and kinds.index("clear_queue") < kinds.index("abort")  # the interrupt (R3-1)
            assert "extension_ui_response" not in {r["type"] for r in written}  # never answered
            assert not [e for e in rig.ctl.events if e.get("event") == "dialog-answered"]
            await with_details(term, lambda d: "dialogs 4" in d, "the controller's dialog count")

    run(main)


# -------------------------------------------------------------------------------------- 5. inert text


FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
PERSIAN = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # mi-khaham, with a ZWNJ


def test_5_zwj_and_zwnj_pass_the_rest_of_the_seeds_list_is_visible_and_one_line_fields_show_lf_as_caret_j(
        tmp_path: Path) -> None:
    async def main() -> None:
        # The joined sequences last: a terminal may draw them narrower than wcwidth counts them (tmux draws
        # the family as one glyph), which moves what follows on the row.
        text = (f"zero\u200bwidth \u2060joiner \ufeffbom \U000e0041tag \u2028sep \x7fdel \x85nel; "
                f"{FAMILY} and {PERSIAN}")
        async with scene(tmp_path / "rig", seed=seed(("user", text))) as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            line = transcript(rows)[0]
            assert FAMILY in line and PERSIAN in line  # the joiners reached the screen as they are
            assert line.startswith("user: zero<U+200B>width <U+2060>joiner <U+FEFF>bom <U+E0041>tag <U+2028>sep "
                                   "^?del <U+0085>nel; ")
            # A note and a dialog stay one line each: LF shows as ^J.
            await take_control(term)
            await term.type("line one")
            await term.keys("C-j")
            await term.type("line two")
            await term.wait_for(lambda r: composer(r)[:2] == ["line one", "line two"], "both lines typed")
            async with raw(rig.socket_path) as other:
                observed = (await other.call("observe"))["result"]
                await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
                rows = await term.wait_text('set aside, never sent: "line one^Jline two"')
            await asyncio.to_thread(rig.ctl.request, "dialog", method="confirm", title="two\nlines\x1b[2J")
            rows = await term.wait_text('Pi dialog (confirm) "two^Jlines^[[2J"')
            assert status(rows).startswith("Watching")

    run(main)


# ---------------------------------------------------------------------------------------- 6. readable


def test_6_lines_wrap_at_the_window_width_and_the_empty_state_says_how_to_start(tmp_path: Path) -> None:
    async def main() -> None:
        words = " ".join(f"w{i:03d}" for i in range(80))  # 399 characters, no newline
        async with scene(tmp_path / "empty", term={"width": 60, "height": 30}) as (rig, tap, term):
            rows = await term.wait_text("No messages yet:")
            assert "No messages yet: Ctrl-T takes control, then type a message" in "\n".join(rows)
            await take_control(term)
            await term.wait_text("No messages yet: type a message and press Enter.")
        async with scene(tmp_path / "long", seed=seed(("user", words)), term={"width": 60, "height": 30}) as \
                (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            body = [r for r in rows[1:30 - 12] if r]
            assert all(len(r) <= 60 for r in rows)
            assert body[0].startswith("user: w000 w001") and all(r.startswith("  w") for r in body[1:])
            assert " ".join(r.strip() for r in body) == "user: " + words  # wrapped, nothing cut
            assert rows[HEADER].startswith(" mosaic-terminal · Pi · conversation pi-")  # the engine, as observe says

    run(main)


COLOURS = re.compile(r"3[0-7]|9[0-7]|4[0-7]|10[0-7]|[34]8;5;\d+")


def test_6_roles_in_colour_refusals_red_thinking_dim_tools_marked_and_no_color_honoured(tmp_path: Path) -> None:
    async def main() -> None:
        history = seed(("user", "question"), ("assistant", "answer"))
        async with scene(tmp_path / "colour", seed=history) as (rig, tap, term):
            await take_control(term)
            await term.type("THINK about it")
            await term.keys("Enter")
            await term.wait_text('prompt "THINK about it": done')
            await term.type("TOOLCALL please run it")
            await term.keys("Enter")
            await term.wait_text('prompt "TOOLCALL please run it": done')
            await term.type("/skill:x")
            await term.keys("Enter")
            await term.wait_text("not admitted: text-policy")
            screen = await term.styled_screen()
            assert style_at(screen, "user: question") >= {"1", "36"}  # the user's label bold cyan
            assert style_at(screen, "assistant: answer") >= {"1", "32"}  # the assistant's label bold green
            assert style_at(screen, "(thinking)") >= {"2", "3"}  # thinking dim (and italic)
            assert style_at(screen, "[tool call bash]") >= {"33"}  # a tool call marked yellow
            assert style_at(screen, "tool result bash") >= {"1", "33"}
            assert style_at(screen, "not admitted: text-policy") >= {"1", "31"}  # a refusal red and bold
            assert style_at(screen, 'prompt "/skill:x": not admitted') >= {"1", "31"}
            assert "36" not in style_at(screen, "question")  # the text itself in the default colour
        async with scene(tmp_path / "plain", seed=history, term={"env": {"NO_COLOR": "1"}}) as (rig, tap, term):
            await take_control(term)
            await term.type("/skill:x")
            await term.keys("Enter")
            await term.wait_text("not admitted: text-policy")
            screen = await term.styled_screen()
            sgr = {p for row in screen for p in re.findall(r"\x1b\[([0-9;]*)m", row)}
            assert not [p for p in sgr if COLOURS.search(p)], sgr  # no colour at all
            assert "1" in style_at(screen, "not admitted: text-policy")  # still bold: distinct without colour
            assert "1" in style_at(screen, "user: question")

    run(main)


def test_6_a_spinner_and_seconds_while_a_run_streams_and_the_developer_fields_behind_f2(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            rows = await term.wait_text("composer disabled: observer")
            assert status(rows) == "Watching (Ctrl-T takes control) · Pi is idle"
            assert "generation" not in "\n".join(rows)  # the developer fields are behind F2
            await held_turn(rig, term)
            first = await term.wait_for(lambda r: seconds(r) is not None, "the spinner")
            frames = {status(first).split("answering ")[1][0]}
            later = await term.wait_for(lambda r: status(r).split("answering ")[1][0] not in frames
                                        and (seconds(r) or 0) >= 1, "the spinner to turn and a second to pass")
            assert status(later).startswith("You control this conversation · Pi is answering ")
            await with_details(term, lambda d: d.startswith("role controller | generation 2 | incarnation inc-")
                               and "engine streaming" in d and "unknown events 0" in d, "the details")
            await ctl(rig, "release", "model-chunk")
            await term.wait_for(lambda r: status(r) == "You control this conversation · Pi is idle", "idle")

    run(main)


# ----------------------------------------------------------------------------------- 7. a next step always


def test_7_another_client_taking_control_is_noted_with_who_and_the_generation(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            async with raw(rig.socket_path) as other:
                observed = (await other.call("observe"))["result"]
                who = observed["connection"]["connection"]
                await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
                rows = await term.wait_text(f"connection {who} took control (generation 3); you are watching now")
                assert status(rows).startswith("Watching (Ctrl-T takes control)")

    run(main)


def _proof() -> dict[str, Any]:
    return {"members": [{"pid": 4242, "startTime": 1, "death": "reaped:signal 9", "deathTime": 2}],
            "membershipComplete": True, "verification": {"digest": "sha256:" + "ab" * 32}}


async def proven_stop_effects(effect: Effect) -> Mapping[str, Any]:
    """A lifecycle stand-in: a force stop proven (a scripted proof) and a recover that returns eligibility."""
    if effect.kind == "force-stop":
        return {"state": "stopped", "proof": _proof()}
    if effect.kind == "recover":
        return {"eligibility": {"id": "el-0001", "claim_id": "c-0002", "generation": 3, "leaf": None},
                "digest": "sha256:" + "cd" * 32, "next": f"stop this controller's serve (Ctrl-C there), then run: "
                                                         f"{RELAUNCH}"}
    return await no_cohort_effects(effect)


RELAUNCH = ("/opt/venv/bin/mosaic-controller serve --fixture-root /tmp/fx --session /tmp/fx/proj/.pi/state/seat/"
            "sessions/s.jsonl --socket /tmp/ctl/controller.sock --pi-dir /opt/pi --scripted-model --eligibility "
            "el-0001")


def test_7_after_a_proven_force_stop_recover_is_offered_with_its_confirmation_then_quit(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", effects=proven_stop_effects) as (rig, tap, term):
            await take_control(term)
            await term.keys("C-k")
            await term.wait_text("Force stop execution exec-1?")
            await term.keys("y")
            await term.wait_for(lambda r: "force stop: stopped with a proof (1 member(s) left at the freeze, killed; "
                                "membership complete; digest sha256:abababababab…)" in notes(r), "the proof")
            rows = await term.wait_text("next: Ctrl-R recovers this conversation (asks to confirm first), or "
                                        "Ctrl-C quits")
            assert status(rows) == "You control this conversation · stopped: Ctrl-R recovers (asks first), Ctrl-C quits"
            # One "next:" note, although the stop's record, its proof and the reply each update the stop.
            assert notes_whole(rows).count("next:") == 1, notes_whole(rows)
            await term.keys("C-r")
            rows = await term.wait_text("Recover execution exec-1?")
            assert "y: recover    n: cancel" in "\n".join(rows)
            await term.keys("n")
            await term.wait_text("recover cancelled: nothing was done")
            await term.keys("C-r")
            await term.wait_text("Recover execution exec-1?")
            await term.keys("y")
            await term.wait_text("recovered: eligibility el-0001 (new claim c-0002, generation 3)")
            # The controller's next step names the exact command; the notes grow to show it whole, once.
            rows = await term.wait_for(lambda r: RELAUNCH in notes_whole(r), "the command, whole")
            assert notes_whole(rows).count("next:") == 1, notes_whole(rows)
            assert (f"next: stop this controller's serve (Ctrl-C there), then run: {RELAUNCH}; then Ctrl-O here "
                    "connects to the new controller") in notes_whole(rows)
            await term.keys("C-c")
            await term.wait_text("[terminal exited 0 ]")

    run(main)


def test_7_after_an_unproven_force_stop_the_next_step_says_why_recover_is_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            await term.keys("C-k")
            await term.wait_text("Force stop execution exec-1?")
            await term.keys("y")
            await term.wait_text("next: the stop is not proven, so recover is refused; Ctrl-K tries the force stop "
                                 "again, Ctrl-C quits")
            await term.keys("C-r")
            await term.wait_text("Recover execution exec-1?")
            await term.keys("y")
            await term.wait_text("recover refused: stop-proof: recovery needs a verified stop; the execution is "
                                 "uncertain")

    run(main)


def test_7_a_bad_socket_path_prints_one_line_and_exits_1_before_the_screen(tmp_path: Path) -> None:
    async def main() -> None:
        from mosaic.mediated_terminal.testing import tmux_terminal

        missing = str(tmp_path / "no-such.sock")
        async with tmux_terminal(missing, width=WIDTH, height=12) as term:
            rows = await term.wait_text("[terminal exited 1 ]")
            assert rows[0] == "[terminal exited 1 ]"  # nothing was drawn: the screen was never taken
            assert term.read_stderr() == (f"mosaic-terminal: no controller socket at {missing} (no such file; is "
                                          "the controller running?)\n")
        not_a_socket = tmp_path / "plain-file"
        not_a_socket.write_text("")
        async with tmux_terminal(str(not_a_socket), width=WIDTH, height=12) as term:
            await term.wait_text("[terminal exited 1 ]")
            assert term.read_stderr() == (f"mosaic-terminal: nothing is listening on {not_a_socket} (the controller "
                                          "is gone, or the path is not its socket)\n")

    run(main)



def test_7_closing_the_terminal_ends_it_quietly_and_control_stays_with_its_connection(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig") as (rig, tap, term):
            await take_control(term)
            processes = term.processes()
            assert len(processes) == 3  # the pane's shell, the relay, the terminal
            await term.tmux("kill-pane", "-t", "t")  # the window closes: its pty hangs up
            await term.wait_gone_processes(processes)
            assert term.read_stderr() == ""  # no traceback, no line drawn on a terminal that is gone
            assert "ended by signal 1" in term.log.read_text()
            async with raw(rig.socket_path) as other:
                binding = (await other.call("observe"))["result"]["binding"]
                # H11: control stays with the disconnected connection until someone takes over explicitly.
                assert binding["controllerConnected"] is False and binding["controllerConnection"] is not None
                assert binding["generation"] == 2

    run(main)
