"""The output model of `mosaic.pi_format.parse`: what a `Parsed` holds, down to a block.

`Parsed` (header, entries, branches, default branch and leaf, notices, unreadable lines, flags) is also at
`mosaic.pi_format`. Here are its parts: `Header`, `Branch` (`items`, `items_from`, `refs_from`, ...),
`Entry`, `Item`, `Notice`, the content blocks (`TextBlock`, `ThinkingBlock`, `UnavailableBlock`,
`ToolCallBlock`, `ImageBlock`, `CommandBlock`, `UnsupportedBlock`, and their union `Block`), the notice
codes `NOTICE_CODES`, and the types of the model's fields (`Json`, `ItemKind`, `NoticeCode`). Every value
is frozen. Importing this module loads msgspec.
"""

from __future__ import annotations

from . import _model
from ._model import *  # noqa: F403

__all__: list[str] = []
__all__ += _model.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
