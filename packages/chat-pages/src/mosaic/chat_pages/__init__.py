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

from ._asgi import asgi_app
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
