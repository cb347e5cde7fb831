"""The shared tree behind every branch, lazy rendering, and the merge that places line notices.

A branch's items are the segments of the entries on its root-to-leaf path (each entry contributes its
in-place notice, if any, then its item, if shown), merged with the file's line notices (malformed lines,
and the forked-from notice on line 1) by file position. The same line notices go on every branch, after the
leaf too, so a branch's earlier items never change while the file grows (seed README, "Parser").

Entries are rendered on first use and cached here, so `parse` costs little more than decoding the lines,
and materialising one branch walks its path once: O(depth + line notices). Nothing walks every branch.
The caches are filled idempotently, so concurrent readers at worst render an entry twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from ._lines import Record
from ._model import Entry, Item
from ._render import render_entry
from ._runs import LineNotices


class Forest:
    """Winning entries in file order: parent links, raw objects, in-place notices, rendered segments."""

    __slots__ = ("parent", "ids", "raw_ids", "lines", "recs", "pre", "line_notices", "names", "own", "_items",
                 "_rendered", "_segments")

    def __init__(
        self,
        parent: Sequence[int],
        ids: Sequence[str],
        raw_ids: Sequence[str],
        lines: Sequence[int],
        recs: Sequence[Record],
        pre: Sequence[Item | None],
        line_notices: LineNotices,
        own: Sequence[int],
    ) -> None:
        self.parent = parent
        self.ids = ids
        self.raw_ids = raw_ids
        self.lines = lines
        self.recs = recs  # each entry's line record: where its bytes are, and its value when kept
        self.pre = pre  # the gap or loop notice that stands before entry i, if any
        self.line_notices = line_notices
        self.names: Sequence[str] = ()  # branch name of each entry, set once names are known
        # How many items entry i adds to a path (its in-place notice, plus 1 when it shows): known from the
        # raw object without rendering (render.shows agrees with render_entry), so a slice of a branch can
        # be located without rendering what comes before it.
        self.own = own
        n = len(ids)
        self._items: list[Item | None] = [None] * n
        self._rendered = bytearray(n)
        self._segments: list[tuple[Item, ...] | None] = [None] * n

    def keep_rendered(self, old: Forest) -> None:
        """Take over what `old` rendered: its entries are this forest's first entries, unchanged."""
        k = len(self.ids) - len(old.ids)
        self._items = old._items + [None] * k
        self._rendered = old._rendered + bytearray(k)
        self._segments = old._segments + [None] * k

    def item(self, i: int) -> Item | None:
        """Entry i's item (or the notice standing for it), None when hidden. Rendered once."""
        if not self._rendered[i]:
            # The entry's line is decoded in full only now (README, "Complexity"), and not kept.
            self._items[i] = render_entry(self.recs[i].value(), self.raw_ids[i], self.lines[i])
            self._rendered[i] = 1
        return self._items[i]

    def segment(self, i: int) -> tuple[Item, ...]:
        seg = self._segments[i]
        if seg is None:
            pre = self.pre[i]
            item = self.item(i)
            parts = [x for x in (pre, item) if x is not None]
            seg = tuple(parts)
            self._segments[i] = seg
        return seg

    def _path(self, leaf: int) -> list[int]:
        path: list[int] = []
        i = leaf
        # The parent links form a forest (loops were cut in _parse), so this ends within len(parent) steps.
        while i != -1:
            path.append(i)
            i = self.parent[i]
        path.reverse()
        return path

    def path(self, leaf: int) -> list[int]:
        """Entry indices root to leaf (leaf -1: the empty path)."""
        return self._path(leaf)

    def path_ids(self, leaf: int) -> tuple[str, ...]:
        return tuple(self.ids[i] for i in self._path(leaf))

    def branch_items(self, leaf: int) -> tuple[Item, ...]:
        notices = self.line_notices
        k = 0
        m = len(notices)
        out: list[Item] = []
        for i in self._path(leaf):
            for item in self.segment(i):
                # A line notice goes before the first path item that sits after it in the file.
                while k < m and notices.line(k) < item.line:
                    out.append(notices[k])
                    k += 1
                out.append(item)
        out.extend(notices[k:])
        return tuple(out)

    def branch_slice(self, path: Sequence[int], start: int, stop: int,
                     marks: dict[int, tuple[int, int, int]] | None = None) -> tuple[Item, ...]:
        """`branch_items(leaf)[start:stop]` for the path of `leaf`, rendering only the entries in the slice.

        Same merge as `branch_items`: every item of entry i's segment sits at line `lines[i]`, so a line
        notice goes before entry i's segment exactly when its line is smaller. Entries before `start` are
        counted with `own`, never rendered.

        `marks` (one dict per branch, kept by the caller) maps an item position to where the merge stands
        there: (index in `path`, items of that entry's segment already taken, line notices taken). Each
        slice records where it stopped, and a slice that starts at a recorded position resumes there, so
        paging through a branch costs O(the page) at its end as at its start (issue 13). Without a mark the
        slice walks from the root: O(depth + line notices). The marks are filled idempotently (threads at
        worst record the same mark twice).
        """
        if stop <= start:
            return ()
        notices = self.line_notices
        own = self.own
        lines = self.lines
        m = len(notices)
        n = len(path)
        j = off = k = pos = 0
        if marks is not None:
            mark = marks.get(start)
            if mark is not None:
                j, off, k = mark
                pos = start
        out: list[Item] = []
        while j < n:
            i = path[j]
            c = own[i]
            if not c:
                j += 1
                continue
            if not off:
                line = lines[i]
                while k < m and notices.line(k) < line:
                    if pos >= start:
                        out.append(notices[k])
                    pos += 1
                    k += 1
                    if pos >= stop:
                        return self._stop(out, marks, pos, (j, 0, k))
                if pos + c <= start:
                    pos += c
                    j += 1
                    continue
            segment = self.segment(i)
            while off < c:
                if pos >= start:
                    out.append(segment[off])
                pos += 1
                off += 1
                if pos >= stop:
                    return self._stop(out, marks, pos, (j + 1, 0, k) if off == c else (j, off, k))
            j += 1
            off = 0
        while k < m and pos < stop:
            if pos >= start:
                out.append(notices[k])
            pos += 1
            k += 1
        return self._stop(out, marks, pos, (n, 0, k))

    @staticmethod
    def _stop(out: list[Item], marks: dict[int, tuple[int, int, int]] | None, pos: int,
              mark: tuple[int, int, int]) -> tuple[Item, ...]:
        if marks is not None:
            marks[pos] = mark
        return tuple(out)


