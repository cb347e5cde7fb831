"""Opening beneath a root that was resolved once: `open_root` and what it returns, and how it resolves.

`open_root(path, *, method="auto")` holds the root as a directory fd; every path beneath it is resolved
from that fd with openat2(2) (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV`) or, where the kernel lacks openat2, a `dir_fd` walk with an fstat check of every
component (`method`: `Method`, and `ResolvedMethod` for what runs). `openat2_available()` and
`openat2_status()` report the once-per-process kernel probe that "auto" follows. Refusals are
`mosaic.safe_open.SafeOpenRefusal`.

Importing this module loads the cffi bindings (`_cffi_backend` and the committed ABI module; no parser).
"""

from __future__ import annotations

from ._root import (
    MAX_SESSION_FILE_BYTES,
    Method,
    OpenedFile,
    ResolvedMethod,
    Root,
    is_session_name,
    open_root,
    openat2_available,
    openat2_status,
)

__all__ = [
    "MAX_SESSION_FILE_BYTES",
    "Method",
    "OpenedFile",
    "ResolvedMethod",
    "Root",
    "is_session_name",
    "open_root",
    "openat2_available",
    "openat2_status",
]


def __dir__() -> list[str]:
    return sorted(__all__)
