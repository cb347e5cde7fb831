"""The line index: every complete line of a session file decoded only as far as the tree needs, kept as
columns.

For every line after the header this finds its bytes and decodes only `type`, `id`, `parentId` and
`display` with msgspec, which skips every other value without building it. A valid entry line becomes a
*record*: a row of flat arrays (where its line starts, its line number, a flags byte, the record its
parentId named when it was read) and its raw id in an `IdTable` (in the compact form, only the id's hash:
the id is read again from its line). No Python object is made per record, so a parse holds the file's
bytes plus about 30-40 bytes per entry whatever the file's shape (a million tiny entries, 100,000 roots or
forks). The entry itself is decoded in full only when a page renders it (`Index.value`), and not
kept.

The JavaScript-compatible semantics of `_parse` stay exactly: the exact decoder is Python's json with
NaN/Infinity refused, on the line's UTF-8 text, and a line takes it whenever msgspec could judge it
differently: when the block of lines it sits in is not all valid UTF-8 and the line itself is (msgspec does
not check the bytes of values it skips), when it may hold an integer longer than Python's digit limit
(msgspec skips one; Python refuses it), and when msgspec refuses it for a reason Python might not share
(a lone surrogate escape, a number out of range, nesting). A line msgspec refuses as malformed JSON with no
`\\ud800`-`\\udfff` escape in it is malformed for Python's json too, so it is classified without decoding it
again (a malformed line costs what a valid one does): "blank" when it holds only whitespace, else
"not JSON". A line the exact decoder reads keeps its value, so its render never decodes again. Duplicate
keys resolve last-wins in both decoders, and msgspec unescapes keys as Python's json does.

Rendering decodes a line with msgspec (`_FULL`) and falls back to the exact decoder whenever msgspec
refuses it: where msgspec accepts a line, it reads the same values as Python's json (integers, floats,
strings, key order; `tests/test_index_equivalence.py`).

Nesting: both decoders spend one unit of the interpreter's recursion budget per level of nesting, so at
parse time they accept the same lines. A page may render from a deeper stack than the parse ran in; a line
that then runs out of budget is decoded again in a fresh thread (a full budget), so its render never
depends on the caller's stack.
"""

from __future__ import annotations

import codecs
import json
import re
import sys
import threading
from array import array
from collections.abc import Callable
from typing import Any, NoReturn

import msgspec

from ._idtable import DENSE_BYTES, IdTable
from ._rawrender import decode_long
from ._render import HIDDEN_TYPES, shows
from ._runs import Runs

#: Lines are checked for valid UTF-8 in blocks of about this many bytes (one str at a time, then dropped;
#: 64 KiB decodes about twice as fast here as 1 MiB, the str staying in the cache).
UTF8_BLOCK = 1 << 16

#: A record's flags byte (record-level bits; the tree adds its own bits in `_tree`).
SHOWS = 1  # the entry yields an item (its own, or a notice standing for it)
KEPT = 2  # read by the exact decoder at parse time: its value is in `Index.kept`
PNULL = 4  # parentId null or absent: a root
PBAD = 8  # parentId neither a string nor null: a missing parent
PEND = 16  # a string parentId that named no earlier record when the line was read


def _reject_constant(name: str) -> NoReturn:
    # Python's json accepts NaN/Infinity; JSON.parse (Pi's loader) does not, so such a line is malformed.
    raise ValueError(f"{name} is not JSON")


DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_EMPTY_RUN = re.compile(rb"\n+")
_DIGIT = re.compile(rb"[0-9]")
_DIGITS = re.compile(rb"[0-9]*")
# A \u escape of a UTF-16 surrogate: msgspec refuses a lone one where Python's json carries it.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# What str.strip() strips among ASCII (Py_UNICODE_ISSPACE): the blank-line test of a malformed line.
_ASCII_SPACE = re.compile(rb"[\t\n\x0b\x0c\r\x1c-\x1f ]*")
_JSON_SPACE = re.compile(rb"[ \t\r\n]*")
# A run of lines each of which no JSON decoder reads, told by its bytes alone (no decode, no exception): a
# line whose first byte after JSON whitespace can start no JSON value and is no character str.strip()
# strips (so it is "not JSON", never "blank"), a line that opens an object whose next byte after
# whitespace is neither a key's quote nor its closing brace, or a line that opens an object and ends in a
# byte that is neither its closing brace nor whitespace (torn). Only ASCII is looked at, with no
# backtracking (a possessive scan, then one byte); a line this does not match goes through the decoders
# as before. `tests/test_index_equivalence.py` holds it to the exact decoder.
_NOT_JSON_RUN = re.compile(
    rb"(?:[ \t\r]*(?:[!#-,./:-Z\\\]-`a-eg-mo-su-z|}~\x00-\x08\x0e-\x1b\x7f][^\n]*"
    rb"|\{[ \t\r]*[^\n \t\r\"}][^\n]*|\{[^\n]*+(?<![} \t\r]))\n)+")


