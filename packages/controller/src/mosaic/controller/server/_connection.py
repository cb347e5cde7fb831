"""One client of the controller's socket: its read buffer, its outbox and its ending (rules 2, 3, 5 and 6
of `_socket_server.py`, and the memory bounds there). A connection knows nothing of the other connections or of
the core: it reaches both only through its `ConnectionHost` (the `SocketServer`), whose few methods are
named below.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from dataclasses import dataclass
from typing import Protocol

from mosaic.controller_client import CLOSE_REASONS, INTERNAL_ERROR, LINE_TOO_LONG

from ..core._io import Connected, ConnId, Disconnected, Input, Peer, Refuse, Reply, RpcId
from ._jsonrpc import RequestError, encode_error, encode_notification, encode_result, parse_line
from ._limits import KiB, ServerLimits

__all__ = [
    "TRANSPORT_HIGH_WATER",
    "TRANSPORT_LOW_WATER",
    "WRITE_BATCH",
    "ConnectionHost",
    "ConnectionStats",
    "Notes",
    "Placeholder",
    "ServerConnection",
]

TRANSPORT_HIGH_WATER = 64 * KiB
"""The transport's write buffer pauses writing above this (asyncio's default, set explicitly)."""
TRANSPORT_LOW_WATER = 16 * KiB
"""... and resumes below this."""
WRITE_BATCH = 16 * KiB
"""Ready lines are joined into writes of at most this many bytes (or one larger line): a fan-out of one
engine batch to a connection costs a few syscalls, not one per notification."""

# How a notification reaches many connections (issue 34, what a pub/sub broker does): the server encodes it
# once, and every connection's outbox holds the same `bytes` object (no copy, no wrapper per connection);
# a connection with notifications queued is flushed once at the end of the loop turn (one write of the
# joined lines), by one callback for all of them (`ConnectionHost.want_flush`), not one per connection.


class ConnectionHost(Protocol):
    """What a connection needs of its server, and nothing more. Every method is called on the event loop."""

    limits: ServerLimits

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the connection's callbacks are scheduled on."""

    def now(self) -> float:
        """The server's clock (deadlines)."""

    def refusal(self, peer: Peer | None) -> tuple[str, str] | None:
        """Why a connection from `peer` accepted now may not be served: (reason, message), the reason
        "shutdown" or "too-many-connections"; or None."""

    def register(self, conn: ServerConnection) -> ConnId:
        """Count `conn` as served and name it."""

    def hold_rejected(self, conn: ServerConnection) -> int:
        """Hold a rejected `conn` until it is gone; return how many rejected connections are held."""

    def forget(self, conn: ServerConnection) -> None:
        """`conn` is gone: drop it from every table."""

    def to_core(self, event: Input) -> bool:
        """Hand `event` to the core; False when the core raised (a bug, logged)."""

    def encode_answer(self, action: Reply | Refuse) -> bytes:
        """The line for a reply or a refusal."""

    def want_flush(self, conn: ServerConnection) -> None:
        """Call `conn.run_scheduled_flush()` once at the end of this loop turn (with every other connection
        that asked in the same turn: one callback for all)."""

    def joined(self, entries: collections.deque[_Entry]) -> bytes:
        """The queued notifications `entries` (bytes and `Notes` only) as one write: within the end-of-turn
        flush, the same bytes object for every connection whose outbox holds the same entries."""

    def bug(self, where: str, exc: BaseException) -> None:
        """Log a bug in `where` once; never raises."""


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
    """A queued reply line (never dropped). A notification is queued as its bare `bytes` (dropped when
    lagging): the same object in every connection's outbox."""

    __slots__ = ("data", "size")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)


class Notes:
    """Consecutive notification lines for the same connections, joined once (at most `WRITE_BATCH` bytes):
    one outbox entry standing for `count` notifications, the same object in every target's outbox (it is
    never changed). Dropped as `count` notifications when lagging. A connection whose outbox cannot take
    all of it queues its `lines` one by one instead, so the cap drops exactly what it dropped line by line."""

    __slots__ = ("count", "data", "lines", "size")

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines
        self.data = b"".join(lines)
        self.count = len(lines)
        self.size = len(self.data)


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

    def __init__(self, owner: ServerConnection | None, conn: ConnId, rpc_id: RpcId) -> None:
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

    def fail(self) -> None:
        """Fill the placeholder with a -32603 internal error: computing its reply failed on a bug (the
        request is answered all the same, server rule 5). Raises `RuntimeError` when already filled."""
        if self._filled:
            raise RuntimeError(f"placeholder for ({self._conn}, {self._rpc_id!r}) filled twice")
        self._filled = True
        owner = self._owner
        if owner is not None and not self._dead:
            owner.fill_data(self, self._rpc_id, encode_error(self._rpc_id, INTERNAL_ERROR, "internal error"))


_Entry = bytes | Notes | _Item | _Marker | Placeholder

# --------------------------------------------------------------------------------------------- a client


