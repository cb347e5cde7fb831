"""The two GET routes and what serves them (seed F16; README "The two GET routes").

`route(reader, target)` is the routing, pure: (status, body); `REFUSAL_STATUS` maps each refusal code to
its HTTP status. `serve(reader, ...)` starts a `ReaderServer` on loopback; `asgi_app(reader, ...)` is the
same routes as an ASGI 3 application, behind `ReaderGuard` (the guard as ASGI middleware, for a host's own
app too). Reader calls run on `Lanes`: one call per conversation in flight (`lane_of(target)` names the
conversation a target asks for), `WORKERS` threads for conversations and `CATALOGUE_WORKERS` of its own for
the catalogue. The server's bounds: a listen backlog of `BACKLOG`, a request head within `HEADER_TIMEOUT`
seconds and at most `MAX_HEAD` bytes, `IDLE_TIMEOUT` between requests, `WRITE_TIMEOUT` for a client to take
an answer, and at most `MAX_CONNECTIONS` open at once. Importing this module loads asyncio and the reader.
"""

from __future__ import annotations

from ._asgi import ReaderGuard, asgi_app
from ._http import REFUSAL_STATUS, route
from ._lanes import CATALOGUE_WORKERS, WORKERS, Lanes, lane_of
from ._server import (
    BACKLOG,
    HEADER_TIMEOUT,
    IDLE_TIMEOUT,
    MAX_CONNECTIONS,
    MAX_HEAD,
    WRITE_TIMEOUT,
    ReaderServer,
    serve,
)

__all__ = [
    "BACKLOG",
    "CATALOGUE_WORKERS",
    "HEADER_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_HEAD",
    "REFUSAL_STATUS",
    "WORKERS",
    "WRITE_TIMEOUT",
    "Lanes",
    "ReaderGuard",
    "ReaderServer",
    "asgi_app",
    "lane_of",
    "route",
    "serve",
]


def __dir__() -> list[str]:
    return sorted(__all__)