# Each byte's class at the start of a line: "b" for a byte the first alternative of `_NOT_JSON_RUN` judges
# (no JSON value starts with it, str.strip() keeps it), "G" for any other, LF kept. A run of lines each
# starting with a "b" byte ends at the first LF followed by "G" or by LF (`_bad_start_run`).
_STARTS = bytes(b"b"[0] if re.fullmatch(rb"[!#-,./:-Z\\\]-`a-eg-mo-su-z|}~\x00-\x08\x0e-\x1b\x7f]", bytes([c])) else
                10 if c == 10 else b"G"[0] for c in range(256))


def _bad_start_run(data: bytes, pos: int, end: int) -> int:
    """Where the run of lines from `pos` (a line start inside data[pos:end], `end` just after an LF) that
    each start with a byte no JSON value starts ends: the start of the first other line. The class of each
    byte is found by `bytes.translate` over a window that doubles until it holds the run's end, so the cost
    is linear in the run (a run of two-byte lines costs no Python step per line)."""
    window = 64
    while True:
        stop = min(end, pos + window)
        classes = data[pos:stop].translate(_STARTS)
        if classes[0] != 98:  # "b"
            return pos
        good = classes.find(b"\nG")
        empty = classes.find(b"\n\n")
        found = [x for x in (good, empty) if x >= 0]
        if found:
            return pos + min(found) + 1
        if stop == end:
            return end
        window *= 2


class _Head(msgspec.Struct, gc=False):
    """The four fields of an entry the index needs; every other key is skipped, unbuilt."""

    type: Any = None
    id: Any = None
    parentId: Any = None  # noqa: N815 (the JSON key)
    display: Any = None


#: The head decoder (the index), the whole-line decoder (rendering) and whether a line msgspec refused as
#: malformed may be classified without the exact decoder. Tests replace all three to make the reference
#: parse, which reads every line with the exact decoder.
_FAST = msgspec.json.Decoder(_Head).decode
_FULL = msgspec.json.Decoder().decode
_QUICK = True
_HEAD = _FAST  # the head decoder itself: a test that replaced `_FAST` reads every line through its own

#: A line at least this long (bytes) is read once for the index and its render together (`_long_head`):
#: reading a 20 MB line twice was a sixth of its first page's time (issue 34). Shorter lines are cheap to
#: read again and are not kept decoded (a million tiny entries must not hold a struct each).
LONG_LINE = 1 << 20


def _raw_value(raw: msgspec.Raw) -> Any:
    """What the head decoder's `Any` field holds for the raw token `raw` (an absent field: None)."""
    return msgspec.json.decode(raw) if len(raw) else None


def _long_head(data: bytes, pos: int, stop: int, long: dict[tuple[int, int], Any]) -> _Head:
    """The head of the long line data[pos:stop], read with its render's fields (`_rawrender.decode_long`),
    which are kept in `long` by (id(data), pos) for `Parsed.render_json` (the line is read once, not twice). A line
    that read refuses for any reason is read by the head decoder alone, exactly as a short line is (its
    verdict, or its refusal, is the head decoder's)."""
    view = memoryview(data)[pos:stop]  # not released here: the raw fields hold it
    try:
        e = decode_long(view)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return _FAST(view)
    long[id(data), pos] = e
    return _Head(_raw_value(e.type), _raw_value(e.id), _raw_value(e.parentId), _raw_value(e.display))


#: In the compact id table, an id (or pending parentId) read again from a line longer than this is kept as a
#: str from then on: reading a line again must never cost more than a short line's read, twice at most.
HELD_BYTES = 1024

