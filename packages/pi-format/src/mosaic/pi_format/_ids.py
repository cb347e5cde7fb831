"""Ids: the CHAT-01 id pattern, hashing of ids that do not fit it, and the n./x. namespaces.

Seed README, "Parser": "Ids that do not fit the CHAT-01 id pattern are hashed (h- plus 40 hex). OpenAI tool
call ids such as call_x|fc_y are the real case. Entry ids are namespaced (n. for native, x. for notices), so
no native id can collide with a notice."

The CHAT-01 schema is not in the seeds. `CHAT01_ID_PATTERN` is this project's reconstruction, and the
reader's JSON schema (schemas/) uses the same pattern.
"""

from __future__ import annotations

import hashlib
import re

# What mosaic.pi_format.ids offers (it star-imports this list); the prefixes and native_id stay here.
__all__ = ["CHAT01_ID_PATTERN", "MAIN_BRANCH", "is_chat01_id", "safe_id"]

#: This project's reconstruction of the CHAT-01 id pattern (ECMA/Python syntax, anchored).
CHAT01_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

_CHAT01_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

# A raw id is kept verbatim only when it fits the pattern with room to spare: every id this package builds
# from it (n.<id>, b.<id>, x.gap-<id>, ...) adds at most 30 characters and must still fit the 128-character
# pattern. So the verbatim limit is 96 characters; longer ids are hashed like ids outside the pattern.
_VERBATIM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,95}")

#: Prefix of a hashed id. A raw id that itself starts with it is hashed too, so a verbatim id can never
#: equal the hash of another id.
HASH_PREFIX = "h-"

NATIVE_PREFIX = "n."
NOTICE_PREFIX = "x."
BRANCH_PREFIX = "b."
MAIN_BRANCH = "main"


def is_chat01_id(value: str) -> bool:
    """True when `value` matches CHAT01_ID_PATTERN (the whole string; a trailing newline does not match)."""
    return _CHAT01_ID.fullmatch(value) is not None


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


def native_id(raw: str) -> str:
    """The namespaced item id of a native (Pi) entry: `n.` plus its safe id."""
    return NATIVE_PREFIX + safe_id(raw)

