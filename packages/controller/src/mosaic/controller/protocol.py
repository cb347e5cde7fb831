"""The socket protocol as data: its methods and their params (`PARAMS`, `ENUMS`, `RANGES`; the CHAT-01
commands it refuses `unsupported-capability`, `UNVERIFIED_METHODS`), its error codes
(`ERROR_CODES` and each code), the notifications and the reasons a connection is closed (`CLOSE_REASONS`),
and the sans-io wire format: one request line in, a `ParsedRequest` or a `RequestError` out (`parse_line`);
an answer or a notification out (`encode_result`, `encode_error`, `encode_notification`)."""

from __future__ import annotations

from mosaic.controller_client import (
    CLOSE_REASONS,
    ENUMS,
    ERROR_CODES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LINE_TOO_LONG,
    METHOD_NOT_FOUND,
    NOTIFICATIONS,
    PARAMS,
    PARSE_ERROR,
    RANGES,
    REFUSED,
    UNVERIFIED_METHODS,
)

from .server._jsonrpc import (
    ParsedRequest,
    RequestError,
    encode_error,
    encode_notification,
    encode_result,
    parse_line,
)

__all__ = [
    "CLOSE_REASONS",
    "ENUMS",
    "ERROR_CODES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "LINE_TOO_LONG",
    "METHOD_NOT_FOUND",
    "NOTIFICATIONS",
    "PARAMS",
    "PARSE_ERROR",
    "RANGES",
    "REFUSED",
    "UNVERIFIED_METHODS",
    "ParsedRequest",
    "RequestError",
    "encode_error",
    "encode_notification",
    "encode_result",
    "parse_line",
]


def __dir__() -> list[str]:
    return list(__all__)