#: How many records pass between two looks at their density (whether the id tables switch to the compact
#: form). Tests set it to 1, and DENSE_BYTES high, to run every parse in the compact form.
_CHECK_EVERY = 1024


def _typecode(size: int) -> str:
    """The array type of offsets, lines and positions for this many bytes: 4-byte ints while they fit."""
    return "i" if size < (1 << 31) - 1 else "q"


class Index:
    """The records: every valid entry line in file order (duplicates included), column by column.

    Record r lies in buffer `bufs[k]` for the last k with `seg_first[k] <= r`, from `start[r]` to the next LF
    (without one trailing CR: `span`); `line[r]` is its 1-based file line and `flags[r]` its bits (SHOWS,
    KEPT, PNULL, PBAD, PEND). `ppos[r]` is the record its string parentId named when the line was read (the
    latest such record then), else -1. `ids` holds the raw ids; `pend` the string parentIds that named no
    earlier record when read, with `pend_rec` their records. In their compact form both read their strings
    again from the lines (`_reader`). `dups` counts records whose id an earlier record had, `late` records
    whose id an earlier record had named as its parent (a late parent, a child written before its parent,
    or a self-parent): while both are 0 every parent precedes its child and every id is unique, so the tree
    can be built in one pass (`_tree.place`). Extended by `decode_lines`, then read only; `copy` before
    extending one that a result holds.
    """

    __slots__ = ("bufs", "seg_first", "start", "line", "flags", "ppos", "kept", "long", "ids", "pend",
                 "pend_rec", "dups", "late", "consumed", "tc")

    def __init__(self, size: int) -> None:
        tc = _typecode(size)
        self.tc = tc
        self.bufs: list[bytes] = []
        self.seg_first = array("q")
        self.start = array(tc)
        self.line = array(tc)
        self.flags = bytearray()
        self.ppos = array(tc)
        self.kept: dict[int, Any] = {}
        # The long lines' render fields, read with their heads (`_long_head`), by (id(buffer), start).
        self.long: dict[tuple[int, int], Any] = {}
        self.ids = IdTable()
        self.pend = IdTable()
        self.pend_rec = array(tc)
        self.dups = 0
        self.late = 0
        self.consumed = 0  # bytes of lines read so far (the density the id table's form is chosen by)

    def __len__(self) -> int:
        return len(self.flags)

    def copy(self, size: int) -> Index:
        """An independent copy that can take `size` more bytes of lines (widening its arrays if needed)."""
        other = Index.__new__(Index)
        tc = self.tc if self.tc == "q" else _typecode(self.consumed + size + len(self.flags))
        other.tc = tc
        other.bufs = list(self.bufs)
        other.seg_first = array("q", self.seg_first)
        other.start = array(tc, self.start)
        other.line = array(tc, self.line)
        other.flags = bytearray(self.flags)
        other.ppos = array(tc, self.ppos)
        other.kept = dict(self.kept)
        other.long = dict(self.long)
        other.pend_rec = array(tc, self.pend_rec)
        other.ids = self.ids.copy(other._reader(None))
        other.pend = self.pend.copy(other._reader(other.pend_rec))
        other.dups = self.dups
        other.late = self.late
        other.consumed = self.consumed
        return other

    def _reader(self, rec: array[int] | None) -> Callable[[int], tuple[str, bool]]:
        """What the compact id tables read their strings with: with `rec` None, the id of record `pos`;
        else the parentId of record `rec[pos]`; and whether the table keeps it (a line longer than
        HELD_BYTES). A closure over this index's columns (never the index itself: no reference cycle)."""
        return _reader(self.bufs, self.seg_first, self.start, self.kept, rec)

    def span(self, r: int) -> tuple[bytes, int, int]:
        """Record r's buffer and where its line lies in it (without the LF and one trailing CR)."""
        return _span(self.bufs, self.seg_first, self.start, r)

    def value(self, r: int) -> dict[str, Any]:
        """Record r's decoded JSON object, exactly as the exact decoder reads the line."""
        if self.flags[r] & KEPT:
            kept: dict[str, Any] = self.kept[r]
            return kept
        buf, a, b = self.span(r)
        with memoryview(buf) as view, view[a:b] as raw:
            try:
                value: dict[str, Any] = _FULL(raw)
                return value
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                pass  # msgspec refuses what the exact decoder may read differently: ask it
            text = str(raw, "utf-8")
        try:
            value = DECODER.decode(text)
        except RecursionError:
            value = _in_fresh_thread(text)
        return value

    def head(self, r: int) -> Any:
        """Record r's parentId value, as the parse read it (for a missing-parent notice's message)."""
        if self.flags[r] & KEPT:
            return self.kept[r].get("parentId")
        buf, a, b = self.span(r)
        with memoryview(buf) as view:
            return _FAST(view[a:b]).parentId

    def compact(self) -> None:
        """The id tables in their compact form (dense records: no object per id)."""
        self.ids.compact(self._reader(None))
        self.pend.compact(self._reader(self.pend_rec))

    def add_exact(self, value: dict[str, Any], pos: int, line: int) -> None:
        """One record read by the exact decoder (its value is kept)."""
        r = len(self.flags)
        self.start.append(pos)
        self.line.append(line)
        self.kept[r] = value
        self._link(r, value["id"], value.get("parentId"), (SHOWS if shows(value) else 0) | KEPT)

    def _link(self, r: int, rid: str, pid: Any, f: int) -> None:
        """The parent, flags and id of record r (the slow path; `decode_lines` does the same inline)."""
        if pid is None:
            f |= PNULL
            self.ppos.append(-1)
        elif isinstance(pid, str):
            q = self.ids.get(pid)
            self.ppos.append(q)
            if q < 0:
                f |= PEND
                self.pend.add(pid)
                self.pend_rec.append(r)
        else:
            f |= PBAD
            self.ppos.append(-1)
        self.flags.append(f)
        if self.ids.add(rid) >= 0:
            self.dups += 1
        if len(self.pend) and self.pend.get(rid) >= 0:
            self.late += 1


