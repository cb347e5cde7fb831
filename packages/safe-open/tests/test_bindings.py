"""The openat2/inotify bindings are cffi's out-of-line ABI mode: the declarations parsed once, at
development time, into the committed `_ffi_abi` (README "Start-up cost").

What the bindings do against the kernel is tested where it is used: test_resolve.py (openat2 with and
without the resolve flags, the probe, the walk fallback), test_openwatch.py (inotify)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mosaic.safe_open import internals as kernel


def test_the_committed_abi_module_is_what_the_declarations_generate() -> None:
    """`_ffi_abi.py` is exactly what `kernel.CDEF` generates with the installed cffi: nothing stale,
    nothing edited by hand. A change to CDEF without regenerating fails here."""
    committed = Path(kernel.__file__).with_name("_ffi_abi.py").read_text(encoding="ascii")
    assert committed == kernel.render_abi(), "run: python -m mosaic.safe_open._ffi_build"


def test_the_first_openat2_call_loads_no_c_parser(tmp_path: Path) -> None:
    """A process that opens a root and a directory beneath it (the probe and two openat2 calls) loads
    cffi's backend and neither cffi's Python part nor pycparser: nothing is parsed at run time."""
    (tmp_path / "d").mkdir()
    code = ("import os, sys, mosaic.safe_open as s; r = s.open_root(sys.argv[1]); os.close(r.open_dir('d')); "
            "print(r.method, sorted(m for m in ('cffi', 'pycparser', '_cffi_backend') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    method, loaded = r.stdout.split(" ", 1)
    assert method in ("openat2", "walk")
    assert loaded.strip() == "['_cffi_backend']"


def test_struct_open_how_has_the_kernel_layout() -> None:
    """include/uapi/linux/openat2.h: three u64 fields, flags, mode, resolve, 24 bytes (OPEN_HOW_SIZE_VER0),
    as the generated module declares them."""
    ffi = kernel.ffi
    assert ffi.sizeof("struct open_how") == kernel.SIZEOF_OPEN_HOW == 24
    assert [ffi.offsetof("struct open_how", f) for f in ("flags", "mode", "resolve")] == [0, 8, 16]
