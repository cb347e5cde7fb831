"""The socket server shell: an asyncio Unix-socket server that moves bytes between clients and the core.

It turns request lines into the core's inputs (`Connected`, `Call`, `Disconnected`) and carries out the
core's client actions (`Reply`, `Refuse`, `Notify`, `CloseConnection`). It decides nothing about roles,
generations or admission (that is the core's); it decides only what keeps the controller alive under any
client: framing, validation (`_jsonrpc`), the limits below, ordering, and quiet handling of hang-ups.

The rules this file keeps (brief §1 "Controller and transport", "Clients connect over a Unix socket in a
0700 directory"; seed README "Mediated control"):

1. The socket lives in a private directory (a directory owned by this uid, mode 0700), checked through an
   fd and bound through the same fd; an existing path is refused, never unlinked, but a socket nobody
   accepts on (a crashed controller's); `aclose` unlinks only the socket file this server created. The
   rules and their reasons are `_socket`'s (`Listener`, `socket_state`, `SocketPathError`).
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
7. Who connects: the peer's credentials are read once, right after accept(2) (`read_peer`: SO_PEERCRED,
   and SO_PEERGROUPS when ``reach`` names a gid) and passed in ``Connected(conn, peer)``; the core decides
   (`_access`) and closes a peer no grant names (`CloseConnection` "channel") before any of its bytes are
   read. With ``reach`` (the granted uids and gids) the socket and its directory get ACLs that let exactly
   those reach the socket (`_gate`), set after bind and before listen, and the directory goes back
   to 0700 at `aclose`.

8. The connection bound is shared (issue 28 item 2): each uid other than the owner holds at most its share
   (`ServerLimits.connections_per_uid`), and the last slots are kept, `owner_reserve` for the owner alone,
   `force_stop_reserve` below it for the owner and uids granted force-stop (``standing``, the access
   policy's), so a neighbour's connections can never lock the owner out of its own controller. A peer past
   what it may take reads ``closing`` "too-many-connections" with a message naming the share or reserve.

Each connection is a `_connection.ServerConnection`: its buffers, outbox and ending (rules 2, 3, 5,
6 and the bounds below). It reaches this server only through `ConnectionHost`: the loop and clock, whether a
new connection may be served and its name, the tables of connections, the core, the answer encoder and the
bug log. The bounds themselves are `_limits.ServerLimits`.

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
import socket
import time
import traceback
from collections.abc import Callable, Sequence

from mosaic.controller_client import CLOSE_REASONS, INTERNAL_ERROR, REFUSED

from ..core._access import AccessPolicy
from ..core._io import CloseConnection, ConnId, Input, Notify, Peer, Refuse, Reply, RpcId
from ._connection import (
    TRANSPORT_HIGH_WATER,
    TRANSPORT_LOW_WATER,
    WRITE_BATCH,
    ConnectionStats,
    Notes,
    Placeholder,
    ServerConnection,
    _Entry,
)
from ._jsonrpc import encode_error, encode_result, notification_line
from ._limits import ServerLimits
from ._socket import Listener, SocketPathError, read_peer, socket_state

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

_DEFAULT_LIMITS = ServerLimits()
_ACCEPT_RETRY = 1.0  # seconds before accepting again after EMFILE/ENFILE (asyncio uses the same)


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
        limits: ServerLimits = _DEFAULT_LIMITS,
        clock: Callable[[], float] = time.monotonic,
        reach: tuple[tuple[int, ...], tuple[int, ...]] = ((), ()),
        standing: Callable[[Peer | None], str] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self._on_input = on_input
        self.reach = reach  # (uids, gids) besides the owner that may reach the socket (rule 7)
        # Which slots of the connection bound a peer may take (rule 8): the access policy's `standing`;
        # by default the owner is this process's uid and nobody else is granted force-stop.
        self._standing = standing if standing is not None else AccessPolicy().standing
        self._per_uid: collections.Counter[int | None] = collections.Counter()
        self.limits = limits
        self._clock = clock
        self._conns: dict[ConnId, ServerConnection] = {}
        self._dirty: list[ServerConnection] = []  # connections whose notifications wait for the turn's end
        self._joins: dict[tuple[_Entry, ...], bytes] | None = None  # `joined`'s, during `_flush_dirty`
        self._rejected: set[ServerConnection] = set()
        self._next_id = 0
        self._shutting_down = False
        self.internal_errors = 0
        self._bug_sites: set[tuple[str, ...]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: Listener | None = None
        self._adopting: set[asyncio.Task[None]] = set()
        self._accept_paused = False
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
        self._listener = Listener.bind(self.socket_path, reach=self.reach, backlog=self.limits.backlog)
        # Our own accept loop rather than loop.create_unix_server: asyncio's Server fails (and in debug mode
        # logs) a connection accepted just before close(), and reports EMFILE through the loop's exception
        # handler; here the first gets "closing: shutdown" and the second one log line.
        self._loop.add_reader(self._listener.sock.fileno(), self._accept)
        self._sweeper = self._loop.create_task(self._sweep_forever())

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
        """Stop accepting; remove the socket file this server created and close its gate."""
        listener, self._listener = self._listener, None
        if listener is not None:
            if not self._accept_paused:
                self._event_loop.remove_reader(listener.sock.fileno())
            listener.close()

    def _accept(self) -> None:
        """Accept what the backlog holds (at most `backlog` per loop turn, as asyncio does) and adopt
        each socket as a transport in its own task. Never raises into the loop."""
        if self._listener is None:
            return
        sock, loop = self._listener.sock, self._event_loop
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
            self.bug("accept", exc)

    def _resume_accept(self) -> None:
        self._accept_paused = False
        if self._listener is not None:
            self._event_loop.add_reader(self._listener.sock.fileno(), self._accept)

    async def _adopt(self, conn: socket.socket, peer: Peer | None) -> None:
        try:
            await self._event_loop.connect_accepted_socket(lambda: ServerConnection(self, peer), sock=conn)
        except Exception as exc:
            conn.close()
            if not isinstance(exc, OSError):  # an OSError here is the client already gone
                self.bug("adopt", exc)

    # ----------------------------------------------------------------- the connections' host (narrow)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._event_loop

    def now(self) -> float:
        return self._clock()

    def refusal(self, peer: Peer | None) -> tuple[str, str] | None:
        """Why a connection from `peer` accepted now may not be served (reason, message), or None (rule 8)."""
        if self._shutting_down:
            return "shutdown", CLOSE_REASONS["shutdown"]
        limits = self.limits
        standing = self._standing(peer)
        bound = limits.bound_for(standing)
        if len(self._conns) >= bound:
            kept = "" if standing == "owner" else (
                f"; the last {limits.max_connections - bound} of {limits.max_connections} are kept for the owner"
                + (" and uids granted force-stop" if standing == "other" else ""))
            return "too-many-connections", f"the connection bound was reached{kept}; try again later"
        uid = None if peer is None else peer.uid
        if standing != "owner" and self._per_uid[uid] >= limits.connections_per_uid:
            who = "connections whose uid could not be read share" if uid is None else f"uid {uid} holds"
            return "too-many-connections", (f"{who} its share of {limits.connections_per_uid} of the "
                                            f"{limits.max_connections} connections; try again later")
        return None

    def register(self, conn: ServerConnection) -> ConnId:
        self._next_id += 1
        conn_id = f"c{self._next_id}"
        self._conns[conn_id] = conn
        self._per_uid[None if conn.peer is None else conn.peer.uid] += 1
        return conn_id

    def want_flush(self, conn: ServerConnection) -> None:
        # One hop: what this turn made ready runs first. The engine pump woken by the prompt this turn wrote is
        # among it (the runtime writes the prompt before it delivers the call's records: `core/_admission`), so
        # its `dispatched` receipt joins the same write.
        if not self._dirty:
            self._event_loop.call_soon(self._flush_dirty)
        self._dirty.append(conn)

    def _flush_dirty(self) -> None:
        """The end of a loop turn: each connection that queued notifications in it writes them, in one write
        (issue 34: one callback for every connection, not one per connection)."""
        dirty, self._dirty = self._dirty, []
        self._joins = {}
        try:
            for c in dirty:
                try:
                    c.run_scheduled_flush()
                except Exception as exc:  # pragma: no cover - a bug in _connection.py
                    self.bug("flush", exc)
                    c.abort()
        finally:
            self._joins = None

    def joined(self, entries: collections.deque[_Entry]) -> bytes:
        """The queued notifications as one write. During `_flush_dirty` the joins are kept by the entries
        themselves (the same objects in every observer's outbox: the call's records and its `dispatched`
        receipt, say), so every observer writes the same bytes object and each run is joined once."""
        if len(entries) == 1:
            only = entries[0]
            return only if type(only) is bytes else only.data  # type: ignore[union-attr]
        key = tuple(entries)
        joins = self._joins
        if joins is not None:
            data = joins.get(key)
            if data is not None:
                return data
        data = b"".join([e if type(e) is bytes else e.data for e in key])  # type: ignore[union-attr]
        if joins is not None:
            joins[key] = data
        return data

    def hold_rejected(self, conn: ServerConnection) -> int:
        self._rejected.add(conn)
        return len(self._rejected)

    def forget(self, conn: ServerConnection) -> None:
        self._rejected.discard(conn)
        if self._conns.get(conn.conn_id) is conn:
            del self._conns[conn.conn_id]
            uid = None if conn.peer is None else conn.peer.uid
            self._per_uid[uid] -= 1
            if not self._per_uid[uid]:
                del self._per_uid[uid]

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
            data = self.encode_answer(action)
            c.resolve(action.rpc_id)
            c.enqueue_reply(data)
        elif isinstance(action, Notify):
            try:
                data = notification_line(action.method, action.params)
            except (TypeError, ValueError) as exc:
                self.bug("encode notification", exc)
                return
            conns = self._conns
            for conn in action.to:  # the same bytes to every target (issue 34)
                target = conns.get(conn)
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

    def deliver_notifications(self, actions: Sequence[Notify]) -> None:
        """Carry out consecutive `Notify` actions that all go to the same connections (the first one's
        `to`), as `deliver` would one by one: the same lines, in the same order, to each target. Each is
        encoded once; consecutive lines are joined once into a `Notes` of at most `WRITE_BATCH` bytes, and
        that one object goes to every target's outbox (a pub/sub broker's fan-out, issue 34)."""
        lines: list[bytes] = []
        for action in actions:
            try:
                lines.append(notification_line(action.method, action.params))
            except (TypeError, ValueError) as exc:
                self.bug("encode notification", exc)
        if not lines:
            return
        entries: list[bytes | Notes] = []
        chunk: list[bytes] = []
        size = 0
        for line in lines:
            if chunk and size + len(line) > WRITE_BATCH:
                entries.append(chunk[0] if len(chunk) == 1 else Notes(chunk))
                chunk, size = [], 0
            chunk.append(line)
            size += len(line)
        entries.append(chunk[0] if len(chunk) == 1 else Notes(chunk))
        conns = self._conns
        for conn in actions[0].to:
            target = conns.get(conn)
            if target is not None:
                for entry in entries:
                    target.enqueue_notification(entry)

    def internal_error(self, conn: ConnId, rpc_id: RpcId) -> None:
        """Answer (conn, rpc_id) -32603: the core raised on it (rule 5), where `on_input` could not raise
        (a prompt fed after its look, a page read fed back). Nothing when the request was answered, or the
        connection is gone or closing."""
        c = self._conns.get(conn)
        if c is not None and c.closing is None and not c.lost:
            c.internal_error(rpc_id)

    def reserve(self, conn: ConnId, rpc_id: RpcId) -> Placeholder:
        """Hold the place of the reply to (conn, rpc_id) in the connection's outbox; fill it later with
        `Placeholder.fill` or by delivering a `Reply`/`Refuse` for the same (conn, rpc_id). For a
        connection that is gone or closing the placeholder is inert."""
        c = self._conns.get(conn)
        if c is None or c.closing is not None or c.lost or c.transport_closed:
            return Placeholder(None, conn, rpc_id)
        return c.reserve(rpc_id)

    def encode_answer(self, action: Reply | Refuse) -> bytes:
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
            self.bug("encode reply", exc)
            return encode_error(action.rpc_id, INTERNAL_ERROR, "internal error")

    def to_core(self, event: Input) -> bool:
        """Hand `event` to the core; False (and a logged bug) when it raised."""
        try:
            self._on_input(event)
        except Exception as exc:
            self.bug(f"on_input({type(event).__name__})", exc)
            return False
        return True

    def bug(self, where: str, exc: BaseException) -> None:
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
                self.bug("sweep", exc)
                c.abort()

    async def _sweep_forever(self) -> None:
        interval = self.sweep_interval
        while True:
            await asyncio.sleep(interval)  # the deadline timer itself, not a synchronisation
            try:
                self.sweep()
            except Exception as exc:  # pragma: no cover - a bug in this file
                self.bug("sweep", exc)
