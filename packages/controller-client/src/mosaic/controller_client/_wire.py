"""One connection of the client library to a controller's socket: the JSON-RPC lines out, the lines in,
pings, and what a lost connection does to the calls waiting on it.

The connection knows nothing of what the replies mean. It hands each result and each notification to its
host (the `ControllerClient`) through the narrow `WireHost` interface, one line at a time and in arrival
order, so the host updates its state from a line before the next is read (rule 1 of `_client.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import ClientRefusal, ConnectionLost, RemoteProtocolError, RemoteRefusal
from ._protocol import INTERNAL_ERROR, REFUSED

if TYPE_CHECKING:
    from ._values import SentRequest

logger = logging.getLogger("mosaic.controller_client")

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest line the client reads. A reply holds at most one history page (8 MiB, chat-pages
MAX_PAGE_BYTES), escaped; a longer line is a broken server and ends the connection."""


class Pending:
    """A call written on a connection and not answered yet. (A plain class, not a dataclass: issue 34 keeps
    the client's import light.)"""

    __slots__ = ("entry", "future", "method")

    def __init__(self, method: str, future: asyncio.Future[Any] | None, entry: SentRequest | None = None) -> None:
        self.method = method
        self.future = future  # None: nobody waits (a ping)
        self.entry = entry  # a prompt's request


class WireHost(Protocol):
    """What a connection tells the client. Every method is called on the event loop, synchronously, before
    the next line is read."""

    def on_result(self, conn: WireConnection, pending: Pending, result: Any) -> Any:
        """Apply a result; return what the waiting call returns. May raise RemoteProtocolError."""

    def on_notification(self, conn: WireConnection, method: str, params: Mapping[str, Any]) -> None:
        """Apply a notification (``closing`` has already been noted on `conn`)."""

    def on_lost(self, conn: WireConnection) -> None:
        """The connection ended (once); its waiting calls have been failed."""

    def on_change(self) -> None:
        """A line was applied: wake whoever waits on the client's state."""


def dumps(message: Mapping[str, Any]) -> bytes:
    """One line as the server writes them: compact UTF-8. A lone surrogate cannot be encoded
    (UnicodeEncodeError), which is right: the server's strict JSON refuses one anyway."""
    import json  # on first use (issue 34: the client's import stays light); then a dict lookup

    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def error_of(error: object) -> RemoteRefusal | RemoteProtocolError:
    """The exception an error reply stands for: a well-formed refusal, or a protocol error."""
    if not isinstance(error, Mapping):
        return RemoteProtocolError(None, "an error reply without an error object")
    code, message, data = error.get("code"), error.get("message"), error.get("data")
    text = message if isinstance(message, str) else ""
    if code == REFUSED:
        refusal = RemoteRefusal.from_wire(data)
        if refusal is not None:
            return refusal
        return RemoteProtocolError(REFUSED, f"a refusal without a well-formed {{code, reconcile, message}}: {text}", data)
    return RemoteProtocolError(code if isinstance(code, int) and not isinstance(code, bool) else None, text, data)


