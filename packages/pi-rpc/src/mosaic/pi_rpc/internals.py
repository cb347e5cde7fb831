"""What pi-rpc's own tests hold to Pi part by part, and its reviewers read: no compatibility promise (any
release may change or drop a name here; a caller uses `mosaic.pi_rpc` and its promised modules, the fake
engine included).

The fake engine's parts the tests compare with Pi one by one: `js_json_parse` and `JsonParseError` (V8's
``JSON.parse`` and its exact error messages, recorded from Node 22.23.5), `SessionFile`, `iso_now` and
`uuidv7` (the session manager's file, tree and ids), and `GET_TREE_MAX_PATH` (the most nodes on one path
whose ``get_tree`` answer the fake writes; past it, Pi's ``Maximum call stack size exceeded``).
"""

from __future__ import annotations

from .testing._fake_rpc import GET_TREE_MAX_PATH
from .testing._fake_session import SessionFile, iso_now, uuidv7
from .testing._jsjson import JsonParseError, js_json_parse

__all__ = ["GET_TREE_MAX_PATH", "JsonParseError", "SessionFile", "iso_now", "js_json_parse", "uuidv7"]


def __dir__() -> list[str]:
    return sorted(__all__)
