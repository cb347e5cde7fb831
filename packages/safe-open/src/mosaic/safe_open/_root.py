"""Opening directories and session files beneath a root that was resolved once.

The seed (src/safe-fs.mjs, README "Opening a file") lstat-ed every component from the project root down,
opened the file by path, and checked the components again afterwards: "Node has no openat, so a directory
swapped between the checks and the open is detected afterwards, not prevented". Here the root is opened
once and every later lookup starts from that directory fd, so a component swapped for a symlink is refused
by the kernel during the lookup itself:

- openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV, or
- where the kernel lacks openat2 (ENOSYS), a walk that opens one component at a time with
  dir_fd + O_NOFOLLOW | O_DIRECTORY and checks each new fd with fstat (a directory, on the root's
  mount).

Session files keep the seed's rules: a regular *.jsonl directly in the sessions directory, lstat first,
then opened O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, and the fd's (dev, ino) must equal the lstat.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

from ._kernel import RESOLVE_FLAGS, openat2, openat2_probe
from ._refusal import SafeOpenRefusal

# What mosaic.safe_open.root offers (it star-imports this list); the kernel probe's answers
# (`openat2_available`, `openat2_status`) are mosaic.safe_open.internals'.
__all__ = ["MAX_SESSION_FILE_BYTES", "Method", "OpenedFile", "ResolvedMethod", "Root", "is_session_name", "open_root"]

Method = Literal["auto", "openat2", "walk"]
ResolvedMethod = Literal["openat2", "walk"]

# Seed README, refusal table: too-large is "over 256 MiB"; exactly 256 MiB is accepted.
MAX_SESSION_FILE_BYTES = 256 * 1024 * 1024

SESSION_SUFFIX = ".jsonl"

# Directories are opened for reading (listdir needs that) and never inherited by a child process.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
# Seed README, "Opening a file": O_RDONLY | O_NOFOLLOW | O_NONBLOCK, and O_CLOEXEC so no child inherits it. O_NONBLOCK
# is what keeps a FIFO swapped in after the lstat from blocking the open until a writer appears.
_SESSION_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# The walk's per-component open: O_NOFOLLOW refuses a symlinked component (ENOTDIR or ELOOP), magic
# links included, since those are symlinks too.
_WALK_FLAGS = _DIR_FLAGS | os.O_NOFOLLOW

# openat2(2): EAGAIN means the kernel could not rule out a race with rename or mount during the lookup
# and suggests a retry. Bounded: a lookup that keeps racing is refused as unsafe-path.
_EAGAIN_RETRIES = 8

# How an OSError from a lookup or open maps to the seed's codes ("Refusal codes").
_UNSAFE_ERRNOS = frozenset(
    {
        errno.ELOOP,  # a symlink where none may be (O_NOFOLLOW, RESOLVE_NO_SYMLINKS)
        errno.EXDEV,  # escaping the root or crossing a mount (RESOLVE_BENEATH, RESOLVE_NO_XDEV)
        errno.ENOTDIR,  # a component that is not a directory (or a symlink under O_NOFOLLOW|O_DIRECTORY)
        errno.EISDIR,
        errno.ENXIO,  # open(2) of a socket, or a device with no driver
        errno.ENODEV,
        errno.ENAMETOOLONG,
        errno.EAGAIN,  # openat2 kept racing with rename/mount
    }
)
_UNREADABLE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EIO})
_UNAVAILABLE_ERRNOS = frozenset({errno.ENOENT, errno.ESTALE})


def _errname(err: int | None) -> str:
    return errno.errorcode.get(err or 0, str(err))


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "an unknown kind of file"


def is_session_name(name: str) -> bool:
    """True when `name` may name a session file: one path component matching the glob *.jsonl.

    As in a shell glob, `*` does not match a leading dot, so hidden files are not session files. No
    "/", no NUL, not "." or "..", and something before the suffix.
    """
    return (
        isinstance(name, str)
        and name.endswith(SESSION_SUFFIX)
        and len(name) > len(SESSION_SUFFIX)
        and not name.startswith(".")
        and "/" not in name
        and "\0" not in name
    )


def _components(rel: str) -> list[str]:
    """Split a relative path into components, or refuse it as unsafe-path.

    "" and "." mean the root itself; empty and "." components are dropped. ".." is refused outright,
    even where it would stay beneath the root: the walk could not tell a harmless ".." from an escape
    without resolving it, and RESOLVE_BENEATH answers EAGAIN when ".." races a rename.
    """
    if not isinstance(rel, str):
        raise TypeError(f"a relative path must be str, not {type(rel).__name__}")
    if "\0" in rel:
        raise SafeOpenRefusal("unsafe-path", f"{rel!r} contains a NUL byte")
    if rel.startswith("/"):
        raise SafeOpenRefusal("unsafe-path", f"{rel!r} is absolute; paths are relative to the root")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise SafeOpenRefusal("unsafe-path", f"{rel!r} contains '..'")
    return parts


def _mount_id(fd: int) -> int | None:
    """The mount id of `fd` from /proc/self/fdinfo (Linux 3.15+), or None where /proc cannot tell.

    st_dev alone misses a bind mount of the same filesystem; the mount id does not.
    """
    try:
        with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
            for line in f:
                if line.startswith("mnt_id:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class OpenedFile:
    """A session file opened by `Root.open_session_file`, with the identity and size of the opened fd.

    `dev`, `ino`, `size` and `mtime_ns` come from fstat of `fd` after the open, and (dev, ino) equals the
    lstat taken before it. The caller owns `fd`: close it with `close()` or a `with` block. `close()` is
    idempotent, so a closed fd number that the process reuses is never closed twice.
    """

    fd: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    name: str
    _closed: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the fd (once)."""
        if not self._closed:
            object.__setattr__(self, "_closed", True)
            os.close(self.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Root:
    """A directory resolved once and held open; every lookup beneath it starts from `fd`.

    `path` is the real path the root resolved to when it was opened (informational: it is never used to
    reach anything). `method` is the resolution that actually runs: "openat2" or "walk". After the root
    directory is removed or replaced, lookups refuse `unavailable`: the held fd still names the old,
    removed directory, and nothing is ever looked up by `path` again.

    Every method refuses with `SafeOpenRefusal` (code from `SafeOpenRefusal.CODES`). A closed root raises
    ValueError (a programming error). Resource errors (EMFILE, ENOMEM, ...) propagate as OSError.
    """

    fd: int
    path: str
    method: ResolvedMethod

    def __init__(self, fd: int, path: str, method: ResolvedMethod) -> None:
        st = os.fstat(fd)
        self.fd = fd
        self.path = path
        self.method = method
        self._dev = st.st_dev
        self._mnt_id = _mount_id(fd)
        self._closed = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"fd={self.fd}"
        return f"Root({self.path!r}, method={self.method!r}, {state})"

    # -- lifecycle -------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the held directory fd (once)."""
        if not self._closed:
            self._closed = True
            os.close(self.fd)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"{self!r} is closed")

    # -- refusals --------------------------------------------------------------------------------------

    def _root_gone(self) -> bool:
        try:
            return os.fstat(self.fd).st_nlink == 0
        except OSError:
            return True

    def _refusal(self, err: OSError, what: str) -> SafeOpenRefusal | OSError:
        """The refusal for an OSError met while reaching `what`, or the OSError itself when it is not a
        property of the path (EMFILE, ENOMEM, EINVAL, ...)."""
        detail = f"{what}: {os.strerror(err.errno or 0)} ({_errname(err.errno)})"
        if err.errno in _UNAVAILABLE_ERRNOS:
            if self._root_gone():
                return SafeOpenRefusal("unavailable", f"the root {self.path} no longer exists ({what})")
            return SafeOpenRefusal("unavailable", detail)
        if err.errno in _UNREADABLE_ERRNOS:
            return SafeOpenRefusal("unreadable", detail)
        if err.errno in _UNSAFE_ERRNOS:
            return SafeOpenRefusal("unsafe-path", detail)
        return err

    # -- resolution ------------------------------------------------------------------------------------

    def _check_component(self, fd: int, what: str) -> None:
        """The walk's fstat check of one freshly opened component: a directory on the root's mount.

        O_NOFOLLOW | O_DIRECTORY already refused symlinks and non-directories; what this adds is
        RESOLVE_NO_XDEV's rule, which only the opened fd can answer (a mount point is a real directory).
        """
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise SafeOpenRefusal("unsafe-path", f"{what} is {_kind(st.st_mode)}, not a directory")
        if st.st_dev != self._dev:
            raise SafeOpenRefusal("unsafe-path", f"{what} crosses a mount point (another device)")
        if self._mnt_id is not None:
            mnt_id = _mount_id(fd)
            if mnt_id is not None and mnt_id != self._mnt_id:
                raise SafeOpenRefusal("unsafe-path", f"{what} crosses a mount point (another mount)")

    def _resolve_walk(self, parts: list[str]) -> int:
        cur = os.open(".", _DIR_FLAGS, dir_fd=self.fd)
        try:
            for i, part in enumerate(parts):
                what = "/".join(parts[: i + 1])
                try:
                    nxt = os.open(part, _WALK_FLAGS, dir_fd=cur)
                except OSError as e:
                    raise self._refusal(e, what) from None
                try:
                    self._check_component(nxt, what)
                except BaseException:
                    os.close(nxt)
                    raise
                os.close(cur)
                cur = nxt
        except BaseException:
            os.close(cur)
            raise
        return cur

    def _resolve_openat2(self, parts: list[str]) -> int:
        rel = "/".join(parts) or "."
        for _ in range(_EAGAIN_RETRIES):
            try:
                return openat2(self.fd, rel, _DIR_FLAGS, RESOLVE_FLAGS)
            except OSError as e:
                if e.errno != errno.EAGAIN:
                    raise self._refusal(e, rel) from None
        raise SafeOpenRefusal("unsafe-path", f"{rel}: the lookup kept racing with a rename or mount (EAGAIN)")

    def _open_parts(self, parts: list[str]) -> int:
        self._check_open()
        fd = self._resolve_openat2(parts) if self.method == "openat2" else self._resolve_walk(parts)
        try:
            if os.fstat(fd).st_nlink == 0:
                what = "/".join(parts) or "the root"
                raise SafeOpenRefusal("unavailable", f"{what} was removed (the root is {self.path})")
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- public operations -----------------------------------------------------------------------------

    def open_dir(self, rel: str) -> int:
        """A new O_DIRECTORY fd for `rel` beneath the root ("" or "." is the root itself); the caller
        closes it.

        Refuses unsafe-path for a symlink or magic link anywhere on the way, "..", an absolute path, a
        non-directory or a mount crossing; unreadable for EACCES on a directory; unavailable when a
        component or the root itself no longer exists.
        """
        return self._open_parts(_components(rel))

    def listdir(self, rel: str) -> list[str]:
        """The names in directory `rel` beneath the root (unsorted, as the kernel returns them).

        Same refusals as `open_dir`. A removed directory refuses unavailable rather than reading empty.
        """
        fd = self.open_dir(rel)
        try:
            try:
                return os.listdir(fd)
            except OSError as e:
                raise self._refusal(e, rel or ".") from None
        finally:
            os.close(fd)

    def lstat(self, rel: str) -> os.stat_result:
        """lstat of `rel` beneath the root: the final component is not followed, so a symlink is reported
        as one. The directories above it are resolved as in `open_dir` (a symlinked or mount-crossing
        directory refuses unsafe-path), and a final component on another mount refuses unsafe-path.
        """
        parts = _components(rel)
        if not parts:
            self._check_open()
            st = os.fstat(self.fd)
            if st.st_nlink == 0:
                raise SafeOpenRefusal("unavailable", f"the root {self.path} no longer exists")
            return st
        dfd = self._open_parts(parts[:-1])
        try:
            try:
                st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
            except OSError as e:
                raise self._refusal(e, "/".join(parts)) from None
        finally:
            os.close(dfd)
        if st.st_dev != self._dev:
            raise SafeOpenRefusal("unsafe-path", f"{'/'.join(parts)} is on another mount")
        return st

    def open_session_file(
        self,
        sessions_rel: str,
        name: str,
        *,
        _between_lstat_and_open: Callable[[int, str], None] | None = None,
    ) -> OpenedFile:
        """Open session file `name` directly in directory `sessions_rel` beneath the root, read-only.

        Promises (seed README, "Opening a file"): `name` is one component matching *.jsonl; the file was a
        regular file at its lstat; it is opened O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, so neither a
        symlink nor a FIFO swapped in after the lstat is followed or waited on; the opened fd's (dev, ino)
        equals that lstat; its size is at most 256 MiB.

        Refuses unsafe-path (bad name, symlink, directory, FIFO, socket, device, swapped file, or any
        `open_dir` refusal of `sessions_rel`), too-large (over 256 MiB), unreadable (EACCES on the file or
        a directory beneath the root) and unavailable (the file, a directory or the root is gone).

        `_between_lstat_and_open(dir_fd, name)` is a test hook that runs between the lstat and the open.
        """
        if not is_session_name(name):
            raise SafeOpenRefusal(
                "unsafe-path", f"{name!r} is not a session file name (*.jsonl, one component)"
            )
        dfd = self.open_dir(sessions_rel)
        try:
            return self._open_session_in(dfd, sessions_rel, name, _between_lstat_and_open)
        finally:
            os.close(dfd)

    def _open_session_in(
        self, dfd: int, sessions_rel: str, name: str, hook: Callable[[int, str], None] | None
    ) -> OpenedFile:
        what = f"{sessions_rel.rstrip('/')}/{name}" if sessions_rel not in ("", ".") else name
        try:
            before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except OSError as e:
            raise self._refusal(e, what) from None
        if not stat.S_ISREG(before.st_mode):
            raise SafeOpenRefusal("unsafe-path", f"{what} is {_kind(before.st_mode)}, not a regular file")
        if before.st_size > MAX_SESSION_FILE_BYTES:
            raise SafeOpenRefusal("too-large", f"{what} is {before.st_size} bytes, over 256 MiB")
        if hook is not None:
            hook(dfd, name)
        try:
            fd = os.open(name, _SESSION_FLAGS, dir_fd=dfd)
        except OSError as e:
            raise self._refusal(e, what) from None
        try:
            after = os.fstat(fd)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
                raise SafeOpenRefusal(
                    "unsafe-path", f"{what} was swapped between its lstat and its open ((dev, ino) differs)"
                )
            if not stat.S_ISREG(after.st_mode):
                raise SafeOpenRefusal("unsafe-path", f"{what} is {_kind(after.st_mode)}, not a regular file")
            if after.st_size > MAX_SESSION_FILE_BYTES:
                raise SafeOpenRefusal("too-large", f"{what} is {after.st_size} bytes, over 256 MiB")
        except BaseException:
            os.close(fd)
            raise
        return OpenedFile(
            fd=fd,
            dev=after.st_dev,
            ino=after.st_ino,
            size=after.st_size,
            mtime_ns=after.st_mtime_ns,
            name=name,
        )


