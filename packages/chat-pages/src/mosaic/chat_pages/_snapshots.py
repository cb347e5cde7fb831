"""Snapshots: reading and hashing a session file, the parse cache, and the re-verification shortcut.

Seed README, "Snapshots, epochs, cursors" and "Costs". A snapshot is the file up to its last LF when the
descriptor was read, named by its key (dev, ino, length, SHA-256 digest). "A parse cache and a
branch-entries cache, two snapshots each": here one cache of `Snap`s holds both (the parse, the bytes it
holds, the SHA-256 state at its end, and its rendered parts' bytes), keyed by the snapshot key and the
project the header cwd was checked against.

The re-verification shortcut follows git's racily-clean rule (package README, "Re-verification
shortcut"): a page cursor may skip reading the pinned prefix again, and an open may take the cached
snapshot without reading the file, when the file's full stat identity is the one taken just before the
last read that verified it, and that stat was not racy.
"""

from __future__ import annotations

import gc
import hashlib
import heapq
import os
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mosaic.claude_format as claude_format
import mosaic.pi_format as pi_format
from mosaic.safe_open import MAX_SESSION_FILE_BYTES, Refusal

if TYPE_CHECKING:
    import mosaic.claude_format.model
    import mosaic.pi_format.model

    #: A parse of either format: both answer what a page asks (branches, render, refs, the view's fields).
    Parsed = mosaic.pi_format.model.Parsed | mosaic.claude_format.model.Parsed
    Branch = mosaic.pi_format.model.Branch | mosaic.claude_format.model.Branch

from ._parts import Encoded, encoded_from, encoded_parts, held, item_key, raws_of
from ._rawparts import json_part
from ._refusal import ReaderRefusal

#: Seed "Costs": a parse cache and a branch-entries cache, two snapshots each.
SNAPSHOT_CACHE = 2
#: How many verified stat identities are remembered (a few per snapshot the cursors still pin).
VERIFIED_CAP = 16
#: A file whose ctime is within this much of a verification's start is "racy" and always read again:
#: well over one coarse kernel timestamp tick (at most 10 ms at HZ=100).
RACY_NS = 100_000_000

_CHUNK = 1 << 20
#: A snapshot at least this large is hashed on another core while it is parsed (SnapshotCache.open).
PARALLEL_HASH_BYTES = 4 << 20
#: Items are taken from pi-format in chunks of this many (one page holds at most 100 parts).
_ITEM_CHUNK = 128

#: (dev, ino, length, digest): one snapshot of one file.
SnapKey = tuple[int, int, int, str]
#: The stat identity the shortcut compares: (dev, ino, size, mtime_ns, ctime_ns).
StatId = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class Format:
    """A session format the reader pages: its parser and its continuation (each looked up when first called:
    the parser and msgspec load on first use). pi-format's and claude-format's results answer the same
    questions, so one reader serves both; each format has its own snapshot cache."""

    name: str
    _parse: Callable[..., Any]
    _parse_appended: Callable[..., Any]

    def parse(self, data: bytes, *, project: str, realpath: Callable[[str], str]) -> Parsed | Refusal:
        result: Parsed | Refusal = self._parse(data, project=project, realpath=realpath)
        return result

    def parse_appended(self, previous: Parsed, appended: bytes) -> Parsed | Refusal:
        """The continuation; a Claude transcript may refuse here (an appended entry of another version)."""
        result: Parsed | Refusal = self._parse_appended(previous, appended)
        return result


PI_FORMAT = Format("pi", lambda data, **kw: pi_format.parse(data, **kw),
                   lambda previous, appended: pi_format.parse_appended(previous, appended))
