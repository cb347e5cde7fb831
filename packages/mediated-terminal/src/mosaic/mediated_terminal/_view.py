"""The transcript's reading position (brief §9 E1: the reading position is kept while a reply streams).

`ReadingView` is pure: it takes the transcript's rows as they are now (each named by its item and its
row within the item) and the window's height, and says which row is at the top. Its rules:

1. Following (the initial state): the view shows the last rows; new rows scroll into it.
2. PageUp scrolls up a page (the height less two rows of overlap), held at the top (when everything fits,
   it only stops following). Scrolled up, the view
   is anchored to the row at its top by name (the item's key and the row within it), not by index, so
   rows appended or growing below, or an item above that grows, never move what the reader is reading.
   If the anchored item leaves the transcript (a re-read replaced it), the view keeps its last index.
3. Scrolled up, ``new below`` counts the rows below the view's bottom that did not exist when the reader
   scrolled up (a row of an item exists already when its row index is below the item's row count then).
4. PageDown scrolls down a page; reaching the end follows again (rule 1) and the count goes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._render import Fragments

__all__ = ["ReadingView", "Row"]


@dataclass(frozen=True)
class Row:
    """One row of the transcript as drawn: its item's key, its index within that item, its fragments."""

    key: str
    offset: int
    fragments: Fragments


def _page(height: int) -> int:
    return max(1, height - 2)


class ReadingView:
    """Which row of the transcript is at the top of the window (module rules)."""

    def __init__(self) -> None:
        self.anchor: tuple[str, int] | None = None  # None: following the end
        self._start = 0
        self._baseline: dict[str, int] = {}  # rows per item when the reader scrolled up

    @property
    def following(self) -> bool:
        return self.anchor is None

    def window(self, rows: Sequence[Row], height: int) -> tuple[int, int | None]:
        """The index of the top row for a window `height` rows tall, and the count of new rows below the
        window (None while following)."""
        bottom = max(0, len(rows) - height)
        if self.anchor is None:
            self._start = bottom
            return bottom, None
        start = self._resolve(rows)
        start = max(0, min(start, bottom))
        self._start = start
        if start < len(rows):
            self.anchor = (rows[start].key, rows[start].offset)
        below = sum(1 for row in rows[start + height:] if row.offset >= self._baseline.get(row.key, 0))
        return start, below

    def _resolve(self, rows: Sequence[Row]) -> int:
        assert self.anchor is not None
        key, offset = self.anchor
        # The anchored row is usually near the last start: look there first, then everywhere.
        guess = min(self._start, len(rows) - 1)
        if 0 <= guess < len(rows) and rows[guess].key == key and rows[guess].offset == offset:
            return guess
        first = last = -1
        for i, row in enumerate(rows):
            if row.key == key:
                if first < 0:
                    first = i
                last = i
            elif first >= 0:
                break
        if first < 0:
            return self._start
        return min(first + offset, last)

    def page_up(self, rows: Sequence[Row], height: int) -> None:
        """Scroll up a page (rule 2). While the whole transcript fits, it holds the view where it is: rows
        that come later wait below instead of pushing it."""
        if not rows:
            return
        start, _ = self.window(rows, height)
        if self.anchor is None:
            self._baseline = {}
            for row in rows:
                self._baseline[row.key] = row.offset + 1
        start = max(0, start - _page(height))
        self._start = start
        self.anchor = (rows[start].key, rows[start].offset)

    def page_down(self, rows: Sequence[Row], height: int) -> None:
        """Scroll down a page; at the end, follow again (rule 4)."""
        if self.anchor is None:
            return
        start, _ = self.window(rows, height)
        start += _page(height)
        if start >= len(rows) - height:
            self.follow()
            return
        self._start = start
        self.anchor = (rows[start].key, rows[start].offset)

    def follow(self) -> None:
        """Follow the end again (rule 1)."""
        self.anchor = None
        self._baseline = {}
