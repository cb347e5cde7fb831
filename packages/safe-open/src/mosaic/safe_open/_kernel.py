"""The two Linux system calls Python does not wrap: openat2(2) and inotify(7), through cffi in ABI mode.

ABI mode (`ffi.dlopen(None)`, libc's own symbols) needs no compiler at install time. openat2 has no libc
wrapper on older glibc, so it is reached through `syscall(2)`; `syscall` is variadic, and cffi requires
every variadic argument to carry an explicit C type, hence the casts.

The declarations are `_ffi_build.CDEF`, parsed once into the committed `_ffi_abi` (cffi's out-of-line ABI
mode), so loading this module imports `_cffi_backend` and no C parser (README "Start-up cost").
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any

from . import _ffi_abi  # generated (see _ffi_build); typed at the wrappers below

_ffi: Any = _ffi_abi.ffi
_libc: Any = _ffi.dlopen(None)

# openat2 is syscall 437 on every architecture that uses the unified syscall table (x86_64, aarch64,
# riscv64, ...; added in Linux 5.6). include/uapi/asm-generic/unistd.h: #define __NR_openat2 437.
SYS_OPENAT2 = 437

# include/uapi/linux/openat2.h
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

# Every lookup beneath a root uses all four: stay beneath the directory fd (no "..", no absolute path,
# no escaping symlink), follow no symlink at all (a swapped component is refused, not followed), follow
# no /proc magic link, and cross no mount point.
RESOLVE_FLAGS = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV

_SIZEOF_OPEN_HOW: int = _ffi.sizeof("struct open_how")

# include/uapi/linux/inotify.h
IN_OPEN = 0x00000020
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000
IN_DONT_FOLLOW = 0x02000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC


def openat2(dir_fd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    """openat2(dir_fd, path, {flags, mode, resolve}): a new fd, or OSError with the kernel's errno.

    EINTR is retried (PEP 475 does that for os.open; a raw syscall must do it itself). ENOSYS reaches the
    caller unchanged: it is how a kernel without openat2 answers.
    """
    how = _ffi.new("struct open_how *")
    how.flags = flags
    how.mode = mode
    how.resolve = resolve
    cpath = _ffi.new("char[]", os.fsencode(path))
    while True:
        fd = int(
            _libc.syscall(
                _ffi.cast("long", SYS_OPENAT2),
                _ffi.cast("long", dir_fd),
                cpath,
                how,
                _ffi.cast("size_t", _SIZEOF_OPEN_HOW),
            )
        )
        if fd >= 0:
            return fd
        err = int(_ffi.errno)
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err), path)


_probe_lock = threading.Lock()
_probe: tuple[bool, str] | None = None


def openat2_probe() -> tuple[bool, str]:
    """Ask the running kernel once whether openat2 works: (available, what the probe saw).

    The probe opens "/" through openat2 with O_PATH, which needs no permission at all. ENOSYS means the
    kernel lacks the call. EPERM on that probe can only come from a seccomp filter that blocks the call
    (some container runtimes answer unknown syscalls that way), so it counts as unavailable too.
    """
    global _probe
    with _probe_lock:
        if _probe is None:
            try:
                fd = openat2(-100, "/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0)  # AT_FDCWD = -100
            except OSError as e:
                name = errno.errorcode.get(e.errno or 0, str(e.errno))
                if e.errno in (errno.ENOSYS, errno.EPERM):
                    _probe = (False, f"openat2 probe failed with {name}: the kernel (or a filter) lacks it")
                else:
                    _probe = (True, f"openat2 probe answered {name}, so the call exists")
            else:
                os.close(fd)
                _probe = (True, "openat2 probe opened / with O_PATH")
        return _probe


def inotify_init() -> int:
    """A new non-blocking, close-on-exec inotify fd, or OSError."""
    fd = int(_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC))
    if fd < 0:
        err = int(_ffi.errno)
        raise OSError(err, os.strerror(err))
    return fd


def inotify_add_watch(fd: int, path: str, mask: int) -> int:
    """Add (or extend) a watch on `path`; returns the watch descriptor, or OSError."""
    wd = int(_libc.inotify_add_watch(fd, _ffi.new("char[]", os.fsencode(path)), _ffi.cast("uint32_t", mask)))
    if wd < 0:
        err = int(_ffi.errno)
        raise OSError(err, os.strerror(err), path)
    return wd
