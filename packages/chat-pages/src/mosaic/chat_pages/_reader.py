"""The reader: catalogue, open, next (pages and follows), cursors, snapshots and epochs.

Seed README, "Snapshots, epochs, cursors" and "Follow". Every call resolves the conversation by listing
the approved roots again (no path comes from the caller), opens files only through safe-open, and never
writes. The public methods never raise for bad input: they return {"ok": False, "refusal": {...}}.
"""

from __future__ import annotations

import gc
import hashlib
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mosaic.pi_format import FormatRefusal, Parsed, parse, parse_appended
from mosaic.safe_open import (
    MAX_SESSION_FILE_BYTES,
    Method,
    OpenedFile,
    Root,
    SafeOpenRefusal,
    is_session_name,
    open_root,
)

from ._jsonout import json_size
from ._parts import paginate, sized_parts
from ._refusal import ReaderRefusal
from ._sources import Roots, SessionRoot, UnsupportedRoot, conversation_id

#: The only actor on the unauthenticated loopback route, and the only purpose (seed "API").
LOCAL_OPERATOR = "local-operator"
HISTORY = "history"

#: Seed "Snapshots, epochs, cursors": cursors live in memory, with an LRU cap (1000) and a 10-minute TTL.
CURSOR_CAP = 1000
CURSOR_TTL_SECONDS = 600.0
#: Seed "Costs": a parse cache and a branch-entries cache, two snapshots each.
SNAPSHOT_CACHE = 2

_CHUNK = 1 << 20
#: A file whose ctime is within this much of a verification's start is "racy" and always hashed again:
#: well over one coarse kernel timestamp tick (at most 10 ms at HZ=100).
RACY_NS = 100_000_000
_HEADER_MAX = 1 << 20
_CURSOR_PLACEHOLDER = "c-" + "0" * 32
#: Items are taken from pi-format in chunks of this many (one page holds at most 100 parts).
_ITEM_CHUNK = 128


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a snapshot is parsed and rendered (decision).

    Parsing 18.6 MB allocates millions of small objects that are all still alive; each collection the
    allocations trigger walks all of them again, which more than doubled the parse time here (README,
    "Benchmark"). Nothing is leaked: reference counting frees as usual, the collector is only deferred,
    and it is re-enabled (if it was enabled) even when parsing raises.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def source_epoch(dev: int, ino: int, digest: str) -> str:
    """sourceEpoch: e- plus 40 hex of SHA-256 over "dev:ino:snapshotDigest" at open (seed "Snapshots")."""
    return "e-" + hashlib.sha256(f"{dev}:{ino}:{digest}".encode()).hexdigest()[:40]


def items_digest(items: Any) -> str:
    """The digest a follow cursor keeps of the parts before it: SHA-256 over "id@line" of each item.

    Seed "Follow" compares "a digest of entry ids"; the line is added so that a duplicate id that replaces
    an entry (the winner stands at its own, later line) changes the digest too.
    """
    h = hashlib.sha256()
    for item in items:
        h.update(f"{item.id}@{item.line}\n".encode())
    return h.hexdigest()


@dataclass
class _Snap:
    """One parsed snapshot and its rendered parts (the parse and branch-entries caches)."""

    parsed: Parsed
    # The snapshot key this one was continued from in place (pi-format's parse_appended with
    # extends_previous): every branch of that snapshot is, item for item, the start of the same branch here.
    grown_from: tuple[int, int, int, str, str] | None = None
    # Keyed by item id: an item's parts do not depend on the branch, and branches share their prefixes.
    parts: dict[str, list[tuple[dict[str, Any], int]]] = field(default_factory=dict)

    # (branch, chunk number) -> that chunk of the branch's items, rendered on demand (pi-format's
    # Branch.items_from), so a page renders about the items it shows, not the whole branch.
    chunks: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)

    def item_at(self, branch: str, i: int) -> Any:
        key = (branch, i // _ITEM_CHUNK)
        chunk = self.chunks.get(key)
        if chunk is None:
            chunk = self.parsed.branches[branch].items_from(key[1] * _ITEM_CHUNK, _ITEM_CHUNK)
            self.chunks[key] = chunk
        return chunk[i % _ITEM_CHUNK]

    def parts_of(self, branch: str) -> Callable[[int], list[tuple[dict[str, Any], int]]]:
        def get(i: int) -> list[tuple[dict[str, Any], int]]:
            item = self.item_at(branch, i)
            got = self.parts.get(item.id)
            if got is None:
                got = sized_parts(item)
                self.parts[item.id] = got
            return got

        return get


@dataclass
class _Cursor:
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
    # SHA-256 state over "id@line" of the first `hashed` items of the branch (see items_digest), carried from
    # page to page so the digest a follow cursor keeps costs only the items of each page.
    hasher: Any = None
    hashed: int = 0

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
            "expiresAt": _iso(self.expires),
        }


