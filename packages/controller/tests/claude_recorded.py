"""Recorded Claude Code 2.1.283 orders for the core (fixtures/claude-2.1.283/recordings, made by claude-rpc's
`testing.recordings` from the real binary): each recording's lines, the ones the controller writes (`in`)
checked byte for byte against what the core wrote, the binary's (`out`) fed as it wrote them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from core_harness import Harness

from mosaic.claude_rpc.testing.recordings import U1
from mosaic.claude_rpc.testing.replay import load_recording
from mosaic.controller.core import EngineEvents
from mosaic.controller.engines.claude import ClaudeRules, ClaudeWire

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
Record = dict[str, Any]


def recording(name: str) -> list[Record]:
    return load_recording(FIXTURES, name)


def claude_harness(*uuids: str) -> Harness:
    """The core on Claude's rules, each user message stamped with the next of `uuids` (the recording's)."""
    stamps = iter(uuids or (U1,))
    return Harness(engine=ClaudeRules(uuids=lambda: next(stamps)), conversation="claude-conversation")


def wire(h: Harness) -> ClaudeWire:
    link = h.core.link
    assert isinstance(link, ClaudeWire)
    return link


def outs(records: Iterable[Record]) -> list[Record]:
    return [r["msg"] for r in records if r["dir"] == "out"]


def ins(records: Iterable[Record]) -> list[Record]:
    return [r["msg"] for r in records if r["dir"] == "in"]


def feed(h: Harness, *msgs: Record) -> None:
    """The binary writes these lines as one chunk (compact JSON, one LF each, as claude-rpc's replay)."""
    data = b"".join(json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for m in msgs)
    h.feed(EngineEvents(h.core.execution, wire(h).feed(data, now=h.now)))


def feed_each(h: Harness, msgs: Iterable[Record]) -> None:
    for m in msgs:
        feed(h, m)


def upto(records: list[Record], pred: Callable[[Record], bool]) -> tuple[list[Record], list[Record]]:
    """`records` cut before the first whose message satisfies `pred`."""
    for i, r in enumerate(records):
        if pred(r["msg"]):
            return records[:i], records[i:]
    raise AssertionError("no record matches")


def is_control(subtype: str) -> Callable[[Record], bool]:
    return lambda m: m.get("type") == "control_request" and m["request"].get("subtype") == subtype


def initialized(h: Harness, records: list[Record]) -> list[Record]:
    """The lifecycle's `initialize` (r1) and the binary's answer; the rest of the recording."""
    first, rest = records[:2], records[2:]
    wire(h).initialize(now=h.now, bound=30.0)
    h.flush()
    assert h.written() == ins(first)
    feed_each(h, outs(first))
    return rest
