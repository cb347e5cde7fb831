"""The reader and its bounds: `Reader` (and `create_reader`, its usual constructor), its refusal
`ReaderRefusal` (the code table README "Refusal codes" lists), the only `actor` and
`purpose` it accepts (`LOCAL_OPERATOR`, `HISTORY`), and the cursor store's LRU cap and TTL (`CURSOR_CAP`,
`CURSOR_TTL_SECONDS`). Importing this module loads the reader, pi-format and safe-open.
"""

from __future__ import annotations

from . import _cursors, _reader, _refusal
from ._cursors import *  # noqa: F403
from ._reader import *  # noqa: F403
from ._refusal import *  # noqa: F403

__all__: list[str] = []
__all__ += _cursors.__all__
__all__ += _reader.__all__
__all__ += _refusal.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