class ServerConnection(asyncio.Protocol):
    """One accepted client. Every callback catches its own failures (see `ConnectionHost.bug`): nothing
    escapes into the loop's exception handler."""

    def __init__(self, host: ConnectionHost, peer: Peer | None) -> None:
        self.host = host
        self.limits = host.limits
        self.max_outbox = host.limits.max_outbox_bytes
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
        self.gone: asyncio.Future[None] = host.loop.create_future()
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
        host = self.host
        try:
            transport.set_write_buffer_limits(high=TRANSPORT_HIGH_WATER, low=TRANSPORT_LOW_WATER)
            now = host.now()
            self.last_request = now
            refused = host.refusal(self.peer)
            if refused is not None:
                self.reject(*refused, now)
                return
            self.conn_id = host.register(self)
        except Exception as exc:  # pragma: no cover - a bug in this file
            host.bug("connection_made", exc)
            transport.abort()
            return
        host.to_core(Connected(self.conn_id, self.peer))

    def reject(self, reason: str, message: str, now: float) -> None:
        """Tell the client why and end the connection at once (a lingering close, see `shut_down`);
        never counted, never given an id, never seen by the core."""
        self.rejected = True
        self.closing = reason
        self.closing_since = now
        rejected = self.host.hold_rejected(self)
        assert self.transport is not None
        self.transport.write(encode_notification("closing", {"reason": reason, "message": message}))
        if rejected > self.limits.max_connections:
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
            self.host.bug("data_received", exc)
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
                self.eof_since = self.host.now()
                self.read_paused = True  # the transport stops reading after EOF; never resume
                self.process()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.host.bug("eof_received", exc)
            self.abort()
        return True  # keep the transport open: replies to what was read are still written

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        try:
            self.flush()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.host.bug("resume_writing", exc)
            self.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.transport_closed = True
        try:
            self.drop_outbox()
            self.buf = bytearray()
        except Exception as err:  # pragma: no cover - a bug in this file
            self.host.bug("connection_lost", err)
        # Before the connection leaves the table, so the core may still read its `stats` here.
        self.send_disconnected()
        self.host.forget(self)
        if not self.gone.done():
            self.gone.set_result(None)

    # ------------------------------------------------------------------------------------- requests

    def blocked(self) -> bool:
        return self.reply_bytes > self.limits.read_pause_bytes

    def schedule_process(self) -> None:
        if not self.process_scheduled and not self.lost and self.closing is None:
            self.process_scheduled = True
            self.host.loop.call_soon(self.run_scheduled_process)

    def run_scheduled_process(self) -> None:
        self.process_scheduled = False
        try:
            if self.closing is None and not self.lost:
                self.process()
        except Exception as exc:  # pragma: no cover - a bug in this file
            self.host.bug("process", exc)
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
            self.partial_since = self.host.now()
        self.resume_reading()

    def handle_line(self, line: bytes) -> None:
        limits = self.limits
        if len(line) > limits.max_line_bytes and not (
                len(line) == limits.max_line_bytes + 1 and line.endswith(b"\r")):
            self.line_too_long()
            return
        parsed = parse_line(line)
        if isinstance(parsed, RequestError):
            self.errors += 1
            self.enqueue_reply(encode_error(parsed.rpc_id, parsed.code, parsed.message, parsed.data))
            if self.errors >= limits.max_consecutive_errors:
                self.begin_close("garbage")
            return
        self.errors = 0
        self.last_request = self.host.now()
        if parsed.method == "ping":
            self.enqueue_reply(encode_result(parsed.rpc_id, {}))
            return
        rpc_id = parsed.rpc_id
        self.outstanding[rpc_id] += 1
        before = self.outstanding[rpc_id]
        if not self.host.to_core(parsed.to_call(self.conn_id)):
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
                self.partial_since = self.host.now()
            self.transport.resume_reading()

    # --------------------------------------------------------------------------------------- output

    def resolve(self, rpc_id: RpcId) -> None:
        count = self.outstanding.get(rpc_id, 0)
        if count > 1:
            self.outstanding[rpc_id] = count - 1
        elif count == 1:
            del self.outstanding[rpc_id]

    def internal_error(self, rpc_id: RpcId) -> None:
        """Answer `rpc_id` -32603 (a bug in the core, server rule 5) unless it was answered: the oldest
        placeholder reserved for it is filled with the error, else the error is queued while the request
        is outstanding."""
        waiting = self.reservations.get(rpc_id)
        if waiting:
            waiting[0].fail()
        elif self.outstanding.get(rpc_id, 0) > 0:
            self.resolve(rpc_id)
            self.enqueue_reply(encode_error(rpc_id, INTERNAL_ERROR, "internal error"))

    def enqueue_reply(self, data: bytes) -> None:
        if self.closing is not None or self.lost or self.transport_closed:
            return
        if not self.make_room_for_reply():
            return
        self.outbox.append(_Item(data))
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

    def enqueue_notification(self, data: bytes | Notes) -> None:
        """Queue the notification line `data`, or several joined (`Notes`): the server's one object for every
        target, kept as it is. Called once per target: the fan-out's hot path, kept to a few attribute
        reads."""
        if self.closing is not None or self.lost or self.transport_closed:
            return
        if type(data) is bytes:
            if self.marker is not None:
                self.marker.count += 1
                self.dropped += 1
                self.resize_marker()
                return
            size = self.outbox_bytes + len(data)
            if size > self.max_outbox and self.outbox:
                self.drop_notifications(1)
                return
        else:
            assert isinstance(data, Notes)
            size = self.outbox_bytes + data.size
            if self.marker is not None or size > self.max_outbox:
                for line in data.lines:  # near or past the cap: line by line, as if sent one at a time
                    self.enqueue_notification(line)
                return
        self.outbox.append(data)
        self.outbox_bytes = size
        if size > self.peak_outbox:
            self.peak_outbox = size
        if size >= WRITE_BATCH:
            self.flush()  # a full write's worth: hand it over now (a burst never waits in the outbox)
        elif not self.flush_scheduled:
            self.flush_scheduled = True
            self.host.want_flush(self)

    def drop_notifications(self, extra: int) -> None:
        """Drop every queued notification (plus `extra` not yet queued) for one `lagging` marker at the
        place of the first one dropped."""
        kept: collections.deque[_Entry] = collections.deque()
        first: int | None = None
        dropped = extra
        for entry in self.outbox:
            if type(entry) is bytes:  # a notification
                dropped += 1
                self.outbox_bytes -= len(entry)
                if first is None:
                    first = len(kept)
            elif type(entry) is Notes:  # several
                dropped += entry.count
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
        self.fill_data(placeholder, action.rpc_id, None, action)

    def fill_data(self, placeholder: Placeholder, rpc_id: RpcId, data: bytes | None,
                  action: Reply | Refuse | None = None) -> None:
        """Fill `placeholder` with the line `data` (or `action`'s, encoded only when it will be sent)."""
        waiting = self.reservations.get(placeholder.rpc_id)
        if waiting is not None:
            with contextlib.suppress(ValueError):
                waiting.remove(placeholder)
            if not waiting:
                del self.reservations[placeholder.rpc_id]
        self.resolve(rpc_id)
        if self.closing is not None or self.lost or self.transport_closed:
            return
        if data is None:
            assert action is not None
            data = self.host.encode_answer(action)
        if not self.make_room_for_reply():
            return
        placeholder._data = data
        placeholder.size = len(data)
        self.grew(len(data), reply=True)
        self.flush()

    def run_scheduled_flush(self) -> None:
        """The host's end-of-turn flush (`ConnectionHost.want_flush`): the notifications of one engine batch
        to one connection go out in one write, not one write per notification."""
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
        # Only a write can pause or close the transport: it is asked again after each write, not per line.
        open_ = not transport.is_closing()
        if (open_ and not self.write_paused and not self.reply_bytes and self.marker is None
                and not self.reservations and 0 < self.outbox_bytes <= WRITE_BATCH):
            # The fan-out's common case: only notifications are queued (no reply, filled or not, no marker) and
            # they fit one write: one join (shared by every observer with the same entries), one write.
            self.write_batch(transport, [self.host.joined(outbox)])
            outbox.clear()
            self.outbox_bytes = 0
        while outbox and open_ and not self.write_paused:
            head = outbox[0]
            if isinstance(head, bytes):  # a notification: the common case, no wrapper to read
                data = head
            elif isinstance(head, Notes):
                data = head.data
            elif isinstance(head, Placeholder):
                if head._data is None:
                    break
                data = head._data
            elif isinstance(head, _Marker):
                data = head.encode()
            else:
                data = head.data
            size = len(data)
            if batch and batched + size > WRITE_BATCH:
                self.write_batch(transport, batch)
                batch, batched = [], 0
                open_ = not transport.is_closing()
                continue  # the write may have paused the transport: look again before taking more
            if isinstance(head, _Marker):
                self.marker = None  # written: notifications queue again after it
                size = head.size
            elif type(head) is not bytes and type(head) is not Notes:  # a reply or a filled placeholder
                self.reply_bytes -= size
            outbox.popleft()
            self.outbox_bytes -= size
            batch.append(data)
            batched += size
        if batch and open_:
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
            self.host.loop.call_soon(self.send_disconnected)

    # --------------------------------------------------------------------------------------- ending

    def begin_close(self, reason: str, *, discard: bool = False) -> None:
        """Stop taking requests; tell the client `reason` after what is queued (or at once, dropping
        the queue, when `discard`); then `shut_down`. `Disconnected` follows from the loop, never from
        here. Bounded by ``close_linger`` (the sweep aborts a connection still closing after it)."""
        if self.closing is not None or self.lost or self.transport_closed or self.transport is None:
            return
        self.closing = reason
        self.closing_since = self.host.now()
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
            self.outbox.append(_Item(line))
            self.grew(len(line), reply=True)
            self.flush()
        self.host.loop.call_soon(self.send_disconnected)

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
        self.host.to_core(Disconnected(self.conn_id))

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
