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
of a raw string token are cut (`_rawtext.raw_item_parts`: the parts `encoded_parts` makes, each made when a
page asks for it, the fragments cut from the token's bytes by `raw_fragments`).

`tests/test_pages_as_bytes.py` holds `json_part` to `encoded_parts` for every entry of every fixture, of
generated sessions and of hostile shapes, and every page served from these parts to the dict pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec

from ._jsonout import utf16_units
from ._parts import (
    INLINE_FIELD_JSON,
    MAX_BLOCKS_PER_PART,
    MAX_FRAGMENT_JSON,
    MAX_PART_BYTES,
    MAX_STRING_UNITS,
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


def _key(name: str) -> bytes:
    """`,"name":` for a field name (ASCII letters: nothing to escape)."""
    got = _KEYS.get(name)
    if got is None:
        got = b',"' + name.encode() + b'":'
        if len(_KEYS) < 512:
            _KEYS[name] = got
    return got


def _long_string(ij: ItemJson) -> tuple[bytes, Sequence[bytes]]:
    """The seam for an item with a string token too long to stay inline (over its field's JSON limit, or over
    262,144 UTF-16 units): its parts made from its values' JSON with each such string cut into fragments
    from its bytes, never decoded (`_rawtext.raw_item_parts`, `raw_fragments`), each part made when a page
    asks for it."""
    return f"{ij.id}@{ij.line}\n".encode(), raw_item_parts(ij)


def _inline(tok: bytes, max_json: int) -> bool:
    """`_parts.fits` on a JSON token: a non-string always stays inline; a string when its JSON (the token:
    it is canonical) is within `max_json` and its text has at most 262,144 UTF-16 units (each unit takes at
    least one byte of the token, so a short token needs no count; a longer one is decoded to count them)."""
    n = len(tok)
    if tok[0] != _QUOTE or (n <= max_json and n - 2 <= MAX_STRING_UNITS):
        return True
    if n > max_json:
        return False
    text: str = msgspec.json.decode(tok)
    return utf16_units(text) <= MAX_STRING_UNITS


def json_part(ij: ItemJson) -> tuple[bytes, Sequence[bytes]] | None:
    """(the item's follow-digest key, the JSON bytes of its parts: one part, or an item's parts with a long
    string's fragments from `_long_string`), or None (module doc)."""
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
            add(value)
        add(_BLOCK_ENDS[i])
    add(b"]}")
    raw = b"".join(out)
    if len(raw) >= MAX_PART_BYTES:
        return None  # one part of exactly 4 MiB may be one or two parts in `encoded_parts`: rendered
    return f"{ij.id}@{ij.line}\n".encode(), (raw,)
