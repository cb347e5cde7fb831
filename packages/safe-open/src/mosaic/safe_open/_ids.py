"""A raw id made safe to show: kept when it is a short CHAT-01 id, else hashed (seed README, "Parser": "Ids
that do not fit the CHAT-01 id pattern are hashed (h- plus 40 hex)").

It lives at the bottom layer because two packages must agree on it byte for byte: the reader names a tool
call by it (pi-format, which re-exports it as one object), and the controller's client matches a live tool
call against the history page by it (mosaic-controller-client, which depends on safe-open alone). It needs
only hashlib and re.
"""

from __future__ import annotations

import hashlib
import re

__all__ = ["HASH_PREFIX", "safe_id"]

# A raw id is kept verbatim only when it fits the CHAT-01 pattern with room to spare: every id the reader
# builds from it (n.<id>, b.<id>, x.gap-<id>, ...) adds at most 30 characters and must still fit the
# 128-character pattern. So the verbatim limit is 96 characters; longer ids are hashed like ids outside it.
_VERBATIM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,95}")

#: Prefix of a hashed id. A raw id that itself starts with it is hashed too, so a verbatim id can never
#: equal the hash of another id.
HASH_PREFIX = "h-"


def safe_id(raw: str) -> str:
    """The raw id itself when it is a short CHAT-01 id, else `h-` plus 40 hex of its SHA-256.

    Distinct raw ids give distinct results (verbatim ids never start with `h-`; hashes are SHA-256, cut
    to 160 bits). Lone surrogates (from `\\udXXX` escapes in the file) are hashed with surrogatepass, so
    no input raises.
    """
    if not raw.startswith(HASH_PREFIX) and _VERBATIM.fullmatch(raw) is not None:
        return raw
    digest = hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()
    return HASH_PREFIX + digest[:40]
