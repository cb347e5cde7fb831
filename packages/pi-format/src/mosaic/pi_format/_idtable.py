"""IdTable: a sequence of strings (raw ids), position by position, and the latest position of each.

The parse needs, for every valid entry line, its raw id by position (for its item id and branch name) and
the latest position of an id (to resolve a parentId and to see a repeated id: README rule 3, the later
entry wins).
A Python dict of str -> int costs about 150 bytes per id (the dict slot, the str, the int), which is
nothing beside an entry of a normal session (1-2 KB) but three times a tiny entry's line: a file of a
million 53-byte labels would cost 20x its size. So the table has two forms, chosen by density:

- **sparse** (the start, and every file whose lines average more than `DENSE_BYTES`): the dict, and a list
  of the id strs by position (the same str objects as the dict's keys). Fastest: one dict operation.
- **compact** (`compact()`, called by the line index once the records are dense): no object per id. The
  ids' UTF-8 bytes (surrogatepass, so lone surrogates round-trip) in one bytearray with an array of their
  ends, the low 32 bits of each id's `hash()` in an array, and an open-addressing table of positions
  (linear probing, load at most 1/2). Each array holds 4-byte items while its values fit (widened to 8
  bytes past 2**31 ids or 4 GiB of id bytes): about 17-25 bytes plus the id's length per id (issue 34:
  8-byte items cost 33-41). A lookup is a few array reads in Python and a bytes comparison for the id
  itself, so a hash collision (of the full hash or of its low bits) never merges two ids.

Both forms answer the same: `add`, `get`, `string`, `latest_flags`. Positions are never removed.
"""

from __future__ import annotations

from array import array

#: A form switch is considered when the records average fewer bytes than this (about what the sparse
#: form costs per id, so its ids never cost more than about the bytes they came from).
DENSE_BYTES = 192

_EMPTY = -1
_LOW32 = 0xFFFFFFFF
#: The largest table size whose positions 4-byte slots hold, and the most id bytes 4-byte ends hold; past
#: them the arrays widen to 8-byte items (read at call time: tests lower them to run the widening).
_MAX_SLOT = (1 << 31) - 1
_MAX_END = _LOW32


class IdTable:
    """Strings by position (0, 1, ...), with the latest position of each string. Not thread-safe: one
    parse builds it, then it is read only (continuations copy it first)."""

    __slots__ = ("map", "raw", "_blob", "_ends", "_hash", "_slots", "_mask")

    def __init__(self) -> None:
        #: sparse form: string -> latest position, and position -> string; both None in the compact form.
        self.map: dict[str, int] | None = {}
        self.raw: list[str] | None = []
        self._blob = bytearray()
        self._ends = array("I")  # widened to "Q" past 4 GiB of id bytes
        self._hash = array("I")  # the low 32 bits of each id's hash()
        self._slots = array("i")  # widened to "q" past 2**31 positions
        self._mask = 0

    def __len__(self) -> int:
        return len(self.raw) if self.raw is not None else len(self._ends)

    @property
    def compact_form(self) -> bool:
        return self.map is None

    def copy(self) -> IdTable:
        """An independent copy (the continuation of a parse extends a copy; the original stays valid)."""
        other = IdTable.__new__(IdTable)
        other.map = None if self.map is None else self.map.copy()
        other.raw = None if self.raw is None else self.raw.copy()
        other._blob = bytearray(self._blob)
        other._ends = array(self._ends.typecode, self._ends)
        other._hash = array(self._hash.typecode, self._hash)
        other._slots = array(self._slots.typecode, self._slots)
        other._mask = self._mask
        return other

    # -- the two forms -----------------------------------------------------------------------------------

    def compact(self) -> None:
        """Switch to the compact form (idempotent). O(positions)."""
        if self.map is None:
            return
        raw = self.raw
        assert raw is not None
        self.map = None
        self.raw = None
        self._grow_to(len(raw))
        for s in raw:
            self._append(s)

    def _grow_to(self, n: int) -> None:
        size = 8
        while size < 2 * (n + 1):
            size *= 2
        if size <= len(self._slots):
            return
        old = self._slots
        self._slots = array("i" if size <= _MAX_SLOT else "q", [_EMPTY]) * size
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

    def _find(self, enc: bytes, h: int) -> tuple[int, int]:
        """(slot, latest position) of the string whose UTF-8 is `enc` and hash `h` (its low 32 bits, as
        the table keeps them); position -1 when absent (the slot is then the empty one it would take)."""
        mask = self._mask
        slots = self._slots
        hashes = self._hash
        ends = self._ends
        blob = self._blob
        s = h & mask
        while True:
            j = slots[s]
            if j == _EMPTY:
                return s, -1
            if hashes[j] == h:
                a = ends[j - 1] if j else 0
                if blob[a:ends[j]] == enc:
                    return s, j
            s = (s + 1) & mask

    def _append(self, value: str) -> int:
        enc = value.encode("utf-8", "surrogatepass")
        h = hash(value) & _LOW32
        pos = len(self._ends)
        if 2 * (pos + 1) > len(self._slots):
            self._grow_to(pos + 1)
        s, prev = self._find(enc, h)
        self._blob += enc
        if len(self._blob) > _MAX_END and self._ends.typecode == "I":
            self._ends = array("Q", self._ends)
        self._ends.append(len(self._blob))
        self._hash.append(h)
        self._slots[s] = pos  # the latest position of this string
        return prev

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
        return self._append(value)

    def get(self, value: str) -> int:
        """The latest position of `value`, or -1."""
        m = self.map
        if m is not None:
            return m.get(value, _EMPTY)
        if not self._ends:
            return _EMPTY
        return self._find(value.encode("utf-8", "surrogatepass"), hash(value) & _LOW32)[1]

    def string(self, pos: int) -> str:
        """The string at `pos` (0 <= pos < len)."""
        if self.raw is not None:
            return self.raw[pos]
        ends = self._ends
        a = ends[pos - 1] if pos else 0
        return self._blob[a:ends[pos]].decode("utf-8", "surrogatepass")

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
