"""The tree behind every branch, built from the records in linear passes over flat arrays.

The rules (README, "Rules"), one pass each:

1. **Winners.** Where a uuid repeats, the later line wins (`Records.latest`); the earlier entry leaves the
   tree and its children hang below the winner, because they name it by uuid.
2. **Parents.** A null (or absent) parentUuid makes a root. A parentUuid no entry carries, or one that is
   neither a string nor null, is a missing parent: the entry becomes a root with a missing-parent notice
   before it, and the history before the gap is never joined to it. **Sidechains are kept apart**: an entry
   whose sidechain flag differs from its parent's becomes a root of its own branch (no notice), so no
   sidechain entry is ever on a branch of the main conversation, nor a main entry on a sidechain's.
3. **Loops** are cut once, at their member earliest in the file (a loop notice before it, listing the
   loop's lines). Finding them is one pass over the parent links; nothing walks a loop.
4. **Branches.** `main` is the branch of the first root in file order that is not a sidechain entry (the
   first root when every root is one: a subagent transcript). Each later root starts `b.<uuid>`, and at a
   fork the earliest child in file order continues its parent's branch while each later child starts
   `b.<uuid>`. Each leaf ends exactly one branch. Item counts are prefix sums along the tree.
5. **The default leaf** (FACTS §2, verified on the binary): the `leafUuid` of the last last-prompt line
   when it names an entry, else the last entry in file order that is not a sidechain entry (the last entry
   when all are), never by timestamp. The default branch is the branch that holds it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterator
from itertools import chain

from ._ids import BRANCH_PREFIX, HASH_PREFIX, MAIN_BRANCH, branch_name, native_id, safe_id
from ._lines import (
    ASSISTANT,
    ATTACHMENT,
    INVALID,
    KIND_MASK,
    PENDING,
    ROOT,
    SIDECHAIN,
    USER,
    Records,
    decode_full,
    piece_of,
)
from ._model import LINES_CAP, Branch, Item
from ._render import entry_item, gap_item, loop_item, other_line_item, run_item

#: Why an entry is a root: a null parentUuid, a missing parent, a loop's cut point, a sidechain boundary.
NONE, GAP, LOOP, SIDE = range(4)
_MISSING = -4
_KIND_NAMES = {USER: "user", ASSISTANT: "assistant"}


class Forest:
    """The tree of one snapshot: parents, branches and item counts as arrays, the bytes the entries are
    rendered from, and the walk that lays out a slice of a branch. Never changed once built."""

    def __init__(self, recs: Records, pieces: tuple[bytes, ...], bases: list[int]) -> None:
        self.recs = recs
        self.pieces = pieces
        self.bases = bases
        n = recs.entry_count
        self.n = n
        self.alive = bytearray(b"\x01") * n
        for i in recs.superseded:
            self.alive[i] = 0
        self.parent = array("i", [ROOT]) * n
        self.reason = bytearray(n)
        self.loops: dict[int, tuple[int, tuple[int, ...]]] = {}  # cut -> (size, first lines)
        self._link(recs)
        self._cut_loops()
        self._layout()

    # -- rules 1 to 3 -----------------------------------------------------------------------------------

    def _link(self, recs: Records) -> None:
        flags, ids, latest, alive = recs.flags, recs.ids, recs.latest, self.alive
        for i in range(self.n):
            if not alive[i]:
                continue
            p = recs.parent[i]
            if p >= 0:
                p = latest[ids[p]]
            elif p == PENDING:
                p = latest.get(recs.pending[i], _MISSING)
            elif p == INVALID:
                p = _MISSING
            if p == _MISSING:
                self.reason[i] = GAP
            elif p >= 0:
                if (flags[i] ^ flags[p]) & SIDECHAIN:
                    self.reason[i] = SIDE
                else:
                    self.parent[i] = p

    def _cut_loops(self) -> None:
        parent, alive, line = self.parent, self.alive, self.recs.line
        state = bytearray(self.n)  # 0 unseen, 1 on the walk now, 2 done
        walk = array("i")
        for i in range(self.n):
            if not alive[i] or state[i]:
                continue
            del walk[:]
            e = i
            while e >= 0 and state[e] == 0:
                state[e] = 1
                walk.append(e)
                e = parent[e]
            if e >= 0 and state[e] == 1:  # the walk came back to itself: a loop through e
                cut, m, size, first = e, parent[e], 1, walk.index(e)
                while m != e:
                    cut, m, size = min(cut, m), parent[m], size + 1
                # The loop's members are the walk from e on; the notice lists the first LINES_CAP lines.
                members = sorted(line[w] for w in walk[first:])[:LINES_CAP]
                parent[cut] = ROOT
                self.reason[cut] = LOOP
                self.loops[cut] = (size, tuple(members))
            for w in walk:
                state[w] = 2

    # -- rule 4 -----------------------------------------------------------------------------------------

    def _layout(self) -> None:
        n, parent, alive, flags, reason = self.n, self.parent, self.alive, self.recs.flags, self.reason
        first_child = array("i", [-1]) * n
        next_sibling = array("i", [-1]) * n
        for i in range(n - 1, -1, -1):
            p = parent[i]
            if alive[i] and p >= 0:
                next_sibling[i] = first_child[p]
                first_child[p] = i
        main = next((i for i in range(n) if alive[i] and parent[i] < 0 and not flags[i] & SIDECHAIN), -1)
        if main < 0:
            main = next((i for i in range(n) if alive[i] and parent[i] < 0), -1)
        self.main_root = main
        # A branch starts at each root and at each child that is not its parent's earliest: main first, then
        # the others in file order (so a branch's rank is found by bisection, with no map kept per branch).
        others = array("i", (i for i in range(n) if alive[i] and i != main
                             and (parent[i] < 0 or first_child[parent[i]] != i)))
        self.others = others
        self.leaves = array("i", [-1]) * (len(others) + (main >= 0))
        branch_of = array("i", [-1]) * n
        count = array("i", [0]) * n
        leaves = self.leaves
        for r in chain((main,) if main >= 0 else (), others):
            if parent[r] >= 0:
                continue  # a fork's start: reached from its root below
            branch_of[r] = self.rank_of(r)
            count[r] = (reason[r] in (GAP, LOOP)) + ((flags[r] & KIND_MASK) != ATTACHMENT)
            # A walk of the tree below r by its links alone (first child, next sibling, parent): no stack,
            # so a root with 100,000 children costs no list of them.
            e = r
            while True:
                c = first_child[e]
                if c >= 0:
                    branch_of[c] = branch_of[e]
                    count[c] = count[e] + ((flags[c] & KIND_MASK) != ATTACHMENT)
                    e = c
                    continue
                leaves[branch_of[e]] = e
                while e != r and next_sibling[e] < 0:
                    e = parent[e]
                if e == r:
                    break
                e = next_sibling[e]
                p = parent[e]
                branch_of[e] = self.rank_of(e)
                count[e] = count[p] + ((flags[e] & KIND_MASK) != ATTACHMENT)
        self.branch_of = branch_of
        self.count = count
        self.line_notices = self.recs.runs.run_count + len(self.recs.other_line)
        self._hashed: dict[str, int] | None = None

    def rank_of(self, start: int) -> int:
        """The rank of the branch `start` starts (0 for main)."""
        if start == self.main_root:
            return 0
        return 1 + bisect_left(self.others, start)

    @property
    def branch_count(self) -> int:
        return len(self.leaves) if self.n and self.main_root >= 0 else 1

    def start_of(self, k: int) -> int:
        return self.main_root if k == 0 else self.others[k - 1]

    def name(self, k: int) -> str:
        return MAIN_BRANCH if k == 0 else branch_name(self.recs.ids[self.others[k - 1]])

    def find(self, name: str) -> int | None:
        """The rank of the branch called `name`, or None: main, or `b.<safe id>` of a branch's start."""
        if name == MAIN_BRANCH:
            return 0
        if not isinstance(name, str) or not name.startswith(BRANCH_PREFIX):
            return None
        sid = name[len(BRANCH_PREFIX):]
        if sid.startswith(HASH_PREFIX):
            if self._hashed is None:  # ids that are not kept verbatim: made once, only when one is asked for
                ids = self.recs.ids
                self._hashed = {h: e for e in self.others if (h := safe_id(ids[e])) != ids[e]}
            e = self._hashed.get(sid, -1)
        else:
            e = self.recs.latest.get(sid, -1)
            if e >= 0 and safe_id(sid) != sid:
                e = -1
        if e < 0 or e == self.main_root:
            return None
        k = bisect_left(self.others, e)
        return k + 1 if k < len(self.others) and self.others[k] == e else None

    # -- rule 5 -----------------------------------------------------------------------------------------

    def default_leaf(self) -> tuple[int, str | None]:
        """(entry index of the default leaf, the rule that chose it), or (-1, None) without entries."""
        recs = self.recs
        if recs.leaf is not None and recs.leaf in recs.latest:
            return recs.latest[recs.leaf], "last-prompt"
        last_main = last = -1
        for i in range(self.n - 1, -1, -1):
            if self.alive[i]:
                if last < 0:
                    last = i
                if not recs.flags[i] & SIDECHAIN:
                    last_main = i
                    break
        leaf = last_main if last_main >= 0 else last
        return leaf, ("last-uuid-entry" if leaf >= 0 else None)

    # -- branches ---------------------------------------------------------------------------------------

    def branch(self, k: int) -> Branch:
        if self.main_root < 0:
            return Branch(MAIN_BRANCH, None, None, None, None, self.line_notices, False, self, -1)
        start, leaf = self.start_of(k), self.leaves[k]
        p = self.parent[start]
        return Branch(
            name=self.name(k),
            leaf=self.item_id(leaf),
            start=self.item_id(start),
            parent_branch=self.name(self.branch_of[p]) if p >= 0 else None,
            fork_point=self.item_id(p) if p >= 0 else None,
            item_count=self.count[leaf] + self.line_notices,
            sidechain=bool(self.recs.flags[start] & SIDECHAIN),
            _forest=self,
            _leaf_index=leaf,
        )

    def item_id(self, e: int) -> str:
        return native_id(self.recs.ids[e])

    def path(self, leaf: int) -> tuple[int, ...]:
        out = []
        e = leaf
        while e >= 0:
            out.append(e)
            e = self.parent[e]
        out.reverse()
        return tuple(out)

    def walk(self, path: tuple[int, ...], start: int, stop: int,
             marks: dict[int, tuple[int, int, int, int]]) -> Iterator[int]:
        """The refs of items `start` to `stop` of the branch whose path is `path`: the path's items (a
        root's notice, then each shown entry) merged with the line notices by file position (a line
        notice comes before the first path entry after it; the rest follow the leaf). Resumes where an
        earlier walk of the same branch stopped at `start` (`marks`), else walks from the root."""
        state = marks.get(start)
        i, (p, sub, a, b) = (start, state) if state is not None else (0, (0, 0, 0, 0))
        runs, other_line, line, flags, reason = self.recs.runs, self.recs.other_line, self.recs.line, \
            self.recs.flags, self.reason
        run_count, other_count, depth = runs.run_count, len(other_line), len(path)
        end = 1 << 62
        while i < stop:
            ra = runs.first_line(a) if a < run_count else end
            ob = other_line[b] if b < other_count else end
            nxt = ra if ra < ob else ob
            ref: int | None = None
            if p < depth and line[path[p]] < nxt:
                e = path[p]
                if sub == 0:
                    sub = 1
                    if p == 0 and reason[e] in (GAP, LOOP):
                        ref = 4 * e + 1
                else:
                    sub = 0
                    p += 1
                    if flags[e] & KIND_MASK != ATTACHMENT:
                        ref = 4 * e
            elif nxt < end:
                if ra < ob:
                    ref = -(2 * a + 1)
                    a += 1
                else:
                    ref = -(2 * b + 2)
                    b += 1
            else:
                break
            if ref is not None:
                if i >= start:
                    yield ref
                i += 1
        marks[i] = (p, sub, a, b)

    # -- rendering --------------------------------------------------------------------------------------

    def line_bytes(self, start: int, end: int) -> memoryview:
        k = piece_of(self.bases, start)
        base = self.bases[k]
        return memoryview(self.pieces[k])[start - base:end - base]

    def render(self, ref: int) -> Item:
        recs = self.recs
        if ref >= 0:
            e, tag = divmod(ref, 4)
            if e >= self.n or not self.alive[e] or tag > 1:
                raise ValueError(f"ref {ref} names no item of this transcript")
            uuid, line = recs.ids[e], recs.line[e]
            if tag == 1:
                if self.reason[e] == GAP:
                    parent = recs.pending.get(e)
                    if parent is None and recs.parent[e] >= 0:  # pragma: no cover - a resolved parent is never a gap
                        parent = recs.ids[recs.parent[e]]
                    return gap_item(uuid, line, parent, recs.runs.run_ending_before(line), LINES_CAP)
                if self.reason[e] == LOOP:
                    size, members = self.loops[e]
                    return loop_item(uuid, line, size, members)
                raise ValueError(f"ref {ref} names no item of this transcript")
            kind = recs.flags[e] & KIND_MASK
            if kind == ATTACHMENT:
                raise ValueError(f"ref {ref} names a hidden entry")
            value = decode_full(self.line_bytes(recs.start[e], recs.end[e]))
            return entry_item(value, uuid, line, _KIND_NAMES.get(kind, "other"), bool(recs.flags[e] & SIDECHAIN))
        k, tag = divmod(-ref - 1, 2)
        if tag == 0 and k < recs.runs.run_count:
            first, count, why = recs.runs.run(k)
            return run_item(first, count, why)
        if tag == 1 and k < len(recs.other_line):
            return other_line_item(decode_full(self.line_bytes(recs.other_start[k], recs.other_end[k])),
                                   recs.other_line[k])
        raise ValueError(f"ref {ref} names no item of this transcript")

