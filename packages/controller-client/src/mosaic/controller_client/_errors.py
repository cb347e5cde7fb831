"""The client library's failures, in three kinds a caller can tell apart (DESIGN principle 2, h11's split of
local and remote protocol errors):

1. Refusals are values. `RemoteRefusal` is what the controller sent (JSON-RPC error -32001, ``data:
   {"refusal": {code, reconcile, message}}``); `ClientRefusal` is the library saying no before it wrote a
   byte. Both subclass `mosaic.safe_open.Refusal`, so ``except Refusal`` catches every Mosaic refusal.
   A refusal means the command did not happen.
2. `RemoteProtocolError` is any other JSON-RPC error (-327xx, -32002, ...) or a reply that breaks the protocol's
   shape: a bug on one side, never a decision about the command.
3. `ConnectionLost` is the connection ending after the command was written and before its reply: the
   client does not know whether the controller acted on it (brief §1: "outcome unknown is not unsent").
   `prompt` never raises it; it returns an `AdmissionUnknown` value instead.

`ClientStateError` is a programming error (a command before the first `observe`, a call after `aclose`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from mosaic.safe_open import Refusal

from ._protocol import ERROR_CODES
from ._refusal import ControlRefusal

__all__ = ["ClientRefusal", "ClientStateError", "ConnectionLost", "RemoteRefusal", "RemoteProtocolError"]


class RemoteRefusal(ControlRefusal):
    """The controller refused a command: it did not happen. `code`, `reconcile` and `message` are exactly
    what the controller sent.

    A code in `ControlRefusal.CODES` is `known`. A code this client does not know (a newer controller, or a
    lifecycle effect's own code such as ``eligibility``) is kept as sent with `known` False: it is still a
    refusal, never an error of another kind. Equality, hashing and pickling are `Refusal`'s.
    """

    def __init__(self, code: str, message: str, *, reconcile: bool | None = None) -> None:
        if code in ControlRefusal.CODES:
            super().__init__(code, message, reconcile=reconcile)
            return
        if not isinstance(code, str) or not code:
            raise ValueError(f"a refusal code is a non-empty string, not {code!r}")
        # Not in the table: skip Refusal's table check (which is for refusals this package raises itself)
        # and keep the controller's code and flag as sent. Without a flag, "observe again" is the safe advice.
        Exception.__init__(self, code, message)
        self.code = code
        self.message = message
        self.reconcile = True if reconcile is None else bool(reconcile)

    @property
    def known(self) -> bool:
        """True when `code` is in `ControlRefusal.CODES`."""
        return self.code in ControlRefusal.CODES

    @classmethod
    def from_wire(cls, data: object) -> RemoteRefusal | None:
        """The refusal in a -32001 error's ``data`` (``{"refusal": {code, reconcile, message}}``), or None
        when ``data`` does not hold a well-formed one (the caller reports that as a `RemoteProtocolError`)."""
        refusal = data.get("refusal") if isinstance(data, Mapping) else None
        if not isinstance(refusal, Mapping):
            return None
        code, reconcile, message = refusal.get("code"), refusal.get("reconcile"), refusal.get("message")
        if not isinstance(code, str) or not code or not isinstance(reconcile, bool) or not isinstance(message, str):
            return None
        return cls(code, message, reconcile=reconcile)


class ClientRefusal(Refusal):
    """The library refused before writing anything: nothing reached the controller."""

    CODES: ClassVar[Mapping[str, bool]] = {
        # No open connection (never connected, lost, or closed). The seed README's name for "the library's
        # reply when its socket is closed". Reconnect, observe, then decide.
        "channel": True,
        # The client request id belongs to a request sent under an older controller incarnation; its
        # outcome is unknown and the library never sends it again (brief §1, H21). A new request with a new
        # id is the caller's explicit choice, never offered as a safe resend.
        "outcome-unknown": False,
        # The text holds a lone surrogate: the protocol's strict JSON (I-JSON) cannot carry it.
        "unencodable": False,
    }


class RemoteProtocolError(Exception):
    """A JSON-RPC error that is not a refusal (`code` -327xx or another protocol code; `name` is its entry
    in `ERROR_CODES`, or "unknown"), or a reply the client cannot read (`code` None). `data` is the error's
    data member as sent."""

    def __init__(self, code: int | None, message: str, data: Any = None) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str:
        if self.code is None:
            return "bad-reply"
        return ERROR_CODES.get(self.code, "unknown")

    def __str__(self) -> str:
        return f"{self.name} ({self.code}): {self.message}"


class ConnectionLost(ConnectionError):
    """The connection ended after `method` was written and before its reply arrived: whether the
    controller acted on it is unknown. `reason` is the server's `closing` reason when it sent one
    (``shutdown``, ``idle``, ...), else what the client saw (``eof``, ``reset``, ``closed``, ...)."""

    def __init__(self, method: str, reason: str) -> None:
        super().__init__(f"the connection ended before the reply to {method!r} ({reason}): outcome unknown")
        self.method = method
        self.reason = reason


class ClientStateError(RuntimeError):
    """A programming error: a command before the first `observe` taught the client the incarnation token,
    or any call after `aclose`."""
