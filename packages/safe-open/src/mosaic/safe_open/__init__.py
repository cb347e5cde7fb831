"""mosaic.safe_open: race-free opening of files below an approved root; the shared `Refusal` base and the
identities every layer shares.

A root is resolved once (it may itself be a symlink) and held as a directory fd; every path beneath it is
resolved from that fd with openat2(2) (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
RESOLVE_NO_XDEV, through cffi) or, on a kernel without openat2, a component-by-component dir_fd walk with
O_NOFOLLOW | O_DIRECTORY and an fstat check of every component. Session files follow the seed's rules
(README "Opening a file"). Refusals carry a code from `SafeOpenRefusal.CODES`.

Every Mosaic package declares this one as its bottom layer: `Refusal` is the base of every refusal, and
`HostIdentity`, `ProcessRef`, `parse_stat`/`read_stat` and `sha256_digest` are the one form of a host,
a process and a digest (README "Shared identities").

The root-opening names load the cffi bindings on first use, not at import, so a package that needs only
the refusal base or the identities pays nothing for them.

`mosaic.safe_open.testing.OpenWatch` proves with inotify that a file was never opened.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._identity import (
    BOOT_ID_PATH,
    DIGEST_RE,
    MACHINE_ID_PATH,
    PF_EXITING,
    HostIdentity,
    ProcessRef,
    ProcStat,
    boot_id,
    canonical_json,
    current_host,
    machine_id,
    parse_stat,
    process_ref,
    read_stat,
    sha256_digest,
)
from ._refusal import Refusal, SafeOpenRefusal

if TYPE_CHECKING:
    from ._kernel import RESOLVE_FLAGS
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

# name -> the private module that defines it, imported on first access (PEP 562).
_LAZY = {
    "RESOLVE_FLAGS": "._kernel",
    "MAX_SESSION_FILE_BYTES": "._root",
    "Method": "._root",
    "OpenedFile": "._root",
    "ResolvedMethod": "._root",
    "Root": "._root",
    "is_session_name": "._root",
    "open_root": "._root",
    "openat2_available": "._root",
    "openat2_status": "._root",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "BOOT_ID_PATH",
    "DIGEST_RE",
    "MACHINE_ID_PATH",
    "MAX_SESSION_FILE_BYTES",
    "Method",
    "OpenedFile",
    "PF_EXITING",
    "ProcStat",
    "HostIdentity",
    "ProcessRef",
    "RESOLVE_FLAGS",
    "Refusal",
    "ResolvedMethod",
    "Root",
    "SafeOpenRefusal",
    "boot_id",
    "canonical_json",
    "current_host",
    "is_session_name",
    "machine_id",
    "open_root",
    "openat2_available",
    "openat2_status",
    "parse_stat",
    "process_ref",
    "read_stat",
    "sha256_digest",
]
