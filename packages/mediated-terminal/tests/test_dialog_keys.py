"""The terminal answers Pi's dialogs when the controller does (issue 33 item 4, the brief's I2 after C-2;
`_model` rule 6): a real tmux terminal (120x40) over a controller on pi-rpc's fake engine with the fixture
extension and the dialogs answered (`fake_controller(dialogs=True)`). A prompt ``DIALOG <kind>`` makes the
scripted model call the fixture's tool, which raises the dialog with the fixture's labels (markup, bidi
controls, an escape sequence) and returns ``<kind> answered <value>``, the value the extension got. Keys
arrive as a keyboard writes them: one read per chunk (`TmuxTerminal.chunk`), a double press in one read.
What Pi received is the tap on the controller's engine link.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from term_harness import (
    WAIT,
    dialog_prompt,
    notes,
    notes_whole,
    raw,
    run,
    scene,
    send_held,
    status,
    style_at,
    take_control,
    transcript,
)

from mosaic.controller.testing import fake_controller
from mosaic.mediated_terminal.model import TerminalModel
from mosaic.mediated_terminal.testing import EngineTap, TmuxTerminal

BOX = "Pi asks: answer with a key"
NOT_ANSWERED = ("not answered: you do not control this conversation, so this terminal does not answer the "
                "engine's question (Ctrl-T takes control)")


class Plain:
    """The composer as a plain holder (the model without a screen)."""

    def __init__(self) -> None:
        self.text = ""

    def clear(self) -> None:
        self.text = ""

    def restore(self, text: str) -> None:
        self.text = text


def box(rows: list[str]) -> list[str]:
    """The answer mode's frame: its rows' text inside the borders (empty when it is not drawn)."""
    top = next((i for i, r in enumerate(rows) if BOX in r), None)
    if top is None:
        return []
    out = []
    for row in rows[top + 1:]:
        if "└" in row:
            break
        out.append(row[row.index("│") + 1:row.rindex("│")].rstrip())
    return out


def answers(tap: EngineTap, mark: int = 0) -> list[dict[str, Any]]:
    return [r for r in EngineTap.records(tap.since(mark)) if r["type"] == "extension_ui_response"]


async def ask(term: TmuxTerminal, kind: str, **how: Any) -> list[str]:
    """As the controller: send the prompt that cues a `kind` dialog; return once the answer mode shows it."""
    await term.type(dialog_prompt(kind, **how))
    await term.keys("Enter")
    return await term.wait_text(f"Pi asks ({kind})")


TOOL_RESULT = "tool result mosaic_fixture_dialog: "


async def tool_said(term: TmuxTerminal) -> str:
    """Wait for the fixture tool's result (what the extension got); return its text."""
    rows = await term.wait_for(lambda r: any(TOOL_RESULT in row for row in transcript(r)), "the tool's result")
    (row,) = [row for row in transcript(rows) if TOOL_RESULT in row]
    return row.split(TOOL_RESULT, 1)[1]


def test_P1_a_confirm_is_answered_by_its_key_once_and_cancel_has_no_key(tmp_path: Path) -> None:
    """Keys 1 and 2 beside confirm and decline; cancel disabled with the controller's reason and no key
    (3 answers nothing); other typing does not reach the held composer; a double press in one read ("12")
    answers once, with the first key's choice; the decision settles, the mode ends, and a stop after it is
    not "approval uncertain" (the record's approvalDisposition: every decision settled)."""
    async def main() -> None:
        async with scene(tmp_path / "rig", dialogs=True) as (rig, tap, term):
            await take_control(term)
            rows = await ask(term, "confirm")
            assert box(rows)[:5] == [
                'Pi asks (confirm): "Allow <b>bash</b>: rm -rf <U+202E>plh.tset<U+202C>?"',
                '  "The tool runs ^[[31mrm^[[0m in <U+2066>/tmp/<i>x</i><U+2069>."',
                "  1  confirm",
                "  2  decline",
                "     cancel: disabled, Pi reads a cancel on a confirm as a decline: choose decline",
            ], box(rows)
            await term.wait_text("composer waits: a question is asked above")
            mark = tap.mark()
            await term.chunk(b"3")
            rows = await term.wait_for(lambda r: "no choice has the key 3 here: the keys are 1 to 2; nothing was "
                                                 "sent" in notes(r), "the note for key 3")
            await term.chunk(b"hello")
            await term.chunk(b"12")
            assert await tool_said(term) == "confirm answered true"
            rows = await term.screen()
            assert answers(tap, mark) == [{"type": "extension_ui_response", "id": answers(tap, mark)[0]["id"],
                                           "confirmed": True}]
            assert box(rows) == [] and "hello" not in "\n".join(rows) and "refused" not in notes_whole(rows)
            await term.wait_for(lambda r: "composer: you control" in "\n".join(r), "the composer back")
            await send_held(rig, term, "Say hello", "model-chunk")
            await term.wait_text('prompt "Say hello": working')
            await term.keys("C-g")
            rows = await term.wait_for(lambda r: "interrupt: reconciled" in notes(r), "the stop")
            assert "interrupt: reconciled (the queue was cleared and the turn ended)" in notes(rows)
            assert "approval uncertain" not in notes(rows)

    run(main)


