"""The socket server shell: an asyncio Unix-socket server that moves bytes between clients and the core.

It turns request lines into the core's inputs (`Connected`, `Call`, `Disconnected`) and carries out the
core's client actions (`Reply`, `Refuse`, `Notify`, `CloseConnection`). It decides nothing about roles,
generations or admission (that is the core's); it decides only what keeps the controller alive under any
client: framing, validation (`_jsonrpc`), the limits below, ordering, and quiet handling of hang-ups.

The rules this file keeps (brief §1 "Controller and transport", "Clients connect over a Unix socket in a
0700 directory"; seed README "Mediated control"):

1. The socket lives in a private directory: a directory (not a symlink), owned by this uid, mode exactly
   0700 (or the gate of rule 7 a controller that did not close left: 0710, an ACL of search only, which
   is reset to 0700 first). Anything else is refused (`SocketPathError`) before a socket exists. The
   directory is opened once (``O_NOFOLLOW | O_DIRECTORY``), checked through that fd, and the socket is
   bound through the same fd (``/proc/self/fd/N/name``), so the directory checked is the directory bound
   in. An existing path is refused, never unlinked, with one exception, as tmux and systemd do: a socket
   nobody accepts on (a connect gets ECONNREFUSED: what a controller killed without its `aclose` leaves)
   is removed and the bind tried once more; a socket something accepts on refuses "live"
   (`socket_state`). `aclose` unlinks only the socket file this server created (same inode).
2. One message per LF-terminated line, split on LF only (U+2028/U+2029 are ordinary bytes). Requests of
   one connection are validated and handed to ``on_input`` one at a time, in the order read; ``ping`` is
   answered here (result ``{}``) and never reaches ``on_input``.
3. Everything a connection is sent goes through its outbox, in order. A `Placeholder` holds a reply's
   place: nothing queued after it is written before it is filled.
4. ``on_input`` is called only from the event loop's own callbacks (accept, read, hang-up, the deadline
   sweep), never from inside `deliver`, `Placeholder.fill` or `aclose`, so the core is never re-entered
   while it is returning actions. It is called with ``Connected(conn, peer)`` once on accept, ``Call`` for each
   valid non-ping request, and ``Disconnected(conn)`` exactly once when the server stops serving the
   connection (a hang-up, a reset, a limit, `CloseConnection`, `aclose`). After ``Disconnected`` no action
   for that connection is carried out.
5. Client input never crashes the controller. An exception from ``on_input`` is a bug in the core: the
   request gets -32603, the bug is logged once per place (logger ``mosaic.controller.server``; repeats at
   DEBUG, counted in `SocketServer.internal_errors`), and serving goes on. Hang-ups, resets and EOF at
   any moment (mid-reply included) end the connection quietly: nothing reaches stderr or the loop's
   exception handler, and nothing is written to a transport after it is closing.
6. The server ends a connection by telling it why: a ``closing`` notification ``{"reason", "message"}``
   (`CLOSE_REASONS`) after what is already queued, then a lingering close: it shuts its write side once
   everything is written (the client reads every line, then EOF) and reads-and-discards until the client
   hangs up. Closing outright while client bytes sit unread would make the client's kernel report a
   reset, and a client reading through asyncio streams would lose the lines before it. A connection still
   closing ``close_linger`` seconds later is aborted. A client that sends EOF first (a half-close) still
   gets the answers to every request it sent; the server closes once they are written, or after
   ``close_linger``, and an unterminated last line is not a request.
7. Who connects (issue 19): the peer's credentials are read once, right after accept(2) (`read_peer`:
   SO_PEERCRED, and SO_PEERGROUPS when ``reach`` names a gid) and passed in ``Connected(conn, peer)``;
   the core decides (`_access`) and closes a peer no grant names (`CloseConnection` "channel") before any
   of its bytes are read. With ``reach`` (the granted uids and gids) the socket and its directory get ACLs
   that let exactly those reach the socket (`_socket_gate`), set after bind and before listen, and the
   directory goes back to 0700 at `aclose`.

Memory per connection is bounded (and `ConnectionStats` reports the peaks):

- read buffer <= ``max_line_bytes`` + 1 (a CR) + one read (asyncio reads at most 256 KiB at a time):
  a line is refused as soon as its unterminated tail passes the cap, and no further bytes are read while
  requests wait for the outbox to drain (rule "backpressure" below);
- outbox (queued, not yet handed to the transport) <= ``max_outbox_bytes`` + one item: a notification is
  queued only if it fits (or the outbox is empty), a reply only if the outbox was within the cap before it;
- the transport's own buffer <= `TRANSPORT_HIGH_WATER` (64 KiB) + one write (`WRITE_BATCH`, 16 KiB, or one
  larger item): the server stops handing it
  bytes when it pauses writing and resumes when it drains below `TRANSPORT_LOW_WATER`.

Backpressure: while more than ``min(256 KiB, max_outbox_bytes // 2)`` of replies wait in a connection's
outbox, the server stops taking that connection's requests (lines wait in the read buffer, the socket is
not read), so a client that pipelines requests without reading replies is slowed, not grown. Only replies
computed later (placeholders) or single huge replies can still pass the cap; that is "not-reading".

All times come from the ``clock`` passed in (monotonic seconds by default). The deadlines (request, idle,
close linger) are checked by one sweep every `SocketServer.sweep_interval` seconds, so a connection is closed
between its deadline and one interval after it; `SocketServer.sweep` runs the same check at once (a test
with a fake clock calls it).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import socket
import stat
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from ._access import MAX_PEER_GROUPS, Peer
from ._io import (
    CloseConnection,
    Connected,
    ConnId,
    Disconnected,
    Input,
    Notify,
    Refuse,
    Reply,
    RpcId,
)
from ._jsonrpc import ProtocolError, encode_error, encode_notification, encode_result, parse_line
from ._methods import CLOSE_REASONS, INTERNAL_ERROR, LINE_TOO_LONG, REFUSED
from ._socket_gate import GateError, close_gate, is_leftover_gate, open_gate

__all__ = [
    "TRANSPORT_HIGH_WATER",
    "TRANSPORT_LOW_WATER",
    "WRITE_BATCH",
    "ConnectionStats",
    "Placeholder",
    "ServerLimits",
    "SocketPathError",
    "SocketServer",
    "read_peer",
    "socket_state",
]

logger = logging.getLogger("mosaic.controller.server")

KiB = 1024
MiB = 1024 * KiB

TRANSPORT_HIGH_WATER = 64 * KiB
"""The transport's write buffer pauses writing above this (asyncio's default, set explicitly)."""
TRANSPORT_LOW_WATER = 16 * KiB
"""... and resumes below this."""
WRITE_BATCH = 16 * KiB
"""Ready lines are joined into writes of at most this many bytes (or one larger line): a fan-out of one
engine batch to a connection costs a few syscalls, not one per notification."""

_ACCEPT_RETRY = 1.0  # seconds before accepting again after EMFILE/ENFILE (asyncio uses the same)

# Longest sun_path a client can connect to: 108 bytes including the NUL (unix(7)).
_MAX_SUN_PATH = 107
_SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)  # Linux 4.13 (asm-generic; CPython 3.11 lacks the name)
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def read_peer(sock: socket.socket, *, groups: bool = True) -> Peer | None:
    """What the kernel recorded of the process that connected `sock` (rule 7): SO_PEERCRED's effective uid,
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


