"""What the client library knows, learned from the lines its connections read: the incarnation token,
generation, role and binding; the prompts it sent and their receipts; the stops it saw; and the
subscribers every notification is fanned out to. `ControllerClient` owns one and reads it; its
connections (`_wire.WireConnection`) feed it, one line at a time and before the next line is read
(rule 1 of `_client.py`), through the `WireHost` interface this class implements.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._errors import ClientStateError, RemoteProtocolError
from ._subscription import Subscription, _Changes

if TYPE_CHECKING:
    from ._values import Notification, Observed, SentRequest
from ._wire import Pending, WireConnection


class ClientState:
    """The client's state (module docstring); `current` is the connection whose notifications count."""

    def __init__(self) -> None:
        self.current: WireConnection | None = None
        self.incarnation: str | None = None
        self.generation: int | None = None
        self.binding: Mapping[str, Any] | None = None
        self.role: str | None = None
        self.requests: dict[str, SentRequest] = {}
        self.by_request: dict[tuple[str, str], SentRequest] = {}  # (incarnation, request id) -> request
        self.stops: dict[str, Mapping[str, Any]] = {}
        self.subs: list[Subscription] = []
        self.changes = _Changes()
        self.newly_unknown: list[SentRequest] = []
        self.closed = False
        self.pings_before = 0  # pings written by the connections that ended

    def check_open(self) -> None:
        if self.closed:
            raise ClientStateError("the client is closed")

    def pending(self) -> list[SentRequest]:
        """Requests written and not settled: "sending" or "pending"."""
        return [r for r in self.requests.values() if r.state in ("sending", "pending")]

    def unknown(self) -> list[SentRequest]:
        """Requests whose outcome is unknown (state outcome-unknown, or a delivery-unknown receipt)."""
        return [r for r in self.requests.values() if r.outcome_unknown]

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        await self.changes.wait_until(predicate, lambda: self.closed, "the client is closed")

    # -- the connection (WireHost) --------------------------------------------------------------------

    def on_lost(self, conn: WireConnection) -> None:
        """A connection ended: tell subscribers once, wake waiters."""
        self.pings_before += conn.pings_sent
        if conn is self.current:
            self.role = None
            self.fanout(_values().Notification("disconnected", {"reason": conn.reason}, "client", conn.number), droppable=False)
        self.notify()

    def on_change(self) -> None:
        self.notify()

    # -- lines in -------------------------------------------------------------------------------------

    def on_result(self, conn: WireConnection, pending: Pending, result: Any) -> Any:
        """Apply a result to the client's state now, in stream order (`_client` rule 1); return what the
        waiting call returns. Raises RemoteProtocolError for a result of the wrong shape."""
        if pending.method == "observe":
            return self._on_observed(conn, result)
        if pending.method in ("takeover", "acquire-recovery-control") and isinstance(result, Mapping):
            generation = result.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool):
                self.generation = generation
                self.role = "controller"
        elif pending.method in ("interrupt", "force-stop") and isinstance(result, Mapping):
            stop = result.get("stop")
            if isinstance(stop, Mapping) and isinstance(stop.get("stop"), str):
                self.stops.setdefault(stop["stop"], stop)  # the reply precedes the stop's records
        elif pending.method == "prompt" and pending.entry is not None:
            self._on_prompt_result(conn, pending.entry, result)
        return result

    def _on_prompt_result(self, conn: WireConnection, entry: SentRequest, result: Any) -> None:
        if not isinstance(result, Mapping) or result.get("outcome") not in ("admitted", "duplicate"):
            raise RemoteProtocolError(None, "a prompt result that is neither admitted nor duplicate")
        request, receipt = result.get("request"), result.get("receipt")
        if not isinstance(request, Mapping) or not isinstance(receipt, Mapping) or not isinstance(
                request.get("request"), str):
            raise RemoteProtocolError(None, "a prompt result without its request and receipt records")
        entry.request = dict(request)
        if conn.incarnation is not None:
            self.by_request[(conn.incarnation, request["request"])] = entry
        entry._apply_receipt(receipt)
        self.requests[entry.client_request_id] = entry

    def _on_observed(self, conn: WireConnection, result: Any) -> Observed:
        observed: Observed = _values().parse_observed(result, first=not conn.observed)
        if observed.first:
            conn.observed = True
            conn.incarnation = observed.incarnation
            conn_id = observed.connection.get("connection")
            conn.conn_id = conn_id if isinstance(conn_id, str) else None
            if self.incarnation is not None and observed.incarnation != self.incarnation:
                self._incarnation_changed(self.incarnation)
            self.incarnation = observed.incarnation
            role = observed.connection.get("role")
            self.role = role if isinstance(role, str) else None
        self.generation = observed.generation
        self.binding = observed.binding
        if observed.first:
            self.fanout(_values().Notification("observed", {"incarnation": observed.incarnation,
                                                   "fromSequence": observed.seam.from_sequence},
                                      "client", conn.number, observed), droppable=False)
        return observed

    def _incarnation_changed(self, old: str) -> None:
        """The controller restarted (`_client` rule 5): everything unsettled under `old` is outcome-unknown
        for good. Nothing is resubmitted."""
        for entry in self.requests.values():
            if entry.incarnation == old and entry.state in ("sending", "pending", "outcome-unknown"):
                entry.state, entry.unknown_reason = "outcome-unknown", "incarnation-changed"
                self.newly_unknown.append(entry)

    def on_notification(self, conn: WireConnection, method: str, params: Mapping[str, Any]) -> None:
        if conn is not self.current or conn.lost:
            return
        if method == "record":
            self._on_record(conn, params)
        elif method == "marker" and params.get("reason") == "lagging":
            # The server dropped notifications for us: receipts may have been among them.
            for entry in self.requests.values():
                if entry.state in ("sending", "pending") and entry.incarnation == conn.incarnation:
                    entry.receipt_gap = True
        self.fanout(_values().Notification(method, params, "server", conn.number), droppable=method in ("event", "record"))

    def _on_record(self, conn: WireConnection, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        if kind == "binding":
            if conn.incarnation is not None and record.get("incarnation") not in (None, conn.incarnation):
                return
            self.binding = record
            generation = record.get("generation")
            if isinstance(generation, int) and not isinstance(generation, bool):
                self.generation = generation
            if conn.conn_id is not None:
                self.role = "controller" if record.get("controllerConnection") == conn.conn_id else "observer"
        elif kind == "receipt" and conn.incarnation is not None:
            request_id = record.get("request")
            entry = self.by_request.get((conn.incarnation, request_id)) if isinstance(request_id, str) else None
            if entry is not None:
                entry._apply_receipt(record)
        elif kind == "stop":
            stop_id = record.get("stop")
            if isinstance(stop_id, str):
                self.stops[stop_id] = record

    # -- fan-out and waiters --------------------------------------------------------------------------

    def fanout(self, note: Notification, *, droppable: bool) -> None:
        for sub in list(self.subs):
            sub._put(note, droppable=droppable)

    def notify(self) -> None:
        self.changes.wake()


def _values() -> Any:
    """The value types, imported on first use (issue 34: `from mosaic.controller_client import ControllerClient`
    does not pay for their dataclasses until a connection needs them)."""
    from . import _values as values

    return values
