"""The line index: each complete line of a session file decoded only as far as the tree needs (issue 13).

For every line after the header this finds its bytes and decodes only `type`, `id`, `parentId` and
`display` (what the tree, the names and the item counts need) with msgspec, which skips every other value
without building it. The entry itself is decoded in full (by `Record.value`, with the exact decoder) only
when a page renders it. So a parse holds the file's bytes and a small record per entry, not every entry's
decoded JSON.

The JavaScript-compatible semantics of `_parse` stay exactly: a line takes the exact decoder (Python's json
with NaN/Infinity refused, on the line's UTF-8 text), as every line did before, whenever msgspec could judge
it differently. That is when msgspec refuses it (a lone surrogate escape, NaN/Infinity, a number out of
range, too deep, anything malformed: the exact decoder then says why, or accepts it), when its block of
lines is not all valid UTF-8 (msgspec does not check the bytes of values it skips), and when it may hold an
integer longer than Python's digit limit (msgspec skips one; Python refuses it). A line decoded by the exact decoder keeps its value, so its render never decodes
again. Duplicate keys resolve last-wins in both decoders, and msgspec unescapes keys as Python's json does.

Nesting: both decoders spend one unit of the interpreter's recursion budget per level of nesting, so at
parse time they accept the same lines. A page may render from a deeper stack than the parse ran in; a line
that then runs out of budget is decoded again in a fresh thread (a full budget), so its render never
depends on the caller's stack, as when every value was kept.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import threading
from typing import Any, NoReturn

import msgspec

from ._render import shows, shows_type
from ._runs import Runs

#: Lines are checked for valid UTF-8 in blocks of about this many bytes (one str at a time, then dropped;
#: 64 KiB decodes about twice as fast here as 1 MiB, the str staying in the cache).
UTF8_BLOCK = 1 << 16


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN/Infinity; JSON.parse (Pi's loader) does not, so such a line is malformed.
    raise ValueError(f"{name} is not JSON")


DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_EMPTY_RUN = re.compile(rb"\n+")
_DIGIT = re.compile(rb"[0-9]")
_DIGITS = re.compile(rb"[0-9]*")


class _Head(msgspec.Struct, gc=False):
    """The four fields of an entry the index needs; every other key is skipped, unbuilt."""

    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 (the JSON key)
    display: Any = None


_FAST = msgspec.json.Decoder(_Head).decode


class Record(msgspec.Struct, gc=False):
    """One valid entry line: its line number, raw id, parentId (None for null or absent), whether it shows,
    and where its bytes are (`src[start:stop]`, without the LF and one trailing CR). `obj` is its decoded
    value when the exact decoder read it at parse time, else None (decoded on demand by `value`).

    A Struct with `gc=False`: one per entry, never in a cycle, so the cyclic collector never walks them."""

    line: int
    raw_id: str
    pid: Any
    shows: bool
    src: bytes
    start: int
    stop: int
    obj: dict[str, Any] | None

    def value(self) -> dict[str, Any]:
        """The entry's decoded JSON object, exactly as the exact decoder reads the line."""
        if self.obj is not None:
            return self.obj
        with memoryview(self.src) as view:
            text = str(view[self.start:self.stop], "utf-8")
        try:
            value: dict[str, Any] = DECODER.decode(text)
        except RecursionError:
            value = _in_fresh_thread(text)
        return value


