"""What safe-open's own tests check against the kernel, and reviewers read: no compatibility promise (any
release may change or drop a name here; a caller uses `mosaic.safe_open` and its promised modules).

The openat2(2) binding `open_root` stands on, and the kernel probe that `method="auto"` follows
(`openat2_available()`, `openat2_status()`: its answer, asked once per process).
`openat2(dir_fd, path, flags, resolve, mode=0)` is the raw system call (a new fd, or `OSError` with the
kernel's errno; EINTR retried, ENOSYS passed on), `openat2_probe()` the once-per-process question "does
this kernel answer it" with what the probe saw. The resolve flags are include/uapi/linux/openat2.h's;
`RESOLVE_FLAGS` is the four of them that every lookup beneath a root uses.

The binding is cffi's out-of-line ABI mode: the declarations `CDEF` were parsed once into a committed
module, which `render_abi()` regenerates with the installed cffi (`python -m mosaic.safe_open._ffi_build`
rewrites it). `ffi` is that module's FFI object and `SIZEOF_OPEN_HOW` the size of `struct open_how` every
call passes to the kernel. Importing this module loads `_cffi_backend`, never cffi's parser.
"""

from __future__ import annotations

from typing import Any

from . import _kernel
from ._ffi_build import CDEF
from ._ffi_build import render as render_abi
from ._kernel import (
    RESOLVE_BENEATH,
    RESOLVE_FLAGS,
    RESOLVE_NO_MAGICLINKS,
    RESOLVE_NO_SYMLINKS,
    RESOLVE_NO_XDEV,
    openat2,
    openat2_probe,
)
from ._root import openat2_available, openat2_status

ffi: Any = _kernel._ffi
SIZEOF_OPEN_HOW: int = _kernel._SIZEOF_OPEN_HOW

__all__ = [
    "CDEF",
    "RESOLVE_BENEATH",
    "RESOLVE_FLAGS",
    "RESOLVE_NO_MAGICLINKS",
    "RESOLVE_NO_SYMLINKS",
    "RESOLVE_NO_XDEV",
    "SIZEOF_OPEN_HOW",
    "ffi",
    "openat2",
    "openat2_available",
    "openat2_probe",
    "openat2_status",
    "render_abi",
]


def __dir__() -> list[str]:
    return sorted(__all__)
