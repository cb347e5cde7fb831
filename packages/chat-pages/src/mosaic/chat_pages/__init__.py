"""mosaic.chat_pages: the read-only reader (the seed's CHAT-02): roots, catalogue, snapshots, CHAT-01 pages,
cursors, follow, and the two GET routes.

    from mosaic.chat_pages import roots_from_specs, create_reader, RepositorySpec, SeatRegistration
    reader = create_reader(roots=lambda: roots_from_specs(specs, registrations))
    reader.catalogue()                                   # {"ok", "conversations", "refusedRoots", "generatedAt"}
    reader.open(conversation=cid, branch=None)           # first page
    reader.next(cursor=c, conversation=cid, branch=b)    # next page, or a follow

open and next return {"ok": True, "page", "cursor", "follow", "view"} or {"ok": False, "refusal": {"code",
"reconcile", "message"}}. Nothing here writes a file. What a consumer needs is here (`__all__`); the rest is
in named public modules: `mosaic.chat_pages.reader` (the reader and its bounds), `.sources` (specs,
registrations, roots, conversation ids), `.parts` (the page limits, JSON), `.server` (the routes, the
server, the ASGI app, their bounds), `.guard` (who may ask the routes), `.cli` (the `mosaic-read` command
line; also `python -m mosaic.chat_pages`) and `.testing` (for this package's tests: switches and
machinery, with no compatibility promise). See the package README for every rule.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what mypy and readers see; at run time each name is imported on first use
    from ._asgi import asgi_app
    from ._jsonout import dumps
    from ._reader import Reader, create_reader
    from ._refusal import ReaderRefusal
    from ._server import ReaderServer, serve
    from ._sources import RepositorySpec, SeatRegistration, conversation_id, roots_from_specs

# Where each public name lives: `import mosaic.chat_pages` imports none of them, so the reader, the server,
# asyncio and pi-format load only when a name is first used (PEP 562), and a command's --help stays fast.
_LAZY: dict[str, str] = {
    "asgi_app": "_asgi",
    "dumps": "_jsonout",
    "Reader": "_reader",
    "create_reader": "_reader",
    "ReaderRefusal": "_refusal",
    "ReaderServer": "_server",
    "serve": "_server",
    "RepositorySpec": "_sources",
    "SeatRegistration": "_sources",
    "conversation_id": "_sources",
    "roots_from_specs": "_sources",
}

__all__ = [
    "Reader",
    "ReaderRefusal",
    "ReaderServer",
    "RepositorySpec",
    "SeatRegistration",
    "asgi_app",
    "conversation_id",
    "create_reader",
    "dumps",
    "roots_from_specs",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
