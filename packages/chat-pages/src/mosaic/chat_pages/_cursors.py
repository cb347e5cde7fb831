"""Cursors: what a cursor binds, its CHAT-01 record, and the in-memory store (seed README "Snapshots,
epochs, cursors").

"Cursors live in memory, with an LRU cap (1000) and a 10-minute TTL"; each is single use and bound to
actor, purpose, conversation, branch, snapshot, epoch and expiry. The store is pure: it reads no clock
and does no I/O. Every operation that depends on time takes `now`, seconds since the epoch from the
reader's clock (the project's one clock convention), so the TTL is tested on an injected clock.
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ._jsonout import iso_time
from ._refusal import ReaderRefusal

# What the public modules show of this module; the rest is the package's own.
__all__ = ["CURSOR_CAP", "CURSOR_TTL_SECONDS", "HISTORY", "LOCAL_OPERATOR"]

#: The only actor on the unauthenticated loopback route, and the only purpose (seed "API").
LOCAL_OPERATOR = "local-operator"
HISTORY = "history"

#: Seed "Snapshots, epochs, cursors": cursors live in memory, with an LRU cap (1000) and a 10-minute TTL.
CURSOR_CAP = 1000
CURSOR_TTL_SECONDS = 600.0


@dataclass
class Cursor:
    """One cursor: its bindings (what `next` must name), the snapshot it pins and where it stands."""

    id: str
    kind: str  # "page" or "follow"
    actor: str
    purpose: str
    conversation: str
    branch: str
    project_root: str
    seat: str
    name: str
    dev: int
    ino: int
    length: int
    digest: str
    epoch: str
    incomplete: bool
    expires: float
    position: tuple[int, int] = (0, 0)
    served: int = 0
    served_digest: str = ""
    # SHA-256 state over "id@line" of the first `hashed` items of the branch (see _follow.items_digest),
    # carried from page to page so the digest a follow cursor keeps costs only the items of each page.
    hasher: Any = None
    hashed: int = 0
    # A Claude transcript's receipt that named its session (`_claude.Receipted.receipt`): read alone at a next.
    receipt: str = ""

    def record(self) -> dict[str, Any]:
        """The CHAT-01 cursor record the caller sees (the position stays here)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "conversation": self.conversation,
            "branch": self.branch,
            "actor": self.actor,
            "purpose": self.purpose,
            "snapshotDigest": self.digest,
            "sourceEpoch": self.epoch,
            "expiresAt": iso_time(self.expires),
        }


class CursorStore:
    """The reader's cursors, least recently issued or used first. Thread-safe: each method holds the
    store's own lock for its few dictionary operations (the reader parses outside it)."""

    def __init__(self, cap: int = CURSOR_CAP, ttl: float = CURSOR_TTL_SECONDS) -> None:
        self._cap = cap
        self._ttl = ttl
        self._cursors: OrderedDict[str, Cursor] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._cursors)

    def issue(self, base: Cursor, kind: str, now: float, **extra: Any) -> Cursor:
        """A new cursor of `kind`: `base`'s bindings with a fresh random id, expiring `ttl` seconds after
        `now`, and `extra` fields. Evicts the least recently issued cursors beyond the cap (LRU)."""
        c = Cursor(**{**base.__dict__, "id": "c-" + secrets.token_hex(16), "kind": kind,
                      "expires": now + self._ttl, **extra})
        with self._lock:
            self._cursors[c.id] = c
            while len(self._cursors) > self._cap:
                self._cursors.popitem(last=False)  # LRU: the least recently issued or used goes first
        return c

    def take(self, cursor: object, conversation: object, branch: object, actor: object, purpose: object,
             now: float) -> Cursor:
        """The cursor named `cursor`, when the call names its bindings and it has not expired at `now`.

        It stays held: the caller drops it once it is used (`drop`). Raises ReaderRefusal cursor-unknown
        (never issued, already used or evicted), cursor-expired (and forgets it), or cursor-foreign when
        any binding differs; a foreign attempt does not consume the cursor, so the old view keeps working.
        """
        with self._lock:
            c = self._cursors.get(cursor) if isinstance(cursor, str) else None
            if c is None:
                raise ReaderRefusal("cursor-unknown", "no such cursor (never issued, already used, or evicted)")
            if now >= c.expires:
                del self._cursors[c.id]
                raise ReaderRefusal("cursor-expired", "the cursor expired; open the conversation again")
        if (actor, purpose, conversation, branch) != (c.actor, c.purpose, c.conversation, c.branch):
            # A foreign attempt does not consume the cursor, so the old view keeps working.
            raise ReaderRefusal("cursor-foreign", "the cursor is bound to another conversation, branch or caller")
        return c

    def drop(self, c: Cursor) -> None:
        """Forget `c` (used, or its snapshot was replaced). Dropping it twice is harmless."""
        with self._lock:
            self._cursors.pop(c.id, None)
