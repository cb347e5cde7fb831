"""The client side of the shim's private channel (one JSON object per line, each way)."""

from __future__ import annotations

import itertools
import json
import socket
from typing import Any

from ._errors import CohortRefusal, EvidenceUnavailable

__all__ = ["ShimChannel"]


class ShimChannel:
    """A connection to one shim. Every failure to reach or hear it is ``shim-gone``, never a value.

    ``call`` returns the reply of an ``ok`` request; a reply with ``unavailable`` raises
    EvidenceUnavailable with the shim's reason, one with ``refused`` raises CohortRefusal.
    """

    def __init__(self, path: str, *, timeout: float = 30.0) -> None:
        self.path = path
        self._ids = itertools.count(1)
        self._buf = b""
        self._sock: socket.socket | None = None
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            s.settimeout(timeout)
            s.connect(path)
        except OSError as e:
            raise EvidenceUnavailable("shim-gone", f"cannot connect to {path}: {e}") from e
        self._sock = s

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> ShimChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, op: str, io_timeout: float | None = None, **params: Any) -> dict[str, Any]:
        if self._sock is None:
            raise EvidenceUnavailable("shim-gone", "channel closed")
        rid = next(self._ids)
        msg = json.dumps({"id": rid, "op": op, **params}).encode() + b"\n"
        try:
            if io_timeout is not None:
                self._sock.settimeout(io_timeout)
            self._sock.sendall(msg)
            while b"\n" not in self._buf:
                chunk = self._sock.recv(1 << 20)
                if not chunk:
                    raise EvidenceUnavailable("shim-gone", f"{op}: the shim closed the channel")
                self._buf += chunk
        except OSError as e:
            self.close()
            raise EvidenceUnavailable("shim-gone", f"{op}: {e}") from e
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            reply = json.loads(line)
        except ValueError as e:
            raise EvidenceUnavailable("shim-gone", f"{op}: malformed reply") from e
        if not isinstance(reply, dict) or reply.get("id") != rid:
            raise EvidenceUnavailable("shim-gone", f"{op}: reply out of order")
        if reply.get("ok") is True:
            return reply
        if "unavailable" in reply:
            raise EvidenceUnavailable(str(reply["unavailable"]), str(reply.get("detail", "")))
        raise CohortRefusal("shim-refused", str(reply.get("detail", reply)))
