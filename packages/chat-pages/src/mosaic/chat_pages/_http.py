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

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ._jsonout import dump_bytes
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
    what = _request(target)
    if what[0] == "answer":
        return what[1], what[2]
    if what[0] == "catalogue":
        return 200, reader.catalogue()
    result = reader.next(**what[1]) if "cursor" in what[1] else reader.open(**what[1])
    if result["ok"]:
        return 200, result
    return REFUSAL_STATUS[result["refusal"]["code"]], result


def route_json(reader: Reader, target: str) -> tuple[int, bytes]:
    """`route` with the body as its JSON bytes, `dump_bytes` of `route`'s body: what the servers send. A page is
    made as bytes (`Reader.open` and `Reader.next` with `as_json=True`): no part dict is made and nothing encoded again."""
    what = _request(target)
    if what[0] == "answer":
        return what[1], dump_bytes(what[2])
    if what[0] == "catalogue":
        return 200, dump_bytes(reader.catalogue())
    call = what[1]
    body = reader.next(**call, as_json=True) if "cursor" in call else reader.open(**call, as_json=True)
    if body.startswith(_OK):
        return 200, body
    # A refusal: its body is small, {"ok":false,"refusal":{"code":...}}; its code names the status.
    return REFUSAL_STATUS[json.loads(body)["refusal"]["code"]], body


_OK = b'{"ok":true,'


def _request(target: str) -> tuple[str, Any, Any]:
    """What one GET target asks for: ("answer", status, body) when it is answered without the reader,
    ("catalogue", None, None), or ("page", the keywords of `Reader.open` or, with a cursor, `Reader.next`,
    None)."""
    parts = urlsplit(target)
    path = parts.path
    if path in ("/conversations", "/conversations/"):
        if parts.query:
            return "answer", 400, {"ok": False, "error": "bad-request", "message": "the catalogue takes no parameters"}
        return "catalogue", None, None
    if not path.startswith("/conversations/"):
        return "answer", 404, {"ok": False, "error": "not-found", "message": "no such route"}
    conversation = unquote(path[len("/conversations/"):])
    if not conversation or "/" in conversation:
        return "answer", 404, {"ok": False, "error": "not-found", "message": "no such route"}
    try:
        query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query), max_num_fields=8)
    except ValueError:
        return "answer", 400, {"ok": False, "error": "bad-request", "message": "the query string is malformed"}
    if set(query) - _PARAMS or any(len(v) != 1 for v in query.values()):
        return "answer", 400, {"ok": False, "error": "bad-request",
                               "message": "parameters: branch, cursor, actor, purpose, each at most once"}
    args: dict[str, Any] = {k: v[0] for k, v in query.items()}
    call: dict[str, Any] = {k: args[k] for k in ("actor", "purpose") if k in args}
    call["conversation"] = conversation
    if "cursor" in args:
        call.update(cursor=args["cursor"], branch=args.get("branch"))
    else:
        call["branch"] = args.get("branch") or None
    return "page", call, None
