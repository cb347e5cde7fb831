"""The client library: one asyncio connection to a controller's socket, the protocol's methods as typed
calls, the requests this client sent and what became of them, and notifications fanned out to subscribers.

The rules this file keeps (brief §1, §3, §9; seed README "Mediated control"):

1. One connection at a time. A reader task routes replies by JSON-RPC id and hands every notification
   (`event`, `record`, `marker`, `closing`) to each subscriber in arrival order. The client updates its own
   state (token, generation, role, binding, receipts, stops) from a line *before* any later line is read,
   so a record that follows a reply on the wire always finds what the reply taught.
2. Pings every ``ping_interval`` seconds keep the server's idle bound (300 s) from closing a client that
   only listens. They are written without waiting for their replies.
3. Every command carries the incarnation token the last `observe` returned, and those that need it the
   current generation (brief §1). Nothing is sent before the first `observe`.
4. A prompt is recorded (`SentRequest`) before its line is written and stays pending until its receipt
   settles (finished, failed, delivery-unknown), following `record` notifications. A connection lost after
   the line was written and before the reply makes it outcome-unknown ("connection-lost"): the client does
   not know whether the controller admitted it. Nothing is ever resubmitted by the library.
5. `reconnect` opens a new connection and observes. A new incarnation token means the controller
   restarted: every request still pending (or unknown) under the old token becomes outcome-unknown
   ("incarnation-changed"), for good; new requests use the new token. The same token means the same
   controller: pending requests stay pending and their receipts keep updating, and an exact retry of a
   client request id returns the same receipt (H12).
6. Bounded memory: each subscriber has a queue of at most ``maxsize`` server events and records. One that
   falls behind loses the overflow, and gets a ``lagging`` marker of its own (origin "client") at the place
   of the first notification it lost, counting every one it lost: nothing is lost silently. The client's
   own state is updated from every line whatever its subscribers do.
7. A connection the controller closed at connect with reason ``channel`` (no grant names this client's
   uid, gid or groups: issue 19) read nothing this client wrote: every call on it raises
   `ControllerRefusal` ``channel`` with the controller's message, never `ConnectionLost`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._client_errors import ClientRefusal, ClientStateError, ConnectionLost, ControllerRefusal, ProtocolError
from ._client_subscription import DEFAULT_QUEUE_SIZE, Subscription, SubscriptionClosed, _Changes
from ._client_values import (
    Admitted,
    Duplicate,
    ForceStopStarted,
    HistoryRead,
    Notification,
    Observed,
    OutcomeUnknown,
    PromptOutcome,
    Reconnected,
    Refused,
    RequestState,
    Seam,
    SentRequest,
    parse_observed,
)
from ._methods import INTERNAL_ERROR, REFUSED

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_QUEUE_SIZE",
    "MAX_LINE_BYTES",
    "Admitted",
    "ControllerClient",
    "Duplicate",
    "ForceStopStarted",
    "HistoryRead",
    "Notification",
    "Observed",
    "OutcomeUnknown",
    "PromptOutcome",
    "Reconnected",
    "Refused",
    "RequestState",
    "Seam",
    "SentRequest",
    "Subscription",
    "SubscriptionClosed",
]

logger = logging.getLogger("mosaic.controller.client")

DEFAULT_PING_INTERVAL = 60.0
"""Seconds between pings: five per idle bound (the server closes a connection quiet for 300 s)."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest line the client reads. A reply holds at most one history page (8 MiB, chat-pages
MAX_PAGE_BYTES), escaped; a longer line is a broken server and ends the connection."""

MAX_HISTORY_PAGES = 10_000
"""Pages `read_history` follows in one snapshot before it gives up (a bug guard: 8 MiB pages and a
256 MiB file cap make a real chain far shorter)."""


# ----------------------------------------------------------------------------------------- connection


@dataclass
class _Pending:
    method: str
    future: asyncio.Future[Any] | None  # None: nobody waits (a ping)
    entry: SentRequest | None = None  # a prompt's request


@dataclass
class _Connection:
    number: int
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    calls: dict[int, _Pending] = field(default_factory=dict)
    reader_task: asyncio.Task[None] | None = None
    pinger_task: asyncio.Task[None] | None = None
    lost: bool = False
    reason: str | None = None
    closing_reason: str | None = None  # what the server said in `closing`
    closing_message: str = ""
    observed: bool = False
    incarnation: str | None = None  # the token this connection's first observe returned
    conn_id: str | None = None  # the controller's name for this connection


def _dumps(message: Mapping[str, Any]) -> bytes:
    # Compact UTF-8, as the server writes; a lone surrogate cannot be encoded (UnicodeEncodeError), which is
    # right: the server's strict JSON refuses one anyway.
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"


def _channel_refusal(conn: _Connection) -> ControllerRefusal | None:
    """The controller closed `conn` at connect because no grant names this client's uid, gid or groups
    (`closing` "channel", issue 19): it read none of the connection's bytes, so every call on it was
    refused, never of unknown outcome. None for any other end."""
    if conn.closing_reason != "channel":
        return None
    return ControllerRefusal("channel", conn.closing_message or "the controller refused this connection: no grant")


def _new_request_id() -> str:
    # Random: every client of a conversation is local-operator, and the dedup key is (actor, conversation,
    # client request id), so two terminals must never pick the same id by counting.
    return "cr-" + secrets.token_hex(12)



# ------------------------------------------------------------------------------------------- the client


class ControllerClient:
    """One client of one controller (module docstring). Make it with `connect`; finish with `aclose`.

    Use it on one event loop. Every coroutine here may be cancelled: a command cancelled after its line
    was written still has its reply read and applied (state, receipts) when it comes, and a prompt stays
    in `requests`.
    """

    def __init__(self, socket_path: str, *, ping_interval: float | None = DEFAULT_PING_INTERVAL) -> None:
        """Prefer `connect`. `ping_interval` None sends no pings (a short-lived connection)."""
        if ping_interval is not None and not ping_interval > 0:
            raise ValueError(f"ping_interval must be positive seconds or None, not {ping_interval!r}")
        self._socket_path = socket_path
        self._ping_interval = ping_interval
        self._conn: _Connection | None = None
        self._connections = 0
        self._next_id = 0
        self._incarnation: str | None = None
        self._generation: int | None = None
        self._binding: Mapping[str, Any] | None = None
        self._connection_record: Mapping[str, Any] | None = None
        self._role: str | None = None
        self._requests: dict[str, SentRequest] = {}
        self._by_request: dict[tuple[str, str], SentRequest] = {}  # (incarnation, request id) -> request
        self._stops: dict[str, Mapping[str, Any]] = {}
        self._subs: list[Subscription] = []
        self._changes = _Changes()
        self._newly_unknown: list[SentRequest] = []
        self._closed = False
        self.pings_sent = 0
        self.stray_errors: list[Mapping[str, Any]] = []  # errors with id null (not matched to a call)

    # -- lifecycle ------------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, socket_path: str, *, ping_interval: float | None = DEFAULT_PING_INTERVAL
                      ) -> ControllerClient:
        """Open one connection to the controller at `socket_path` (not yet observing: call `observe`).
        Raises what ``asyncio.open_unix_connection`` raises (FileNotFoundError, ConnectionRefusedError,
        PermissionError, ...); then nothing is left open. Cancellation: likewise."""
        client = cls(socket_path, ping_interval=ping_interval)
        client._conn = await client._open(socket_path)
        return client

    async def aclose(self) -> None:
        """Close the connection and every subscription (they can still be drained). Outstanding commands
        end as if the connection were lost (a prompt becomes outcome-unknown). Idempotent."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if conn is not None:
            await self._close_connection(conn, "closed")
        for sub in list(self._subs):
            sub.close()
        self._notify()

    async def reconnect(self, socket_path: str | None = None) -> Reconnected:
        """Close the current connection (if any), open a new one to `socket_path` (default: the last
        path) and observe (module rule 5). Raises what `connect` raises, leaving the client disconnected,
        or what `observe` raises. Cancellation: the client may be left disconnected; call it again."""
        self._check_open()
        old = self._conn
        if old is not None and not old.lost:
            await self._close_connection(old, "reconnect")
        before = self._incarnation
        if socket_path is not None:
            self._socket_path = socket_path
        self._conn = await self._open(self._socket_path)
        self._newly_unknown = []
        observed = await self.observe()
        changed = before is not None and observed.incarnation != before
        return Reconnected(observed, changed, tuple(self._newly_unknown))

    # -- what the client knows ------------------------------------------------------------------------

    @property
    def socket_path(self) -> str:
        return self._socket_path

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.lost

    @property
    def connection_number(self) -> int:
        """This client's current (or last) connection, numbered from 1."""
        return self._connections

    @property
    def connection_id(self) -> str | None:
        """The controller's name for the current connection (from its observe)."""
        return self._conn.conn_id if self._conn is not None else None

    @property
    def incarnation(self) -> str | None:
        """The controller incarnation token every command carries (from the last observe)."""
        return self._incarnation

    @property
    def generation(self) -> int | None:
        """The latest controller generation seen (observe, takeover, binding records)."""
        return self._generation

    @property
    def role(self) -> str | None:
        """"controller" or "observer" for the current connection, as last seen; None before observe."""
        return self._role

    @property
    def binding(self) -> Mapping[str, Any] | None:
        """The latest CHAT-01 binding record seen."""
        return self._binding

    @property
    def requests(self) -> Mapping[str, SentRequest]:
        """Every prompt this client sent, by client request id (read-only view)."""
        return dict(self._requests)

    @property
    def stops(self) -> Mapping[str, Mapping[str, Any]]:
        """The latest record of every stop seen, by stop id."""
        return dict(self._stops)

    def pending(self) -> list[SentRequest]:
        """Requests written and not settled: "sending" or "pending"."""
        return [r for r in self._requests.values() if r.state in ("sending", "pending")]

    def unknown(self) -> list[SentRequest]:
        """Requests whose outcome is unknown (state outcome-unknown, or a delivery-unknown receipt)."""
        return [r for r in self._requests.values() if r.outcome_unknown]

    def subscribe(self, *, maxsize: int = DEFAULT_QUEUE_SIZE) -> Subscription:
        """A new subscriber: every notification from now on, across reconnects, until it is closed.
        Raises ValueError for a maxsize that is not a positive integer."""
        self._check_open()
        sub = Subscription(maxsize, self._subs.remove)
        self._subs.append(sub)
        return sub

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` is true, checking after every change the client applies (a line read,
        a connection lost). Bound it with ``asyncio.timeout``. Raises `ClientStateError` once the client is
        closed and the predicate is still false. Cancellation: nothing changes."""
        await self._changes.wait_until(predicate, lambda: self._closed, "the client is closed")

    async def wait_settled(self, client_request_id: str) -> SentRequest:
        """Wait until the request leaves "sending" and "pending"; return it. KeyError for an unknown id."""
        request = self._requests[client_request_id]
        await self.wait_until(lambda: request.state not in ("sending", "pending"))
        return request

    async def wait_stop(self, stop_id: str) -> Mapping[str, Any]:
        """Wait until the stop's latest record is no longer "stopping" (reconciled, uncertain, stopped or
        superseded); return that record."""
        await self.wait_until(lambda: self._stops.get(stop_id, {}).get("state", "stopping") != "stopping")
        return self._stops[stop_id]

    # -- the protocol's methods -----------------------------------------------------------------------

    async def observe(self, cursor: str | None = None) -> Observed:
        """Subscribe this connection to the live stream (its first call) and read a history page: the
        first page of the current branch, or the page `cursor` names. The first observe of a connection
        also reaches subscribers as an ``observed`` notification at its place in the stream.

        Raises `ControllerRefusal` (``cursor`` for a cursor the reader refuses; ``stale-incarnation``),
        `ClientRefusal` ``channel`` when not connected, `ConnectionLost`, `ProtocolError`."""
        conn = self._live_connection()
        params: dict[str, Any] = {}
        if conn.incarnation is not None:
            params["incarnation"] = conn.incarnation
        if cursor is not None:
            params["cursor"] = cursor
        result = await self._call(conn, "observe", params)
        assert isinstance(result, Observed)
        return result

    async def read_history(self) -> HistoryRead:
        """An exact history cut for this client's stream. The controller's observe on an already
        subscribed connection reports that connection's first seam again, not a new one, so this opens a
        short-lived observer connection to the same socket, observes there (every page of the snapshot,
        following ``nextCursor``), and closes it. Its seam is exact: events from ``from_sequence`` on,
        which this client's own connection also carries, follow the pages.

        Raises what `connect` and `observe` raise; `ProtocolError` when the pages do not end. Cancellation:
        the side connection is closed; nothing of this client changes."""
        self._check_open()
        side = await ControllerClient.connect(self._socket_path, ping_interval=None)
        try:
            first = await side.observe()
            results = [first.history]
            cursor = first.next_cursor
            while cursor is not None:
                if len(results) >= MAX_HISTORY_PAGES:
                    raise ProtocolError(None, f"the history did not end within {MAX_HISTORY_PAGES} pages")
                more = await side.observe(cursor)
                results.append(more.history)
                cursor = more.next_cursor
            return HistoryRead(first.incarnation, first.seam, first.binding, tuple(results))
        finally:
            await side.aclose()

    async def prompt(self, text: str, *, client_request_id: str | None = None) -> PromptOutcome:
        """Send `text` as a prompt under the current incarnation token and generation (module rule 4).

        Returns `Admitted` (with the receipt), `Duplicate` (an exact retry: the same receipt, H12),
        `Refused` (the controller's refusal, or the library's: ``channel`` when not connected,
        ``outcome-unknown`` for a client request id sent under an older incarnation, ``unencodable``), or
        `OutcomeUnknown` (the connection was lost after the line was written, before the reply).

        A fresh random client request id is used unless one is given. Reusing an id with the same text is
        an exact retry; with other text the controller refuses ``conflicting-request`` (H13). Raises
        `ClientStateError` before the first observe, `ProtocolError` for a protocol error. Cancellation:
        once written, the request stays in `requests` and follows its reply when it arrives.
        """
        incarnation, generation = self._token()
        crid = client_request_id if client_request_id is not None else _new_request_id()
        prior = self._requests.get(crid)
        if prior is not None and prior.incarnation != incarnation:
            return Refused(text, crid, ClientRefusal(
                "outcome-unknown", f"client request {crid!r} was sent under controller incarnation "
                                   f"{prior.incarnation}; its outcome is unknown and it is never sent again"))
        conn = self._conn
        if conn is None or conn.lost or not conn.observed or conn.writer.is_closing():
            return Refused(text, crid, ClientRefusal("channel", "not connected (or not observed yet): nothing "
                                                                "was sent"))
        params = {"incarnation": incarnation, "generation": generation, "clientRequestId": crid, "text": text}
        try:
            line = self._encode_call(conn, "prompt", params)
        except UnicodeEncodeError:
            return Refused(text, crid, ClientRefusal("unencodable", "the text holds a lone surrogate"))
        # From here to the write nothing awaits: the connection checked above is the one written to.
        exact = prior is not None and prior.text == text
        entry = prior if exact and prior is not None else SentRequest(crid, text, incarnation, generation)
        if entry.state in ("refused", "outcome-unknown"):
            # Within one incarnation the controller's dedup makes this safe: a retry of an id it admitted
            # is answered "duplicate"; any other answer means it never admitted the earlier attempt.
            entry.state, entry.refusal, entry.unknown_reason = "sending", None, None
        # Other text under a live id is registered only once admitted (H13: the controller refuses it
        # unless the earlier attempt never reached it).
        if prior is None or prior.state == "refused" or exact:
            self._requests[crid] = entry
        try:
            result = await self._write_and_wait(conn, line, entry=entry)
        except ControllerRefusal as refusal:  # the entry was moved to refused in stream order (_on_answer)
            return Refused(text, crid, refusal)
        except ConnectionLost:
            return OutcomeUnknown(entry)
        except ProtocolError as exc:
            if exc.code == INTERNAL_ERROR:
                return OutcomeUnknown(entry)
            raise
        receipt = result.get("receipt")
        assert isinstance(receipt, Mapping)  # checked in _on_prompt_result
        if result.get("outcome") == "duplicate":
            return Duplicate(entry, receipt)
        return Admitted(entry, receipt)

    async def retry(self, client_request_id: str) -> PromptOutcome:
        """Send a request this client sent before again, exactly (same id, same text). Safe only within one
        controller incarnation, where the controller answers with the same receipt (H12) or admits it
        once; a request from an older incarnation is refused ``outcome-unknown`` by the library and nothing
        is sent. The library never calls this by itself. KeyError for an unknown id."""
        entry = self._requests[client_request_id]
        return await self.prompt(entry.text, client_request_id=client_request_id)

    async def takeover(self) -> Mapping[str, Any]:
        """Take control with the current generation as the expected one (H1). Returns the reply
        (``generation``, ``how``, ``previous``, ``connection``). Raises `ControllerRefusal` (generation,
        already-controller, fenced, stale-incarnation), and what every command raises."""
        _, generation = self._token()
        return await self._command("takeover", {"expectedGeneration": generation})

    async def acquire_recovery_control(self) -> Mapping[str, Any]:
        """Take control when the controller's connection is gone (controller-present otherwise). Returns
        the reply, as `takeover`."""
        return await self._command("acquire-recovery-control", {})

    async def interrupt(self) -> Mapping[str, Any]:
        """Interrupt the turn (R3-1): returns the stop record (state "stopping"); `wait_stop` waits for
        its end. Raises `ControllerRefusal` (no-turn, fenced, generation, controller, ...)."""
        _, generation = self._token()
        result = await self._command("interrupt", {"generation": generation})
        return self._stop_of(result)

    async def issue_confirmation(self, operation: Literal["force-stop", "recover"]) -> Mapping[str, Any]:
        """Ask for a single-use confirmation of `operation`; returns the confirmation record (its summary
        says what a force stop kills)."""
        result = await self._command("issue-confirmation", {"operation": operation})
        return self._record_of(result, "confirmation")

    async def answer_confirmation(self, confirmation_id: str, answer: Literal["confirm", "cancel"]
                                  ) -> Mapping[str, Any]:
        """Answer a confirmation this connection was issued; returns the confirmation record."""
        result = await self._command("answer-confirmation", {"confirmation": confirmation_id, "answer": answer})
        return self._record_of(result, "confirmation")

    async def force_stop(self, confirmation_id: str) -> Mapping[str, Any]:
        """Force stop with an answered confirmation (consumed on use, H17). Returns the stop record (state
        "stopping"); its end comes as a record (`wait_stop`)."""
        result = await self._command("force-stop", {"confirmation": confirmation_id})
        return self._stop_of(result)

    async def force_stop_confirmed(self) -> ForceStopStarted:
        """Issue a force-stop confirmation, answer it "confirm", and use it. Raises the first refusal met
        (a refusal after the issue leaves the confirmation unused; it expires)."""
        issued = await self.issue_confirmation("force-stop")
        answered = await self.answer_confirmation(str(issued["confirmation"]), "confirm")
        stop = await self.force_stop(str(issued["confirmation"]))
        return ForceStopStarted(issued, answered, stop)

    async def recover(self, confirmation_id: str) -> Mapping[str, Any]:
        """Recover after a verified stop with an answered recover confirmation. Returns the controller's
        reply (the eligibility the lifecycle layer reports); raises `ControllerRefusal` (stop-proof,
        confirmation, or a lifecycle code such as eligibility, kept as sent)."""
        return await self._command("recover", {"confirmation": confirmation_id})

    async def ping(self) -> None:
        """One round trip (the server answers ``{}``). Raises `ClientRefusal` channel, `ConnectionLost`."""
        conn = self._live_connection()
        await self._call(conn, "ping", {})

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send any method with `params` exactly as given (no token added) and return its result: the
        escape hatch for methods this library does not wrap yet. Raises like every command."""
        conn = self._live_connection()
        return await self._call(conn, method, dict(params))

    # -- commands: plumbing ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientStateError("the client is closed")

    def _token(self) -> tuple[str, int]:
        self._check_open()
        if self._incarnation is None or self._generation is None:
            raise ClientStateError("observe first: commands carry the incarnation token it returns")
        return self._incarnation, self._generation

    def _live_connection(self, *, observed: bool = False) -> _Connection:
        self._check_open()
        conn = self._conn
        refused = None if conn is None else _channel_refusal(conn)
        if refused is not None:
            raise refused
        if conn is None or conn.lost:
            raise ClientRefusal("channel", "not connected: nothing was sent")
        if observed and not conn.observed:
            raise ClientRefusal("channel", "this connection has not observed yet: nothing was sent")
        return conn

    async def _command(self, method: str, params: dict[str, Any]) -> Mapping[str, Any]:
        incarnation, _ = self._token()
        conn = self._live_connection(observed=True)
        result = await self._call(conn, method, {"incarnation": incarnation, **params})
        if not isinstance(result, Mapping):
            raise ProtocolError(None, f"the {method} result is not an object")
        return result

    def _stop_of(self, result: Mapping[str, Any]) -> Mapping[str, Any]:
        return self._record_of(result, "stop")  # registered in stream order by _on_result

    @staticmethod
    def _record_of(result: Mapping[str, Any], key: str) -> Mapping[str, Any]:
        record = result.get(key)
        if not isinstance(record, Mapping):
            raise ProtocolError(None, f"the reply has no {key} record")
        return record

    def _encode_call(self, conn: _Connection, method: str, params: Mapping[str, Any]) -> tuple[int, str, bytes]:
        self._next_id += 1
        rpc_id = self._next_id
        return rpc_id, method, _dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})

    async def _call(self, conn: _Connection, method: str, params: Mapping[str, Any]) -> Any:
        try:
            line = self._encode_call(conn, method, params)
        except UnicodeEncodeError as exc:
            raise ClientRefusal("unencodable", f"a parameter holds a lone surrogate: {exc.reason}") from None
        return await self._write_and_wait(conn, line)

    async def _write_and_wait(self, conn: _Connection, line: tuple[int, str, bytes], *,
                              entry: SentRequest | None = None) -> Any:
        rpc_id, method, data = line
        if conn.lost or conn.writer.is_closing():
            raise ClientRefusal("channel", "not connected: nothing was sent")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending = _Pending(method, future, entry)
        conn.calls[rpc_id] = pending
        conn.writer.write(data)  # from here on, a lost connection makes the outcome unknown
        try:
            await conn.writer.drain()
        except (ConnectionError, OSError) as exc:
            self._lost(conn, f"write failed: {type(exc).__name__}")
        return await future

    def _send_ping(self, conn: _Connection) -> None:
        if conn.lost or conn.writer.is_closing():
            return
        rpc_id, _, data = self._encode_call(conn, "ping", {})
        conn.calls[rpc_id] = _Pending("ping", None)
        conn.writer.write(data)
        self.pings_sent += 1

    # -- the connection -------------------------------------------------------------------------------

    async def _open(self, path: str) -> _Connection:
        reader, writer = await asyncio.open_unix_connection(path, limit=MAX_LINE_BYTES)
        self._connections += 1
        conn = _Connection(self._connections, reader, writer)
        loop = asyncio.get_running_loop()
        conn.reader_task = loop.create_task(self._read_loop(conn), name=f"mosaic-client-reader-{conn.number}")
        if self._ping_interval is not None:
            conn.pinger_task = loop.create_task(self._ping_loop(conn, self._ping_interval),
                                                name=f"mosaic-client-pinger-{conn.number}")
        return conn

    async def _close_connection(self, conn: _Connection, reason: str) -> None:
        self._lost(conn, reason)  # first, so the reason is ours and not the reader's "eof"
        tasks = [t for t in (conn.reader_task, conn.pinger_task) if t is not None and t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(Exception):
            await conn.writer.wait_closed()

    async def _ping_loop(self, conn: _Connection, interval: float) -> None:
        while not conn.lost:
            await asyncio.sleep(interval)  # the ping period itself, not a synchronisation
            try:
                self._send_ping(conn)
                await conn.writer.drain()
            except (ConnectionError, OSError):
                return  # the reader sees the loss

    async def _read_loop(self, conn: _Connection) -> None:
        reason = "eof"
        try:
            while True:
                line = await conn.reader.readline()
                if not line.endswith(b"\n"):
                    break  # EOF (an unterminated last line is not a message)
                if not self._on_line(conn, line):
                    reason = "protocol-violation"
                    break
        except ValueError:
            reason = "line-too-long"  # StreamReader.readline past MAX_LINE_BYTES
        except (ConnectionError, OSError) as exc:
            reason = f"reset: {type(exc).__name__}"
        finally:
            self._lost(conn, reason)

    def _lost(self, conn: _Connection, reason: str) -> None:
        """The connection ended: fail every call waiting on it (a written prompt becomes outcome-unknown),
        tell subscribers once, wake waiters. Idempotent."""
        if conn.lost:
            return
        conn.lost = True
        conn.reason = conn.closing_reason or reason
        if conn.pinger_task is not None and conn.pinger_task is not asyncio.current_task():
            conn.pinger_task.cancel()
        with contextlib.suppress(Exception):
            conn.writer.close()
        calls, conn.calls = conn.calls, {}
        refused = _channel_refusal(conn)
        for pending in calls.values():
            entry = pending.entry
            if entry is not None and entry.state == "sending":
                if refused is not None:
                    entry.state, entry.refusal = "refused", refused
                else:
                    entry.state, entry.unknown_reason = "outcome-unknown", "connection-lost"
            if pending.future is not None and not pending.future.done():
                pending.future.set_exception(refused or ConnectionLost(pending.method, conn.reason))
                # The caller normally retrieves it; if it was cancelled, do not warn about it.
                pending.future.exception()
        if conn is self._conn:
            self._role = None
            self._fanout(Notification("disconnected", {"reason": conn.reason}, "client", conn.number), droppable=False)
        self._notify()

    # -- lines in -------------------------------------------------------------------------------------

    def _on_line(self, conn: _Connection, line: bytes) -> bool:
        """Apply one line. False when it is not a JSON-RPC message (the connection is then closed)."""
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
            self._on_notification(conn, method, params)
        elif "result" in message or "error" in message:
            self._on_answer(conn, message)
        else:
            return False
        self._notify()
        return True

    def _on_answer(self, conn: _Connection, message: Mapping[str, Any]) -> None:
        rpc_id = message.get("id")
        pending = conn.calls.pop(rpc_id, None) if isinstance(rpc_id, int) and not isinstance(rpc_id, bool) else None
        if pending is None:
            if "error" in message:
                self.stray_errors.append(dict(message))
            return
        outcome: Any
        if "error" in message:
            outcome = self._error_of(message.get("error"))
            entry = pending.entry
            if entry is not None and entry.state == "sending":
                if isinstance(outcome, ProtocolError) and outcome.code == INTERNAL_ERROR:
                    # A bug in the controller answered: it may have struck after the dispatch.
                    entry.state, entry.unknown_reason = "outcome-unknown", "internal-error"
                else:  # a refusal, or the protocol layer refused the request before the core saw it
                    entry.state = "refused"
                    entry.refusal = outcome if isinstance(outcome, ControllerRefusal) else None
        else:
            try:
                outcome = self._on_result(conn, pending, message.get("result"))
            except ProtocolError as exc:
                outcome = exc
        future = pending.future
        if future is None or future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    @staticmethod
    def _error_of(error: object) -> ControllerRefusal | ProtocolError:
        if not isinstance(error, Mapping):
            return ProtocolError(None, "an error reply without an error object")
        code, message, data = error.get("code"), error.get("message"), error.get("data")
        text = message if isinstance(message, str) else ""
        if code == REFUSED:
            refusal = ControllerRefusal.from_wire(data)
            if refusal is not None:
                return refusal
            return ProtocolError(REFUSED, f"a refusal without a well-formed {{code, reconcile, message}}: {text}", data)
        return ProtocolError(code if isinstance(code, int) and not isinstance(code, bool) else None, text, data)

    def _on_result(self, conn: _Connection, pending: _Pending, result: Any) -> Any:
        """Apply a result to the client's state now, in stream order (module rule 1); return what the
        waiting call returns. Raises ProtocolError for a result of the wrong shape."""
        if pending.method == "observe":
            return self._on_observed(conn, result)
        if pending.method in ("takeover", "acquire-recovery-control") and isinstance(result, Mapping):
            generation = result.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool):
                self._generation = generation
                self._role = "controller"
        elif pending.method in ("interrupt", "force-stop") and isinstance(result, Mapping):
            stop = result.get("stop")
            if isinstance(stop, Mapping) and isinstance(stop.get("stop"), str):
                self._stops.setdefault(stop["stop"], stop)  # the reply precedes the stop's records
        elif pending.method == "prompt" and pending.entry is not None:
            self._on_prompt_result(conn, pending.entry, result)
        return result

    def _on_prompt_result(self, conn: _Connection, entry: SentRequest, result: Any) -> None:
        if not isinstance(result, Mapping) or result.get("outcome") not in ("admitted", "duplicate"):
            raise ProtocolError(None, "a prompt result that is neither admitted nor duplicate")
        request, receipt = result.get("request"), result.get("receipt")
        if not isinstance(request, Mapping) or not isinstance(receipt, Mapping) or not isinstance(
                request.get("request"), str):
            raise ProtocolError(None, "a prompt result without its request and receipt records")
        entry.request = dict(request)
        if conn.incarnation is not None:
            self._by_request[(conn.incarnation, request["request"])] = entry
        entry._apply_receipt(receipt)
        self._requests[entry.client_request_id] = entry

    def _on_observed(self, conn: _Connection, result: Any) -> Observed:
        observed = parse_observed(result, first=not conn.observed)
        if observed.first:
            conn.observed = True
            conn.incarnation = observed.incarnation
            conn_id = observed.connection.get("connection")
            conn.conn_id = conn_id if isinstance(conn_id, str) else None
            if self._incarnation is not None and observed.incarnation != self._incarnation:
                self._incarnation_changed(self._incarnation)
            self._incarnation = observed.incarnation
            role = observed.connection.get("role")
            self._role = role if isinstance(role, str) else None
        self._generation = observed.generation
        self._binding = observed.binding
        if observed.first:
            self._fanout(Notification("observed", {"incarnation": observed.incarnation,
                                                   "fromSequence": observed.seam.from_sequence},
                                      "client", conn.number, observed), droppable=False)
        return observed

    def _incarnation_changed(self, old: str) -> None:
        """The controller restarted (module rule 5): everything unsettled under `old` is outcome-unknown
        for good. Nothing is resubmitted."""
        for entry in self._requests.values():
            if entry.incarnation == old and entry.state in ("sending", "pending", "outcome-unknown"):
                entry.state, entry.unknown_reason = "outcome-unknown", "incarnation-changed"
                self._newly_unknown.append(entry)

    def _on_notification(self, conn: _Connection, method: str, params: Mapping[str, Any]) -> None:
        if conn is not self._conn or conn.lost:
            return
        if method == "record":
            self._on_record(conn, params)
        elif method == "marker" and params.get("reason") == "lagging":
            # The server dropped notifications for us: receipts may have been among them.
            for entry in self._requests.values():
                if entry.state in ("sending", "pending") and entry.incarnation == conn.incarnation:
                    entry.receipt_gap = True
        elif method == "closing":
            reason, message = params.get("reason"), params.get("message")
            conn.closing_reason = reason if isinstance(reason, str) else "closing"
            conn.closing_message = message if isinstance(message, str) else ""
        self._fanout(Notification(method, params, "server", conn.number), droppable=method in ("event", "record"))

    def _on_record(self, conn: _Connection, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "binding":
            if conn.incarnation is not None and record.get("incarnation") not in (None, conn.incarnation):
                return
            self._binding = record
            generation = record.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool):
                self._generation = generation
            if conn.conn_id is not None:
                self._role = "controller" if record.get("controllerConnection") == conn.conn_id else "observer"
        elif kind == "receipt" and conn.incarnation is not None:
            request_id = record.get("request")
            entry = self._by_request.get((conn.incarnation, request_id)) if isinstance(request_id, str) else None
            if entry is not None:
                entry._apply_receipt(record)
        elif kind == "stop":
            stop_id = record.get("stop")
            if isinstance(stop_id, str):
                self._stops[stop_id] = record

    # -- fan-out and waiters --------------------------------------------------------------------------

    def _fanout(self, note: Notification, *, droppable: bool) -> None:
        for sub in list(self._subs):
            sub._put(note, droppable=droppable)

    def _notify(self) -> None:
        self._changes.wake()


