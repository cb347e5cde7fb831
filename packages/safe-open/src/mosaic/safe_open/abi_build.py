"""Generate a cffi out-of-line ABI module from C declarations (development only).

Both Mosaic packages with C bindings (safe-open's openat2/inotify, cgroup-cohort's clone3 and friends)
commit an ``_ffi_abi.py`` made by cffi's out-of-line ABI mode, so that no process parses declarations at
import (pycparser: 16-50 ms each). Each package's ``_ffi_build`` holds its ``CDEF`` and calls this module
to render and write the file; each package's ``tests/test_bindings.py`` checks the committed file is what
``render`` makes with the installed cffi. Importing this module needs nothing; ``render`` needs cffi and
pycparser.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from pathlib import Path

__all__ = ["main", "render"]


def render(cdef: str, module: str, builder: str) -> str:
    """The text of the ABI module ``module`` for ``cdef``, as the installed cffi writes it, under a header
    naming ``builder`` (the ``python -m`` module that regenerates it)."""
    import cffi  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415 - development only

    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(module, None)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "_ffi_abi.py")
        with contextlib.redirect_stdout(io.StringIO()):  # cffi announces "generating ..."
            ffi.emit_python_code(out)
        generated = Path(out).read_text(encoding="ascii")
    header = (f"# Generated from {builder}.CDEF by `python -m {builder}`\n"
              "# (cffi's out-of-line ABI mode); do not edit. tests/test_bindings.py checks it is current.\n"
              "# ruff: noqa\n"
              "# mypy: ignore-errors\n")
    return header + generated


def main(cdef: str, module: str, builder: str, target: Path) -> int:
    """Write ``render(cdef, module, builder)`` to ``target`` (an ``_ffi_build``'s ``python -m`` entry)."""
    target.write_text(render(cdef, module, builder), encoding="ascii")
    print(f"wrote {target}", file=sys.stderr)
    return 0


def __dir__() -> list[str]:
    return sorted(__all__)
