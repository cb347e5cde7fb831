"""parse(): bytes of a Pi 0.85.1 session file -> Parsed | FormatRefusal. No I/O.

The rules are the seed README's "Parser" section, corrected by FACTS.md (c): the default leaf is the last
valid entry in file order (session-manager.js _buildIndex 686-707), where an id repeats the later entry wins
(byId, 694), and parentSession is never opened. The README of this package states each rule with the
decision taken where the seed is silent; "README rule N" below is the Nth item of its "Rules" list.

The pipeline: the header (`_read_header`, `_check_cwd`), then every other line decoded once into the line
index (`_lines.decode_lines`: records as columns, unreadable lines as runs), then the tree (`_tree`): in one
pass in file order (`place`) when every parent precedes its child and no id repeats, else the rules as
separate linear passes (`build`); then the result (`_result`). `parse_appended` continues a copy of the
index with the appended lines and places them in a copy of the tree, or builds the tree again.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._ids import MAIN_BRANCH, NOTICE_PREFIX
from ._line_notices import LineNotices
from ._lines import Index, _exact, decode_lines
from ._model import FormatRefusal, Header, Item, Notice, Parsed
from ._render import describe
from ._runs import Runs
from ._tree import HAS_CHILD, BranchMap, EntryMap, Forest, build, place

__all__ = ["parse", "parse_appended"]

#: Session versions this parser reads. Version 3 is what 0.85.1 writes (newSession, session-manager.js
#: 645-670); version 2 has the same tree and differs only in a renamed role, which shows as unknown-role.
SUPPORTED_VERSIONS = (2, 3)

# Clears the HAS_CHILD bit of every flags byte (a tree placed again from its first record).
_NO_CHILD = bytes(f & ~HAS_CHILD for f in range(256))


def _decode_line(raw: bytes) -> tuple[Any, str | None]:
    """(value, None) for a line holding one JSON value, else (None, a short reason). Never raises."""
    # Pi's reader splits on LF only and strips one trailing CR (jsonl.js 18-41); U+2028/U+2029/U+0085 are
    # ordinary characters inside a line (FACTS.md loader quirk 9). Line 1 goes through the exact decoder
    # as every other line the index cannot read with msgspec (`_lines._exact`).
    with memoryview(raw) as view:
        return _exact(view, 0, len(raw) - 1 if raw.endswith(b"\r") else len(raw))


@dataclass(slots=True, eq=False)
class _State:
    """What `parse_appended` needs of a result: the tree (with its line index) and the global notices.
    Never mutated once built (a continuation copies what it extends)."""

    header: Header
    forest: Forest
    notices: tuple[Notice, ...]
    superseded: tuple[int, ...]
    branches: BranchMap


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
    ix = Index(len(data))
    unreadable = Runs()
    line_count = decode_lines(data, first_end + 1, cut, 2, ix, unreadable) - 1
    return _assemble(header, ix, unreadable, incomplete, line_count)

def _assemble(header: Header, ix: Index, unreadable: Runs, incomplete: bool, line_count: int) -> Parsed:
    """Everything after decoding: the line notices, the tree, duplicate ids, the result. Used by parse and by
    parse_appended when the tree must be built again."""
    forked: Item | None = None
    global_notices: list[Notice] = []
    if header.parent_session is not None:
        # README rule 9: parentSession is a global notice and also the first item (line 1) of every branch.
        forked_notice = Notice(
            id=NOTICE_PREFIX + "forked",
            code="forked-from-earlier-session",
            message="this session was forked from an earlier session, which is not opened",
            line=1,
        )
        global_notices.append(forked_notice)
        forked = Item(forked_notice.id, "notice", 1, None, notice=forked_notice)
    line_notices = LineNotices(forked, unreadable)
    superseded: list[int] = []
    if not ix.dups and not ix.late:
        # Every parent precedes its child and no id repeats (what Pi writes): one pass in file order.
        if ix.flags and max(ix.flags) & HAS_CHILD:  # a continuation's copy may carry the bit (a fresh parse
            ix.flags = bytearray(ix.flags.translate(_NO_CHILD))  # never: no copy of its flags then)
        forest = Forest(ix, line_notices)
        place(forest, 0)
    else:
        forest, superseded = build(ix, line_notices)
        _duplicate_notices(ix, superseded, global_notices)
    notices = tuple(sorted(global_notices, key=lambda x: (x.line or 0, x.id)))
    return _result(header, forest, notices, tuple(ix.line[r] for r in superseded), incomplete, line_count,
                   False, None)


def _duplicate_notices(ix: Index, superseded: list[int], global_notices: list[Notice]) -> None:
    """README rule 3: one global `duplicate-id` notice per record a later record with its id replaced."""
    ids = ix.ids
    for r in superseded:
        line = ix.line[r]
        by = ix.line[ids.get(ids.string(r))]
        global_notices.append(
            Notice(
                id=f"{NOTICE_PREFIX}dup-{line}",
                code="duplicate-id",
                message=f"the entry at line {line} is replaced by the later entry with its id at line {by}",
                line=line,
                lines=(by,),
            )
        )


def _result(header: Header, forest: Forest, notices: tuple[Notice, ...], superseded: tuple[int, ...],
            incomplete: bool, line_count: int, extends: bool, branches: BranchMap | None) -> Parsed:
    """README rule 4: the result, whose default leaf is the last valid entry in file order (FACTS.md (c),
    _buildIndex) and whose default branch is the branch holding it. The last entry is always a winner,
    since the last occurrence of every id wins. Global notices are sorted by line, then id."""
    n = forest.n
    if branches is None:
        branches = BranchMap(forest)
    return Parsed(
        header=header,
        entries=EntryMap(forest),
        branches=branches,
        default_branch=forest.branch_name(forest.branch[n - 1]) if n else MAIN_BRANCH,
        default_leaf=forest.nsid(n - 1) if n else None,
        notices=notices,
        unreadable_lines=forest.line_notices.runs,
        superseded_lines=superseded,
        forked_from_earlier_session=header.parent_session is not None,
        incomplete=incomplete,
        line_count=line_count,
        extends_previous=extends,
        _state=_State(header, forest, notices, superseded, branches),
    )


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
    old = state.forest
    ix = old.ix.copy(cut)
    r0 = len(ix)
    new_unreadable = Runs()
    line_count = decode_lines(appended, 0, cut, previous.line_count + 1, ix, new_unreadable) - 1
    unreadable = old.line_notices.runs.copy()
    unreadable.extend(new_unreadable)
    # A trailing run that grows changes its notice, an earlier item: rebuild (extends_previous False).
    joins = new_unreadable.run_count and unreadable.run_count < old.line_notices.runs.run_count + new_unreadable.run_count
    # An appended duplicate id or late parent (or self-parent) can change earlier items, and the first entry
    # of a file names main and may start it anywhere: the tree is built again from the records (no line is
    # decoded twice).
    in_place = (ix.dups == old.ix.dups and ix.late == old.ix.late and (old.n or len(ix) == r0) and not joins)
    if not in_place:
        return _assemble(state.header, ix, unreadable, incomplete, line_count)
    forest = old.copy(ix, LineNotices(old.line_notices.head, unreadable))
    grown = place(forest, r0)
    branches = BranchMap(forest)
    for b, branch in state.branches.cached():
        # A branch that grew at its leaf has the old path plus the new entries: no walk up from the leaf. Where
        # the old branch's slices stopped holds here too: its items, path and line notices are the start of
        # this branch's, and every appended line notice and entry comes after them in the file.
        new = branches.rank(b)
        old_path = branch.__dict__.get("_path")
        if old_path is not None:
            path = type(old_path)(old_path.typecode, old_path)
            path.extend(grown.get(b, ()))
            new.__dict__["_path"] = path
            marks = branch.__dict__.get("_marks")
            if marks:
                new.__dict__["_marks"] = dict(marks)
    return _result(state.header, forest, state.notices, state.superseded, incomplete, line_count, True, branches)


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
