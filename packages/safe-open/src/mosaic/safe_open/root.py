"""Opening beneath a root that was resolved once: `open_root` and what it returns, and how it resolves.

`open_root(path, *, method="auto")` holds the root as a directory fd; every path beneath it is resolved
from that fd with openat2(2) (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV`) or, where the kernel lacks openat2, a `dir_fd` walk with an fstat check of every
component (`method`: `Method`, and `ResolvedMethod` for what runs). Refusals are
`mosaic.safe_open.SafeOpenRefusal`.

Importing this module loads the cffi bindings (`_cffi_backend` and the committed ABI module; no parser).
"""

from __future__ import annotations

from . import _root
from ._root import *  # noqa: F403

__all__: list[str] = []
__all__ += _root.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