def _span(bufs: list[bytes], seg_first: array[int], start: array[int], r: int) -> tuple[bytes, int, int]:
    """Record r's buffer and its line's bounds there: from its start to the next LF, one CR before it cut
    (a record's line is never empty, and its buffer holds its LF)."""
    k = len(seg_first) - 1
    while seg_first[k] > r:
        k -= 1
    buf = bufs[k]
    a = start[r]
    b = buf.find(b"\n", a)
    return buf, a, b - 1 if buf[b - 1] == 13 else b


def _reader(bufs: list[bytes], seg_first: array[int], start: array[int], kept: dict[int, Any],
            rec: array[int] | None) -> Callable[[int], tuple[str, bool]]:
    """`Index._reader`: a record's id (`rec` None) or the parentId of record rec[pos], read again from its
    line by the head decoder (to be kept when the line is longer than HELD_BYTES), or from its kept value."""

    def read(pos: int) -> tuple[str, bool]:
        r = pos if rec is None else rec[pos]
        value = kept.get(r) if kept else None
        if value is not None:
            s: str = value["id"] if rec is None else value["parentId"]
            return s, False
        buf, a, b = _span(bufs, seg_first, start, r)
        with memoryview(buf) as view:
            head = _FAST(view[a:b])
        s = head.id if rec is None else head.parentId
        return s, b - a > HELD_BYTES

    return read


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


def _blank(data: bytes, view: memoryview, pos: int, stop: int) -> bool:
    """Whether line data[pos:stop] (valid UTF-8) holds only what str.strip() strips."""
    at = _ASCII_SPACE.match(data, pos, stop).end()  # type: ignore[union-attr]
    if at == stop:
        return True
    if data[at] < 0x80:
        return False  # a character str.strip() keeps
    return not str(view[at:stop], "utf-8").strip()


