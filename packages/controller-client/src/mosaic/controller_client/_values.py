"""The client library's values (`mosaic.controller_client`): what `observe` and `read_history` return, a
notification, the requests this client sent (`SentRequest`, following their receipts) and what `prompt`
returns (`Admitted`, `Duplicate`, `Refused`, `AdmissionUnknown`). Plain data; the connection that fills them
is `_client.py`'s."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mosaic.safe_open import Refusal

from ._errors import RemoteProtocolError

__all__ = ["Admitted", "Duplicate", "ForceStopStarted", "HistoryRead", "Notification", "Observed", "AdmissionUnknown",
           "PromptOutcome", "Reconnected", "Refused", "RequestState", "Seam", "SentRequest", "UnknownReason",
           "parse_observed"]

RequestState = Literal["sending", "pending", "settled", "refused", "outcome-unknown"]
UnknownReason = Literal["connection-lost", "internal-error", "incarnation-changed"]

_RECEIPT_RANK = {"admitted": 0, "dispatched": 1, "acknowledged": 2, "working": 3,
                 "finished": 4, "failed": 4, "delivery-unknown": 4}
_SETTLED = frozenset({"finished", "failed", "delivery-unknown"})


# ------------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Seam:
    """Where the history page ends and the live stream begins (seed README "The seam"). Replay is
    unavailable: events from `from_sequence` on follow the page; `quiet` says nothing was in flight when
    the page was read, so the page misses nothing before it."""

    replay: str
    stream_epoch: str
    from_sequence: int
    reconcile: bool
    quiet: bool


@dataclass(frozen=True)
class Observed:
    """One `observe` reply: the incarnation token, the generation, this connection's record, the binding,
    the seam and the history read (the reader's result: ``{"ok": True, "page", ...}`` or ``{"ok": False,
    "refusal"}``; unavailable is not empty)."""

    incarnation: str
    generation: int
    connection: Mapping[str, Any]
    binding: Mapping[str, Any]
    seam: Seam
    history: Mapping[str, Any]
    first: bool  # the first observe on its connection: the one that subscribed it (its seam is the cut)
    limit_advisory: bool = False  # a limit was sent: advisory only, the reader's page size governed
    engine: str | None = None  # the engine's name in words ("Pi", "Claude"), when the controller says (issue 32)

    @property
    def page(self) -> Mapping[str, Any] | None:
        page = self.history.get("page") if self.history.get("ok") is True else None
        return page if isinstance(page, Mapping) else None

    @property
    def next_cursor(self) -> str | None:
        page = self.page
        cursor = page.get("nextCursor") if page is not None else None
        return cursor if isinstance(cursor, str) else None

    @property
    def history_refusal(self) -> Mapping[str, Any] | None:
        refusal = self.history.get("refusal") if self.history.get("ok") is not True else None
        return refusal if isinstance(refusal, Mapping) else None


@dataclass(frozen=True)
class HistoryRead:
    """An exact cut of the history against this client's stream (`ControllerClient.read_history`): every
    page of one snapshot (`results`, the reader's results in order) and the seam of a subscription made
    for the read, so events from `seam.from_sequence` on, which this client's own connection carries,
    follow the pages."""

    incarnation: str
    seam: Seam
    binding: Mapping[str, Any]
    results: tuple[Mapping[str, Any], ...]

    @property
    def pages(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(r["page"] for r in self.results if r.get("ok") is True and isinstance(r.get("page"), Mapping))

    @property
    def refusal(self) -> Mapping[str, Any] | None:
        first = self.results[0] if self.results else {}
        refusal = first.get("refusal") if first.get("ok") is not True else None
        return refusal if isinstance(refusal, Mapping) else None


@dataclass(frozen=True)
class Notification:
    """One notification, in arrival order. `origin` "server": the controller's ``event``, ``record``,
    ``marker`` (``{"reason": "lagging", "dropped": n}``: the server dropped n notifications for this
    connection at this place) or ``closing`` (``{"reason", "message"}``). `origin` "client": ``observed``
    (the first observe reply of a connection, at its place in the stream; `observed` holds it),
    ``disconnected`` (``{"reason"}``), or ``marker`` lagging (this subscriber lost ``dropped``
    notifications here). `connection` numbers this client's connections 1, 2, ... (one per reconnect)."""

    method: str
    params: Mapping[str, Any]
    origin: Literal["server", "client"] = "server"
    connection: int = 0
    observed: Observed | None = None


@dataclass
class SentRequest:
    """A prompt this client sent, and what became of it. Owned and updated by the client; read it, keep a
    reference to it, never change it.

    `state`: "sending" (written, no reply yet); "pending" (admitted, its receipt not settled); "settled"
    (the receipt is finished, failed or delivery-unknown); "refused" (the controller refused it: nothing
    was dispatched, the text stays with the caller); "outcome-unknown" (the client does not know whether the
    controller admitted it: `unknown_reason` is "connection-lost"; "internal-error" when the controller
    answered -32603, a bug that may have struck after dispatch; or "incarnation-changed" when the controller
    restarted, which is final). A delivery-unknown receipt is settled and shown as "outcome unknown" too.
    No state means "unsent", and nothing here is ever resent by the library.
    """

    client_request_id: str
    text: str
    incarnation: str
    generation: int
    state: RequestState = "sending"
    unknown_reason: UnknownReason | None = None
    request: Mapping[str, Any] | None = None  # the CHAT-01 request record (admitted or duplicate reply)
    receipt: Mapping[str, Any] | None = None  # the latest receipt record
    refusal: Refusal | None = None
    receipt_gap: bool = False  # notifications were lost (lagging) while pending: the receipt may be behind

    @property
    def request_id(self) -> str | None:
        rid = self.request.get("request") if self.request is not None else None
        return rid if isinstance(rid, str) else None

    @property
    def receipt_state(self) -> str | None:
        state = self.receipt.get("state") if self.receipt is not None else None
        return state if isinstance(state, str) else None

    @property
    def outcome_unknown(self) -> bool:
        """True when the outcome is unknown: never shown as unsent, never offered as a safe resend."""
        return self.state == "outcome-unknown" or self.receipt_state == "delivery-unknown"

    @property
    def label(self) -> str:
        """What a terminal shows: "outcome unknown", "not admitted: <code>", the receipt state, or
        "sending"."""
        if self.outcome_unknown:
            return "outcome unknown"
        if self.state == "refused":
            return f"not admitted: {self.refusal.code}" if self.refusal is not None else "not admitted"
        state = self.receipt_state
        if state == "finished" and self.receipt is not None and isinstance(self.receipt.get("turnState"), str):
            return f"finished ({self.receipt['turnState']})"
        return state or self.state

    def _apply_receipt(self, receipt: Mapping[str, Any]) -> bool:
        """Take `receipt` if it does not move backwards; a settled receipt is final. True when taken."""
        new = receipt.get("state")
        if not isinstance(new, str) or new not in _RECEIPT_RANK:
            return False
        old = self.receipt_state
        if old is not None and (old in _SETTLED or _RECEIPT_RANK[new] < _RECEIPT_RANK[old]):
            return False
        self.receipt = dict(receipt)
        self.state = "settled" if new in _SETTLED else "pending"
        self.unknown_reason = None
        self.refusal = None
        return True


@dataclass(frozen=True)
class Admitted:
    """The controller admitted the prompt: `receipt` is the receipt in the reply; `request` keeps
    updating."""

    request: SentRequest
    receipt: Mapping[str, Any]
    kind: Literal["admitted"] = "admitted"


@dataclass(frozen=True)
class Duplicate:
    """An exact retry of a client request id the controller already admitted in this incarnation (H12):
    the same request and receipt, no second dispatch."""

    request: SentRequest
    receipt: Mapping[str, Any]
    kind: Literal["duplicate"] = "duplicate"


@dataclass(frozen=True)
class Refused:
    """Refused, by the controller (`RemoteRefusal`) or by the library before writing anything
    (`ClientRefusal`): nothing was dispatched and the text stays with the caller."""

    text: str
    client_request_id: str
    refusal: Refusal
    kind: Literal["refused"] = "refused"


@dataclass(frozen=True)
class AdmissionUnknown:
    """The connection was lost after the prompt was written and before its reply (or the controller
    answered -32603, an internal error): the client does not know whether the controller admitted it.
    Never "unsent"; the library never resends it."""

    request: SentRequest
    kind: Literal["outcome-unknown"] = "outcome-unknown"


PromptOutcome = Admitted | Duplicate | Refused | AdmissionUnknown


@dataclass(frozen=True)
class Reconnected:
    """What `reconnect` found: the new connection's `observed`, whether the incarnation token changed, and
    the requests that this made outcome-unknown."""

    observed: Observed
    incarnation_changed: bool
    outcome_unknown: tuple[SentRequest, ...]


@dataclass(frozen=True)
class ForceStopStarted:
    """`force_stop_confirmed`'s steps: the confirmation as issued and as answered, and the stop record the
    force stop returned (state "stopping"; `ControllerClient.wait_stop` waits for its end)."""

    issued: Mapping[str, Any]
    answered: Mapping[str, Any]
    stop: Mapping[str, Any]



def parse_observed(result: Any, *, first: bool) -> Observed:
    """An observe result as `Observed`; RemoteProtocolError when it lacks what the protocol promises."""
    if not isinstance(result, Mapping):
        raise RemoteProtocolError(None, "the observe result is not an object")
    seam, connection, binding, history = (result.get(k) for k in ("seam", "connection", "binding", "history"))
    incarnation, generation = result.get("incarnation"), result.get("generation")
    if not (isinstance(seam, Mapping) and isinstance(connection, Mapping) and isinstance(binding, Mapping)
            and isinstance(history, Mapping) and isinstance(incarnation, str) and incarnation
            and isinstance(generation, int) and not isinstance(generation, bool)):
        raise RemoteProtocolError(None, "the observe result lacks incarnation, generation, connection, binding, "
                                  "seam or history")
    from_sequence, quiet = seam.get("fromSequence"), seam.get("quiet")
    if not isinstance(from_sequence, int) or isinstance(from_sequence, bool) or not isinstance(quiet, bool):
        raise RemoteProtocolError(None, "the seam lacks fromSequence or quiet")
    return Observed(
        incarnation=incarnation, generation=generation, connection=connection, binding=binding,
        seam=Seam(str(seam.get("replay", "unavailable")), str(seam.get("streamEpoch", "")), from_sequence,
                  bool(seam.get("reconcile", True)), quiet),
        history=history, first=first, limit_advisory=result.get("limitAdvisory") is True,
        engine=result["engine"] if isinstance(result.get("engine"), str) else None)