class EntryMap(Mapping[str, Entry]):
    """`Parsed.entries`: namespaced id -> Entry, in file order, each Entry built on first access."""

    __slots__ = ("_forest", "_index", "_cache")

    def __init__(self, forest: Forest) -> None:
        self._forest = forest
        self._index: dict[str, int] | None = None  # built on first lookup: a follow may never look one up
        self._cache: dict[int, Entry] = {}

    def _lookup(self) -> dict[str, int]:
        if self._index is None:
            self._index = {nsid: i for i, nsid in enumerate(self._forest.ids)}
        return self._index

    def __getitem__(self, key: str) -> Entry:
        i = self._lookup()[key]
        entry = self._cache.get(i)
        if entry is None:
            f = self._forest
            obj = f.recs[i].value()
            etype = obj.get("type")
            timestamp = obj.get("timestamp")
            p = f.parent[i]
            entry = Entry(
                id=f.ids[i],
                raw_id=f.raw_ids[i],
                type=etype if isinstance(etype, str) else None,
                line=f.lines[i],
                timestamp=timestamp if isinstance(timestamp, str) else None,
                parent=None if p == -1 else f.ids[p],
                raw_parent_id=obj.get("parentId"),
                branch=f.names[i],
                _forest=f,
                _index=i,
            )
            self._cache[i] = entry
        return entry

    def __iter__(self) -> Iterator[str]:
        return iter(self._forest.ids)

    def __len__(self) -> int:
        return len(self._forest.ids)

    def __contains__(self, key: object) -> bool:
        return key in self._lookup()
