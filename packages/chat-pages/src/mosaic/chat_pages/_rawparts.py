"""An item's part assembled from the JSON pieces pi-format cuts from the entry's line (issue 34).

pi-format's `Parsed.render_json(ref)` gives an entry's item as the JSON of each of its values, taken from the
file's bytes without decoding its strings (`mosaic.pi_format.model.ItemJson`), or None where it cannot prove
those bytes. `json_part` splices them into the one part `_parts.encoded_parts` would make of the rendered
item, byte for byte: the same keys in the same order, a toolCall's arguments as JSON text (its JSON
written as a JSON string: only `\\` and `"` need escaping in compact JSON), `"block"` after each block's
fields. It makes a part only where `encoded_parts` makes exactly one part with no fragment: at most 64
blocks, every string inline (`_parts.fits`: its JSON within its field's limit and at most 262,144 UTF-16
units, told from its token's length, or counted when it is longer than that) and the part under 4 MiB. Anything else returns None and the caller
renders the item; an item with a long string goes through `_long_string`, the one place where the fragments
of a raw string token are cut (`_rawtext.raw_item_parts`: the parts `encoded_parts` makes, the fragments cut
from the token's bytes by `raw_fragments`, kept as views of the file's bytes).

`tests/test_pages_as_bytes.py` holds `json_part` to `encoded_parts` for every entry of every fixture, of
generated sessions and of hostile shapes, and every page served from these parts to the dict pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ._jsonout import utf16_units
from ._parts import (
    INLINE_FIELD_JSON,
    MAX_BLOCKS_PER_PART,
    MAX_FRAGMENT_JSON,
    MAX_PART_BYTES,
    MAX_STRING_UNITS,
    Encoded,
    Spliced,
)
from ._rawtext import raw_item_parts

if TYPE_CHECKING:
    from mosaic.pi_format.model import ItemJson

__all__: list[str] = []

_QUOTE = 0x22  # "
_BODY_FIELDS = frozenset({"text", "arguments"})
#: A token at most this long stays inline in any field (64 KiB of JSON, fewer than 262,144 UTF-16 units).
_ALWAYS_INLINE = INLINE_FIELD_JSON
#: `,"name":` by field name (the names of items' attributes and blocks' keys are few).
_KEYS: dict[str, bytes] = {}
#: `,"block":i}` closing block i.
_BLOCK_ENDS = [b',"block":%d}' % i for i in range(MAX_BLOCKS_PER_PART)]
#: What a view in a kept part costs (the Raw, its share of its line's memoryview, a bytes object between
#: views) and what the part's pieces cost beside (the tuple, the Spliced): what the part cache counts.
_VIEW_COST = 48 + 200 + 33 + 8
_PIECES_COST = 56 + 48


def _key(name: str) -> bytes:
    """`,"name":` for a field name (ASCII letters: nothing to escape)."""
    got = _KEYS.get(name)
    if got is None:
        got = b',"' + name.encode() + b'":'
        if len(_KEYS) < 512:
            _KEYS[name] = got
    return got


def _long_string(ij: ItemJson) -> tuple[bytes, tuple[Encoded, ...]]:
    """The seam for an item with a string token too long to stay inline (over its field's JSON limit, or over
    262,144 UTF-16 units): its parts made from its values' JSON (`_rawtext.raw_item_parts`: the parts
    `encoded_parts` makes), each such string cut into fragments from its bytes by `raw_fragments`, never
    decoded; each part a `Spliced` whose fragments are views of the file's bytes (no copy of the text)."""
    parts = raw_item_parts(ij)
    out: list[Encoded] = []
    for k in range(len(parts)):
        chunks = parts.chunks(k)
        out.append(_spliced(chunks, [i for i, c in enumerate(chunks) if type(c) is not bytes]))
    return f"{ij.id}@{ij.line}\n".encode(), tuple(out)