def openat2_available() -> bool:
    """True when the running kernel answers openat2 (probed once per process)."""
    return openat2_probe()[0]


def openat2_status() -> str:
    """What the openat2 probe saw, for reports ("openat2 probe opened / with O_PATH", ...)."""
    return openat2_probe()[1]


def _resolve_method(method: Method) -> ResolvedMethod:
    if method == "walk":
        return "walk"
    if method == "openat2":
        if not openat2_available():
            raise OSError(errno.ENOSYS, f"openat2 requested but unavailable: {openat2_status()}")
        return "openat2"
    if method == "auto":
        return "openat2" if openat2_available() else "walk"
    raise ValueError(f"method must be 'auto', 'openat2' or 'walk', not {method!r}")


def _real_path(fd: int, path: str | os.PathLike[str]) -> str:
    """The real path of the directory `fd` holds.

    The kernel's own answer (/proc/self/fd) comes first; realpath(3) of `path` is the fallback where /proc
    is missing. A candidate must stat to the fd's (dev, ino). When the caller may not search the
    directories above the root (it reached the root through an inherited fd's /proc link), stat fails with
    EACCES and the kernel's answer is taken unverified, since the kernel computed it from the fd itself.
    """
    st = os.fstat(fd)
    if st.st_nlink == 0:
        raise SafeOpenRefusal("unavailable", f"root {os.fspath(path)!r} was removed while it was opened")
    proc: str | None = None
    try:
        proc = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    for real in ([proc] if proc else []) + [os.path.realpath(path)]:
        if not real.startswith("/"):
            continue
        try:
            rst = os.stat(real)
        except PermissionError:
            if real == proc:
                return real
            continue
        except OSError:
            continue
        if (rst.st_dev, rst.st_ino) == (st.st_dev, st.st_ino):
            return real
    raise SafeOpenRefusal("unsafe-path", f"{os.fspath(path)!r} moved while it was being resolved")


