"""parse(): bytes of a Pi 0.85.1 session file -> Parsed | FormatRefusal. No I/O.

The rules are the seed README's "Parser" section, corrected by FACTS.md (c): the default leaf is the last
valid entry in file order (session-manager.js _buildIndex 686-707), where an id repeats the later entry wins
(byId, 694), and parentSession is never opened. The README of this package states each rule with the
decision taken where the seed is silent; "rule N" below is the Nth item of its "Rules" list.

The pipeline: find each LF and decode each line once (`_decode_lines`; unreadable lines are kept as runs),
line notices and duplicates (`_assemble`, `_settle_duplicates`), then the tree in seven steps (`_build`: `_link_parents`, `_cut_loops`,
`_first_children`, `_in_place_notices`, `_name_entries`, `_branches`, `_result`). `parse_appended` places
appended records in a copy of the tree (`_extend`, `_Growing.place`, `_grown`) or runs `_assemble` again.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._ids import BRANCH_PREFIX, MAIN_BRANCH, NATIVE_PREFIX, NOTICE_PREFIX, safe_id
from ._lines import DECODER, Record, decode_lines
from ._model import LINES_CAP, Branch, FormatRefusal, Header, Item, Notice, Parsed
from ._render import describe, notice_item
from ._runs import LineNotices, Runs
from ._tree import EntryMap, Forest

#: Session versions this parser reads. Version 3 is what 0.85.1 writes (newSession, session-manager.js
#: 645-670); version 2 has the same tree and differs only in a renamed role, which shows as unknown-role.
SUPPORTED_VERSIONS = (2, 3)


def _decode_line(raw: bytes) -> tuple[Any, str | None]:
    """(value, None) for a line holding one JSON value, else (None, a short reason). Never raises."""
    # Pi's reader splits on LF only and strips one trailing CR (jsonl.js 18-41); U+2028/U+2029/U+0085 are
    # ordinary characters inside a line (FACTS.md loader quirk 9), so lines end at the LF byte only (used for
    # line 1 here; _decode_lines applies the same rules to the other lines on a view of the buffer).
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not UTF-8"
    try:
        return DECODER.decode(text), None
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError, NaN/Infinity and integers over Python's digit limit;
        # RecursionError covers nesting deeper than the interpreter's stack.
        return None, "not JSON" if text.strip() else "blank"


@dataclass(slots=True, eq=False)
class _State:
    """What `parse_appended` needs of a result: every decoded record (duplicates included) and unreadable
    line, for a rebuild, and the tree's indexes, for adding entries in place. Never mutated once built."""

    header: Header
    records: list[Record]
    unreadable: Runs
    forest: Forest
    index: dict[str, int]  # raw id -> winner index
    safe: list[str]
    count: list[int]  # items on the path from the root to entry i
    first_child: list[int]
    wanted: set[str]  # string parentIds that name no entry (an entry with one of these ids is a late parent)


