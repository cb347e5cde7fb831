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
   uid, gid or groups: `mosaic.controller.access`) read nothing this client wrote: every call on it raises
   `RemoteRefusal` ``channel`` with the controller's message, never `ConnectionLost`.
8. A client made with a `grant` says the seed's ``hello`` naming it as the first request of each of its
   connections (the first and every reconnect), before anything else: the connection may then do what
   that grant allows, never more (the controller's README, "Who may connect"). A refused hello (``grant``) closes
   nothing: `connect` and `reconnect` raise it and the client stays as it was told.
9. Drafts are client-local (seed "Observe"): each prompt carries a draft id (the caller's, or its client
   request id) and a draft revision (the caller's, or 1); the library keeps no draft state.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ._errors import (
    ClientRefusal,
    ClientStateError,
    ConnectionLost,
    RemoteProtocolError,
    RemoteRefusal,
)
from ._protocol import INTERNAL_ERROR
from ._state import ClientState
from ._subscription import DEFAULT_QUEUE_SIZE, Subscription, SubscriptionClosed

if TYPE_CHECKING:
    from ._values import (
        AdmissionUnknown,
        Admitted,
        Duplicate,
        ForceStopStarted,
        HistoryRead,
        Notification,
        Observed,
        PromptOutcome,
        Reconnected,
        Refused,
        RequestState,
        Seam,
        SentRequest,
    )
from ._wire import MAX_LINE_BYTES, WireConnection

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
    "AdmissionUnknown",
    "PromptOutcome",
    "Reconnected",
    "Refused",
    "RequestState",
    "Seam",
    "SentRequest",
    "Subscription",
    "SubscriptionClosed",
]

logger = logging.getLogger("mosaic.controller_client")

DEFAULT_PING_INTERVAL = 60.0
"""Seconds between pings: five per idle bound (the server closes a connection quiet for 300 s)."""

MAX_HISTORY_PAGES = 10_000
"""Pages `read_history` follows in one snapshot before it gives up (a bug guard: 8 MiB pages and a
256 MiB file cap make a real chain far shorter)."""


def _new_request_id() -> str:
    # Random: every client of a conversation is local-operator, and the dedup key is (actor, conversation,
    # client request id), so two terminals must never pick the same id by counting.
    return "cr-" + os.urandom(12).hex()  # what secrets.token_hex does, without importing secrets



# ------------------------------------------------------------------------------------------- the client


