"""IdTable: a sequence of strings (raw ids), position by position, and the latest position of each.

The parse needs, for every valid entry line, its raw id by position (for its item id and branch name) and
the latest position of an id (to resolve a parentId and to see a repeated id: README rule 3, the later
entry wins).
A Python dict of str -> int costs about 150 bytes per id (the dict slot, the str, the int), which is
nothing beside an entry of a normal session (1-2 KB) but three times a tiny entry's line: a file of a
million 53-byte labels would cost 20x its size. So the table has two forms, chosen by density:

- **sparse** (the start, and every file whose lines average more than `DENSE_BYTES`): the dict, and a list
  of the id strs by position (the same str objects as the dict's keys). Fastest: one dict operation.
- **compact** (`compact()`, called by the line index once the records are dense): no object per id and no
  copy of its bytes. The string at a position is read again from where it came from, the entry's line in
  the file's bytes (which the parse holds anyway), by the `key` function the line index gives; the table
  keeps only the low 32 bits of each string's `hash()` in an array and an open-addressing table of
  positions (linear probing, load at most 1/2): about 12 bytes an id (issue 34: a copy of the id's bytes and
  their ends cost 11 more). A string read from a long line (where reading it again would cost more than a
  short line's read) is kept as a str once read (`_held`), so each long line is read again at most once
  however many lookups meet it, and a line nobody asks about costs nothing more. The slots hold
  4-byte items while the positions fit (widened to 8 bytes past 2**31). A lookup is a few array reads in
  Python and, where the low hash bits match, a comparison of the string itself, so a hash collision (of
  the full hash or of its low bits) never merges two ids.

Both forms answer the same: `add`, `get`, `string`, `latest_flags`. Positions are never removed.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Callable
from typing import Literal, TypeAlias

#: A form switch is considered when the records average fewer bytes than this (about what the sparse
#: form costs per id, so its ids never cost more than about the bytes they came from).
DENSE_BYTES = 192

_EMPTY = -1
_LOW32 = 0xFFFFFFFF
#: The largest table size whose positions 4-byte slots hold; past it the slots widen to 8-byte items (read
#: at call time: tests lower it to run the widening).
_MAX_SLOT = (1 << 31) - 1
#: The hash of a string (tests replace it to make every string collide).
_HASH: Callable[[str], int] = hash
#: Slot tables of at least this many bytes are anonymous mappings of their own, not the allocator's: freeing
#: one (the table doubles) then never raises glibc's dynamic mmap threshold, which would send every column
#: still growing to the heap, copied at each realloc and leaving freed holes resident (about 4-8 MB on a
#: million tiny entries: issue 34).
_MAPPED_BYTES = 1 << 16
_FILL = b"\xff" * _MAPPED_BYTES  # -1 (_EMPTY) in every item, 4- or 8-byte

Slots: TypeAlias = "array[int] | memoryview[int]"


def _new_slots(size: int, code: Literal["i", "q"]) -> Slots:
    """A slot table of `size` items of typecode `code`, every slot _EMPTY."""
    nbytes = size * array(code).itemsize
    if nbytes < _MAPPED_BYTES:
        return array(code, [_EMPTY]) * size
    mapped = mmap.mmap(-1, nbytes)
    for _ in range(nbytes // _MAPPED_BYTES):  # sizes are powers of 2: whole chunks
        mapped.write(_FILL)
    return memoryview(mapped).cast(code)


def _copy_slots(slots: Slots) -> Slots:
    if isinstance(slots, array):
        return array(slots.typecode, slots)
    mapped = mmap.mmap(-1, slots.nbytes)
    mapped.write(slots)
    return memoryview(mapped).cast("q" if slots.itemsize == 8 else "i")


def slots_typecode(slots: Slots) -> str:
    return slots.typecode if isinstance(slots, array) else slots.format


def _unset(pos: int) -> tuple[str, bool]:  # pragma: no cover - the sparse form never reads a key
    raise AssertionError("the compact id table has no key function")


class IdTable:
    """Strings by position (0, 1, ...), with the latest position of each string. Not thread-safe: one
    parse builds it, then it is read only (continuations copy it first), but for what `string` keeps of
    the strings it reads again (one dict store, one tuple: safe for concurrent readers)."""

    __slots__ = ("map", "raw", "_hash", "_slots", "_mask", "_key", "_held", "_last")

    def __init__(self) -> None:
        #: sparse form: string -> latest position, and position -> string; both None in the compact form.
        self.map: dict[str, int] | None = {}
        self.raw: list[str] | None = []
        self._hash = array("I")  # the low 32 bits of each string's hash()
        self._slots: Slots = array("i")  # widened to "q" past 2**31 positions
        self._mask = 0
        #: compact form: reads the string at a position from its line, and whether to keep it (a long line);
        #: `_held` the strings kept as strs
        self._key: Callable[[int], tuple[str, bool]] = _unset
        self._held: dict[int, str] = {}
        #: the last string read with `_key` and its position (one tuple: a reader in another thread sees
        #: both or neither): many lookups in a row meeting one id (forks off one entry) read its line once
        self._last: tuple[int, str] = (-1, "")

    def __len__(self) -> int:
        return len(self.raw) if self.raw is not None else len(self._hash)

    @property
    def compact_form(self) -> bool:
        return self.map is None

    def copy(self, key: Callable[[int], tuple[str, bool]]) -> IdTable:
        """An independent copy (the continuation of a parse extends a copy; the original stays valid) that
        reads its strings with `key` (over the copy of the line index)."""
        other = IdTable.__new__(IdTable)
        other.map = None if self.map is None else self.map.copy()
        other.raw = None if self.raw is None else self.raw.copy()
        other._hash = array(self._hash.typecode, self._hash)
        other._slots = _copy_slots(self._slots)
        other._mask = self._mask
        other._key = key if self.map is None else _unset
        other._held = dict(self._held)
        other._last = (-1, "")
        return other

    # -- the two forms -----------------------------------------------------------------------------------

    def compact(self, key: Callable[[int], tuple[str, bool]]) -> None:
        """Switch to the compact form (idempotent), reading strings with `key` from then on. O(positions)."""
        if self.map is None:
            return
        raw = self.raw
        assert raw is not None
        self.map = None
        self.raw = None
        self._key = key
        self._grow_to(len(raw))
        for s in raw:
            self.add(s)

    def _grow_to(self, n: int) -> None:
        size = 8
        while size < 2 * (n + 1):
            size *= 2
        if size <= len(self._slots):
            return
        old = self._slots
        code: Literal["i", "q"] = "i" if size <= _MAX_SLOT else "q"
        self._slots = _new_slots(size, code)
        self._mask = size - 1
        mask = self._mask
        slots = self._slots
        hashes = self._hash
        for j in old:
            if j != _EMPTY:
                s = hashes[j] & mask
                while slots[s] != _EMPTY:
                    s = (s + 1) & mask
                slots[s] = j
        del old

    def _find(self, value: str, h: int) -> tuple[int, int]:
        """(slot, latest position) of `value`, whose hash is `h` (its low 32 bits, as the table keeps them);
        position -1 when absent (the slot is then the empty one it would take)."""
        mask = self._mask
        slots = self._slots
        hashes = self._hash
        s = h & mask
        while True:
            j = slots[s]
            if j == _EMPTY:
                return s, -1
            if hashes[j] == h and self.string(j) == value:
                return s, j
            s = (s + 1) & mask

    # -- the API -------------------------------------------------------------------------------------------

    def add(self, value: str) -> int:
        """Append `value` at the next position; returns the latest earlier position of the same string, or -1."""
        m = self.map
        raw = self.raw
        if m is not None and raw is not None:
            prev = m.get(value, _EMPTY)
            m[value] = len(raw)
            raw.append(value)
            return prev
        # The compact form: the probe of `_find`, inline (one call per id on the parse's path).
        h = _HASH(value) & _LOW32
        hashes = self._hash
        pos = len(hashes)
        if 2 * (pos + 1) > len(self._slots):
            self._grow_to(pos + 1)
        slots = self._slots
        mask = self._mask
        s = h & mask
        j = slots[s]
        while j != _EMPTY:
            if hashes[j] == h and self.string(j) == value:
                break
            s = (s + 1) & mask
            j = slots[s]
        hashes.append(h)
        slots[s] = pos  # the latest position of this string
        return j

    def get(self, value: str) -> int:
        """The latest position of `value`, or -1."""
        m = self.map
        if m is not None:
            return m.get(value, _EMPTY)
        if not self._hash:
            return _EMPTY
        return self._find(value, _HASH(value) & _LOW32)[1]

    def string(self, pos: int) -> str:
        """The string at `pos` (0 <= pos < len)."""
        if self.raw is not None:
            return self.raw[pos]
        held = self._held
        if held:
            s = held.get(pos)
            if s is not None:
                return s
        last = self._last
        if last[0] == pos:
            return last[1]
        s, keep = self._key(pos)
        if keep:
            held[pos] = s  # a long line: read again once at most (one dict store: safe under concurrent reads)
        self._last = (pos, s)
        return s

    def latest_flags(self) -> bytearray:
        """One byte per position: 1 where the position is the latest of its string, else 0."""
        out = bytearray(len(self))
        if self.map is not None:
            for pos in self.map.values():
                out[pos] = 1
        else:
            for pos in self._slots:
                if pos != _EMPTY:
                    out[pos] = 1
        return out
