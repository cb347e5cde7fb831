"""The two GET routes and what serves them (seed F16; README "The two GET routes").

`route(reader, target)` is the routing, pure: (status, body); `REFUSAL_STATUS` maps each refusal code to
its HTTP status. `serve(reader, ...)` starts a `ReaderServer` on loopback; `asgi_app(reader, ...)` is the
same routes as an ASGI 3 application, behind `ReaderGuard` (the guard as ASGI middleware, for a host's own
app too). Reader calls run one per conversation in flight, on `WORKERS` threads for conversations and
`CATALOGUE_WORKERS` of its own for the catalogue. The server's bounds: a listen backlog of `BACKLOG`, a
request head within `HEADER_TIMEOUT` seconds and at most `MAX_HEAD` bytes, `IDLE_TIMEOUT` between
requests, `WRITE_TIMEOUT` for a client to take an answer, and at most `MAX_CONNECTIONS` open at once.
Importing this module loads asyncio and the reader.
"""

from __future__ import annotations

from . import _asgi, _http, _lanes, _server
from ._asgi import *  # noqa: F403
from ._http import *  # noqa: F403
from ._lanes import *  # noqa: F403
from ._server import *  # noqa: F403

__all__: list[str] = []
__all__ += _asgi.__all__
__all__ += _http.__all__
__all__ += _lanes.__all__
__all__ += _server.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