@dataclass(frozen=True)
class ServerLimits:
    """The bounds that keep one controller alive under any set of clients. All sizes are bytes, all times
    seconds of the server's clock. Every field must be positive; `__post_init__` raises `ValueError`."""

    max_connections: int = 256
    """Connections served at once (closing ones still count until they are gone). A client past the
    bound reads one ``closing`` notification with reason "too-many-connections" and is closed at once:
    never silently dropped, never given a connection id, never seen by the core. 256 is far above the
    few clients one conversation has (a terminal, the WebUI bridge, tools) and far below the fd limit."""

    backlog: int = 1024
    """The listen(2) backlog: connections the kernel holds before accept. 1024 holds a burst of 1,000
    connects (the brief's load check). The kernel caps it at ``net.core.somaxconn`` (4096 on recent
    Linux; a smaller value there lowers it silently)."""

    max_line_bytes: int = 2 * MiB
    """Longest request line (without LF and one CR). A prompt may hold 262,144 characters (UTF-16 units);
    escaped as ``\\uXXXX`` each is at most 6 bytes, 1.5 MiB, plus the envelope: 2 MiB fits any valid
    prompt. A longer line gets a LINE_TOO_LONG error (id null) and the connection is closed with reason
    "line-too-long" as soon as the buffered tail passes the cap, never after buffering the whole line."""

    request_timeout: float = 10.0
    """The slowloris bound: a request line must be completed within this many seconds of its first byte,
    or the connection is closed with "slow-request". (Time the server itself stopped reading, for
    backpressure, does not count.) 10 s is ages for a local socket, even for a 2 MiB line."""

    idle_timeout: float = 300.0
    """A connection with no complete well-formed request (``ping`` included) for this long is closed with
    "idle". The client library pings well inside it, so only abandoned connections reach it."""

    max_outbox_bytes: int = 4 * MiB
    """Per-connection bound on bytes queued and not yet handed to the transport. Past it, the queued
    NOTIFICATIONS are dropped and replaced by one ``marker`` notification
    ``{"reason": "lagging", "dropped": n}`` at the place of the first one dropped; until that marker is
    written, every further notification is dropped and counted in it, so the client sees exactly where
    its stream has a gap and re-reads. Replies are never dropped: when a reply (or a placeholder's fill)
    comes while the outbox is past the cap even after the drop, the connection is closed with
    "not-reading" (its outbox discarded). 4 MiB is thousands of events; one history page (up to 8 MiB,
    chat-pages MAX_PAGE_BYTES) is still accepted, since a reply only needs the outbox within the cap
    before it."""

    max_consecutive_errors: int = 8
    """Malformed requests in a row (any JSON-RPC error the server answers itself) before the connection
    is closed with "garbage", after the last error is answered. A well-formed request resets the count.
    A buggy client learns from the first error; a stream of noise is cut off early."""

    close_linger: float = 5.0
    """How long a connection being closed (or half-closed by the client's EOF) may take to drain what is
    queued for it and hang up, before it is aborted (rule 6). Bounds the memory and the descriptor of a
    closing client that does not read, and `SocketServer.aclose`'s wait for each client."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_line_bytes", "max_outbox_bytes",
                     "max_consecutive_errors"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ServerLimits.{name} must be a positive integer, not {value!r}")
        for name in ("request_timeout", "idle_timeout", "close_linger"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"ServerLimits.{name} must be a positive number of seconds, not {value!r}")

    @property
    def read_pause_bytes(self) -> int:
        """Replies waiting in a connection's outbox above which its requests wait (backpressure)."""
        return max(1, min(256 * KiB, self.max_outbox_bytes // 2))


class SocketPathError(Exception):
    """The socket path cannot be served safely. `reason` is one of: "not-absolute", "bad-name",
    "too-long", "missing", "not-a-directory", "symlink", "not-owned", "not-private", "exists" (a
    path that is not a socket nobody accepts on), "live" (a socket something accepts on: another server
    serves it), "no-proc", "no-acl"; `path` is the path given."""

    def __init__(self, reason: str, path: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.path = path


@dataclass(frozen=True)
class ConnectionStats:
    """One connection's memory, now and at its peak, and its notification losses."""

    conn: ConnId
    read_buffer_bytes: int
    outbox_bytes: int
    transport_bytes: int
    peak_read_buffer_bytes: int
    peak_outbox_bytes: int
    peak_transport_bytes: int
    dropped_notifications: int
    closing: str | None


# ------------------------------------------------------------------------------------------------ outbox


class _Item:
    """A queued line: a reply (never dropped) or a notification (dropped when lagging)."""

    __slots__ = ("data", "is_reply", "size")

    def __init__(self, data: bytes, *, is_reply: bool) -> None:
        self.data = data
        self.is_reply = is_reply
        self.size = len(data)


class _Marker:
    """The ``lagging`` marker standing in for dropped notifications; encoded when it is written."""

    __slots__ = ("count", "size")

    def __init__(self, count: int) -> None:
        self.count = count
        self.size = len(self.encode())

    def encode(self) -> bytes:
        return encode_notification("marker", {"reason": "lagging", "dropped": self.count})


class Placeholder:
    """A reply's place in a connection's outbox, reserved before its content exists.

    Anything queued for the connection after the placeholder is written only after `fill`. Fill it on the
    event loop's thread (from a worker thread, use ``loop.call_soon_threadsafe``). Every placeholder must
    be filled (a failed computation fills it with a `Refuse`): an unfilled one holds the connection's
    output until the connection ends. A placeholder of a connection that is gone (or was never served)
    is inert: `fill` checks its argument and does nothing else.
    """

    __slots__ = ("_conn", "_data", "_dead", "_filled", "_owner", "_rpc_id", "size")

    def __init__(self, owner: _Connection | None, conn: ConnId, rpc_id: RpcId) -> None:
        self._owner = owner
        self._conn = conn
        self._rpc_id = rpc_id
        self._data: bytes | None = None
        self._filled = False
        self._dead = owner is None
        self.size = 0

    @property
    def conn(self) -> ConnId:
        return self._conn

    @property
    def rpc_id(self) -> RpcId:
        return self._rpc_id

    @property
    def filled(self) -> bool:
        return self._filled

    def fill(self, action: Reply | Refuse) -> None:
        """Give the placeholder its reply; what queued behind it is then written in order.

        Raises `TypeError` for another action type, `ValueError` when the action names another connection
        or request id, `RuntimeError` when already filled (all programming errors). Never calls the core.
        """
        if not isinstance(action, (Reply, Refuse)):
            raise TypeError(f"a placeholder is filled with Reply or Refuse, not {type(action).__name__}")
        if action.conn != self._conn or action.rpc_id != self._rpc_id:
            raise ValueError(f"placeholder for ({self._conn}, {self._rpc_id!r}) filled with an action for "
                             f"({action.conn}, {action.rpc_id!r})")
        if self._filled:
            raise RuntimeError(f"placeholder for ({self._conn}, {self._rpc_id!r}) filled twice")
        self._filled = True
        owner = self._owner
        if owner is not None and not self._dead:
            owner.fill(self, action)


_Entry = _Item | _Marker | Placeholder

# --------------------------------------------------------------------------------------------- a client


class _Connection(asyncio.Protocol):
    """One accepted client. Every callback catches its own failures (see `SocketServer._bug`): nothing
    escapes into the loop's exception handler."""

    def __init__(self, server: SocketServer, peer: Peer | None) -> None:
        self.server = server
        self.limits = server.limits
        self.peer = peer  # read at accept (rule 7), never again
        self.conn_id: ConnId = ""
        self.transport: asyncio.Transport | None = None
        self.rejected = False
        # reading
        self.buf = bytearray()
        self.pos = 0  # first unprocessed byte of buf
        self.scan = 0  # buf[pos:scan] holds no LF
        self.partial_since: float | None = None
        self.last_request = 0.0
        self.errors = 0
        self.read_paused = False
        self.waiting = False  # process() stopped at a complete line: the outbox holds too many replies
        self.process_scheduled = False
        self.eof = False
        self.eof_since = 0.0
        # writing
        self.outbox: collections.deque[_Entry] = collections.deque()
        self.outbox_bytes = 0
        self.reply_bytes = 0  # replies (filled placeholders included) in the outbox: backpressure
        self.marker: _Marker | None = None
        self.write_paused = False
        self.reservations: dict[RpcId, collections.deque[Placeholder]] = {}
        self.outstanding: collections.Counter[RpcId] = collections.Counter()
        # ending
        self.closing: str | None = None
        self.closing_since = 0.0
        self.shut = False  # our write side is shut (write_eof): only reading-and-discarding is left
        self.transport_closed = False
        self.lost = False
        self.disconnected = False
        self.gone: asyncio.Future[None] = server._event_loop.create_future()
        # stats
        self.peak_read = 0
        self.peak_outbox = 0
        self.peak_transport = 0
        self.flush_scheduled = False
        self.dropped = 0

    # ------------------------------------------------------------------------------- asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        server = self.server
        try:
            transport.set_write_buffer_limits(high=TRANSPORT_HIGH_WATER, low=TRANSPORT_LOW_WATER)
            now = server._clock()
            self.last_request = now
            if server._shutting_down or len(server._conns) >= self.limits.max_connections:
                self.reject("shutdown" if server._shutting_down else "too-many-connections", now)
                return
            server._next_id += 1
            self.conn_id = f"c{server._next_id}"
            server._conns[self.conn_id] = self
        except Exception as exc:  # pragma: no cover - a bug in this file
            server._bug("connection_made", exc)
            transport.abort()
            return
        server._call_input(Connected(self.conn_id, self.peer))

    def reject(self, reason: str, now: float) -> None:
        """Tell the client why and end the connection at once (a lingering close, see `shut_down`);
        never counted, never given an id, never seen by the core."""
        self.rejected = True
        self.closing = reason
        self.closing_since = now
        server = self.server
        server._rejected.add(self)
        assert self.transport is not None
        self.transport.write(encode_notification("closing", _closing_params(reason)))
        if len(server._rejected) > self.limits.max_connections:
            # A flood of rejected clients: do not hold their fds for the linger, close outright.
            self.transport_closed = True
            self.transport.close()
        else:
            self.shut_down()

    def data_received(self, data: bytes) -> None:
        try:
            if self.closing is not None or self.lost or self.eof:
                return  # closing: read and discard, so the client sees our EOF and not a reset
            self.buf += data
            if len(self.buf) > self.peak_read:
                self.peak_read = len(self.buf)
            self.process()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.server._bug("data_received", exc)
            self.abort()

    def eof_received(self) -> bool:
        try:
            if self.closing is not None:
                if self.shut:
                    return False  # both directions are done: the transport closes
                self.eof = True  # shut_down() closes instead of half-closing
                self.read_paused = True
                return True
            if not self.lost and not self.eof:
                self.eof = True
                self.eof_since = self.server._clock()
                self.read_paused = True  # the transport stops reading after EOF; never resume
                self.process()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.server._bug("eof_received", exc)
            self.abort()
        return True  # keep the transport open: replies to what was read are still written

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        try:
            self.flush()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.server._bug("resume_writing", exc)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.transport_closed = True
        server = self.server
        try:
            self.drop_outbox()
            self.buf = bytearray()
        except Exception as err:  # pragma: no cover - a bug in this file
            server._bug("connection_lost", err)
        # Before the connection leaves the table, so the core may still read its `stats` here.
        self.send_disconnected()
        server._rejected.discard(self)
        if server._conns.get(self.conn_id) is self:
            del server._conns[self.conn_id]
        if not self.gone.done():
            self.gone.set_result(None)

    # ------------------------------------------------------------------------------------- requests

    def blocked(self) -> bool:
        return self.reply_bytes > self.limits.read_pause_bytes

    def schedule_process(self) -> None:
        if not self.process_scheduled and not self.lost and self.closing is None:
            self.process_scheduled = True
            self.server._event_loop.call_soon(self.run_scheduled_process)

    def run_scheduled_process(self) -> None:
        self.process_scheduled = False
        try:
            if self.closing is None and not self.lost:
                self.process()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.server._bug("process", exc)
            self.abort()

    def process(self) -> None:
        """Handle every complete line the buffer holds, in order, until the outbox backs up or the
        connection starts closing; then check the unterminated tail against the caps."""
        buf = self.buf
        completed = False
        reached_end = False
        while self.closing is None and not self.lost:
            if self.blocked():
                break
            nl = buf.find(b"\n", self.scan)
            if nl == -1:
                self.scan = len(buf)
                reached_end = True
                break
            line = bytes(buf[self.pos:nl])
            self.pos = self.scan = nl + 1
            completed = True
            self.handle_line(line)
        if self.closing is not None or self.lost:
            return
        if self.pos:
            del buf[:self.pos]
            self.scan -= self.pos
            self.pos = 0
        self.waiting = not reached_end
        if self.waiting:
            self.pause_reading()  # backpressure: flush() resumes processing when the replies drain
            return
        if self.eof:
            # An unterminated tail at EOF is not a request (a message ends with LF).
            self.buf.clear()
            self.scan = 0
            self.partial_since = None
            self.maybe_finish_eof()
            return
        tail = len(buf)
        if tail > self.limits.max_line_bytes + 1:  # + 1: the CR a CRLF line may end with
            self.line_too_long()
            return
        if tail == 0:
            self.partial_since = None
        elif completed or self.partial_since is None:
            self.partial_since = self.server._clock()
        self.resume_reading()

    def handle_line(self, line: bytes) -> None:
        limits = self.limits
        if len(line) > limits.max_line_bytes and not (
                len(line) == limits.max_line_bytes + 1 and line.endswith(b"\r")):
            self.line_too_long()
            return
        parsed = parse_line(line)
        if isinstance(parsed, ProtocolError):
            self.errors += 1
            self.enqueue_reply(encode_error(parsed.rpc_id, parsed.code, parsed.message, parsed.data))
            if self.errors >= limits.max_consecutive_errors:
                self.begin_close("garbage")
            return
        self.errors = 0
        self.last_request = self.server._clock()
        if parsed.method == "ping":
            self.enqueue_reply(encode_result(parsed.rpc_id, {}))
            return
        rpc_id = parsed.rpc_id
        self.outstanding[rpc_id] += 1
        before = self.outstanding[rpc_id]
        if not self.server._call_input(parsed.to_call(self.conn_id)):
            # on_input raised (a core bug, logged): answer the request unless it was answered already.
            if self.outstanding.get(rpc_id, 0) >= before and self.closing is None and not self.lost:
                self.resolve(rpc_id)
                self.enqueue_reply(encode_error(rpc_id, INTERNAL_ERROR, "internal error"))

    def line_too_long(self) -> None:
        self.buf.clear()
        self.pos = self.scan = 0
        self.enqueue_reply(encode_error(
            None, LINE_TOO_LONG, f"request line over {self.limits.max_line_bytes} bytes"))
        self.begin_close("line-too-long")

    def pause_reading(self) -> None:
        if not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.partial_since = None  # time the server does not read is not the client's slowness
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused and not self.eof and self.transport is not None:
            self.read_paused = False
            if len(self.buf) > 0 and self.partial_since is None:
                self.partial_since = self.server._clock()
            self.transport.resume_reading()

    # --------------------------------------------------------------------------------------- output

    def resolve(self, rpc_id: RpcId) -> None:
        count = self.outstanding.get(rpc_id, 0)
        if count > 1:
            self.outstanding[rpc_id] = count - 1
        elif count == 1:
            del self.outstanding[rpc_id]

    def enqueue_reply(self, data: bytes) -> None:
        if self.closing is not None or self.lost or self.transport_closed:
            return
        if not self.make_room_for_reply():
            return
        self.outbox.append(_Item(data, is_reply=True))
        self.grew(len(data), reply=True)
        self.flush()

    def make_room_for_reply(self) -> bool:
        """Replies are never dropped: past the cap, drop notifications; if replies alone are past it,
        the client is not reading: close it. False when the connection was closed."""
        cap = self.limits.max_outbox_bytes
        if self.outbox_bytes > cap:
            self.drop_notifications(0)
            if self.outbox_bytes > cap:
                self.begin_close("not-reading", discard=True)
                return False
        return True

    def enqueue_notification(self, data: bytes) -> None:
        if self.closing is not None or self.lost or self.transport_closed:
            return
        if self.marker is not None:
            self.marker.count += 1
            self.dropped += 1
            self.resize_marker()
            return
        if self.outbox and self.outbox_bytes + len(data) > self.limits.max_outbox_bytes:
            self.drop_notifications(1)
            return
        self.outbox.append(_Item(data, is_reply=False))
        self.grew(len(data), reply=False)
        if self.outbox_bytes >= WRITE_BATCH:
            self.flush()  # a full write's worth: hand it over now (a burst never waits in the outbox)
        else:
            self.schedule_flush()

    def drop_notifications(self, extra: int) -> None:
        """Drop every queued notification (plus `extra` not yet queued) for one `lagging` marker at the
        place of the first one dropped."""
        kept: collections.deque[_Entry] = collections.deque()
        first: int | None = None
        dropped = extra
        for entry in self.outbox:
            if isinstance(entry, _Item) and not entry.is_reply:
                dropped += 1
                self.outbox_bytes -= entry.size
                if first is None:
                    first = len(kept)
            else:
                kept.append(entry)
        if dropped == 0:
            return
        marker = _Marker(dropped)
        if first is None:
            kept.append(marker)
        else:
            kept.insert(first, marker)
        self.outbox = kept
        self.marker = marker
        self.dropped += dropped
        self.outbox_bytes += marker.size
        self.peak_outbox = max(self.peak_outbox, self.outbox_bytes)

    def resize_marker(self) -> None:
        marker = self.marker
        assert marker is not None
        old = marker.size
        marker.size = len(marker.encode())
        self.outbox_bytes += marker.size - old
        self.peak_outbox = max(self.peak_outbox, self.outbox_bytes)

    def grew(self, size: int, *, reply: bool) -> None:
        self.outbox_bytes += size
        if reply:
            self.reply_bytes += size
        if self.outbox_bytes > self.peak_outbox:
            self.peak_outbox = self.outbox_bytes

    def reserve(self, rpc_id: RpcId) -> Placeholder:
        placeholder = Placeholder(self, self.conn_id, rpc_id)
        self.outbox.append(placeholder)
        self.reservations.setdefault(rpc_id, collections.deque()).append(placeholder)
        return placeholder

    def fill(self, placeholder: Placeholder, action: Reply | Refuse) -> None:
        waiting = self.reservations.get(placeholder.rpc_id)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(placeholder)
            if not waiting:
                del self.reservations[placeholder.rpc_id]
        self.resolve(action.rpc_id)
        if self.closing is not None or self.lost or self.transport_closed:
            return
        data = self.server._encode_answer(action)
        if not self.make_room_for_reply():
            return
        placeholder._data = data
        placeholder.size = len(data)
        self.grew(len(data), reply=True)
        self.flush()

    def schedule_flush(self) -> None:
        """Flush once at the end of this loop iteration: the notifications of one engine batch to one
        connection go out in few writes (one syscall each), not one write per notification."""
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server._event_loop.call_soon(self.run_scheduled_flush)

    def run_scheduled_flush(self) -> None:
        self.flush_scheduled = False
        self.flush()

    def flush(self) -> None:
        """Hand the transport every ready line from the head of the outbox, joined into writes of at most
        `WRITE_BATCH` bytes (or one larger item), until it pauses writing or an unfilled placeholder is at
        the head. Then close if closing and drained, or let requests flow again if the replies drained."""
        transport = self.transport
        if transport is None or self.lost:
            return
        outbox = self.outbox
        batch: list[bytes] = []
        batched = 0
        while outbox and not self.write_paused and not transport.is_closing():
            head = outbox[0]
            if isinstance(head, Placeholder):
                if head._data is None:
                    break
                data = head._data
            elif isinstance(head, _Marker):
                data = head.encode()
            else:
                data = head.data
            if batch and batched + len(data) > WRITE_BATCH:
                self.write_batch(transport, batch)
                batch, batched = [], 0
                continue  # the write may have paused the transport: look again before taking more
            if isinstance(head, Placeholder):
                self.reply_bytes -= head.size
            elif isinstance(head, _Marker):
                self.marker = None  # written: notifications queue again after it
            elif head.is_reply:
                self.reply_bytes -= head.size
            outbox.popleft()
            self.outbox_bytes -= head.size
            batch.append(data)
            batched += len(data)
        if batch and not transport.is_closing():
            self.write_batch(transport, batch)
        if self.closing is not None:
            if not outbox:
                self.shut_down()
            return
        if self.waiting and not self.blocked():
            self.schedule_process()
        elif not outbox and self.eof:
            self.maybe_finish_eof()

    def write_batch(self, transport: asyncio.Transport, batch: list[bytes]) -> None:
        transport.write(batch[0] if len(batch) == 1 else b"".join(batch))
        size = transport.get_write_buffer_size()
        if size > self.peak_transport:
            self.peak_transport = size

    def maybe_finish_eof(self) -> None:
        """After the client's EOF: close once every request read was answered and written."""
        if (self.eof and self.closing is None and not self.transport_closed and not self.lost
                and not self.outbox and not self.outstanding and not self.reservations
                and not self.waiting and not self.buf and self.transport is not None):
            self.transport_closed = True
            self.transport.close()
            self.server._event_loop.call_soon(self.send_disconnected)

    # --------------------------------------------------------------------------------------- ending

    def begin_close(self, reason: str, *, discard: bool = False) -> None:
        """Stop taking requests; tell the client `reason` after what is queued (or at once, dropping
        the queue, when `discard`); then `shut_down`. `Disconnected` follows from the loop, never from
        here. Bounded by ``close_linger`` (the sweep aborts a connection still closing after it)."""
        if self.closing is not None or self.lost or self.transport_closed or self.transport is None:
            return
        self.closing = reason
        self.closing_since = self.server._clock()
        self.buf = bytearray()
        self.pos = self.scan = 0
        self.partial_since = None
        self.waiting = False
        line = encode_notification("closing", _closing_params(reason))
        if discard:
            self.drop_outbox()
            if not self.transport.is_closing():
                self.transport.write(line)
            self.shut_down()
        else:
            self.outbox.append(_Item(line, is_reply=True))
            self.grew(len(line), reply=True)
            self.flush()
        self.server._event_loop.call_soon(self.send_disconnected)

    def shut_down(self) -> None:
        """A lingering close: shut our write side once the transport has written everything (the
        client reads EOF after the last line), and read-and-discard until the client's EOF closes the
        transport. Closing outright with unread client bytes in the kernel would make the client's
        kernel report a reset and could cost it the lines before it. If the client already sent EOF,
        close now."""
        transport = self.transport
        if self.shut or self.transport_closed or self.lost or transport is None:
            return
        self.shut = True
        if self.eof or transport.is_closing():
            self.transport_closed = True
            transport.close()
            return
        transport.write_eof()
        self.read_paused = False
        transport.resume_reading()

    def drop_outbox(self) -> None:
        for entry in self.outbox:
            if isinstance(entry, Placeholder):
                entry._dead = True
        for waiting in self.reservations.values():
            for placeholder in waiting:
                placeholder._dead = True
        self.outbox.clear()
        self.reservations.clear()
        self.outstanding.clear()
        self.outbox_bytes = self.reply_bytes = 0
        self.marker = None

    def abort(self) -> None:
        """End the connection now, dropping whatever is unsent (`connection_lost` follows)."""
        self.transport_closed = True
        if self.transport is not None and not self.lost:
            self.transport.abort()

    def send_disconnected(self) -> None:
        if self.disconnected or self.rejected or not self.conn_id:
            return
        self.disconnected = True
        self.server._call_input(Disconnected(self.conn_id))

    def check_deadlines(self, now: float) -> None:
        limits = self.limits
        if self.lost:
            return
        if self.closing is not None:
            if now - self.closing_since >= limits.close_linger:
                self.abort()
            return
        if self.eof:
            if now - self.eof_since >= limits.close_linger:
                self.abort()
            return
        if self.partial_since is not None and not self.read_paused \
                and now - self.partial_since >= limits.request_timeout:
            self.begin_close("slow-request")
        elif now - self.last_request >= limits.idle_timeout:
            self.begin_close("idle")

    def stats(self) -> ConnectionStats:
        transport_bytes = 0
        if self.transport is not None and not self.lost:
            transport_bytes = self.transport.get_write_buffer_size()
        return ConnectionStats(
            conn=self.conn_id, read_buffer_bytes=len(self.buf), outbox_bytes=self.outbox_bytes,
            transport_bytes=transport_bytes, peak_read_buffer_bytes=self.peak_read,
            peak_outbox_bytes=self.peak_outbox, peak_transport_bytes=self.peak_transport,
            dropped_notifications=self.dropped, closing=self.closing)


def _closing_params(reason: str) -> dict[str, str]:
    return {"reason": reason, "message": CLOSE_REASONS[reason]}


# ------------------------------------------------------------------------------------------------ server


class SocketServer:
    """The controller's socket: accepts clients on a Unix socket in a private directory and moves lines
    between them and the core (see the module docstring for the rules and bounds).

    Lifecycle: ``await start()`` once, then `deliver`/`reserve` from the event loop's thread, then
    ``await aclose()``. ``on_input`` is called on the loop's thread, never re-entrantly from this object's
    methods; an exception from it is logged and answered (-32603), never propagated.
    """

    def __init__(
        self,
        socket_path: str,
        on_input: Callable[[Input], None],
        *,
        limits: ServerLimits = ServerLimits(),
        clock: Callable[[], float] = time.monotonic,
        reach: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
    ) -> None:
        self.socket_path = socket_path
        self._on_input = on_input
        self.reach = reach  # (uids, gids) besides the owner that may reach the socket (rule 7)
        self._gate_open = False
        self.limits = limits
        self._clock = clock
        self._conns: dict[ConnId, _Connection] = {}
        self._rejected: set[_Connection] = set()
        self._next_id = 0
        self._shutting_down = False
        self.internal_errors = 0
        self._bug_sites: set[tuple[str, ...]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: socket.socket | None = None
        self._adopting: set[asyncio.Task[None]] = set()
        self._accept_paused = False
        self._dir_fd: int | None = None
        self._sock_name = ""
        self._sock_id: tuple[int, int] | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------------------------ properties

    @property
    def _event_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise RuntimeError("SocketServer.start() has not run")
        return self._loop

    @property
    def connections(self) -> tuple[ConnId, ...]:
        """Connections being served (accepted, counted, not closing), in accept order."""
        return tuple(cid for cid, c in self._conns.items() if c.closing is None and not c.disconnected)

    @property
    def sweep_interval(self) -> float:
        """Seconds between deadline sweeps: an eighth of the shortest deadline, within [5 ms, 1 s]."""
        shortest = min(self.limits.request_timeout, self.limits.idle_timeout, self.limits.close_linger)
        return min(1.0, max(0.005, shortest / 8))

    def stats(self, conn: ConnId) -> ConnectionStats | None:
        """The memory and losses of `conn`, or None when it is not (or no longer) held."""
        c = self._conns.get(conn)
        return None if c is None else c.stats()

    # ------------------------------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Check the directory, bind the socket (refusing an existing path), open its gate to `reach` (rule
        7) and listen.

        Raises `SocketPathError` for a path that cannot be served safely (see its reasons; "no-acl" when
        `reach` names someone and the file system has no POSIX ACLs), `OSError` for other failures of
        bind/listen, `RuntimeError` if called twice. Nothing is left behind on failure (the directory
        back at 0700).
        """
        if self._started:
            raise RuntimeError("SocketServer.start() called twice")
        self._started = True
        self._loop = asyncio.get_running_loop()
        dir_fd, name = _open_private_dir(self.socket_path)
        sock: socket.socket | None = None
        bound = False
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # Bound through the checked directory's fd: no swap between the check and the bind.
            through = f"/proc/self/fd/{dir_fd}/{name}"
            try:
                sock.bind(through)
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EEXIST):
                    raise
                self._remove_stale(dir_fd, name)  # or raises SocketPathError ("exists", "live")
                try:
                    sock.bind(through)
                except OSError as again:
                    if again.errno in (errno.EADDRINUSE, errno.EEXIST):  # another server bound it meanwhile
                        raise SocketPathError("exists", self.socket_path,
                                              f"{self.socket_path} was bound again while a stale socket there "
                                              "was removed") from None
                    raise
            bound = True
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            self._sock_id = (st.st_dev, st.st_ino)
            self._sock_name = name
            self._dir_fd = dir_fd
            if any(self.reach):
                self._gate_open = True  # first: close_gate also undoes a gate set half-way
                try:
                    open_gate(dir_fd, name, *self.reach)
                except GateError as exc:
                    if exc.errno == errno.EOPNOTSUPP:
                        raise SocketPathError("no-acl", self.socket_path, "grants need POSIX ACLs to let their "
                                              "uids reach the socket; this file system has none") from None
                    raise
            sock.listen(self.limits.backlog)
            sock.setblocking(False)
            # Our own accept loop rather than loop.create_unix_server: asyncio's Server fails (and in
            # debug mode logs) a connection accepted just before close(), and reports EMFILE through the
            # loop's exception handler; here the first gets "closing: shutdown" and the second one log line.
            self._loop.add_reader(sock.fileno(), self._accept)
            self._listener = sock
        except BaseException:
            if sock is not None:
                sock.close()
            if bound:
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
            self._sock_id = None
            self._dir_fd = None
            if self._gate_open:
                self._gate_open = False
                with contextlib.suppress(OSError):
                    close_gate(dir_fd)
            os.close(dir_fd)
            raise
        self._sweeper = self._loop.create_task(self._sweep_forever())

    def _remove_stale(self, dir_fd: int, name: str) -> None:
        """The bind found `name` taken. A socket nobody accepts on (connect: ECONNREFUSED; a controller
        killed before its `aclose` leaves one) is unlinked, by the inode the probe saw, and the caller binds
        again; anything else raises `SocketPathError`: "live" for a socket something accepts on, "exists"
        for whatever else is there (never removed). The window between the probe and the unlink is tmux's
        and systemd's too: a server that binds the name in it loses its name, never its socket."""
        state, inode = _probe(dir_fd, name)
        if state == "live":
            raise SocketPathError("live", self.socket_path,
                                  f"{self.socket_path} is served: a connect there was accepted")
        if state != "stale":
            raise SocketPathError("exists", self.socket_path,
                                  f"{self.socket_path} exists and is not a socket nobody serves; it is never "
                                  "replaced")
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if (st.st_dev, st.st_ino) == inode:
                os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass  # gone meanwhile: the bind may go on
        logger.warning("removed the stale socket %s: nothing accepts on it (ECONNREFUSED), its server is gone",
                       self.socket_path)

    async def aclose(self) -> None:
        """Stop accepting, remove the socket file this server created, send ``closing`` (reason
        "shutdown") to every connection after what is queued, and wait until every connection is gone
        (aborting any still draining after ``close_linger``). Each served connection gets its
        ``Disconnected``. Idempotent; never raises for a client's behaviour."""
        if self._closed or self._loop is None:
            self._closed = True
            return
        self._closed = True
        self._shutting_down = True
        self._stop_listening()
        self._unlink_socket()
        if self._adopting:  # accepted just now: each is told "shutdown" by connection_made
            await asyncio.wait(set(self._adopting), timeout=self.limits.close_linger)
        for c in list(self._conns.values()):
            c.begin_close("shutdown")
        pending = [c.gone for c in (*self._conns.values(), *self._rejected) if not c.gone.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.limits.close_linger)
            for c in (*self._conns.values(), *self._rejected):
                c.abort()
            pending = [c.gone for c in (*self._conns.values(), *self._rejected) if not c.gone.done()]
            if pending:
                await asyncio.wait(pending, timeout=self.limits.close_linger)
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper

    def _stop_listening(self) -> None:
        sock, self._listener = self._listener, None
        if sock is not None:
            if not self._accept_paused:
                self._event_loop.remove_reader(sock.fileno())
            sock.close()

    def _accept(self) -> None:
        """Accept what the backlog holds (at most `backlog` per loop turn, as asyncio does) and adopt
        each socket as a transport in its own task. Never raises into the loop."""
        sock = self._listener
        if sock is None:
            return
        loop = self._event_loop
        try:
            for _ in range(self.limits.backlog):
                try:
                    conn, _addr = sock.accept()
                except (BlockingIOError, InterruptedError):
                    return
                except ConnectionAbortedError:
                    continue
                except OSError as exc:
                    if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                        # Out of descriptors or memory: leave the clients in the backlog and retry soon.
                        logger.warning("accept paused for %.1f s: %s", _ACCEPT_RETRY, exc)
                        loop.remove_reader(sock.fileno())
                        self._accept_paused = True
                        loop.call_later(_ACCEPT_RETRY, self._resume_accept)
                        return
                    raise
                conn.setblocking(False)
                # Supplementary groups matter only to gid grants: not read (one syscall less) without any.
                task = loop.create_task(self._adopt(conn, read_peer(conn, groups=bool(self.reach[1]))))
                self._adopting.add(task)
                task.add_done_callback(self._adopting.discard)
        except Exception as exc:  # pragma: no cover - a bug in this file
            self._bug("accept", exc)

    def _resume_accept(self) -> None:
        self._accept_paused = False
        if self._listener is not None:
            self._event_loop.add_reader(self._listener.fileno(), self._accept)

    async def _adopt(self, conn: socket.socket, peer: Peer | None) -> None:
        try:
            await self._event_loop.connect_accepted_socket(lambda: _Connection(self, peer), sock=conn)
        except Exception as exc:
            conn.close()
            if not isinstance(exc, OSError):  # an OSError here is the client already gone
                self._bug("adopt", exc)

    def _unlink_socket(self) -> None:
        dir_fd, self._dir_fd = self._dir_fd, None
        if dir_fd is None:
            return
        try:
            if self._sock_id is not None:
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(self._sock_name, dir_fd=dir_fd, follow_symlinks=False)
                    if stat.S_ISSOCK(st.st_mode) and (st.st_dev, st.st_ino) == self._sock_id:
                        os.unlink(self._sock_name, dir_fd=dir_fd)
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

    # ----------------------------------------------------------------------------------------- core

    def deliver(self, action: Reply | Refuse | Notify | CloseConnection) -> None:
        """Carry out one client action, without blocking and without calling ``on_input``.

        `Reply`/`Refuse` go into the connection's outbox (a `Refuse` as a JSON-RPC error with code
        REFUSED and ``data: {"refusal": ...}``), or into the oldest unfilled placeholder reserved for the
        same (conn, rpc_id). `Notify` is encoded once and queued for each target (dropped for lagging
        ones, see `ServerLimits.max_outbox_bytes`). `CloseConnection` closes after what is queued.
        Actions for a connection that is gone or closing are dropped (the core learns of the end through
        ``Disconnected``). A result that is not JSON is answered -32603 (a `Notify` that is not JSON is
        dropped); both are logged as bugs. Raises `TypeError` for any other action type and `ValueError`
        for a close reason outside ``CLOSE_REASONS`` (programming errors).
        """
        if isinstance(action, (Reply, Refuse)):
            c = self._conns.get(action.conn)
            if c is None or c.closing is not None or c.lost:
                return
            waiting = c.reservations.get(action.rpc_id)
            if waiting:
                waiting[0].fill(action)
                return
            data = self._encode_answer(action)
            c.resolve(action.rpc_id)
            c.enqueue_reply(data)
        elif isinstance(action, Notify):
            try:
                data = encode_notification(action.method, action.params)
            except (TypeError, ValueError) as exc:
                self._bug("encode notification", exc)
                return
            for conn in action.to:
                target = self._conns.get(conn)
                if target is not None:
                    target.enqueue_notification(data)
        elif isinstance(action, CloseConnection):
            if action.reason not in CLOSE_REASONS:
                raise ValueError(f"close reason {action.reason!r} is not in CLOSE_REASONS")
            c = self._conns.get(action.conn)
            if c is not None:
                c.begin_close(action.reason)
        else:
            raise TypeError(f"SocketServer.deliver() takes Reply, Refuse, Notify or CloseConnection, "
                            f"not {type(action).__name__}")

    def reserve(self, conn: ConnId, rpc_id: RpcId) -> Placeholder:
        """Hold the place of the reply to (conn, rpc_id) in the connection's outbox; fill it later with
        `Placeholder.fill` or by delivering a `Reply`/`Refuse` for the same (conn, rpc_id). For a
        connection that is gone or closing the placeholder is inert."""
        c = self._conns.get(conn)
        if c is None or c.closing is not None or c.lost or c.transport_closed:
            return Placeholder(None, conn, rpc_id)
        return c.reserve(rpc_id)

    def _encode_answer(self, action: Reply | Refuse) -> bytes:
        """The line for a reply or refusal; -32603 (and a logged bug) when its content is not JSON."""
        try:
            if isinstance(action, Reply):
                return encode_result(action.rpc_id, action.result)
            refusal = action.refusal
            message = refusal.get("message")
            if not isinstance(message, str) or not message:
                message = str(refusal.get("code") or "refused")
            return encode_error(action.rpc_id, REFUSED, message, {"refusal": refusal})
        except (TypeError, ValueError) as exc:
            self._bug("encode reply", exc)
            return encode_error(action.rpc_id, INTERNAL_ERROR, "internal error")

    def _call_input(self, event: Input) -> bool:
        """Hand `event` to the core; False (and a logged bug) when it raised."""
        try:
            self._on_input(event)
        except Exception as exc:
            self._bug(f"on_input({type(event).__name__})", exc)
            return False
        return True

    def _bug(self, where: str, exc: BaseException) -> None:
        """Log a bug once per place with its traceback; repeats go to DEBUG. Never raises."""
        self.internal_errors += 1
        frames = traceback.extract_tb(exc.__traceback__)
        last = frames[-1] if frames else None
        site = (where, type(exc).__name__, last.filename if last else "", str(last.lineno if last else ""))
        if site in self._bug_sites:
            logger.debug("bug in %s again: %s: %s", where, type(exc).__name__, exc)
            return
        self._bug_sites.add(site)
        logger.error("bug in %s (logged once; repeats are counted): %s: %s", where,
                     type(exc).__name__, exc, exc_info=(type(exc), exc, exc.__traceback__))

    # ------------------------------------------------------------------------------------- deadlines

    def sweep(self) -> None:
        """Apply the deadlines now (request, idle, close linger) by the server's clock."""
        now = self._clock()
        for c in (*self._conns.values(), *self._rejected):
            try:
                c.check_deadlines(now)
            except Exception as exc:  # pragma: no cover - a bug in this file
                self._bug("sweep", exc)
                c.abort()

    async def _sweep_forever(self) -> None:
        interval = self.sweep_interval
        while True:
            await asyncio.sleep(interval)  # the deadline timer itself, not a synchronisation
            try:
                self.sweep()
            except Exception as exc:  # pragma: no cover - a bug in this file
                self._bug("sweep", exc)


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
            close_gate(dir_fd)  # rule 1: a gate an earlier server left; this one opens its own (rule 7)
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

