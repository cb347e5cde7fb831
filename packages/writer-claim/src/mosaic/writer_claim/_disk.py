"""A claim's key directories on disk: how a revision is published and read, and the room a stop reserves.
`ClaimStore` decides what to publish; this module only does it, every call relative to the key directory's
fd (the store's module docstring has the layout and the rules).

1. Publication: ``open(.tmp-..., O_CREAT|O_EXCL)  write  fsync(file)  link(.tmp-..., r<n>.json)  fsync(dir)
   unlink(.tmp-...)``. link() fails with EEXIST when r<n>.json exists (`LostLink`): exactly one writer
   publishes each revision number, and a revision name only ever names complete, fsynced bytes. Each step is
   followed by the barrier hook (`Barrier`, `BARRIER_POINTS`).
2. A full disk: on the safety path (`RESERVE_STEPS`), a temporary file that cannot be written for want of
   room (ENOSPC, EDQUOT) is one of the claim's reserves (`make_reserves`), renamed and written into its
   allocated blocks, then published the same way. Nothing else draws on the reserve.
3. A revision is read with ``O_NOFOLLOW | O_NONBLOCK``, a regular file of at most `MAX_REVISION_BYTES`;
   anything else is `Unreadable`, never an error.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ._codec import MAX_REVISION_BYTES, RecordError, decode_revision, encode_revision
from ._core import Unreadable
from ._model import KeyKind, Revision, revision_name

# What the public modules show of this module; the rest is the package's own.
__all__ = ["BARRIER_POINTS", "Barrier", "BarrierHook", "ClaimWriteError", "RESERVE_REVISIONS"]

# Barrier points, in the order one publication passes them. "between-keys" comes after the first key of
# a two-key step is complete and before the second begins (W5: "and between the two keys").
BARRIER_POINTS = (
    "key-dir-created",
    "root-fsynced",
    "temp-created",
    "temp-written",
    "temp-fsynced",
    "linked",
    "dir-fsynced",
    "temp-unlinked",
    "between-keys",
)

# The highest revision number a name can carry (`revision_name`: 10 digits).
MAX_NUMBER = 9_999_999_999

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

# The steps that may draw on a claim's reserved room (module docstring): what a stop and a restart publish,
# and what records a spawned engine (once it runs, the claim must be able to say so).
RESERVE_STEPS = frozenset({"engine", "active", "uncertain", "stopping", "stopped", "adopt", "restart"})
# Reserve files per key: active (or the engine record), then one stop from active or uncertain (the
# uncertain revision a fence publishes, the stop's two phases, term and kill, and stopped or uncertain at
# its end).
RESERVE_REVISIONS = 5
# What a later revision may add to the one a reserve is sized from, besides a cohort reference (recorded at
# activation, at most MAX_COHORT_BYTES): a stop record, a proof reference, the engine fields, a writer.
RESERVE_MARGIN = 8 * 1024
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})


class ClaimWriteError(OSError):
    """A revision could not be published (the caller decides what that means; nothing half-written is ever
    visible, and the key keeps its last revision). Says exactly where: `key` ("seat" or "session") and its
    directory `dirname`, the lifecycle `step`, the claim and the revision `number`; `errno` and `strerror`
    are the OS error's (ENOSPC, EDQUOT, EIO, ...)."""

    def __init__(self, cause: OSError, *, key: str, dirname: str, step: str, claim_id: str | None,
                 number: int) -> None:
        name = errno.errorcode.get(cause.errno or 0, "unknown error")
        message = (f"the {key} key ({dirname}) could not be written: {step}, revision {number} of {claim_id}: "
                   f"{name} ({cause.strerror or cause})")
        super().__init__(cause.errno, message)
        self.key = key
        self.dirname = dirname
        self.step = step
        self.claim_id = claim_id
        self.number = number

    def __str__(self) -> str:
        return str(self.strerror)


def reserve_name(claim_id: str, index: int) -> str:
    """The name of a claim's `index`-th reserve file in a key directory (a dot name no reader looks at)."""
    return f".reserve-{claim_id}-{index}"


