"""`mosaic.controller.client`: the client library as the controller's own users have reached it. The library
is its own distribution, `mosaic-controller-client` (`mosaic.controller_client`, issue 31), which depends on
safe-open alone: a terminal or a board depends on that; these are its objects, re-exported.

`ControllerClient` holds one connection to a controller's Unix socket (JSON-RPC 2.0, one message per LF
line) and mirrors the protocol's methods; `Transcript` is the view a terminal renders: the history page,
then the live stream, with the seam rules of the seed README ("The seam"). The rules each keeps are at
the top of `mosaic.controller_client`'s `_client.py` and `_transcript.py`.

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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mosaic.controller_client import (
        DEFAULT_PING_INTERVAL,
        DEFAULT_QUEUE_SIZE,
        MAX_LINE_BYTES,
        AdmissionUnknown,
        Admitted,
        Block,
        ClientRefusal,
        ClientStateError,
        ConnectionLost,
        ControllerClient,
        Duplicate,
        ForceStopStarted,
        HistoryItem,
        HistoryRead,
        HistoryUnavailable,
        LiveMessage,
        Notification,
        Observed,
        PromptOutcome,
        ReconcileMarker,
        Reconnected,
        Refused,
        RemoteProtocolError,
        RemoteRefusal,
        RequestState,
        Seam,
        SentRequest,
        Subscription,
        SubscriptionClosed,
        ToolRun,
        Transcript,
        TranscriptItem,
        TranscriptStatus,
        history_items,
    )


# name -> where it lives, loaded on first access (PEP 562, issue 34): the client package's objects.
_LAZY = {
    "DEFAULT_PING_INTERVAL": "mosaic.controller_client",
    "DEFAULT_QUEUE_SIZE": "mosaic.controller_client",
    "MAX_LINE_BYTES": "mosaic.controller_client",
    "Admitted": "mosaic.controller_client",
    "Block": "mosaic.controller_client",
    "ClientRefusal": "mosaic.controller_client",
    "ClientStateError": "mosaic.controller_client",
    "ConnectionLost": "mosaic.controller_client",
    "ControllerClient": "mosaic.controller_client",
    "RemoteRefusal": "mosaic.controller_client",
    "Duplicate": "mosaic.controller_client",
    "ForceStopStarted": "mosaic.controller_client",
    "HistoryItem": "mosaic.controller_client",
    "HistoryRead": "mosaic.controller_client",
    "HistoryUnavailable": "mosaic.controller_client",
    "LiveMessage": "mosaic.controller_client",
    "Notification": "mosaic.controller_client",
    "Observed": "mosaic.controller_client",
    "AdmissionUnknown": "mosaic.controller_client",
    "PromptOutcome": "mosaic.controller_client",
    "RemoteProtocolError": "mosaic.controller_client",
    "ReconcileMarker": "mosaic.controller_client",
    "Reconnected": "mosaic.controller_client",
    "Refused": "mosaic.controller_client",
    "RequestState": "mosaic.controller_client",
    "Seam": "mosaic.controller_client",
    "SentRequest": "mosaic.controller_client",
    "Subscription": "mosaic.controller_client",
    "SubscriptionClosed": "mosaic.controller_client",
    "ToolRun": "mosaic.controller_client",
    "Transcript": "mosaic.controller_client",
    "TranscriptItem": "mosaic.controller_client",
    "TranscriptStatus": "mosaic.controller_client",
    "history_items": "mosaic.controller_client",
}

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_QUEUE_SIZE",
    "MAX_LINE_BYTES",
    "Admitted",
    "Block",
    "ClientRefusal",
    "ClientStateError",
    "ConnectionLost",
    "ControllerClient",
    "RemoteRefusal",
    "Duplicate",
    "ForceStopStarted",
    "HistoryItem",
    "HistoryRead",
    "HistoryUnavailable",
    "LiveMessage",
    "Notification",
    "Observed",
    "AdmissionUnknown",
    "PromptOutcome",
    "RemoteProtocolError",
    "ReconcileMarker",
    "Reconnected",
    "Refused",
    "RequestState",
    "Seam",
    "SentRequest",
    "Subscription",
    "SubscriptionClosed",
    "ToolRun",
    "Transcript",
    "TranscriptItem",
    "TranscriptStatus",
    "history_items",
]


def __getattr__(name: str) -> Any:
    """Each name from `mosaic.controller_client` on first access (PEP 562, issue 34): importing `ControllerClient`
    loads the client and what it runs on, not the transcript."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
