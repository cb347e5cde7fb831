"""The two GET routes as an ASGI application: a plain callable, no framework imported (issue 14).

Other Mosaic tools mount the routes in their own servers. `asgi_app(reader)` returns `app(scope, receive,
send)` for ASGI 3 servers (uvicorn, hypercorn, ...): the same status table as `ReaderServer` (`answer`:
`route` for GET, 405 with the JSON refusal body and `Allow: GET` for every other method). The reader call
runs in a worker thread (`asyncio.to_thread`), so a slow parse never blocks the server's event loop. The
lifespan protocol is answered (nothing to start or stop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from ._reader import Reader
from ._server import answer

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def asgi_app(reader: Reader) -> App:
    """The two GET routes over `reader` as an ASGI 3 application."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise ValueError(f"the reader routes serve http, not {scope['type']!r}")
        target = scope.get("raw_path") or scope["path"].encode("utf-8")
        query = scope.get("query_string", b"")
        text = target.decode("latin-1") + ("?" + query.decode("latin-1") if query else "")
        status, body, allow = await asyncio.to_thread(answer, reader, scope["method"], text)
        headers = [(b"content-type", b"application/json; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]
        if allow:
            headers.append((b"allow", b"GET"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app
