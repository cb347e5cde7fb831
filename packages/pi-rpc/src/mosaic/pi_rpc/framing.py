"""LF framing (brief §1, fixture E2): `RecordDecoder` splits bytes at LF only (one trailing CR stripped, each
record UTF-8 on its own; U+2028, U+2029 and every other separator stay inside the record), `encode_record`
writes `JSON.stringify`'s bytes (`js_json_dumps`) plus one LF. A record over `DEFAULT_MAX_RECORD_BYTES` (or
the cap given) raises `FramingError` and poisons the decoder. `decode_record` reads one record strictly as a
JSON object; whatever it cannot take is a `FramingError` whose `kind` (`UnreadableKind`) is a key of
`UNREADABLE_OUTPUT` (nesting over `MAX_RECORD_DEPTH` included), never another exception.
"""

from __future__ import annotations

from ._framing import (
    DEFAULT_MAX_RECORD_BYTES,
    MAX_RECORD_DEPTH,
    UNREADABLE_OUTPUT,
    FramingError,
    RecordDecoder,
    UnreadableKind,
    decode_record,
    encode_record,
    js_json_dumps,
)

__all__ = ["DEFAULT_MAX_RECORD_BYTES", "MAX_RECORD_DEPTH", "UNREADABLE_OUTPUT", "FramingError", "RecordDecoder",
           "UnreadableKind", "decode_record", "encode_record", "js_json_dumps"]


def __dir__() -> list[str]:
    return sorted(__all__)
