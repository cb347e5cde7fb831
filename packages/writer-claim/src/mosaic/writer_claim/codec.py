"""A revision's bytes: the strict canonical JSON codec (`encode_revision`, `decode_revision`), the record
formats and their bound (`MAX_REVISION_BYTES`); a record that does not decode raises `RecordError`."""

from __future__ import annotations

from ._codec import (
    FORMAT,
    FORMAT_ELIGIBILITY,
    FORMAT_ENGINE_UID,
    MAX_REVISION_BYTES,
    RecordError,
    decode_revision,
    encode_revision,
    revision_to_json,
)

__all__ = [
    "FORMAT",
    "FORMAT_ELIGIBILITY",
    "FORMAT_ENGINE_UID",
    "MAX_REVISION_BYTES",
    "RecordError",
    "decode_revision",
    "encode_revision",
    "revision_to_json",
]


def __dir__() -> list[str]:
    return list(__all__)