@dataclass(frozen=True)
class Barrier:
    """One file-system step just completed by the store.

    `point` is one of BARRIER_POINTS; `step` the lifecycle step being published (reserve, spawn-marker,
    engine, active, generation, stopping, stopped, uncertain, follow-up, adopt, take-over, restart); `key`
    the key directory; `name` the file the step touched (the temporary file, or the revision for `linked`,
    whose source is `source`); `data` the bytes written at temp-written.
    """

    point: str
    step: str
    key: str
    claim_id: str | None
    name: str | None = None
    source: str | None = None
    data: bytes | None = None


BarrierHook = Callable[[Barrier], None]


class Hook(Protocol):
    """The store's barrier call for one step of a publication (`Barrier`'s fields)."""

    def __call__(self, point: str, step: str, key: str, claim_id: str | None, *, name: str | None = None,
                 source: str | None = None, data: bytes | None = None) -> None: ...


class LostLink(Exception):
    """link() found the revision name taken: another writer published first."""


def publish(fd: int, rev: Revision, step: str, hook: Hook | None) -> bytes:
    """Publish `rev` at its number in the key directory `fd` (module rule 1), calling `hook` (None: no
    barrier) after each step; return the bytes published, or raise `LostLink` when the name is taken."""
    data = encode_revision(rev)
    key = rev.dirname
    target = revision_name(rev.number)
    try:
        temp = _write_temp(fd, rev, step, data, hook)
    except OSError as exc:
        if exc.errno not in NO_ROOM or step not in RESERVE_STEPS:
            raise
        temp = _write_reserved(fd, rev, step, data, exc, hook)
    try:
        os.link(temp, target, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
    except FileExistsError:
        unlink_quietly(temp, fd)
        raise LostLink(target) from None
    except Exception:
        unlink_quietly(temp, fd)
        raise
    if hook is not None:
        hook("linked", step, key, rev.claim_id, name=target, source=temp)
    os.fsync(fd)
    if hook is not None:
        hook("dir-fsynced", step, key, rev.claim_id)
    # The temporary name is garbage now. Its unlink is made durable by the next fsync of this
    # directory; a crash before that leaves a .tmp- file that no reader looks at.
    os.unlink(temp, dir_fd=fd)
    if hook is not None:
        hook("temp-unlinked", step, key, rev.claim_id, name=temp)
    return data

def _write_temp(fd: int, rev: Revision, step: str, data: bytes, hook: Hook | None) -> str:
    """The revision's bytes in a new temporary file, fsynced; its name. On failure the file is gone."""
    key = rev.dirname
    temp = f".tmp-{rev.claim_id}-{os.getpid()}-{os.urandom(4).hex()}"
    tfd = os.open(temp, TEMP_FLAGS, 0o600, dir_fd=fd)
    try:
        if hook is not None:
            hook("temp-created", step, key, rev.claim_id, name=temp)
        view = memoryview(data)
        while view:
            view = view[os.write(tfd, view):]
        if hook is not None:
            hook("temp-written", step, key, rev.claim_id, name=temp, data=data)
        os.fsync(tfd)
        if hook is not None:
            hook("temp-fsynced", step, key, rev.claim_id, name=temp)
    except Exception:
        os.close(tfd)
        unlink_quietly(temp, fd)
        raise
    os.close(tfd)
    return temp

def _write_reserved(fd: int, rev: Revision, step: str, data: bytes, cause: OSError,
                    hook: Hook | None) -> str:
    """The file system had no room for the temporary file: take one of the claim's reserves (renamed to
    a temporary name, so two writers never share one) and write the revision into its allocated blocks,
    truncate it to the revision's length and fsync it; its temporary name. Raises `cause` when no
    reserve is left; on a failure after the rename the file is gone (that reserve with it)."""
    key = rev.dirname
    for index in range(1, RESERVE_REVISIONS + 1):
        temp = f".tmp-{rev.claim_id}-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            os.rename(reserve_name(rev.claim_id, index), temp, src_dir_fd=fd, dst_dir_fd=fd)
        except FileNotFoundError:
            continue
        try:
            if hook is not None:
                hook("temp-created", step, key, rev.claim_id, name=temp)
            tfd = os.open(temp, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            try:
                done = 0
                while done < len(data):
                    done += os.pwrite(tfd, data[done:], done)
                os.ftruncate(tfd, len(data))
                if hook is not None:
                    hook("temp-written", step, key, rev.claim_id, name=temp, data=data)
                os.fsync(tfd)
                if hook is not None:
                    hook("temp-fsynced", step, key, rev.claim_id, name=temp)
            finally:
                os.close(tfd)
        except Exception:
            unlink_quietly(temp, fd)
            raise
        return temp
    raise cause


def make_reserves(fd: int, claim_id: str, size: int, count: int) -> None:
    """Make `count` reserve files of `size` bytes for `claim_id` in the key directory `fd` (those that exist
    are kept), each preallocated. Not fsynced: the room is for a full disk, not for power loss (a power loss
    may take it back; `reserve_space` on the adopted claim tops it up), and a launch waits for it. Raises
    OSError."""
    for index in range(1, count + 1):
        try:
            rfd = os.open(reserve_name(claim_id, index), TEMP_FLAGS, 0o600, dir_fd=fd)
        except FileExistsError:
            continue
        try:
            preallocate(rfd, size)
        except BaseException:
            os.close(rfd)
            unlink_quietly(reserve_name(claim_id, index), fd)
            raise
        os.close(rfd)


def read_revision(fd: int, key: KeyKind, dirname: str, number: int,
                  known: tuple[bytes, Revision] | None = None) -> Revision | Unreadable:
    """Revision `number` of the key directory `fd`, or why it cannot be read (never raises for what it
    finds: an unreadable head is a finding, W16). `known` is (bytes, revision) a store published at this
    place: when the file's bytes are exactly those, that revision is what decoding them gives (the
    canonical encoding of a checked revision), so it is returned without decoding them again; any other
    bytes are decoded and checked."""
    name = revision_name(number)
    try:
        rfd = os.open(name, READ_FLAGS, dir_fd=fd)
    except OSError as e:
        return Unreadable(number, f"cannot open {name}: {os.strerror(e.errno or 0)}")
    try:
        st = os.fstat(rfd)
        if not stat.S_ISREG(st.st_mode):
            return Unreadable(number, f"{name} is not a regular file")
        chunks: list[bytes] = []
        total = 0
        while total <= MAX_REVISION_BYTES:
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        data = b"".join(chunks)
    except OSError as e:
        return Unreadable(number, f"cannot read {name}: {os.strerror(e.errno or 0)}")
    finally:
        os.close(rfd)
    if known is not None and data == known[0]:
        return known[1]
    try:
        return decode_revision(data, key=key, dirname=dirname, number=number)
    except RecordError as e:
        return Unreadable(number, str(e))


class Undecided(Exception):
    """An existence check failed with something else than ENOENT: the listing decides instead."""


def exists(dir_fd: int, number: int) -> bool:
    """Whether the name of revision `number` exists in `dir_fd`, whatever it is (a symlink or a directory
    there exists too, and reads as unreadable, as it does in a listing)."""
    if number > MAX_NUMBER:
        return False
    try:
        os.stat(revision_name(number), dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise Undecided(str(e)) from e
    return True


def preallocate(fd: int, size: int) -> None:
    """Allocate `size` bytes of blocks for the file `fd` (posix_fallocate; where the file system cannot, by
    writing zeros). Raises OSError (ENOSPC when there is no room)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    zeros = bytes(min(size, 1 << 16))
    done = 0
    while done < size:
        done += os.pwrite(fd, zeros[:size - done], done)


def drop_reserves(dir_fd: int, claim_id: str) -> None:
    """Remove what is left of a claim's reserves in a key directory (looked up first: where there are none,
    and there are none unless `reserve_space` made them, nothing is removed)."""
    for index in range(1, RESERVE_REVISIONS + 1):
        name = reserve_name(claim_id, index)
        try:
            os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        unlink_quietly(name, dir_fd)


def unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError as e:
        if e.errno != errno.ENOENT:
            raise
