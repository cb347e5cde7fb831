"""The reader: catalogue, open, next (pages and follows), composed from the cursor store, the snapshot cache
and follow.

Seed README, "API", "Snapshots, epochs, cursors" and "Follow". Every call resolves the conversation by
listing the approved roots again (no path comes from the caller), opens files only through safe-open, and
never writes. The public methods never raise for bad input: they return {"ok": False, "refusal": {...}}.

| module | concern |
|---|---|
| `_reader.py` (here) | the API, resolving a conversation, open, the re-verification of a pinned prefix, pages |
| `_cursors.py` | cursors, their records and the store (LRU cap, TTL, single use) |
| `_snapshots.py` | reading and hashing a file, the parse cache, the racy-ctime shortcut |
| `_follow.py` | a follow: the fresh snapshot and the check of the earlier parts |
| `_catalogue.py` | catalogue rows |
| `_claude.py` | Claude seats: launcher receipts, and a session id resolved to one transcript |
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal, overload

from mosaic.safe_open import OpenedFile, Refusal, Root, SafeOpenRefusal, is_session_name, open_root
from mosaic.safe_open.root import Method

from ._catalogue import catalogue_row, claude_rows, unsupported_row
from ._claude import Receipted, locate, receipt_naming, receipted
from ._cursors import CURSOR_CAP, CURSOR_TTL_SECONDS, HISTORY, LOCAL_OPERATOR, Cursor, CursorStore
from ._follow import follow
from ._jsonout import dump_bytes, iso_time, json_size
from ._parts import paginate, paginate_raw
from ._refusal import ReaderRefusal
from ._snapshots import (
    CLAUDE_FORMAT,
    Snap,
    SnapKey,
    SnapshotCache,
    gc_paused,
    hash_prefix,
    read_to_end,
    same_prefix,
    source_epoch,
)
from ._sources import CLAUDE_PREFIX, ClaudeRoot, Roots, SessionRoot, conversation_id

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ._snapshots import Branch, Parsed

# What the public modules show of this module; the rest is the package's own.
__all__ = ["Reader", "create_reader"]

#: How many conversations' files an open remembers where a listing found them (`Reader._listed`).
LISTED_CAP = 1000

_CURSOR_PLACEHOLDER = "c-" + "0" * 32
#: view lists at most this many branches (plus the default branch) and this many unreadable line ranges.
VIEW_BRANCHES = 100
VIEW_RANGES = 100


@dataclass
class _Loc:
    """Where a conversation's file is: beneath the open root `_resolve` yields with it, in directory `rel`
    (a Pi seat's sessions directory; `projects/<slug>` under a Claude root), named `name`; `project` is the
    real path its header or first entry's cwd is checked against."""

    root: SessionRoot | ClaudeRoot
    rel: str
    name: str
    conversation: str
    project: str
    # A Claude transcript's receipt, the one that named its session (`Receipted.receipt`): what its cursors
    # read again at a next.
    receipt: str = ""

    @property
    def claude(self) -> bool:
        return isinstance(self.root, ClaudeRoot)

    @property
    def key(self) -> str:
        """What a cursor binds besides the root and the seat: the file name (and, for a Claude transcript,
        its project directory, so a transcript that moved to another one is another file)."""
        return f"{self.rel}/{self.name}" if self.claude else self.name


class Reader:
    """Read-only paged views of approved Pi session files and Claude Code transcripts (the sessions an approved
    Claude seat's launcher receipts name). Thread-safe without a global stall: `open` and
    `next` hold the lock of their conversation only (`_ConversationLocks`), the catalogue holds none, and the
    cursor store and the snapshot cache each guard their own few dictionary operations. So a slow parse of
    one conversation never delays the catalogue or another conversation.

    `roots` is called on every operation and must return `Roots` (use `roots_from_specs`). Both clocks
    return seconds since the epoch (the project's one clock convention). `clock` stamps generatedAt and
    cursor expiry, and tests inject it. `fs_clock` is the wall clock the re-verification shortcut compares
    file ctimes with (`_snapshots.is_racy`); it must be the real clock in production. `cursor_cap` and
    `cursor_ttl` (seconds) bound the cursor store.
    """

    def __init__(
        self,
        roots: Callable[[], Roots],
        *,
        clock: Callable[[], float] = time.time,
        method: Method = "auto",
        cursor_cap: int = CURSOR_CAP,
        cursor_ttl: float = CURSOR_TTL_SECONDS,
        fs_clock: Callable[[], float] = time.time,
    ) -> None:
        self._roots = roots
        self._clock = clock
        self._method: Method = method
        self._conversations = _ConversationLocks()
        self._counts_lock = threading.Lock()
        self._cursors = CursorStore(cursor_cap, cursor_ttl)
        self._snaps = SnapshotCache()
        self._claude_snaps = SnapshotCache(CLAUDE_FORMAT)
        self._fs_clock = fs_clock
        # Where a listing found a Pi conversation's file, by conversation id: (project root, seat, name), at most
        # LISTED_CAP, the least recently found first out. Only an open looks here (a next has its cursor's).
        self._listed: OrderedDict[str, tuple[str, str, str]] = OrderedDict()
        self._listed_lock = threading.Lock()
        #: How often a next read the pinned prefix again (hashed it, or compared it with the cached snapshot's
        #: bytes), how often the stat shortcut skipped that, and how often an open reused a cached snapshot.
        self.verify_counts = {"hashed": 0, "skipped": 0, "reused": 0}

    # -- public API ----------------------------------------------------------------------------------

    def catalogue(self) -> dict[str, Any]:
        """{"ok": True, "conversations": [rows], "refusedRoots": [...], "generatedAt": ISO time}.

        One row per *.jsonl in each approved root (its header read for sessionId, createdAt and
        engineStartedAt; a file whose header or open is refused carries `refusal`), one row per unsupported
        seat (its directory never read), and each root that cannot be listed in refusedRoots.
        """
        # No lock: the catalogue reads only the roots and the files' first lines, never the shared caches.
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
                        rows.append(catalogue_row(root, sroot, name))
            except SafeOpenRefusal as e:
                refused.append({"projectRoot": sroot.project_root, "project": sroot.project,
                                "seat": sroot.seat, "refusal": ReaderRefusal(e.code, e.message).to_dict()})
        for croot in roots.claude:
            more, bad = claude_rows(croot, self._method)
            rows += more
            refused += bad
        for u in roots.unsupported:
            rows.append(unsupported_row(u))
        return {"ok": True, "conversations": rows, "refusedRoots": refused,
                "generatedAt": iso_time(self._clock())}

    @overload
    def open(self, *, conversation: object, branch: object = None, actor: object = LOCAL_OPERATOR,
             purpose: object = HISTORY, as_json: Literal[False] = False) -> dict[str, Any]: ...
    @overload
    def open(self, *, conversation: object, branch: object = None, actor: object = LOCAL_OPERATOR,
             purpose: object = HISTORY, as_json: Literal[True]) -> bytes: ...
    def open(
        self,
        *,
        conversation: object,
        branch: object = None,
        actor: object = LOCAL_OPERATOR,
        purpose: object = HISTORY,
        as_json: bool = False,
    ) -> dict[str, Any] | bytes:
        """The first page of `branch` (None: Pi's default branch) in a fresh snapshot of the conversation.

        Returns {"ok": True, "page", "cursor", "follow", "view"} or {"ok": False, "refusal"}. With
        `as_json=True`, that result as its JSON bytes, exactly `dump_bytes` of it (a refusal too), made
        without the page's part dicts: joined from the parts' JSON bytes (kept ones as they are kept) and
        the envelope's (README, "Pages as bytes"). The routes send these.
        """
        with self._conversations.held(conversation):
            try:
                result = self._open(conversation, branch, actor, purpose, as_json)
            except ReaderRefusal as r:
                result = {"ok": False, "refusal": r.to_dict()}
        return dump_bytes(result) if as_json else result

    @overload
    def next(self, *, cursor: object, conversation: object, branch: object, actor: object = LOCAL_OPERATOR,
             purpose: object = HISTORY, as_json: Literal[False] = False) -> dict[str, Any]: ...
    @overload
    def next(self, *, cursor: object, conversation: object, branch: object, actor: object = LOCAL_OPERATOR,
             purpose: object = HISTORY, as_json: Literal[True]) -> bytes: ...
    def next(
        self,
        *,
        cursor: object,
        conversation: object,
        branch: object,
        actor: object = LOCAL_OPERATOR,
        purpose: object = HISTORY,
        as_json: bool = False,
    ) -> dict[str, Any] | bytes:
        """The next page of a page cursor (same snapshot, prefix re-verified), or a follow: only the parts
        appended to the cursor's branch since its snapshot. Same return shape as `open`, and the same
        `as_json`.
        """
        with self._conversations.held(conversation):
            try:
                result = self._next(cursor, conversation, branch, actor, purpose, as_json)
            except ReaderRefusal as r:
                result = {"ok": False, "refusal": r.to_dict()}
        return dump_bytes(result) if as_json else result

    def cursor_count(self) -> int:
        """How many cursors are held (for tests and diagnostics)."""
        return len(self._cursors)

    # -- resolution --------------------------------------------------------------------------------------

    @staticmethod
    def _check_caller(actor: object, purpose: object) -> None:
        if actor != LOCAL_OPERATOR:
            raise ReaderRefusal("unknown-actor", f"actor {actor!r} is not {LOCAL_OPERATOR}")
        if purpose != HISTORY:
            raise ReaderRefusal("unsupported-purpose", f"purpose {purpose!r} is not {HISTORY}")

    @contextmanager
    def _resolve(self, conversation: object, hint: tuple[str, str] | None = None, name: str | None = None,
                 receipt: str = "") -> Iterator[tuple[_Loc, Root]]:
        """Find the conversation by listing the approved roots again; yields it with its open root.

        Refuses unknown-conversation when no approved root lists it now, unsupported-harness for the row of
        a non-Pi seat, and the listing refusal of the cursor's own root (`hint`) when that root cannot be
        listed (e.g. unavailable). When no root lists it and some approved root could not be read
        (permission denied: `unreadable`), the answer is `unreadable`, as the catalogue reports that root in
        refusedRoots: seed "Refusal codes", unreadable is "permission denied on a file, a root or a directory
        above it inside the approved roots", and the conversation may be in the root that cannot be read.

        A cursor's own file (`name`, in the root of `hint`) is looked for by its name first (`_named`): a
        `next` then costs the same beside 5 sessions or 5,000, where listing every approved root's sessions
        made each page cost more with every session file beside it. An open looks first where a listing found
        the same conversation before (`_listed`). Where that look finds nothing, the listing decides, as it
        always did. A Claude cursor's `receipt` likewise (`_resolve_claude`).
        """
        if isinstance(conversation, str) and conversation.startswith(CLAUDE_PREFIX):
            with self._resolve_claude(conversation, hint, receipt) as claude:
                yield claude
            return
        if not isinstance(conversation, str) or not conversation.startswith("pi-"):
            raise ReaderRefusal("unknown-conversation", "no such conversation in the approved roots")
        roots = self._roots()
        for u in roots.unsupported:
            if conversation_id(u.project_root, u.seat, "") == conversation:
                raise ReaderRefusal("unsupported-harness", f"seat {u.seat} runs {u.harness!r}, not Pi (D2)")
        if name is not None and hint is not None:
            where: tuple[str, str, str] | None = (*hint, name)
        else:
            with self._listed_lock:
                where = self._listed.get(conversation)
        found = None if where is None else self._named(roots, conversation, where)
        sroot, root, name = found or self._listing(roots, conversation, hint)
        try:
            yield _Loc(sroot, sroot.sessions_rel, name, conversation, root.path), root
        finally:
            root.close()

    def _listing(self, roots: Roots, conversation: str,
                 hint: tuple[str, str] | None) -> tuple[SessionRoot, Root, str]:
        """(the first approved root whose sessions directory lists `conversation`, that root opened, the file's
        name), remembered for the next open (`_listed`); raises the refusals `_resolve` names when none does."""
        hint_refusal: SafeOpenRefusal | None = None
        unreadable: SafeOpenRefusal | None = None
        for sroot in roots.sessions:
            try:
                root = open_root(sroot.project_root, method=self._method)
            except SafeOpenRefusal as e:
                if hint == (sroot.project_root, sroot.seat):
                    hint_refusal = e
                if e.code == "unreadable" and unreadable is None:
                    unreadable = e
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
                if e.code == "unreadable" and unreadable is None:
                    unreadable = e
            if found is None:
                root.close()
                continue
            self._found(conversation, (sroot.project_root, sroot.seat, found))
            return sroot, root, found
        if hint_refusal is not None:
            raise ReaderRefusal(hint_refusal.code, hint_refusal.message)
        if unreadable is not None:
            raise ReaderRefusal("unreadable", f"not found in the roots that can be read, and an approved root "
                                              f"cannot be read ({unreadable.message})")
        raise ReaderRefusal("unknown-conversation", "no such conversation in the approved roots now")

    def _found(self, conversation: str, where: tuple[str, str, str]) -> None:
        """Remember where a listing found `conversation`, the oldest forgotten past LISTED_CAP."""
        with self._listed_lock:
            self._listed[conversation] = where
            self._listed.move_to_end(conversation)
            while len(self._listed) > LISTED_CAP:
                self._listed.popitem(last=False)

    def _named(self, roots: Roots, conversation: str,
               where: tuple[str, str, str]) -> tuple[SessionRoot, Root, str] | None:
        """What `_listing` gives, found without a listing: the approved root of `where` (project root, seat,
        name) opened, when its sessions directory holds an entry of that name (one lstat) that a listing would
        give for `conversation` (a session file name whose id is `conversation`). None (nothing held open) when
        the root is no longer approved, cannot be opened, or holds no such entry now: the listing then decides,
        and says why."""
        project_root, seat, name = where
        sroot = next((r for r in roots.sessions if (r.project_root, r.seat) == (project_root, seat)), None)
        if sroot is None or not is_session_name(name) or conversation_id(*where) != conversation:
            return None
        try:
            root = open_root(sroot.project_root, method=self._method)
        except SafeOpenRefusal:
            return None
        try:
            root.lstat(posixpath.join(sroot.sessions_rel, name))
        except SafeOpenRefusal:
            root.close()
            return None
        return sroot, root, name

    @contextmanager
    def _resolve_claude(self, conversation: str, hint: tuple[str, str] | None,
                        receipt: str = "") -> Iterator[tuple[_Loc, Root]]:
        """A Claude conversation: the seat whose launcher receipts name it now (read again on every call),
        then its transcript resolved under the seat's Claude root (`_claude.locate`); yields it with the
        Claude root open. Refuses as `_resolve` does when no receipt names it, and with the refusal of the
        receipt's line or of the resolution (`unsafe-path`, `unavailable`, ...) when one does.

        A cursor's `receipt` (in the seat of `hint`) is read first, alone (`receipt_naming`): a `next` then
        costs the same beside 1 launch or 1,000, where reading every receipt made each page cost more with
        every launch. Where it no longer names the session, every receipt is read, as always."""
        roots = self._roots().claude
        found = None
        if receipt and hint is not None:
            found = self._receipted_by(roots, conversation, hint, receipt)
        croot, match, project = found or self._receipted_anywhere(roots, conversation, hint)
        try:
            croot_fs = open_root(croot.claude_root, method=self._method)
        except SafeOpenRefusal as e:
            raise ReaderRefusal(e.code, f"the Claude root of seat {croot.seat}: {e.message}") from None
        try:
            rel = locate(croot_fs, match)
            yield _Loc(croot, rel, match.file, conversation, project, match.receipt), croot_fs
        finally:
            croot_fs.close()

    def _receipted_by(self, roots: tuple[ClaudeRoot, ...], conversation: str, hint: tuple[str, str],
                      receipt: str) -> tuple[ClaudeRoot, Receipted, str] | None:
        """(the seat, its receipt's line, the project's real path) when the approved seat of `hint` still has
        `receipt` naming `conversation`; None otherwise (`_receipted_anywhere` then decides)."""
        croot = next((r for r in roots if (r.project_root, r.seat) == hint), None)
        if croot is None:
            return None
        try:
            with open_root(croot.project_root, method=self._method) as proot:
                match = receipt_naming(proot, croot, receipt, conversation)
                project = proot.path
        except SafeOpenRefusal:
            return None
        return None if match is None else (croot, match, project)

    def _receipted_anywhere(self, roots: tuple[ClaudeRoot, ...], conversation: str,
                            hint: tuple[str, str] | None) -> tuple[ClaudeRoot, Receipted, str]:
        """(the seat, the first receipt line naming `conversation`, the project's real path), every approved
        seat's receipts read; raises the refusals `_resolve_claude` names when none does."""
        hint_refusal: SafeOpenRefusal | None = None
        unreadable: SafeOpenRefusal | None = None
        for croot in roots:
            try:
                with open_root(croot.project_root, method=self._method) as proot:
                    sessions, _ = receipted(proot, croot)
                    project = proot.path
            except SafeOpenRefusal as e:
                if hint == (croot.project_root, croot.seat):
                    hint_refusal = e
                if e.code == "unreadable" and unreadable is None:
                    unreadable = e
                continue
            match = next((s for s in sessions if s.conversation == conversation), None)
            if match is not None:
                return croot, match, project
        if hint_refusal is not None:
            raise ReaderRefusal(hint_refusal.code, hint_refusal.message)
        if unreadable is not None:
            raise ReaderRefusal("unreadable", f"no receipt that can be read names it, and an approved project "
                                              f"root cannot be read ({unreadable.message})")
        raise ReaderRefusal("unknown-conversation", "no launcher receipt of an approved Claude seat names it now")

    @staticmethod
    def _open_file(root: Root, loc: _Loc) -> OpenedFile:
        try:
            return root.open_session_file(loc.rel, loc.name)
        except SafeOpenRefusal as e:
            raise ReaderRefusal(e.code, e.message) from None

    def _snaps_of(self, loc: _Loc) -> SnapshotCache:
        return self._claude_snaps if loc.claude else self._snaps

    # -- open ------------------------------------------------------------------------------------------

    def _open(self, conversation: object, branch: object, actor: object, purpose: object,
              raw: bool = False) -> dict[str, Any]:
        self._check_caller(actor, purpose)
        if branch is not None and not isinstance(branch, str):
            raise ReaderRefusal("unknown-branch", "branch must be a branch name")
        with self._resolve(conversation) as (loc, root):
            project = loc.project
            snaps = self._snaps_of(loc)
            with self._open_file(root, loc) as f:
                since = self._fs_clock()
                st = os.fstat(f.fd)
                dev, ino = f.dev, f.ino
                # The re-verification shortcut, for an open (README, "Re-verification shortcut"): a file whose
                # full stat identity is still the clean one that last verified a cached snapshot is that
                # snapshot, so it is neither read nor hashed again.
                reused = snaps.unchanged(st, project)
                data = read_to_end(f.fd, 0) if reused is None else b""
        if reused is not None:
            (_, _, cut, digest), snap = reused
            incomplete = st.st_size > cut
            self._count("reused")
        else:
            cut = data.rfind(b"\n") + 1
            snapshot = data if cut == len(data) else data[:cut]  # no copy in the common case
            incomplete = cut < len(data)
            if not snapshot and not loc.claude:
                # No complete line yet: the header is still being written, or cannot become one. (A Claude
                # transcript has no header: no complete line yet is a transcript without entries yet.)
                result = snaps.fmt.parse(data, project=project, realpath=os.path.realpath)
                assert isinstance(result, Refusal)
                raise ReaderRefusal(result.code, result.message)
            snap, digest = snaps.open(dev, ino, snapshot, project)
            snaps.remember_verified((dev, ino, cut, digest), st, since)
        name = snap.parsed.default_branch if branch is None else branch
        if name not in snap.parsed.branches:
            raise ReaderRefusal("unknown-branch", f"{name!r} is not a branch of this conversation")
        base = Cursor(
            id="", kind="page", actor=LOCAL_OPERATOR, purpose=HISTORY, conversation=loc.conversation,
            branch=name, project_root=loc.root.project_root, seat=loc.root.seat, name=loc.key,
            dev=dev, ino=ino, length=cut, digest=digest, epoch=source_epoch(dev, ino, digest),
            incomplete=incomplete, expires=0.0, receipt=loc.receipt,
        )
        return self._page(base, snap, (0, 0), raw)

    # -- next ------------------------------------------------------------------------------------------

    def _next(self, cursor: object, conversation: object, branch: object, actor: object, purpose: object,
              raw: bool = False) -> dict[str, Any]:
        self._check_caller(actor, purpose)
        c = self._cursors.take(cursor, conversation, branch, actor, purpose, self._clock())
        hint = (c.project_root, c.seat)
        with self._resolve(conversation, hint=hint, name=c.name, receipt=c.receipt) as (loc, root):
            if (loc.root.project_root, loc.root.seat, loc.key) != (c.project_root, c.seat, c.name):
                raise ReaderRefusal("unknown-conversation", "the conversation resolves elsewhere now")
            c.receipt = loc.receipt  # the receipt naming it now: the cursors issued from `c` read that one
            snaps = self._snaps_of(loc)
            with self._open_file(root, loc) as f:
                key = (c.dev, c.ino, c.length, c.digest)
                hasher, prefix, old = self._verify_pinned(c, f, key, loc.project, snaps)
                tail = read_to_end(f.fd, c.length) if c.kind == "follow" else b""
            project = loc.project
        if c.kind == "page":
            snap = old or snaps.get_or_parse(key, prefix, project, hasher)
            assert snap is not None
            self._cursors.drop(c)
            return self._page(c, snap, c.position, raw)
        base, snap, start = follow(c, key, hasher, prefix, old, tail, project, snaps, self._cursors)
        return self._page(base, snap, start, raw)

    def _verify_pinned(self, c: Cursor, f: OpenedFile, key: SnapKey, project: str,
                       snaps: SnapshotCache) -> tuple[Any, bytes | None, Snap | None]:
        """Seed "Snapshots, epochs, cursors": every next re-verifies the pinned prefix of `c` in the open
        file `f`. Returns a SHA-256 state over the prefix (the caller's own), the prefix bytes when the
        snapshot is no longer cached under `project` (to parse again) and the cached snapshot when it is;
        the hash state is None when the stat shortcut applies (a page cursor on a cached snapshot whose file
        is unchanged since a clean verification). A cached snapshot's prefix is compared byte for byte with
        the bytes its parse holds; an uncached one is hashed.

        Drops `c` and raises ReaderRefusal source-replaced when (dev, ino) changed, the file is shorter
        than the snapshot, or its prefix differs (rewritten in place).
        """
        if (f.dev, f.ino) != (c.dev, c.ino):
            self._cursors.drop(c)
            raise ReaderRefusal("source-replaced", "the session file was replaced (dev or ino changed)")
        if f.size < c.length:
            self._cursors.drop(c)
            raise ReaderRefusal("source-replaced", "the session file is shorter than the pinned snapshot")
        snap = snaps.get(key, project)
        if c.kind == "page" and snap is not None and snaps.still_verified(key, os.fstat(f.fd)):
            self._count("skipped")
            return None, None, snap
        self._count("hashed")
        since = self._fs_clock()
        st = os.fstat(f.fd)
        if snap is not None:
            # The snapshot's bytes are held by its parse: the prefix is read back and compared with them
            # byte for byte (equal bytes have the pinned digest), and the SHA-256 state kept at the end of the
            # snapshot is copied for a follow to extend with the appended bytes only (README, "Follow").
            same = same_prefix(f.fd, snap.pieces)
            if same is None:
                self._cursors.drop(c)
                raise ReaderRefusal("source-replaced", "the session file is shorter than the pinned snapshot")
            if not same:
                self._cursors.drop(c)
                raise ReaderRefusal("source-replaced", "the pinned prefix changed (rewritten in place)")
            hasher, prefix = snap.hasher.copy(), None
        else:
            # Not cached: the prefix is hashed and kept, to be parsed again.
            hashed = hash_prefix(f.fd, c.length, True)
            if hashed is None:
                self._cursors.drop(c)
                raise ReaderRefusal("source-replaced", "the session file is shorter than the pinned snapshot")
            hasher, prefix = hashed
            if hasher.hexdigest() != c.digest:
                self._cursors.drop(c)
                raise ReaderRefusal("source-replaced", "the pinned prefix changed (rewritten in place)")
        snaps.remember_verified(key, st, since)
        return hasher, prefix, snap

    def _count(self, what: str) -> None:
        with self._counts_lock:
            self.verify_counts[what] += 1

    # -- pages -----------------------------------------------------------------------------------------

    def _page(self, base: Cursor, snap: Snap, start: tuple[int, int], raw: bool = False) -> dict[str, Any]:
        """The page of `base`'s branch in `snap` from `start` (item, part), and the cursor that continues
        it: a page cursor when parts remain, else a follow cursor. Seed "Pages" limits (`paginate`). With
        `raw`, the page's parts are their JSON bytes only (`RawParts`), to be serialized at once by
        `dump_bytes`: the same parts, the same cursor, no part dict made."""
        parsed = snap.parsed
        branch = parsed.branches[base.branch]
        count = branch.item_count  # known without rendering; pages render only their items (Snap.parts_of)
        page: dict[str, Any] = {
            "conversation": base.conversation,
            "branch": base.branch,
            "snapshotDigest": base.digest,
            "sourceEpoch": base.epoch,
            "parts": [],
            "nextCursor": _CURSOR_PLACEHOLDER,
        }
        envelope = json_size(page)
        keys: dict[int, bytes] = {}
        with gc_paused():
            parts: list[dict[str, Any]]  # PageParts, or RawParts: the bytes alone
            if raw:
                parts, nxt = paginate_raw(count, start, envelope, snap.part_bytes_of(base.branch, keys))
            else:
                parts, nxt = paginate(count, start, envelope, snap.parts_of(base.branch, keys))
            # The follow digest over "id@line" of every item (_follow.items_digest), carried page to page:
            # each page adds the items it finished (already rendered for it), so the last page does not
            # walk the branch.
            if base.hasher is not None and base.hashed <= start[0]:
                hasher, hashed = base.hasher.copy(), base.hashed
            else:
                hasher, hashed = hashlib.sha256(), 0
            upto = count if nxt is None else nxt[0]
            for i in range(hashed, upto):
                key = keys.get(i)
                hasher.update(key if key is not None else snap.key_at(base.branch, i))
        page["parts"] = parts
        now = self._clock()
        if nxt is not None:
            cur = self._cursors.issue(base, "page", now, position=nxt, hasher=hasher, hashed=upto)
            page["nextCursor"] = cur.id
            cursor, follow_record = cur.record(), None
        else:
            fol = self._cursors.issue(base, "follow", now, served=count, served_digest=hasher.hexdigest(),
                                      hasher=hasher, hashed=count)
            page["nextCursor"] = None
            cursor, follow_record = None, fol.record()
        return {"ok": True, "page": page, "cursor": cursor, "follow": follow_record,
                "view": _view(parsed, base.incomplete)}


class _ConversationLocks:
    """One lock per conversation being read, made on first use and forgotten when its last holder leaves
    (so a caller naming ever new conversations leaves nothing behind). Calls on one conversation are
    serialised, so a cursor is used once and a snapshot is parsed once; calls on others proceed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[object, tuple[threading.Lock, int]] = {}

    @contextmanager
    def held(self, conversation: object) -> Iterator[None]:
        key = conversation if isinstance(conversation, str) else None
        with self._lock:
            lock, users = self._held.get(key, (threading.Lock(), 0))
            self._held[key] = (lock, users + 1)
        try:
            with lock:
                yield
        finally:
            with self._lock:
                lock, users = self._held[key]
                if users == 1:
                    del self._held[key]
                else:
                    self._held[key] = (lock, users - 1)


def _view(parsed: Parsed, incomplete: bool) -> dict[str, Any]:
    """Seed "API": view holds defaultBranch, branches, incomplete, forkedFromEarlierSession, unreadableLines.

    Bounded whatever the file holds (100,000 roots must not make a 100,000-row view): at most VIEW_BRANCHES branch rows (main first, then file
    order, and the default branch always) with `branchCount`, and at most VIEW_RANGES ranges of unreadable
    lines ([first, last], one per run, as the pages' notices) with `unreadableLineCount` and
    `unreadableRangeCount`. Every branch still opens by name, and every unreadable line is still a notice
    on every branch's pages.
    """
    branches: Mapping[str, Branch] = parsed.branches
    listed = list(islice(branches.values(), VIEW_BRANCHES))
    if all(b.name != parsed.default_branch for b in listed):
        listed.append(branches[parsed.default_branch])
    return {
        "defaultBranch": parsed.default_branch,
        "branches": [
            {"name": b.name, "leaf": b.leaf, "parentBranch": b.parent_branch, "forkPoint": b.fork_point,
             "items": b.item_count}
            for b in listed
        ],
        "branchCount": len(branches),
        "incomplete": incomplete,
        "forkedFromEarlierSession": parsed.forked_from_earlier_session,
        "unreadableLines": [[first, first + count - 1]
                            for first, count in islice(parsed.unreadable_runs(), VIEW_RANGES)],
        "unreadableLineCount": len(parsed.unreadable_lines),
        "unreadableRangeCount": parsed.unreadable_run_count(),
    }


def create_reader(
    roots: Callable[[], Roots],
    *,
    clock: Callable[[], float] = time.time,
    method: Method = "auto",
) -> Reader:
    """A reader over the roots `roots()` returns on each call (seed "API": createReader({ roots })).
    `clock` returns seconds since the epoch (it stamps generatedAt and cursor expiry)."""
    return Reader(roots, clock=clock, method=method)
