"""mosaic.safe_open: race-free opening of files below an approved root, and the shared `Refusal` base.

A root is resolved once (it may itself be a symlink) and held as a directory fd; every path beneath it is
resolved from that fd with openat2(2) (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV, through cffi) or, on a kernel without openat2, a component-by-component dir_fd walk with
O_NOFOLLOW | O_DIRECTORY and an fstat check of every component. Session files follow the seed's rules
(README "Opening a file"). Refusals carry a code from `SafeOpenRefusal.CODES`.

`mosaic.safe_open.testing.OpenWatch` proves with inotify that a file was never opened.
"""

from ._kernel import RESOLVE_FLAGS
from ._refusal import Refusal, SafeOpenRefusal
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
    "RESOLVE_FLAGS",
    "Refusal",
    "ResolvedMethod",
    "Root",
    "SafeOpenRefusal",
    "is_session_name",
    "open_root",
    "openat2_available",
    "openat2_status",
]
