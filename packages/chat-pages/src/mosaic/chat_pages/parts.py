"""CHAT-01 parts (seed "Pages"): the page limits a consumer can rely on, how an item becomes parts and a
long string fragments, and the JSON a result is written as.

The limits: at most `MAX_PARTS_PER_PAGE` parts and `MAX_PAGE_BYTES` of serialized UTF-8 per page,
`MAX_BLOCKS_PER_PART` blocks per part, `MAX_STRING_UNITS` UTF-16 code units per string, a fragment at
most `MAX_FRAGMENT_JSON` of JSON, a part at most `MAX_PART_BYTES`. `fragments(text)` is the cut of a
string that does not fit inline (never inside a surrogate pair); `sized_parts(item)` and
`encoded_parts(item)` are an item's parts with their serialized sizes or bytes, `part_from_json(raw)` a
kept part read back. `dumps(value)` and `dump_bytes(value)` write a result as JSON text (and its UTF-8)
with lone surrogates escaped, as JSON.stringify does.
"""

from __future__ import annotations

from ._jsonout import dump_bytes, dumps
from ._parts import (
    MAX_BLOCKS_PER_PART,
    MAX_FRAGMENT_JSON,
    MAX_PAGE_BYTES,
    MAX_PART_BYTES,
    MAX_PARTS_PER_PAGE,
    MAX_STRING_UNITS,
    encoded_parts,
    fragments,
    part_from_json,
    sized_parts,
)

__all__ = [
    "MAX_BLOCKS_PER_PART",
    "MAX_FRAGMENT_JSON",
    "MAX_PAGE_BYTES",
    "MAX_PARTS_PER_PAGE",
    "MAX_PART_BYTES",
    "MAX_STRING_UNITS",
    "dump_bytes",
    "dumps",
    "encoded_parts",
    "fragments",
    "part_from_json",
    "sized_parts",
]


def __dir__() -> list[str]:
    return sorted(__all__)
