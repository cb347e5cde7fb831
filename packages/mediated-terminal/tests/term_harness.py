"""Helpers of the tmux suites: the screen's regions at the fixed 120x40 size, a seeded session, a scene
(a controller on the fake engine, a tap on its engine link, the terminal in a private tmux server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from mosaic.controller.testing import FakeRig, RawClient, fake_controller
from mosaic.mediated_terminal.testing import WAIT, EngineTap, TmuxTerminal, tmux_terminal

WIDTH, HEIGHT = 120, 40
# The screen from the bottom up (the regions above the notes move when the details rows show):
KEYS, COMPOSER, LABEL = HEIGHT - 1, slice(HEIGHT - 4, HEIGHT - 1), HEIGHT - 5
REQUESTS, NOTES = slice(HEIGHT - 8, HEIGHT - 5), slice(HEIGHT - 11, HEIGHT - 8)
STATUS, DETAILS = HEIGHT - 12, slice(HEIGHT - 13, HEIGHT - 11)  # DETAILS: with F2, the status is above them
STATUS_WITH_DETAILS = HEIGHT - 14
HEADER = 0
TRANSCRIPT = slice(1, STATUS)  # without dialogs (they take the rows just above the status)
TRANSCRIPT_ROWS = STATUS - 1
SESSION_ID = "0199cccc-3333-7000-8000-000000000003"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())  # type: ignore[arg-type]


# The regions that grow (the composer with its text, the notes with a long newest note) are found from the
# composer's label row up; with neither grown they are the fixed slices above.
STATUS_STARTS = ("You control this conversation", "Watching (Ctrl-T takes control)", "NOT CONNECTED", "Attaching")


def label_row(rows: list[str]) -> int:
    """The composer's label row (the lowest row that starts with " composer"; where it stands when the
    composer has not grown, while none is drawn)."""
    for i in range(len(rows) - 1, -1, -1):
        if rows[i].startswith(" composer"):
            return i
    return LABEL


def status_row(rows: list[str]) -> int:
    """The status row: the first row above the notes that starts as a status does."""
    for i in range(label_row(rows) - 4, 0, -1):
        if rows[i].strip().startswith(STATUS_STARTS):
            return i
    return STATUS


def transcript(rows: list[str]) -> list[str]:
    return rows[TRANSCRIPT]


def status(rows: list[str]) -> str:
    return rows[status_row(rows)].strip()


def notes_whole(rows: list[str]) -> str:
    """Every notes row (the notes grow to show a long newest note whole), wrapped lines joined again."""
    return flat(rows[status_row(rows) + 1:label_row(rows) - 3])


def details(rows: list[str]) -> str:
    """The developer fields (F2 shows them), as one string."""
    return " ".join(r.strip() for r in rows[DETAILS])


def notes(rows: list[str]) -> str:
    """The notes rows, their wrapped lines joined again (a wrap breaks after a space; continuations are
    indented): the three above the prompts' receipts."""
    label = label_row(rows)
    return flat(rows[label - 6:label - 3])


def style_at(styled: list[str], needle: str) -> set[str]:
    """The SGR attributes tmux drew the first character of `needle` with, on the screen `styled` (rows from
    capture-pane -e, which only writes what changes from cell to cell, across rows too): "1" bold, "2" dim,
    "3" italic, "7" reverse, a colour as its code ("31", "38;5;n")."""
    state: dict[str, str] = {}
    for row in styled:
        plain, attrs = "", []
        for part in re.split(r"(\x1b\[[0-9;]*m)", row):
            if part.startswith("\x1b["):
                _sgr(state, part[2:-1])
            else:
                plain += part
                attrs += [set(state.values())] * len(part)
        at = plain.find(needle)
        if at >= 0:
            return attrs[at]
    raise AssertionError(f"{needle!r} is not on the screen")


def _sgr(state: dict[str, str], params: str) -> None:
    codes = params.split(";") if params else ["0"]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code in ("0", ""):
            state.clear()
        elif code in ("1", "2"):
            state["intensity"] = code
        elif code == "22":
            state.pop("intensity", None)
        elif code in ("3", "7", "4", "5", "8", "9"):
            state[code] = code
        elif code in ("23", "27", "24", "25", "28", "29"):
            state.pop(code[1], None)
        elif code in ("38", "48") and i + 2 < len(codes) and codes[i + 1] == "5":
            state["fg" if code == "38" else "bg"] = f"{code};5;{codes[i + 2]}"
            i += 2
        elif code == "39":
            state.pop("fg", None)
        elif code == "49":
            state.pop("bg", None)
        elif 30 <= int(code) <= 37 or 90 <= int(code) <= 97:
            state["fg"] = code
        elif 40 <= int(code) <= 47 or 100 <= int(code) <= 107:
            state["bg"] = code
        i += 1


