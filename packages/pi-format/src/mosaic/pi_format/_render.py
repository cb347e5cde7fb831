"""Entry rendering: what each entry type and message role shows, and its content blocks.

Seed README, "Parser": a compaction is a marker in place; redacted reasoning is unavailable with empty
text and thinkingSignature is never read; model and thinking-level changes, labels, session names and
extension state are not shown; custom_message shows only with display: true; an unknown entry type or role
becomes a notice. Entry and role shapes: FACTS.md (c) "Entry types" (session-manager.js 781-1091) and
Pi's docs/session-format.md.

Every function here is total over JSON values: a field of the wrong type becomes an unsupported block or
an absent attribute, never an exception.
"""

from __future__ import annotations

from typing import Any

from ._ids import NATIVE_PREFIX, NOTICE_PREFIX, safe_id
from ._model import (
    Block,
    CommandBlock,
    ImageBlock,
    Item,
    Json,
    Notice,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    UnavailableBlock,
    UnsupportedBlock,
)

#: Entry types that are part of the tree but never shown (session-manager.js 793-859, 930-957):
#: thinking_level_change, model_change, label, session_info (session name) and custom (extension state).
HIDDEN_TYPES = frozenset({"thinking_level_change", "model_change", "label", "session_info", "custom"})

#: Entry types shown as an item of their own.
SHOWN_TYPES = frozenset({"message", "custom_message", "compaction", "branch_summary"})

#: Message roles a `message` entry may carry in Pi 0.85.1 (FACTS.md (c); session-format.md 72-172).
ROLES = frozenset({"user", "assistant", "toolResult", "bashExecution"})

#: How much of an unknown block type (or a described value) an unsupported block names.
TYPE_NAME_MAX = 64

#: The string attributes an assistant message keeps, in order (the raw render, `_rawrender`, reads these too).
ASSISTANT_STR_ATTRS = ("stopReason", "errorMessage", "provider", "model", "api")

#: The boolean attributes a bashExecution message keeps after `exitCode`, in order.
BASH_BOOL_ATTRS = ("cancelled", "truncated", "excludeFromContext")


def describe(value: object) -> str:
    """A short, safe description of a JSON value for a notice message (never the full content)."""
    if isinstance(value, str):
        return repr(value[:TYPE_NAME_MAX] + ("..." if len(value) > TYPE_NAME_MAX else ""))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _put(attrs: dict[str, Json], key: str, value: object, kind: type) -> None:
    # bool is a subclass of int: never let true/false pass as a number.
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        attrs[key] = value  # type: ignore[assignment]


def content_blocks(value: object) -> tuple[Block, ...]:
    """The blocks of a `content` field: a string is one text block; a list maps block by block."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextBlock(value),)
    if not isinstance(value, list):
        return (UnsupportedBlock("<content is " + describe(value) + ">"),)
    return tuple(_block(element) for element in value)


def _block(element: object) -> Block:
    if not isinstance(element, dict):
        return UnsupportedBlock("<block is " + describe(element) + ">")
    btype = element.get("type")
    if btype == "text":
        text = element.get("text")
        return TextBlock(text) if isinstance(text, str) else UnsupportedBlock("text")
    if btype == "thinking":
        # Redacted reasoning: unavailable, with empty text, whatever the `thinking` field holds.
        # (Pi writes a placeholder there and the opaque data in thinkingSignature, which is never read.)
        redacted = element.get("redacted")
        if redacted is not None and redacted is not False and redacted != 0:
            return UnavailableBlock(reason="redacted")
        thinking = element.get("thinking")
        return ThinkingBlock(thinking) if isinstance(thinking, str) else UnsupportedBlock("thinking")
    if btype == "toolCall":
        raw_id = element.get("id")
        arguments: Json = element.get("arguments")
        return ToolCallBlock(
            id=safe_id(raw_id) if isinstance(raw_id, str) else None,
            name=_str_or_none(element.get("name")),
            arguments=arguments,
        )
    if btype == "image":
        return ImageBlock(mime_type=_str_or_none(element.get("mimeType")))
    if isinstance(btype, str):
        return UnsupportedBlock(btype[:TYPE_NAME_MAX])
    return UnsupportedBlock("<no type>")


def notice_item(
    code: Any, prefix: str, safe: str, line: int, message: str, entry: str | None, lines: tuple[int, ...] = ()
) -> Item:
    """An in-place notice item `x.<prefix>-<safe id>` standing for (or before) an entry."""
    nid = f"{NOTICE_PREFIX}{prefix}-{safe}"
    return Item(
        id=nid,
        kind="notice",
        line=line,
        timestamp=None,
        entry=entry,
        notice=Notice(id=nid, code=code, message=message, line=line, lines=lines),
    )


def shows(obj: dict[str, Any]) -> bool:
    """Whether an entry yields an item (its own, or a notice standing for it); `render_entry` agrees."""
    return shows_type(obj.get("type"), obj.get("display"))


def shows_type(etype: object, display: object) -> bool:
    """`shows` from the entry's `type` and `display` values alone (what the line index decodes)."""
    if etype == "custom_message":
        return display is True
    return not (isinstance(etype, str) and etype in HIDDEN_TYPES)


