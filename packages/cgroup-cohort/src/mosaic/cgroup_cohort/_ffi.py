"""cffi (ABI mode) bindings for the syscalls the cohort needs and the standard library lacks.

ABI mode means no compiler at install time: the functions are looked up in the running libc with
``dlopen(NULL)``. Everything here fails with ``OSError`` carrying the kernel's errno, never silently.

What is bound, and why (cgroup-facts.md §3.1, §5, §8):

* ``clone3`` through ``syscall(435)`` with ``struct clone_args`` (glibc 2.36 has no wrapper). With
  ``CLONE_INTO_CGROUP`` the child is born inside ``engine/``: there is no instant at which it runs, or
  forks, anywhere else (brief §6 "Producer": contained from its first instruction). ``CLONE_PIDFD`` gives
  a pidfd that names exactly this child, so no bare pid is ever signalled.
* ``unshare`` for a new cgroup namespace (or user namespace) of the calling process.
* ``name_to_handle_at``: the 64-bit kernfs id of a cgroup directory (``FILEID_KERNFS``), the membership
  epoch on the direct path (facts §5). It equals ``st_ino``; both are read and compared.
* ``prctl``: ``PR_SET_CHILD_SUBREAPER`` (the shim reaps every orphaned member, facts §7.3) and
  ``PR_SET_NO_NEW_PRIVS`` (an engine under a dedicated uid cannot regain root through a set-uid binary,
  which would undo the ownership boundary of facts §4.4).

The stdlib already has ``os.pidfd_open`` and ``signal.pidfd_send_signal``; they are re-exported here
so that callers have one place to look.
"""

from __future__ import annotations

import errno as _errno
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import cffi  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "CLONE_INTO_CGROUP",
    "CLONE_NEWCGROUP",
    "CLONE_NEWUSER",
    "CLONE_PIDFD",
    "Credentials",
    "Spawned",
    "clone_child",
    "file_handle_id",
    "get_child_subreaper",
    "get_no_new_privs",
    "pidfd_open",
    "pidfd_send_signal",
    "set_child_subreaper",
    "set_no_new_privs",
    "spawn",
    "unshare",
]

SYS_clone3 = 435  # x86_64 and aarch64 share the generic number (include/uapi/asm-generic/unistd.h)
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUSER = 0x10000000
CLONE_PIDFD = 0x00001000
CLONE_INTO_CGROUP = 0x200000000
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
AT_EMPTY_PATH = 0x1000
MAX_HANDLE_SZ = 128

_ffi = cffi.FFI()
_ffi.cdef(
    """
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
)
_lib: Any = _ffi.dlopen(None)

pidfd_open = os.pidfd_open
pidfd_send_signal = signal.pidfd_send_signal


def _raise_errno(what: str) -> None:
    err = _ffi.errno
    raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    """unshare(2) for the calling process. Raises OSError (EPERM, EINVAL, ...) when the kernel refuses."""
    if _lib.unshare(flags) != 0:
        _raise_errno("unshare")


def _prctl(option: int, arg2: int = 0) -> int:
    rc = int(_lib.prctl(option, arg2, 0, 0, 0))
    if rc < 0:
        _raise_errno(f"prctl({option})")
    return rc


def set_child_subreaper(on: bool = True) -> None:
    """Make orphaned descendants re-parent to this process (and so be reaped by it)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0)


def get_child_subreaper() -> bool:
    """Whether this process is a child subreaper."""
    out = _ffi.new("int *")
    if _lib.prctl(PR_GET_CHILD_SUBREAPER, _ffi.cast("unsigned long", _ffi.cast("uintptr_t", out)), 0, 0, 0) < 0:
        _raise_errno("prctl(PR_GET_CHILD_SUBREAPER)")
    return bool(out[0])


