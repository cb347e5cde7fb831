"""Unreadable lines as runs (the line notices built from them are `_line_notices`'s).

README rule 6: every unreadable line is reported at its file position on every branch. A run of
consecutive unreadable lines (blank, not JSON, ...) is ONE notice (`x.line-<first line>`, with the last line
in `through`), never one object per line: a file of blank lines would otherwise cost hundreds of bytes per
byte. The runs are three flat arrays (first line, count, reason), and the notice items are made
when a branch slice reaches them, so a parse holds about 24 bytes per run, whatever the file holds.
`Runs` needs nothing of the output model, so the model may name it (`Parsed.unreadable_lines`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import overload


class Runs(Sequence[int]):
    """The unreadable lines of a file, in order, stored as runs of consecutive lines.

    As a `Sequence[int]` it is every unreadable line (what `Parsed.unreadable_lines` promises), computed
    from the runs; it equals a tuple or list of the same lines. `runs()` gives (first, count) pairs.
    Built by `add` while the lines are decoded, then never changed (`copy` before extending).
    """

    __slots__ = ("_first", "_count", "_reason", "_total")

    def __init__(self) -> None:
        self._first = array("q")
        self._count = array("q")
        self._reason: list[str] = []
        self._total = 0

    def add(self, line: int, reason: str) -> None:
        """Record unreadable line `line` (greater than every line added so far)."""
        n = len(self._first)
        if n and self._first[n - 1] + self._count[n - 1] == line:
            self._count[n - 1] += 1
            if reason not in self._reason[n - 1]:  # a handful of fixed reasons, so this stays short
                self._reason[n - 1] = f"{self._reason[n - 1]}; {reason}"
        else:
            self._first.append(line)
            self._count.append(1)
            self._reason.append(reason)
        self._total += 1

    def add_many(self, line: int, count: int, reason: str) -> None:
        """Record the `count` unreadable lines from `line` on (all after every line added so far)."""
        self.add(line, reason)
        n = len(self._first)
        self._count[n - 1] += count - 1
        self._total += count - 1

    def add_run(self, first: int, count: int, reasons: str) -> None:
        """Record the `count` unreadable lines from `first` on (all after every line added so far), whose
        reasons are `reasons` ("; "-joined, each once, in the order first met)."""
        head, *rest = reasons.split("; ") if "; " in reasons else (reasons,)
        self.add_many(first, count, head)
        for reason in rest:
            if reason not in self._reason[-1]:
                self._reason[-1] = f"{self._reason[-1]}; {reason}"

    def copy(self) -> Runs:
        other = Runs()
        other._first = array("q", self._first)
        other._count = array("q", self._count)
        other._reason = list(self._reason)
        other._total = self._total
        return other

    def extend(self, other: Runs) -> None:
        """Add the lines of `other` (all after every line here)."""
        for first, count, reasons in zip(other._first, other._count, other._reason, strict=True):
            # A run that joins the last one here adds each of its reasons once, in order (as `add` would
            # have, line by line): never its joined list as one reason.
            self.add_run(first, count, reasons)

    @property
    def run_count(self) -> int:
        return len(self._first)

    def run(self, k: int) -> tuple[int, int, str]:
        """Run k: (first line, count, reasons)."""
        return self._first[k], self._count[k], self._reason[k]

    def runs(self) -> Iterator[tuple[int, int]]:
        """(first line, count) of each run, in file order."""
        return zip(self._first, self._count, strict=True)

    def last_line(self) -> int | None:
        n = len(self._first)
        return self._first[n - 1] + self._count[n - 1] - 1 if n else None

    def run_ending_at(self, line: int) -> tuple[int, int] | None:
        """(first, count) of the run whose last line is `line`, else None. O(log runs)."""
        k = bisect_right(self._first, line) - 1
        if k >= 0 and self._first[k] + self._count[k] - 1 == line:
            return self._first[k], self._count[k]
        return None

    def __len__(self) -> int:
        return self._total

    def __iter__(self) -> Iterator[int]:
        for first, count in zip(self._first, self._count, strict=True):
            yield from range(first, first + count)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice):
            return tuple(self)[index]
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError("unreadable line index out of range")
        for first, count in zip(self._first, self._count, strict=True):
            if index < count:
                return first + index
            index -= count
        raise IndexError("unreadable line index out of range")  # pragma: no cover

    def __contains__(self, line: object) -> bool:
        if not isinstance(line, int):
            return False
        k = bisect_right(self._first, line) - 1
        return k >= 0 and line < self._first[k] + self._count[k]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs):
            return (self._first, self._count) == (other._first, other._count)
        if isinstance(other, (tuple, list)):
            return len(other) == self._total and tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Runs({list(self.runs())!r})"
