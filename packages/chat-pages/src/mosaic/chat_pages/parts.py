"""CHAT-01 parts (seed "Pages"): the page limits a consumer can rely on, and the JSON a result is written as.

The limits: at most `MAX_PARTS_PER_PAGE` parts and `MAX_PAGE_BYTES` of serialized UTF-8 per page,
`MAX_BLOCKS_PER_PART` blocks per part, `MAX_STRING_UNITS` UTF-16 code units per string, a fragment at
most `MAX_FRAGMENT_JSON` of JSON, a part at most `MAX_PART_BYTES`. `dumps(value)` and `dump_bytes(value)`
write a result as JSON text (and its UTF-8) with lone surrogates escaped, as JSON.stringify does.
"""

from __future__ import annotations

from . import _jsonout, _parts
from ._jsonout import *  # noqa: F403
from ._parts import *  # noqa: F403

__all__: list[str] = []
__all__ += _jsonout.__all__
__all__ += _parts.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
