"""`safe_id(raw)`: a raw id kept when it is a short CHAT-01 id, else `h-` plus 40 hex of its SHA-256
(`HASH_PREFIX`). The reader (pi-format, which re-exports it) and the controller's client agree on it here,
at the bottom layer. Loads hashlib and re only.
"""

from __future__ import annotations

from . import _ids
from ._ids import *  # noqa: F403

__all__: list[str] = []
__all__ += _ids.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
