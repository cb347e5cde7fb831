"""The C declarations of the openat2 and inotify bindings, and the generator of ``_ffi_abi`` from them
(development only).

cffi's in-line ABI mode (``FFI().cdef(...)`` at import) imports pycparser and parses the declarations in
every process that loads the bindings: 16 to 50 ms here (README "Start-up cost"), paid by every process's
first `open_root`. cffi's out-of-line ABI mode parses them once, here, into ``_ffi_abi.py``: a Python
module of serialized types that ``_kernel`` imports; it loads ``_cffi_backend`` (cffi's C part) and no
parser, and still needs no compiler, at install or ever.

``_ffi_abi.py`` is committed; ``python -m mosaic.safe_open._ffi_build`` rewrites it after a change to
``CDEF``, and ``tests/test_bindings.py`` checks that the committed module is exactly what ``CDEF``
generates. Importing this module needs nothing; ``render`` and ``main`` need cffi and pycparser.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import abi_build

__all__ = ["CDEF", "MODULE", "main", "render"]

MODULE = "mosaic.safe_open._ffi_abi"
BUILDER = "mosaic.safe_open._ffi_build"

CDEF = """
    struct open_how {
        uint64_t flags;
        uint64_t mode;
        uint64_t resolve;
    };
    long syscall(long number, ...);
    int inotify_init1(int flags);
    int inotify_add_watch(int fd, const char *pathname, uint32_t mask);
"""

def render() -> str:
    """The text of ``_ffi_abi.py`` for ``CDEF``, as the installed cffi writes it (safe-open's ``abi_build``)."""
    return abi_build.render(CDEF, MODULE, BUILDER)


def main() -> int:
    return abi_build.main(CDEF, MODULE, BUILDER, Path(__file__).with_name("_ffi_abi.py"))


if __name__ == "__main__":
    sys.exit(main())
