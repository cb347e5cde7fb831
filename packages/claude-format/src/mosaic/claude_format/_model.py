"""The output model: frozen values for one parsed Claude Code transcript.

Items, their blocks and notices are frozen msgspec Structs with `gc=False` (they hold no reference cycles,
so the cyclic collector never tracks them), with the same fields and the same `to_json()` shapes as
pi-format's: the reader (chat-pages) turns both into the one CHAT-01 vocabulary of
schemas/chat-01.schema.json. `Branch` and `Parsed` are views over the shared tree (`_tree.Forest`): a
branch's items are rendered from their lines when asked for, never kept. The tree is built from this
module's values, so they type it by `ForestView` (what they ask of it) and import nothing above them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol, TypeAlias

import msgspec

if TYPE_CHECKING:
    from ._runs import Runs

# What mosaic.claude_format.model offers (it star-imports this list).
__all__ = [
    "NOTICE_CODES",
    "Block",
    "Branch",
    "ImageBlock",
    "Item",
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

ItemKind: TypeAlias = Literal["user", "assistant", "toolResult", "notice"]

NoticeCode: TypeAlias = Literal[
    "malformed-line",
    "missing-parent",
    "loop",
    "unknown-entry-type",
    "unknown-role",
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
        "unknown-entry-type": "in place of the entry, or at the line's file position on every branch",
        "unknown-role": "in place of the entry",
        "duplicate-id": "global only",
    }
)


class TextBlock(msgspec.Struct, frozen=True, gc=False):
    """Plain text (a typed prompt, an assistant's text, a tool result's text)."""

    text: str
    kind: ClassVar[Literal["text"]] = "text"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "text": self.text}


class ThinkingBlock(msgspec.Struct, frozen=True, gc=False):
    """Reasoning the model made visible (a `thinking` block). Its `signature` is never read."""

    text: str
    kind: ClassVar[Literal["thinking"]] = "thinking"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "text": self.text}


class UnavailableBlock(msgspec.Struct, frozen=True, gc=False):
    """Content that exists but is not readable here: a `redacted_thinking` block. Text is always empty."""

    reason: str
    text: str = ""
    kind: ClassVar[Literal["unavailable"]] = "unavailable"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "reason": self.reason, "text": self.text}


class ToolCallBlock(msgspec.Struct, frozen=True, gc=False):
    """A `tool_use` block: its safe id, the tool name and the input (the JSON value)."""

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


class UnsupportedBlock(msgspec.Struct, frozen=True, gc=False):
    """A content block this parser does not render (an unknown type, or a field of the wrong type); `type`
    names it (at most 64 characters), never its content."""

    type: str
    kind: ClassVar[Literal["unsupported"]] = "unsupported"

    def to_json(self) -> dict[str, Json]:
        return {"kind": self.kind, "type": self.type}


Block: TypeAlias = TextBlock | ThinkingBlock | UnavailableBlock | ToolCallBlock | ImageBlock | UnsupportedBlock


class Notice(msgspec.Struct, frozen=True, gc=False):
    """Something the reader must show instead of (or around) history: a code, a message, its lines.

    `id` is an `x.` id, stable while the file grows; `line` the 1-based line it is about; `lines` related
    lines (at most `LINES_CAP`); `through` the last line of a malformed-line run (equal to `line` for one
    line), None for every other code.
    """

    id: str
    code: NoticeCode
    message: str
    line: int | None
    lines: tuple[int, ...] = ()
    through: int | None = None

    def to_json(self) -> dict[str, Json]:
        return {"id": self.id, "code": self.code, "message": self.message, "line": self.line,
                "lines": list(self.lines), "through": self.through}


class Item(msgspec.Struct, frozen=True, gc=False):
    """One rendered thing on a branch: an entry (`n.` id) or a notice (`x.` id), at a 1-based file line.

    `entry` is the item id of the entry the item renders or stands for (None for a line notice). `attrs`
    holds the kind's small fields (README, "Output model"); every long string is in `blocks`.
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
        return {"id": self.id, "kind": self.kind, "line": self.line, "timestamp": self.timestamp,
                "entry": self.entry, "blocks": [b.to_json() for b in self.blocks], "attrs": dict(self.attrs),
                "notice": None if self.notice is None else self.notice.to_json()}


