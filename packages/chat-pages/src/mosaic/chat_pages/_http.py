"""The two GET routes (seed README: "A library with no server: the control board serves it on two GET
routes (D3)"), served here by the standard library on loopback only.

    GET /conversations                                        -> the catalogue (200)
    GET /conversations/{id}[?branch=B]                        -> open: the first page
    GET /conversations/{id}?cursor=C&branch=B                 -> next: the next page, or a follow

Optional `actor` and `purpose` parameters are passed through to the API, which refuses any value but
local-operator and history: "local-operator is the only actor on this unauthenticated loopback route."
A refusal answers with the status of its code in REFUSAL_STATUS and the refusal JSON as the body.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ._jsonout import dump_bytes
from ._reader import Reader

#: One HTTP status per refusal code. A test checks this table against ReaderRefusal.CODES and against
#: every refusal code the package's source can produce.
REFUSAL_STATUS: Mapping[str, int] = MappingProxyType(
    {
        "unknown-conversation": 404,
        "unknown-branch": 404,
        "unavailable": 410,
        "unsupported-harness": 422,
        "unsafe-path": 403,
        "foreign-project": 403,
        "unreadable": 403,
        "not-a-pi-session": 422,
        "incomplete-header": 409,
        "too-large": 413,
        "cursor-unknown": 410,
        "cursor-expired": 410,
        "cursor-foreign": 403,
        "source-replaced": 409,
        "unknown-actor": 403,
        "unsupported-purpose": 400,
    }
)

_PARAMS = frozenset({"branch", "cursor", "actor", "purpose"})


def route(reader: Reader, target: str) -> tuple[int, dict[str, Any]]:
    """Answer one GET request target (path and query) with (status, JSON body). Never raises for input."""
    parts = urlsplit(target)
    path = parts.path
    if path in ("/conversations", "/conversations/"):
        if parts.query:
            return 400, {"ok": False, "error": "bad-request", "message": "the catalogue takes no parameters"}
        return 200, reader.catalogue()
    if not path.startswith("/conversations/"):
        return 404, {"ok": False, "error": "not-found", "message": "no such route"}
    conversation = unquote(path[len("/conversations/"):])
    if not conversation or "/" in conversation:
        return 404, {"ok": False, "error": "not-found", "message": "no such route"}
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query), max_num_fields=8)
    except ValueError:
        return 400, {"ok": False, "error": "bad-request", "message": "the query string is malformed"}
    if set(query) - _PARAMS or any(len(v) != 1 for v in query.values()):
        return 400, {"ok": False, "error": "bad-request",
                     "message": "parameters: branch, cursor, actor, purpose, each at most once"}
    args: dict[str, Any] = {k: v[0] for k, v in query.items()}
    caller = {k: args[k] for k in ("actor", "purpose") if k in args}
    if "cursor" in args:
        result = reader.next(cursor=args["cursor"], conversation=conversation, branch=args.get("branch"), **caller)
    else:
        result = reader.open(conversation=conversation, branch=args.get("branch") or None, **caller)
    if result["ok"]:
        return 200, result
    return REFUSAL_STATUS[result["refusal"]["code"]], result


class _Handler(BaseHTTPRequestHandler):
    reader: Reader
    server_version = "mosaic-chat-pages"
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        status, body = route(self.reader, self.path)
        self._send(status, body)

    def _refuse_method(self) -> None:
        self._send(405, {"ok": False, "error": "method-not-allowed", "message": "only GET"}, allow=True)

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse_method  # noqa: N815

    def _send(self, status: int, body: dict[str, Any], allow: bool = False) -> None:
        data = dump_bytes(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        if allow:
            self.send_header("Allow", "GET")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return  # quiet: the routes serve history, they do not log it


class ReaderServer(ThreadingHTTPServer):
    """The routes on a loopback address. `url` is the base URL; `close()` stops serving and closes."""

    daemon_threads = True

    def __init__(self, reader: Reader, host: str = "127.0.0.1", port: int = 0) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the reader routes serve loopback only, not {host}")
        handler = type("Handler", (_Handler,), {"reader": reader})
        super().__init__((host, port), handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ReaderServer:
        """Serve in a background thread (for tests and the CLI's `serve`)."""
        self._thread = threading.Thread(target=self.serve_forever, name="chat-pages-http", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving, join the thread, close the socket."""
        if self._thread is not None:
            self.shutdown()
            self._thread.join()
            self._thread = None
        self.server_close()


def serve(reader: Reader, host: str = "127.0.0.1", port: int = 0) -> ReaderServer:
    """Start the two GET routes on a loopback address in a background thread; returns the server."""
    return ReaderServer(reader, host, port).start()