class WireConnection:
    """One open connection (numbered by its client from 1). Make it with `open`; end it with `close`."""

    def __init__(self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host: WireHost) -> None:
        self.number = number
        self.reader = reader
        self.writer = writer
        self._host = host
        self.calls: dict[int, Pending] = {}
        self._next_id = 0
        self.reader_task: asyncio.Task[None] | None = None
        self.pinger_task: asyncio.Task[None] | None = None
        self.lost = False
        self.reason: str | None = None
        self.closing_reason: str | None = None  # what the server said in `closing`
        self.closing_message = ""
        self.observed = False
        self.incarnation: str | None = None  # the token this connection's first observe returned
        self.conn_id: str | None = None  # the controller's name for this connection
        self.pings_sent = 0

    @classmethod
    async def open(cls, path: str, number: int, host: WireHost, *, ping_interval: float | None
                   ) -> WireConnection:
        """Connect to `path` and start reading (and pinging every `ping_interval` seconds). Raises what
        ``asyncio.open_unix_connection`` raises; then nothing is left open."""
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE_BYTES)
        conn = cls(number, reader, writer, host)
        loop = asyncio.get_running_loop()
        conn.reader_task = loop.create_task(conn._read_loop(), name=f"mosaic-client-reader-{number}")
        if ping_interval is not None:
            conn.pinger_task = loop.create_task(conn._ping_loop(ping_interval),
                                                name=f"mosaic-client-pinger-{number}")
        return conn

    @property
    def writable(self) -> bool:
        return not self.lost and not self.writer.is_closing()

    def channel_refusal(self) -> RemoteRefusal | None:
        """The controller closed this connection at connect because no grant names this client's uid, gid or
        groups (`closing` "channel"): it read none of the connection's bytes, so every call on it
        was refused, never of unknown outcome. None for any other end."""
        if self.closing_reason != "channel":
            return None
        return RemoteRefusal("channel", self.closing_message or "the controller refused this connection: no grant")

    # -- lines out ------------------------------------------------------------------------------------

    def encode_call(self, method: str, params: Mapping[str, Any]) -> tuple[int, str, bytes]:
        """A call's id, method and line. Raises UnicodeEncodeError for a lone surrogate."""
        self._next_id += 1
        rpc_id = self._next_id
        return rpc_id, method, dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})

    async def call(self, method: str, params: Mapping[str, Any]) -> Any:
        """Write one call and wait for what the host makes of its answer."""
        try:
            line = self.encode_call(method, params)
        except UnicodeEncodeError as exc:
            raise ClientRefusal("unencodable", f"a parameter holds a lone surrogate: {exc.reason}") from None
        return await self.write_and_wait(line)

    async def write_and_wait(self, line: tuple[int, str, bytes], *, entry: SentRequest | None = None) -> Any:
        """Write an encoded call (from `encode_call`) and wait for its answer. Raises `ClientRefusal`
        channel when nothing could be written; `ConnectionLost` when the connection ends before the answer;
        the refusal or protocol error of an error answer."""
        rpc_id, method, data = line
        if not self.writable:
            raise ClientRefusal("channel", "not connected: nothing was sent")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.calls[rpc_id] = Pending(method, future, entry)
        self.writer.write(data)  # from here on, a lost connection makes the outcome unknown
        try:
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            self.mark_lost(f"write failed: {type(exc).__name__}")
        return await future

    def send_ping(self) -> None:
        """Write a ping without waiting for its answer."""
        if not self.writable:
            return
        rpc_id, _, data = self.encode_call("ping", {})
        self.calls[rpc_id] = Pending("ping", None)
        self.writer.write(data)
        self.pings_sent += 1

    # -- the connection's life ------------------------------------------------------------------------

    async def close(self, reason: str) -> None:
        """End the connection with `reason` and wait for its tasks. Idempotent."""
        self.mark_lost(reason)  # first, so the reason is ours and not the reader's "eof"
        tasks = [t for t in (self.reader_task, self.pinger_task) if t is not None and t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()

    async def _ping_loop(self, interval: float) -> None:
        while not self.lost:
            await asyncio.sleep(interval)  # the ping period itself, not a synchronisation
            try:
                self.send_ping()
                await self.writer.drain()
            except (ConnectionError, OSError):
                return  # the reader sees the loss

    async def _read_loop(self) -> None:
        reason = "eof"
        try:
            while True:
                line = await self.reader.readline()
                if not line.endswith(b"\n"):
                    break  # EOF (an unterminated last line is not a message)
                if not self._on_line(line):
                    reason = "protocol-violation"
                    break
        except ValueError:
            reason = "line-too-long"  # StreamReader.readline past MAX_LINE_BYTES
        except (ConnectionError, OSError) as exc:
            reason = f"reset: {type(exc).__name__}"
        finally:
            self.mark_lost(reason)

    def mark_lost(self, reason: str) -> None:
        """The connection ended: fail every call waiting on it (a written prompt becomes outcome-unknown, or
        refused when the controller refused the connection itself), then tell the host. Idempotent."""
        if self.lost:
            return
        self.lost = True
        self.reason = self.closing_reason or reason
        if self.pinger_task is not None and self.pinger_task is not asyncio.current_task():
            self.pinger_task.cancel()
        with contextlib.suppress(Exception):
            self.writer.close()
        calls, self.calls = self.calls, {}
        refused = self.channel_refusal()
        for pending in calls.values():
            entry = pending.entry
            if entry is not None and entry.state == "sending":
                if refused is not None:
                    entry.state, entry.refusal = "refused", refused
                else:
                    entry.state, entry.unknown_reason = "outcome-unknown", "connection-lost"
            if pending.future is not None and not pending.future.done():
                pending.future.set_exception(refused or ConnectionLost(pending.method, self.reason))
                # The caller normally retrieves it; if it was cancelled, do not warn about it.
                pending.future.exception()
        self._host.on_lost(self)

    # -- lines in -------------------------------------------------------------------------------------

    def _on_line(self, line: bytes) -> bool:
        """Apply one line. False when it is not a JSON-RPC message (the connection is then closed)."""
        import json

        try:
            message = json.loads(line)
        except ValueError:
            logger.warning("controller sent a line that is not JSON; closing the connection")
            return False
        if not isinstance(message, dict):
            return False
        if "method" in message and "id" not in message:
            method, params = message.get("method"), message.get("params", {})
            if not isinstance(method, str) or not isinstance(params, Mapping):
                return False
            if method == "closing":
                reason, text = params.get("reason"), params.get("message")
                self.closing_reason = reason if isinstance(reason, str) else "closing"
                self.closing_message = text if isinstance(text, str) else ""
            self._host.on_notification(self, method, params)
        elif "result" in message or "error" in message:
            self._on_answer(message)
        else:
            return False
        self._host.on_change()
        return True

    def _on_answer(self, message: Mapping[str, Any]) -> None:
        rpc_id = message.get("id")
        pending = self.calls.pop(rpc_id, None) if isinstance(rpc_id, int) and not isinstance(rpc_id, bool) else None
        if pending is None:
            if "error" in message:  # id null: the server could not tell which call it answers
                logger.warning("controller sent an error matched to no call: %.200r", message.get("error"))
            return
        outcome: Any
        if "error" in message:
            outcome = error_of(message.get("error"))
            entry = pending.entry
            if entry is not None and entry.state == "sending":
                if isinstance(outcome, RemoteProtocolError) and outcome.code == INTERNAL_ERROR:
                    # A bug in the controller answered: it may have struck after the dispatch.
                    entry.state, entry.unknown_reason = "outcome-unknown", "internal-error"
                else:  # a refusal, or the protocol layer refused the request before the core saw it
                    entry.state = "refused"
                    entry.refusal = outcome if isinstance(outcome, RemoteRefusal) else None
        else:
            try:
                outcome = self._host.on_result(self, pending, message.get("result"))
            except RemoteProtocolError as exc:
                outcome = exc
        future = pending.future
        if future is None or future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
