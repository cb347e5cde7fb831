"""The line notices every branch merges by file position, made from the unreadable runs on demand: the
forked-from notice on line 1 (if any), then one malformed-line notice per run (README rule 6; the runs are
`_runs.Runs`). Items are made when a branch slice reaches them, never held.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from ._ids import NOTICE_PREFIX
from ._model import Item, Notice
from ._runs import Runs


def run_notice(first: int, count: int, reason: str) -> Item:
    """The malformed-line notice of a run: `x.line-<first>`, at line `first`, through its last line."""
    nid = f"{NOTICE_PREFIX}line-{first}"
    last = first + count - 1
    if count == 1:
        message = f"line {first} is unreadable ({reason}) and skipped"
    else:
        message = f"lines {first}-{last} ({count} lines) are unreadable ({reason}) and skipped"
    return Item(nid, "notice", first, None,
                notice=Notice(nid, "malformed-line", message, first, through=last))


class LineNotices(Sequence[Item]):
    """The items every branch merges by file position: the forked-from notice on line 1 (if any), then
    one malformed-line notice per run. Items are made when asked for, never held."""

    __slots__ = ("_head", "_runs")

    def __init__(self, head: Item | None, runs: Runs) -> None:
        self._head = head
        self._runs = runs

    @property
    def runs(self) -> Runs:
        return self._runs

    @property
    def head(self) -> Item | None:
        return self._head

    def __len__(self) -> int:
        return (self._head is not None) + self._runs.run_count

    def line(self, k: int) -> int:
        """The line of notice k, without making the item."""
        if self._head is not None:
            if k == 0:
                return 1
            k -= 1
        return self._runs.run(k)[0]

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | Sequence[Item]:
        if isinstance(index, slice):
            return tuple(self[k] for k in range(*index.indices(len(self))))
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("line notice index out of range")
        if self._head is not None:
            if index == 0:
                return self._head
            index -= 1
        return run_notice(*self._runs.run(index))