class ControllerClient:
    """One client of one controller (module docstring). Make it with `connect`; finish with `aclose`.

    Use it on one event loop. Every coroutine here may be cancelled: a command cancelled after its line
    was written still has its reply read and applied (state, receipts) when it comes, and a prompt stays
    in `requests`.
    """

    def __init__(self, socket_path: str, *, ping_interval: float | None = DEFAULT_PING_INTERVAL,
                 grant: str | None = None) -> None:
        """Prefer `connect`. `ping_interval` None sends no pings (a short-lived connection). `grant`: say
        hello naming it on every connection (module rule 8)."""
        if ping_interval is not None and not ping_interval > 0:
            raise ValueError(f"ping_interval must be positive seconds or None, not {ping_interval!r}")
        self._socket_path = socket_path
        self._ping_interval = ping_interval
        self._grant = grant
        self.granted: Mapping[str, Any] | None = None  # the last hello's reply: grant, operations, scope
        self._conn: WireConnection | None = None
        self._connections = 0
        self._state = ClientState()

    # -- lifecycle ------------------------------------------------------------------------------------

    @classmethod
    async def connect(cls, socket_path: str, *, ping_interval: float | None = DEFAULT_PING_INTERVAL,
                      grant: str | None = None) -> ControllerClient:
        """Open one connection to the controller at `socket_path` (not yet observing: call `observe`), and
        with `grant` say the seed's hello naming it (module rule 8; `granted` then holds its reply: grant,
        operations, scope, scopeHolds). Raises what ``asyncio.open_unix_connection``
        raises (FileNotFoundError, ConnectionRefusedError, PermissionError, ...), then nothing is left
        open; with a grant, `RemoteRefusal` (``grant``, ``unsupported-capability``, ``channel``) after
        closing the connection. Cancellation: likewise."""
        client = cls(socket_path, ping_interval=ping_interval, grant=grant)
        try:
            await client._open(socket_path)
        except BaseException:
            await client.aclose()
            raise
        return client

    async def aclose(self) -> None:
        """Close the connection and every subscription (they can still be drained). Outstanding commands
        end as if the connection were lost (a prompt becomes outcome-unknown). Idempotent."""
        if self._state.closed:
            return
        self._state.closed = True
        conn = self._conn
        if conn is not None:
            await conn.close("closed")
        for sub in list(self._state.subs):
            sub.close()
        self._state.notify()

    async def reconnect(self, socket_path: str | None = None) -> Reconnected:
        """Close the current connection (if any), open a new one to `socket_path` (default: the last
        path) and observe (module rule 5). Raises what `connect` raises, leaving the client disconnected,
        or what `observe` raises. Cancellation: the client may be left disconnected; call it again."""
        self._state.check_open()
        old = self._conn
        if old is not None and not old.lost:
            await old.close("reconnect")
        before = self._state.incarnation
        if socket_path is not None:
            self._socket_path = socket_path
        await self._open(self._socket_path)
        self._state.newly_unknown = []
        observed = await self.observe()
        from ._values import Reconnected  # on first use (issue 34: the import of the client stays light)

        changed = before is not None and observed.incarnation != before
        return Reconnected(observed, changed, tuple(self._state.newly_unknown))

    # -- what the client knows ------------------------------------------------------------------------

    @property
    def socket_path(self) -> str:
        return self._socket_path

    @property
    def pings_sent(self) -> int:
        """Pings written by every connection of this client."""
        return self._state.pings_before + (self._conn.pings_sent if self._conn is not None and not self._conn.lost else 0)

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
        return self._state.incarnation

    @property
    def generation(self) -> int | None:
        """The latest controller generation seen (observe, takeover, binding records)."""
        return self._state.generation

    @property
    def role(self) -> str | None:
        """"controller" or "observer" for the current connection, as last seen; None before observe."""
        return self._state.role

    @property
    def binding(self) -> Mapping[str, Any] | None:
        """The latest CHAT-01 binding record seen."""
        return self._state.binding

    @property
    def requests(self) -> Mapping[str, SentRequest]:
        """Every prompt this client sent, by client request id (read-only view)."""
        return dict(self._state.requests)

    @property
    def stops(self) -> Mapping[str, Mapping[str, Any]]:
        """The latest record of every stop seen, by stop id."""
        return dict(self._state.stops)

    def pending(self) -> list[SentRequest]:
        """Requests written and not settled: "sending" or "pending"."""
        return self._state.pending()

    def unknown(self) -> list[SentRequest]:
        """Requests whose outcome is unknown (state outcome-unknown, or a delivery-unknown receipt)."""
        return self._state.unknown()

    def subscribe(self, *, maxsize: int = DEFAULT_QUEUE_SIZE) -> Subscription:
        """A new subscriber: every notification from now on, across reconnects, until it is closed.
        Raises ValueError for a maxsize that is not a positive integer."""
        self._state.check_open()
        sub = Subscription(maxsize, self._state.subs.remove)
        self._state.subs.append(sub)
        return sub

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` is true, checking after every change the client applies (a line read,
        a connection lost). Bound it with ``asyncio.timeout``. Raises `ClientStateError` once the client is
        closed and the predicate is still false. Cancellation: nothing changes."""
        await self._state.wait_until(predicate)

    async def wait_settled(self, client_request_id: str) -> SentRequest:
        """Wait until the request leaves "sending" and "pending"; return it. KeyError for an unknown id."""
        request = self._state.requests[client_request_id]
        await self.wait_until(lambda: request.state not in ("sending", "pending"))
        return request

    async def wait_stop(self, stop_id: str) -> Mapping[str, Any]:
        """Wait until the stop's latest record is no longer "stopping" (reconciled, uncertain, stopped or
        superseded); return that record."""
        await self.wait_until(lambda: self._state.stops.get(stop_id, {}).get("state", "stopping") != "stopping")
        return self._state.stops[stop_id]

    # -- the protocol's methods -----------------------------------------------------------------------

    async def observe(self, cursor: str | None = None, *, limit: int | None = None) -> Observed:
        """Subscribe this connection to the live stream (its first call) and read a history page: the
        first page of the current branch, or the page `cursor` names. The first observe of a connection
        also reaches subscribers as an ``observed`` notification at its place in the stream.

        Raises `RemoteRefusal` (``cursor`` for a cursor the reader refuses; ``stale-incarnation``),
        `ClientRefusal` ``channel`` when not connected, `ConnectionLost`, `RemoteProtocolError`."""
        conn = self._live_connection()
        params: dict[str, Any] = {}
        if conn.incarnation is not None:
            params["incarnation"] = conn.incarnation
        if cursor is not None:
            params["cursor"] = cursor
        if limit is not None:  # 1-100, advisory (seed "Observe"): the reply says limitAdvisory
            params["limit"] = limit
        result = await conn.call("observe", params)
        from ._values import Observed

        assert isinstance(result, Observed)
        return result

    async def read_history(self) -> HistoryRead:
        """An exact history cut for this client's stream. The controller's observe on an already
        subscribed connection reports that connection's first seam again, not a new one, so this opens a
        short-lived observer connection to the same socket, observes there (every page of the snapshot,
        following ``nextCursor``), and closes it. Its seam is exact: events from ``from_sequence`` on,
        which this client's own connection also carries, follow the pages.

        Raises what `connect` and `observe` raise; `RemoteProtocolError` when the pages do not end. Cancellation:
        the side connection is closed; nothing of this client changes."""
        self._state.check_open()
        side = await ControllerClient.connect(self._socket_path, ping_interval=None, grant=self._grant)
        try:
            first = await side.observe()
            results = [first.history]
            cursor = first.next_cursor
            while cursor is not None:
                if len(results) >= MAX_HISTORY_PAGES:
                    raise RemoteProtocolError(None, f"the history did not end within {MAX_HISTORY_PAGES} pages")
                more = await side.observe(cursor)
                results.append(more.history)
                cursor = more.next_cursor
            from ._values import HistoryRead

            return HistoryRead(first.incarnation, first.seam, first.binding, tuple(results))
        finally:
            await side.aclose()

    async def prompt(self, text: str, *, client_request_id: str | None = None, draft_id: str | None = None,
                     draft_revision: int = 1) -> PromptOutcome:
        """Send `text` as a prompt under the current incarnation token and generation (module rule 4).

        Returns `Admitted` (with the receipt), `Duplicate` (an exact retry: the same receipt, H12),
        `Refused` (the controller's refusal, or the library's: ``channel`` when not connected,
        ``outcome-unknown`` for a client request id sent under an older incarnation, ``unencodable``), or
        `AdmissionUnknown` (the connection was lost after the line was written, before the reply).

        The prompt carries `draft_id` (default: its client request id) and `draft_revision` (default 1) into
        its request record (module rule 9). A fresh random client request id is used unless one is given.
        Reusing an id with the same text is
        an exact retry; with other text the controller refuses ``conflicting-request`` (H13). Raises
        `ClientStateError` before the first observe, `RemoteProtocolError` for a protocol error. Cancellation:
        once written, the request stays in `requests` and follows its reply when it arrives.
        """
        from ._values import AdmissionUnknown, Admitted, Duplicate, Refused, SentRequest

        incarnation, generation = self._token()
        crid = client_request_id if client_request_id is not None else _new_request_id()
        prior = self._state.requests.get(crid)
        if prior is not None and prior.incarnation != incarnation:
            return Refused(text, crid, ClientRefusal(
                "outcome-unknown", f"client request {crid!r} was sent under controller incarnation "
                                   f"{prior.incarnation}; its outcome is unknown and it is never sent again"))
        conn = self._conn
        if conn is None or not conn.writable or not conn.observed:
            return Refused(text, crid, ClientRefusal("channel", "not connected (or not observed yet): nothing "
                                                                "was sent"))
        params = {"incarnation": incarnation, "generation": generation, "clientRequestId": crid, "text": text,
                  "draftId": crid if draft_id is None else draft_id, "draftRevision": draft_revision}
        try:
            line = conn.encode_call("prompt", params)
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
            self._state.requests[crid] = entry
        try:
            result = await conn.write_and_wait(line, entry=entry)
        except RemoteRefusal as refusal:  # the entry was moved to refused in stream order (_on_answer)
            return Refused(text, crid, refusal)
        except ConnectionLost:
            return AdmissionUnknown(entry)
        except RemoteProtocolError as exc:
            if exc.code == INTERNAL_ERROR:
                return AdmissionUnknown(entry)
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
        entry = self._state.requests[client_request_id]
        return await self.prompt(entry.text, client_request_id=client_request_id)

    async def takeover(self) -> Mapping[str, Any]:
        """Take control with the current generation as the expected one (H1). Returns the reply
        (``generation``, ``how``, ``previous``, ``connection``). Raises `RemoteRefusal` (generation,
        already-controller, fenced, stale-incarnation), and what every command raises."""
        _, generation = self._token()
        return await self._command("takeover", {"expectedGeneration": generation})

    async def acquire_recovery_control(self) -> Mapping[str, Any]:
        """Take control when the controller's connection is gone (controller-present otherwise). Returns
        the reply, as `takeover`."""
        return await self._command("acquire-recovery-control", {})

    async def interrupt(self) -> Mapping[str, Any]:
        """Interrupt the turn (R3-1): returns the stop record (state "stopping"); `wait_stop` waits for
        its end. Raises `RemoteRefusal` (no-turn, fenced, generation, controller, ...)."""
        _, generation = self._token()
        result = await self._command("interrupt", {"generation": generation})
        return _record_of(result, "stop")  # registered in stream order by on_result

    async def approve(self, decision: str, choice: str) -> Mapping[str, Any]:
        """Answer a native dialog (issue 33; only a controller that answers dialogs takes it): `decision` is the
        nativeDecision record's id (its projection: new after each takeover), `choice` one of its `choices`,
        exactly. Returns the decision record (state "answered"; the same reply again for the same answer).
        Raises `RemoteRefusal` (decision: unknown, superseded, answered otherwise, past the engine's timeout or
        a stop, a choice not offered; unsupported-capability: the controller answers no dialog; generation,
        controller)."""
        _, generation = self._token()
        result = await self._command("approval", {"generation": generation, "decision": decision, "choice": choice})
        return _record_of(result, "decision")

    async def issue_confirmation(self, operation: Literal["force-stop", "recover"]) -> Mapping[str, Any]:
        """Ask for a single-use confirmation of `operation`; returns the confirmation record (its summary
        says what a force stop kills)."""
        result = await self._command("issue-confirmation", {"operation": operation})
        return _record_of(result, "confirmation")

    async def answer_confirmation(self, confirmation_id: str, answer: Literal["confirm", "cancel"]
                                  ) -> Mapping[str, Any]:
        """Answer a confirmation this connection was issued; returns the confirmation record."""
        result = await self._command("answer-confirmation", {"confirmation": confirmation_id, "answer": answer})
        return _record_of(result, "confirmation")

    async def force_stop(self, confirmation_id: str) -> Mapping[str, Any]:
        """Force stop with an answered confirmation (consumed on use, H17). Returns the stop record (state
        "stopping"); its end comes as a record (`wait_stop`)."""
        result = await self._command("force-stop", {"confirmation": confirmation_id})
        return _record_of(result, "stop")  # registered in stream order by on_result

    async def force_stop_confirmed(self) -> ForceStopStarted:
        """Issue a force-stop confirmation, answer it "confirm", and use it. Raises the first refusal met
        (a refusal after the issue leaves the confirmation unused; it expires)."""
        issued = await self.issue_confirmation("force-stop")
        answered = await self.answer_confirmation(str(issued["confirmation"]), "confirm")
        stop = await self.force_stop(str(issued["confirmation"]))
        from ._values import ForceStopStarted

        return ForceStopStarted(issued, answered, stop)

    async def recover(self, confirmation_id: str) -> Mapping[str, Any]:
        """Recover after a verified stop with an answered recover confirmation. Returns the controller's
        reply (the eligibility the lifecycle layer reports); raises `RemoteRefusal` (stop-proof,
        confirmation, or a lifecycle code such as eligibility, kept as sent)."""
        return await self._command("recover", {"confirmation": confirmation_id})

    async def ping(self) -> None:
        """One round trip (the server answers ``{}``). Raises `ClientRefusal` channel, `ConnectionLost`."""
        conn = self._live_connection()
        await conn.call("ping", {})

    async def request(self, method: str, params: Mapping[str, Any]) -> Any:
        """Send any method with `params` exactly as given (no token added) and return its result: the
        escape hatch for methods this library does not wrap yet. Raises like every command."""
        conn = self._live_connection()
        return await conn.call(method, dict(params))

    # -- commands: plumbing ---------------------------------------------------------------------------

    def _token(self) -> tuple[str, int]:
        self._state.check_open()
        if self._state.incarnation is None or self._state.generation is None:
            raise ClientStateError("observe first: commands carry the incarnation token it returns")
        return self._state.incarnation, self._state.generation

    def _live_connection(self, *, observed: bool = False) -> WireConnection:
        self._state.check_open()
        conn = self._conn
        refused = None if conn is None else conn.channel_refusal()
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
        result = await conn.call(method, {"incarnation": incarnation, **params})
        if not isinstance(result, Mapping):
            raise RemoteProtocolError(None, f"the {method} result is not an object")
        return result

    # -- the connection (WireHost) --------------------------------------------------------------------

    async def _open(self, path: str) -> None:
        conn = await WireConnection.open(path, self._connections + 1, self._state, ping_interval=self._ping_interval)
        self._connections += 1
        self._conn = self._state.current = conn
        if self._grant is None:
            return
        try:  # module rule 8: the hello first, on every connection; a refused one leaves no connection open
            result = await conn.call("hello", {"grant": self._grant})
            if not isinstance(result, Mapping):
                raise RemoteProtocolError(None, "the hello result is not an object")
        except BaseException:
            await conn.close("hello refused")
            raise
        self.granted = result


_REEXPORTED = frozenset(__all__) - {"ControllerClient", "DEFAULT_PING_INTERVAL", "DEFAULT_QUEUE_SIZE", "MAX_LINE_BYTES",
                                    "Subscription", "SubscriptionClosed"}


def __getattr__(name: str) -> Any:
    """The value types this module re-exports (`_values`'), loaded on first access (issue 34)."""
    if name in _REEXPORTED:
        from . import _values

        return getattr(_values, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _record_of(result: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    record = result.get(key)
    if not isinstance(record, Mapping):
        raise RemoteProtocolError(None, f"the reply has no {key} record")
    return record