def set_no_new_privs() -> None:
    """Irreversibly forbid this process and its descendants to gain privileges through execve."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def get_no_new_privs() -> bool:
    """Whether no_new_privs is set on this process."""
    return _prctl(PR_GET_NO_NEW_PRIVS) == 1


def file_handle_id(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> tuple[int, int]:
    """(handle_type, 64-bit id) of ``path`` from name_to_handle_at.

    For a cgroup2 directory the type is FILEID_KERNFS (0xfe) and the id is the cgroup id, equal to the
    directory's ``st_ino`` (facts §5). With ``dir_fd`` and ``path == ""`` the handle of the open directory
    itself is taken (AT_EMPTY_PATH), which cannot race with a rename. Raises OSError (ENOENT, EOPNOTSUPP, ...).
    Only handles of at most 8 bytes are decoded as an id; a longer one raises OSError(EOVERFLOW).
    """
    buf = _ffi.new("char[]", _ffi.sizeof("struct file_handle") + MAX_HANDLE_SZ)
    handle = _ffi.cast("struct file_handle *", buf)
    handle.handle_bytes = MAX_HANDLE_SZ
    mount_id = _ffi.new("int *")
    p = os.fsencode(path)
    flags = AT_EMPTY_PATH if p == b"" else 0
    rc = _lib.name_to_handle_at(dir_fd if dir_fd is not None else -100, p, handle, mount_id, flags)
    if rc != 0:
        _raise_errno(f"name_to_handle_at({os.fsdecode(p)!r})")
    n = int(handle.handle_bytes)
    if n > 8:
        raise OSError(_errno.EOVERFLOW, f"file handle of {n} bytes is not a cgroup id")
    raw = bytes(_ffi.buffer(handle.f_handle, n))
    return int(handle.handle_type), int.from_bytes(raw, "little")


@dataclass(frozen=True)
class Credentials:
    """The identity a child runs under: uid, gid and supplementary groups (set before exec).

    ``groups=None`` leaves the supplementary groups alone: inside a new user namespace whose
    ``setgroups`` is ``deny`` the kernel refuses setgroups(2) with EPERM.
    """

    uid: int
    gid: int
    groups: tuple[int, ...] | None = ()


@dataclass
class Spawned:
    """A child made by clone3: its pid and a pidfd (owned by the caller, close it when done)."""

    pid: int
    pidfd: int

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


def _reset_signals() -> None:
    # A Python parent ignores SIGPIPE/SIGXFSZ (and the shim ignores SIGTERM); SIG_IGN survives execve,
    # so without this the engine would silently ignore SIGTERM. subprocess does the same for SIGPIPE.
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def clone_child(
    body: Callable[[], int],
    *,
    cgroup_fd: int | None = None,
    flags: int = 0,
    before_body: Callable[[], None] | None = None,
) -> Spawned:
    """Fork through clone3 and run ``body`` in the child, which then ``_exit``s with its return value.

    ``cgroup_fd`` (an O_DIRECTORY fd of a cgroup2 directory) adds CLONE_INTO_CGROUP: the child starts
    inside that cgroup. CLONE_PIDFD is always set; the returned pidfd refers to this child only.
    ``flags`` may add CLONE_NEWCGROUP (the child's cgroup namespace is rooted at its cgroup) and
    CLONE_NEWUSER. The child never returns into the caller's stack: any exception exits it with 127.
    The caller must be single-threaded (as after fork(2), only the calling thread exists in the child).
    Raises OSError with the kernel's errno when clone3 fails (e.g. EACCES for a cgroup it may not enter,
    ENOSYS on kernels before 5.7 for CLONE_INTO_CGROUP, E2BIG on kernels before 5.3).
    """
    args = _ffi.new("struct clone_args *")
    pidfd_out = _ffi.new("int *", -1)
    args.flags = flags | CLONE_PIDFD | (CLONE_INTO_CGROUP if cgroup_fd is not None else 0)
    args.pidfd = int(_ffi.cast("uintptr_t", pidfd_out))
    args.exit_signal = int(signal.SIGCHLD)
    if cgroup_fd is not None:
        args.cgroup = cgroup_fd
    size = _ffi.sizeof("struct clone_args")
    rc = int(_lib.syscall(_ffi.cast("long", SYS_clone3), args, _ffi.cast("size_t", size)))
    if rc == 0:  # child
        code = 127
        try:
            if before_body is not None:
                before_body()
            code = body()
        except BaseException:  # noqa: B036 - nothing may unwind into the parent's stack
            code = 127
        finally:
            os._exit(code)
    if rc < 0:
        _raise_errno("clone3")
    return Spawned(pid=rc, pidfd=int(pidfd_out[0]))


def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    executable: str | None = None,
    fds: Mapping[int, int] | None = None,
    cgroup_fd: int | None = None,
    credentials: Credentials | None = None,
    new_cgroupns: bool = False,
    no_new_privs: bool = False,
    new_session: bool = False,
    cwd: str | None = None,
    userns_setup: Callable[[int], None] | None = None,
) -> Spawned:
    """Start ``argv`` through clone3 + execve, reporting exec failure to the caller.

    Promises: the child is inside ``cgroup_fd``'s cgroup from its first instruction; it keeps only the
    descriptors named in ``fds`` (target -> source in the parent), all others are closed; its signal
    dispositions and mask are defaults; credentials are dropped (groups, gid, uid, in that order) before
    exec, and with ``no_new_privs`` it can never regain privileges. With ``userns_setup`` the child gets a
    new user namespace and waits until ``userns_setup(pid)`` (run in the parent, e.g. newuidmap) returns.
    Fails with OSError: from clone3 itself, or the errno the child hit before exec (ENOENT for a missing
    executable, EPERM for a refused setuid, ...), in which case the child has already been reaped.
    """
    exe = os.fsencode(executable if executable is not None else argv[0])
    bargv = [os.fsencode(a) for a in argv]
    benv = {os.fsencode(k): os.fsencode(v) for k, v in env.items()}
    fd_map = dict(fds or {})
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    sync_r, sync_w = os.pipe2(os.O_CLOEXEC) if userns_setup is not None else (-1, -1)
    flags = (CLONE_NEWCGROUP if new_cgroupns else 0) | (CLONE_NEWUSER if userns_setup is not None else 0)

    def body() -> int:
        try:
            os.close(err_r)
            if sync_w >= 0:
                os.close(sync_w)
                os.read(sync_r, 1)  # the parent has written the id maps (or closed: then setuid fails)
            _reset_signals()
            if new_session:
                os.setsid()
            # Move every source out of the way first, so a source that is also a target is not clobbered.
            moved = {target: os.dup(src) for target, src in fd_map.items()}
            for target, tmp in moved.items():
                os.dup2(tmp, target, inheritable=True)
            keep = set(fd_map) | {err_w}
            for tmp in moved.values():
                if tmp not in keep:
                    os.close(tmp)
            for fd in sorted(_open_fds()):
                if fd not in keep:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            if credentials is not None:
                if credentials.groups is not None:
                    os.setgroups(list(credentials.groups))
                os.setresgid(credentials.gid, credentials.gid, credentials.gid)
                os.setresuid(credentials.uid, credentials.uid, credentials.uid)
            if no_new_privs:
                set_no_new_privs()
            if cwd is not None:
                os.chdir(cwd)
            os.execve(exe, bargv, benv)
        except OSError as e:
            os.write(err_w, str(e.errno or 0).encode())
        except BaseException:  # noqa: B036
            os.write(err_w, b"0")
        return 127

    try:
        child = clone_child(body, cgroup_fd=cgroup_fd, flags=flags)
    except BaseException:
        for fd in (err_r, err_w, sync_r, sync_w):
            if fd >= 0:
                os.close(fd)
        raise
    os.close(err_w)
    if sync_r >= 0:
        os.close(sync_r)
        try:
            assert userns_setup is not None
            userns_setup(child.pid)
        finally:
            os.close(sync_w)
    try:
        data = b""
        while True:
            chunk = os.read(err_r, 64)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(err_r)
    if data:
        os.waitpid(child.pid, 0)
        child.close()
        code = int(data or b"0") or _errno.EIO
        raise OSError(code, f"spawn {argv[0]!r}: {os.strerror(code)}")
    return child


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))