CLAUDE_FORMAT = Format("claude", lambda data, **kw: claude_format.parse(data, **kw),
                       lambda previous, appended: claude_format.parse_appended(previous, appended))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a snapshot is parsed and rendered (decision).

    Parsing 18.6 MB allocates millions of small objects that are all still alive; each collection the
    allocations trigger walks all of them again, which more than doubled the parse time here (README,
    "Benchmark"). Nothing is leaked: reference counting frees as usual, the collector is only deferred,
    and it is re-enabled (if it was enabled) even when parsing raises.
    """
    global _gc_holders, _gc_was_enabled
    with _gc_lock:
        if _gc_holders == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holders += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holders -= 1
            if _gc_holders == 0 and _gc_was_enabled:
                gc.enable()


# Parses in several threads share the one collector switch: the first to pause it remembers whether it was
# enabled and the last to finish restores that, so overlapping pauses never leave it off.
_gc_lock = threading.Lock()
_gc_holders = 0
_gc_was_enabled = True


def source_epoch(dev: int, ino: int, digest: str) -> str:
    """sourceEpoch: e- plus 40 hex of SHA-256 over "dev:ino:snapshotDigest" at open (seed "Snapshots")."""
    return "e-" + hashlib.sha256(f"{dev}:{ino}:{digest}".encode()).hexdigest()[:40]


def read_to_end(fd: int, offset: int) -> bytes:
    """The bytes of `fd` from `offset` to its end now. Raises ReaderRefusal too-large when the file grew
    past 256 MiB while it was read, and OSError when a read fails.

    The size fstat gives now is read in one allocation (a file's bytes are held once, not as chunks and a
    joined copy); only bytes appended meanwhile are read in further chunks."""
    want = max(os.fstat(fd).st_size - offset, 0)
    first = os.pread(fd, want + 1, offset) if want else b""
    chunks: list[bytes] = [first]
    total = offset + len(first)
    if total > MAX_SESSION_FILE_BYTES:
        raise ReaderRefusal("too-large", "the session file grew over 256 MiB while it was read")
    if want and len(first) <= want:
        return first  # the whole file as it is now
    while True:
        chunk = os.pread(fd, _CHUNK, total)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_SESSION_FILE_BYTES:
            raise ReaderRefusal("too-large", "the session file grew over 256 MiB while it was read")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def hash_prefix(fd: int, length: int, keep: bool) -> tuple[Any, bytes | None] | None:
    """The SHA-256 state over the first `length` bytes of `fd` (and those bytes when `keep`), or None when
    the file is shorter. Raises OSError when a read fails."""
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


def same_prefix(fd: int, pieces: tuple[bytes, ...]) -> bool | None:
    """Whether `fd` starts with exactly the bytes of `pieces` (joined), read back in chunks and compared byte
    for byte; None when the file is shorter. Raises OSError when a read fails."""
    buf = bytearray(_CHUNK)
    view = memoryview(buf)
    offset = 0
    for piece in pieces:
        with memoryview(piece) as whole:
            at, n = 0, len(piece)
            while at < n:
                got = os.preadv(fd, [view[:min(_CHUNK, n - at)]], offset)
                if got == 0:
                    return None
                # bytearray == memoryview compares with memcmp (memoryview == ... compares item by item).
                if not (buf if got == _CHUNK else buf[:got]) == whole[at:at + got]:
                    return False
                at += got
                offset += got
    return True


def stat_id(st: os.stat_result) -> StatId:
    """The full stat identity the shortcut compares."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def is_racy(ctime_ns: int, now: float) -> bool:
    """True when a file whose ctime is `ctime_ns` may have changed in the same timestamp tick as a
    verification that started at `now` (seconds since the epoch): its ctime is not older than `now` by more
    than RACY_NS. Git's racily-clean rule; pure."""
    return ctime_ns >= round(now * 1e9) - RACY_NS


class PartCache:
    """The JSON bytes of rendered items' parts, by pi-format ref, bounded in bytes (decoded text is never
    kept: it cost several times the file; only these bytes, and at most `budget` of them).

    Branches of one file share their prefixes and every open starts a branch at its root, so the items most
    pages revisit are the earliest in the file. The cache keeps those: when it is full, an item earlier in the
    file than the latest one held takes that one's place, and a later one is not kept (a plain LRU would keep
    the tail of the branch read last, which the next branch read from its root never reaches). Line notices
    are not kept (they cost nothing to make). Each entry also holds the item's follow-digest key
    (`_parts.item_key`), so a page digests a kept item without rendering it. Shared by the snapshots that
    pi-format continued in place (a ref names the same item in both); its own lock guards it."""

    #: Bytes counted per kept part beside its JSON (the bytes object, the tuple, the dict slot).
    OVERHEAD = 120

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._kept: dict[int, tuple[bytes, tuple[Encoded, ...]]] = {}
        self._latest: list[int] = []  # a max-heap of the kept refs (negated)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def get(self, ref: int) -> tuple[bytes, tuple[Encoded, ...]] | None:
        """(digest key, parts' JSON bytes) of the item `ref`, or None when it is not kept."""
        return self._kept.get(ref)

    def put(self, ref: int, key: bytes, raws: tuple[Encoded, ...]) -> None:
        """Keep the item `ref` if it fits, evicting items later in the file than it. A part spliced from the
        file's bytes (`_parts.Spliced`) costs what it holds of its own, not the texts it views."""
        if ref < 0:
            return
        cost = sum(held(raw) for raw in raws) + len(key) + self.OVERHEAD * (len(raws) + 1)
        with self._lock:
            if ref in self._kept:
                return
            latest = self._latest
            while self.size + cost > self.budget and latest and -latest[0] > ref:
                gone = -heapq.heappop(latest)
                _, old = self._kept.pop(gone)
                self.size -= sum(held(raw) for raw in old) + len(_) + self.OVERHEAD * (len(old) + 1)
            if self.size + cost > self.budget:
                return
            self._kept[ref] = (key, raws)
            heapq.heappush(latest, -ref)
            self.size += cost


