"""Items to CHAT-01 parts, and parts to pages, under the CHAT-01 limits (seed README, "Pages").

- at most 100 parts and 8 MiB of serialized UTF-8 per page;
- at most 64 blocks per part;
- at most 262,144 characters per string (UTF-16 code units, as the JavaScript consumer counts them).

"Strings split into fragments. A fragment is also cut at 1 MiB of JSON, and blocks group into parts of at
most 4 MiB, so one part always fits a page. Content is never clipped, and a surrogate pair is never cut."

The wire shape (schemas/chat-01.schema.json):

- A part belongs to one item: `item` (its id), `index` (0 for the item's first part), `last` (True on its
  final part), `kind`, `line`, `blocks`. The first part also carries `timestamp`, `entry`, `attrs`,
  `notice`.
- A block is one of the item's content blocks, with `block` = its index in the item. A string field that
  does not fit inline is set to null, named in the block's `continued` list, and carried by the
  `fragment` blocks right after it: {"kind": "fragment", "block", "field", "fragment", "more", "value"}.
  Item-level strings (`timestamp`, `attrs.<name>`) continue the same way with `block` null.
- Concatenating the `value`s of one (item, block, field) in `fragment` order gives the string back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

if TYPE_CHECKING:
    import mosaic.claude_format.model
    import mosaic.pi_format.model

    #: An item of either format: the same fields and the same to_json() shapes (claude-format's README).
    Item = mosaic.pi_format.model.Item | mosaic.claude_format.model.Item

from ._jsonout import dump_bytes, dumps, json_size, utf16_units, value_text

# What the public modules show of this module; the rest is the package's own.
__all__ = [
    "MAX_BLOCKS_PER_PART",
    "MAX_FRAGMENT_JSON",
    "MAX_PAGE_BYTES",
    "MAX_PART_BYTES",
    "MAX_PARTS_PER_PAGE",
    "MAX_STRING_UNITS",
]

MAX_PARTS_PER_PAGE = 100
MAX_PAGE_BYTES = 8 * 1024 * 1024
MAX_BLOCKS_PER_PART = 64
MAX_STRING_UNITS = 262_144
MAX_FRAGMENT_JSON = 1024 * 1024
MAX_PART_BYTES = 4 * 1024 * 1024
#: A string field other than a block's body (`text`, `arguments`) stays inline only up to this much JSON,
#: so a part's fixed fields can never crowd out its blocks: a part with any one fragment stays < 4 MiB.
INLINE_FIELD_JSON = 64 * 1024

_BODY_FIELDS = frozenset({"text", "arguments"})


def fits(text: str, max_json: int = MAX_FRAGMENT_JSON) -> bool:
    """Whether `text` may stay one string: at most 262,144 UTF-16 units and `max_json` bytes of JSON."""
    if len(text) * 6 + 2 <= max_json and len(text) * 2 <= MAX_STRING_UNITS:
        return True  # fast path: no character can take more than 6 bytes of JSON or 2 units
    if len(text) > MAX_STRING_UNITS or len(text) + 2 > max_json:
        return False  # every character takes at least 1 unit and 1 byte of JSON: no encoding of a long text
    return utf16_units(text) <= MAX_STRING_UNITS and _json_len(text) <= max_json


def _json_len(text: str) -> int:
    """`json_size(text)` for a string: msgspec writes a string's JSON with the same escapes as `dump_bytes`
    (several times faster than the json module's encoder on a long one); a lone surrogate, which msgspec
    refuses to encode, is measured by `json_size`."""
    global _MSGSPEC_ENCODE
    if _MSGSPEC_ENCODE is None:
        import msgspec  # loaded on first use (importing this package stays cheap)

        _MSGSPEC_ENCODE = msgspec.json.encode
    try:
        return len(_MSGSPEC_ENCODE(text))
    except UnicodeEncodeError:
        return json_size(text)


def fragments(text: str) -> list[str]:
    """`text` cut into fragments of at most 262,144 UTF-16 units and 1 MiB of JSON each.

    Cuts fall between code points, so an astral character (a surrogate pair in UTF-16) is never cut.
    Nothing is dropped: "".join(fragments(t)) == t. An empty string is one empty fragment.
    """
    return [text[start:end] for start, end, _ in _sized_fragments(text)]


def _sized_fragments(text: str) -> list[tuple[int, int, int]]:
    """`fragments(text)` as (start, end, the length of its JSON) of each fragment in `text` (the JSON
    measured once; the fragment's text is made when its part is encoded)."""
    out: list[tuple[int, int, int]] = []
    start, n = 0, len(text)
    while start < n:
        end = min(n, start + MAX_STRING_UNITS)
        units = utf16_units(text[start:end])
        if units > MAX_STRING_UNITS:
            end, units = _cut_at_limit(text, end, units)
        size = _json_len(text[start:end])
        while size > MAX_FRAGMENT_JSON:
            length = end - start
            end = start + max(1, min(length - 1, length * (MAX_FRAGMENT_JSON - 8) // size))
            size = _json_len(text[start:end])
        out.append((start, end, size))
        start = end
    return out or [(0, 0, 2)]


def _cut_at_limit(text: str, end: int, units: int) -> tuple[int, int]:
    """The largest cut at or before `end` whose fragment holds at most 262,144 UTF-16 units, given the
    `units` (over the limit) of the fragment up to `end`, and the units up to it: exactly the limit, or one
    short when the next character is a surrogate pair that would straddle it (it moves on whole)."""
    # Dropping e code points drops at least e units, so this lands within the limit...
    excess = units - MAX_STRING_UNITS
    end -= excess
    units -= utf16_units(text[end:end + excess])
    # ...then grow back: k more code points add at most 2k units.
    while units < MAX_STRING_UNITS:
        k = (MAX_STRING_UNITS - units) // 2
        if k == 0:
            if utf16_units(text[end]) == 1:  # one unit of room: only a one-unit character fits
                end += 1
                units += 1
            break
        units += utf16_units(text[end:end + k])
        end += k
    return end, units


def _split_field(
    holder: dict[str, Any], key: str, wire_field: str, block: int | None, max_json: int, pieces: list[dict[str, Any]],
    sizes: dict[int, int],
) -> bool:
    """Move `holder[key]` into fragment pieces (appended to `pieces`) when it does not fit inline; each
    piece's JSON size goes in `sizes` by its id (the fragment's JSON was measured once, in
    `_sized_fragments`: the piece is not encoded again to size it)."""
    value = holder.get(key)
    if not isinstance(value, str) or fits(value, max_json):
        return False
    holder[key] = None
    frags = _sized_fragments(value)
    last = len(frags) - 1
    for j, (start, end, size) in enumerate(frags):
        piece: dict[str, Any] = {"kind": "fragment", "block": block, "field": wire_field, "fragment": j, "more": j < last,
                                 "value": ""}
        sizes[id(piece)] = json_size(piece) - 2 + size  # the empty value's "" replaced by the fragment's JSON
        piece["value"] = _Cut(value, start, end)
        pieces.append(piece)
    return True


class _Cut:
    """A fragment's place in its string, made into text only when its part is encoded (`_text_of`): the
    fragments of a long string never all exist as text at once beside it."""

    __slots__ = ("text", "start", "end")

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.start, self.end = text, start, end


def _text_of(part: dict[str, Any]) -> dict[str, Any]:
    """`part` with each fragment's `_Cut` made into its text (in place)."""
    for b in part["blocks"]:
        cut = b.get("value")
        if type(cut) is _Cut:
            b["value"] = cut.text[cut.start:cut.end]
    return part


class Spliced:
    """A part's JSON as pieces (`_rawparts.json_part`): bytes of its own and zero-copy views of string tokens in
    the session file's bytes (msgspec `Raw`), so a kept part holds its keys and punctuation, not another copy
    of its texts. `len` is its JSON's length; `bytes()` joins it; `held` is what keeping it costs (its own
    bytes and an object per view), what the part cache counts."""

    __slots__ = ("pieces", "size", "held")

    def __init__(self, pieces: tuple[Any, ...], size: int, held: int) -> None:
        self.pieces, self.size, self.held = pieces, size, held

    def __len__(self) -> int:
        return self.size

    def __bytes__(self) -> bytes:
        return b"".join(self.pieces)


#: A part's JSON as the part cache keeps it: its bytes, or its pieces (`Spliced`).
Encoded = bytes | Spliced


def held(raw: Encoded) -> int:
    """What keeping a part's JSON costs: its length, or a `Spliced` part's own bytes and views."""
    return raw.held if type(raw) is Spliced else len(raw)


class PageParts(list[dict[str, Any]]):
    """The parts of one page: a list of part dicts, carrying each part's JSON bytes, made once when the part
    was made and used both to size the page and to serialize it (`_jsonout.dump_bytes` joins them instead
    of encoding the parts again). The bytes are used only while the list still holds exactly the
    dicts they were made from (a caller that edits a page's parts should edit a copy)."""

    __slots__ = ("encoded", "_made_from")

    def __init__(self, parts: list[dict[str, Any]], encoded: list[Encoded]) -> None:
        super().__init__(parts)
        self.encoded = encoded
        self._made_from = tuple(parts)

    def json_pieces(self, out: list[Any]) -> bool:
        """Append the list's JSON to `out` as pieces (brackets, commas and each part's bytes, not joined: the
        caller joins the whole value once), or append nothing and return False when the list no longer holds
        the dicts its bytes were made from."""
        if len(self) != len(self._made_from) or any(a is not b for a, b in zip(self, self._made_from, strict=True)):
            return False
        _array_pieces(self.encoded, out)
        return True


class RawParts(list[dict[str, Any]]):
    """The parts of one page as their JSON bytes only (`Reader.open`, `Reader.next` with `as_json=True`): no part dict
    is made or read back. An empty list carrying `encoded`, made only to be serialized by
    `_jsonout.dump_bytes` at once (its `json_pieces` splices the bytes where `PageParts` would), never
    handed to a caller."""

    __slots__ = ("encoded",)

    def __init__(self, encoded: list[Encoded]) -> None:
        super().__init__()
        self.encoded = encoded

    def json_pieces(self, out: list[Any]) -> bool:
        """Append the parts' JSON to `out` as pieces, as `PageParts.json_pieces` does."""
        _array_pieces(self.encoded, out)
        return True


def _array_pieces(encoded: Sequence[Encoded], out: list[Any]) -> None:
    """A JSON array of the values `encoded` holds, appended to `out` as pieces (brackets, commas, the values; a
    `Spliced` part's pieces, views included: `bytes.join` takes any buffer)."""
    sep = b"["
    for raw in encoded:
        out.append(sep)
        if type(raw) is bytes:
            out.append(raw)
        else:
            out.extend(raw.pieces)  # type: ignore[union-attr]
        sep = b","
    out.append(b"[]" if sep == b"[" else b"]")


def item_key(item: Item) -> bytes:
    """What the follow digest takes of one item: "id@line", and for a run of unreadable lines (one
    malformed-line notice) "id@line-through", so a run that grew at the end of the file changes it."""
    notice = item.notice
    if notice is not None and notice.through is not None and notice.through != item.line:
        return f"{item.id}@{item.line}-{notice.through}\n".encode()
    return f"{item.id}@{item.line}\n".encode()


def part_from_json(raw: Encoded) -> dict[str, Any]:
    """The part whose JSON bytes (`encoded_parts`) are `raw`, equal to the one they were made from: compact
    JSON of strings, integers, booleans, null, objects and arrays reads back to equal values in the same key
    order. msgspec reads it (several times faster than json); a part holding a lone surrogate (written as
    its escape, which msgspec refuses) is read by json, which carries it."""
    if type(raw) is not bytes:
        raw = bytes(raw)
    decode = _MSGSPEC_DECODE
    if decode is None:
        decode = _msgspec_decode()
    try:
        part: dict[str, Any] = decode(raw)
    except ValueError:  # msgspec.DecodeError is a ValueError
        part = json.loads(raw)
    return part


_MSGSPEC_DECODE: Callable[[bytes], Any] | None = None


def _msgspec_decode() -> Callable[[bytes], Any]:
    global _MSGSPEC_DECODE
    import msgspec  # loaded on first use (importing this package stays cheap)

    _MSGSPEC_DECODE = msgspec.json.Decoder().decode
    return _MSGSPEC_DECODE


def item_parts(item: Item) -> list[dict[str, Any]]:
    """Every part of one item, in order. Deterministic, so a cursor can resume at any part index."""
    return [part for part, _ in encoded_parts(item)]


def sized_parts(item: Item) -> list[tuple[dict[str, Any], int]]:
    """`item_parts(item)` with each part's exact serialized size (`json_size(part)`)."""
    return [(part, len(raw)) for part, raw in encoded_parts(item)]


def encoded_parts(item: Item) -> Sequence[tuple[dict[str, Any], bytes]]:
    """`item_parts(item)` with each part's JSON bytes (`dump_bytes(part)`), each part serialized once."""
    fast = _single_part(item)
    if fast is not None:
        return [fast]
    d = item.to_json()
    pieces: list[dict[str, Any]] = []
    head: dict[str, Any] = {
        "timestamp": d["timestamp"],
        "entry": d["entry"],
        "attrs": dict(d["attrs"]),  # type: ignore[arg-type]
        "notice": d["notice"],
    }
    continued: list[str] = []
    sizes: dict[int, int] = {}
    if _split_field(head, "timestamp", "timestamp", None, INLINE_FIELD_JSON, pieces, sizes):
        continued.append("timestamp")
    attrs: dict[str, Any] = head["attrs"]
    for key in list(attrs):
        if _split_field(attrs, key, "attrs." + key, None, INLINE_FIELD_JSON, pieces, sizes):
            continued.append("attrs." + key)
    if continued:
        head["continued"] = continued
    blocks: list[Any] = d["blocks"]  # type: ignore[assignment]
    for i, raw in enumerate(blocks):
        b: dict[str, Any] = dict(raw)
        if b.get("kind") == "toolCall":
            # The arguments travel as JSON text, so a huge argument is fragmented like any other string.
            b["arguments"] = dumps(b.get("arguments"))
        b["block"] = i
        mine: list[dict[str, Any]] = []
        cont = [
            key
            for key in list(b)
            if key not in ("kind", "block")
            and _split_field(b, key, key, i, MAX_FRAGMENT_JSON if key in _BODY_FIELDS else INLINE_FIELD_JSON, mine,
                             sizes)
        ]
        if cont:
            b["continued"] = cont
        pieces.append(b)
        pieces.extend(mine)
        del mine  # _pack lets go of each piece once its part is encoded: nothing else may hold one
    del d, blocks
    return _pack(item.id, item.kind, item.line, head, pieces, sizes)


_SHORT = min(INLINE_FIELD_JSON, MAX_STRING_UNITS) // 6 - 2  # any string this short fits inline anywhere


def _short(value: Any) -> bool:
    """True when every string in `value` is at most _SHORT characters (so no field needs fragments)."""
    if isinstance(value, str):
        return len(value) <= _SHORT
    if isinstance(value, dict):
        return all(_short(v) for v in value.values())
    if isinstance(value, list):
        return all(_short(v) for v in value)
    return True


def _single_part(item: Item) -> tuple[dict[str, Any], bytes] | None:
    """The common case in one step, straight from the item: few blocks, every string short. Same output as
    the general path (`encoded_parts`), or None when the item needs it."""
    blocks = item.blocks
    timestamp = item.timestamp
    if len(blocks) > MAX_BLOCKS_PER_PART or (timestamp is not None and len(timestamp) > _SHORT):
        return None
    attrs = dict(item.attrs)
    out_blocks: list[dict[str, Any]] = []
    for i, block in enumerate(blocks):
        b = block.to_json()
        if block.kind == "toolCall":
            b["arguments"] = value_text(b.get("arguments"))
        # A block's values are strings or null (its arguments are JSON text by now): only their lengths count.
        for v in b.values():
            if type(v) is str and len(v) > _SHORT:
                return None
        b["block"] = i
        out_blocks.append(b)
    notice = item.notice
    part: dict[str, Any] = {"item": item.id, "index": 0, "last": True, "kind": item.kind, "line": item.line,
                            "timestamp": timestamp, "entry": item.entry, "attrs": attrs,
                            "notice": None if notice is None else notice.to_json(), "blocks": out_blocks}
    raw = _encode(part)
    # A part of at most 64 KiB of JSON holds no string that needs fragments (each string's JSON is shorter,
    # so at most 65,536 characters: 131,072 UTF-16 units), so the attrs' strings are looked at only in a
    # longer part (most parts are short: the walk of every attribute's value cost more than the encoding).
    if len(raw) > INLINE_FIELD_JSON and (len(raw) > MAX_PART_BYTES or not _short(attrs)):
        return None
    return part, raw


_MSGSPEC_ENCODE: Callable[[Any], bytes] | None = None


def _encode(part: dict[str, Any]) -> bytes:
    """`dump_bytes(part)` for a part: msgspec writes it (the same bytes for the strings, integers, booleans,
    null, lists and objects a part holds; a part holds no float: toolCall arguments travel as JSON text),
    and `dump_bytes` writes a part with a lone surrogate, which msgspec refuses to encode."""
    global _MSGSPEC_ENCODE
    if _MSGSPEC_ENCODE is None:
        import msgspec  # loaded on first use (importing this package stays cheap)

        _MSGSPEC_ENCODE = msgspec.json.encode
    try:
        return _MSGSPEC_ENCODE(part)
    except UnicodeEncodeError:
        return dump_bytes(part)


def _pack(
    item_id: str, kind: str, line: int, head: dict[str, Any], pieces: list[dict[str, Any]], sizes: dict[int, int]
) -> Sequence[tuple[dict[str, Any], bytes]]:
    """Group pieces into parts of at most 64 blocks and 4 MiB of JSON; each part with its JSON bytes.

    Each part is serialized once, as soon as it is complete (the sizes come from its pieces: a fragment's
    from `sizes`, measured when it was cut). An item of several parts is returned as `_EncodedParts`:
    its parts' bytes, each part's dict read back from them when a page takes it, so a long string is held
    as its JSON bytes, not as the fragments' text as well (issue 34: one 20 MB line)."""
    raws: list[bytes] = []

    def new_part() -> dict[str, Any]:
        part: dict[str, Any] = {"item": item_id, "index": len(raws), "last": False, "kind": kind, "line": line}
        if not raws:
            part.update(head)
        part["blocks"] = []
        return part

    current = new_part()
    size = json_size(current)  # "last": false is the longer of the two spellings
    for n, piece in enumerate(pieces):
        psize = sizes.get(id(piece))
        if psize is None:
            psize = json_size(piece)
        grow = psize + (1 if current["blocks"] else 0)
        if current["blocks"] and (len(current["blocks"]) >= MAX_BLOCKS_PER_PART or size + grow > MAX_PART_BYTES):
            raws.append(_encode(_text_of(current)))
            current = new_part()
            size = json_size(current)
            grow = psize
        current["blocks"].append(piece)
        pieces[n] = _DONE  # the part holds it now; dropped with the part once encoded
        size += grow
    current["last"] = True
    raws.append(_encode(_text_of(current)))
    if len(raws) == 1:
        return [(current, raws[0])]
    return cast("Sequence[tuple[dict[str, Any], bytes]]", _EncodedParts(list[Encoded](raws)))  # bytes only


_DONE: dict[str, Any] = {}


def encoded_from(raws: Sequence[Encoded]) -> Sequence[tuple[dict[str, Any], Encoded]]:
    """Parts kept as their JSON bytes, as `encoded_parts` gives them: each part read back when asked for."""
    return _EncodedParts(list(raws))


def raws_of(parts: Sequence[tuple[dict[str, Any], bytes]]) -> tuple[bytes, ...]:
    """The JSON bytes of `parts` (from `encoded_parts`), without reading any part back."""
    if isinstance(parts, _EncodedParts):
        return tuple(cast("list[bytes]", parts.raws))  # made by `_pack`: bytes only
    return tuple(raw for _, raw in parts)


class _EncodedParts(Sequence[tuple[dict[str, Any], Encoded]]):
    """The parts of one item as their JSON bytes; item k is (the part read back from its bytes, the
    bytes), made when it is asked for (a page reads only the parts it takes)."""

    __slots__ = ("raws",)

    def __init__(self, raws: list[Encoded]) -> None:
        self.raws = raws

    def __len__(self) -> int:
        return len(self.raws)

    @overload
    def __getitem__(self, k: int) -> tuple[dict[str, Any], Encoded]: ...
    @overload
    def __getitem__(self, k: slice) -> list[tuple[dict[str, Any], Encoded]]: ...
    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return [(part_from_json(raw), raw) for raw in self.raws[k]]
        raw = self.raws[k]
        return (part_from_json(raw), raw)


def paginate(
    count: int,
    start: tuple[int, int],
    envelope_bytes: int,
    parts_of: Callable[[int], Sequence[tuple[dict[str, Any], Encoded]]],
) -> tuple[PageParts, tuple[int, int] | None]:
    """The parts of one page from position `start` = (item index, part index) among `count` items, and
    where the next page
    starts (None when the snapshot's branch is exhausted).

    A page holds at most 100 parts and at most 8 MiB of serialized UTF-8 including `envelope_bytes`, the
    size of the page with no parts. One part (at most 4 MiB) always fits an empty page.
    """
    chosen, nxt = _cut(count, start, envelope_bytes, parts_of, lambda pair: len(pair[1]))
    return PageParts([part for part, _ in chosen], [raw for _, raw in chosen]), nxt


def paginate_raw(
    count: int, start: tuple[int, int], envelope_bytes: int, raws_of: Callable[[int], Sequence[Encoded]]
) -> tuple[RawParts, tuple[int, int] | None]:
    """`paginate` on the parts' bytes alone: the same parts (the same cut), as their JSON bytes, and where the
    next page starts. `raws_of(i)` gives item i's parts' bytes."""
    chosen, nxt = _cut(count, start, envelope_bytes, raws_of, len)
    return RawParts(chosen), nxt


_P = TypeVar("_P")


def _cut(count: int, start: tuple[int, int], envelope_bytes: int, of: Callable[[int], Sequence[_P]],
         size: Callable[[_P], int]) -> tuple[list[_P], tuple[int, int] | None]:
    """The one page cut both paths make: the parts from `start` while the page holds fewer than 100 and its
    JSON (`envelope_bytes`, each part's `size` and the commas) stays within 8 MiB, at least one part; and
    where the next page starts."""
    out: list[_P] = []
    total = envelope_bytes
    i, k = start
    while i < count:
        parts = of(i)
        while k < len(parts):
            if len(out) >= MAX_PARTS_PER_PAGE:
                return out, (i, k)
            part = parts[k]
            psize = size(part) + (1 if out else 0)
            if out and total + psize > MAX_PAGE_BYTES:
                return out, (i, k)
            out.append(part)
            total += psize
            k += 1
        i, k = i + 1, 0
    return out, None
