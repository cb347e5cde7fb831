"""mosaic.controller_client: the only way a terminal (or any other client) talks to a controller, installed
alone (issue 31): it depends on mosaic-safe-open and nothing else.

`ControllerClient` holds one connection to a controller's Unix socket (JSON-RPC 2.0, one message per LF
line) and mirrors the protocol's methods; `Transcript` is the view a terminal renders: the history page,
then the live stream, with the seam rules of the seed README ("The seam"). The rules each keeps are at
the top of `_client.py` and `_transcript.py`. The protocol itself is here as data, shared with the
controller's server: its methods and params (`PARAMS`, `ENUMS`, `RANGES`, `UNVERIFIED_METHODS`), its error
codes (`ERROR_CODES` and each code), the notifications and why a connection is closed (`CLOSE_REASONS`),
and the controller's refusal (`ControlRefusal`, its `CODES`).

Failures come in three kinds: refusals (`RemoteRefusal`, `ClientRefusal`; both subclass
`mosaic.safe_open.Refusal`, so ``except Refusal`` catches every Mosaic refusal), `RemoteProtocolError` (a
JSON-RPC error that is not a refusal), and `ConnectionLost` (the outcome of a written command is
unknown). `ControllerClient.prompt` returns all of its outcomes as values: `Admitted`, `Duplicate`,
`Refused`, `AdmissionUnknown`.

    client = await ControllerClient.connect(socket_path)
    view = Transcript(client)          # before observe: it takes the seam in stream order
    view.start()
    await client.observe()
    await client.takeover()
    outcome = await client.prompt("hello")
    match outcome:
        case Admitted(request=request): ...          # request.state follows its receipt
        case Refused(refusal=refusal): ...           # the text stays with the caller
        case AdmissionUnknown(): ...                   # shown as "outcome unknown"; never resent
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._client import (
        DEFAULT_PING_INTERVAL,
        DEFAULT_QUEUE_SIZE,
        MAX_LINE_BYTES,
        AdmissionUnknown,
        Admitted,
        ControllerClient,
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
        Subscription,
        SubscriptionClosed,
    )
    from ._errors import (
        ClientRefusal,
        ClientStateError,
        ConnectionLost,
        RemoteProtocolError,
        RemoteRefusal,
    )
    from ._protocol import (
        CLOSE_REASONS,
        ENUMS,
        ERROR_CODES,
        INTERNAL_ERROR,
        INVALID_PARAMS,
        INVALID_REQUEST,
        LINE_TOO_LONG,
        METHOD_NOT_FOUND,
        NOTIFICATIONS,
        PARAMS,
        PARSE_ERROR,
        RANGES,
        REFUSED,
        UNVERIFIED_METHODS,
    )
    from ._refusal import (
        ControlRefusal,
    )
    from ._transcript import (
        Block,
        HistoryItem,
        HistoryUnavailable,
        LiveMessage,
        ReconcileMarker,
        ToolRun,
        Transcript,
        TranscriptItem,
        TranscriptStatus,
        history_items,
    )

# name -> the module that defines it, imported on first access (PEP 562, issue 34): `from mosaic.controller_client
# import ControllerClient` loads the client and what it runs on, never the transcript (a terminal's view) and
# what only it needs; the controller's server, importing the protocol table or the refusal, loads only those.
_LAZY = {
    "DEFAULT_PING_INTERVAL": "_client",
    "DEFAULT_QUEUE_SIZE": "_client",
    "MAX_LINE_BYTES": "_client",
    "Admitted": "_client",
    "ControllerClient": "_client",
    "Duplicate": "_client",
    "ForceStopStarted": "_client",
    "HistoryRead": "_client",
    "Notification": "_client",
    "Observed": "_client",
    "AdmissionUnknown": "_client",
    "PromptOutcome": "_client",
    "Reconnected": "_client",
    "Refused": "_client",
    "RequestState": "_client",
    "Seam": "_client",
    "SentRequest": "_client",
    "Subscription": "_client",
    "SubscriptionClosed": "_client",
    "ClientRefusal": "_errors",
    "ClientStateError": "_errors",
    "ConnectionLost": "_errors",
    "RemoteRefusal": "_errors",
    "RemoteProtocolError": "_errors",
    "CLOSE_REASONS": "_protocol",
    "ENUMS": "_protocol",
    "ERROR_CODES": "_protocol",
    "INTERNAL_ERROR": "_protocol",
    "INVALID_PARAMS": "_protocol",
    "INVALID_REQUEST": "_protocol",
    "LINE_TOO_LONG": "_protocol",
    "METHOD_NOT_FOUND": "_protocol",
    "NOTIFICATIONS": "_protocol",
    "PARAMS": "_protocol",
    "PARSE_ERROR": "_protocol",
    "RANGES": "_protocol",
    "REFUSED": "_protocol",
    "UNVERIFIED_METHODS": "_protocol",
    "ControlRefusal": "_refusal",
    "Block": "_transcript",
    "HistoryItem": "_transcript",
    "HistoryUnavailable": "_transcript",
    "LiveMessage": "_transcript",
    "ReconcileMarker": "_transcript",
    "ToolRun": "_transcript",
    "Transcript": "_transcript",
    "TranscriptItem": "_transcript",
    "TranscriptStatus": "_transcript",
    "history_items": "_transcript",
}

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
    "ClientRefusal",
    "ClientStateError",
    "ConnectionLost",
    "RemoteRefusal",
    "RemoteProtocolError",
    "CLOSE_REASONS",
    "ENUMS",
    "ERROR_CODES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LINE_TOO_LONG",
    "METHOD_NOT_FOUND",
    "NOTIFICATIONS",
    "PARAMS",
    "PARSE_ERROR",
    "RANGES",
    "REFUSED",
    "UNVERIFIED_METHODS",
    "ControlRefusal",
    "Block",
    "HistoryItem",
    "HistoryUnavailable",
    "LiveMessage",
    "ReconcileMarker",
    "ToolRun",
    "Transcript",
    "TranscriptItem",
    "TranscriptStatus",
    "history_items",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access is a plain global
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
