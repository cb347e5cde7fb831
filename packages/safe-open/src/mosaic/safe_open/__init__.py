"""mosaic.safe_open: race-free opening of files below an approved root, the `Refusal` base every Mosaic
refusal shares, and the identities every layer shares (a host, a process, a digest).

    import os
    from mosaic.safe_open import open_root
    with open_root("/srv/checkout") as root:                      # resolved once, held as a directory fd
        names = root.listdir(".pi/state/alpha/sessions")
        with root.open_session_file(".pi/state/alpha/sessions", names[0]) as f:
            data = os.read(f.fd, f.size)                         # or SafeOpenRefusal: code, reconcile, message

What a consumer needs is here (`__all__`); the rest of what the package promises is in two public modules:

- `mosaic.safe_open.root`: the resolution behind `open_root` (its `method` types);
- `mosaic.safe_open.identity`: every part of the shared identities (the `/proc/<pid>/stat` parser, the
  machine and boot ID readers);
- `mosaic.safe_open.ids`: `safe_id`, a raw id made safe to show (the reader's and the controller client's
  one function: hashlib and re only);

and `mosaic.safe_open.testing` (`OpenWatch`: proof with inotify that a file was never opened) and
`mosaic.safe_open.abi_build` (the generator of a cffi out-of-line ABI module, shared with cgroup-cohort).
`mosaic.safe_open.internals` (the openat2 binding, its flags and the kernel probe) is for this package's
tests and its reviewers, with no compatibility promise.

Importing this package loads only the refusal base: the identities and the root-opening names load their
modules on first use (PEP 562), so a package that needs only the refusal base pays for nothing else, and one
that needs the identities pays nothing for cffi.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._refusal import Refusal, SafeOpenRefusal

if TYPE_CHECKING:
    from ._identity import (
        DIGEST_RE,
        HostIdentity,
        ProcessRef,
        canonical_json,
        current_host,
        process_ref,
        read_stat,
        sha256_digest,
    )
    from ._root import MAX_SESSION_FILE_BYTES, OpenedFile, Root, is_session_name, open_root

# name -> the private module that defines it, imported on first access (PEP 562): the root-opening names
# load cffi; the identities load hashlib, json, re and dataclasses, which a client that needs only the
# refusal base (the controller's client library) does not pay for.
_LAZY = {
    "DIGEST_RE": "._identity",
    "HostIdentity": "._identity",
    "ProcessRef": "._identity",
    "canonical_json": "._identity",
    "current_host": "._identity",
    "process_ref": "._identity",
    "read_stat": "._identity",
    "sha256_digest": "._identity",
    "MAX_SESSION_FILE_BYTES": "._root",
    "OpenedFile": "._root",
    "Root": "._root",
    "is_session_name": "._root",
    "open_root": "._root",
}

__all__ = [
    "DIGEST_RE",
    "MAX_SESSION_FILE_BYTES",
    "HostIdentity",
    "OpenedFile",
    "ProcessRef",
    "Refusal",
    "Root",
    "SafeOpenRefusal",
    "canonical_json",
    "current_host",
    "is_session_name",
    "open_root",
    "process_ref",
    "read_stat",
    "sha256_digest",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