@dataclass
class _Loc:
    root: SessionRoot
    name: str
    conversation: str


class Reader:
    """Read-only paged views of approved Pi session files. Thread-safe (one lock per reader).

    `roots` is called on every operation and must return `Roots` (use `roots_from_specs`). `clock`
    returns seconds since the epoch; it stamps generatedAt and cursor expiry, and tests inject it.
    `fs_clock_ns` is the wall clock the re-verification shortcut compares file ctimes with (see
    `_still_verified`); it must be the real clock in production.
    """

    def __init__(
        self,
        roots: Callable[[], Roots],
        *,
        clock: Callable[[], float] = time.time,
        method: Method = "auto",
        cursor_cap: int = CURSOR_CAP,
        cursor_ttl: float = CURSOR_TTL_SECONDS,
        fs_clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._roots = roots
        self._clock = clock
        self._method: Method = method
        self._cap = cursor_cap
        self._ttl = cursor_ttl
        self._lock = threading.RLock()
        self._cursors: OrderedDict[str, _Cursor] = OrderedDict()
        # Keyed by (dev, ino, length, digest, project): the header cwd was checked against that project, so
        # the same bytes reached through another approved project (a hard link) are parsed and checked again.
        self._snaps: OrderedDict[tuple[int, int, int, str, str], _Snap] = OrderedDict()
        self._verified: OrderedDict[tuple[int, int, int, str], tuple[int, int, int, int, int]] = OrderedDict()
        self._fs_clock_ns = fs_clock_ns
        #: How often a next re-hashed the pinned prefix, and how often the stat shortcut skipped it.
        self.verify_counts = {"hashed": 0, "skipped": 0}

    # -- public API ----------------------------------------------------------------------------------

    def catalogue(self) -> dict[str, Any]:
        """{"ok": True, "conversations": [rows], "refusedRoots": [...], "generatedAt": ISO time}.

        One row per *.jsonl in each approved root (its header read for sessionId, createdAt and
        engineStartedAt; a file whose header or open is refused carries `refusal`), one row per unsupported
        seat (its directory never read), and each root that cannot be listed in refusedRoots.
        """
        with self._lock:
            roots = self._roots()
            rows: list[dict[str, Any]] = []
            refused: list[dict[str, Any]] = []
            for spec in roots.refused:
                refused.append({"projectRoot": spec.project_root, "project": None, "seat": spec.seat,
                                "refusal": spec.refusal.to_dict()})
            for sroot in roots.sessions:
                try:
                    with open_root(sroot.project_root, method=self._method) as root:
                        names = sorted(n for n in root.listdir(sroot.sessions_rel) if is_session_name(n))
                        for name in names:
                            rows.append(self._catalogue_row(root, sroot, name))
                except SafeOpenRefusal as e:
                    refused.append({"projectRoot": sroot.project_root, "project": sroot.project,
                                    "seat": sroot.seat, "refusal": ReaderRefusal(e.code, e.message).to_dict()})
            for u in roots.unsupported:
                rows.append(_unsupported_row(u))
            return {"ok": True, "conversations": rows, "refusedRoots": refused, "generatedAt": _iso(self._clock())}

    def open(
        self,
        *,
        conversation: object,
        branch: object = None,
        actor: object = LOCAL_OPERATOR,
        purpose: object = HISTORY,
    ) -> dict[str, Any]:
        """The first page of `branch` (None: Pi's default branch) in a fresh snapshot of the conversation.

        Returns {"ok": True, "page", "cursor", "follow", "view"} or {"ok": False, "refusal"}.
        """
        with self._lock:
            try:
                return self._open(conversation, branch, actor, purpose)
            except ReaderRefusal as r:
                return {"ok": False, "refusal": r.to_dict()}

    def next(
        self,
        *,
        cursor: object,
        conversation: object,
        branch: object,
        actor: object = LOCAL_OPERATOR,
        purpose: object = HISTORY,
    ) -> dict[str, Any]:
        """The next page of a page cursor (same snapshot, prefix re-verified), or a follow: only the parts
        appended to the cursor's branch since its snapshot. Same return shape as `open`.
        """
        with self._lock:
            try:
                return self._next(cursor, conversation, branch, actor, purpose)
            except ReaderRefusal as r:
                return {"ok": False, "refusal": r.to_dict()}

    def cursor_count(self) -> int:
        """How many cursors are held (for tests and diagnostics)."""
        with self._lock:
            return len(self._cursors)

    # -- resolution --------------------------------------------------------------------------------------

    @staticmethod
    def _check_caller(actor: object, purpose: object) -> None:
        if actor != LOCAL_OPERATOR:
            raise ReaderRefusal("unknown-actor", f"actor {actor!r} is not {LOCAL_OPERATOR}")
        if purpose != HISTORY:
            raise ReaderRefusal("unsupported-purpose", f"purpose {purpose!r} is not {HISTORY}")

    @contextmanager
    def _resolve(self, conversation: object, hint: tuple[str, str] | None = None) -> Iterator[tuple[_Loc, Root]]:
        """Find the conversation by listing the approved roots again; yields it with its open root.

        Refuses unknown-conversation when no approved root lists it now, unsupported-harness for the row of
        a non-Pi seat, and the listing refusal of the cursor's own root (`hint`) when that root cannot be
        listed (e.g. unavailable).
        """
        if not isinstance(conversation, str) or not conversation.startswith("pi-"):
            raise ReaderRefusal("unknown-conversation", "no such conversation in the approved roots")
        roots = self._roots()
        for u in roots.unsupported:
            if conversation_id(u.project_root, u.seat, "") == conversation:
                raise ReaderRefusal("unsupported-harness", f"seat {u.seat} runs {u.harness!r}, not Pi (D2)")
        hint_refusal: SafeOpenRefusal | None = None
        for sroot in roots.sessions:
            try:
                root = open_root(sroot.project_root, method=self._method)
            except SafeOpenRefusal as e:
                if hint == (sroot.project_root, sroot.seat):
                    hint_refusal = e
                continue
            found: str | None = None
            try:
                for name in root.listdir(sroot.sessions_rel):
                    if is_session_name(name) and conversation_id(sroot.project_root, sroot.seat, name) == conversation:
                        found = name
                        break
            except SafeOpenRefusal as e:
                if hint == (sroot.project_root, sroot.seat):
                    hint_refusal = e
            if found is None:
                root.close()
                continue
            try:
                yield _Loc(sroot, found, conversation), root
            finally:
                root.close()
            return
        if hint_refusal is not None:
            raise ReaderRefusal(hint_refusal.code, hint_refusal.message)
        raise ReaderRefusal("unknown-conversation", "no such conversation in the approved roots now")

    @staticmethod
    def _open_file(root: Root, loc: _Loc) -> OpenedFile:
        try:
            return root.open_session_file(loc.root.sessions_rel, loc.name)
        except SafeOpenRefusal as e:
            raise ReaderRefusal(e.code, e.message) from None

    # -- snapshots -------------------------------------------------------------------------------------

    @staticmethod
    def _read_to_end(fd: int, offset: int) -> bytes:
        chunks: list[bytes] = []
        total = offset
        while True:
            chunk = os.pread(fd, _CHUNK, total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_SESSION_FILE_BYTES:
                raise ReaderRefusal("too-large", "the session file grew over 256 MiB while it was read")
        return b"".join(chunks)

    @staticmethod
    def _hash_prefix(fd: int, length: int, keep: bool) -> tuple[Any, bytes | None] | None:
        """SHA-256 of the first `length` bytes (and the bytes when `keep`), or None when the file is shorter."""
        h = hashlib.sha256()
        kept: list[bytes] = []
        buf = bytearray(min(_CHUNK, max(length, 1)))
        view = memoryview(buf)
        offset = 0
        while offset < length:
            want = min(len(buf), length - offset)
            got = os.preadv(fd, [view[:want]], offset)
            if got == 0:
                return None
            h.update(view[:got])
            if keep:
                kept.append(bytes(view[:got]))
            offset += got
        return h, (b"".join(kept) if keep else None)

    def _snap(self, file_key: tuple[int, int, int, str], data: bytes | None, project: str) -> _Snap | None:
        key = (*file_key, project)
        snap = self._snaps.get(key)
        if snap is not None:
            self._snaps.move_to_end(key)
            return snap
        if data is None:
            return None
        with _gc_paused():
            result = parse(data, project=project, realpath=os.path.realpath)
        if isinstance(result, FormatRefusal):
            raise ReaderRefusal(result.code, result.message)
        return self._store(file_key, project, _Snap(result))

    def _store(self, file_key: tuple[int, int, int, str], project: str, snap: _Snap) -> _Snap:
        self._snaps[(*file_key, project)] = snap
        while len(self._snaps) > SNAPSHOT_CACHE:
            self._snaps.popitem(last=False)
        return snap

    # -- open ------------------------------------------------------------------------------------------

    def _open(self, conversation: object, branch: object, actor: object, purpose: object) -> dict[str, Any]:
        self._check_caller(actor, purpose)
        if branch is not None and not isinstance(branch, str):
            raise ReaderRefusal("unknown-branch", "branch must be a branch name")
        with self._resolve(conversation) as (loc, root):
            with self._open_file(root, loc) as f:
                since = self._fs_clock_ns()
                st = os.fstat(f.fd)
                data = self._read_to_end(f.fd, 0)
                dev, ino = f.dev, f.ino
            project = root.path
        cut = data.rfind(b"\n") + 1
        snapshot = data if cut == len(data) else data[:cut]  # no copy in the common case
        incomplete = cut < len(data)
        if not snapshot:
            # No complete line yet: the header is still being written, or cannot become one.
            result = parse(data, project=project, realpath=os.path.realpath)
            assert isinstance(result, FormatRefusal)
            raise ReaderRefusal(result.code, result.message)
        digest = hashlib.sha256(snapshot).hexdigest()
        snap = self._snap((dev, ino, cut, digest), snapshot, project)
        assert snap is not None
        self._remember_verified((dev, ino, cut, digest), st, since)
        name = snap.parsed.default_branch if branch is None else branch
        if name not in snap.parsed.branches:
            raise ReaderRefusal("unknown-branch", f"{name!r} is not a branch of this conversation")
        base = _Cursor(
            id="", kind="page", actor=LOCAL_OPERATOR, purpose=HISTORY, conversation=loc.conversation,
            branch=name, project_root=loc.root.project_root, seat=loc.root.seat, name=loc.name,
            dev=dev, ino=ino, length=cut, digest=digest, epoch=source_epoch(dev, ino, digest),
            incomplete=incomplete, expires=0.0,
        )
        return self._page(base, snap, (0, 0))

    # -- next ------------------------------------------------------------------------------------------

    def _take(self, cursor: object, conversation: object, branch: object, actor: object, purpose: object) -> _Cursor:
        if not isinstance(cursor, str) or cursor not in self._cursors:
            raise ReaderRefusal("cursor-unknown", "no such cursor (never issued, already used, or evicted)")
        c = self._cursors[cursor]
        if self._clock() >= c.expires:
            del self._cursors[cursor]
            raise ReaderRefusal("cursor-expired", "the cursor expired; open the conversation again")
        if (actor, purpose, conversation, branch) != (c.actor, c.purpose, c.conversation, c.branch):
            # A foreign attempt does not consume the cursor, so the old view keeps working.
            raise ReaderRefusal("cursor-foreign", "the cursor is bound to another conversation, branch or caller")
        return c

    def _next(self, cursor: object, conversation: object, branch: object, actor: object, purpose: object) -> dict[str, Any]:
        self._check_caller(actor, purpose)
        c = self._take(cursor, conversation, branch, actor, purpose)
        with self._resolve(conversation, hint=(c.project_root, c.seat)) as (loc, root):
            if (loc.root.project_root, loc.root.seat, loc.name) != (c.project_root, c.seat, c.name):
                raise ReaderRefusal("unknown-conversation", "the conversation resolves elsewhere now")
            with self._open_file(root, loc) as f:
                if (f.dev, f.ino) != (c.dev, c.ino):
                    self._drop(c)
                    raise ReaderRefusal("source-replaced", "the session file was replaced (dev or ino changed)")
                if f.size < c.length:
                    self._drop(c)
                    raise ReaderRefusal("source-replaced", "the session file is shorter than the pinned snapshot")
                key = (c.dev, c.ino, c.length, c.digest)
                cached = (*key, root.path) in self._snaps
                if c.kind == "page" and cached and self._still_verified(key, f.fd):
                    hasher, prefix = None, None
                    self.verify_counts["skipped"] += 1
                else:
                    self.verify_counts["hashed"] += 1
                    # The bytes are kept only when the snapshot must be parsed again (it left the cache);
                    # a follow on a cached snapshot parses only the appended lines (parse_appended).
                    keep = not cached
                    since = self._fs_clock_ns()
                    st = os.fstat(f.fd)
                    hashed = self._hash_prefix(f.fd, c.length, keep)
                    if hashed is None:
                        self._drop(c)
                        raise ReaderRefusal("source-replaced", "the session file is shorter than the pinned snapshot")
                    hasher, prefix = hashed
                    if hasher.hexdigest() != c.digest:
                        self._drop(c)
                        raise ReaderRefusal("source-replaced", "the pinned prefix changed (rewritten in place)")
                    self._remember_verified(key, st, since)
                tail = self._read_to_end(f.fd, c.length) if c.kind == "follow" else b""
            project = root.path
        if c.kind == "page":
            snap = self._snap(key, prefix, project)
            assert snap is not None
            self._drop(c)
            return self._page(c, snap, c.position)
        return self._follow(c, key, hasher, prefix, tail, project)

    def _follow(self, c: _Cursor, key: tuple[int, int, int, str], hasher: Any, prefix: bytes | None,
                tail: bytes, project: str) -> dict[str, Any]:
        """Seed "Follow": the old prefix verified, take a fresh snapshot and read the same branch in it."""
        assert hasher is not None  # follows always hash the old prefix
        cut = tail.rfind(b"\n") + 1
        appended = tail[:cut]
        hasher.update(appended)
        digest = hasher.hexdigest()
        length = c.length + cut
        incomplete = cut < len(tail)
        old_key = (*key, project)
        new_key = (c.dev, c.ino, length, digest)
        snap = self._snap(new_key, None, project)
        if snap is None:
            old = self._snaps.get(old_key)
            if old is not None:
                # The cursor's snapshot is cached and its prefix was just verified: parse only the appended
                # complete lines on top of it (pi-format's parse_appended equals a full parse).
                with _gc_paused():
                    grown = parse_appended(old.parsed, appended)
                if grown.extends_previous:
                    # Same entries, same items: the rendered parts (keyed by item id) carry over.
                    snap = self._store(new_key, project, _Snap(grown, old_key, old.parts))
                else:
                    snap = self._store(new_key, project, _Snap(grown))
            else:
                assert prefix is not None  # kept because the snapshot was not cached
                snap = self._snap(new_key, prefix + appended, project)
                assert snap is not None
        branch = snap.parsed.branches.get(c.branch)
        if branch is None:
            self._drop(c)
            raise ReaderRefusal("source-replaced", f"branch {c.branch!r} is gone from the session file")
        if branch.item_count < c.served:
            self._drop(c)
            raise ReaderRefusal("source-replaced", f"the earlier parts of branch {c.branch!r} changed")
        # The earlier parts are compared unless the new snapshot is the cursor's own (nothing appended) or
        # was continued from it in place, where pi-format guarantees they are unchanged.
        if new_key != key and snap.grown_from != old_key:
            with _gc_paused():
                items = branch.items
            if items_digest(items[: c.served]) != c.served_digest:
                self._drop(c)
                raise ReaderRefusal("source-replaced", f"the earlier parts of branch {c.branch!r} changed")
        self._drop(c)
        base = _Cursor(
            id="", kind="page", actor=c.actor, purpose=c.purpose, conversation=c.conversation, branch=c.branch,
            project_root=c.project_root, seat=c.seat, name=c.name, dev=c.dev, ino=c.ino, length=length,
            digest=digest, epoch=c.epoch, incomplete=incomplete, expires=0.0, hasher=c.hasher, hashed=c.served,
        )
        return self._page(base, snap, (c.served, 0))

    # -- the re-verification shortcut ------------------------------------------------------------------
    #
    # Seed "Costs": each page reads and hashes the whole pinned prefix. Here a page cursor skips the hash
    # when the file's full stat identity (dev, ino, size, mtime_ns, ctime_ns) equals the one taken just
    # before the last hash that verified this snapshot, AND that stat was not "racy": its ctime was older
    # than the verification start by more than RACY_NS (git's racily-clean rule). Any change to the file
    # after the verification started gets a ctime at or after that start minus one coarse timestamp tick,
    # so it differs from the recorded ctime; utime cannot set ctime. A file changed within RACY_NS of a
    # verification (the same timestamp tick) is always hashed again, which is what
    # test_F14_in_place_rewrite_within_the_same_timestamp_tick_is_source_replaced proves. Follows always
    # hash: an append changes the stat identity anyway.

    def _still_verified(self, key: tuple[int, int, int, str], fd: int) -> bool:
        st = os.fstat(fd)
        return self._verified.get(key) == (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _remember_verified(self, key: tuple[int, int, int, str], st: os.stat_result, since: int) -> None:
        if st.st_ctime_ns < since - RACY_NS:
            self._verified[key] = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            self._verified.move_to_end(key)
            while len(self._verified) > 16:
                self._verified.popitem(last=False)
        else:
            self._verified.pop(key, None)

    # -- pages and cursors -----------------------------------------------------------------------------

    def _drop(self, c: _Cursor) -> None:
        self._cursors.pop(c.id, None)

    def _issue(self, base: _Cursor, kind: str, **extra: Any) -> _Cursor:
        c = _Cursor(**{**base.__dict__, "id": "c-" + secrets.token_hex(16), "kind": kind,
                       "expires": self._clock() + self._ttl, **extra})
        self._cursors[c.id] = c
        while len(self._cursors) > self._cap:
            self._cursors.popitem(last=False)  # LRU: the least recently issued or used goes first
        return c

    def _page(self, base: _Cursor, snap: _Snap, start: tuple[int, int]) -> dict[str, Any]:
        parsed = snap.parsed
        branch = parsed.branches[base.branch]
        count = branch.item_count  # known without rendering; pages render only their items (_Snap.item_at)
        page: dict[str, Any] = {
            "conversation": base.conversation,
            "branch": base.branch,
            "snapshotDigest": base.digest,
            "sourceEpoch": base.epoch,
            "parts": [],
            "nextCursor": _CURSOR_PLACEHOLDER,
        }
        envelope = json_size(page)
        with _gc_paused():
            parts, nxt = paginate(count, start, envelope, snap.parts_of(base.branch))
            # The follow digest over "id@line" of every item, carried page to page: each page adds the
            # items it finished (already rendered for it), so the last page does not walk the branch.
            if base.hasher is not None and base.hashed <= start[0]:
                hasher, hashed = base.hasher.copy(), base.hashed
            else:
                hasher, hashed = hashlib.sha256(), 0
            upto = count if nxt is None else nxt[0]
            for i in range(hashed, upto):
                item = snap.item_at(base.branch, i)
                hasher.update(f"{item.id}@{item.line}\n".encode())
        page["parts"] = parts
        if nxt is not None:
            cur = self._issue(base, "page", position=nxt, hasher=hasher, hashed=upto)
            page["nextCursor"] = cur.id
            cursor, follow = cur.record(), None
        else:
            fol = self._issue(base, "follow", served=count, served_digest=hasher.hexdigest(), hasher=hasher,
                              hashed=count)
            page["nextCursor"] = None
            cursor, follow = None, fol.record()
        return {"ok": True, "page": page, "cursor": cursor, "follow": follow, "view": _view(parsed, base.incomplete)}

    # -- catalogue rows --------------------------------------------------------------------------------

    def _catalogue_row(self, root: Root, sroot: SessionRoot, name: str) -> dict[str, Any]:
        row: dict[str, Any] = {
            "kind": "conversation",
            "id": conversation_id(sroot.project_root, sroot.seat, name),
            "project": sroot.project,
            "seat": sroot.seat,
            "file": name,
            "size": None,
            "modifiedAt": None,
            "sessionId": None,
            "createdAt": None,
            "engineStartedAt": None,
            "refusal": None,
        }
        try:
            with root.open_session_file(sroot.sessions_rel, name) as f:
                row["size"] = f.size
                row["modifiedAt"] = _iso(f.mtime_ns / 1e9)
                head = _read_header_line(f.fd)
        except SafeOpenRefusal as e:
            row["refusal"] = ReaderRefusal(e.code, e.message).to_dict()
            return row
        result = parse(head, project=root.path, realpath=os.path.realpath)
        if isinstance(result, FormatRefusal):
            row["refusal"] = ReaderRefusal(result.code, result.message).to_dict()
            return row
        row["sessionId"] = result.header.id
        row["createdAt"] = result.header.timestamp
        row["engineStartedAt"] = sroot.engine_started_at(result.header.timestamp)
        return row


def _read_header_line(fd: int) -> bytes:
    """Line 1 with its LF (or whatever there is when no LF comes within 1 MiB or before EOF)."""
    data = b""
    while len(data) < _HEADER_MAX:
        chunk = os.pread(fd, 64 * 1024, len(data))
        if not chunk:
            return data
        data += chunk
        lf = data.find(b"\n")
        if lf >= 0:
            return data[: lf + 1]
    return data


def _unsupported_row(u: UnsupportedRoot) -> dict[str, Any]:
    return {
        "kind": "unsupported",
        "id": conversation_id(u.project_root, u.seat, ""),
        "project": u.project,
        "seat": u.seat,
        "harness": u.harness,
        "unsupportedReason": "unsupported-harness",
        "placeholder": u.placeholder,
    }


def _view(parsed: Parsed, incomplete: bool) -> dict[str, Any]:
    """Seed "API": view holds defaultBranch, branches, incomplete, forkedFromEarlierSession, unreadableLines."""
    return {
        "defaultBranch": parsed.default_branch,
        "branches": [
            {"name": b.name, "leaf": b.leaf, "parentBranch": b.parent_branch, "forkPoint": b.fork_point,
             "items": b.item_count}
            for b in parsed.branches.values()
        ],
        "incomplete": incomplete,
        "forkedFromEarlierSession": parsed.forked_from_earlier_session,
        "unreadableLines": list(parsed.unreadable_lines),
    }


def create_reader(
    roots: Callable[[], Roots],
    *,
    clock: Callable[[], float] = time.time,
    method: Method = "auto",
) -> Reader:
    """A reader over the roots `roots()` returns on each call (seed "API": createReader({ roots }))."""
    return Reader(roots, clock=clock, method=method)
