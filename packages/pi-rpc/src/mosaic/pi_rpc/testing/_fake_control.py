"""The fake engine's control channel: named hold points a test can arm, wait on and release.

Transport: a Unix stream socket the *test* listens on (:class:`FakeControl`); the fake connects to it at
startup, before it reads stdin, and says ``hello``. Both directions carry one JSON object per LF-ended
line. Test to fake: ``{"req": n, "op": ...}``, answered ``{"req": n, "ok": true, ...}`` (or ``"error"``).
Fake to test, unsolicited: ``{"event": "held", "point": p, "hit": k, "detail": {...}}`` when a run reaches
an armed hold point and stops there, ``{"event": "unheld", "point": p, "reason": "aborted"}`` when an
abort takes a run out of a hold, and ``{"event": "bye"}`` before it exits.

Nothing here sleeps to synchronise: every wait is on a condition variable with a bound, and a bound that
passes raises ``TimeoutError``.

Hold points (where the fake stops when armed; see the fake engine's module docstring for the exact step):

==================  ====================================================================================
``preflight``       a prompt passed the streaming check and is inside preflight (agent-session.js 915),
                    before its ack; the preflight window of FACTS.md a5 / Part 2 F stays open while held
``run-start``       a run set ``isStreaming`` and the agent's active run, before ``agent_start`` is emitted
                    (the brief's N8 hold point)
``user-message``    after the user ``message_end`` of a run, before the model call
``model-chunk``     before each streamed assistant delta (abort releases it)
``tool``            before a tool call executes
``settle``          ``isStreaming`` is already false, ``agent_settled`` not yet emitted (a3's gap)
``abort``           the ``abort`` command, before it aborts anything
``clear-queue``     the ``clear_queue`` command, before it clears (hold it to make a clear time out, N7)
``stdout``          the stdout writer, before it writes queued bytes (the file gets ahead of stdout)
``dialog``          the fixture extension's tool is about to raise its dialog: nothing registered or written
                    yet (detail: ``method``)
``dialog-settled``  a dialog is no longer pending (``how``: ``answered``, ``timeout`` or ``aborted``) and its
                    handler has not resumed; nothing was written for the settle, and a response arriving
                    now is ignored (detail: ``id``, ``method``, ``how``)
==================  ====================================================================================

Dialog notifications: ``{"event": "dialog-settled", "id", "method", "how", "value"?}`` when any dialog
settles (``value`` absent for JavaScript's ``undefined``), before the ``dialog-settled`` hold point; the
``dialog`` op's dialogs also report ``{"event": "dialog-answered", "id", "response"}``.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["HOLD_POINTS", "FakeControl", "Held"]

HOLD_POINTS = ("preflight", "run-start", "user-message", "model-chunk", "tool", "settle", "abort", "clear-queue",
               "stdout", "dialog", "dialog-settled")


class Held(dict[str, Any]):
    """A ``held`` notification: ``point``, ``hit`` (1-based count of holds at that point), ``detail``."""


class FakeControl:
    """The test's end of the control channel. Create it, pass :attr:`path` to the fake engine
    (``--fake-control PATH``), start the fake, then :meth:`accept` its connection.

    Thread-safe; a background thread reads the fake's messages. Use as a context manager (closes the
    socket and removes its file).
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        # A Unix socket path is at most 107 bytes; pytest's tmp_path can be longer, so by default the socket
        # lives in a fresh short directory under /tmp, removed by close().
        self._own_dir = tempfile.mkdtemp(prefix="mosaic-fk-", dir="/tmp") if directory is None else None
        self.path = os.path.join(self._own_dir or os.fspath(directory or "."), "fake-control.sock")
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(self.path)
        self._srv.listen(1)
        self._conn: socket.socket | None = None
        self._cond = threading.Condition()
        self._replies: dict[int, dict[str, Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._consumed = 0
        self._req = 0
        self._closed = False
        self._reader: threading.Thread | None = None
        self.hello: dict[str, Any] | None = None

    def __enter__(self) -> FakeControl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and the listening socket; remove the socket file."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for s in (self._conn, self._srv):
            if s is not None:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        if self._reader is not None:
            self._reader.join(10)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        if self._own_dir is not None:
            try:
                os.rmdir(self._own_dir)
            except OSError:
                pass

    def accept(self, timeout: float) -> dict[str, Any]:
        """Wait for the fake to connect and say hello; return the hello (its pid and argv)."""
        self._srv.settimeout(timeout)
        try:
            conn, _ = self._srv.accept()
        except TimeoutError as exc:
            raise TimeoutError("the fake engine did not connect to its control socket in time") from exc
        conn.settimeout(None)
        self._conn = conn
        self._reader = threading.Thread(target=self._read_loop, name="fake-control-reader", daemon=True)
        self._reader.start()
        hello = self.wait_event(lambda e: e.get("event") == "hello", timeout)
        self.hello = hello
        return hello

    # -- requests -----------------------------------------------------------------------------------

    def request(self, op: str, timeout: float = 10.0, **args: Any) -> dict[str, Any]:
        """Send ``op`` with ``args``; wait for the reply. ``RuntimeError`` if the fake answers an error."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("not connected: call accept() first")
        with self._cond:
            self._req += 1
            req = self._req
        conn.sendall((json.dumps({"req": req, "op": op, **args}) + "\n").encode())
        deadline = time.monotonic() + timeout
        with self._cond:
            while req not in self._replies:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise TimeoutError(f"no reply from the fake engine to {op!r}")
                self._cond.wait(left)
            reply = self._replies.pop(req)
        if "error" in reply:
            raise RuntimeError(f"fake engine refused {op!r}: {reply['error']}")
        return reply

    def hold(self, point: str, count: int = 1) -> None:
        """Arm ``point`` for the next ``count`` hits (``-1``: every hit until :meth:`unhold`)."""
        self.request("hold", point=point, count=count)

    def unhold(self, point: str) -> None:
        """Disarm ``point`` (runs already held there stay held until released)."""
        self.request("unhold", point=point)

    def release(self, point: str, *, all_held: bool = False) -> int:
        """Let the oldest run held at ``point`` (or all of them) go on; return how many were released."""
        return int(self.request("release", point=point, all=all_held)["released"])

    def state(self) -> dict[str, Any]:
        """A snapshot of the fake's internals (isStreaming, active run, queues, holds)."""
        return dict(self.request("state")["state"])

    # -- notifications ------------------------------------------------------------------------------

    def wait_event(self, predicate: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        """Consume notifications in order until one matches ``predicate``; ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                while self._consumed < len(self._events):
                    ev = self._events[self._consumed]
                    self._consumed += 1
                    if predicate(ev):
                        return ev
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise TimeoutError("the fake engine sent no matching notification in time")
                self._cond.wait(left)

    def wait_all(self, predicate: Callable[[dict[str, Any]], bool], count: int, timeout: float) -> list[dict[str, Any]]:
        """Every notification received so far that matches ``predicate``, once there are at least ``count``
        (none is consumed: the control channel is read apart from the engine's stdout, so a notification can
        arrive after a later stdout record); ``TimeoutError`` otherwise."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = [ev for ev in self._events if predicate(ev)]
                left = deadline - time.monotonic()
                if len(got) >= count:
                    return got
                if left <= 0 or self._closed:
                    raise TimeoutError(f"the fake engine sent {len(got)} of {count} matching notifications in time")
                self._cond.wait(left)

    def wait_held(self, point: str, timeout: float) -> Held:
        """Wait until a run is held at ``point``; return the notification."""
        ev = self.wait_event(lambda e: e.get("event") == "held" and e.get("point") == point, timeout)
        return Held(ev)

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every notification received so far."""
        with self._cond:
            return list(self._events)

    def _read_loop(self) -> None:
        conn = self._conn
        assert conn is not None
        buf = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self._cond:
                    self._closed = True
                    self._cond.notify_all()
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                with self._cond:
                    if "req" in msg:
                        self._replies[int(msg["req"])] = msg
                    else:
                        self._events.append(msg)
                    self._cond.notify_all()
