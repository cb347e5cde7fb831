"""The two GET routes as an ASGI application, behind the loopback guard as middleware: plain callables, no
framework imported.

Other Mosaic tools mount the routes in their own servers. `asgi_app(reader)` returns an ASGI 3 application
(uvicorn, hypercorn, ...) that gives `ReaderServer`'s answers: the guard first (`_guard.py`: the Host,
the origin, the token; the same refusals and statuses), then the same status table (`answer`: `route` for
GET, 405 with the JSON refusal body and `Allow: GET` for every other method). The reader call runs on the
same lanes as in `ReaderServer` (`_lanes.py`: one call per conversation in flight, the catalogue on a pool
of its own), never on the host's event loop nor its default executor. The lifespan protocol is answered;
its shutdown waits for the calls in flight and frees the lanes' threads.

`ReaderGuard(app, ...)` is the guard alone, as middleware a host keeps in front of any ASGI app (its own
routes included): `http` and `websocket` requests are judged, `lifespan` passes through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any
from urllib.parse import unquote

from ._guard import Guard, check_token_text, is_loopback_server, loopback_hosts, new_token
from ._jsonout import dump_bytes
from ._lanes import CATALOGUE_WORKERS, WORKERS, Lanes, lane_of
from ._reader import Reader
from ._server import SECURITY_HEADERS, answer

# What the public modules show of this module; the rest is the package's own.
__all__ = ["ReaderGuard", "asgi_app"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The websocket close code for a refused handshake (RFC 6455 7.4.1: policy violation).
WS_POLICY_VIOLATION = 1008


def _target(scope: Scope) -> str:
    raw: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
    query: bytes = scope.get("query_string", b"")
    return raw.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")


async def _respond(send: Send, status: int, body: bytes, extra: Iterable[tuple[str, str]] = ()) -> None:
    headers = [(b"content-type", b"application/json; charset=utf-8"),
               (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (*SECURITY_HEADERS, *extra)]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ReaderRoutes:
    """The two GET routes over `reader` as an ASGI 3 application, unguarded: mount it only behind
    `ReaderGuard` (`asgi_app` does). `lanes` are the worker lanes its reader calls run on."""

    def __init__(self, reader: Reader, *, workers: int = WORKERS, catalogue_workers: int = CATALOGUE_WORKERS) -> None:
        self.reader = reader
        self.lanes = Lanes(workers, catalogue_workers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    self.lanes.close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise ValueError(f"the reader routes serve http, not {scope['type']!r}")
        method, target = scope["method"], _target(scope)
        if method != "GET":  # answered here: no reader call, no worker
            status, body, allow = answer(self.reader, method, target)
        else:
            status, body, allow = await self.lanes.run(lane_of(target), answer, self.reader, method, target)
        await _respond(send, status, body, [("Allow", "GET")] if allow else [])


class ReaderGuard:
    """The loopback guard as ASGI middleware in front of `app` (see `_guard.py` for the rules).

    `hosts`: the Host values to accept. None (the default) accepts what a browser sends for the address the
    request came in on, `scope["server"]`, when that is a loopback address (`<address>:<port>` and
    `localhost:<port>`); a request on any other address or a Unix socket is then refused `host-refused`
    (name the hosts explicitly to serve those). `token` / `require_token` as for `ReaderServer`: a token
    is required by default, a fresh one when None is given; `self.token` is the one in force.
    """

    def __init__(self, app: App, *, token: str | None = None, require_token: bool = True,
                 hosts: Iterable[str] | None = None) -> None:
        if not require_token and token is not None:
            raise ValueError("a token was given with require_token=False")
        self.app = app
        self.token = (new_token() if token is None else check_token_text(token)) if require_token else None
        self._fixed = None if hosts is None else Guard(hosts, self.token)
        self._guards: dict[tuple[str, int] | None, Guard] = {}

    def _guard(self, scope: Scope) -> Guard:
        if self._fixed is not None:
            return self._fixed
        server = is_loopback_server(scope.get("server"))
        guard = self._guards.get(server)
        if guard is None:
            guard = Guard(loopback_hosts(*server) if server else (), self.token)
            if len(self._guards) < 64:  # one per listening address; bounded whatever scopes claim
                self._guards[server] = guard
        return guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = [(k.decode("latin-1").lower(), v.decode("latin-1").strip()) for k, v in scope.get("headers", [])]
        verdict = self._guard(scope).check(_target(scope), headers)
        if verdict.refusal is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": WS_POLICY_VIOLATION})
            else:
                await _respond(send, verdict.status, dump_bytes(verdict.refusal), verdict.headers)
            return
        # The token parameter never reaches the app (nor its logs); an absolute-form target reaches it as the
        # path it names (the guard judged its authority).
        path, _, query = verdict.target.partition("?")
        forwarded = {**scope, "query_string": query.encode("latin-1")}
        if path != _target(scope).partition("?")[0]:
            forwarded["raw_path"], forwarded["path"] = path.encode("latin-1"), unquote(path)
        await self.app(forwarded, receive, send)


def asgi_app(reader: Reader, *, token: str | None = None, require_token: bool = True,
             hosts: Iterable[str] | None = None, workers: int = WORKERS,
             catalogue_workers: int = CATALOGUE_WORKERS) -> ReaderGuard:
    """The two GET routes over `reader` as an ASGI 3 application behind `ReaderGuard` (a token required
    unless `require_token=False`; `app.token` is the one in force; `app.app.lanes` the worker lanes)."""
    routes = ReaderRoutes(reader, workers=workers, catalogue_workers=catalogue_workers)
    return ReaderGuard(routes, token=token, require_token=require_token, hosts=hosts)