def parse(
    data: bytes,
    *,
    project: str | None = None,
    realpath: Callable[[str], str] | None = None,
) -> Parsed | FormatRefusal:
    """Parse the bytes of a session file.

    Returns a `Parsed` for any bytes whose line 1 is a complete Pi session header with an acceptable cwd,
    else a `FormatRefusal` (not-a-pi-session, incomplete-header, foreign-project). Bad input never raises:
    malformed lines, bad fields, duplicate ids, missing parents and loops all become notices.

    Only complete lines (ending in LF) are read; a trailing partial line is ignored and sets
    `incomplete`, so a reader can pass its snapshot or the whole file.

    cwd rule: the header cwd must be absolute. When `project` is given the cwd must be the project or
    inside it, comparing `realpath(cwd)` with `realpath(project)` when `realpath` is given (the only call
    this function makes outside itself; an OSError or ValueError from it refuses foreign-project), else
    the two paths after posixpath.normpath.

    Raises TypeError when `data` is not bytes-like and ValueError when `project` is not an absolute path:
    those are programming errors, not refusals.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("parse() takes the bytes of a session file")
    if project is not None and (not isinstance(project, str) or not project.startswith("/")):
        raise ValueError("project must be an absolute path")

    data = bytes(data)  # no copy for bytes
    # Lines are found one at a time (never a list of every line: a file of blank lines would cost an object
    # per byte). Only bytes up to the last LF are read; a trailing partial line sets `incomplete`.
    cut = data.rfind(b"\n") + 1
    incomplete = cut < len(data)
    if not cut:
        return _partial_header(data)

    first_end = data.find(b"\n")
    header = _read_header(data[:first_end])
    if isinstance(header, FormatRefusal):
        return header
    refusal = _check_cwd(header.cwd, project, realpath)
    if refusal is not None:
        return refusal

    # --- lines 2..: valid entries, or unreadable lines -------------------------------------------------
    records: list[Record] = []
    unreadable = Runs()
    line_count = decode_lines(data, first_end + 1, cut, 2, records, unreadable) - 1
    return _assemble(header, records, unreadable, incomplete, line_count)


def _assemble(
    header: Header, records: list[Record], unreadable: Runs, incomplete: bool, line_count: int
) -> Parsed:
    """Everything after decoding: line notices, duplicate ids, the tree. Used by parse and parse_appended."""
    forked: Item | None = None
    global_notices: list[Notice] = []
    if header.parent_session is not None:
        # Rule 9: parentSession is a global notice and also the first item (line 1) of every branch.
        forked_notice = Notice(
            id=NOTICE_PREFIX + "forked",
            code="forked-from-earlier-session",
            message="this session was forked from an earlier session, which is not opened",
            line=1,
        )
        global_notices.append(forked_notice)
        forked = Item(forked_notice.id, "notice", 1, None, notice=forked_notice)
    winners, superseded = _settle_duplicates(records, global_notices)
    parsed, state = _build(header, winners, unreadable, LineNotices(forked, unreadable), global_notices,
                           superseded, incomplete, line_count)
    state.records = records
    return parsed


def _settle_duplicates(records: list[Record], global_notices: list[Notice]) -> tuple[list[Record], list[int]]:
    """Rule 3: where an id repeats, the later entry wins, as in Pi's byId index (session-manager.js 694).

    Returns the winners in file order and the lines of the superseded records; appends one global
    `duplicate-id` notice per superseded record to `global_notices`. Never raises.
    """
    last: dict[str, int] = {}
    for position, record in enumerate(records):
        last[record.raw_id] = position
    winners: list[Record] = []
    superseded: list[int] = []
    for position, record in enumerate(records):
        if last[record.raw_id] == position:
            winners.append(record)
            continue
        superseded.append(record.line)
        by = records[last[record.raw_id]].line
        global_notices.append(
            Notice(
                id=f"{NOTICE_PREFIX}dup-{record.line}",
                code="duplicate-id",
                message=f"the entry at line {record.line} is replaced by the later entry with its id at line {by}",
                line=record.line,
                lines=(by,),
            )
        )
    return winners, superseded


def _build(
    header: Header,
    winners: list[Record],
    unreadable: Runs,
    line_notices: LineNotices,
    global_notices: list[Notice],
    superseded: list[int],
    incomplete: bool,
    line_count: int,
) -> tuple[Parsed, _State]:
    """The tree of the winning entries and the result, in seven steps (one function each, below).

    Entries are indexed by their position among the winners (file order); -1 stands for "none". Every
    step is one linear pass (README, "Complexity"); nothing here renders an entry (_tree.py renders lazily).
    """
    index = {record.raw_id: i for i, record in enumerate(winners)}
    safe = [safe_id(record.raw_id) for record in winners]
    ids = [NATIVE_PREFIX + s for s in safe]
    parent, gap = _link_parents(winners, index)
    loop_members = _cut_loops(parent)
    first_child, children, roots = _first_children(parent)
    pre, own = _in_place_notices(winners, safe, ids, gap, loop_members, unreadable)
    name, count = _name_entries(roots, children, first_child, safe, own)
    forest = Forest(
        parent,
        ids,
        [record.raw_id for record in winners],
        [record.line for record in winners],
        winners,
        pre,
        line_notices,
        own,
    )
    forest.names = name
    branches = _branches(forest, roots, first_child, count)
    wanted = {pid for i, r in enumerate(winners) if gap[i] and isinstance(pid := r.pid, str)}
    kept = _State(header, [], unreadable, forest, index, safe, count, first_child, wanted)
    return _result(header, forest, branches, global_notices, unreadable, superseded, incomplete, line_count,
                   kept), kept


def _link_parents(winners: list[Record], index: dict[str, int]) -> tuple[list[int], list[bool]]:
    """Rules 2 and 7: each entry's parent index, and whether its parent is missing (a gap).

    A parentId that is null or absent makes a root (FACTS.md loader quirk 4: the real binary writes the
    key). A parentId naming no winner, or one that is neither a string nor null, is a missing parent: the
    entry becomes a root with a gap notice, never joined to the entries before it (seed "Parser").
    """
    n = len(winners)
    parent = [-1] * n
    gap = [False] * n
    for i, record in enumerate(winners):
        pid = record.pid
        if pid is None:
            continue
        j = index.get(pid) if isinstance(pid, str) else None
        if j is None:
            gap[i] = True
        else:
            parent[i] = j
    return parent, gap


def _cut_loops(parent: list[int]) -> dict[int, list[int]]:
    """Rule 8: cut every loop of parent links once, at its member earliest in the file. Mutates `parent`.

    Pi's getBranch walks a loop forever (FACTS.md quirk 6). The cut member becomes a root; the result maps
    it to the sorted indices of its loop's members (for the loop notice). Parent links form a functional
    graph, so one pass with three colours finds every loop in O(n) and never walks one twice.
    """
    n = len(parent)
    loop_members: dict[int, list[int]] = {}
    state = bytearray(n)  # 0 unseen, 1 on the current walk, 2 done
    for i in range(n):
        if state[i]:
            continue
        walk: list[int] = []
        j = i
        while j != -1 and state[j] == 0:
            state[j] = 1
            walk.append(j)
            j = parent[j]
        if j != -1 and state[j] == 1:
            cycle = walk[walk.index(j):]
            cut = min(cycle)
            parent[cut] = -1
            loop_members[cut] = sorted(cycle)
        for w in walk:
            state[w] = 2
    return loop_members


def _first_children(parent: list[int]) -> tuple[list[int], list[list[int]], list[int]]:
    """Rule 5: each entry's first child in file order (the one that continues its branch), every entry's
    children in file order, and the roots in file order. The parent links must be loop-free."""
    n = len(parent)
    first_child = [-1] * n
    children: list[list[int]] = [[] for _ in range(n)]
    roots: list[int] = []
    for i in range(n):
        p = parent[i]
        if p == -1:
            roots.append(i)
        else:
            if first_child[p] == -1:
                first_child[p] = i
            children[p].append(i)
    return first_child, children, roots


def _in_place_notices(
    winners: list[Record],
    safe: list[str],
    ids: list[str],
    gap: list[bool],
    loop_members: dict[int, list[int]],
    unreadable: Runs,
) -> tuple[list[Item | None], list[int]]:
    """Rules 7, 8 and 12: the notice that stands in place before each entry (a gap or a loop cut, else
    None) and how many items each entry adds to a path (that notice, plus 1 when the entry shows).

    The counts come from the raw objects without rendering (`shows` agrees with `render_entry`), so a
    branch's item count is known before anything renders.
    """
    n = len(winners)
    pre: list[Item | None] = [None] * n
    own = [0] * n  # items entry i adds to a path
    for i, record in enumerate(winners):
        if gap[i]:
            pre[i] = _gap_notice(record, safe[i], ids[i], unreadable)
        elif i in loop_members:
            lines = tuple(winners[m].line for m in loop_members[i])
            shown = ", ".join(str(x) for x in lines[:10]) + (", ..." if len(lines) > 10 else "")
            pre[i] = notice_item(
                "loop",
                "loop",
                safe[i],
                record.line,
                f"the parent links of the entries at lines {shown} form a loop; the history stops here",
                ids[i],
                lines,
            )
        own[i] = (pre[i] is not None) + record.shows
    return pre, own


def _name_entries(
    roots: list[int], children: list[list[int]], first_child: list[int], safe: list[str], own: list[int]
) -> tuple[list[str], list[int]]:
    """Rule 5: the branch name of every entry, and the items on the path from its root to it.

    The first root's branch is main (whatever kind of root it is); each later root and each later child at
    a fork starts `b.<safe id>`; the earliest child continues its parent's branch. Parents are named
    before their children (an explicit stack: no recursion, however deep the tree).
    """
    n = len(own)
    name = [""] * n
    count = [0] * n
    stack = list(reversed(roots))
    for r in roots:
        name[r] = MAIN_BRANCH if r == roots[0] else BRANCH_PREFIX + safe[r]
        count[r] = own[r]
    while stack:
        i = stack.pop()
        for c in children[i]:
            name[c] = name[i] if first_child[i] == c else BRANCH_PREFIX + safe[c]
            count[c] = count[i] + own[c]
            stack.append(c)
    return name, count


def _branches(forest: Forest, roots: list[int], first_child: list[int], count: list[int]) -> dict[str, Branch]:
    """Rule 5: one branch per leaf, named after the entry that starts it: main first, then the others in
    the file order of the entries that start them. A file without entries still has main (no items but
    the line notices). `forest.names` must be set."""
    parent, ids, name = forest.parent, forest.ids, forest.names
    n = len(ids)
    n_line = len(forest.line_notices)
    branches: dict[str, Branch] = {}
    if n == 0:
        branches[MAIN_BRANCH] = Branch(MAIN_BRANCH, None, None, None, None, n_line, forest, -1)
        return branches
    starts = [roots[0]] + [i for i in range(n) if i != roots[0] and
                           (parent[i] == -1 or first_child[parent[i]] != i)]
    for s in starts:
        leaf = s
        while first_child[leaf] != -1:
            leaf = first_child[leaf]
        p = parent[s]
        branches[name[s]] = Branch(
            name=name[s],
            leaf=ids[leaf],
            start=ids[s],
            parent_branch=None if p == -1 else name[p],
            fork_point=None if p == -1 else ids[p],
            item_count=count[leaf] + n_line,
            _forest=forest,
            _leaf_index=leaf,
        )
    return branches


def _result(
    header: Header,
    forest: Forest,
    branches: dict[str, Branch],
    global_notices: list[Notice],
    unreadable: Runs,
    superseded: list[int],
    incomplete: bool,
    line_count: int,
    state: _State,
) -> Parsed:
    """Rule 4: the result, whose default leaf is the last valid entry in file order (FACTS.md (c),
    _buildIndex) and whose default branch is the branch holding it. The last entry is always a winner,
    since the last occurrence of every id wins. Global notices are sorted by line, then id."""
    n = len(forest.ids)
    return Parsed(
        header=header,
        entries=EntryMap(forest),
        branches=branches,
        default_branch=forest.names[n - 1] if n else MAIN_BRANCH,
        default_leaf=forest.ids[n - 1] if n else None,
        notices=tuple(sorted(global_notices, key=lambda x: (x.line or 0, x.id))),
        unreadable_lines=unreadable,
        superseded_lines=tuple(superseded),
        forked_from_earlier_session=header.parent_session is not None,
        incomplete=incomplete,
        line_count=line_count,
        _state=state,
    )


def _gap_notice(record: Record, safe: str, nsid: str, unreadable: Runs) -> Item:
    pid = record.pid
    line = record.line
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


def _partial_header(tail: bytes) -> FormatRefusal:
    """No complete line yet: the header may still be being written, unless it cannot become one."""
    start = tail.lstrip()[:1]
    if start in (b"", b"{"):
        return FormatRefusal("incomplete-header", "line 1 is not complete yet (no newline)")
    return FormatRefusal("not-a-pi-session", "line 1 is not a JSON object")


def _read_header(raw: bytes) -> Header | FormatRefusal:
    """Line 1 must be {"type":"session","id":<string>,"version":2|3,"cwd":<absolute>,...}."""
    value, reason = _decode_line(raw)
    if reason is not None:
        return FormatRefusal("not-a-pi-session", f"line 1 is not a Pi session header ({reason})")
    if not isinstance(value, dict) or value.get("type") != "session":
        return FormatRefusal("not-a-pi-session", "line 1 is not a Pi session header")
    sid = value.get("id")
    if not isinstance(sid, str):
        return FormatRefusal("not-a-pi-session", "the session header has no string id")
    version = value.get("version")
    if isinstance(version, bool) or not isinstance(version, (int, float)) or version not in SUPPORTED_VERSIONS:
        return FormatRefusal(
            "not-a-pi-session", f"session version {describe(version)} is not one this reader supports (2, 3)"
        )
    cwd = value.get("cwd")
    if cwd is None:
        return FormatRefusal("foreign-project", "the session header has no cwd")
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        # Seed "Parser": a relative cwd is refused as foreign-project; so is a missing one.
        return FormatRefusal("foreign-project", f"the header cwd {describe(cwd)} is not an absolute path")
    timestamp = value.get("timestamp")
    parent_session = value.get("parentSession")
    return Header(
        id=sid,
        version=int(version),
        timestamp=timestamp if isinstance(timestamp, str) else None,
        cwd=cwd,
        parent_session=parent_session if isinstance(parent_session, str) and parent_session else None,
    )


def _check_cwd(cwd: str, project: str | None, realpath: Callable[[str], str] | None) -> FormatRefusal | None:
    if project is None:
        return None
    if realpath is not None:
        # Seed "Opening a file": real paths are compared; a cwd that no longer exists compares as written
        # (os.path.realpath does that). A NUL byte or an unencodable character raises ValueError there.
        try:
            real_cwd = realpath(cwd)
            real_project = realpath(project)
        except (OSError, ValueError) as exc:
            return FormatRefusal("foreign-project", f"the header cwd cannot be resolved ({type(exc).__name__})")
    else:
        real_cwd = posixpath.normpath(cwd)
        real_project = posixpath.normpath(project)
    base = real_project if real_project.endswith("/") else real_project + "/"
    if real_cwd == real_project or real_cwd.startswith(base):
        return None
    return FormatRefusal("foreign-project", "the header cwd is outside the project")


def parse_appended(previous: Parsed, appended: bytes) -> Parsed:
    """Continue `previous` (a result of `parse` or `parse_appended`) with the bytes appended after it.

    The result equals `parse(old bytes + appended)` with the project check already done: same header,
    entries, branches, items, notices and flags. Only complete lines of `appended` are read; a trailing
    partial line sets `incomplete`. When the appended lines only add entries (new children, new roots,
    missing parents, malformed lines) they are added in place in O(appended lines + branches + a copy of
    the index arrays) and `extends_previous` is True. A duplicate id, a late parent (an entry whose id an
    earlier entry named as its missing parent), a self-parent, or a file that had no entries yet rebuilds
    the tree from the decoded records (no line is decoded twice) and `extends_previous` is False.
    `previous` is never changed.

    Raises TypeError when `appended` is not bytes-like or `previous` was not made by this package, and
    ValueError when `previous` ended in a partial line (its bytes do not end at a line boundary): those are
    programming errors.
    """
    if not isinstance(appended, (bytes, bytearray, memoryview)):
        raise TypeError("parse_appended() takes the appended bytes")
    state = previous._state
    if not isinstance(state, _State):
        raise TypeError("previous must be a result of parse() or parse_appended()")
    if previous.incomplete:
        raise ValueError("previous ended in a partial line: parse the whole snapshot instead")
    appended = bytes(appended)
    cut = appended.rfind(b"\n") + 1
    incomplete = cut < len(appended)
    new_records: list[Record] = []
    new_unreadable = Runs()
    line_count = decode_lines(appended, 0, cut, previous.line_count + 1, new_records, new_unreadable) - 1
    unreadable = state.unreadable.copy()
    unreadable.extend(new_unreadable)
    # A trailing run that grows changes its notice, an earlier item: rebuild (extends_previous False).
    joins = new_unreadable.run_count and unreadable.run_count < state.unreadable.run_count + new_unreadable.run_count
    if not joins:
        grown = _extend(previous, state, new_records, new_unreadable, unreadable, incomplete, line_count)
        if grown is not None:
            return grown
    return _assemble(state.header, state.records + new_records, unreadable, incomplete, line_count)


def _extend(
    previous: Parsed,
    state: _State,
    new_records: list[Record],
    new_unreadable: Runs,
    unreadable: Runs,
    incomplete: bool,
    line_count: int,
) -> Parsed | None:
    """The appended records added in place, or None when they could change anything before them.

    Each new record is placed exactly as `_build` would place it in the longer file: its parent (if any)
    is an earlier winner, so the earliest-child rule, the names and the counts of everything earlier stay,
    and a new line notice goes after every item on every branch (its line is the largest so far).
    """
    if not state.forest.ids and new_records:
        return None  # the first entry names main and may start it anywhere: rebuild
    growing = _Growing.start(previous, state)
    for record in new_records:
        if not growing.place(record, unreadable):
            return None
    return _grown(previous, state, growing, new_records, new_unreadable, unreadable, incomplete, line_count)


@dataclass(slots=True, eq=False)
class _Growing:
    """Copies of a result's per-entry arrays, into which `parse_appended` places appended records.

    The previous result's arrays are never changed (its `Parsed` stays valid): `start` copies them.
    """

    index: dict[str, int]
    wanted: set[str]
    parent: list[int]
    ids: list[str]
    raw_ids: list[str]
    lines: list[int]
    recs: list[Record]
    pre: list[Item | None]
    own: list[int]
    names: list[str]
    safe: list[str]
    count: list[int]
    first_child: list[int]
    # name -> (leaf index, start, parent branch, fork point), in the order of `branches`
    shape: dict[str, tuple[int, str | None, str | None, str | None]]
    # entries appended to the end of an existing branch, in order
    added: dict[str, list[int]]

    @classmethod
    def start(cls, previous: Parsed, state: _State) -> _Growing:
        old = state.forest
        return cls(
            index=dict(state.index),
            wanted=set(state.wanted),
            parent=list(old.parent),
            ids=list(old.ids),
            raw_ids=list(old.raw_ids),
            lines=list(old.lines),
            recs=list(old.recs),
            pre=list(old.pre),
            own=list(old.own),
            names=list(old.names),
            safe=list(state.safe),
            count=list(state.count),
            first_child=list(state.first_child),
            shape={b.name: (b._leaf_index, b.start, b.parent_branch, b.fork_point)
                   for b in previous.branches.values()},
            added={},
        )

    def place(self, record: Record, unreadable: Runs) -> bool:
        """Place one appended record as `_build` would (rules 5 and 7), or return False, having placed
        nothing, when it could change earlier items: a duplicate id (rule 3), a late parent (an id an
        earlier entry named as its missing parent, rule 7) or a self-parent (a loop, rule 8)."""
        rid = record.raw_id
        pid = record.pid
        if rid in self.index or rid in self.wanted or pid == rid:
            return False  # a duplicate id, a late parent or a self-parent: earlier items may change
        i = len(self.ids)
        s = safe_id(rid)
        nsid = NATIVE_PREFIX + s
        self.index[rid] = i
        self.ids.append(nsid)
        self.raw_ids.append(rid)
        self.lines.append(record.line)
        self.recs.append(record)
        self.safe.append(s)
        self.first_child.append(-1)
        p = -1
        item: Item | None = None
        if pid is not None:
            j = self.index.get(pid) if isinstance(pid, str) else None
            if j is None:
                item = _gap_notice(record, s, nsid, unreadable)
                if isinstance(pid, str):
                    self.wanted.add(pid)
            else:
                p = j
        self.parent.append(p)
        self.pre.append(item)
        self.own.append((item is not None) + record.shows)
        self.count.append(self.own[i] + (self.count[p] if p != -1 else 0))
        if p != -1 and self.first_child[p] == -1:
            # The earliest child continues its parent's branch (rule 5), which now ends here.
            self.first_child[p] = i
            self.names.append(self.names[p])
            self.shape[self.names[p]] = (i, *self.shape[self.names[p]][1:])
            self.added.setdefault(self.names[p], []).append(i)
        else:
            name = BRANCH_PREFIX + s
            self.names.append(name)
            self.shape[name] = (i, nsid, None if p == -1 else self.names[p], None if p == -1 else self.ids[p])
        return True


def _grown(
    previous: Parsed,
    state: _State,
    growing: _Growing,
    new_records: list[Record],
    new_unreadable: Runs,
    unreadable: Runs,
    incomplete: bool,
    line_count: int,
) -> Parsed:
    """The result of `_extend` once every appended record is placed: the new line notices go after every
    item on every branch (rule 6), what `previous` rendered is reused, and `extends_previous` is True."""
    g = growing
    old = state.forest
    line_notices = LineNotices(old.line_notices.head, unreadable)
    forest = Forest(g.parent, g.ids, g.raw_ids, g.lines, g.recs, g.pre, line_notices, g.own)
    forest.names = g.names
    forest.keep_rendered(old)
    n_line = len(line_notices)
    branches = {
        name: Branch(name, g.ids[leaf] if leaf != -1 else None, start, parent_branch, fork_point,
                     (g.count[leaf] if leaf != -1 else 0) + n_line, forest, leaf)
        for name, (leaf, start, parent_branch, fork_point) in g.shape.items()
    }
    for name, branch in previous.branches.items():
        # A branch that grew at its leaf has the old path plus the new entries: no walk up from the leaf.
        old_path = branch.__dict__.get("_path")
        if old_path is not None:
            branches[name].__dict__["_path"] = old_path + g.added.get(name, [])
            # Where the old branch's slices stopped holds here too: its items, path and line notices are the
            # start of this branch's, and every appended line notice and entry comes after them in the file.
            marks = branch.__dict__.get("_marks")
            if marks:
                branches[name].__dict__["_marks"] = dict(marks)
    grown = _State(state.header, state.records + new_records, unreadable, forest, g.index, g.safe, g.count,
                   g.first_child, g.wanted)
    n = len(g.ids)
    return Parsed(
        header=previous.header,
        entries=EntryMap(forest),
        branches=branches,
        default_branch=g.names[n - 1] if n else previous.default_branch,
        default_leaf=g.ids[n - 1] if n else None,
        notices=previous.notices,
        unreadable_lines=unreadable,
        superseded_lines=previous.superseded_lines,
        forked_from_earlier_session=previous.forked_from_earlier_session,
        incomplete=incomplete,
        line_count=line_count,
        extends_previous=True,
        _state=grown,
    )
