"""The controller's listening socket: where it may live, how it is bound, what is at a socket path, and who
connected (rules 1 and 7 of `_socket_server.py`).

1. The socket lives in a private directory: a directory (not a symlink), owned by this uid, mode exactly
   0700 (or the gate a controller that did not close left: 0710, an ACL of search only, which is reset to
   0700 first). Anything else is refused (`SocketPathError`) before a socket exists. The directory is
   opened once (``O_NOFOLLOW | O_DIRECTORY``), checked through that fd, and the socket is bound through the
   same fd (``/proc/self/fd/N/name``), so the directory checked is the directory bound in.
2. An existing path is refused, never unlinked, with one exception, as tmux and systemd do: a socket nobody
   accepts on (a connect gets ECONNREFUSED: what a controller killed without its `aclose` leaves) is
   removed and the bind tried once more; a socket something accepts on refuses "live" (`socket_state`).
   `Listener.close` unlinks only the socket file this listener created (same inode).
3. With `reach` (the granted uids and gids) the socket and its directory get ACLs that let exactly those
   reach the socket (`_gate`), set after bind and before listen; the directory goes back to 0700
   at close.
4. The peer's credentials are read once, right after accept(2) (`read_peer`: SO_PEERCRED, and
   SO_PEERGROUPS when a gid is granted).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
import struct

from ..core._access import MAX_PEER_GROUPS
from ..core._io import Peer
from ._gate import GateError, close_gate, is_leftover_gate, open_gate

__all__ = ["Listener", "SocketPathError", "read_peer", "socket_state"]

logger = logging.getLogger("mosaic.controller.server")

# Longest sun_path a client can connect to: 108 bytes including the NUL (unix(7)).
_MAX_SUN_PATH = 107
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux 4.13 (asm-generic; CPython 3.11 lacks the name)
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class SocketPathError(Exception):
    """The socket path cannot be served safely. `reason` is one of: "not-absolute", "bad-name",
    "too-long", "missing", "not-a-directory", "symlink", "not-owned", "not-private", "exists" (a
    path that is not a socket nobody accepts on), "live" (a socket something accepts on: another server
    serves it), "no-proc", "no-acl"; `path` is the path given."""

    def __init__(self, reason: str, path: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path


def read_peer(sock: socket.socket, *, groups: bool = True) -> Peer | None:
    """What the kernel recorded of the process that connected `sock` (module rule 4): SO_PEERCRED's effective uid,
    gid and pid, and with `groups` SO_PEERGROUPS' supplementary groups (else, and when there are more than
    `MAX_PEER_GROUPS`, the buffer CPython allows, None: unread, which only gid grants would look at). None
    when the credentials cannot be read (never seen on a Unix socket; the core refuses it `channel`)."""
    try:
        pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except (OSError, struct.error):
        return None
    if not groups:
        return Peer(uid, gid, pid, None)
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, _SO_PEERGROUPS, 4 * MAX_PEER_GROUPS)
        found: tuple[int, ...] | None = struct.unpack(f"{len(raw) // 4}I", raw[:len(raw) // 4 * 4])
    except OSError:  # ERANGE: more groups than the buffer holds; ENOPROTOOPT: a kernel before 4.13
        found = None
    return Peer(uid, gid, pid, found)


class Listener:
    """A socket bound and listening in its checked private directory (module rules 1-3). Make it with
    `bind`; `close` stops it and removes what it made."""

    def __init__(self, socket_path: str, sock: socket.socket, dir_fd: int, name: str, sock_id: tuple[int, int],
                 gate_open: bool) -> None:
        self.socket_path = socket_path
        self.sock = sock
        self._dir_fd: int | None = dir_fd
        self._name = name
        self._sock_id = sock_id
        self._gate_open = gate_open

    @classmethod
    def bind(cls, socket_path: str, *, reach: tuple[tuple[int, ...], tuple[int, ...]], backlog: int) -> Listener:
        """Check the directory, bind the socket (refusing an existing path but a stale socket), open its gate
        to `reach` and listen; the socket is non-blocking.

        Raises `SocketPathError` for a path that cannot be served safely (see its reasons; "no-acl" when
        `reach` names someone and the file system has no POSIX ACLs), `OSError` for other failures of
        bind/listen. Nothing is left behind on failure (the directory back at 0700)."""
        dir_fd, name = _open_private_dir(socket_path)
        sock: socket.socket | None = None
        bound = gate_open = False
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # Bound through the checked directory's fd: no swap between the check and the bind.
            through = f"/proc/self/fd/{dir_fd}/{name}"
            try:
                sock.bind(through)
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EEXIST):
                    raise
                _remove_stale(socket_path, dir_fd, name)  # or raises SocketPathError ("exists", "live")
                try:
                    sock.bind(through)
                except OSError as again:
                    if again.errno in (errno.EADDRINUSE, errno.EEXIST):  # another server bound it meanwhile
                        raise SocketPathError("exists", socket_path,
                                              f"{socket_path} was bound again while a stale socket there "
                                              "was removed") from None
                    raise
            bound = True
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if any(reach):
                gate_open = True  # first: close_gate also undoes a gate set half-way
                try:
                    open_gate(dir_fd, name, *reach)
                except GateError as exc:
                    if exc.errno == errno.EOPNOTSUPP:
                        raise SocketPathError("no-acl", socket_path, "grants need POSIX ACLs to let their "
                                              "uids reach the socket; this file system has none") from None
                    raise
            sock.listen(backlog)
            sock.setblocking(False)
        except BaseException:
            if sock is not None:
                sock.close()
            if bound:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            if gate_open:
                with contextlib.suppress(OSError):
                    close_gate(dir_fd)
            os.close(dir_fd)
            raise
        return cls(socket_path, sock, dir_fd, name, (st.st_dev, st.st_ino), gate_open)

    def close(self) -> None:
        """Close the socket, unlink the socket file if it is still the one bound here, take the directory
        back to 0700. Idempotent; failures are logged, never raised."""
        self.sock.close()
        dir_fd, self._dir_fd = self._dir_fd, None
        if dir_fd is None:
            return
        try:
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(self._name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._sock_id:
                    os.unlink(self._name, dir_fd=dir_fd)
        except OSError as exc:
            logger.warning("could not remove socket %s: %s", self.socket_path, exc)
        finally:
            if self._gate_open:
                self._gate_open = False
                try:
                    close_gate(dir_fd)
                except OSError as exc:
                    logger.warning("could not take %s back to 0700: %s", os.path.dirname(self.socket_path), exc)
            os.close(dir_fd)


def _remove_stale(socket_path: str, dir_fd: int, name: str) -> None:
    """The bind found `name` taken. A socket nobody accepts on (connect: ECONNREFUSED; a controller killed
    before its `aclose` leaves one) is unlinked, by the inode the probe saw, and the caller binds again;
    anything else raises `SocketPathError`: "live" for a socket something accepts on, "exists" for whatever
    else is there (never removed). The window between the probe and the unlink is tmux's and systemd's
    too: a server that binds the name in it loses its name, never its socket."""
    state, inode = _probe(dir_fd, name)
    if state == "live":
        raise SocketPathError("live", socket_path, f"{socket_path} is served: a connect there was accepted")
    if state != "stale":
        raise SocketPathError("exists", socket_path,
                              f"{socket_path} exists and is not a socket nobody serves; it is never replaced")
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if (st.st_dev, st.st_ino) == inode:
            os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass  # gone meanwhile: the bind may go on
    logger.warning("removed the stale socket %s: nothing accepts on it (ECONNREFUSED), its server is gone",
                   socket_path)


def socket_state(socket_path: str) -> str:
    """What is at a socket path now: "absent"; "live", a socket something accepts on (a connect is accepted,
    or the listener's backlog is full); "stale", a socket nobody accepts on (a connect gets ECONNREFUSED:
    what a server killed before it could unlink leaves); "other" for anything else (not a socket, or a
    connect that fails otherwise, EACCES say: never taken as stale). Never raises for what it finds.

    The lifecycle asks this before it touches a claim, so a second controller for a placement another
    controller serves refuses `already-active` with nothing written; the bind asks again (`SocketServer.start`)
    before it removes a stale socket."""
    directory, name = os.path.split(socket_path)
    try:
        dir_fd = os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return "absent"
    try:
        return _probe(dir_fd, name)[0]
    finally:
        os.close(dir_fd)


def _probe(dir_fd: int, name: str) -> tuple[str, tuple[int, int] | None]:
    """`socket_state` of `name` in the directory `dir_fd`, and the (dev, ino) it saw there."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return "absent", None
    except OSError:
        return "other", None
    inode = (st.st_dev, st.st_ino)
    if not stat.S_ISSOCK(st.st_mode):
        return "other", inode
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.setblocking(False)
        try:
            probe.connect(f"/proc/self/fd/{dir_fd}/{name}")
        except (BlockingIOError, InterruptedError):
            return "live", inode  # EAGAIN: a listener whose backlog is full is still a listener
        except ConnectionRefusedError:
            return "stale", inode
        except FileNotFoundError:
            return "absent", None
        except OSError:
            return "other", inode
        return "live", inode
    finally:
        probe.close()