def test_P2_select_labels_with_markup_bidi_and_escapes_are_drawn_inert_and_key_2_answers_that_exact_label(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", dialogs=True) as (rig, tap, term):
            await take_control(term)
            rows = await ask(term, "select")
            assert box(rows)[:6] == [
                'Pi asks (select): "Pick <U+202E>eno<U+202C> <i>now</i>"',
                "  1  Allow once",
                "  2  <i>Deny</i>",
                "  3  Always <U+202E>wolla<U+202C>",
                "  4  ^[[2Jclear",
                "     cancel: disabled, Pi reads a cancel on a select as a timeout: the extension's own default,",
            ], box(rows)
            styled = await term.styled_screen()
            assert "7" in style_at(styled, "<U+202E>wolla") and "7" not in style_at(styled, "wolla<U+202C>")
            assert "7" in style_at(styled, "^[[2Jclear") and "7" not in style_at(styled, "<i>Deny")
            mark = tap.mark()
            await term.chunk(b"2")
            assert await tool_said(term) == 'select answered "<i>Deny</i>"'
            assert [r.get("value") for r in answers(tap, mark)] == ["<i>Deny</i>"]

    run(main)


def test_S5_an_observer_sees_the_decision_and_its_key_answers_nothing(tmp_path: Path) -> None:
    """Another client controls and prompts; this terminal watches: it shows the decision's line with its
    numbered choices, draws no answer mode, and its key sends nothing (a note says why); the controller's
    own answer goes through once."""
    async def main() -> None:
        async with scene(tmp_path / "rig", dialogs=True) as (rig, tap, term), raw(rig.socket_path) as other:
            await term.wait_text("composer disabled: observer")
            auth = await other.control()
            await other.call("prompt", **auth, clientRequestId="d1", text=dialog_prompt("confirm"))
            shown = (await other.until(lambda n: n.get("method") == "record"
                                       and n["params"].get("type") == "nativeDecision"))["params"]
            rows = await term.wait_text("choices [1: confirm | 2: decline]")
            assert box(rows) == []
            mark = tap.mark()
            await term.chunk(b"1")
            rows = await term.wait_for(lambda r: "answered" in notes_whole(r) or "refused" in notes_whole(r),
                                       "the observer's note")
            assert NOT_ANSWERED in notes_whole(rows) and "refused" not in notes_whole(rows)
            assert answers(tap, mark) == []
            await other.call("approval", **auth, decision=shown["nativeDecision"], choice="decline")
            assert await tool_said(term) == "confirm answered false"
            assert [r.get("confirmed") for r in answers(tap, mark)] == [False]

    run(main)


def test_H5_after_a_takeover_the_old_controllers_key_answers_nothing_and_taking_control_back_answers_the_new_projection(
        tmp_path: Path) -> None:
    """The terminal controls and shows a decision; another client takes over: the mode ends, the key is
    refused here and nothing reaches Pi. Ctrl-T takes control back: the decision is shown again under the
    projection id the controller gave after that takeover, and its key answers it, once."""
    async def main() -> None:
        async with scene(tmp_path / "rig", dialogs=True) as (rig, tap, term), raw(rig.socket_path) as other:
            await take_control(term)
            await ask(term, "confirm")
            observed = (await other.call("observe"))["result"]
            await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
            rows = await term.wait_for(lambda r: box(r) == [] and status(r).startswith("Watching"),
                                       "the mode to end")
            mark = tap.mark()
            await term.chunk(b"1")
            rows = await term.wait_for(lambda r: "answered" in notes_whole(r) or "refused" in notes_whole(r),
                                       "the refusal")
            assert NOT_ANSWERED in notes_whole(rows) and answers(tap, mark) == []
            await term.keys("C-t")
            rows = await term.wait_text(BOX)
            assert box(rows)[2:4] == ["  1  confirm", "  2  decline"]
            await term.chunk(b"2")
            assert await tool_said(term) == "confirm answered false"
            assert [r.get("confirmed") for r in answers(tap, mark)] == [False]
            decisions = [n["params"] for n in other.notes if n.get("method") == "record"
                         and n["params"].get("type") == "nativeDecision"]
            answered = [d for d in decisions if d["state"] == "answered"]
            superseded = [d["nativeDecision"] for d in decisions if d["state"] == "superseded"]
            assert len(answered) == 1 and len(superseded) == 2 and answered[0]["nativeDecision"] not in superseded

    run(main)


def test_P6_ctrl_g_while_a_decision_waits_ends_the_mode_and_the_stop_says_approval_uncertain(tmp_path: Path) -> None:
    async def main() -> None:
        async with scene(tmp_path / "rig", dialogs=True) as (rig, tap, term):
            await take_control(term)
            await ask(term, "select", abortable=True)
            mark = tap.mark()
            await term.keys("C-g")
            rows = await term.wait_for(lambda r: "interrupt: reconciled" in notes(r) and box(r) == [], "the stop")
            assert "approval uncertain" in notes(rows)
            assert answers(tap, mark) == []  # never answered on the person's behalf
            assert await tool_said(term) == "select answered undefined"

    run(main)


async def model_until(model: TerminalModel, predicate: Callable[[], bool]) -> None:
    """Return once `predicate()` holds, checked after each change the model makes (bounded by WAIT)."""
    changed = asyncio.Event()
    model.on_change(changed.set)
    async with asyncio.timeout(WAIT):
        while not predicate():
            await changed.wait()
            changed.clear()


def shown(model: TerminalModel) -> str | None:
    """The projection id of the decision the model shows open (to a controller or not), or None."""
    first = next(iter(model.open_decisions.values()), None)
    return None if first is None else str(first["nativeDecision"])


def test_H5_a_refused_answer_is_one_note_and_leaves_the_new_projection_answerable(tmp_path: Path) -> None:
    """The race a key can lose, made exact without a screen: the key took the projection id shown (d1), then
    another client's takeover superseded it (d2) and this terminal took control back (d3) before the answer
    went out. The answer the key took (`send_answer` with d1) is refused `decision` in one note; d3, the
    projection the controller gave after the last takeover, is answered."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", dialogs=True) as rig:
            model = TerminalModel(rig.socket_path, Plain(), ping_interval=None)
            try:
                await model.start()
                await model.takeover()
                await model.send(dialog_prompt("confirm"))
                await model_until(model, lambda: model.decision is not None)
                taken = model.answer_key(1)
                assert taken is not None and taken[1] == "confirm"
                assert model.answer_key(2) is None  # one answer at a time
                async with raw(rig.socket_path) as other:
                    observed = (await other.call("observe"))["result"]
                    await other.call("takeover", incarnation=observed["incarnation"], expectedGeneration=2)
                    await model_until(model, lambda: not model.controls and shown(model) not in (None, taken[0]))
                    second = shown(model)
                    await model.takeover()
                    await model_until(model, lambda: model.decision is not None
                                      and shown(model) not in (taken[0], second))
                    fresh = model.decision
                    await model.send_answer(*taken)
                    (note,) = [n for n in model.notes if n.kind == "refusal"]
                    assert note.text.startswith(f"answer \"confirm\" refused: decision: decision '{taken[0]}' was "
                                                "superseded by ") and "\n" not in note.text
                    assert fresh is not None and model.decision is fresh  # the new projection stays answerable
                    await model.send_answer(str(fresh["nativeDecision"]), "confirm")
                    assert model.notes[-1].text == 'answered "confirm" (answered): Pi goes on with it'
            finally:
                await model.aclose()

    run(main)
