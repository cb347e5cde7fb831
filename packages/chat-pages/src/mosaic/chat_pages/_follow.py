"""Follow: a fresh snapshot, and only the parts appended to the cursor's branch since its own (seed README,
"Follow").

"Calling next with [a follow cursor] takes a fresh snapshot and returns only what was appended since." The
old prefix is verified first (by the reader, always hashed); here the appended bytes are hashed on top of
that hash state, the fresh snapshot is taken (continued in place with pi-format's parse_appended when the
cursor's snapshot is still cached, else parsed whole), and the same branch is read in it. The earlier
items must be unchanged, else the follow refuses source-replaced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import mosaic.pi_format as pi_format

if TYPE_CHECKING:
    from mosaic.pi_format import Item

from ._cursors import Cursor, CursorStore
from ._refusal import ReaderRefusal
from ._snapshots import Snap, SnapKey, SnapshotCache, gc_paused


def item_key(item: Item) -> bytes:
    """What the follow digest takes of one item: "id@line", and for a run of unreadable lines (one
    malformed-line notice) "id@line-through", so a run that grew at the end of the file changes it."""
    notice = item.notice
    if notice is not None and notice.through is not None and notice.through != item.line:
        return f"{item.id}@{item.line}-{notice.through}\n".encode()
    return f"{item.id}@{item.line}\n".encode()


def items_digest(items: Iterable[Item]) -> str:
    """The digest a follow cursor keeps of the parts before it: SHA-256 over "id@line" of each item.

    Seed "Follow" compares "a digest of entry ids"; the line is added so that a duplicate id that replaces
    an entry (the winner stands at its own, later line) changes the digest too, and a run's last line so
    that a run of unreadable lines that grew changes it (`item_key`). The reader's pages build
    the same digest item by item (Reader._page), so a follow never walks the whole branch.
    """
    h = hashlib.sha256()
    for item in items:
        h.update(item_key(item))
    return h.hexdigest()


def follow(c: Cursor, key: SnapKey, hasher: Any, prefix: bytes | None, tail: bytes, project: str,
           snaps: SnapshotCache, cursors: CursorStore) -> tuple[Cursor, Snap, tuple[int, int]]:
    """Take the fresh snapshot for the follow cursor `c` and check its branch; returns what to page from:
    the base of the next cursors (bound like `c`, pinned to the fresh snapshot), the snapshot, and the
    position of the first appended item.

    `key` is `c`'s snapshot, just verified against the file, `hasher` the SHA-256 state over it, `prefix`
    its bytes (None when it is cached under `project`), and `tail` everything after it in the file now. Only
    complete lines of `tail` join the snapshot; a partial last line sets `incomplete`. Drops `c` when it
    returns and when it refuses source-replaced. Raises ReaderRefusal source-replaced when the branch is gone or its earlier items changed (a
    duplicate id replacing an entry, a missing parent that turned up), and pi-format's refusal codes when
    the new snapshot must be parsed whole and is refused.
    """
    assert hasher is not None  # follows always hash the old prefix
    cut = tail.rfind(b"\n") + 1
    appended = tail[:cut]
    hasher.update(appended)
    digest = hasher.hexdigest()
    length = c.length + cut
    incomplete = cut < len(tail)
    old_key = (*key, project)
    new_key = (c.dev, c.ino, length, digest)
    snap = _fresh_snapshot(key, new_key, prefix, appended, project, snaps)
    branch = snap.parsed.branches.get(c.branch)
    if branch is None:
        cursors.drop(c)
        raise ReaderRefusal("source-replaced", f"branch {c.branch!r} is gone from the session file")
    if branch.item_count < c.served:
        cursors.drop(c)
        raise ReaderRefusal("source-replaced", f"the earlier parts of branch {c.branch!r} changed")
    # The earlier parts are compared unless the new snapshot is the cursor's own (nothing appended) or
    # was continued from it in place, where pi-format guarantees they are unchanged.
    if new_key != key and snap.grown_from != old_key:
        with gc_paused():
            items = branch.items
        if items_digest(items[: c.served]) != c.served_digest:
            cursors.drop(c)
            raise ReaderRefusal("source-replaced", f"the earlier parts of branch {c.branch!r} changed")
    cursors.drop(c)
    base = Cursor(
        id="", kind="page", actor=c.actor, purpose=c.purpose, conversation=c.conversation, branch=c.branch,
        project_root=c.project_root, seat=c.seat, name=c.name, dev=c.dev, ino=c.ino, length=length,
        digest=digest, epoch=c.epoch, incomplete=incomplete, expires=0.0, hasher=c.hasher, hashed=c.served,
    )
    return base, snap, (c.served, 0)


def _fresh_snapshot(key: SnapKey, new_key: SnapKey, prefix: bytes | None, appended: bytes, project: str,
                    snaps: SnapshotCache) -> Snap:
    """The snapshot `new_key` (`key`'s bytes plus `appended`): from the cache, else continued from the
    cached snapshot `key` with parse_appended (which equals a full parse), else `prefix + appended` parsed
    whole (`prefix` is then not None: the reader kept the bytes because `key` was not cached)."""
    snap = snaps.get_or_parse(new_key, None, project)
    if snap is not None:
        return snap
    old = snaps.peek(key, project)
    if old is not None:
        # The cursor's snapshot is cached and its prefix was just verified: parse only the appended
        # complete lines on top of it (pi-format's parse_appended equals a full parse).
        with gc_paused():
            grown = pi_format.parse_appended(old.parsed, appended)
        if grown.extends_previous:
            # Same entries, same items: the rendered parts (keyed by item id) carry over.
            return snaps.store(new_key, project, Snap(grown, (*key, project), old.parts))
        return snaps.store(new_key, project, Snap(grown))
    assert prefix is not None  # kept because the snapshot was not cached
    snap = snaps.get_or_parse(new_key, prefix + appended, project)
    assert snap is not None
    return snap
