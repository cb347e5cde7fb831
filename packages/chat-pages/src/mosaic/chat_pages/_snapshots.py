"""Snapshots: reading and hashing a session file, the parse cache, and the re-verification shortcut.

Seed README, "Snapshots, epochs, cursors" and "Costs". A snapshot is the file up to its last LF when the
descriptor was read, named by its key (dev, ino, length, SHA-256 digest). "A parse cache and a
branch-entries cache, two snapshots each": here one cache of `Snap`s holds both (the parse and its
rendered parts), keyed by the snapshot key and the project the header cwd was checked against.

The re-verification shortcut follows git's racily-clean rule (package README, "Re-verification
shortcut"): a page cursor may skip hashing the pinned prefix when the file's full stat identity is the
one taken just before the last hash that verified it, and that stat was not racy.
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mosaic.pi_format as pi_format
from mosaic.pi_format import FormatRefusal
from mosaic.safe_open import MAX_SESSION_FILE_BYTES

if TYPE_CHECKING:
    from mosaic.pi_format import Parsed

from ._parts import encoded_parts, part_from_json
from ._refusal import ReaderRefusal

#: Seed "Costs": a parse cache and a branch-entries cache, two snapshots each.
SNAPSHOT_CACHE = 2
#: How many verified stat identities are remembered (a few per snapshot the cursors still pin).
VERIFIED_CAP = 16
#: A file whose ctime is within this much of a verification's start is "racy" and always hashed again:
#: well over one coarse kernel timestamp tick (at most 10 ms at HZ=100).
RACY_NS = 100_000_000

_CHUNK = 1 << 20
#: Items are taken from pi-format in chunks of this many (one page holds at most 100 parts).
_ITEM_CHUNK = 128

#: (dev, ino, length, digest): one snapshot of one file.
SnapKey = tuple[int, int, int, str]
#: The stat identity the shortcut compares: (dev, ino, size, mtime_ns, ctime_ns).
StatId = tuple[int, int, int, int, int]


def parse(data: bytes, *, project: str, realpath: Callable[[str], str]) -> Parsed | FormatRefusal:
    """pi-format's `parse`, looked up when first called (the parser and msgspec load on first use)."""
    return pi_format.parse(data, project=project, realpath=realpath)


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


def stat_id(st: os.stat_result) -> StatId:
    """The full stat identity the shortcut compares."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def is_racy(ctime_ns: int, now: float) -> bool:
    """True when a file whose ctime is `ctime_ns` may have changed in the same timestamp tick as a
    verification that started at `now` (seconds since the epoch): its ctime is not older than `now` by more
    than RACY_NS. Git's racily-clean rule; pure."""
    return ctime_ns >= round(now * 1e9) - RACY_NS


@dataclass
class Snap:
    """One parsed snapshot and its rendered parts (the parse and branch-entries caches)."""

    parsed: Parsed
    # The snapshot key this one was continued from in place (pi-format's parse_appended with
    # extends_previous): every branch of that snapshot is, item for item, the start of the same branch here.
    grown_from: tuple[int, int, int, str, str] | None = None
    # Keyed by item id (an item's parts do not depend on the branch, and branches share their prefixes):
    # the JSON bytes of each of its parts, made once. Only bytes are kept, which the cyclic collector never
    # walks (issue 13: a branch read to its end leaves no tracked objects per part for every later full
    # collection to walk); a page that meets the item again reads its part dicts back from them
    # (`_parts.part_from_json`).
    parts: dict[str, tuple[bytes, ...]] = field(default_factory=dict)

    # (branch, chunk number) -> that chunk of the branch's items, rendered on demand (pi-format's
    # Branch.items_from), so a page renders about the items it shows, not the whole branch.
    chunks: dict[tuple[str, int], tuple[Any, ...]] = field(default_factory=dict)

    def item_at(self, branch: str, i: int) -> Any:
        """Item `i` of `branch` (which must exist and hold it), rendering only its chunk."""
        key = (branch, i // _ITEM_CHUNK)
        chunk = self.chunks.get(key)
        if chunk is None:
            chunk = self.parsed.branches[branch].items_from(key[1] * _ITEM_CHUNK, _ITEM_CHUNK)
            self.chunks[key] = chunk
        return chunk[i % _ITEM_CHUNK]

    def parts_of(self, branch: str) -> Callable[[int], list[tuple[dict[str, Any], bytes]]]:
        """A function from an item index of `branch` to that item's parts with their JSON bytes, each made
        and serialized once (the bytes size the page and are the page's serialization)."""
        def get(i: int) -> list[tuple[dict[str, Any], bytes]]:
            item = self.item_at(branch, i)
            kept = self.parts.get(item.id)
            if kept is None:
                got = encoded_parts(item)
                self.parts[item.id] = tuple(raw for _, raw in got)
                return got
            return [(part_from_json(raw), raw) for raw in kept]

        return get


class SnapshotCache:
    """The parse cache (SNAPSHOT_CACHE snapshots, least recently used first) and the stat identities that
    verified a snapshot (the shortcut). Reads no file and no clock. Thread-safe: its own lock guards
    its two dictionaries, and a parse runs outside that lock (two threads parsing the same snapshot at once
    both parse it, and one result is kept; the reader's per-conversation lock makes that rare)."""

    def __init__(self) -> None:
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

    def get_or_parse(self, file_key: SnapKey, data: bytes | None, project: str) -> Snap | None:
        """The cached snapshot (now the most recently used), else `data` parsed and cached, else None when
        `data` is None. `data` must be the snapshot's bytes. Raises ReaderRefusal with pi-format's code
        (not-a-pi-session, incomplete-header, foreign-project) when the bytes are refused."""
        key = (*file_key, project)
        with self._lock:
            snap = self._snaps.get(key)
            if snap is not None:
                self._snaps.move_to_end(key)
                return snap
        if data is None:
            return None
        with gc_paused():
            result = parse(data, project=project, realpath=os.path.realpath)
        if isinstance(result, FormatRefusal):
            raise ReaderRefusal(result.code, result.message)
        return self.store(file_key, project, Snap(result))

    def store(self, file_key: SnapKey, project: str, snap: Snap) -> Snap:
        """Cache `snap` as the most recently used, evicting beyond SNAPSHOT_CACHE; returns it."""
        with self._lock:
            self._snaps[(*file_key, project)] = snap
            while len(self._snaps) > SNAPSHOT_CACHE:
                self._snaps.popitem(last=False)
        return snap

    # -- the re-verification shortcut --------------------------------------------------------------------
    #
    # Seed "Costs": each page reads and hashes the whole pinned prefix. Here a page cursor skips the hash
    # when the file's full stat identity (dev, ino, size, mtime_ns, ctime_ns) equals the one taken just
    # before the last hash that verified this snapshot, AND that stat was not "racy": its ctime was older
    # than the verification start by more than RACY_NS (git's racily-clean rule). Any change to the file
    # after the verification started gets a ctime at or after that start minus one coarse timestamp tick,
    # so it differs from the recorded ctime; utime cannot set ctime. A file changed within RACY_NS of a
    # verification (the same timestamp tick) is always hashed again, which is what
    # test_F14_in_place_rewrite_within_the_same_timestamp_tick_is_source_replaced proves. Follows always
    # hash: an append changes the stat identity anyway. It relies on the wall clock not stepping back by
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
