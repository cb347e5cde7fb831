"""The two GET routes as an ASGI application: a plain callable, no framework imported (issue 14, issue 19).

Other Mosaic tools mount the routes in their own servers. `asgi_app(reader)` returns `app(scope, receive,
send)` for ASGI 3 servers (uvicorn, hypercorn, ...): the same status table as `ReaderServer` (`answer`:
`route` for GET, 405 with the JSON refusal body and `Allow: GET` for every other method). The reader call
runs on the same lanes as in `ReaderServer` (`_lanes.py`: one call per conversation in flight, the
catalogue on a pool of its own), never on the host's event loop nor its default executor. The lifespan
protocol is answered; its shutdown waits for the calls in flight and frees the lanes' threads.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._lanes import CATALOGUE_WORKERS, WORKERS, Lanes, lane_of
from ._reader import Reader
from ._server import answer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def _target(scope: Scope) -> str:
    raw: bytes = scope.get("raw_path") or scope["path"].encode("utf-8")
    query: bytes = scope.get("query_string", b"")
    return raw.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")


class ReaderRoutes:
    """The two GET routes over `reader` as an ASGI 3 application. `lanes` are the worker lanes its reader
    calls run on."""

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
        headers = [(b"content-type", b"application/json; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]
        if allow:
            headers.append((b"allow", b"GET"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def asgi_app(reader: Reader, *, workers: int = WORKERS, catalogue_workers: int = CATALOGUE_WORKERS) -> ReaderRoutes:
    """The two GET routes over `reader` as an ASGI 3 application (`app.lanes`: its worker lanes)."""
    return ReaderRoutes(reader, workers=workers, catalogue_workers=catalogue_workers)