def flat(rows: list[str]) -> str:
    """`rows` as one string, the rows of each wrapped line joined again."""
    return " ".join(r.strip() for r in rows if r.strip())


def composer(rows: list[str]) -> list[str]:
    """The composer's rows (three, or as many as it grew to)."""
    return rows[label_row(rows) + 1:HEIGHT - 1]


def composer_empty(rows: list[str]) -> bool:
    return all(r == "" for r in composer(rows))


def seed(*messages: tuple[str, str]) -> str:
    """A Pi session file: the header, then one message entry per (role, text), each the child of the last.
    Strings are written as ASCII JSON, so a lone surrogate is the escape ``\\ud800`` in the file, as Pi's
    JSON.stringify writes it."""
    lines = [json.dumps({"type": "session", "version": 3, "id": SESSION_ID,
                         "timestamp": "2026-12-01T00:00:00.000Z", "cwd": "{cwd}"}, separators=(",", ":"))]
    parent = None
    for i, (role, text) in enumerate(messages):
        entry_id = f"e{i:07d}"
        message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}],
                                   "timestamp": 1796029812000 + i}
        if role == "assistant":
            message.update({"api": "openai-completions", "provider": "fakeprov", "model": "fake-model-1",
                            "stopReason": "stop", "usage": {"input": 1, "output": 1, "cacheRead": 0,
                                                             "cacheWrite": 0, "totalTokens": 2, "cost": {
                                                                 "input": 0, "output": 0, "cacheRead": 0,
                                                                 "cacheWrite": 0, "total": 0}}})
        lines.append(json.dumps({"type": "message", "id": entry_id, "parentId": parent,
                                 "timestamp": f"2026-12-01T00:00:0{i}.000Z", "message": message},
                                separators=(",", ":")))
        parent = entry_id
    return "\n".join(lines) + "\n"


def dialog_prompt(kind: str, *, abortable: bool = False) -> str:
    """The prompt that cues one `kind` dialog on a seat with pi-rpc's fixture extension (its documented cue,
    ``DIALOG <kind> [abortable]``: the scripted model calls the fixture's tool, which raises the dialog)."""
    return f"DIALOG {kind}" + (" abortable" if abortable else "")


async def ctl(rig: FakeRig, op: str, *args: Any) -> Any:
    """A call on the fake engine's control channel, off the loop (it blocks on the fake's reply)."""
    return await asyncio.to_thread(getattr(rig.ctl, op), *args)


@contextlib.asynccontextmanager
async def scene(root: Path, *, term: dict[str, Any] | None = None,
                **options: Any) -> AsyncIterator[tuple[FakeRig, EngineTap, TmuxTerminal]]:
    """A controller on the fake engine (`options` go to `fake_controller`), a tap on its engine link, and
    the terminal attached to it in a private tmux server (`term`: `TmuxTerminal` options, 120x40 unless
    given)."""
    async with fake_controller(root, **options) as rig:
        tap = EngineTap(rig.core.link)
        async with tmux_terminal(rig.socket_path, **{"width": WIDTH, "height": HEIGHT, **(term or {})}) as t:
            yield rig, tap, t


@contextlib.asynccontextmanager
async def raw(path: str) -> AsyncIterator[RawClient]:
    client = await RawClient.connect(path)
    try:
        yield client
    finally:
        await client.close()


async def take_control(term: TmuxTerminal) -> list[str]:
    await term.wait_text("composer disabled: observer")
    await term.keys("C-t")
    return await term.wait_text("composer: you control")


async def held_turn(rig: FakeRig, term: TmuxTerminal, text: str = "Say hello", point: str = "model-chunk") -> list[str]:
    """Take control, send `text` with the fake engine held at `point` (in the run: "model-chunk", "tool"),
    and return once the terminal shows the prompt working."""
    await take_control(term)
    await send_held(rig, term, text, point)
    return await term.wait_text(f'prompt "{text}": working')


async def with_details(term: TmuxTerminal, predicate: Callable[[str], bool], what: str) -> list[str]:
    """Show the developer fields (F2), wait until they satisfy `predicate`, hide them again."""
    await term.keys("F2")
    try:
        return await term.wait_for(lambda r: predicate(details(r)), what)
    finally:
        await term.keys("F2")
        await term.wait_for(lambda r: not details(r).startswith("role "), "the details to hide")


async def send_held(rig: FakeRig, term: TmuxTerminal, text: str, point: str) -> None:
    """Arm the fake engine's hold `point`, type `text` and press Enter; return once the turn waits there."""
    await ctl(rig, "hold", point)
    await term.type(text)
    await term.keys("Enter")
    await ctl(rig, "wait_held", point, WAIT)


__all__ = ["WAIT", "ctl", "dialog_prompt", "details", "flat", "held_turn", "label_row", "notes", "notes_whole", "status_row", "style_at", "raw", "run", "scene", "seed", "send_held", "take_control",
           "with_details"]
