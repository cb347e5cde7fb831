"""The loopback server of the two GET routes: one asyncio event loop for the connections, lanes of worker
threads for the reader calls.

A burst of connections waits in a listen backlog of `BACKLOG` (the standard library's default was 5);
idle and slow connections cost no thread and are closed after `HEADER_TIMEOUT` (the whole request head
must arrive within it, so a client that trickles bytes gains nothing) or `IDLE_TIMEOUT` (between requests
on a kept-alive connection); at most `MAX_CONNECTIONS` are open at once, and a connection beyond that is
closed at once. Every request first passes the guard (`_guard.py`: the Host, the origin, the token); a
refusal closes the connection. Then every method but GET (HEAD, OPTIONS, TRACE, CONNECT, a lowercase
`get`, ...) gets 405 with the JSON refusal body and `Allow: GET`; a malformed request gets 400, a head over
`MAX_HEAD` bytes 431, all in JSON. A GET runs on its lane (`_lanes.py`): one call per conversation in
flight, the catalogue on a pool of its own. A client that goes away is forgotten quietly: nothing is
printed. `route` stays pure.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import threading
from typing import Any

from ._guard import Guard, loopback_hosts, new_token
from ._http import route_json
from ._jsonout import dump_bytes
from ._lanes import CATALOGUE_WORKERS, WORKERS, Lanes, lane_of
from ._reader import Reader

# What the public modules show of this module; the rest is the package's own.
__all__ = [
    "BACKLOG",
    "HEADER_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_HEAD",
    "WRITE_TIMEOUT",
    "ReaderServer",
    "serve",
]

_log = logging.getLogger(__name__)

BACKLOG = 1024
HEADER_TIMEOUT = 10.0
IDLE_TIMEOUT = 15.0
WRITE_TIMEOUT = 30.0
MAX_CONNECTIONS = 4096
MAX_HEAD = 16 * 1024

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 410: "Gone", 413: "Content Too Large", 421: "Misdirected Request", 422: "Unprocessable Content",
            431: "Request Header Fields Too Large", 500: "Internal Server Error"}

METHOD_NOT_ALLOWED: dict[str, Any] = {"ok": False, "error": "method-not-allowed", "message": "only GET"}


def answer(reader: Reader, method: str, target: str) -> tuple[int, bytes, bool]:
    """(status, JSON body bytes, allow header) for one request: `route` for GET, else 405. Shared by the
    server and the ASGI application, so both give the same status table."""
    if method != "GET":
        return 405, dump_bytes(METHOD_NOT_ALLOWED), True
    status, body = route_json(reader, target)  # a page is made as bytes: no part dict, no encoding again
    return status, body, False


#: Sent with every answer: JSON is never sniffed as anything else, and a URL holding the token is never
#: passed on as a Referer.
SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"))


def _head(status: int, length: int, allow: bool, close: bool, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}", "Server: mosaic-chat-pages",
             "Content-Type: application/json; charset=utf-8", f"Content-Length: {length}",
             "Cache-Control: no-store"]
    lines += [f"{k}: {v}" for k, v in (*SECURITY_HEADERS, *extra)]
    if allow:
        lines.append("Allow: GET")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class ReaderServer:
    """The routes on a loopback address. `url` is the base URL; `start()` serves in a background thread,
    `serve_forever()` in this one, `close()` stops serving, closes every connection and the socket.

    A token is required by default: `token` supplies one (at least 16 visible ASCII characters), None
    makes a fresh random one; `require_token=False` turns tokens off, explicitly (then `token` must be
    None). `self.token` is the token in force (None when off) and `token_url` the catalogue's URL with it.
    `workers` and `catalogue_workers` size the two lanes (`_lanes.py`). Raises ValueError for an address
    that is not loopback or an unusable token, and OSError when the address cannot be bound.
    """

    def __init__(self, reader: Reader, host: str = "127.0.0.1", port: int = 0, *, workers: int = WORKERS,
                 catalogue_workers: int = CATALOGUE_WORKERS, token: str | None = None,
                 require_token: bool = True) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the reader routes serve loopback only, not {host}")
        if not require_token and token is not None:
            raise ValueError("a token was given with require_token=False")
        self._reader = reader
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._sock = socket.create_server((host, port), family=family, backlog=BACKLOG)
        self.server_address: tuple[Any, ...] = self._sock.getsockname()
        try:
            self.guard = Guard(loopback_hosts(self.server_address[0], self.server_address[1]),
                               (new_token() if token is None else token) if require_token else None)
        except ValueError:
            self._sock.close()
            raise
        #: The lanes the reader calls run on (their `users` and `wait_for_users` are diagnostics).
        self.lanes = Lanes(workers, catalogue_workers)
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._open = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._serving = threading.Event()  # set once serve_forever's listener is up (or failed)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in str(host) else f"http://{host!s}:{port}"

    @property
    def token(self) -> str | None:
        """The token every request must present, or None when tokens are off."""
        return self.guard.token

    @property
    def token_url(self) -> str:
        """The catalogue's URL, with `?token=` when a token is required: what a person opens."""
        return f"{self.url}/conversations" + (f"?token={self.token}" if self.token else "")

    @property
    def connections(self) -> int:
        """How many client connections are open now (a diagnostic)."""
        return self._open

    def start(self) -> ReaderServer:
        """Serve in a background thread (for tests and the CLI's `serve`); returns once the loop serves, so a
        `close()` right after it (a stop signal as soon as serve printed its line) never stops the loop
        while the listener is still being set up."""
        self._thread = threading.Thread(target=self.serve_forever, name="chat-pages-http", daemon=True)
        self._thread.start()
        self._serving.wait()
        return self

    def serve_forever(self) -> None:
        loop = self._loop
        asyncio.set_event_loop(loop)
        try:
            server = loop.run_until_complete(asyncio.start_server(self._connection, sock=self._sock, limit=MAX_HEAD))
        finally:
            self._serving.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            for w in list(self._writers):
                w.close()
            loop.run_until_complete(asyncio.sleep(0))
            with contextlib.suppress(Exception):
                loop.run_until_complete(server.wait_closed())

    def close(self) -> None:
        """Stop serving, join the thread, close every connection, the socket and the worker pool."""
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._thread = None
        if not self._loop.is_closed():
            self._loop.close()
        self._sock.close()
        self.lanes.close()

    # -- one connection ------------------------------------------------------------------------------

    async def _connection(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        if self._open >= MAX_CONNECTIONS:
            w.close()
            return
        self._open += 1
        self._writers.add(w)
        try:
            first = True
            while await self._one_request(r, w, HEADER_TIMEOUT if first else IDLE_TIMEOUT):
                first = False
        except Exception:  # noqa: BLE001 - a client that went away (reset, timeout) is forgotten quietly
            pass
        finally:
            self._open -= 1
            self._writers.discard(w)
            w.close()

    async def _one_request(self, r: asyncio.StreamReader, w: asyncio.StreamWriter, timeout: float) -> bool:
        """Read one request head and answer it; True to keep the connection for another request."""
        try:
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), timeout)
        except asyncio.LimitOverrunError:
            await self._send(w, 431, dump_bytes({"ok": False, "error": "bad-request",
                                                 "message": "the request head is too large"}), False, True)
            return False
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            return False  # closed, idle or too slow: nothing to answer
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._send(w, 400, dump_bytes({"ok": False, "error": "bad-request",
                                                 "message": "not an HTTP/1.x request line"}), False, True)
            return False
        method, target, version = parts
        headers = [(k.strip().lower(), v.strip()) for k, _, v in (x.partition(":") for x in lines[1:])]
        # The guard judges an absolute-form target's authority and hands back the path it names (RFC 9112
        # §3.2.2: a server must accept that form, and its authority names what the server acts on).
        verdict = self.guard.check(target, headers)
        if verdict.refusal is not None:  # before anything else: a refused request learns nothing more
            await self._send(w, verdict.status, dump_bytes(verdict.refusal), False, True, head_only=method == "HEAD",
                             extra=verdict.headers)
            return False
        if method == "GET" and not verdict.target.startswith("/"):
            await self._send(w, 400, dump_bytes({"ok": False, "error": "bad-request",
                                                 "message": "the target must be a path"}), False, True)
            return False
        fields = dict(headers)
        has_body = "transfer-encoding" in fields or fields.get("content-length", "0") not in ("", "0")
        close = (version == "HTTP/1.0" or fields.get("connection", "").lower() == "close" or has_body
                 or method != "GET")
        try:
            if method != "GET":  # answered here: no reader call, no worker
                status, body, allow = answer(self._reader, method, verdict.target)
            else:
                status, body, allow = await self.lanes.run(lane_of(verdict.target), answer, self._reader, method,
                                                           verdict.target)
        except Exception:
            # A fault of the reader itself (never of the client): logged once, answered 500, connection closed.
            _log.exception("the reader failed on %s %s", method, verdict.target[:200])
            status, body, allow, close = 500, dump_bytes({"ok": False, "error": "internal",
                                                          "message": "the reader failed"}), False, True
        await self._send(w, status, body, allow, close, head_only=method == "HEAD")
        return not close

    @staticmethod
    async def _send(w: asyncio.StreamWriter, status: int, body: bytes, allow: bool, close: bool,
                    head_only: bool = False, extra: tuple[tuple[str, str], ...] = ()) -> None:
        """Write one response. A response to HEAD carries the headers of the JSON body but not the body
        (HTTP: a HEAD response has no content), as ASGI servers do."""
        w.write(_head(status, len(body), allow, close, extra))
        if not head_only:
            w.write(body)
        await asyncio.wait_for(w.drain(), WRITE_TIMEOUT)


def serve(reader: Reader, host: str = "127.0.0.1", port: int = 0, *, token: str | None = None,
          require_token: bool = True) -> ReaderServer:
    """Start the two GET routes on a loopback address in a background thread; returns the server. A token
    is required unless `require_token=False` (see `ReaderServer`); `server.token` is the one in force."""
    return ReaderServer(reader, host, port, token=token, require_token=require_token).start()
