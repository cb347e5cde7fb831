"""The socket's file-system gate: who besides the owner can reach the controller's socket at all.

The controller's own check (`_access`: SO_PEERCRED at accept, then the grant) decides what a peer may do;
this gate decides who can connect(2) in the first place, so that a uid no grant names never gets a
connection (no connection slot, no byte parsed) and the controller is the second line, not the only one.
Connecting to a Unix socket needs search (x) on every directory of its path and write on the socket
(unix(7)). The socket directory is private to the owner (0700, `_socket_server`'s rule 1); with grants, the server
gives it and the socket POSIX access ACLs (acl(5)) naming exactly the granted uids and gids:

- the directory: the owner rwx, each granted uid and gid ``--x`` (search only: they cannot list it, create,
  rename or remove anything in it), mask ``--x``, the owning group and others nothing; mode shows 0710;
- the socket: the owner rw, each granted uid and gid ``-w-`` (connect), mask ``-w-``, others nothing;
  mode 0620. A granted user cannot hard-link it elsewhere (with fs.protected_hardlinks only its owner may
  link a file that is not a regular one), and a link would be the same inode with the same ACL anyway.

Who else can then connect: the owner, the granted uids and the members (primary or supplementary) of the
granted gids, and any process with CAP_DAC_OVERRIDE or a file-system uid of the owner (root, typically).
The last kind is why the controller checks every peer itself: it refuses those `channel` unless a grant
names them. Without grants nothing here runs: the directory stays 0700 and only the owner (and root)
can reach the socket, as before.

An ACL is the encoding of acl(5)'s ``system.posix_acl_access`` xattr (a little-endian version 2 header,
then (tag u16, perm u16, id u32) entries in tag order); a file system without ACLs refuses it
(EOPNOTSUPP), and then a controller with grants does not start (`SocketPathError` "no-acl"). Nothing here
follows a symlink: the directory is the fd the server checked, the socket a name in it that only the
owner can create.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Iterable

__all__ = ["ACL_XATTR", "GateError", "close_gate", "decode_acl", "encode_acl", "is_leftover_gate", "open_gate"]

ACL_XATTR = "system.posix_acl_access"
_VERSION = 2
_UNDEFINED = 0xFFFFFFFF
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
R, W, X = 4, 2, 1

Entry = tuple[int, int, int]  # (tag, perm, id)


class GateError(OSError):
    """The gate could not be set: the file system has no POSIX ACLs (`errno` EOPNOTSUPP), or another
    OSError from setxattr."""


def encode_acl(owner: int, uids: Iterable[int], gids: Iterable[int], perm: int) -> bytes:
    """The access ACL: owner `owner` (rwx bits), each of `uids` and `gids` `perm`, mask `perm`, the owning
    group and others nothing."""
    entries: list[Entry] = [(USER_OBJ, owner, _UNDEFINED)]
    entries += [(USER, perm, uid) for uid in sorted(set(uids))]
    entries.append((GROUP_OBJ, 0, _UNDEFINED))
    entries += [(GROUP, perm, gid) for gid in sorted(set(gids))]
    entries += [(MASK, perm, _UNDEFINED), (OTHER, 0, _UNDEFINED)]
    return struct.pack("<I", _VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def decode_acl(data: bytes) -> list[Entry]:
    """The entries of an access ACL xattr. Raises ValueError for one that is not version 2 or is cut."""
    if len(data) < 4 or (len(data) - 4) % 8 or struct.unpack_from("<I", data)[0] != _VERSION:
        raise ValueError("not a version 2 POSIX ACL")
    return [struct.unpack_from("<HHI", data, off) for off in range(4, len(data), 8)]


def open_gate(dir_fd: int, name: str, uids: Iterable[int], gids: Iterable[int]) -> None:
    """Let `uids` and `gids` reach the socket `name` in the directory `dir_fd` (module docstring): the
    socket's ACL first (nobody can reach it yet), then the directory's. Raises `GateError`."""
    uids, gids = tuple(uids), tuple(gids)
    try:
        # lsetxattr through the checked directory's fd: the socket's name is the final component, not followed.
        os.setxattr(f"/proc/self/fd/{dir_fd}/{name}", ACL_XATTR, encode_acl(R | W, uids, gids, W),
                    follow_symlinks=False)
        os.setxattr(dir_fd, ACL_XATTR, encode_acl(R | W | X, uids, gids, X))
    except OSError as exc:
        raise GateError(exc.errno, f"the socket's access ACL could not be set: {exc.strerror}") from None


def close_gate(dir_fd: int) -> None:
    """Take the directory back to plain 0700 (its access ACL removed). Raises OSError."""
    try:
        os.removexattr(dir_fd, ACL_XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
    os.fchmod(dir_fd, 0o700)


def is_leftover_gate(dir_fd: int, st: os.stat_result) -> bool:
    """The directory is a gate `open_gate` would make (a controller with grants that did not close, e.g.
    killed): mode 0710 where the 1 is an ACL mask of search only, others nothing. Anyone it lets in can
    only search: nobody but the owner can create or swap a name in it, which is what "private" protects."""
    if stat.S_IMODE(st.st_mode) != 0o710:
        return False
    try:
        entries = decode_acl(os.getxattr(dir_fd, ACL_XATTR))
    except (OSError, ValueError):
        return False
    tags = {tag: perm for tag, perm, _ in entries if tag in (MASK, OTHER)}
    return tags.get(MASK) == X and tags.get(OTHER) == 0