def part_budget(size: int) -> int:
    """How many bytes of parts a snapshot of `size` bytes keeps: a quarter of the file, between 1 and 64 MiB,
    so a reader that served every page of it holds under 1.5x the file (issue 34: 1.33x at 18.6 MB, 1.45x at
    100 MB; a third held 1.45x and 1.55x). A part spliced from the file's bytes counts only what it holds of
    its own (`_parts.held`), so a quarter keeps more items than half did when every part was a copy."""
    return max(1 << 20, min(64 << 20, size // 4))


@dataclass(eq=False)
class Snap:
    """One parsed snapshot: the parse, the bytes it was parsed from (as the pieces the parse holds), the
    SHA-256 state at its end, and the parts of its rendered items (the parse and branch-entries caches)."""

    parsed: Parsed
    # The snapshot's bytes, in the pieces the parse holds them (no copy): what an unchanged prefix is
    # compared with, byte for byte.
    pieces: tuple[bytes, ...]
    # hashlib's SHA-256 over exactly those bytes: never updated in place (copy() first), so a follow extends
    # it with the appended bytes only.
    hasher: Any
    # The snapshot key this one was continued from in place (pi-format's parse_appended with
    # extends_previous): every branch of that snapshot is, item for item, the start of the same branch here.
    grown_from: tuple[int, int, int, str, str] | None = None
    parts: PartCache = field(default_factory=lambda: PartCache(1 << 20))
    # (branch, chunk number) -> the refs of that chunk of the branch's items (ints: what pi-format's
    # Branch.refs_from returns; nothing is rendered to find them).
    chunks: dict[tuple[str, int], array[int]] = field(default_factory=dict)
    # pi-format's render_json (an entry's item as JSON cut from its line), None for a format without one.
    _render_json: Callable[[int], Any] | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._render_json = getattr(self.parsed, "render_json", None)

    @property
    def length(self) -> int:
        return sum(len(p) for p in self.pieces)

    def ref_at(self, branch: str, i: int) -> int:
        """The ref of item `i` of `branch` (which must exist and hold it)."""
        key = (branch, i // _ITEM_CHUNK)
        chunk = self.chunks.get(key)
        if chunk is None:
            # Kept as 8-byte machine ints, not a tuple of int objects (36 bytes a ref: 0.12x the file after
            # every page of every branch of the 18.6 MB benchmark file; issue 34).
            chunk = array("q", self.parsed.branches[branch].refs_from(key[1] * _ITEM_CHUNK, _ITEM_CHUNK))
            self.chunks[key] = chunk
        return chunk[i % _ITEM_CHUNK]

    def key_at(self, branch: str, i: int) -> bytes:
        """The follow-digest key of item `i` of `branch` (`_parts.item_key`), rendering it only when its
        parts are not kept."""
        ref = self.ref_at(branch, i)
        kept = self.parts.get(ref)
        if kept is not None:
            return kept[0]
        if self._render_json is not None:
            ij = self._render_json(ref)
            if ij is not None:
                return f"{ij.id}@{ij.line}\n".encode()  # item_key of an entry's own item
        return item_key(self.parsed.render(ref))

    def made(self, ref: int) -> tuple[bytes, tuple[Encoded, ...]]:
        """(follow-digest key, parts' JSON bytes) of the item `ref`, made now: spliced from its line's bytes
        (`_rawparts.json_part`) where pi-format cuts its JSON, else rendered and encoded (`encoded_parts`)."""
        if self._render_json is not None:
            ij = self._render_json(ref)
            if ij is not None:
                got = json_part(ij)
                if got is not None:
                    return got
        item = self.parsed.render(ref)
        return item_key(item), raws_of(encoded_parts(item))

    def parts_of(self, branch: str, keys: dict[int, bytes]) -> Callable[[int], Sequence[tuple[dict[str, Any], Encoded]]]:
        """A function from an item index of `branch` to that item's parts with their JSON bytes, each made
        and serialized once while it is kept (the bytes size the page and are the page's serialization); a
        kept item is read back from its bytes, never rendered again. It puts each item's follow-digest key
        in `keys` (by index), so the page that asked digests its items without rendering them again."""
        def get(i: int) -> Sequence[tuple[dict[str, Any], Encoded]]:
            ref = self.ref_at(branch, i)
            kept = self.parts.get(ref)
            if kept is None:
                item = self.parsed.render(ref)
                got = encoded_parts(item)
                keys[i] = key = item_key(item)
                self.parts.put(ref, key, raws_of(got))
                return got
            keys[i] = kept[0]
            return encoded_from(kept[1])

        return get

    def part_bytes_of(self, branch: str, keys: dict[int, bytes]) -> Callable[[int], Sequence[Encoded]]:
        """`parts_of` as the parts' JSON bytes alone (a page served as bytes): a kept item's bytes as they are
        kept, never read back into dicts; an item not kept made (`made`: spliced from its line's bytes where
        it can be, else rendered and serialized) and kept as `parts_of` does. A page asks for its items in
        order, so the chunk of refs last looked up is held here (`ref_at` without its lookup per item)."""
        kept_of = self.parts.get
        at = [-1]
        refs: list[array[int]] = [array("q")]

        def get(i: int) -> Sequence[Encoded]:
            c = i // _ITEM_CHUNK
            if c != at[0]:
                self.ref_at(branch, i)  # the chunk made (or found) and kept in `chunks`
                refs[0] = self.chunks[(branch, c)]
                at[0] = c
            ref = refs[0][i - c * _ITEM_CHUNK]
            kept = kept_of(ref)
            if kept is None:
                key, raws = self.made(ref)
                keys[i] = key
                self.parts.put(ref, key, raws)
                return raws
            keys[i] = kept[0]
            return kept[1]

        return get


def _snap(result: Parsed | Refusal, data: bytes, hasher: Any) -> Snap:
    if isinstance(result, Refusal):
        raise ReaderRefusal(result.code, result.message)
    return Snap(result, (data,), hasher, parts=PartCache(part_budget(len(data))))


class SnapshotCache:
    """The parse cache of one format (SNAPSHOT_CACHE snapshots, least recently used first) and the stat
    identities that verified a snapshot (the shortcut). Reads no file and no clock. Thread-safe: its own lock guards
    its two dictionaries, and a parse runs outside that lock (two threads parsing the same snapshot at once
    both parse it, and one result is kept; the reader's per-conversation lock makes that rare)."""

    def __init__(self, fmt: Format = PI_FORMAT) -> None:
        self.fmt = fmt
        # Keyed by (dev, ino, length, digest, project): the header cwd was checked against that project, so
        # the same bytes reached through another approved project (a hard link) are parsed and checked again.
        self._snaps: OrderedDict[tuple[int, int, int, str, str], Snap] = OrderedDict()
        self._verified: OrderedDict[SnapKey, StatId] = OrderedDict()
        self._lock = threading.RLock()

    # -- the parse cache ---------------------------------------------------------------------------------

    def holds(self, file_key: SnapKey, project: str) -> bool:
        """Whether the snapshot, checked against `project`, is cached (its use order is not changed)."""
        with self._lock:
            return (*file_key, project) in self._snaps

    def peek(self, file_key: SnapKey, project: str) -> Snap | None:
        """The cached snapshot, or None; its use order is not changed."""
        with self._lock:
            return self._snaps.get((*file_key, project))

    def get_or_parse(self, file_key: SnapKey, data: bytes | None, project: str, hasher: Any = None) -> Snap | None:
        """The cached snapshot (now the most recently used), else `data` parsed and cached, else None when
        `data` is None. `data` must be the snapshot's bytes and `hasher` hashlib's SHA-256 over exactly them
        (made here when None). Raises ReaderRefusal with the format's code (pi-format: not-a-pi-session,
        incomplete-header, foreign-project; claude-format: unsupported-harness, foreign-project) when the
        bytes are refused."""
        snap = self.get(file_key, project)
        if snap is not None or data is None:
            return snap
        if hasher is None:
            hasher = hashlib.sha256(data)
        with gc_paused():
            result = self.fmt.parse(data, project=project, realpath=os.path.realpath)
        return self.store(file_key, project, _snap(result, data, hasher))

    def get(self, file_key: SnapKey, project: str) -> Snap | None:
        """The cached snapshot, now the most recently used, or None."""
        key = (*file_key, project)
        with self._lock:
            snap = self._snaps.get(key)
            if snap is not None:
                self._snaps.move_to_end(key)
            return snap

    def open(self, dev: int, ino: int, data: bytes, project: str) -> tuple[Snap, str]:
        """The snapshot of `data` (a file's bytes up to its last LF) and its digest: cached, else parsed and
        cached. A large snapshot is hashed on another core while it is parsed (hashlib releases the GIL for
        the whole buffer; the digest names the cache entry, so a snapshot that may be cached under this
        length is hashed first). Raises ReaderRefusal as `get_or_parse`."""
        cut = len(data)
        if cut < PARALLEL_HASH_BYTES or self._holds_length(dev, ino, cut, project):
            hasher = hashlib.sha256(data)
            digest = hasher.hexdigest()
            snap = self.get_or_parse((dev, ino, cut, digest), data, project, hasher)
            assert snap is not None
            return snap, digest
        hasher = hashlib.sha256()
        worker = threading.Thread(target=hasher.update, args=(data,), name="chat-pages-hash")
        worker.start()
        try:
            with gc_paused():
                result = self.fmt.parse(data, project=project, realpath=os.path.realpath)
        finally:
            worker.join()
        digest = hasher.hexdigest()
        key = (dev, ino, cut, digest)
        snap = self.get(key, project)
        if snap is None:
            snap = self.store(key, project, _snap(result, data, hasher))
        return snap, digest

    def _holds_length(self, dev: int, ino: int, cut: int, project: str) -> bool:
        with self._lock:
            return any(k[:3] == (dev, ino, cut) and k[4] == project for k in self._snaps)

    def unchanged(self, st: os.stat_result, project: str) -> tuple[SnapKey, Snap] | None:
        """The cached snapshot (checked against `project`) whose file `st` (a fresh fstat) is still exactly
        the clean stat identity that last verified it, or None: the re-verification shortcut for an open."""
        sid = stat_id(st)
        with self._lock:
            for key, verified in self._verified.items():
                if verified == sid:
                    snap = self._snaps.get((*key, project))
                    if snap is not None:
                        self._snaps.move_to_end((*key, project))
                        return key, snap
        return None

    def store(self, file_key: SnapKey, project: str, snap: Snap) -> Snap:
        """Cache `snap` as the most recently used, evicting beyond SNAPSHOT_CACHE; returns it."""
        with self._lock:
            self._snaps[(*file_key, project)] = snap
            while len(self._snaps) > SNAPSHOT_CACHE:
                self._snaps.popitem(last=False)
        return snap

    # -- the re-verification shortcut --------------------------------------------------------------------
    #
    # Seed "Costs": each page reads and hashes the whole pinned prefix. Here a page cursor skips reading it
    # again, and an open takes the cached snapshot (`unchanged`), when the file's full stat identity (dev,
    # ino, size, mtime_ns, ctime_ns) equals the one taken just before the last read that verified this
    # snapshot (its hash, or its comparison with the bytes the parse holds), AND that stat was not "racy":
    # its ctime was older than the verification start by more than RACY_NS (git's racily-clean rule). Any change to the file
    # after the verification started gets a ctime at or after that start minus one coarse timestamp tick,
    # so it differs from the recorded ctime; utime cannot set ctime. A file changed within RACY_NS of a
    # verification (the same timestamp tick) is always read again, which is what
    # test_F14_in_place_rewrite_within_the_same_timestamp_tick_is_source_replaced proves. Follows always
    # read: an append changes the stat identity anyway. It relies on the wall clock not stepping back by
    # more than RACY_NS between two calls.

    def still_verified(self, file_key: SnapKey, st: os.stat_result) -> bool:
        """Whether `st` (a fresh fstat of the file) is the clean stat identity that last verified the
        snapshot, so hashing it again cannot find a change."""
        with self._lock:
            return self._verified.get(file_key) == stat_id(st)

    def remember_verified(self, file_key: SnapKey, st: os.stat_result, since: float) -> None:
        """Record that the snapshot verified against the file whose stat `st` was taken just before a hash
        that started at `since` (seconds since the epoch, the filesystem clock). A racy stat is forgotten
        instead, so the next page hashes again."""
        with self._lock:
            if not is_racy(st.st_ctime_ns, since):
                self._verified[file_key] = stat_id(st)
                self._verified.move_to_end(file_key)
                while len(self._verified) > VERIFIED_CAP:
                    self._verified.popitem(last=False)
            else:
                self._verified.pop(file_key, None)
