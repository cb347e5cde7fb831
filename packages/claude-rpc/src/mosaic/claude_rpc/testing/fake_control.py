"""Hold points for the fake Claude engine: land a race at an exact step, with no sleeps.

The test listens (:class:`FakeControl`, a Unix socket in a private directory); the fake engine, started with
``--fake-control <socket>`` before its sealed arguments, connects at start. The test then sets holds:
``hold(point, count)`` arms the next ``count`` passes of ``point`` and returns once the fake has
acknowledged it (so a hold set before a stdin write is in force when the line is read); ``wait_held(point,
timeout)`` waits until the fake stops there and returns its detail; ``release(point)`` lets it go on. Every
wait is bounded (``TimeoutError``).

Points (where the fake stops, before doing what the name says):

============  ============================================================================================
point         the fake stops
============  ============================================================================================
``turn-start``  after a queued command's ``started`` frame, before the turn's ``system``/``init``
``model-chunk`` before handling each SSE event of the model's answer (detail: the event's type)
``permission``  before writing a ``can_use_tool`` (detail: the tool use id)
``tool``        after an allow, before the tool runs (detail: the command)
``result``      before writing a turn's ``result`` (detail: its subtype)
``stdout``      before writing each record (detail: ``type`` or ``type/subtype``)
============  ============================================================================================

The channel is JSON lines both ways: test -> fake ``{"hold": p, "count": n}`` (answered ``{"ok": p}``),
``{"release": p}``; fake -> test ``{"held": p, "detail": d}``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["HOLD_POINTS", "FakeControl"]

HOLD_POINTS = ("turn-start", "model-chunk", "permission", "tool", "result", "stdout")


class FakeControl:
    """The test's end of the control channel (module docstring). Use as a context manager."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="mosaic-claude-fake-ctl-")
        os.chmod(self._dir, 0o700)
        self.path = str(Path(self._dir) / "ctl.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(1)
        self._conn: socket.socket | None = None
        self._cond = threading.Condition()
        self._held: list[tuple[str, str]] = []
        self._oks: list[str] = []
        self._reader: threading.Thread | None = None

    def __enter__(self) -> FakeControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def accept(self, timeout: float) -> None:
        """Wait for the fake to connect (it does at start)."""
        self._server.settimeout(timeout)
        conn, _ = self._server.accept()
        conn.settimeout(None)
        self._conn = conn
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._conn is not None
        buf = b""
        while True:
            try:
                chunk = self._conn.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            with self._cond:
                for line in lines:
                    msg = json.loads(line)
                    if "held" in msg:
                        self._held.append((str(msg["held"]), str(msg.get("detail", ""))))
                    elif "ok" in msg:
                        self._oks.append(str(msg["ok"]))
                self._cond.notify_all()
        with self._cond:
            self._conn = None
            self._cond.notify_all()

    def _send(self, obj: dict[str, Any]) -> None:
        if self._conn is None:
            raise RuntimeError("the fake engine is not connected")
        self._conn.sendall(json.dumps(obj).encode() + b"\n")

    def hold(self, point: str, count: int = 1, timeout: float = 10.0) -> None:
        """Arm ``point`` for its next ``count`` passes; returns once the fake acknowledged."""
        if point not in HOLD_POINTS:
            raise ValueError(f"no hold point {point!r}; the points are {HOLD_POINTS}")
        with self._cond:
            self._send({"hold": point, "count": count})
            self._wait(lambda: point in self._oks, timeout, f"the fake did not acknowledge the hold {point}")
            self._oks.remove(point)

    def wait_held(self, point: str, timeout: float = 10.0) -> str:
        """Wait until the fake stops at ``point``; its detail."""
        with self._cond:
            self._wait(lambda: any(p == point for p, _ in self._held), timeout, f"the fake did not stop at {point}")
            i = next(i for i, (p, _) in enumerate(self._held) if p == point)
            return self._held.pop(i)[1]

    def release(self, point: str) -> None:
        with self._cond:
            self._send({"release": point})

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            left = deadline - time.monotonic()
            if left <= 0 or (self._conn is None and self._reader is not None):
                raise TimeoutError(what)
            self._cond.wait(left)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        self._server.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.rmdir(self._dir)


def __dir__() -> list[str]:
    return sorted(__all__)
