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
from typing import Any

from ._model import Entry, Item
from ._render import render_entry


class Forest:
    """Winning entries in file order: parent links, raw objects, in-place notices, rendered segments."""

    __slots__ = ("parent", "ids", "raw_ids", "lines", "objs", "pre", "line_notices", "names", "_items", "_rendered", "_segments")

    def __init__(
        self,
        parent: Sequence[int],
        ids: Sequence[str],
        raw_ids: Sequence[str],
        lines: Sequence[int],
        objs: Sequence[dict[str, Any]],
        pre: Sequence[Item | None],
        line_notices: tuple[Item, ...],
    ) -> None:
        self.parent = parent
        self.ids = ids
        self.raw_ids = raw_ids
        self.lines = lines
        self.objs = objs
        self.pre = pre  # the gap or loop notice that stands before entry i, if any
        self.line_notices = line_notices
        self.names: Sequence[str] = ()  # branch name of each entry, set once names are known
        n = len(ids)
        self._items: list[Item | None] = [None] * n
        self._rendered = bytearray(n)
        self._segments: list[tuple[Item, ...] | None] = [None] * n

    def item(self, i: int) -> Item | None:
        """Entry i's item (or the notice standing for it), None when hidden. Rendered once."""
        if not self._rendered[i]:
            self._items[i] = render_entry(self.objs[i], self.raw_ids[i], self.lines[i])
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
                while k < m and notices[k].line < item.line:
                    out.append(notices[k])
                    k += 1
                out.append(item)
        out.extend(notices[k:])
        return tuple(out)


class EntryMap(Mapping[str, Entry]):
    """`Parsed.entries`: namespaced id -> Entry, in file order, each Entry built on first access."""

    __slots__ = ("_forest", "_index", "_cache")

    def __init__(self, forest: Forest) -> None:
        self._forest = forest
        self._index = {nsid: i for i, nsid in enumerate(forest.ids)}
        self._cache: dict[int, Entry] = {}

    def __getitem__(self, key: str) -> Entry:
        i = self._index[key]
        entry = self._cache.get(i)
        if entry is None:
            f = self._forest
            obj = f.objs[i]
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
        return key in self._index
