"""stream-json framing, strict (README "Framing"): `LineDecoder` (LF framing, each line decoded on its own,
poisoned by the first line it cannot take), `decode_line`, `Undecodable` and its `UndecodableReason` codes,
`encode_line` (what the link writes), `DEFAULT_MAX_LINE_BYTES`, `DEFAULT_MAX_DEPTH`.
"""

from __future__ import annotations

from . import _jsonl
from ._jsonl import *  # noqa: F403

__all__: list[str] = []
__all__ += _jsonl.__all__


def __dir__() -> list[str]:
    return sorted(__all__)
