"""The two GET routes (seed README: "A library with no server: the control board serves it on two GET
routes (D3)"): `route`, pure, and the status table. `_server.py` serves them on loopback and `_asgi.py`
offers them as an ASGI application.

    GET /conversations                                        -> the catalogue (200)
    GET /conversations/{id}[?branch=B]                        -> open: the first page
    GET /conversations/{id}?cursor=C&branch=B                 -> next: the next page, or a follow

Optional `actor` and `purpose` parameters are passed through to the API, which refuses any value but
local-operator and history: "local-operator is the only actor on this unauthenticated loopback route."
(The servers put a guard in front, `_guard.py`: the token it requires admits the local operator, it
does not name other actors.) A refusal answers with the status of its code in REFUSAL_STATUS and the
refusal JSON as the body.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ._reader import Reader

# What the public modules show of this module; the rest is the package's own.
__all__ = ["REFUSAL_STATUS", "route"]

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
        "host-refused": 421,
        "cross-site": 403,
        "token-required": 401,
        "token-wrong": 403,
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
