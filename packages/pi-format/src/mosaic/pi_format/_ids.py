"""Ids: the CHAT-01 id pattern, hashing of ids that do not fit it, and the n./x. namespaces.

Seed README, "Parser": "Ids that do not fit the CHAT-01 id pattern are hashed (h- plus 40 hex). OpenAI tool
call ids such as call_x|fc_y are the real case. Entry ids are namespaced (n. for native, x. for notices), so
no native id can collide with a notice."

The CHAT-01 schema is not in the seeds. `CHAT01_ID_PATTERN` is this project's reconstruction, and the
reader's JSON schema (schemas/) uses the same pattern.
"""

from __future__ import annotations

import re

# `safe_id` and `HASH_PREFIX` are safe-open's (`mosaic.safe_open.ids`, one object): the controller's client
# matches tool calls by the same function without depending on this package (issue 31).
from mosaic.safe_open.ids import HASH_PREFIX as HASH_PREFIX
from mosaic.safe_open.ids import safe_id

# What mosaic.pi_format.ids offers (it star-imports this list); the prefixes and native_id stay here.
__all__ = ["CHAT01_ID_PATTERN", "MAIN_BRANCH", "is_chat01_id", "safe_id"]

#: This project's reconstruction of the CHAT-01 id pattern (ECMA/Python syntax, anchored).
CHAT01_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

_CHAT01_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

NATIVE_PREFIX = "n."
NOTICE_PREFIX = "x."
BRANCH_PREFIX = "b."
MAIN_BRANCH = "main"


def is_chat01_id(value: str) -> bool:
    """True when `value` matches CHAT01_ID_PATTERN (the whole string; a trailing newline does not match)."""
    return _CHAT01_ID.fullmatch(value) is not None


def native_id(raw: str) -> str:
    """The namespaced item id of a native (Pi) entry: `n.` plus its safe id."""
    return NATIVE_PREFIX + safe_id(raw)

