"""The C declarations of the bindings, and the generator of ``_ffi_abi`` from them (development only).

cffi's in-line ABI mode (``FFI().cdef(...)`` at import) parses the declarations with pycparser in every
process that imports the bindings: about 35 ms here, paid by the launcher's process and, before this
module, by the spawn helper and the shim at each launch, on the engine's critical path (README "Threads":
what a launch costs). cffi's out-of-line ABI mode parses them once, here, into ``_ffi_abi.py``: a Python
module of serialized types that ``_ffi`` imports; it loads ``_cffi_backend`` (cffi's C part) and nothing
else, no pycparser, and still needs no compiler.

``_ffi_abi.py`` is committed; ``python -m mosaic.cgroup_cohort._ffi_build`` rewrites it after a change to
``CDEF``, and ``tests/test_bindings.py`` checks that the committed module is exactly what ``CDEF``
generates. Importing this module needs nothing; ``render`` and ``main`` need cffi and pycparser.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["CDEF", "MODULE", "main", "render"]

MODULE = "mosaic.cgroup_cohort._ffi_abi"

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

HEADER = ("# Generated from mosaic.cgroup_cohort._ffi_build.CDEF by `python -m mosaic.cgroup_cohort._ffi_build`\n"
          "# (cffi's out-of-line ABI mode); do not edit. tests/test_bindings.py checks it is current.\n"
          "# ruff: noqa\n"
          "# mypy: ignore-errors\n")


def render() -> str:
    """The text of ``_ffi_abi.py`` for ``CDEF``, as this cffi writes it, with the header above."""
    import cffi  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415 - development only

    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    ffi.set_source(MODULE, None)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "_ffi_abi.py")
        with contextlib.redirect_stdout(io.StringIO()):  # cffi announces "generating ..."
            ffi.emit_python_code(out)
        return HEADER + Path(out).read_text(encoding="ascii")


def main() -> int:
    target = Path(__file__).with_name("_ffi_abi.py")
    target.write_text(render(), encoding="ascii")
    print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
