"""Ids: the CHAT-01 id pattern, hashing of ids that do not fit it, and the n./x./b. namespaces.

The same rules as pi-format's (its README, "Ids"), restated here because this package imports no other
Mosaic parser: a raw id is kept verbatim when it is a CHAT-01 id of at most 96 characters that does not
start with `h-`, else it becomes `h-` plus 40 hex of its SHA-256. Entry items are `n.<safe id>`, notices
`x.<...>`, branches `main` and `b.<safe id>`. A Claude entry's `uuid` (36 characters of hex and dashes) is
always kept verbatim; a tool_use id (`toolu_...`) too.
"""

from __future__ import annotations

import hashlib
import re

# What mosaic.claude_format.ids offers (it star-imports this list).
__all__ = ["CHAT01_ID_PATTERN", "MAIN_BRANCH", "is_chat01_id", "safe_id"]

#: This project's reconstruction of the CHAT-01 id pattern (the reader's JSON schema uses the same string).
CHAT01_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

_CHAT01_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
# Every id this package builds from a raw id adds at most 30 characters (n., b., x.gap-, x.loop-, ...).
_VERBATIM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,95}")

HASH_PREFIX = "h-"
NATIVE_PREFIX = "n."
NOTICE_PREFIX = "x."
BRANCH_PREFIX = "b."
MAIN_BRANCH = "main"


def is_chat01_id(value: str) -> bool:
    """True when `value` matches CHAT01_ID_PATTERN (the whole string)."""
    return _CHAT01_ID.fullmatch(value) is not None


def safe_id(raw: str) -> str:
    """The raw id itself when it is a short CHAT-01 id, else `h-` plus 40 hex of its SHA-256 (over UTF-8
    with surrogatepass, so a lone surrogate hashes too and no input raises)."""
    if not raw.startswith(HASH_PREFIX) and _VERBATIM.fullmatch(raw) is not None:
        return raw
    return HASH_PREFIX + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def native_id(raw: str) -> str:
    """The item id of an entry: `n.` plus its safe id."""
    return NATIVE_PREFIX + safe_id(raw)


def branch_name(raw: str) -> str:
    """The name of the branch an entry starts (when it is not `main`): `b.` plus its safe id."""
    return BRANCH_PREFIX + safe_id(raw)
