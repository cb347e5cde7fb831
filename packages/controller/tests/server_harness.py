"""Helpers for the socket server tests: a private socket directory removed by its exact names, a stub
core that records inputs and answers calls through `deliver`, raw-socket clients on the event loop, and
bounded waits.

Nothing here sleeps to synchronise: every wait is on an event or a read, bounded by `BOUND`, and reaching
the bound fails the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import struct
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mosaic.controller.core import Call, Connected, Disconnected, Input, Refuse, Reply
from mosaic.controller.server import ConnectionStats, ServerLimits, SocketServer

BOUND = 20.0  # seconds: generous, only a broken server reaches it
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], bound: float = 120.0) -> T:
    """Run one test coroutine to completion; a test that outlives `bound` fails."""
    async def bounded() -> T:
        return await asyncio.wait_for(coro, bound)
    return asyncio.run(bounded())


@dataclass
class SocketDir:
    """A private (0700) directory for one socket; `cleanup` removes exactly the names recorded."""

    path: str
    sock: str
    extra: list[str] = field(default_factory=list)  # more paths a test made inside `path`

    def cleanup(self) -> None:
        for name in [self.sock, *self.extra]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
        os.rmdir(self.path)


@contextlib.contextmanager
def socket_dir() -> Iterator[SocketDir]:
    """A fresh private directory under /tmp (short, so the socket path fits sun_path)."""
    path = tempfile.mkdtemp(prefix="mcs-", dir="/tmp")
    os.chmod(path, 0o700)
    d = SocketDir(path, os.path.join(path, "ctl.sock"))
    try:
        yield d
    finally:
        d.cleanup()


Handler = Callable[[Call], "Reply | Refuse | None"]


class StubCore:
    """Records every input; answers each `Call` at once through `server.deliver` with a `Reply`
    ``{"method", "params"}`` unless `handlers` has its own answer for the method (None: no answer)."""

    def __init__(self) -> None:
        self.inputs: list[Input] = []
        self.handlers: dict[str, Handler] = {}
        self.server: SocketServer | None = None
        self.final_stats: dict[str, ConnectionStats | None] = {}  # read at each Disconnected
        self._changed: asyncio.Event | None = None

    def __call__(self, event: Input) -> None:
        self.inputs.append(event)
        if isinstance(event, Disconnected) and self.server is not None:
            self.final_stats[event.conn] = self.server.stats(event.conn)
        if self._changed is not None:
            self._changed.set()
        if isinstance(event, Call):
            handler = self.handlers.get(event.method)
            answer: Reply | Refuse | None
            if handler is None:
                answer = Reply(event.conn, event.rpc_id, {"method": event.method, "params": dict(event.params)})
            else:
                answer = handler(event)
            if answer is not None:
                assert self.server is not None
                self.server.deliver(answer)

    def calls(self, conn: str | None = None) -> list[Call]:
        return [e for e in self.inputs if isinstance(e, Call) and (conn is None or e.conn == conn)]

    def connected(self) -> list[str]:
        return [e.conn for e in self.inputs if isinstance(e, Connected)]

    def disconnected(self) -> list[str]:
        return [e.conn for e in self.inputs if isinstance(e, Disconnected)]

    async def wait_for(self, predicate: Callable[[], bool], bound: float = BOUND) -> None:
        """Wait until `predicate()` holds after some input; raises TimeoutError past `bound`."""
        if self._changed is None:
            self._changed = asyncio.Event()

        async def until() -> None:
            assert self._changed is not None
            while not predicate():
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(until(), bound)


class Client:
    """One client on a raw non-blocking socket (the loop's sock_* calls). Unlike asyncio's StreamReader,
    it keeps every line it received before a reset: a reset after data reads as the end of the stream."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.eof = False
        self.next_id = 0

    @classmethod
    async def connect(cls, path: str) -> Client:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            try:
                sock.connect(path)
            except BlockingIOError:
                # AF_UNIX says EAGAIN when the listen backlog is full; asyncio's sock_connect cannot wait
                # for that, a blocking connect can, bounded by SO_SNDTIMEO (a Python timeout would make
                # the socket non-blocking again).
                sock.setblocking(True)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", int(BOUND), 0))
                await asyncio.to_thread(sock.connect, path)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
                sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    async def send(self, data: bytes | dict[str, Any]) -> None:
        if isinstance(data, dict):
            data = json.dumps(data).encode() + b"\n"
        await asyncio.wait_for(asyncio.get_running_loop().sock_sendall(self.sock, data), BOUND)

    async def _more(self) -> bool:
        try:
            chunk = await asyncio.get_running_loop().sock_recv(self.sock, 1 << 18)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    async def readline(self, bound: float = BOUND) -> bytes | None:
        """The next line with its LF; None at the end of the stream (an unterminated tail fails)."""
        async def read() -> bytes | None:
            while True:
                nl = self.buf.find(b"\n")
                if nl != -1:
                    line = bytes(self.buf[: nl + 1])
                    del self.buf[: nl + 1]
                    return line
                if self.eof or not await self._more():
                    assert not self.buf, f"unterminated line at the end: {bytes(self.buf[:80])!r}"
                    return None

        return await asyncio.wait_for(read(), bound)

    async def recv(self, bound: float = BOUND) -> dict[str, Any]:
        """The next message; fails at the end of the stream or past `bound`."""
        raw = await self.readline(bound)
        assert raw is not None, "the server ended the connection"
        msg = json.loads(raw)
        assert isinstance(msg, dict)
        return msg

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and return the next message (which must be its response)."""
        self.next_id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        reply = await self.recv()
        assert reply.get("id") == self.next_id, reply
        return reply

    async def read_to_eof(self, bound: float = BOUND) -> list[dict[str, Any]]:
        """Every message until the server ends the connection."""
        out: list[dict[str, Any]] = []

        async def read() -> None:
            while (raw := await self.readline(bound)) is not None:
                out.append(json.loads(raw))

        await asyncio.wait_for(read(), bound)
        return out

    def write_eof(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def reset(self) -> None:
        """Hang up at once (SO_LINGER 0)."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    async def aclose(self) -> None:
        self.sock.close()


@contextlib.asynccontextmanager
async def serving(path: str, *, limits: ServerLimits | None = None, core: StubCore | None = None,
                  clock: Callable[[], float] | None = None,
                  standing: Callable[[Any], str] | None = None) -> AsyncIterator[tuple[SocketServer, StubCore]]:
    """A started server with a stub core; closed (and its socket file removed) on the way out."""
    core = core or StubCore()
    kwargs: dict[str, Any] = {"limits": limits or ServerLimits()}
    if clock is not None:
        kwargs["clock"] = clock
    if standing is not None:
        kwargs["standing"] = standing
    server = SocketServer(path, core, **kwargs)
    core.server = server
    await server.start()
    try:
        yield server, core
    finally:
        await server.aclose()


async def gather_bounded(*aws: Awaitable[T], bound: float = BOUND) -> list[T]:
    return list(await asyncio.wait_for(asyncio.gather(*aws), bound))


def ensure_nofile(needed: int) -> int:
    """Raise this process's RLIMIT_NOFILE soft limit to at least `needed` (up to the hard limit);
    returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


def closing_reason(messages: list[dict[str, Any]]) -> str | None:
    """The reason of the last message if it is a `closing` notification."""
    if messages and messages[-1].get("method") == "closing":
        reason = messages[-1]["params"]["reason"]
        assert isinstance(reason, str)
        return reason
    return None


__all__ = [
    "BOUND", "Client", "SocketDir", "StubCore", "closing_reason", "ensure_nofile", "gather_bounded", "run",
    "serving", "socket_dir",
]
