"""A long string cut into fragments straight from its JSON bytes, never decoded (issue 34: one 20 MB line).

A string token from the file (`raw`: its bytes with the quotes, `bytes` or a `memoryview` of the file's
bytes, from a file whose UTF-8 was validated, a token msgspec accepts) is **canonical** when msgspec writes
its text back as exactly those bytes (`canonical`): no backslash, or only the escapes msgspec and
JSON.stringify both write (`\\"` `\\\\` `\\b` `\\f` `\\n` `\\r` `\\t`, and `\\u00xx` in lowercase hex for the
other controls below U+0020). A canonical token's bytes may be spliced into a page verbatim, and so may any
piece of it cut between two characters: JSON escapes each character on its own, so a piece's JSON is its
bytes between two quotes.

`raw_fragments(raw)` gives the cuts `_parts.fragments` makes of the decoded text, as byte offsets into the
token: the same fragments (at most 262,144 UTF-16 units and 1 MiB of JSON each, a surrogate pair never
cut, an escape never cut, an empty string one empty fragment), counted on the bytes:

- a code point is one UTF-8 lead byte (a byte outside 0x80-0xBF) or one escape (`\\X`: 2 bytes, `\\u00xx`:
  6 bytes, whose bytes are all ASCII, so no escape is ever inside a UTF-8 sequence);
- a code point is one UTF-16 unit, except a 4-byte UTF-8 sequence (lead 0xF0-0xF4): two, a surrogate pair;
- a fragment's JSON is its bytes and the two quotes.

A backslash starts an escape exactly when it is the odd one of a run of backslashes counted from the
run's first (a run always starts where a character starts: no escape but `\\\\` holds a backslash after its
first byte). Counting starts at a character boundary, so `bytes.count(b"\\\\\\\\")` (greedy, left to right)
pairs a run's backslashes as a decoder does.

The cost is linear in the token's bytes with a small constant: each window of it is counted with
`bytes.translate`, `bytes.count` and `bytes.isascii` (all in C), and the exact cut is found by an
interpolation search that counts each byte about once, then a walk of at most a few dozen bytes. No window
is larger than about 1.5 MiB, so what is held beside the token is bounded whatever its size.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, overload
from zlib import adler32

import msgspec

from ._parts import (
    INLINE_FIELD_JSON,
    MAX_BLOCKS_PER_PART,
    MAX_FRAGMENT_JSON,
    MAX_PART_BYTES,
    MAX_STRING_UNITS,
)

__all__: list[str] = []

_BACKSLASH = 0x5C
_U = 0x75
#: Where an exact cut is walked character by character rather than searched by counting.
_WALK = 48
#: canonical's window: a bounded copy of the token at a time.
_WINDOW = 1024 * 1024
#: Where an escape msgspec may not have written can be (a real \\/ or \\u escape, or the text after an escaped
#: backslash: `\\\\u0041` is a backslash and u0041): a piece with neither is canonical.
_SUSPECT = re.compile(rb"\\[/u]")
#: An escape msgspec would not write, once each escaped backslash is gone (every backslash left starts an
#: escape): `\\/` (it writes `/`), or a `\\u` other than `\\u00xx` in lowercase hex for a control it has no
#: short form for (not `\\u0008`-`\\u000a`, `\\u000c`, `\\u000d`, not from U+0020 on: it writes those
#: characters themselves, and a surrogate pair's escapes as its 4 bytes of UTF-8).
_BAD_ESCAPE = re.compile(rb"\\(?:/|u(?!00(?:0[0-7bef]|1[0-9a-f])))")
#: An escaped backslash or a `\\u`: what the weights alone do not count right (`_weight`).
_UNEVEN = re.compile(rb"\\[\\u]")

Raw = bytes | memoryview


def _sparse(piece: bytes) -> bool:
    """Whether backslashes are rare in `piece` (judged on its first 4 KiB), so that one regex search for a
    backslash and what follows it (tried at each backslash, in C) costs less than two plain finds of two
    bytes (each a pass over the piece). Where they are dense (a run of escaped backslashes, text of
    controls), the plain finds: a regex would be tried at nearly every byte. Either answer is exact."""
    return piece.count(b"\\", 0, 4096) * 32 < min(len(piece), 4096)


def canonical(raw: Raw) -> bool:
    """Whether `raw`, one JSON string token with its quotes that msgspec accepts, is exactly what msgspec
    writes for its text (`msgspec.json.encode(msgspec.json.decode(raw)) == raw`), so that it and any piece
    of it cut between two characters may be spliced into a page verbatim. Linear: a long token is looked at
    a window at a time, a bounded copy each."""
    end = len(raw) - 1
    if end < 1 or raw[0] != 0x22 or raw[end] != 0x22:
        return False
    at = 1
    while at < end:
        cut = _boundary(raw, at, min(end, at + _WINDOW), end)
        if cut == at:  # a window shorter than one escape: never, as windows are 1 MiB; stay linear anyway
            cut = _next_char(raw, at)
        if not _canonical_piece(bytes(raw[at:cut])):
            return False
        at = cut
    return True


def _canonical_piece(piece: bytes) -> bool:
    """Whether `piece`, the bytes between two character boundaries of a token msgspec accepts, holds only the
    escapes msgspec writes (a token msgspec accepts holds no raw control and no raw quote)."""
    if b"\\" not in piece:
        return True
    # Where msgspec writes something else, a \/ or a \u is (or the text after an escaped backslash).
    if (_SUSPECT.search(piece) is None) if _sparse(piece) else (b"\\u" not in piece and b"\\/" not in piece):
        return True
    if b"\\\\" in piece:
        piece = piece.replace(b"\\\\", b"")  # each pair from a run's start: what is left starts an escape
    return _BAD_ESCAPE.search(piece) is None


def raw_fragments(raw: Raw) -> list[tuple[int, int, int]]:
    """The fragments `_parts.fragments` cuts the text of the canonical token `raw` into, as (start, end,
    json_size) byte offsets into `raw`: `b'"' + raw[start:end] + b'"'` is each fragment's JSON, json_size
    its length (end - start + 2), and decoding them gives exactly `fragments(text)`.

    The same rule as `_parts._sized_fragments`, on bytes: each fragment as many characters as fit in
    262,144 UTF-16 units (a surrogate pair that would straddle the limit moves on whole); one whose JSON is
    then over 1 MiB shrinks to length * (1 MiB - 8) // its size characters, again until it fits."""
    end = len(raw) - 1
    out: list[tuple[int, int, int]] = []
    start = 1
    ratio = 1.0  # bytes per unit of the last fragment: where the next cut is first looked for
    while start < end:
        cut, units = _reach(raw, start, end, MAX_STRING_UNITS, True, ratio)
        if units:
            ratio = (cut - start) / units
        size = cut - start + 2
        if size > MAX_FRAGMENT_JSON:
            # Its code points: its units less one for each 4-byte character (one pass that keeps only their leads).
            chars = units - len(bytes(raw[start:cut]).translate(None, _BELOW_FOUR))
            while size > MAX_FRAGMENT_JSON:
                keep = max(1, min(chars - 1, chars * (MAX_FRAGMENT_JSON - 8) // size))
                cut, chars = _reach(raw, start, cut, keep, False, (cut - start) / chars)
                size = cut - start + 2
        out.append((start, cut, size))
        start = cut
    return out or [(1, 1, 2)]


def _reach(raw: Raw, start: int, end: int, target: int, by_units: bool, ratio: float) -> tuple[int, int]:
    """The furthest character boundary `cut` in [start, end] whose piece raw[start:cut] holds at most `target`
    UTF-16 units (`by_units`) or code points, with that count.

    An interpolation search over boundaries: `lo` (known within the target) and `hi` (known past it, or
    past `end`); each probe counts only the bytes from `lo` to it, and a probe that does not halve the
    bracket is followed by one at its middle, so the bytes counted stay a small multiple of the piece's."""
    lo, have = start, 0
    hi, hi_weight = end + 1, -1  # hi_weight -1: nothing past the target seen yet (hi is beyond `end`)
    halve = False
    while True:
        want = target - have
        if want <= 0 or lo >= end:
            return lo, have
        if hi - lo <= _WALK:
            return _walk(raw, lo, min(hi, end), have, target, by_units)
        if hi_weight < 0:
            # Each byte is at most one unit and one code point, so `want` bytes never overshoot; ahead of
            # that, aim a little short of where the density seen so far puts the target.
            probe = lo + max(want, int(want * ratio * 0.98) - 8)
        elif halve:
            probe = (lo + hi) // 2
        else:
            probe = lo + max(1, (hi - lo) * want // (hi_weight - have))
        probe = _boundary(raw, lo, min(probe, hi - 1, end), end)
        if probe <= lo:
            return _walk(raw, lo, min(hi, end), have, target, by_units)
        weight = have + _weight(bytes(raw[lo:probe]), by_units)
        before = hi - lo
        if weight <= target:
            lo, have = probe, weight
            if have:
                ratio = (lo - start) / have
        else:
            hi, hi_weight = probe, weight
        halve = hi_weight >= 0 and (hi - lo) * 2 > before and not halve


def _weights(four: int) -> bytes:
    """A `bytes.translate` table giving each byte its share of a count: a UTF-8 lead byte or an ASCII byte
    one, a 4-byte lead `four` (two UTF-16 units, one code point), a continuation byte none, and a backslash
    none (the escape's next byte counts it: `\\n` is one; `_weight` puts `\\\\` and `\\u00xx` right)."""
    table = bytearray(256)
    for b in range(256):
        table[b] = 0 if 0x80 <= b < 0xC0 else four if b >= 0xF0 else 1
    table[_BACKSLASH] = 0
    return bytes(table)


#: Deleted to keep only the 4-byte leads (0xF0-0xF4) of a piece.
_BELOW_FOUR = bytes(range(0xF0))
_UNIT_WEIGHTS = _weights(2)
_CHAR_WEIGHTS = _weights(1)
#: Blocks short enough that adler32's sum of their weights (modulo 65,521) is the sum itself: a block's
#: weights sum to at most its length, plus one for a 4-byte lead whose continuation bytes are past its end.
_BLOCK = 65_000


def _weight(piece: bytes, by_units: bool) -> int:
    """The UTF-16 units (`by_units`) or code points of `piece`, the bytes between two character boundaries of a
    canonical token: the sum of its bytes' weights (`bytes.translate`, then zlib.adler32 summing each block
    in C), each escaped backslash one more, each `\\u00xx` four fewer."""
    if piece.isascii() and b"\\" not in piece:
        return len(piece)
    weights = memoryview(piece.translate(_UNIT_WEIGHTS if by_units else _CHAR_WEIGHTS))
    total = 0
    for at in range(0, len(weights), _BLOCK):
        total += ((adler32(weights[at:at + _BLOCK]) & 0xFFFF) - 1) % 65_521
    if b"\\" in piece and (_UNEVEN.search(piece) is not None if _sparse(piece) else True):
        # Each escaped backslash counts one more, each \u00xx escape four fewer.
        pairs = piece.count(b"\\\\")  # greedy from a boundary: a run's backslashes paired as a decoder does
        if b"\\u" in piece:
            plain = piece.replace(b"\\\\", b"//") if pairs else piece  # each backslash left starts an escape
            total -= 4 * plain.count(b"\\u")
        total += pairs
    return total


def _walk(raw: Raw, at: int, stop: int, have: int, target: int, by_units: bool) -> tuple[int, int]:
    """From the boundary `at`, whole characters while the count stays within `target` and before `stop`
    (a few dozen bytes at most: the search narrowed it)."""
    while at < stop:
        b = raw[at]
        if b == _BACKSLASH:
            length, width = (6 if raw[at + 1] == _U else 2), 1
        elif b < 0x80:
            length, width = 1, 1
        elif b < 0xE0:
            length, width = 2, 1
        elif b < 0xF0:
            length, width = 3, 1
        else:
            length, width = 4, 2 if by_units else 1
        if have + width > target:
            break
        at += length
        have += width
    return at, have


def _next_char(raw: Raw, at: int) -> int:
    """The boundary after the character at the boundary `at`."""
    b = raw[at]
    if b == _BACKSLASH:
        return at + (6 if raw[at + 1] == _U else 2)
    return at + (1 if b < 0x80 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4)


def _boundary(raw: Raw, lo: int, at: int, end: int) -> int:
    """The last character boundary at or before `at`, not before the boundary `lo` (`end`, the closing
    quote, is one): back out of a UTF-8 sequence, or to the backslash of an escape `at` is inside."""
    if at >= end:
        return end
    b = raw[at]
    if b >= 0x80:
        while 0x80 <= raw[at] < 0xC0:  # a continuation byte: back to its lead (escapes are ASCII)
            at -= 1
        return at
    near = max(lo, at - 5)  # an escape is at most 6 bytes: one holding `at` starts at most 5 before it
    slash = bytes(raw[near:at]).rfind(b"\\")
    if slash < 0:
        return at
    slash += near
    if _run(raw, lo, slash) % 2 == 1:  # the odd one of its run: it starts an escape
        if slash + (6 if raw[slash + 1] == _U else 2) > at:
            return slash
    return at


def _run(raw: Raw, lo: int, at: int) -> int:
    """How many backslashes end at `at` (inclusive), not counting before `lo`: looked at in growing steps, so
    the cost is the run's length."""
    count, top, step = 0, at + 1, 16
    while True:
        bottom = max(lo, top - step)
        piece = bytes(raw[bottom:top])
        kept = len(piece.rstrip(b"\\"))
        count += len(piece) - kept
        if kept or bottom == lo:
            return count
        top, step = bottom, step * 4


# --- an item's parts from its values' JSON -------------------------------------------------------------------


class ValuesJson(Protocol):
    """An item as the JSON of each of its values (pi-format's `ItemJson`, from `Parsed.render_json`): for
    `d = item.to_json()`, `id`, `kind`, `line` are d's (its entry is its id, its notice null), `timestamp` the
    JSON of d["timestamp"], `attrs` (name, JSON) of each of d["attrs"] in order, `blocks` (key, JSON) of each
    key of each of d["blocks"] in order, a toolCall's `arguments` the JSON of the arguments value. Each
    string's JSON canonical (what msgspec writes); a long one may be a view of the file's bytes (a
    `msgspec.Raw`, as pi-format gives a block's long text, or a memoryview)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def line(self) -> int: ...
    @property
    def timestamp(self) -> Token: ...
    @property
    def attrs(self) -> Sequence[tuple[str, Token]]: ...
    @property
    def blocks(self) -> Sequence[Sequence[tuple[str, Token]]]: ...


#: A value's JSON in `ValuesJson`: bytes, or a view of the file's bytes.
Token = bytes | memoryview | msgspec.Raw


#: The fields whose strings stay inline up to 1 MiB of JSON (a block's body); any other up to 64 KiB.
_BODY_FIELDS = frozenset({"text", "arguments"})
_QUOTE = 0x22


class _Piece:
    """One entry of a part's blocks: a block, or a fragment of one of its strings (`_parts.encoded_parts`'
    pieces), as the JSON chunks it is written from (bytes, and a fragment's memoryview of its token) and its
    length."""

    __slots__ = ("chunks", "size")

    def __init__(self, chunks: list[Token], size: int) -> None:
        self.chunks, self.size = chunks, size


def _fragment_pieces(tok: Token, block: int | None, field: str, out: list[_Piece]) -> None:
    """The fragment pieces of the string token `tok` (its cuts from `raw_fragments`), appended to `out`: each
    `{"kind":"fragment","block","field","fragment","more","value"}`, the value a slice of the token."""
    view = memoryview(tok)
    cuts = raw_fragments(view)
    last = len(cuts) - 1
    head = b'{"kind":"fragment","block":' + (b"null" if block is None else str(block).encode()) + b',"field":' + \
        msgspec.json.encode(field) + b',"fragment":'
    for j, (start, end, size) in enumerate(cuts):
        lead = head + str(j).encode() + (b',"more":true,"value":"' if j < last else b',"more":false,"value":"')
        out.append(_Piece([lead, view[start:end], b'"}'], len(lead) + size + 1))


def _long(value: Token, max_json: int) -> bool:
    """`not _parts.fits(text, max_json)` for a string token (a non-string is never cut): its JSON over
    `max_json`, or its text over 262,144 UTF-16 units (counted on the bytes only when the token could hold
    that many)."""
    n = len(value)
    tok = value if type(value) is bytes else memoryview(value)
    if n < 2 or tok[0] != _QUOTE:
        return False
    if n > max_json:
        return True
    if n - 2 <= MAX_STRING_UNITS:
        return False
    return _reach(tok, 1, n - 1, MAX_STRING_UNITS, True, 1.0)[0] < n - 1


def _field(name: str) -> bytes:
    return b"," + msgspec.json.encode(name) + b":"


def raw_item_parts(item: ValuesJson) -> RawItemParts:
    """The parts `_parts.encoded_parts` makes of the item whose values' JSON is `item`, byte for byte: each
    part's JSON bytes (`parts[k]`) or the chunks they are joined from (`parts.chunks(k)`: bytes, and views
    of the file's bytes for a long string's fragments and long texts, so no copy of a text is made). A
    string too long to stay inline is cut into fragments by `raw_fragments`, never decoded; everything else
    is spliced as it is."""
    pieces: list[_Piece] = []
    continued: list[str] = []
    ident = msgspec.json.encode(item.id)
    timestamp = item.timestamp
    if _long(timestamp, INLINE_FIELD_JSON):
        _fragment_pieces(timestamp, None, "timestamp", pieces)
        continued.append("timestamp")
        timestamp = b"null"
    head: list[Token] = [b',"timestamp":', timestamp, b',"entry":', ident, b',"attrs":{']
    sep = b""
    for name, value in item.attrs:
        if _long(value, INLINE_FIELD_JSON):
            _fragment_pieces(value, None, "attrs." + name, pieces)
            continued.append("attrs." + name)
            value = b"null"
        head += [sep, msgspec.json.encode(name), b":", value]
        sep = b","
    head.append(b'},"notice":null')
    if continued:
        head += [b',"continued":', msgspec.json.encode(continued)]
    for i, pairs in enumerate(item.blocks):
        chunks: list[Token] = [b'{"kind":', pairs[0][1]]
        mine: list[_Piece] = []
        cont: list[str] = []
        for name, value in pairs[1:]:
            if name == "arguments":  # the arguments travel as JSON text (compact JSON: only \ and " to escape)
                value = b'"' + bytes(value).replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
            if _long(value, MAX_FRAGMENT_JSON if name in _BODY_FIELDS else INLINE_FIELD_JSON):
                _fragment_pieces(value, i, name, mine)
                cont.append(name)
                value = b"null"
            chunks += [_field(name), value]
        chunks.append(b',"block":' + str(i).encode())
        if cont:
            chunks += [b',"continued":', msgspec.json.encode(cont)]
        chunks.append(b"}")
        pieces.append(_Piece(chunks, sum(len(c) for c in chunks)))
        pieces += mine
    return RawItemParts(_plan(item, ident, head, pieces))


def _plan(item: ValuesJson, ident: bytes, head: list[Token], pieces: list[_Piece]) -> list[tuple[list[Token], list[_Piece]]]:
    """`_parts._pack` on pieces: parts of at most 64 blocks and 4 MiB of JSON, each (its opening chunks up to
    `"blocks":[`, its pieces); sized as `_pack` sizes them (with `"last":false`, the longer spelling)."""
    kind = msgspec.json.encode(item.kind)
    line = str(item.line).encode()
    out: list[tuple[list[Token], list[_Piece]]] = []

    def opening(k: int) -> list[Token]:
        chunks: list[Token] = [b'{"item":', ident, b',"index":', str(k).encode(), b',"last":false,"kind":', kind,
                             b',"line":', line]
        if k == 0:
            chunks += head
        chunks.append(b',"blocks":[')
        return chunks

    current = opening(0)
    mine: list[_Piece] = []
    size = sum(len(c) for c in current) + 2  # "]}"
    for piece in pieces:
        grow = piece.size + (1 if mine else 0)
        if mine and (len(mine) >= MAX_BLOCKS_PER_PART or size + grow > MAX_PART_BYTES):
            out.append((current, mine))
            current, mine = opening(len(out)), []
            size = sum(len(c) for c in current) + 2
            grow = piece.size
        mine.append(piece)
        size += grow
    out.append((current, mine))
    return out


class RawItemParts(Sequence[bytes]):
    """An item's parts (`raw_item_parts`): part k's JSON bytes, or the chunks they are joined from, made from
    its plan when asked for."""

    __slots__ = ("plan",)

    def __init__(self, plan: list[tuple[list[Token], list[_Piece]]]) -> None:
        self.plan = plan

    def __len__(self) -> int:
        return len(self.plan)

    @overload
    def __getitem__(self, k: int) -> bytes: ...
    @overload
    def __getitem__(self, k: slice) -> list[bytes]: ...
    def __getitem__(self, k: int | slice) -> bytes | list[bytes]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self.plan)))]
        return b"".join(self.chunks(k))

    def chunks(self, k: int) -> list[Token]:
        """Part k's JSON as the chunks it is joined from (a long string's fragments views of its token)."""
        if k < 0:
            k += len(self.plan)
        opening, pieces = self.plan[k]
        chunks = list(opening)
        if k == len(self.plan) - 1:
            chunks[4] = b',"last":true,"kind":'
        sep = False
        for piece in pieces:
            if sep:
                chunks.append(b",")
            chunks += piece.chunks
            sep = True
        chunks.append(b"]}")
        return chunks
