"""Feed a committed recording of the real binary through a :class:`mosaic.claude_rpc.link.ClaudeLinkCore`, in
the recorded order, with no process: the race tests' harness (the brief's "feed cores the sequences the real
engine produces").

Each ``out`` record is fed as the line the binary wrote (compact JSON, one LF). Each ``in`` record is made
by the core's own API (:func:`send_for`): a user message with its uuid, ``initialize``, ``interrupt``,
``set_permission_mode``, an allow or deny of a request the core read; the core writes it (the pipe takes
every byte) and the line it wrote must decode to exactly the recorded message, so a recording whose client
lines the link would not write cannot be replayed by accident (:class:`NotReplayable`). The clock advances
by ``tick`` per record.

:func:`load_recording` reads ``fixtures/claude-2.1.283/recordings/<name>.jsonl``; :func:`split_at` cuts a
recording so a test can act between two records (the other order of a race is another recording, never an
invented sequence).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.claude_rpc import ClaudeRpcRefusal
from mosaic.claude_rpc.link import ClaudeLinkCore, LinkEvent, Outgoing

__all__ = ["NotReplayable", "Replay", "line_of", "load_recording", "send_for", "split_at"]

JsonObject = dict[str, Any]


class NotReplayable(AssertionError):
    """An ``in`` record the link's API does not write byte for byte (a uuid-less user message, an unknown
    control subtype), or a line the core wrote that differs from the recorded one."""


def load_recording(fixtures: str | Path, name: str) -> list[JsonObject]:
    """The records of ``<fixtures>/claude-2.1.283/recordings/<name>.jsonl`` (``fixtures`` is the repository's
    ``fixtures`` directory)."""
    path = Path(fixtures) / "claude-2.1.283" / "recordings" / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def line_of(msg: Mapping[str, Any]) -> bytes:
    """An ``out`` record as the binary's line: compact JSON, non-ASCII raw, one LF."""
    return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def split_at(records: Sequence[JsonObject], predicate: Callable[[JsonObject], bool]) \
        -> tuple[list[JsonObject], list[JsonObject]]:
    """``records`` cut before the first record whose message satisfies ``predicate``."""
    for i, record in enumerate(records):
        if predicate(record["msg"]):
            return list(records[:i]), list(records[i:])
    raise ValueError("no record matches")


def send_for(core: ClaudeLinkCore, msg: Mapping[str, Any], *, now: float) -> Outgoing | ClaudeRpcRefusal:
    """Make the core queue the line ``msg`` records, through its API; raises :class:`NotReplayable` when the
    API cannot write it."""
    kind = msg.get("type")
    if kind == "user":
        uid = msg.get("uuid")
        if not isinstance(uid, str):
            raise NotReplayable("a user message without a uuid: the link always stamps one")
        return core.send_user(msg["message"]["content"], uuid=uid, now=now)
    if kind == "control_request":
        request = msg["request"]
        subtype = request.get("subtype")
        if subtype == "initialize":
            return core.send_initialize(now=now)
        if subtype == "interrupt":
            return core.send_interrupt(cancel_queued=request.get("cancel_queued") is True, now=now)
        if subtype == "set_permission_mode":
            return core.send_set_permission_mode(str(request.get("mode")), now=now)
        raise NotReplayable(f"the link never sends a {subtype!r} control request")
    if kind == "control_response":
        response = msg["response"]
        body = response.get("response") or {}
        rid = str(response.get("request_id"))
        if body.get("behavior") == "allow":
            return core.allow(rid, now=now)
        if body.get("behavior") == "deny":
            return core.deny(rid, str(body.get("message")), now=now)
    raise NotReplayable(f"the link never writes {json.dumps(msg)[:120]}")


@dataclass
class Replay:
    """A core being fed one recording. ``events`` are every event the core returned, in order; ``sent`` the
    core's answer to each ``in`` record (an :class:`Outgoing`, or the refusal it returned instead)."""

    core: ClaudeLinkCore = field(default_factory=ClaudeLinkCore)
    now: float = 0.0
    tick: float = 0.001
    events: list[LinkEvent] = field(default_factory=list)
    sent: list[Outgoing | ClaudeRpcRefusal] = field(default_factory=list)

    def feed(self, records: Sequence[JsonObject]) -> list[LinkEvent]:
        """Play ``records`` in order; return the events they produced."""
        start = len(self.events)
        for record in records:
            self.now += self.tick
            if record["dir"] == "out":
                self.events += self.core.feed(line_of(record["msg"]), now=self.now)
                continue
            made = send_for(self.core, record["msg"], now=self.now)
            self.sent.append(made)
            if isinstance(made, Outgoing):
                self.write_all()
                if json.loads(made.data) != record["msg"]:
                    raise NotReplayable(f"the core wrote {made.data[:160]!r}, the recording has {record['msg']!r}")
        return self.events[start:]

    def write_all(self) -> list[LinkEvent]:
        """Let the pipe take every queued line whole."""
        start = len(self.events)
        while (out := self.core.next_write()) is not None:
            self.events += self.core.write_done(out, accepted=len(out.data), error=None, now=self.now)
        return self.events[start:]

    def of(self, kind: type[Any]) -> list[Any]:
        """The events of one class, in order."""
        return [e for e in self.events if isinstance(e, kind)]


def __dir__() -> list[str]:
    return sorted(__all__)
