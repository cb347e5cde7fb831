"""The controller's socket server: the asyncio shell that moves JSON-RPC lines between clients and the core
(`SocketServer`), its bounds (`ServerLimits`), where its socket may live (`SocketPathError`, `socket_state`),
who connected (`read_peer`), and what a connection holds (`ConnectionStats`, `Placeholder`). The rules are
at the top of `_socket_server.py`."""

from __future__ import annotations

from ._connection import (
    TRANSPORT_HIGH_WATER,
    TRANSPORT_LOW_WATER,
    WRITE_BATCH,
    ConnectionStats,
    Placeholder,
)
from ._limits import ServerLimits
from ._socket import SocketPathError, read_peer, socket_state
from ._socket_server import SocketServer

__all__ = [
    "TRANSPORT_HIGH_WATER",
    "TRANSPORT_LOW_WATER",
    "WRITE_BATCH",
    "ConnectionStats",
    "Placeholder",
    "ServerLimits",
    "SocketPathError",
    "SocketServer",
    "read_peer",
    "socket_state",
]


def __dir__() -> list[str]:
    return list(__all__)
