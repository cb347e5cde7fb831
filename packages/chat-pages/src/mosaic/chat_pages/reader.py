"""The reader and its bounds: `Reader` (and `create_reader`, its usual constructor), its refusal
`ReaderRefusal` (the code table README "Refusal codes" lists), the only `actor` and
`purpose` it accepts (`LOCAL_OPERATOR`, `HISTORY`), the cursor store's LRU cap and TTL (`CURSOR_CAP`,
`CURSOR_TTL_SECONDS`), and `RACY_NS`, how much older than a verification a file's ctime must be for the
re-verification shortcut to skip hashing the pinned prefix again (git's racily-clean rule; README
"Snapshots, epochs, cursors"). Importing this module loads the reader, pi-format and safe-open.
"""

from __future__ import annotations

from ._cursors import CURSOR_CAP, CURSOR_TTL_SECONDS, HISTORY, LOCAL_OPERATOR
from ._reader import Reader, create_reader
from ._refusal import ReaderRefusal
from ._snapshots import RACY_NS

__all__ = [
    "CURSOR_CAP",
    "CURSOR_TTL_SECONDS",
    "HISTORY",
    "LOCAL_OPERATOR",
    "RACY_NS",
    "Reader",
    "ReaderRefusal",
    "create_reader",
]


def __dir__() -> list[str]:
    return sorted(__all__)
