"""The bounds that keep one controller alive under any set of clients (`_socket_server.py`'s memory and deadline
rules): connections, backlog, line, outbox, deadlines. Every field is checked at construction."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KiB", "MiB", "ServerLimits"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class ServerLimits:
    """The bounds that keep one controller alive under any set of clients. All sizes are bytes, all times
    seconds of the server's clock. Every field must be positive; `__post_init__` raises `ValueError`."""

    max_connections: int = 256
    """Connections served at once (closing ones still count until they are gone). A client past the
    bound reads one ``closing`` notification with reason "too-many-connections" and is closed at once:
    never silently dropped, never given a connection id, never seen by the core. 256 is far above the
    few clients one conversation has (a terminal, the WebUI bridge, tools) and far below the fd limit.
    Of the bound, `connections_per_uid`, `owner_reserve` and `force_stop_reserve` say who may take what."""

    per_uid: int | None = None
    """Connections one uid other than the owner may hold at once (`connections_per_uid`; None: an eighth of
    `max_connections`, at least 1: 32 of 256). A neighbour with a grant cannot hold the bound (issue 28 item
    2): past its share it reads ``closing`` "too-many-connections" with a message naming its uid and share."""

    owner_reserve: int | None = None
    """The last slots of the bound, which only the owner (the controller's own uid) takes (None: a
    sixteenth of `max_connections`: 16 of 256). The owner has no per-uid share: its reconnect, a second
    terminal and the client that would force stop a runaway engine always find room."""

    force_stop_reserve: int | None = None
    """The slots below the owner's reserve that only the owner and uids granted `force-stop` take (None: a
    sixteenth of `max_connections`: 16 of 256). Everyone else shares what is below both reserves (224 of
    256), each uid within its share."""

    backlog: int = 1024
    """The listen(2) backlog: connections the kernel holds before accept. 1024 holds a burst of 1,000
    connects (the brief's load check). The kernel caps it at ``net.core.somaxconn`` (4096 on recent
    Linux; a smaller value there lowers it silently)."""

    max_line_bytes: int = 2 * MiB
    """Longest request line (without LF and one CR). A prompt may hold 262,144 characters (UTF-16 units);
    escaped as ``\\uXXXX`` each is at most 6 bytes, 1.5 MiB, plus the envelope: 2 MiB fits any valid
    prompt. A longer line gets a LINE_TOO_LONG error (id null) and the connection is closed with reason
    "line-too-long" as soon as the buffered tail passes the cap, never after buffering the whole line."""

    request_timeout: float = 10.0
    """The slowloris bound: a request line must be completed within this many seconds of its first byte,
    or the connection is closed with "slow-request". (Time the server itself stopped reading, for
    backpressure, does not count.) 10 s is ages for a local socket, even for a 2 MiB line."""

    idle_timeout: float = 300.0
    """A connection with no complete well-formed request (``ping`` included) for this long is closed with
    "idle". The client library pings well inside it, so only abandoned connections reach it."""

    max_outbox_bytes: int = 4 * MiB
    """Per-connection bound on bytes queued and not yet handed to the transport. Past it, the queued
    NOTIFICATIONS are dropped and replaced by one ``marker`` notification
    ``{"reason": "lagging", "dropped": n}`` at the place of the first one dropped; until that marker is
    written, every further notification is dropped and counted in it, so the client sees exactly where
    its stream has a gap and re-reads. Replies are never dropped: when a reply (or a placeholder's fill)
    comes while the outbox is past the cap even after the drop, the connection is closed with
    "not-reading" (its outbox discarded). 4 MiB is thousands of events; one history page (up to 8 MiB,
    chat-pages MAX_PAGE_BYTES) is still accepted, since a reply only needs the outbox within the cap
    before it."""

    max_consecutive_errors: int = 8
    """Malformed requests in a row (any JSON-RPC error the server answers itself) before the connection
    is closed with "garbage", after the last error is answered. A well-formed request resets the count.
    A buggy client learns from the first error; a stream of noise is cut off early."""

    close_linger: float = 5.0
    """How long a connection being closed (or half-closed by the client's EOF) may take to drain what is
    queued for it and hang up, before it is aborted (rule 6). Bounds the memory and the descriptor of a
    closing client that does not read, and `SocketServer.aclose`'s wait for each client."""

    def __post_init__(self) -> None:
        for name in ("max_connections", "backlog", "max_line_bytes", "max_outbox_bytes",
                     "max_consecutive_errors"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ServerLimits.{name} must be a positive integer, not {value!r}")
        for name, least in (("per_uid", 1), ("owner_reserve", 0), ("force_stop_reserve", 0)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
                raise ValueError(f"ServerLimits.{name} must be None or an integer of at least {least}, not {value!r}")
        if self.owner_reserved + self.force_stop_reserved >= self.max_connections:
            raise ValueError(f"ServerLimits: the reserves ({self.owner_reserved} + {self.force_stop_reserved}) "
                             f"must leave room below max_connections ({self.max_connections})")
        for name in ("request_timeout", "idle_timeout", "close_linger"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"ServerLimits.{name} must be a positive number of seconds, not {value!r}")

    @property
    def connections_per_uid(self) -> int:
        """The share of one uid other than the owner (`per_uid`, or its default)."""
        return self.per_uid if self.per_uid is not None else max(1, self.max_connections // 8)

    @property
    def owner_reserved(self) -> int:
        """The slots only the owner takes (`owner_reserve`, or its default)."""
        return self.owner_reserve if self.owner_reserve is not None else self.max_connections // 16

    @property
    def force_stop_reserved(self) -> int:
        """The slots only the owner and uids granted force-stop take (`force_stop_reserve`, or its default)."""
        return self.force_stop_reserve if self.force_stop_reserve is not None else self.max_connections // 16

    def bound_for(self, standing: str) -> int:
        """How many connections may be served at once when one of `standing` ("owner", "force-stop" or
        "other") connects: the whole bound for the owner, less the owner's reserve for a force-stop grantee,
        less both reserves for anyone else."""
        if standing == "owner":
            return self.max_connections
        if standing == "force-stop":
            return self.max_connections - self.owner_reserved
        return self.max_connections - self.owner_reserved - self.force_stop_reserved

    @property
    def read_pause_bytes(self) -> int:
        """Replies waiting in a connection's outbox above which its requests wait (backpressure)."""
        return max(1, min(256 * KiB, self.max_outbox_bytes // 2))
