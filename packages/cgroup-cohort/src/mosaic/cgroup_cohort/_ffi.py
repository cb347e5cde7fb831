"""cffi (ABI mode) bindings for the syscalls the cohort needs and the standard library lacks.

ABI mode means no compiler at install time: the functions are looked up in the running libc with
``dlopen(NULL)``. The C declarations are ``_ffi_build.CDEF``, parsed once into the committed ``_ffi_abi``
(cffi's out-of-line ABI mode), so importing the bindings loads ``_cffi_backend`` and no parser. Everything
here fails with ``OSError`` carrying the kernel's errno, never silently.

What is bound, and why (docs/cgroup-facts.md §3.1, §5, §8):

* ``clone3`` through ``syscall(435)`` with ``struct clone_args`` (glibc 2.36 has no wrapper). With
  ``CLONE_INTO_CGROUP`` the child is born inside ``engine/``: there is no instant at which it runs, or
  forks, anywhere else (brief §6 "Producer": contained from its first instruction). ``CLONE_PIDFD`` gives
  a pidfd that names exactly this child, so no bare pid is ever signalled. ``CLONE_PARENT`` makes the
  child the caller's sibling: how the launchers' spawn helper (``_spawner``) hands the child to them.
  **Only in a single-threaded process**: the child runs Python code between clone3 and execve (descriptor
  moves, credential drop) without anything fork(2) does for a threaded process: no glibc atfork handlers
  (malloc's locks), no ``PyOS_AfterFork_Child`` (the GIL, the import lock). A lock another thread held at
  the clone is held forever in the child, which then hangs before its exec. ``clone_child`` and ``spawn``
  therefore count the process's threads (``/proc/self/task``) and refuse with ``RuntimeError`` unless
  there is exactly one (README "Threads").
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
import resource
import select
import signal
import time

from . import _ffi_abi as _abi
from ._record import Record

# Annotations only (they are strings here): the spawn helper and the shim import this module at each launch,
# and typing alone would add ~2 ms to their start (README "Threads": what a launch costs).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

__all__ = [
    "CLONE_INTO_CGROUP",
    "CLONE_NEWCGROUP",
    "CLONE_NEWUSER",
    "CLONE_PARENT",
    "CLONE_PIDFD",
    "Credentials",
    "ExecFailed",
    "Spawned",
    "clone_child",
    "file_handle_id",
    "get_child_subreaper",
    "get_no_new_privs",
    "pidfd_open",
    "pidfd_send_signal",
    "place_fds",
    "reset_signals",
    "set_child_subreaper",
    "set_no_new_privs",
    "spawn",
    "thread_count",
    "unshare",
]

SYS_clone3 = 435  # x86_64 and aarch64 share the generic number (include/uapi/asm-generic/unistd.h)
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUSER = 0x10000000
CLONE_PIDFD = 0x00001000
CLONE_PARENT = 0x00008000
CLONE_INTO_CGROUP = 0x200000000
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
AT_EMPTY_PATH = 0x1000
MAX_HANDLE_SZ = 128

# The declarations are _ffi_build.CDEF, parsed once into _ffi_abi (cffi's out-of-line ABI mode): importing
# them costs no pycparser run (README "Threads": what a launch costs).
_ffi: Any = _abi.ffi
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


class Credentials(Record):
    """The identity a child runs under: uid, gid and supplementary groups (set before exec). A frozen value
    (``_record.Record``: compared and hashed by its fields).

    ``groups=None`` leaves the supplementary groups alone: inside a new user namespace whose
    ``setgroups`` is ``deny`` the kernel refuses setgroups(2) with EPERM.
    """

    __slots__ = ("uid", "gid", "groups")
    uid: int
    gid: int
    groups: tuple[int, ...] | None

    def __init__(self, uid: int, gid: int, groups: tuple[int, ...] | None = ()) -> None:
        self._set(uid=uid, gid=gid, groups=groups)


class Spawned:
    """A child made by clone3: its pid and a pidfd (owned by the caller, close it when done)."""

    __slots__ = ("pid", "pidfd")

    def __init__(self, pid: int, pidfd: int) -> None:
        self.pid = pid
        self.pidfd = pidfd

    def __repr__(self) -> str:
        return f"Spawned(pid={self.pid!r}, pidfd={self.pidfd!r})"

    def close(self) -> None:
        if self.pidfd >= 0:
            os.close(self.pidfd)
            self.pidfd = -1


class ExecFailed(OSError):
    """``spawn``'s child failed before or at execve, with that errno. ``pid`` is the child when the caller
    could not reap it (``sibling=True``: it is the caller's parent's child, which must reap it), else None
    (already reaped)."""

    def __init__(self, code: int, message: str, pid: int | None = None) -> None:
        super().__init__(code, message)
        self.pid = pid


def thread_count() -> int:
    """How many threads this process has now (the entries of ``/proc/self/task``). Raises OSError when
    /proc cannot tell."""
    return len(os.listdir("/proc/self/task"))


def _require_single_thread(what: str, settle: float = 0.1) -> None:
    """Refuse (RuntimeError) a raw clone3 from a process that has, or may have, more than one thread.

    A thread that ``join()`` has just returned for can still be exiting in the kernel (its task listed
    for a moment longer), so a count above one is re-read for up to ``settle`` seconds before refusing.
    """
    deadline = time.monotonic() + settle
    while True:
        try:
            n = thread_count()
        except OSError as e:
            raise RuntimeError(f"{what} refused: cannot count this process's threads ({e}); a raw clone3 is "
                               "only safe in a single-threaded process") from e
        if n == 1 or time.monotonic() >= deadline:
            break
        time.sleep(0.002)
    if n != 1:
        raise RuntimeError(
            f"{what} refused: this process has {n} threads. The rule: a raw clone3 only in a single-threaded "
            "process. Its child runs Python before execve without what fork() does for a threaded process "
            "(glibc's atfork handlers, CPython's PyOS_AfterFork_Child), so a lock another thread held (the "
            "GIL, malloc's, the import lock) stays held and the child can hang before its exec. Launchers "
            "spawn through their single-threaded helper process (_spawn_helper, _spawner).")


def reset_signals() -> None:
    """In a child about to exec: every signal disposition back to its default, no signal blocked."""
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


def place_fds(fd_map: Mapping[int, int], *, keep: Sequence[int] = ()) -> None:
    """In a child about to exec: make each target descriptor of ``fd_map`` (target -> source) a copy of its
    source, inheritable, and close every other descriptor but ``keep``. Sources are first moved out of the
    way, so that a source that is also a target is not clobbered."""
    moved = {target: os.dup(src) for target, src in fd_map.items()}
    for target, tmp in moved.items():
        os.dup2(tmp, target, inheritable=True)
    kept = set(fd_map) | set(keep)
    for tmp in moved.values():
        if tmp not in kept:
            os.close(tmp)
    for fd in sorted(_open_fds()):
        if fd not in kept:
            try:
                os.close(fd)
            except OSError:
                pass


def clone_child(
    body: Callable[[], int],
    *,
    cgroup_fd: int | None = None,
    flags: int = 0,
    before_body: Callable[[], None] | None = None,
    sibling: bool = False,
) -> Spawned:
    """Fork through clone3 and run ``body`` in the child, which then ``_exit``s with its return value.

    ``cgroup_fd`` (an O_DIRECTORY fd of a cgroup2 directory) adds CLONE_INTO_CGROUP: the child starts
    inside that cgroup. CLONE_PIDFD is always set; the returned pidfd refers to this child only.
    ``flags`` may add CLONE_NEWCGROUP (the child's cgroup namespace is rooted at its cgroup) and
    CLONE_NEWUSER. ``sibling`` adds CLONE_PARENT: the child is a child of the caller's parent, which
    gets its SIGCHLD and must reap it (the caller cannot). The child never returns into the caller's
    stack: any exception exits it with 127.

    The calling process must be single-threaded: RuntimeError naming the rule otherwise (see the module
    docstring; only the calling thread exists in the child, and nothing like fork()'s after-fork work
    runs). Raises OSError with the kernel's errno when clone3 fails (e.g. EACCES for a cgroup it may not
    enter, ENOSYS on kernels before 5.7 for CLONE_INTO_CGROUP, E2BIG on kernels before 5.3).
    """
    _require_single_thread("clone_child")
    args = _ffi.new("struct clone_args *")
    pidfd_out = _ffi.new("int *", -1)
    args.flags = (flags | CLONE_PIDFD | (CLONE_INTO_CGROUP if cgroup_fd is not None else 0)
                  | (CLONE_PARENT if sibling else 0))
    args.pidfd = int(_ffi.cast("uintptr_t", pidfd_out))
    # With CLONE_PARENT the kernel takes the exit signal from the caller and refuses any other (EINVAL).
    args.exit_signal = 0 if sibling else int(signal.SIGCHLD)
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
    sibling: bool = False,
    rlimits: Sequence[tuple[int, int]] = (),
) -> Spawned:
    """Start ``argv`` through clone3 + execve, reporting exec failure to the caller.

    Promises: the child is inside ``cgroup_fd``'s cgroup from its first instruction; it keeps only the
    descriptors named in ``fds`` (target -> source in the parent), all others are closed; its signal
    dispositions and mask are defaults; credentials are dropped (groups, gid, uid, in that order) before
    exec, then each ``rlimits`` pair (resource, value) is set as its soft and hard limit (after the drop, so
    that an account already past RLIMIT_NPROC does not fail the exec, and an engine that is no longer root
    cannot raise them again: README "Limits"), and with ``no_new_privs`` it can never regain privileges. With ``userns_setup`` the child gets a
    new user namespace and waits until ``userns_setup(pid)`` (run in the parent, e.g. newuidmap) returns.
    With ``sibling`` the child is the caller's sibling (CLONE_PARENT; see ``clone_child``).
    Fails with OSError: from clone3 itself, or ``ExecFailed`` with the errno the child hit before exec
    (ENOENT for a missing executable, EPERM for a refused setuid, ...), in which case the child has already
    been reaped (``pid`` None), or, for a sibling, has exited and is named by ``pid`` for its parent to reap.
    RuntimeError (nothing is started) when the calling process has more than one thread: only a
    single-threaded process may spawn (the launchers do it in their helper process, README "Threads").
    """
    _require_single_thread("spawn")
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
            reset_signals()
            if new_session:
                os.setsid()
            place_fds(fd_map, keep=(err_w,))
            if credentials is not None:
                if credentials.groups is not None:
                    os.setgroups(list(credentials.groups))
                os.setresgid(credentials.gid, credentials.gid, credentials.gid)
                os.setresuid(credentials.uid, credentials.uid, credentials.uid)
            for number, value in rlimits:
                try:
                    resource.setrlimit(number, (value, value))
                except ValueError as e:  # CPython's form of EPERM (raising a hard limit) and EINVAL
                    raise OSError(_errno.EPERM, str(e)) from None
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
        child = clone_child(body, cgroup_fd=cgroup_fd, flags=flags, sibling=sibling)
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
        code = int(data or b"0") or _errno.EIO
        message = f"spawn {argv[0]!r}: {os.strerror(code)}"
        if sibling:
            # Not ours to reap: wait until it has exited (it _exits right after reporting), then name it.
            _wait_pidfd(child.pidfd)
            child.close()
            raise ExecFailed(code, message, pid=child.pid)
        os.waitpid(child.pid, 0)
        child.close()
        raise ExecFailed(code, message)
    return child


def _wait_pidfd(pidfd: int) -> None:
    """Block until the process behind ``pidfd`` has exited (the pidfd becomes readable), child or not."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    while not poller.poll():
        pass


def _open_fds() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))