def _in_fresh_thread(text: str) -> dict[str, Any]:
    """Decode `text` in a new thread: a full recursion budget, at least what the parse had (module doc)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(DECODER.decode(text))
        except RecursionError as e:  # pragma: no cover - deeper than the parse accepted: a defect here
            out.append(e)

    worker = threading.Thread(target=run, name="pi-format-decode")
    worker.start()
    worker.join()
    if not out or isinstance(out[0], BaseException):
        raise RuntimeError("an entry the index accepted cannot be decoded again")
    value: dict[str, Any] = out[0]
    return value


def _long_digit_runs(data: bytes, pos: int, end: int) -> list[int]:
    """A position (ascending) inside every run of more digits than Python's int limit in data[pos:end].

    Python's json refuses such an integer (ValueError) where msgspec skips it. A run longer than the limit
    L covers a multiple of any step <= L + 1, so only the bytes at those multiples are looked at; at each
    one that is a digit, the run through it is measured (forward from it, then whether the L + 1 bytes
    before the run's end are all digits), which costs about the run's length.
    """
    limit = sys.get_int_max_str_digits()
    if limit == 0 or end - pos <= limit:
        return []
    step = min(4096, limit + 1)
    first = -(-pos // step) * step
    sample = data[first:end:step]
    found: list[int] = []
    digits = _DIGITS.match
    for m in _DIGIT.finditer(sample):
        at = first + m.start() * step
        stop = digits(data, at, end).end()  # type: ignore[union-attr]
        back = stop - limit - 1
        if stop - at > limit or (back >= pos and digits(data, back, at).end() == at):  # type: ignore[union-attr]
            found.append(at)
    return found


def _utf8(view: memoryview, start: int, stop: int) -> bool:
    """Whether view[start:stop] is valid UTF-8, holding at most UTF8_BLOCK bytes of it as text at once."""
    try:
        if stop - start <= UTF8_BLOCK:
            str(view[start:stop], "utf-8")
            return True
        decoder = codecs.getincrementaldecoder("utf-8")()
        for at in range(start, stop, UTF8_BLOCK):
            decoder.decode(view[at:min(stop, at + UTF8_BLOCK)])
        decoder.decode(b"", final=True)
        return True
    except UnicodeDecodeError:
        return False


def decode_lines(data: bytes, pos: int, end: int, line: int, records: list[Record], unreadable: Runs) -> int:
    """Index the lines of data[pos:end] (`end` just after an LF), the first being file line `line`, into
    records and unreadable lines (rule 6). Returns the number of the line after the last."""
    find = data.find
    fast = _FAST
    exact = DECODER.decode
    suspects = _long_digit_runs(data, pos, end)
    s = 0
    block_end = pos  # lines before block_end lie in a block already checked: utf8_ok says how it went
    utf8_ok = True
    with memoryview(data) as view:
        while pos < end:
            nl = find(b"\n", pos, end)
            if nl == pos:
                # A run of empty lines is taken in one step (a file of blank lines costs no loop per byte).
                empty = _EMPTY_RUN.match(data, pos, end)
                assert empty is not None
                unreadable.add_many(line, empty.end() - pos, "blank")
                line += empty.end() - pos
                pos = empty.end()
                continue
            stop = nl - 1 if data[nl - 1] == 13 else nl  # one trailing CR is stripped
            if pos >= block_end:
                block_end = data.rfind(b"\n", pos, min(end, pos + UTF8_BLOCK)) + 1
                if block_end <= pos:
                    block_end = nl + 1  # one line longer than a block: check it alone
                utf8_ok = _utf8(view, pos, block_end)
            while s < len(suspects) and suspects[s] < pos:
                s += 1
            head: _Head | None = None
            if utf8_ok and stop > pos and not (s < len(suspects) and suspects[s] < nl):
                try:
                    head = fast(view[pos:stop])
                except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                    head = None
            if head is not None:
                etype = head.type
                rid = head.id
                if etype == "session":
                    unreadable.add(line, "a second session header")
                elif not isinstance(rid, str):
                    unreadable.add(line, "no string id")
                else:
                    records.append(Record(line, rid, head.parentId, shows_type(etype, head.display), data, pos,
                                          stop, None))
            else:
                _exact(view, pos, stop, line, data, exact, records, unreadable)
            pos = nl + 1
            line += 1
    return line


def _exact(view: memoryview, pos: int, stop: int, line: int, data: bytes, exact: Any, records: list[Record],
           unreadable: Runs) -> None:
    """One line through the exact decoder, as every line was read before the index: its value is kept."""
    value: Any = None
    reason: str | None = None
    if stop == pos:
        reason = "blank"
    else:
        try:
            text = str(view[pos:stop], "utf-8")
        except UnicodeDecodeError:
            reason = "not UTF-8"
        else:
            try:
                value = exact(text)
            except (ValueError, RecursionError):
                reason = "not JSON" if text.strip() else "blank"
            del text
    if reason is None:
        if not isinstance(value, dict):
            reason = "not a JSON object"
        elif value.get("type") == "session":
            reason = "a second session header"
        elif not isinstance(value.get("id"), str):
            reason = "no string id"
    if reason is not None:
        unreadable.add(line, reason)
    else:
        records.append(Record(line, value["id"], value.get("parentId"), shows(value), data, pos, stop, value))
