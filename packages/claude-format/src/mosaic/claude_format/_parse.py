"""`parse` and `parse_appended`: the line index, the refusals, the tree, the result.

Pipeline: the complete lines are read into records (`_lines.read_lines`; an entry of another version
stops the read: `unsupported-harness`), the first entry's cwd is checked against the project
(`foreign-project`), then the tree is built from the records (`_tree.Forest`) and the result made.
`parse_appended` reads only the appended lines into a copy of the previous records and builds the tree
again from them (integer work over the entries; no line is decoded twice).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from ._ids import MAIN_BRANCH
from ._lines import OtherVersion, Records, read_lines
from ._model import Branch, Notice, Parsed
from ._refusal import TranscriptRefusal
from ._render import describe, duplicate_notice
from ._tree import Forest

__all__ = ["parse", "parse_appended"]

RealPath = Callable[[str], str]


@dataclass(frozen=True)
class _State:
    """What parse_appended continues from: the records, the bytes (as pieces), the tree, the project check."""

    recs: Records
    pieces: tuple[bytes, ...]
    bases: list[int]
    forest: Forest
    project: str | None
    realpath: RealPath | None
    tail: bool  # the bytes ended in a partial line


class _Branches(Mapping[str, Branch]):
    """The branches of a result by name, `main` first, each made when first asked for."""

    def __init__(self, forest: Forest) -> None:
        self._forest = forest
        self._made: dict[int, Branch] = {}

    def __getitem__(self, name: str) -> Branch:
        k = self._forest.find(name)
        if k is None:
            raise KeyError(name)
        made = self._made.get(k)
        if made is None:
            made = self._made[k] = self._forest.branch(k)
        return made

    def __iter__(self) -> Iterator[str]:
        forest = self._forest
        return (forest.name(k) for k in range(forest.branch_count))

    def __len__(self) -> int:
        return self._forest.branch_count

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._forest.find(name) is not None


def _check_data(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"data must be bytes-like, not {type(data).__name__}")


def parse(data: bytes, *, project: str | None = None, realpath: RealPath | None = None) -> Parsed | TranscriptRefusal:
    """Parse the bytes of a Claude Code 2.1.283 transcript. Never raises on any bytes.

    Only complete lines are read (up to the last LF); a trailing partial line sets `incomplete`. Returns
    `TranscriptRefusal("unsupported-harness")` when an entry's `version` is not 2.1.283 (or is missing),
    and, when `project` is given, `TranscriptRefusal("foreign-project")` when the first entry's `cwd` is
    not an absolute path that is the project or inside it (compared through `realpath` when injected,
    else lexically). Raises TypeError when `data` is not bytes-like and ValueError when `project` is not an
    absolute path (programming errors).
    """
    data = _check_data(data)
    if project is not None and not (isinstance(project, str) and project.startswith("/")):
        raise ValueError(f"project must be an absolute path, not {project!r}")
    recs = Records()
    try:
        end = read_lines(data, 0, recs)
    except OtherVersion as e:
        return _version_refusal(e)
    return _result(recs, (data,), [0], project, realpath, end < len(data), None)


def parse_appended(previous: Parsed, appended: bytes) -> Parsed | TranscriptRefusal:
    """Continue `previous` with the bytes appended after it: equal to `parse` of the longer bytes (with the
    same project and realpath). Only the appended lines are decoded. `extends_previous` is True when no
    earlier item can have changed (see README, "Incremental parse"). Raises TypeError when `appended` is
    not bytes-like or `previous` was not made by this package, and ValueError when `previous` ended in a
    partial line."""
    appended = _check_data(appended)
    state = previous._state
    if not isinstance(state, _State):
        raise TypeError("previous must be a Parsed made by mosaic.claude_format")
    if state.tail:
        raise ValueError("previous ended in a partial line: parse the whole bytes again")
    old = state.recs
    recs = old.copy()
    base = old.length
    try:
        end = read_lines(appended, base, recs)
    except OtherVersion as e:
        return _version_refusal(e)
    pieces, bases = state.pieces, state.bases
    if end:
        pieces, bases = (*pieces, appended), [*bases, base]
    return _result(recs, pieces, bases, state.project, state.realpath, end < len(appended), state)


def _version_refusal(e: OtherVersion) -> TranscriptRefusal:
    return TranscriptRefusal("unsupported-harness",
                             f"line {e.line}: an entry of version {describe(e.version)}; this reader reads Claude Code "
                             f"transcripts of version 2.1.283 only (B1 part 5)")


def _check_cwd(cwd: str | None, project: str, realpath: RealPath | None) -> TranscriptRefusal | None:
    if cwd is None or not cwd.startswith("/"):
        return TranscriptRefusal("foreign-project", f"the first entry's cwd {describe(cwd)} is not an absolute path")
    if realpath is not None:
        try:
            real_cwd, real_project = realpath(cwd), realpath(project)
        except (OSError, ValueError) as e:
            return TranscriptRefusal("foreign-project", f"the first entry's cwd {describe(cwd)} cannot be resolved ({e})")
    else:
        real_cwd, real_project = posixpath.normpath(cwd), posixpath.normpath(project)
    if real_cwd == real_project or real_cwd.startswith(real_project.rstrip("/") + "/"):
        return None
    return TranscriptRefusal("foreign-project", f"the first entry's cwd {describe(cwd)} is outside the project {project!r}")


def _result(recs: Records, pieces: tuple[bytes, ...], bases: list[int], project: str | None,
            realpath: RealPath | None, tail: bool, previous: _State | None) -> Parsed | TranscriptRefusal:
    first = recs.first
    if project is not None and first is not None:
        refused = _check_cwd(first[1], project, realpath)
        if refused is not None:
            return refused
    forest = Forest(recs, pieces, bases)
    leaf, rule = forest.default_leaf()
    default = forest.name(forest.branch_of[leaf]) if leaf >= 0 else MAIN_BRANCH
    state = _State(recs, pieces, bases, forest, project, realpath, tail)
    notices: tuple[Notice, ...] = tuple(duplicate_notice(a, b) for a, b in recs.duplicates)
    return Parsed(
        branches=_Branches(forest),
        default_branch=default,
        default_leaf=forest.item_id(leaf) if leaf >= 0 else None,
        leaf_rule=rule,
        notices=notices,
        unreadable_lines=recs.runs,
        superseded_lines=tuple(sorted(recs.line[i] for i in recs.superseded)),
        incomplete=tail,
        line_count=recs.line_count,
        entry_count=recs.entry_count,
        version="2.1.283" if first is not None else None,
        session_id=first[0] if first else None,
        cwd=first[1] if first else None,
        created_at=first[2] if first else None,
        extends_previous=previous is not None and _extends(previous, recs, forest),
        _state=state,
    )


def _extends(previous: _State, recs: Records, forest: Forest) -> bool:
    """Whether every branch of `previous` is, item for item, the start of the same-named branch now: no
    appended uuid repeats an earlier one or names itself the parent an earlier entry was missing (a late
    parent), the appended unreadable lines do not continue the run the previous bytes ended with, and
    `main` starts at the same entry."""
    old = previous.recs
    if forest.main_root != previous.forest.main_root:
        return False
    if recs.duplicates[len(old.duplicates):]:
        return False
    waiting = set(old.pending.values())
    if waiting and any(recs.ids[i] in waiting for i in range(old.entry_count, recs.entry_count)):
        return False
    k = old.runs.run_count - 1
    return k < 0 or recs.runs.run(k) == old.runs.run(k)