def render_entry(obj: dict[str, Any], raw_id: str, line: int) -> Item | None:
    """The item an entry shows as, a notice item standing for it, or None when the entry is hidden."""
    safe = safe_id(raw_id)
    nsid = NATIVE_PREFIX + safe
    timestamp = _str_or_none(obj.get("timestamp"))
    etype = obj.get("type")
    attrs: dict[str, Json] = {}

    if etype == "message":
        return _render_message(obj.get("message"), safe, nsid, line, timestamp)

    if etype == "custom_message":
        # Shown only with display: true (session-manager.js 881-896; seed "Parser").
        if obj.get("display") is not True:
            return None
        _put(attrs, "customType", obj.get("customType"), str)
        return Item(nsid, "custom_message", line, timestamp, content_blocks(obj.get("content")), attrs, nsid)

    if etype == "compaction":
        # A marker in place; the full history stays on the path. `retainedTail` (not written by 0.85.1's
        # SessionManager, FACTS.md (c)) would repeat entries that are already on the path: never read.
        summary = obj.get("summary")
        blocks: tuple[Block, ...] = (TextBlock(summary),) if isinstance(summary, str) else ()
        _put(attrs, "tokensBefore", obj.get("tokensBefore"), int)
        kept = obj.get("firstKeptEntryId")
        if isinstance(kept, str):
            attrs["firstKeptEntryId"] = NATIVE_PREFIX + safe_id(kept)
        return Item(nsid, "compaction", line, timestamp, blocks, attrs, nsid)

    if etype == "branch_summary":
        # A summary of an abandoned branch that Pi feeds back to the model: shown, as a marker with its text.
        summary = obj.get("summary")
        blocks = (TextBlock(summary),) if isinstance(summary, str) else ()
        from_id = obj.get("fromId")
        if isinstance(from_id, str):
            attrs["fromId"] = NATIVE_PREFIX + safe_id(from_id)
        return Item(nsid, "branch_summary", line, timestamp, blocks, attrs, nsid)

    if isinstance(etype, str) and etype in HIDDEN_TYPES:
        return None

    return notice_item(
        "unknown-entry-type",
        "type",
        safe,
        line,
        f"entry of unknown type {describe(etype)} at line {line} is not shown",
        nsid,
    )


def _render_message(msg: object, safe: str, nsid: str, line: int, timestamp: str | None) -> Item:
    if not isinstance(msg, dict):
        return notice_item(
            "unknown-role", "role", safe, line, f"message entry at line {line} has no message object", nsid
        )
    role = msg.get("role")
    attrs: dict[str, Json] = {}
    if role == "user":
        return Item(nsid, "user", line, timestamp, content_blocks(msg.get("content")), attrs, nsid)
    if role == "assistant":
        for key in ASSISTANT_STR_ATTRS:
            _put(attrs, key, msg.get(key), str)
        return Item(nsid, "assistant", line, timestamp, content_blocks(msg.get("content")), attrs, nsid)
    if role == "toolResult":
        call_id = msg.get("toolCallId")
        if isinstance(call_id, str):
            attrs["toolCallId"] = safe_id(call_id)
        _put(attrs, "toolName", msg.get("toolName"), str)
        _put(attrs, "isError", msg.get("isError"), bool)
        return Item(nsid, "toolResult", line, timestamp, content_blocks(msg.get("content")), attrs, nsid)
    if role == "bashExecution":
        blocks: list[Block] = []
        command = msg.get("command")
        if isinstance(command, str):
            blocks.append(CommandBlock(command))
        output = msg.get("output")
        if isinstance(output, str):
            blocks.append(TextBlock(output))
        _put(attrs, "exitCode", msg.get("exitCode"), int)
        for key in BASH_BOOL_ATTRS:
            _put(attrs, key, msg.get(key), bool)
        return Item(nsid, "bashExecution", line, timestamp, tuple(blocks), attrs, nsid)
    return notice_item(
        "unknown-role",
        "role",
        safe,
        line,
        f"message of unknown role {describe(role)} at line {line} is not shown",
        nsid,
    )
