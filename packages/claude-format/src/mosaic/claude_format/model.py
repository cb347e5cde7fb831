"""The output model of `mosaic.claude_format.parse`: what a `Parsed` holds, down to a block.

`Parsed` (branches, default branch and leaf and the rule that chose it, notices, unreadable lines, the
first entry's session id, cwd and time, flags) is also at `mosaic.claude_format`. Here are its parts:
`Branch` (`items`, `items_from`, `refs_from`, ...), `Item`, `Notice`, the content blocks (`TextBlock`,
`ThinkingBlock`, `UnavailableBlock`, `ToolCallBlock`, `ImageBlock`, `UnsupportedBlock`, and their union
`Block`), the notice codes `NOTICE_CODES`, and the field types (`Json`, `ItemKind`, `NoticeCode`). Every
value is frozen; the shapes of items and blocks are pi-format's, so the reader serves both in one CHAT-01
vocabulary. Importing this module loads msgspec.
"""

from __future__ import annotations

from . import _model
from ._model import *  # noqa: F403

__all__: list[str] = []
__all__ += _model.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
