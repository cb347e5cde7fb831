"""Helpers of the tmux suites: the screen's regions at the fixed 120x40 size, a seeded session, a scene
(a controller on the fake engine, a tap on its engine link, the terminal in a private tmux server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from mosaic.controller.testing import FakeRig, RawClient, fake_controller
from mosaic.mediated_terminal.testing import WAIT, EngineTap, TmuxTerminal, tmux_terminal

WIDTH, HEIGHT = 120, 40
TRANSCRIPT_ROWS = HEIGHT - 13  # status 2, notes 3, requests 3, composer label 1, composer 3, keys 1
STATUS, BINDING, NOTES, REQUESTS, LABEL, COMPOSER = 27, 28, slice(29, 32), slice(32, 35), 35, slice(36, 39)
SESSION_ID = "0199cccc-3333-7000-8000-000000000003"


def run(main: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(main())  # type: ignore[arg-type]


def transcript(rows: list[str]) -> list[str]:
    return rows[:TRANSCRIPT_ROWS]


def status(rows: list[str]) -> str:
    return rows[STATUS]


def binding(rows: list[str]) -> str:
    return rows[BINDING]


def composer(rows: list[str]) -> list[str]:
    return rows[COMPOSER]


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


async def ctl(rig: FakeRig, op: str, *args: Any) -> Any:
    """A call on the fake engine's control channel, off the loop (it blocks on the fake's reply)."""
    return await asyncio.to_thread(getattr(rig.ctl, op), *args)


@contextlib.asynccontextmanager
async def scene(root: Path, **options: Any) -> AsyncIterator[tuple[FakeRig, EngineTap, TmuxTerminal]]:
    """A controller on the fake engine (`options` go to `fake_controller`), a tap on its engine link, and
    the terminal attached to it in a private tmux server."""
    async with fake_controller(root, **options) as rig:
        tap = EngineTap(rig.core.link)
        async with tmux_terminal(rig.socket_path, width=WIDTH, height=HEIGHT) as term:
            yield rig, tap, term


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


async def send_held(rig: FakeRig, term: TmuxTerminal, text: str, point: str) -> None:
    """Arm the fake engine's hold `point`, type `text` and press Enter; return once the turn waits there."""
    await ctl(rig, "hold", point)
    await term.type(text)
    await term.keys("Enter")
    await ctl(rig, "wait_held", point, WAIT)


__all__ = ["WAIT", "ctl", "raw", "run", "scene", "seed", "send_held", "take_control"]