class ForestView(Protocol):
    """What a `Branch` and a `Parsed` ask of the shared tree they are views over (`_tree.Forest`)."""

    def item_id(self, e: int) -> str: ...

    def path(self, leaf: int) -> tuple[int, ...]: ...

    def walk(self, path: tuple[int, ...], start: int, stop: int,
             marks: dict[int, tuple[int, int, int, int]]) -> Iterator[int]: ...

    def render(self, ref: int) -> Item: ...


@dataclass(frozen=True, eq=False)
class Branch:
    """A root-to-leaf history. `item_count` is known without rendering; `items_from` renders a slice.

    `start` is the item id of the entry that starts it, `parent_branch` and `fork_point` say where it
    leaves its parent branch (None for a root branch), `leaf` is the item id of its last entry (None only
    for `main` in a transcript without entries). `sidechain` is True for a branch of sidechain entries.
    """

    name: str
    leaf: str | None
    start: str | None
    parent_branch: str | None
    fork_point: str | None
    item_count: int
    sidechain: bool
    _forest: ForestView = field(repr=False)
    _leaf_index: int = field(repr=False)

    @cached_property
    def _path(self) -> tuple[int, ...]:
        return self._forest.path(self._leaf_index)

    @cached_property
    def _marks(self) -> dict[int, tuple[int, int, int, int]]:
        # Where each slice of refs_from stopped: (path position, sub-item, run pointer, line pointer).
        return {}

    def refs_from(self, start: int, count: int) -> tuple[int, ...]:
        """The refs of `items[start:start + count]` (`Parsed.render` turns a ref into its item), rendering
        nothing. A slice that starts where an earlier one stopped resumes there (O(count)); any other start
        walks from the root (O(depth + line notices)). A ref names the same item in every result
        `parse_appended` continued in place from this one. Raises ValueError for a negative argument."""
        if start < 0 or count < 0:
            raise ValueError("refs_from takes a non-negative start and count")
        return tuple(self._forest.walk(self._path, start, start + count, self._marks))

    def items_from(self, start: int, count: int) -> tuple[Item, ...]:
        """`items[start:start + count]`, rendering only those items from their lines (nothing is kept)."""
        render = self._forest.render
        return tuple(render(ref) for ref in self.refs_from(start, count))

    @cached_property
    def items(self) -> tuple[Item, ...]:
        """Every item of the branch, in order: the root-to-leaf path (hidden entries left out, notices in
        place) merged with the line notices by file position (rendered once here and kept by this Branch:
        a reader that pages uses `items_from` or `refs_from`)."""
        return self.items_from(0, self.item_count)

    @cached_property
    def entry_ids(self) -> tuple[str, ...]:
        """The item ids of every entry on the path, root to leaf, hidden ones (attachments) included."""
        return tuple(self._forest.item_id(e) for e in self._path)


@dataclass(frozen=True, eq=False)
class Parsed:
    """A parsed transcript (see README, "Output model")."""

    branches: Mapping[str, Branch]
    default_branch: str
    default_leaf: str | None
    #: How the default leaf was chosen: "last-prompt" (the last last-prompt line's leafUuid), "last-uuid-entry"
    #: (the last entry in file order that is not a sidechain entry; the last entry when all are), or None
    #: (no entries).
    leaf_rule: str | None
    notices: tuple[Notice, ...]
    unreadable_lines: Runs
    superseded_lines: tuple[int, ...]
    incomplete: bool
    line_count: int
    entry_count: int
    #: The version every entry carries (PINNED_VERSION), None when there are no entries yet.
    version: str | None
    #: The `sessionId`, `cwd` and `timestamp` of the first entry in file order (None without entries).
    session_id: str | None
    cwd: str | None
    created_at: str | None
    extends_previous: bool = False
    #: Claude Code transcripts have no parentSession: always False (the reader's view field).
    forked_from_earlier_session: bool = False
    _state: object = field(default=None, repr=False)

    def render(self, ref: int) -> Item:
        """The item a ref of this result names (`Branch.refs_from`), rendered from its line now. Raises
        ValueError for a ref that names no item of this result."""
        forest: ForestView = self._state.forest  # type: ignore[attr-defined]
        return forest.render(ref)

    def unreadable_run_count(self) -> int:
        """How many runs `unreadable_runs` yields (how many malformed-line notices a branch holds)."""
        return self.unreadable_lines.run_count

    def unreadable_runs(self) -> Iterator[tuple[int, int]]:
        """(first line, count) of each run of consecutive unreadable lines, in file order."""
        return self.unreadable_lines.runs()
