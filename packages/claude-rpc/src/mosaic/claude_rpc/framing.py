"""stream-json framing, strict (README "Framing"): `LineDecoder` (LF framing, each line decoded on its own,
poisoned by the first line it cannot take), `decode_line`, `Undecodable` and its `UndecodableReason` codes,
`encode_line` (what the link writes), `DEFAULT_MAX_LINE_BYTES`, `DEFAULT_MAX_DEPTH`.
"""

from __future__ import annotations

from ._jsonl import (
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_LINE_BYTES,
    LineDecoder,
    Undecodable,
    UndecodableReason,
    decode_line,
    encode_line,
)

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "DEFAULT_MAX_LINE_BYTES",
    "LineDecoder",
    "Undecodable",
    "UndecodableReason",
    "decode_line",
    "encode_line",
]


def __dir__() -> list[str]:
    return sorted(__all__)
