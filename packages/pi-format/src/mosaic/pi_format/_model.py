"""The output model: frozen values for a parsed Pi session, and the refusal value.

Everything here is data. `Branch.items` is computed on first use from the shared tree (see `_tree.py`),
so parsing a file with many forks never materialises every branch (README, "Complexity").

Items, their blocks and notices are frozen msgspec Structs with `gc=False`: they hold no
reference cycles, so the cyclic collector never needs to track them, and a reader that has rendered a
100 MB branch does not make every later full collection walk each rendered item. They compare, hash and
construct like frozen dataclasses (positional or keyword fields; `kind` is a class
constant of each block type).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, TypeAlias

import msgspec

from ._refusal import FormatRefusal as FormatRefusal

if TYPE_CHECKING:
    from ._runs import Runs

# What mosaic.pi_format.model offers (it star-imports this list).
__all__ = [
    "NOTICE_CODES",
    "Block",
    "Branch",
    "CommandBlock",
    "Entry",
    "Header",
    "ImageBlock",
    "Item",
    "ItemJson",
    "ItemKind",
    "Json",
    "Notice",
    "NoticeCode",
    "Parsed",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "UnavailableBlock",
    "UnsupportedBlock",
]

#: A JSON value as json.loads returns it (strings may hold lone surrogates from \\udXXX escapes).
Json: TypeAlias = None | bool | int | float | str | list["Json"] | dict[str, "Json"]

ItemKind: TypeAlias = Literal[
    "user",
    "assistant",
    "toolResult",
    "bashExecution",
    "custom_message",
    "compaction",
    "branch_summary",
    "notice",
]

NoticeCode: TypeAlias = Literal[
    "malformed-line",
    "missing-parent",
    "loop",
    "unknown-entry-type",
    "unknown-role",
    "forked-from-earlier-session",
    "duplicate-id",
]

#: At most this many lines are listed in a notice's `lines` (its message states the whole span).
LINES_CAP = 64

#: Every notice code with where it appears (the README's notice table is checked against this).
NOTICE_CODES: Mapping[str, str] = MappingProxyType(
    {
        "malformed-line": "every branch, at the line's file position",
        "missing-parent": "in place, before the entry whose parent is missing",
        "loop": "in place, before the entry whose parent link closes a loop",
        "unknown-entry-type": "in place of the entry",
        "unknown-role": "in place of the message entry",
        "forked-from-earlier-session": "global, and first item of every branch",
        "duplicate-id": "global only",
    }
)


class TextBlock(msgspec.Struct, frozen=True, gc=False):
    """Plain text (message text, tool output, a compaction or branch summary)."""

    text: str
    kind: ClassVar[Literal["text"]] = "text"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "text": self.text}


class ThinkingBlock(msgspec.Struct, frozen=True, gc=False):
    """Reasoning text the model made visible. thinkingSignature is never read."""

    text: str
    kind: ClassVar[Literal["thinking"]] = "thinking"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "text": self.text}


class UnavailableBlock(msgspec.Struct, frozen=True, gc=False):
    """Content that exists but is not readable here: redacted reasoning (`redacted: true`). Text is empty."""

    reason: str
    text: str = ""
    kind: ClassVar[Literal["unavailable"]] = "unavailable"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "reason": self.reason, "text": self.text}


class ToolCallBlock(msgspec.Struct, frozen=True, gc=False):
    """A tool call: its safe id (hashed when outside the id pattern), the tool name and the arguments."""

    id: str | None
    name: str | None
    arguments: Json
    kind: ClassVar[Literal["toolCall"]] = "toolCall"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "id": self.id, "name": self.name, "arguments": self.arguments}


class ImageBlock(msgspec.Struct, frozen=True, gc=False):
    """An image placeholder: the media type only; the base64 data is not carried."""

    mime_type: str | None
    kind: ClassVar[Literal["image"]] = "image"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "mimeType": self.mime_type}


class CommandBlock(msgspec.Struct, frozen=True, gc=False):
    """The command line of a bashExecution message."""

    text: str
    kind: ClassVar[Literal["command"]] = "command"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "text": self.text}


class UnsupportedBlock(msgspec.Struct, frozen=True, gc=False):
    """A content block this parser does not render (an unknown or malformed block); `type` names it."""

    type: str
    kind: ClassVar[Literal["unsupported"]] = "unsupported"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "type": self.type}


Block: TypeAlias = (
    TextBlock | ThinkingBlock | UnavailableBlock | ToolCallBlock | ImageBlock | CommandBlock | UnsupportedBlock
)


class Notice(msgspec.Struct, frozen=True, gc=False):
    """Something the reader must show instead of (or around) history: a code, a message, its lines.

    `id` is an `x.` id, stable while the file grows. `line` is the 1-based line it is about (None for none);
    `lines` lists related lines (the unreadable lines named by a missing-parent notice, at most
    `LINES_CAP` of them, the ones nearest the entry; the superseding line of a duplicate-id notice; a loop's
    lines). `through` is the last line a malformed-line notice stands for: one notice covers a run of
    consecutive unreadable lines, `line` to `through` (equal for one line); None for every other code.
    """

    id: str
    code: NoticeCode
    message: str
    line: int | None
    lines: tuple[int, ...] = ()
    through: int | None = None

    def to_json(self) -> dict[str, Json]:
        return {
            "id": self.id,
            "code": self.code,
            "message": self.message,
            "line": self.line,
            "lines": list(self.lines),
            "through": self.through,
        }


class Item(msgspec.Struct, frozen=True, gc=False):
    """One rendered thing on a branch: an entry (`n.` id) or a notice (`x.` id), at a 1-based file line.

    `entry` is the namespaced id of the entry the item renders or stands for (None for a line notice).
    `attrs` holds the kind's small fields (README, "Items"); every long string is in `blocks`.
    """

    id: str
    kind: ItemKind
    line: int
    timestamp: str | None
    blocks: tuple[Block, ...] = ()
    attrs: Mapping[str, Json] = msgspec.field(default_factory=dict)
    entry: str | None = None
    notice: Notice | None = None

    def to_json(self) -> dict[str, Json]:
        return {
            "id": self.id,
            "kind": self.kind,
            "line": self.line,
            "timestamp": self.timestamp,
            "entry": self.entry,
            "blocks": [b.to_json() for b in self.blocks],
            "attrs": dict(self.attrs),
            "notice": None if self.notice is None else self.notice.to_json(),
        }


class ItemJson(msgspec.Struct, frozen=True, gc=False):
    """An entry's item as the JSON of each of its values, cut from the entry's line without decoding its
    strings (`Parsed.render_json`). For the item `Parsed.render(ref)` makes, with `d = item.to_json()`:
    `id`, `kind`, `line` are d's (`entry` is `id`, `notice` is null); `timestamp` is the JSON of
    d["timestamp"]; `attrs` is (name, JSON of the value) of each of d["attrs"], in order; `blocks` is, for
    each of d["blocks"], (key, JSON of the value) of each of its keys in order, a toolCall's `arguments` being
    the JSON of the arguments value. "The JSON" is exactly what a compact encoder writes (msgspec, or Python's
    json with ensure_ascii=False and `(",", ":")` separators: the same bytes for every value here). A block's
    long `text` (over 512 bytes of JSON) is a `msgspec.Raw`: a view of the file's bytes holding that JSON (a
    string token), not a copy; every other value is `bytes`."""

    id: str
    kind: ItemKind
    line: int
    timestamp: bytes
    attrs: tuple[tuple[str, bytes], ...]
    blocks: tuple[tuple[tuple[str, bytes | msgspec.Raw], ...], ...]


@dataclass(frozen=True, slots=True)
class Header:
    """Line 1. `id` is the raw Pi session id; `cwd` is absolute (else the file was refused)."""

    id: str
    version: int
    timestamp: str | None
    cwd: str
    parent_session: str | None


class ForestView(Protocol):
    """What an `Entry` and a `Branch` ask of the shared tree they belong to (`_tree.Forest`, which is built
    from this module's values: typing it here keeps the model below the tree)."""

    def entry_item(self, w: int) -> Item | None: ...

    def render(self, ref: int) -> Item: ...

    def walk(self, path: Sequence[int], start: int, stop: int,
             marks: dict[int, tuple[int, int, int]] | None = None) -> list[int]: ...

    def path(self, leaf: int) -> array[int]: ...

    def path_ids(self, leaf: int) -> tuple[str, ...]: ...


@dataclass(frozen=True, eq=False)
class Entry:
    """One entry of the tree (the winner where an id repeats).

    `id`/`parent` are namespaced; `parent` is None for a root (parentId null, a missing parent, or the
    cut point of a loop). `branch` is the name of the branch whose own segment holds the entry. `item` is
    the entry's rendered item, its notice item (unknown type or role), or None for a hidden entry; it is
    rendered on first use.
    """

    id: str
    raw_id: str
    type: str | None
    line: int
    timestamp: str | None
    parent: str | None
    raw_parent_id: Json
    branch: str
    _forest: ForestView = field(repr=False)
    _index: int = field(repr=False)

    @property
    def item(self) -> Item | None:
        """Rendered from the entry's line now (nothing rendered is kept)."""
        return self._forest.entry_item(self._index)


@dataclass(frozen=True, eq=False)
class Branch:
    """A root-to-leaf history. `items` is computed on first use; `item_count` is known without it.

    `start` is the entry that starts the branch (the first root for `main`, else `b.<id>`'s entry),
    `parent_branch`/`fork_point` say where it leaves its parent branch (None for a root branch). `leaf` is
    None only for `main` in a file without entries.
    """

    name: str
    leaf: str | None
    start: str | None
    parent_branch: str | None
    fork_point: str | None
    item_count: int
    _forest: ForestView = field(repr=False)
    _leaf_index: int = field(repr=False)

    @cached_property
    def items(self) -> tuple[Item, ...]:
        """Items in order: the root-to-leaf path merged with every line notice by file position (rendered
        once here and kept by this Branch: a reader that pages uses `items_from` or `refs_from`)."""
        forest = self._forest
        return tuple(forest.render(ref) for ref in forest.walk(self._path, 0, self.item_count))

    @cached_property
    def _path(self) -> array[int]:
        return self._forest.path(self._leaf_index)

    def items_from(self, start: int, count: int) -> tuple[Item, ...]:
        """`items[start:start + count]`, rendering only those items (not the whole branch).

        Equal to slicing `items` for every non-negative `start` and `count`; past the end it is shorter
        or empty. A slice that starts where an earlier one ended costs O(count) plus rendering it (the
        branch remembers where each slice stopped), so paging through a branch costs as much at its end as
        at its start; any other start costs O(depth + line notices) more. The path is computed once per
        branch; the items are rendered from their lines on every call (nothing rendered is kept, unless
        `items` was asked for). Raises ValueError for a negative `start` or `count` (a programming error).
        """
        cached = self.__dict__.get("items")
        if cached is not None:
            if start < 0 or count < 0:
                raise ValueError("items_from takes a non-negative start and count")
            return tuple(cached[start:start + count])
        render = self._forest.render
        return tuple(render(ref) for ref in self.refs_from(start, count))

    def refs_from(self, start: int, count: int) -> tuple[int, ...]:
        """The refs of `items[start:start + count]` (`Parsed.render` turns a ref into its item), rendering
        nothing: O(count) where an earlier slice stopped, as `items_from`. A ref names the same item in
        every result `parse_appended` continues in place from this one (`extends_previous`), so a caller
        may key what it keeps of an item by its ref. Raises ValueError for a negative argument."""
        if start < 0 or count < 0:
            raise ValueError("items_from takes a non-negative start and count")
        return tuple(self._forest.walk(self._path, start, start + count, self._marks))

    @cached_property
    def _marks(self) -> dict[int, tuple[int, int, int]]:
        # Where each slice of `items_from` stopped (Forest.walk): one small tuple per slice.
        return {}

    @cached_property
    def item_ids(self) -> tuple[str, ...]:
        """The ids of `items`, in order: what a follow cursor digests."""
        return tuple(item.id for item in self.items)

    @cached_property
    def entry_ids(self) -> tuple[str, ...]:
        """Namespaced ids of every entry on the path, root to leaf, hidden entries included."""
        return self._forest.path_ids(self._leaf_index)


@dataclass(frozen=True, eq=False)
class Parsed:
    """A parsed session file (see README, "Output model")."""

    header: Header
    entries: Mapping[str, Entry]
    branches: Mapping[str, Branch]
    default_branch: str
    default_leaf: str | None
    notices: tuple[Notice, ...]
    #: Every unreadable line, in order. A compact `Sequence[int]` (runs of consecutive lines, see
    #: `unreadable_runs`) that equals the tuple of those lines; the parser always makes it.
    unreadable_lines: Runs
    superseded_lines: tuple[int, ...]
    forked_from_earlier_session: bool
    incomplete: bool
    line_count: int
    #: True only for a `parse_appended` result that added the appended lines without touching anything
    #: before them: every branch of the previous result is then, item for item, the start of the
    #: same-named branch here. False for `parse` and for a continuation that had to rebuild the tree (the
    #: appended lines held a duplicate id, a late parent or a loop); the result is the same either way.
    extends_previous: bool = False
    # What parse_appended continues from (decoded records, indexes); private to _parse.py.
    _state: object = field(default=None, repr=False)

    def render(self, ref: int) -> Item:
        """The item a ref of this result names (`Branch.refs_from`), rendered from its line now. Raises
        ValueError for a ref that names no item of this result."""
        forest = self._state.forest  # type: ignore[attr-defined]
        item: Item = forest.render(ref)
        return item

    def render_json(self, ref: int) -> ItemJson | None:
        """The item a ref names as the JSON of its values, cut from its line's bytes (`ItemJson`), or None
        when this fast path cannot prove those bytes are the rendered item's (a notice, a line the exact
        decoder read, a non-canonical escape, a long integer, ...): the caller then uses `render(ref)`.
        Where it is not None, it equals the JSON of `render(ref).to_json()` value by value."""
        forest = self._state.forest  # type: ignore[attr-defined]
        got: ItemJson | None = forest.render_json(ref)
        return got

    def unreadable_run_count(self) -> int:
        """How many runs `unreadable_runs` yields (how many malformed-line notices a branch holds)."""
        return self.unreadable_lines.run_count

    def unreadable_runs(self) -> Iterator[tuple[int, int]]:
        """(first line, count) of each run of consecutive unreadable lines, in file order: one
        malformed-line notice each."""
        return self.unreadable_lines.runs()
