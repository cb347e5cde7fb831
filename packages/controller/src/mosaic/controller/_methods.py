"""The socket protocol's method table, as the controller's core and server import it: the one table is
mosaic-controller-client's (`mosaic.controller_client`, its `_protocol.py`), shared with every client, so
the server validates exactly what the client library sends (issue 31: the client installs alone)."""

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

__all__ = ["CLOSE_REASONS", "ENUMS", "ERROR_CODES", "INTERNAL_ERROR", "INVALID_PARAMS", "INVALID_REQUEST",
           "LINE_TOO_LONG", "METHOD_NOT_FOUND", "NOTIFICATIONS", "PARAMS", "PARSE_ERROR", "RANGES", "REFUSED",
           "UNVERIFIED_METHODS"]