def open_root(path: str | os.PathLike[str], *, method: Method = "auto") -> Root:
    """Resolve `path` once and hold an O_DIRECTORY fd on it.

    `path` may itself be a symlink (the seed's compatibility path to the checkout): it is followed here,
    once, and never again; `Root.path` is the real path. `method` picks the resolution beneath the root:
    "auto" uses openat2 when the kernel has it and the component walk otherwise; "openat2" raises
    OSError(ENOSYS) on a kernel without it; "walk" forces the fallback.

    Refuses SafeOpenRefusal unavailable (missing), unreadable (EACCES on the root or a directory above
    it), unsafe-path (not a directory, a symlink loop).
    """
    resolved = _resolve_method(method)
    shown = os.fspath(path)
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError as e:
        detail = f"root {shown!r}: {os.strerror(e.errno or 0)} ({_errname(e.errno)})"
        if e.errno in _UNAVAILABLE_ERRNOS:
            raise SafeOpenRefusal("unavailable", detail) from None
        if e.errno in _UNREADABLE_ERRNOS:
            raise SafeOpenRefusal("unreadable", detail) from None
        if e.errno in _UNSAFE_ERRNOS:
            raise SafeOpenRefusal("unsafe-path", detail) from None
        raise
    try:
        return Root(fd, _real_path(fd, path), resolved)
    except BaseException:
        os.close(fd)
        raise
