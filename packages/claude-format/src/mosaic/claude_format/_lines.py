"""The line index: every complete line of a transcript read once, into flat records.

A transcript has no header: each line is one JSON object (FACTS §2 "Entry types"). A line is

- an **entry** when it holds a string `uuid` (user, assistant, attachment, and any other type that carries
  one: system, progress, summary, ... are tolerated as notices). The index keeps where its bytes are, its
  line, a flags byte (sidechain, what it shows as) and the entry its `parentUuid` named; its JSON is decoded
  in full only when a page renders it;
- a **meta line** when it has no uuid and its `type` is one 2.1.283 writes beside the tree (queue-operation,
  last-prompt, atis-latch, cost-state, mode): never shown; a last-prompt line's `leafUuid` is kept (the leaf
  rule);
- an **other line**, with no uuid and any other type (a `summary` or `system` line without a uuid, ...):
  shown as an unknown-entry-type notice at its file position;
- **unreadable**: blank, not UTF-8, not JSON (NaN and Infinity included), not an object.

Lines are split on the LF byte only (U+2028 and U+2029 stay inside a line); one trailing CR is stripped.
Only complete lines (up to the last LF) are read. The fields the tree needs are decoded with msgspec into a
small Struct (every other value is skipped without being built); a line msgspec refuses goes through the
exact decoder (Python's json, NaN and Infinity refused) when Python's json could read it (a lone surrogate
escape, nesting deeper than msgspec's limit), else it is classified without a second decode. UTF-8 is
checked over the whole buffer first (msgspec does not check the bytes of values it skips).
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ._runs import BLANK, NOT_JSON, NOT_OBJECT, NOT_UTF8, Runs

# What the top level loads from here on first use; the rest is the parser's.
__all__ = ["META_TYPES", "PINNED_VERSION", "first_entry_end"]

#: The version every entry must carry (B1 part 5: any other version refuses unsupported-harness).
PINNED_VERSION = "2.1.283"

#: uuid-less lines 2.1.283 writes beside the tree (FACTS §2): never shown, never notices.
META_TYPES = frozenset({"queue-operation", "last-prompt", "atis-latch", "cost-state", "mode"})

#: What an entry shows as (the low bits of its flags byte).
USER, ASSISTANT, ATTACHMENT, OTHER = range(4)
KIND_MASK = 3
SIDECHAIN = 4

#: Parent codes beside entry indexes: a null parentUuid, one not read yet when the entry was read
#: (resolved at the end, else missing), one that is neither a string nor null (a missing parent).
ROOT, PENDING, INVALID = -1, -2, -3

_CHUNK = 1 << 18
_EMPTY_RUN = re.compile(rb"\n+")
_BLANK = re.compile(rb"[ \t\r\n\x0b\x0c]*")
_KINDS = {"user": USER, "assistant": ASSISTANT, "attachment": ATTACHMENT}


class _Fields(msgspec.Struct, rename="camel"):
    """The fields the index needs; every other value of the line is skipped."""

    type: Any = None
    uuid: Any = None
    parent_uuid: Any = None
    is_sidechain: Any = None
    version: Any = None
    cwd: Any = None
    timestamp: Any = None
    session_id: Any = None
    leaf_uuid: Any = None


_DECODE = msgspec.json.Decoder(_Fields).decode
_FULL = msgspec.json.Decoder().decode


class OtherVersion(Exception):
    """An entry of another version was read (raised to stop reading: the transcript is refused)."""

    def __init__(self, line: int, version: object) -> None:
        super().__init__(line, version)
        self.line = line
        self.version = version


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def exact_decode(text: str) -> Any:
    """Python's json with NaN and Infinity refused (JSON.parse refuses them). Raises ValueError or
    RecursionError."""
    return json.loads(text, parse_constant=_no_constant)


def decode_full(raw: bytes | memoryview) -> dict[str, Any] | None:
    """The whole JSON object of a line (msgspec, else the exact decoder), or None when neither reads it as
    an object. Used to render an entry; never raises."""
    try:
        value = _FULL(raw)
    except (msgspec.DecodeError, RecursionError):
        try:
            value = exact_decode(str(raw, "utf-8"))
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


@dataclass
class Records:
    """What the lines held, as flat arrays; copied (`copy`) before a continuation extends it."""

    # Entries, in file order: where the line's bytes are (offsets in the whole snapshot), its line, flags,
    # and the entry its parentUuid named when it was read (an index, or ROOT / PENDING / INVALID).
    start: array[int] = field(default_factory=lambda: array("q"))
    end: array[int] = field(default_factory=lambda: array("q"))
    line: array[int] = field(default_factory=lambda: array("i"))
    flags: array[int] = field(default_factory=lambda: array("B"))
    parent: array[int] = field(default_factory=lambda: array("i"))
    ids: list[str] = field(default_factory=list)
    #: uuid -> the latest entry that carries it (a later line with the same uuid wins).
    latest: dict[str, int] = field(default_factory=dict)
    #: entry -> the parentUuid it named that was not read yet at the time.
    pending: dict[int, str] = field(default_factory=dict)
    #: (earlier line, later line) of each uuid read again; the earlier entry is superseded.
    duplicates: list[tuple[int, int]] = field(default_factory=list)
    superseded: set[int] = field(default_factory=set)
    runs: Runs = field(default_factory=Runs)
    # Other lines (no uuid, not a meta type): line, and where its bytes are.
    other_line: array[int] = field(default_factory=lambda: array("q"))
    other_start: array[int] = field(default_factory=lambda: array("q"))
    other_end: array[int] = field(default_factory=lambda: array("q"))
    #: The leafUuid of the last last-prompt line that carries a string one.
    leaf: str | None = None
    #: sessionId, cwd, timestamp of the first entry (None before the first entry).
    first: tuple[str | None, str | None, str | None] | None = None
    line_count: int = 0
    length: int = 0

    def copy(self) -> Records:
        return Records(
            array("q", self.start), array("q", self.end), array("i", self.line), array("B", self.flags),
            array("i", self.parent), list(self.ids), dict(self.latest), dict(self.pending),
            list(self.duplicates), set(self.superseded), self.runs.copy(), array("q", self.other_line),
            array("q", self.other_start), array("q", self.other_end), self.leaf, self.first,
            self.line_count, self.length,
        )

    @property
    def entry_count(self) -> int:
        return len(self.ids)


def bad_utf8_lines(buf: bytes, end: int) -> list[int]:
    """The start offsets of the lines of `buf[:end]` (complete lines) that are not valid UTF-8, in order.
    Decodes in 256 KiB pieces (the text is dropped at once), so it holds no copy of the buffer."""
    out: list[int] = []
    view = memoryview(buf)
    pos = 0
    while pos < end:
        dec = codecs.getincrementaldecoder("utf-8")("strict")
        at = pos
        try:
            while at < end:
                stop = min(at + _CHUNK, end)
                held = len(dec.getstate()[0])
                chunk_at = at
                dec.decode(view[at:stop], final=stop == end)
                at = stop
            return out
        except UnicodeDecodeError as e:
            bad = chunk_at - held + e.start
            line_start = buf.rfind(b"\n", 0, bad) + 1
            out.append(max(line_start, pos))
            nl = buf.find(b"\n", bad)
            pos = end if nl < 0 else nl + 1
    return out


def read_lines(buf: bytes, base: int, recs: Records) -> int:
    """Read the complete lines of `buf` (whose first byte is at offset `base` of the snapshot) into `recs`;
    returns where the complete lines end (the index after the last LF). Raises OtherVersion at the first
    entry whose version is not PINNED_VERSION."""
    end = buf.rfind(b"\n") + 1
    bad = bad_utf8_lines(buf, end)
    k = 0
    pos = 0
    view = memoryview(buf)
    line = recs.line_count
    while pos < end:
        if buf[pos] == 10:
            n = _EMPTY_RUN.match(buf, pos).end() - pos  # type: ignore[union-attr]  # a run of empty lines, one step
            recs.runs.add(line + 1, n, BLANK)
            line += n
            pos += n
            continue
        nl = buf.index(b"\n", pos)
        line += 1
        stop = nl - 1 if buf[nl - 1] == 13 else nl
        if k < len(bad) and bad[k] == pos:
            k += 1
            recs.runs.add(line, 1, NOT_UTF8)
        else:
            _classify(buf, view, pos, stop, base, line, recs)
        pos = nl + 1
    recs.line_count = line
    recs.length = base + end
    return end


def _classify(buf: bytes, view: memoryview, pos: int, stop: int, base: int, line: int, recs: Records) -> None:
    fields: Any
    try:
        fields = _DECODE(view[pos:stop])
    except (msgspec.DecodeError, RecursionError) as err:
        value, reason = _fallback(buf, view, pos, stop, err)
        if value is None:
            recs.runs.add(line, 1, reason)
            return
        fields = _Fields(**{k: value.get(v) for k, v in _JSON_NAMES.items()})
    uuid = fields.uuid
    if not isinstance(uuid, str):
        kind = fields.type
        if isinstance(kind, str) and kind in META_TYPES:
            if kind == "last-prompt" and isinstance(fields.leaf_uuid, str):
                recs.leaf = fields.leaf_uuid
            return
        recs.other_line.append(line)
        recs.other_start.append(base + pos)
        recs.other_end.append(base + stop)
        return
    if fields.version != PINNED_VERSION:
        raise OtherVersion(line, fields.version)
    i = len(recs.ids)
    if recs.first is None:
        recs.first = (_str(fields.session_id), _str(fields.cwd), _str(fields.timestamp))
    kind_name = fields.type
    flags = _KINDS.get(kind_name, OTHER) if isinstance(kind_name, str) else OTHER
    if fields.is_sidechain is True:
        flags |= SIDECHAIN
    parent_raw = fields.parent_uuid
    if parent_raw is None:
        parent = ROOT
    elif isinstance(parent_raw, str):
        parent = recs.latest.get(parent_raw, PENDING)
        if parent == PENDING:
            recs.pending[i] = parent_raw
    else:
        parent = INVALID
    old = recs.latest.get(uuid)
    if old is not None:
        recs.superseded.add(old)
        recs.duplicates.append((recs.line[old], line))
    recs.latest[uuid] = i
    recs.ids.append(uuid)
    recs.start.append(base + pos)
    recs.end.append(base + stop)
    recs.line.append(line)
    recs.flags.append(flags)
    recs.parent.append(parent)


_JSON_NAMES = {"type": "type", "uuid": "uuid", "parent_uuid": "parentUuid", "is_sidechain": "isSidechain",
               "version": "version", "cwd": "cwd", "timestamp": "timestamp", "session_id": "sessionId",
               "leaf_uuid": "leafUuid"}


def _fallback(buf: bytes, view: memoryview, pos: int, stop: int, err: BaseException) -> tuple[dict[str, Any] | None, int]:
    """A line msgspec refused: (its object, 0), or (None, the reason it is unreadable). The exact decoder
    runs only where Python's json could read what msgspec refused: a lone surrogate escape (msgspec refuses
    every `\\udXXX` it cannot pair), nesting deeper than msgspec's limit, a number out of msgspec's range
    in a field the index decodes, or a value that is not an object (to say so). A line with none of those is malformed for Python's json too."""
    if _BLANK.fullmatch(buf, pos, stop) is not None:
        return None, BLANK
    message = str(err)
    if not (isinstance(err, msgspec.ValidationError) or "recursion" in message or "out of range" in message
            or buf.find(b"\\u", pos, stop) >= 0):
        return None, NOT_JSON
    try:
        value = exact_decode(str(view[pos:stop], "utf-8"))
    except (ValueError, RecursionError):
        return None, NOT_JSON
    if not isinstance(value, dict):
        return None, NOT_OBJECT
    return value, 0


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def first_entry_end(data: bytes | bytearray, start: int = 0) -> int | None:
    """The offset just after the LF of the first complete line of `data` from `start` (a line start) on that
    is an entry (holds a string uuid), or None when no complete line is one yet. What the catalogue reads
    of a transcript: its head (a reader that reads on calls again from where the complete lines ended)."""
    pos = start
    view = memoryview(data)
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return None
        if nl > pos:
            try:
                uuid = _DECODE(view[pos:nl]).uuid
            except (msgspec.DecodeError, RecursionError):
                uuid = None
                if data.find(b"\\u", pos, nl) >= 0:
                    try:
                        value = exact_decode(str(view[pos:nl], "utf-8"))
                    except (ValueError, RecursionError):
                        value = None
                    uuid = value.get("uuid") if isinstance(value, dict) else None
            if isinstance(uuid, str):
                return nl + 1
        pos = nl + 1


def piece_of(bases: list[int], offset: int) -> int:
    """The index of the piece holding `offset`, given the pieces' start offsets in order."""
    return bisect_right(bases, offset) - 1
