"""The id rules (seed README, "Parser"): ids that do not fit the CHAT-01 id pattern are hashed, native and
notice ids live in two namespaces, and the first root's branch is `MAIN_BRANCH`.

`safe_id(raw)` is a raw id as the model shows it (kept when it fits the pattern with room for the
prefixes, else `h-` and 40 hex); `is_chat01_id(s)` checks a string against `CHAT01_ID_PATTERN` (this
project's reconstruction of the CHAT-01 pattern, which the reader's JSON schema uses too). `safe_id` and
`MAIN_BRANCH` are also at `mosaic.pi_format`.
"""

from __future__ import annotations

from . import _ids
from ._ids import *  # noqa: F403

__all__: list[str] = []
__all__ += _ids.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
