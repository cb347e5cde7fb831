"""The wire protocol's method table: JSON-RPC 2.0, one message per LF-terminated line, over a Unix socket.

This table is the contract between the socket server (which validates every request against it before
anything reaches the core) and the core (which decides). Methods are the CHAT-01 commands this increment
owns (brief "Contracts implemented": observe, prompt, takeover, interrupt, force-stop, issue-confirmation,
answer-confirmation, acquire-recovery-control, recover) plus `ping`, which the server answers itself
(a liveness probe that also keeps an observer's connection from timing out idle).

`PARAMS[method]` maps each param name to (type, required). Types are checked exactly: `int` is an integer
that is not a bool; `str` a string. An enumeration (`ENUMS`) is checked too. Unknown params are refused
(-32602), and so is an unknown top-level member of the request object (-32600: a request is exactly
`jsonrpc`, `id`, `method` and optionally `params`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["CLOSE_REASONS", "ENUMS", "ERROR_CODES", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST",
           "LINE_TOO_LONG", "METHOD_NOT_FOUND", "NOTIFICATIONS", "PARAMS", "PARSE_ERROR", "RANGES", "REFUSED",
           "UNVERIFIED_METHODS"]

ParamSpec = tuple[type, bool]

PARAMS: Mapping[str, Mapping[str, ParamSpec]] = MappingProxyType({
    # The seed's first message (README "Refusals": `grant`; issue 26): optional here, and only as a
    # connection's first request. It names a grant of the grants file, which then judges every request of
    # the connection (narrowing its peer's rights, never widening them). `transport` says how the client
    # reached the controller: "local" (this socket) is the only one served.
    "hello": {"grant": (str, True), "transport": (str, False)},
    # Subscribe to the live stream and read a history page (the first page of the current branch, or the
    # page a reader cursor names). Returns the incarnation token the other commands must carry (brief §1).
    # `limit` (1-100) is advisory (seed "Observe"): the reader's page size governs; the reply says
    # `limitAdvisory: true`.
    "observe": {"incarnation": (str, False), "cursor": (str, False), "limit": (int, False)},
    "ping": {},
    # `draftId` and `draftRevision` (seed "Observe": "the library sends a draft ID and revision 1 with each
    # prompt and keeps no draft state") are carried into the request record; drafts are client-local.
    "prompt": {"incarnation": (str, True), "generation": (int, True), "clientRequestId": (str, True),
               "text": (str, True), "draftId": (str, False), "draftRevision": (int, False)},
    "takeover": {"incarnation": (str, True), "expectedGeneration": (int, True)},
    "interrupt": {"incarnation": (str, True), "generation": (int, True)},
    "issue-confirmation": {"incarnation": (str, True), "operation": (str, True)},
    "answer-confirmation": {"incarnation": (str, True), "confirmation": (str, True), "answer": (str, True)},
    "force-stop": {"incarnation": (str, True), "confirmation": (str, True)},
    "acquire-recovery-control": {"incarnation": (str, True)},
    "recover": {"incarnation": (str, True), "confirmation": (str, True)},
    # Answer a native dialog (issue 33, the brief's I2; only when the controller answers dialogs, else the core
    # refuses it `unsupported-capability`): `decision` is the nativeDecision record's projection id, `choice`
    # one of its `choices`, exactly.
    "approval": {"incarnation": (str, True), "generation": (int, True), "decision": (str, True),
                 "choice": (str, True)},
})

ENUMS: Mapping[tuple[str, str], frozenset[str]] = MappingProxyType({
    ("issue-confirmation", "operation"): frozenset({"force-stop", "recover"}),
    ("answer-confirmation", "answer"): frozenset({"confirm", "cancel"}),
    # "private-host" is a transport the seed names and refuses (`unsupported-capability`); the core says so.
    ("hello", "transport"): frozenset({"local", "private-host"}),
})

RANGES: Mapping[tuple[str, str], tuple[int, int]] = MappingProxyType({
    ("observe", "limit"): (1, 100),  # seed "Observe"
    ("prompt", "draftRevision"): (1, 2**53 - 1),  # a revision counts from 1; JSON's safe integers
})
"""An integer param's inclusive range: a value outside it is -32602, as a wrong type is."""

UNVERIFIED_METHODS: frozenset[str] = frozenset({"approval", "draft", "upload", "queue-edit"})
"""CHAT-01 commands this increment does not verify (seed README "Refusals": `unsupported-capability`, "an
operation I1 doesn't verify"): `approval` is I2's (the approval races H5-H8: verified only when the
controller answers dialogs, issue 33), the draft, upload and queue-edit commands CHAT-04's (brief "Contracts
implemented"). The server takes any params for those not in `PARAMS` (`approval` is checked against its row)
and the core refuses each `unsupported-capability`, where an unknown method is -32601."""

# JSON-RPC error codes. -32700..-32600 are JSON-RPC 2.0's own; -32001.. are this protocol's, stable.
PARSE_ERROR = -32700  # not JSON, or not UTF-8
INVALID_REQUEST = -32600  # not a JSON-RPC 2.0 request object (a batch, no id, a bad id, no method)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603  # a bug in the controller: answered, never a crash
REFUSED = -32001  # the core refused the command: error.data.refusal is {code, reconcile, message}
LINE_TOO_LONG = -32002  # a request line over the cap: answered, then the connection is closed

ERROR_CODES: Mapping[int, str] = MappingProxyType({
    PARSE_ERROR: "parse-error",
    INVALID_REQUEST: "invalid-request",
    METHOD_NOT_FOUND: "method-not-found",
    INVALID_PARAMS: "invalid-params",
    INTERNAL_ERROR: "internal-error",
    REFUSED: "refused",
    LINE_TOO_LONG: "line-too-long",
})

# Notifications the controller sends (server -> client): `event` (a CHAT-01 event record), `record` (any
# other control record), `marker` (a reconcile marker; the server's lagging marker is
# {"reason": "lagging", "dropped": n}: notifications were dropped, re-read the page), and `closing`
# ({"reason", "message"}, reason from CLOSE_REASONS), sent after what is already queued, just before the
# server closes the connection.
NOTIFICATIONS = ("event", "record", "marker", "closing")

CLOSE_REASONS: Mapping[str, str] = MappingProxyType({
    "too-many-connections": "the connection bound was reached; try again later",
    "idle": "no request within the idle bound",
    "slow-request": "a request line was not completed within the request bound",
    "line-too-long": "a request line was over the cap",
    "garbage": "too many malformed requests in a row",
    "not-reading": "replies for this connection passed the outbox cap",
    "shutdown": "the controller is shutting down",
    "revoked": "the controller closed this connection",
    # Decided by the controller's core at connect: nothing the peer sent was read.
    "channel": "no grant names this connection's uid, gid or groups: nothing it sends is read",
})
