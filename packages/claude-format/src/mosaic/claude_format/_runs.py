"""Unreadable lines as runs of consecutive lines (one malformed-line notice per run, never one per line).

A run is three entries of flat arrays (first line, count, reason code), so a file of blank lines costs a
few bytes per run, not hundreds per line (pi-format's README, "Hostile input", has the figures that made
it so there).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import overload

#: Why a line is unreadable (the reason codes the runs keep; a run keeps its first line's reason).
REASONS = ("blank", "not UTF-8", "not JSON", "not a JSON object")
BLANK, NOT_UTF8, NOT_JSON, NOT_OBJECT = range(4)


class Runs(Sequence[int]):
    """The unreadable lines of a transcript, in order, stored as runs. As a `Sequence[int]` it is every
    unreadable line; `runs()` gives (first, count) pairs. Built while the lines are read, then never
    changed (`copy` before extending)."""

    __slots__ = ("_first", "_count", "_reason", "_total")

    def __init__(self) -> None:
        self._first = array("q")
        self._count = array("q")
        self._reason = array("B")
        self._total = 0

    def add(self, line: int, count: int, reason: int) -> None:
        """Record the `count` unreadable lines from `line` on (after every line recorded so far)."""
        n = len(self._first)
        if n and self._first[n - 1] + self._count[n - 1] == line:
            self._count[n - 1] += count
        else:
            self._first.append(line)
            self._count.append(count)
            self._reason.append(reason)
        self._total += count

    def copy(self) -> Runs:
        other = Runs()
        other._first = array("q", self._first)
        other._count = array("q", self._count)
        other._reason = array("B", self._reason)
        other._total = self._total
        return other

    @property
    def run_count(self) -> int:
        return len(self._first)

    def ends_at(self) -> int:
        """The last unreadable line (0 when there is none)."""
        n = len(self._first)
        return self._first[n - 1] + self._count[n - 1] - 1 if n else 0

    def run(self, k: int) -> tuple[int, int, str]:
        """(first line, count, reason) of run `k`."""
        return self._first[k], self._count[k], REASONS[self._reason[k]]

    def first_line(self, k: int) -> int:
        return self._first[k]

    def runs(self) -> Iterator[tuple[int, int]]:
        return zip(self._first, self._count, strict=True)

    def run_ending_before(self, line: int) -> tuple[int, int] | None:
        """The run that ends exactly at `line - 1`, as (first, count), or None."""
        k = bisect_right(self._first, line - 1) - 1
        if k >= 0 and self._first[k] + self._count[k] == line:
            return self._first[k], self._count[k]
        return None

    def __len__(self) -> int:
        return self._total

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError("unreadable line index out of range")
        seen = 0
        for first, count in self.runs():
            if index < seen + count:
                return first + index - seen
            seen += count
        raise IndexError("unreadable line index out of range")  # pragma: no cover - counted above

    def __iter__(self) -> Iterator[int]:
        for first, count in self.runs():
            yield from range(first, first + count)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs):
            return (self._first, self._count) == (other._first, other._count)
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self.runs()))

    def __repr__(self) -> str:
        return f"Runs({list(self.runs())!r})"
