"""The C declarations of the bindings, and the generator of ``_ffi_abi`` from them (development only).

cffi's in-line ABI mode (``FFI().cdef(...)`` at import) parses the declarations with pycparser in every
process that imports the bindings: about 35 ms here, which the launcher's process, and the spawn helper and
the shim at each launch, would pay on the engine's critical path (README "Threads": what a launch costs). cffi's out-of-line ABI mode parses them once, here, into ``_ffi_abi.py``: a Python
module of serialized types that ``_ffi`` imports; it loads ``_cffi_backend`` (cffi's C part) and nothing
else, no pycparser, and still needs no compiler.

``_ffi_abi.py`` is committed; ``python -m mosaic.cgroup_cohort._ffi_build`` rewrites it after a change to
``CDEF``, and ``tests/test_bindings.py`` checks that the committed module is exactly what ``CDEF``
generates. Importing this module needs nothing; ``render`` and ``main`` need cffi and pycparser.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mosaic.safe_open import abi_build

__all__ = ["CDEF", "MODULE", "main", "render"]

MODULE = "mosaic.cgroup_cohort._ffi_abi"
BUILDER = "mosaic.cgroup_cohort._ffi_build"

CDEF = """
    long syscall(long number, ...);
    int unshare(int flags);
    int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5);
    struct file_handle { unsigned int handle_bytes; int handle_type; unsigned char f_handle[]; };
    int name_to_handle_at(int dirfd, const char *pathname, struct file_handle *handle,
                          int *mount_id, int flags);
    struct clone_args {
        uint64_t flags; uint64_t pidfd; uint64_t child_tid; uint64_t parent_tid; uint64_t exit_signal;
        uint64_t stack; uint64_t stack_size; uint64_t tls; uint64_t set_tid; uint64_t set_tid_size;
        uint64_t cgroup;
    };
"""

def render() -> str:
    """The text of ``_ffi_abi.py`` for ``CDEF``, as the installed cffi writes it (safe-open's ``abi_build``)."""
    return abi_build.render(CDEF, MODULE, BUILDER)


def main() -> int:
    return abi_build.main(CDEF, MODULE, BUILDER, Path(__file__).with_name("_ffi_abi.py"))


if __name__ == "__main__":
    sys.exit(main())