def _exact(view: memoryview, pos: int, stop: int) -> tuple[Any, str | None]:
    """One line through the exact decoder: (value, None), or (None, why it is unreadable)."""
    if stop == pos:
        return None, "blank"
    try:
        text = str(view[pos:stop], "utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    try:
        return DECODER.decode(text), None
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError, NaN/Infinity and integers over Python's digit limit;
        # RecursionError covers nesting deeper than the interpreter's stack.
        return None, "not JSON" if text.strip() else "blank"


def _judge(data: bytes, view: memoryview, pos: int, stop: int, refused: BaseException | None) -> tuple[Any, str | None]:
    """A line the fast decoder did not read (`refused` is why, None when it was not asked): (value, None)
    when the exact decoder reads a JSON value, else (None, the reason). Never raises.

    Where msgspec refused the line as malformed JSON (a DecodeError) and it holds no surrogate escape,
    Python's json refuses it too (every other difference between them is a number, a surrogate escape or
    nesting, module doc): it is classified here without decoding it again. A line that is not an object
    (the head decoder's ValidationError at its first value) is decoded whole by msgspec once: a value it
    reads, Python's json reads too (not a JSON object); a DecodeError is classified as above."""
    lead = _JSON_SPACE.match(data, pos, stop).end()  # type: ignore[union-attr]
    if _QUICK and type(refused) is msgspec.ValidationError and lead < stop and data[lead] != 0x7B:  # not "{"
        try:
            return _FULL(view[pos:stop]), None
        except msgspec.DecodeError as exc:
            refused = exc
        except (msgspec.ValidationError, RecursionError):
            pass
    if _QUICK and type(refused) is msgspec.DecodeError and not _SURROGATE_ESCAPE.search(data, pos, stop):
        return None, "blank" if _blank(data, view, pos, stop) else "not JSON"
    return _exact(view, pos, stop)


def decode_lines(data: bytes, pos: int, end: int, line: int, ix: Index, unreadable: Runs) -> int:
    """Index the lines of data[pos:end] (`end` just after an LF), the first being file line `line`: valid
    entry lines become records of `ix` (data becomes its next buffer), the others unreadable lines (README
    rule 6), each run of consecutive ones added to `unreadable` once. Returns the number of the line after
    the last.
    """
    ix.seg_first.append(len(ix.flags))
    ix.bufs.append(data)
    find = data.find
    fast = _FAST
    hidden = HIDDEN_TYPES
    suspects = _long_digit_runs(data, pos, end)
    ns = len(suspects)
    k = 0
    next_suspect = suspects[0] if ns else end
    block_end = pos  # lines before block_end lie in a block already checked: utf8_ok says how it went
    utf8_ok = True
    start_append = ix.start.append
    line_append = ix.line.append
    flags_append = ix.flags.append
    ppos_append = ix.ppos.append
    pend_rec_append = ix.pend_rec.append
    ids = ix.ids
    pend = ix.pend
    idmap = ids.map
    raw = ids.raw
    pendmap = pend.map
    pendraw = pend.raw
    nrec = len(ix.flags)
    last_id: str | None = None  # the id of record nrec - 1, when read here: a parentId naming it needs no lookup
    dups = late = 0
    seen_from = pos - ix.consumed  # bytes before data[pos] that count toward the density
    check_at = nrec + _CHECK_EVERY
    run_first = run_n = 0
    run_why = ""
    with memoryview(data) as view:
        while pos < end:
            nl = find(b"\n", pos, end)
            if nl == pos:
                # A run of empty lines is taken in one step (a file of blank lines costs no loop per byte).
                n = _EMPTY_RUN.match(data, pos, end).end() - pos  # type: ignore[union-attr]
                if run_n and run_first + run_n == line:
                    run_n += n
                    if "blank" not in run_why:
                        run_why += "; blank"
                else:
                    if run_n:
                        unreadable.add_run(run_first, run_n, run_why)
                    run_first, run_n, run_why = line, n, "blank"
                line += n
                pos += n
                continue
            stop = nl - 1 if data[nl - 1] == 13 else nl  # one trailing CR is stripped
            if pos >= block_end:
                block_end = data.rfind(b"\n", pos, min(end, pos + UTF8_BLOCK)) + 1
                if block_end <= pos:
                    block_end = nl + 1  # one line longer than a block: check it alone
                utf8_ok = _utf8(view, pos, block_end)
            if _QUICK and utf8_ok and (data[pos] != 0x7B or (run_n and run_first + run_n == line)):
                # A run of lines judged by their bytes (`_NOT_JSON_RUN`) in one step, within the checked block:
                # hostile files of short garbage lines cost no decode and no exception per line. Tried where
                # a line does not open an object, or right after an unreadable line (a valid line costs no
                # look).
                if _STARTS[data[pos]] == 98:  # "b": lines judged by their first byte, a run by classes
                    run_end = _bad_start_run(data, pos, block_end)
                else:
                    bad = _NOT_JSON_RUN.match(data, pos, block_end)
                    run_end = pos if bad is None else bad.end()
                if run_end > pos:
                    n = data.count(b"\n", pos, run_end)
                    if run_n and run_first + run_n == line:
                        run_n += n
                        if "not JSON" not in run_why:
                            run_why += "; not JSON"
                    else:
                        if run_n:
                            unreadable.add_run(run_first, run_n, run_why)
                        run_first, run_n, run_why = line, n, "not JSON"
                    line += n
                    pos = run_end
                    continue
            while next_suspect < pos:
                k += 1
                next_suspect = suspects[k] if k < ns else end
            why: str | None
            value: Any
            if stop > pos and next_suspect >= nl and (utf8_ok or _utf8(view, pos, stop)):
                try:
                    if nl - pos < LONG_LINE or fast is not _HEAD:
                        head = fast(view[pos:stop])
                    else:
                        head = _long_head(data, pos, stop, ix.long)
                except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
                    value, why = _judge(data, view, pos, stop, exc)
                else:
                    et = head.type
                    rid = head.id
                    if type(rid) is str and et != "session":
                        # A record, inline (Index.add_exact and Index._link do the same for the rare lines
                        # the exact decoder read).
                        start_append(pos)
                        line_append(line)
                        if et == "custom_message":
                            f = 1 if head.display is True else 0
                        else:
                            f = 0 if type(et) is str and et in hidden else 1
                        pid = head.parentId
                        if pid is None:
                            f |= PNULL
                            ppos_append(-1)
                        elif type(pid) is str:
                            if pid == last_id:
                                q = nrec - 1  # the record just read: the latest with its id (a chain)
                            else:
                                q = idmap.get(pid, -1) if idmap is not None else ids.get(pid)
                            ppos_append(q)
                            if q < 0:
                                f |= PEND
                                if pendmap is not None and pendraw is not None:
                                    pendmap[pid] = len(pendraw)
                                    pendraw.append(pid)
                                else:
                                    pend.add(pid)
                                pend_rec_append(nrec)
                        else:
                            f |= PBAD
                            ppos_append(-1)
                        flags_append(f)
                        if idmap is not None:
                            if rid in idmap:
                                dups += 1
                            idmap[rid] = nrec
                            raw.append(rid)  # type: ignore[union-attr]
                        elif ids.add(rid) >= 0:
                            dups += 1
                        if rid in pendmap if pendmap is not None else pend.get(rid) >= 0:
                            late += 1
                        last_id = rid
                        nrec += 1
                        if nrec >= check_at:
                            check_at = nrec + _CHECK_EVERY
                            if idmap is not None and nrec * DENSE_BYTES > pos - seen_from:
                                ix.compact()  # dense records: the id tables drop their objects
                                idmap = raw = pendmap = pendraw = None
                        pos = nl + 1
                        line += 1
                        continue
                    value, why = None, "a second session header" if et == "session" else "no string id"
            elif stop == pos:
                value, why = None, "blank"
            else:
                value, why = _exact(view, pos, stop)  # an integer over the digit limit, or not UTF-8
            if why is None:
                if not isinstance(value, dict):
                    why = "not a JSON object"
                elif value.get("type") == "session":
                    why = "a second session header"
                elif not isinstance(value.get("id"), str):
                    why = "no string id"
                else:
                    ix.dups += dups
                    ix.late += late
                    dups = late = 0
                    ix.add_exact(value, pos, line)
                    last_id = value["id"]
                    nrec += 1
            if why is not None:
                if run_n and run_first + run_n == line:
                    run_n += 1
                    if why not in run_why:
                        run_why += "; " + why
                else:
                    if run_n:
                        unreadable.add_run(run_first, run_n, run_why)
                    run_first, run_n, run_why = line, 1, why
            pos = nl + 1
            line += 1
    if run_n:
        unreadable.add_run(run_first, run_n, run_why)
    ix.dups += dups
    ix.late += late
    ix.consumed = end - seen_from
    return line