def _open_private_dir(socket_path: str) -> tuple[int, str]:
    """Open the socket's directory without following a symlink and check it is private (a directory,
    owned by this uid, mode 0700, or an earlier server's gate, reset to 0700). Returns (dir fd, socket
    name); raises `SocketPathError`."""
    if not os.path.isabs(socket_path):
        raise SocketPathError("not-absolute", socket_path, f"socket path {socket_path!r} is not absolute")
    if len(os.fsencode(socket_path)) > _MAX_SUN_PATH:
        raise SocketPathError("too-long", socket_path,
                              f"socket path is {len(os.fsencode(socket_path))} bytes; clients can connect "
                              f"to at most {_MAX_SUN_PATH}")
    directory, name = os.path.split(socket_path)
    if name in ("", ".", ".."):
        raise SocketPathError("bad-name", socket_path, f"socket path {socket_path!r} names no file")
    try:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SocketPathError("missing", socket_path, f"socket directory {directory} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SocketPathError("symlink", socket_path,
                                  f"socket directory {directory} is a symlink") from None
        if exc.errno == errno.ENOTDIR:
            if os.path.islink(directory):
                raise SocketPathError("symlink", socket_path,
                                      f"socket directory {directory} is a symlink") from None
            raise SocketPathError("not-a-directory", socket_path,
                                  f"socket directory {directory} is not a directory") from None
        raise
    try:
        st = os.fstat(dir_fd)
        if st.st_uid != os.getuid():
            raise SocketPathError("not-owned", socket_path,
                                  f"socket directory {directory} is owned by uid {st.st_uid}, not {os.getuid()}")
        if is_leftover_gate(dir_fd, st):
            close_gate(dir_fd)  # rule 1: a gate an earlier server left; this one opens its own (rule 3)
        elif stat.S_IMODE(st.st_mode) != 0o700:
            raise SocketPathError("not-private", socket_path,
                                  f"socket directory {directory} has mode {stat.S_IMODE(st.st_mode):04o}, "
                                  "not 0700")
        if not os.path.isdir(f"/proc/self/fd/{dir_fd}"):
            raise SocketPathError("no-proc", socket_path,
                                  "/proc/self/fd is not available to bind through the checked directory")
    except BaseException:
        os.close(dir_fd)
        raise
    return dir_fd, name

