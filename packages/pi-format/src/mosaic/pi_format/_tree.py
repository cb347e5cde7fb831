"""The shared tree behind every branch, as flat arrays, and the walk that lays out a branch's items.

The entries of the tree are the *winners*: the records of the line index (`_lines.Index`) minus those whose
id a later record repeats (README rule 3). Winner w has a parent (`parent[w]`, -1 for a root), a flags
byte, the number of items on the path from its root to it (`count[w]`), its file line and the rank of the
branch whose own segment holds it (`branch[w]`); branch rank b starts at winner `bstart[b]` and ends at
`bleaf[b]` (rank 0 is main). All of them are arrays or bytearrays: no Python object per entry, whatever
the file's shape.

A branch's items are the segments of the winners on its root-to-leaf path (each contributes its in-place
notice, if any, then its item, if shown), merged with the file's line notices (malformed lines, and the
forked-from notice on line 1) by file position. The same line notices go on every branch, after the leaf
too, so a branch's earlier items never change while the file grows (seed README, "Parser").

Items are named by *refs* (`Parsed.render`, `Branch.refs_from`): 2w for winner w's own item, 2w + 1 for the
notice standing before it (a missing parent or a loop's cut), -1 - k for line notice k. Nothing rendered is
kept here: an item is rendered from its line each time it is asked for (decoded text is never cached: it
would cost several times the file). A caller that revisits items keeps what it needs of them (chat-pages keeps parts' bytes).

Two ways to build the arrays:

- `place`, one pass in file order, when every parent precedes its child and every id is unique (the line
  index counted no duplicate and no late parent): what Pi writes, and how `parse_appended` adds lines;
- `build`, the general case (duplicate ids, children written before their parents, loops): the rules as
  separate linear passes over arrays (`_winners`, `_link_parents`, `_cut_loops`, `_first_children`,
  `_order`, `_name_entries`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._ids import BRANCH_PREFIX, HASH_PREFIX, MAIN_BRANCH, NATIVE_PREFIX, safe_id
from ._line_notices import LineNotices
from ._lines import KEPT, LONG_LINE, PBAD, PEND, SHOWS, Index
from ._model import LINES_CAP, Branch, Entry, Item, ItemJson
from ._rawrender import render_decoded, render_json
from ._render import describe, notice_item, render_entry

if TYPE_CHECKING:
    from ._runs import Runs

#: Winner bits of the flags byte (beside the record bits of `_lines`: SHOWS is shared).
GAP = 32  # the parent is missing: a notice stands before the entry
LOOP = 64  # a loop was cut here: a notice stands before the entry
HAS_CHILD = 128  # some entry names it as its parent (its first child continues its branch)
_PRE = PBAD | PEND | GAP | LOOP  # a notice stands before the entry (PBAD and PEND only while records are winners)

#: How many items a winner adds to a path, by its flags byte: its notice, plus 1 when it shows.
OWN = bytes((1 if f & _PRE else 0) + (f & SHOWS) for f in range(256))


class Forest:
    """The tree of one parse (see the module doc). Built by `place` or `build`, then read only."""

    __slots__ = ("ix", "wrec", "rec2win", "parent", "flags", "lines", "count", "branch", "bstart", "bleaf",
                 "line_notices", "loops", "_hashed_starts")

    def __init__(self, ix: Index, line_notices: LineNotices) -> None:
        tc = ix.tc
        self.ix = ix
        #: winner -> record and record -> winner (-1 for a superseded record); None where they are equal
        self.wrec: array[int] | None = None
        self.rec2win: array[int] | None = None
        self.parent: array[int] = ix.ppos
        self.flags: bytearray = ix.flags
        self.lines: array[int] = ix.line
        self.count: array[int] = array(tc)
        self.branch: array[int] = array(tc)
        self.bstart: array[int] = array(tc)
        self.bleaf: array[int] = array(tc)
        self.line_notices = line_notices
        self.loops: _Loops | None = None
        self._hashed_starts: dict[str, int] | None = None

    @property
    def n(self) -> int:
        """How many entries (winners) the tree holds."""
        return len(self.count)

    def copy(self, ix: Index, line_notices: LineNotices) -> Forest:
        """A copy over `ix` (a copy of this forest's index) that `place` can extend."""
        other = Forest.__new__(Forest)
        tc = ix.tc
        other.ix = ix
        other.line_notices = line_notices
        other.loops = self.loops
        other._hashed_starts = None
        if self.wrec is None:
            other.wrec = other.rec2win = None
            other.parent, other.flags, other.lines = ix.ppos, ix.flags, ix.line
        else:
            assert self.rec2win is not None
            other.wrec = array(tc, self.wrec)
            other.rec2win = array(tc, self.rec2win)
            other.parent = array(tc, self.parent)
            other.flags = bytearray(self.flags)
            other.lines = array(tc, self.lines)
        other.count = array(tc, self.count)
        other.branch = array(tc, self.branch)
        other.bstart = array(tc, self.bstart)
        other.bleaf = array(tc, self.bleaf)
        return other

    # -- ids and names ---------------------------------------------------------------------------------------

    def record(self, w: int) -> int:
        wrec = self.wrec
        return w if wrec is None else wrec[w]

    def raw_id(self, w: int) -> str:
        return self.ix.ids.string(self.record(w))

    def nsid(self, w: int) -> str:
        """Winner w's namespaced id (`n.<safe id>`)."""
        return NATIVE_PREFIX + safe_id(self.raw_id(w))

    def branch_name(self, b: int) -> str:
        return MAIN_BRANCH if b == 0 else BRANCH_PREFIX + safe_id(self.raw_id(self.bstart[b]))

    def branch_count(self) -> int:
        return max(1, len(self.bstart))

    def rank_of(self, name: str) -> int:
        """The rank of the branch named `name`, or -1."""
        if name == MAIN_BRANCH:
            return 0
        if not name.startswith(BRANCH_PREFIX) or not len(self.bstart):
            return -1
        safe = name[len(BRANCH_PREFIX):]
        if safe.startswith(HASH_PREFIX):
            # A hashed safe id cannot be turned back into its raw id: the starts with hashed ids are found
            # once (few files have any) and remembered.
            hashed = self._hashed_starts
            if hashed is None:
                hashed = {}
                for b in range(1, len(self.bstart)):
                    s = safe_id(self.raw_id(self.bstart[b]))
                    if s.startswith(HASH_PREFIX):
                        hashed[s] = b
                self._hashed_starts = hashed
            return hashed.get(safe, -1)
        r = self.ix.ids.get(safe)
        if r < 0:
            return -1
        w = r if self.rec2win is None else self.rec2win[r]
        if w < 0:
            return -1
        b = self.branch[w]
        return b if b and self.bstart[b] == w else -1

    # -- paths and the walk ----------------------------------------------------------------------------------

    def path(self, leaf: int) -> array[int]:
        """Winners from the root to `leaf` (-1: the empty path)."""
        out = array("q")
        parent = self.parent
        w = leaf
        # The parent links form a forest (loops were cut), so this ends within n steps.
        while w != -1:
            out.append(w)
            w = parent[w]
        out.reverse()
        return out

    def path_ids(self, leaf: int) -> tuple[str, ...]:
        return tuple(self.nsid(w) for w in self.path(leaf))

    def walk(self, path: Sequence[int], start: int, stop: int,
             marks: dict[int, tuple[int, int, int]] | None = None) -> list[int]:
        """The refs of `items[start:stop]` of the branch whose path is `path`, without rendering anything.

        Every item of winner w's segment sits at line `lines[w]`, so a line notice goes before w's segment
        exactly when its line is smaller. Winners before `start` are counted with `OWN`, never rendered.

        `marks` (one dict per branch, kept by the caller) maps an item position to where the merge stands
        there: (index in `path`, items of that winner's segment already taken, line notices taken). Each
        walk records where it stopped, and a walk that starts at a recorded position resumes there, so
        paging through a branch costs O(the page) at its end as at its start. Without a mark the
        walk starts at the root: O(depth + line notices). The marks are filled idempotently (threads at worst
        record the same mark twice).
        """
        if stop <= start:
            return []
        notices = self.line_notices
        flags = self.flags
        lines = self.lines
        own = OWN
        m = len(notices)
        n = len(path)
        j = off = k = pos = 0
        if marks is not None:
            mark = marks.get(start)
            if mark is not None:
                j, off, k = mark
                pos = start
        out: list[int] = []
        while j < n:
            w = path[j]
            f = flags[w]
            c = own[f]
            if not c:
                j += 1
                continue
            if not off:
                line = lines[w]
                while k < m and notices.line(k) < line:
                    if pos >= start:
                        out.append(-1 - k)
                    pos += 1
                    k += 1
                    if pos >= stop:
                        return _stopped(out, marks, pos, (j, 0, k))
                if pos + c <= start:
                    pos += c
                    j += 1
                    continue
            segment = (2 * w + 1, 2 * w) if f & _PRE else (2 * w,)
            while off < c:
                if pos >= start:
                    out.append(segment[off])
                pos += 1
                off += 1
                if pos >= stop:
                    return _stopped(out, marks, pos, (j + 1, 0, k) if off == c else (j, off, k))
            j += 1
            off = 0
        while k < m and pos < stop:
            if pos >= start:
                out.append(-1 - k)
            pos += 1
            k += 1
        return _stopped(out, marks, pos, (n, 0, k))

    # -- rendering -------------------------------------------------------------------------------------------

    def render(self, ref: int) -> Item:
        """The item `ref` names (module doc). Raises ValueError for a ref that names no item here."""
        if ref < 0:
            return self.line_notices[-1 - ref]
        w, pre = divmod(ref, 2)
        if not 0 <= w < self.n:
            raise ValueError(f"no item {ref} in this parse")
        if pre:
            item = self.pre_item(w)
        else:
            item = self.entry_item(w)
        if item is None:
            raise ValueError(f"no item {ref} in this parse")
        return item

    def entry_item(self, w: int) -> Item | None:
        """Winner w's item (or the notice standing for it), None when hidden. Decoded and rendered now."""
        value = self.ix.value(self.record(w))
        return render_entry(value, value["id"], self.lines[w])  # the raw id, as the id table has it

    def render_json(self, ref: int) -> ItemJson | None:
        """`render(ref)` as the JSON of its values cut from the line (`_rawrender`), or None (module doc
        there): only an entry's own item (an even ref) of a line msgspec read (not KEPT)."""
        if ref < 0 or ref & 1:
            return None
        w = ref >> 1
        if not w < self.n:
            raise ValueError(f"no item {ref} in this parse")
        ix = self.ix
        r = self.record(w)
        if ix.flags[r] & KEPT:
            return None
        buf, a, b = ix.span(r)
        if b - a >= LONG_LINE:
            e = ix.long.get((id(buf), a))
            if e is not None:  # read with its head: not read again
                return render_decoded(e, buf, a, b, self.raw_id(w), self.lines[w])
        return render_json(buf, a, b, self.raw_id(w), self.lines[w])

    def pre_item(self, w: int) -> Item | None:
        """The notice standing before winner w (its parent is missing, or a loop was cut there), or None."""
        f = self.flags[w]
        if not f & _PRE:
            return None
        raw = self.raw_id(w)
        safe = safe_id(raw)
        line = self.lines[w]
        nsid = NATIVE_PREFIX + safe
        if f & LOOP:
            assert self.loops is not None
            lines = tuple(self.lines[x] for x in self.loops.members(w))
            shown = ", ".join(str(x) for x in lines[:10]) + (", ..." if len(lines) > 10 else "")
            return notice_item("loop", "loop", safe, line,
                               f"the parent links of the entries at lines {shown} form a loop; the history stops here",
                               nsid, lines)
        return gap_notice(self.ix.head(self.record(w)), safe, nsid, line, self.line_notices.runs)

    def value(self, w: int) -> dict[str, Any]:
        return self.ix.value(self.record(w))


def _stopped(out: list[int], marks: dict[int, tuple[int, int, int]] | None, pos: int,
             mark: tuple[int, int, int]) -> list[int]:
    if marks is not None:
        marks[pos] = mark
    return out


def gap_notice(pid: Any, safe: str, nsid: str, line: int, unreadable: Runs) -> Item:
    """The missing-parent notice of the entry at `line` whose parentId is `pid` (README rule 7)."""
    run = unreadable.run_ending_at(line - 1)
    # The lines listed are the LINES_CAP nearest the orphan; the message states the whole run.
    nearby = [] if run is None else list(range(max(run[0], line - LINES_CAP), line))
    if isinstance(pid, str):
        message = f"the parent {describe(pid)} of the entry at line {line} is missing"
    else:
        message = f"the entry at line {line} has a parentId that is {describe(pid)}, not an id"
    if run is not None:
        span = str(run[0]) if run[1] == 1 else f"{run[0]}-{line - 1} ({run[1]} lines)"
        plural = "line" if run[1] == 1 else "lines"
        message += f"; unreadable {plural} {span} just before it are the likely place of the parent"
    message += "; the history stops here and is not joined across the gap"
    return notice_item("missing-parent", "gap", safe, line, message, nsid, tuple(nearby))


class _Loops:
    """The members of each loop, by the winner where it was cut (flat arrays, bisected)."""

    __slots__ = ("cuts", "ends", "members_")

    def __init__(self, loops: list[tuple[int, array[int]]]) -> None:
        loops.sort()
        self.cuts = array("q", (c for c, _ in loops))
        self.ends = array("q")
        self.members_ = array("q")
        for _, members in loops:
            self.members_.extend(sorted(members))
            self.ends.append(len(self.members_))

    def members(self, cut: int) -> array[int]:
        k = bisect_left(self.cuts, cut)
        a = self.ends[k - 1] if k else 0
        return self.members_[a:self.ends[k]]


# --- building ---------------------------------------------------------------------------------------------


def place(forest: Forest, r0: int) -> dict[int, list[int]]:
    """Add records r0.. of the forest's index as winners, in file order (README rule 5: the earliest child
    continues its parent's branch; each later child and each root starts one). Every parent must precede
    its child and every id be new (the index's `dups` and `late` are 0 for these records). Returns, for
    each branch that existed before and grew at its leaf, the winners appended to it."""
    ix = forest.ix
    grown: dict[int, list[int]] = {}
    n_old_branches = len(forest.bstart)
    count, branch, bstart, bleaf = forest.count, forest.branch, forest.bstart, forest.bleaf
    flags, parent, lines = forest.flags, forest.parent, forest.lines
    own = OWN
    # Winners are the records (`wrec` None: the flags and parents read with the lines are the tree's), or,
    # after an earlier duplicate id, each new record becomes a new winner with its own flags and parent.
    wrec, rec2win = forest.wrec, forest.rec2win
    rflags, ppos, rline = ix.flags, ix.ppos, ix.line
    for r in range(r0, len(ix)):
        if wrec is None or rec2win is None:
            w = r
            f = flags[w]
            p = parent[w]
        else:
            w = len(wrec)
            wrec.append(r)
            rec2win.append(w)
            rf = rflags[r]
            f = (rf & SHOWS) | (GAP if rf & (PBAD | PEND) else 0)
            q = ppos[r]
            p = rec2win[q] if q >= 0 else -1
            flags.append(f)
            parent.append(p)
            lines.append(rline[r])
        if p >= 0:
            pf = flags[p]
            count.append(own[f] + count[p])
            if pf & HAS_CHILD:
                b = len(bstart)
                bstart.append(w)
                bleaf.append(w)
            else:
                flags[p] = pf | HAS_CHILD
                b = branch[p]
                bleaf[b] = w
                if b < n_old_branches:
                    grown.setdefault(b, []).append(w)
        else:
            count.append(own[f])
            b = len(bstart)
            bstart.append(w)
            bleaf.append(w)
        branch.append(b)
    return grown


def build(ix: Index, line_notices: LineNotices) -> tuple[Forest, list[int]]:
    """The tree of the index's records in the general case (duplicates, late parents, loops): each rule a
    linear pass over arrays. Returns the forest and the superseded records (README rule 3), in file order."""
    forest = Forest(ix, line_notices)
    superseded = _winners(forest)
    _link_parents(forest)
    _cut_loops(forest)
    first = _first_children(forest)
    _name_entries(forest, first, _order(forest))
    return forest, superseded


def _winners(forest: Forest) -> list[int]:
    """README rule 3: where an id repeats, the later entry wins (Pi's byId, session-manager.js 694). The
    winners get their own arrays; returns the superseded records."""
    ix = forest.ix
    tc = ix.tc
    n_rec = len(ix)
    # Identity maps when no id repeats: a tree built here is always continued as one whose winners are not
    # its records (`place`), since its parents are no longer the ones read with the lines.
    latest = ix.ids.latest_flags() if ix.dups else b"\x01" * n_rec
    wrec = array(tc)
    rec2win = array(tc, [-1]) * n_rec
    superseded: list[int] = []
    for r in range(n_rec):
        if latest[r]:
            rec2win[r] = len(wrec)
            wrec.append(r)
        else:
            superseded.append(r)
    n = len(wrec)
    forest.wrec, forest.rec2win = wrec, rec2win
    forest.parent = array(tc, [-1]) * n
    forest.flags = bytearray(n)
    lines = array(tc)
    rflags, rline, flags = ix.flags, ix.line, forest.flags
    for w in range(n):
        r = wrec[w]
        flags[w] = rflags[r]
        lines.append(rline[r])
    forest.lines = lines
    return superseded


def _link_parents(forest: Forest) -> None:
    """README rules 2 and 7: each winner's parent, or a gap when its parent is missing.

    A parentId null or absent makes a root (FACTS.md loader quirk 4). A string parentId names the winner of
    that id (children of an earlier occurrence hang below the later one, README rule 3); one that names no
    entry, or that is neither a string nor null, is a missing parent: the entry becomes a root with a gap
    notice, never joined to the entries before it (seed "Parser")."""
    ix = forest.ix
    ids = ix.ids
    rec2win = forest.rec2win
    flags, parent, ppos = forest.flags, forest.parent, ix.ppos
    dups = ix.dups
    for w in range(forest_size(forest)):
        r = forest.record(w)
        f = flags[w]
        q = ppos[r]
        if q >= 0:
            if dups:
                q = ids.get(ids.string(q))  # the winner of the id the parentId named
            parent[w] = q if rec2win is None else rec2win[q]
        elif f & PBAD:
            f |= GAP
        flags[w] = f & ~(PBAD | PEND | 128)
    pend = ix.pend
    for k, r in enumerate(ix.pend_rec):
        w = r if rec2win is None else rec2win[r]
        if w < 0:
            continue  # a superseded record
        q = ids.get(pend.string(k))
        if q >= 0:
            parent[w] = q if rec2win is None else rec2win[q]  # a parent written after its child
        else:
            flags[w] |= GAP


def forest_size(forest: Forest) -> int:
    return len(forest.flags)


def _cut_loops(forest: Forest) -> None:
    """README rule 8: cut every loop of parent links once, at its member earliest in the file.

    Pi's getBranch walks a loop forever (FACTS.md quirk 6). The cut member becomes a root with a loop notice
    listing the loop's members. Parent links form a functional graph, so one pass with three colours finds
    every loop in O(n) and never walks one twice."""
    parent = forest.parent
    n = forest_size(forest)
    state = bytearray(n)  # 0 unseen, 1 on the current walk, 2 done
    walk = array("q")
    loops: list[tuple[int, array[int]]] = []
    for i in range(n):
        if state[i]:
            continue
        del walk[:]
        j = i
        while j != -1 and state[j] == 0:
            state[j] = 1
            walk.append(j)
            j = parent[j]
        if j != -1 and state[j] == 1:
            cycle = walk[walk.index(j):]
            cut = min(cycle)
            parent[cut] = -1
            forest.flags[cut] |= LOOP
            loops.append((cut, cycle))
        for w in walk:
            state[w] = 2
    if loops:
        forest.loops = _Loops(loops)


def _first_children(forest: Forest) -> array[int]:
    """README rule 5: each winner's first child in file order (the one that continues its branch), -1 for
    none."""
    parent, flags = forest.parent, forest.flags
    n = forest_size(forest)
    first = array(forest.ix.tc, [-1]) * n
    for w in range(n):
        p = parent[w]
        if p >= 0 and first[p] < 0:
            first[p] = w
            flags[p] |= HAS_CHILD
    return first


def _order(forest: Forest) -> Iterator[int] | range:
    """The winners, every parent before its children: file order when no parent comes after its child,
    else a walk down from each root (the children as flat arrays)."""
    parent = forest.parent
    n = forest_size(forest)
    if all(parent[w] < w for w in range(n)):
        return range(n)
    tc = forest.ix.tc
    # Children of each winner in file order, as offsets into one array (counting sort).
    ends = array(tc, [0]) * (n + 1)
    for w in range(n):
        if parent[w] >= 0:
            ends[parent[w] + 1] += 1
    for w in range(n):
        ends[w + 1] += ends[w]
    fill = array(tc, ends)
    kids = array(tc, [0]) * ends[n]
    for w in range(n):
        p = parent[w]
        if p >= 0:
            kids[fill[p]] = w
            fill[p] += 1
    order = array(tc)
    stack = array(tc, (w for w in range(n - 1, -1, -1) if parent[w] < 0))
    while stack:
        w = stack.pop()
        order.append(w)
        for x in range(ends[w + 1] - 1, ends[w] - 1, -1):
            stack.append(kids[x])
    return iter(order)


def _name_entries(forest: Forest, first: array[int], order: Iterator[int] | range) -> None:
    """README rule 5: branch ranks and item counts. The first root's branch is main (rank 0) whatever kind
    of root it is; each later root and each later child at a fork starts a branch, ranked in file order of
    the entries that start them; the earliest child continues its parent's branch. `order` has every parent
    before its children."""
    parent, flags = forest.parent, forest.flags
    n = forest_size(forest)
    tc = forest.ix.tc
    rank = array(tc, [-1]) * n
    bstart = forest.bstart
    main = next((w for w in range(n) if parent[w] < 0), -1)
    if main >= 0:
        bstart.append(main)
        rank[main] = 0
        for w in range(n):
            p = parent[w]
            if w != main and (p < 0 or first[p] != w):
                rank[w] = len(bstart)
                bstart.append(w)
    count = array(tc, [0]) * n
    branch = array(tc, [0]) * n
    bleaf = array(tc, bstart)
    own = OWN
    for w in order:
        p = parent[w]
        c = own[flags[w]]
        b = rank[w]
        if p >= 0:
            c += count[p]
            if b < 0:
                b = branch[p]
        count[w] = c
        branch[w] = b
        bleaf[b] = w
    forest.count, forest.branch, forest.bleaf = count, branch, bleaf


# --- the mappings of a result -----------------------------------------------------------------------------


class EntryMap(Mapping[str, Entry]):
    """`Parsed.entries`: namespaced id -> Entry, in file order, each Entry built on first access."""

    __slots__ = ("_forest", "_index", "_cache")

    def __init__(self, forest: Forest) -> None:
        self._forest = forest
        self._index: dict[str, int] | None = None  # built on first lookup: a follow may never look one up
        self._cache: dict[int, Entry] = {}

    def _lookup(self) -> dict[str, int]:
        if self._index is None:
            f = self._forest
            self._index = {f.nsid(w): w for w in range(f.n)}
        return self._index

    def __getitem__(self, key: str) -> Entry:
        w = self._lookup()[key]
        entry = self._cache.get(w)
        if entry is None:
            f = self._forest
            obj = f.value(w)
            etype = obj.get("type")
            timestamp = obj.get("timestamp")
            p = f.parent[w]
            entry = Entry(
                id=f.nsid(w),
                raw_id=f.raw_id(w),
                type=etype if isinstance(etype, str) else None,
                line=f.lines[w],
                timestamp=timestamp if isinstance(timestamp, str) else None,
                parent=None if p == -1 else f.nsid(p),
                raw_parent_id=obj.get("parentId"),
                branch=f.branch_name(f.branch[w]),
                _forest=f,
                _index=w,
            )
            self._cache[w] = entry
        return entry

    def __iter__(self) -> Iterator[str]:
        f = self._forest
        return (f.nsid(w) for w in range(f.n))

    def __len__(self) -> int:
        return self._forest.n

    def __contains__(self, key: object) -> bool:
        return key in self._lookup()


class BranchMap(Mapping[str, Branch]):
    """`Parsed.branches`: name -> Branch, main first, then in the file order of the entries that start them.

    A Branch is made when first asked for (by name or by iteration) and kept (it remembers where its slices
    stopped), so a file of 100,000 roots holds no object per branch until a caller wants one."""

    __slots__ = ("_forest", "_cache")

    def __init__(self, forest: Forest, cache: dict[int, Branch] | None = None) -> None:
        self._forest = forest
        self._cache: dict[int, Branch] = {} if cache is None else cache

    def _make(self, b: int) -> Branch:
        f = self._forest
        n_line = len(f.line_notices)
        if not f.n:
            return Branch(MAIN_BRANCH, None, None, None, None, n_line, f, -1)
        start, leaf = f.bstart[b], f.bleaf[b]
        p = f.parent[start]
        return Branch(
            name=f.branch_name(b),
            leaf=f.nsid(leaf),
            start=f.nsid(start),
            parent_branch=None if p == -1 else f.branch_name(f.branch[p]),
            fork_point=None if p == -1 else f.nsid(p),
            item_count=f.count[leaf] + n_line,
            _forest=f,
            _leaf_index=leaf,
        )

    def cached(self) -> list[tuple[int, Branch]]:
        """The branches made so far, by rank (a continuation carries their paths and marks over)."""
        return list(self._cache.items())

    def rank(self, b: int) -> Branch:
        branch = self._cache.get(b)
        if branch is None:
            branch = self._cache[b] = self._make(b)
        return branch

    def __getitem__(self, key: str) -> Branch:
        b = self._forest.rank_of(key) if isinstance(key, str) else -1
        if b < 0 or b >= self._forest.branch_count():
            raise KeyError(key)
        return self.rank(b)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and 0 <= self._forest.rank_of(key) < self._forest.branch_count()

    def __iter__(self) -> Iterator[str]:
        f = self._forest
        return (f.branch_name(b) for b in range(f.branch_count()))

    def __len__(self) -> int:
        return self._forest.branch_count()

    def values(self) -> Iterator[Branch]:  # type: ignore[override]
        # Each Branch is made when iteration reaches it and kept, like one asked for by name (the same object
        # either way): a caller that stops early (the reader's view takes 100) makes no more.
        return (self.rank(b) for b in range(self._forest.branch_count()))

    def items(self) -> Iterator[tuple[str, Branch]]:  # type: ignore[override]
        return ((b.name, b) for b in self.values())