def _inline(tok: Any, max_json: int) -> bool:
    """`_parts.fits` on a JSON token: a non-string always stays inline; a string when its JSON (the token:
    it is canonical) is within `max_json` and its text has at most 262,144 UTF-16 units (each unit takes at
    least one byte of the token, so a short token needs no count; a longer one is decoded to count them)."""
    n = len(tok)
    if (type(tok) is bytes and tok[0] != _QUOTE) or (n <= max_json and n - 2 <= MAX_STRING_UNITS):
        return True  # (a view, not bytes, is always a string token)
    if n > max_json:
        return False
    text: str = msgspec.json.decode(tok)
    return utf16_units(text) <= MAX_STRING_UNITS


def json_part(ij: ItemJson) -> tuple[bytes, tuple[Encoded, ...]] | None:
    """(the item's follow-digest key, the JSON of its parts: one part), or None (module doc). A part whose
    texts pi-format gave as views of the file's bytes (`msgspec.Raw`) is a `_parts.Spliced`: its own bytes
    between those views, so keeping it keeps no second copy of its texts."""
    blocks = ij.blocks
    if len(blocks) > MAX_BLOCKS_PER_PART:
        return None
    item = b'"' + ij.id.encode() + b'"'  # a safe id: ASCII with no character JSON escapes
    ts = ij.timestamp
    if len(ts) > _ALWAYS_INLINE and not _inline(ts, INLINE_FIELD_JSON):
        return _long_string(ij)
    out = [b'{"item":', item, b',"index":0,"last":true,"kind":"', ij.kind.encode(), b'","line":',
           str(ij.line).encode(), b',"timestamp":', ts, b',"entry":', item, b',"attrs":{']
    add = out.append
    if ij.attrs:
        first = len(out)
        for name, value in ij.attrs:
            if len(value) > _ALWAYS_INLINE and not _inline(value, INLINE_FIELD_JSON):
                return _long_string(ij)
            add(_KEYS.get(name) or _key(name))
            add(value)
        out[first] = out[first][1:]  # the first attribute has no comma before it
    add(b'},"notice":null,"blocks":[')
    views: list[int] = []  # where `out` holds a view (a long text's Raw), not bytes
    for i, pairs in enumerate(blocks):
        # A block's JSON starts with its kind (to_json's first key): `{"kind":`, then `,"name":value` each.
        add(b'{"kind":' if i == 0 else b',{"kind":')
        add(pairs[0][1])
        for name, value in pairs[1:]:
            if name == "arguments":
                # The arguments travel as JSON text: their JSON written as a string (compact JSON holds no
                # control character and no whitespace, so only the backslash and the quote are escaped).
                value = b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
            if len(value) > _ALWAYS_INLINE:
                limit = MAX_FRAGMENT_JSON if name in _BODY_FIELDS else INLINE_FIELD_JSON
                if not _inline(value, limit):
                    return _long_string(ij)
            add(_KEYS.get(name) or _key(name))
            if type(value) is not bytes:
                views.append(len(out))
            add(value)
        add(_BLOCK_ENDS[i])
    add(b"]}")
    key = f"{ij.id}@{ij.line}\n".encode()
    if views:
        part = _spliced(out, views)
        return None if part.size >= MAX_PART_BYTES else (key, (part,))
    raw = b"".join(out)
    if len(raw) >= MAX_PART_BYTES:
        return None  # one part of exactly 4 MiB may be one or two parts in `encoded_parts`: rendered
    return key, (raw,)


def _spliced(out: list[Any], views: list[int]) -> Spliced:
    """`out`'s pieces as a `Spliced` part: the bytes between two views (at `views`) joined into one, each view
    kept as it is."""
    pieces: list[Any] = []
    at = size = own = 0
    for v in views:
        joined = b"".join(out[at:v])
        view = out[v]
        pieces.append(joined)
        pieces.append(view)
        own += len(joined)
        size += len(view)
        at = v + 1
    joined = b"".join(out[at:])
    pieces.append(joined)
    own += len(joined)
    return Spliced(tuple(pieces), size + own, own + _VIEW_COST * len(views) + _PIECES_COST)
