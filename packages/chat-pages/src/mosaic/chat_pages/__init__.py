"""mosaic.chat_pages: the read-only reader (the seed's CHAT-02): roots, catalogue, snapshots, CHAT-01 pages,
cursors, follow, and the two GET routes.

    from mosaic.chat_pages import roots_from_specs, create_reader, RepositorySpec, SeatRegistration
    reader = create_reader(roots=lambda: roots_from_specs(specs, registrations))
    reader.catalogue()                                   # {"ok", "conversations", "refusedRoots", "generatedAt"}
    reader.open(conversation=cid, branch=None)           # first page
    reader.next(cursor=c, conversation=cid, branch=b)    # next page, or a follow

open and next return {"ok": True, "page", "cursor", "follow", "view"} or {"ok": False, "refusal": {"code",
"reconcile", "message"}}. Nothing here writes a file. See the package README for every rule. The command
line is `mosaic-read` or `python -m mosaic.chat_pages` (its code is private: `_cli.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and readers see; at run time each name is imported on first use
    from ._asgi import ReaderGuard, asgi_app
    from ._cursors import CURSOR_CAP, CURSOR_TTL_SECONDS, HISTORY, LOCAL_OPERATOR
    from ._http import REFUSAL_STATUS, route
    from ._jsonout import dump_bytes, dumps
    from ._parts import (
        MAX_BLOCKS_PER_PART,
        MAX_FRAGMENT_JSON,
        MAX_PAGE_BYTES,
        MAX_PART_BYTES,
        MAX_PARTS_PER_PAGE,
        MAX_STRING_UNITS,
    )
    from ._reader import Reader, create_reader
    from ._refusal import ReaderRefusal
    from ._server import ReaderServer, serve
    from ._sources import (
        PI_HARNESS,
        RefusedSpec,
        RepositorySpec,
        Roots,
        SeatRegistration,
        SessionRoot,
        UnsupportedRoot,
        conversation_id,
        roots_from_specs,
        sessions_rel,
    )

# Where each public name lives: `import mosaic.chat_pages` imports none of them (issue 13, start-up cost:
# the reader, the server, asyncio and pi-format load only when a name is first used; PEP 562).
_HOME: dict[str, str] = {
    "asgi_app": "_asgi",
    "ReaderGuard": "_asgi",
    "CURSOR_CAP": "_cursors",
    "CURSOR_TTL_SECONDS": "_cursors",
    "HISTORY": "_cursors",
    "LOCAL_OPERATOR": "_cursors",
    "REFUSAL_STATUS": "_http",
    "route": "_http",
    "dump_bytes": "_jsonout",
    "dumps": "_jsonout",
    "MAX_BLOCKS_PER_PART": "_parts",
    "MAX_FRAGMENT_JSON": "_parts",
    "MAX_PAGE_BYTES": "_parts",
    "MAX_PART_BYTES": "_parts",
    "MAX_PARTS_PER_PAGE": "_parts",
    "MAX_STRING_UNITS": "_parts",
    "Reader": "_reader",
    "create_reader": "_reader",
    "ReaderRefusal": "_refusal",
    "ReaderServer": "_server",
    "serve": "_server",
    "PI_HARNESS": "_sources",
    "RefusedSpec": "_sources",
    "RepositorySpec": "_sources",
    "Roots": "_sources",
    "SeatRegistration": "_sources",
    "SessionRoot": "_sources",
    "UnsupportedRoot": "_sources",
    "conversation_id": "_sources",
    "roots_from_specs": "_sources",
    "sessions_rel": "_sources",
}

__all__ = [
    "CURSOR_CAP",
    "CURSOR_TTL_SECONDS",
    "HISTORY",
    "LOCAL_OPERATOR",
    "MAX_BLOCKS_PER_PART",
    "MAX_FRAGMENT_JSON",
    "MAX_PAGE_BYTES",
    "MAX_PARTS_PER_PAGE",
    "MAX_PART_BYTES",
    "MAX_STRING_UNITS",
    "PI_HARNESS",
    "REFUSAL_STATUS",
    "Reader",
    "ReaderGuard",
    "ReaderRefusal",
    "ReaderServer",
    "RefusedSpec",
    "RepositorySpec",
    "Roots",
    "SeatRegistration",
    "SessionRoot",
    "UnsupportedRoot",
    "asgi_app",
    "conversation_id",
    "create_reader",
    "dump_bytes",
    "dumps",
    "roots_from_specs",
    "route",
    "serve",
    "sessions_rel",
]


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
