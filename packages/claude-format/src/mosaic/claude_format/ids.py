"""The id rules (pi-format's, restated): ids that do not fit the CHAT-01 id pattern are hashed, entry and
notice ids live in two namespaces, and `main` is the first non-sidechain root's branch.

`safe_id(raw)` is a raw id as the model shows it; `is_chat01_id(s)` checks a string against
`CHAT01_ID_PATTERN`. `safe_id` and `MAIN_BRANCH` are also at `mosaic.claude_format`.
"""

from __future__ import annotations

from . import _ids
from ._ids import *  # noqa: F403

__all__: list[str] = []
__all__ += _ids.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
