"""Follow: a fresh snapshot, and only the parts appended to the cursor's branch since its own (seed README,
"Follow").

"Calling next with [a follow cursor] takes a fresh snapshot and returns only what was appended since." The
old prefix is verified first by the reader (always read back: compared with the cached snapshot's bytes,
or hashed); here the appended bytes are hashed on top of a copy of the old snapshot's hash state, the
fresh snapshot is taken (continued in place with the format's parse_appended when the cursor's snapshot is
still cached, else parsed whole), and the same branch is read in it. The earlier items must be unchanged,
else the follow refuses source-replaced.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from mosaic.safe_open import Refusal

from ._cursors import Cursor, CursorStore
from ._refusal import ReaderRefusal
from ._snapshots import PartCache, Snap, SnapKey, SnapshotCache, gc_paused, part_budget


def items_digest(keys: Iterable[bytes]) -> str:
    """The digest a follow cursor keeps of the parts before it: SHA-256 over the key of each item
    (`_parts.item_key`: "id@line").

    Seed "Follow" compares "a digest of entry ids"; the line is added so that a duplicate id that replaces
    an entry (the winner stands at its own, later line) changes the digest too, and a run's last line so
    that a run of unreadable lines that grew changes it (`item_key`). The reader's pages build
    the same digest item by item (Reader._page), so a follow never walks the whole branch.
    """
    h = hashlib.sha256()
    for key in keys:
        h.update(key)
    return h.hexdigest()


def follow(c: Cursor, key: SnapKey, hasher: Any, prefix: bytes | None, old: Snap | None, tail: bytes,
           project: str, snaps: SnapshotCache, cursors: CursorStore) -> tuple[Cursor, Snap, tuple[int, int]]:
    """Take the fresh snapshot for the follow cursor `c` and check its branch; returns what to page from:
    the base of the next cursors (bound like `c`, pinned to the fresh snapshot), the snapshot, and the
    position of the first appended item.

    `key` is `c`'s snapshot, just verified against the file, `hasher` a SHA-256 state over it (this call's
    own: it is extended here), `old` that snapshot when it is cached under `project`, else `prefix` its
    bytes, and `tail` everything after it in the file now. Only
    complete lines of `tail` join the snapshot; a partial last line sets `incomplete`. Drops `c` when it
    returns and when it refuses source-replaced. Raises ReaderRefusal source-replaced when the branch is gone or its earlier items changed (a
    duplicate id replacing an entry, a missing parent that turned up), and the format's refusal codes when
    the new snapshot is refused (pi-format's when it must be parsed whole; claude-format's when an appended
    entry is of another version).
    """
    assert hasher is not None  # a follow always reads the old prefix back (never the stat shortcut)
    cut = tail.rfind(b"\n") + 1
    appended = tail[:cut]
    hasher.update(appended)
    digest = hasher.hexdigest()
    length = c.length + cut
    incomplete = cut < len(tail)
    old_key = (*key, project)
    new_key = (c.dev, c.ino, length, digest)
    snap = _fresh_snapshot(key, new_key, hasher, prefix, old, appended, project, snaps)
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
            digest_now = _served_digest(snap, c.branch, c.served)
        if digest_now != c.served_digest:
            cursors.drop(c)
            raise ReaderRefusal("source-replaced", f"the earlier parts of branch {c.branch!r} changed")
    cursors.drop(c)
    base = Cursor(
        id="", kind="page", actor=c.actor, purpose=c.purpose, conversation=c.conversation, branch=c.branch,
        project_root=c.project_root, seat=c.seat, name=c.name, dev=c.dev, ino=c.ino, length=length,
        digest=digest, epoch=c.epoch, incomplete=incomplete, expires=0.0, hasher=c.hasher, hashed=c.served,
        receipt=c.receipt,
    )
    return base, snap, (c.served, 0)


def _served_digest(snap: Snap, branch: str, served: int) -> str:
    """`items_digest` of the first `served` items of `branch` in `snap`, item by item (kept parts give their
    keys; the others are rendered and dropped), never holding the branch's items."""
    return items_digest(snap.key_at(branch, i) for i in range(served))


def _fresh_snapshot(key: SnapKey, new_key: SnapKey, hasher: Any, prefix: bytes | None, old: Snap | None,
                    appended: bytes, project: str, snaps: SnapshotCache) -> Snap:
    """The snapshot `new_key` (`key`'s bytes plus `appended`; `hasher` is SHA-256 over them): from the cache,
    else continued from the cursor's snapshot `old` with parse_appended (which equals a full parse), else
    `prefix + appended` parsed whole (`prefix` is then not None: the reader kept the bytes because `key` was
    not cached)."""
    snap = snaps.get(new_key, project)
    if snap is not None:
        return snap
    if old is not None:
        # The cursor's snapshot is cached and its prefix was just verified: parse only the appended
        # complete lines on top of it (pi-format's parse_appended equals a full parse).
        with gc_paused():
            grown = snaps.fmt.parse_appended(old.parsed, appended)
        if isinstance(grown, Refusal):  # claude-format: an appended entry of another version
            raise ReaderRefusal(grown.code, grown.message)
        pieces = (*old.pieces, appended) if appended else old.pieces
        if grown.extends_previous:
            # Same entries, same items, the same refs: the kept parts carry over.
            return snaps.store(new_key, project, Snap(grown, pieces, hasher, (*key, project), old.parts))
        return snaps.store(new_key, project, Snap(grown, pieces, hasher, parts=PartCache(part_budget(new_key[2]))))
    assert prefix is not None  # kept because the snapshot was not cached
    snap = snaps.get_or_parse(new_key, prefix + appended, project, hasher)
    assert snap is not None
    return snap
