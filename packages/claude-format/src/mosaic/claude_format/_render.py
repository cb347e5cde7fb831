"""Entry rendering: what each entry type shows, and its content blocks (inert: text is carried as text,
never interpreted).

What Claude Code 2.1.283 writes (FACTS §2, the recordings): a `user` entry's `message.content` is a string
for a typed prompt and a list for tool results and images; an `assistant` entry holds ONE content block of
the API message (text, thinking, redacted_thinking, tool_use; `apiBlockIndex` says which); an
`attachment` entry (environment, model, skill listings, date, the full system prompt in `prompt_snapshot`,
...) is context the binary gave the model, never conversation: it is on the path and never shown.

Every function here is total over JSON values: a field of the wrong type becomes an unsupported block or an
absent attribute, never an exception.
"""

from __future__ import annotations

from typing import Any

from ._ids import NOTICE_PREFIX, native_id, safe_id
from ._model import (
    Block,
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

_TYPE_NAME_MAX = 64


def describe(value: object) -> str:
    """A short, safe description of a JSON value for a notice message (never the full content)."""
    if isinstance(value, str):
        return repr(value[:_TYPE_NAME_MAX] + ("..." if len(value) > _TYPE_NAME_MAX else ""))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _type_name(value: object) -> str:
    """An unsupported block's `type`: the type string (at most 64 characters), else a description."""
    if isinstance(value, str):
        return value[:_TYPE_NAME_MAX]
    return "(no type)" if value is None else f"({describe(value)})"


def _image(block: dict[str, Any]) -> ImageBlock:
    source = block.get("source")
    return ImageBlock(_str(source.get("media_type")) if isinstance(source, dict) else None)


def _content_blocks(content: object, *, results: bool) -> list[Block]:
    """The blocks of a message's content: a string is one text block; a list gives text, image, thinking,
    redacted_thinking (unavailable), tool_use (a tool call) and, where `results`, tool_result blocks (their
    own content, a string or text and image blocks, in place); anything else an unsupported block."""
    if isinstance(content, str):
        return [TextBlock(content)]
    if not isinstance(content, list):
        return [UnsupportedBlock(f"content {describe(content)}")]
    out: list[Block] = []
    for block in content:
        if not isinstance(block, dict):
            out.append(UnsupportedBlock(f"block {describe(block)}"))
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            out.append(TextBlock(block["text"]))
        elif kind == "image":
            out.append(_image(block))
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            out.append(ThinkingBlock(block["thinking"]))  # the signature is never read
        elif kind == "redacted_thinking":
            out.append(UnavailableBlock("redacted"))
        elif kind == "tool_use":
            raw = block.get("id")
            out.append(ToolCallBlock(safe_id(raw) if isinstance(raw, str) else None, _str(block.get("name")),
                                     block.get("input")))
        elif kind == "tool_result" and results:
            out.extend(_content_blocks(block.get("content", ""), results=False))
        else:
            out.append(UnsupportedBlock(_type_name(kind)))
    return out


def _sidechain_attrs(entry: dict[str, Any], attrs: dict[str, Json], sidechain: bool) -> dict[str, Json]:
    if sidechain:
        attrs["sidechain"] = True
        attrs["agentId"] = _str(entry.get("agentId"))
    return attrs


def entry_item(entry: dict[str, Any] | None, uuid: str, line: int, kind: str, sidechain: bool) -> Item:
    """The item of a shown entry (`kind` is what the index read its type as: user, assistant or another
    type). `entry` is the line's whole object, None when it could not be decoded in full (an integer past
    Python's digit limit in a value the index skipped, nesting too deep for the stack it is rendered
    from): that, a message that is not an object of the entry's role, or a type that disagrees with the
    index's, is a notice in the entry's place."""
    eid = native_id(uuid)
    if entry is None:
        return _role_notice(uuid, eid, line, None, "its line could not be decoded in full")
    timestamp = _str(entry.get("timestamp"))
    if kind == "other" or entry.get("type") != kind:
        notice = Notice(f"{NOTICE_PREFIX}type-{safe_id(uuid)}", "unknown-entry-type",
                        f"line {line}: an entry of type {describe(entry.get('type'))} is not shown (Claude Code "
                        "2.1.283 writes user, assistant and attachment entries)", line)
        return Item(notice.id, "notice", line, timestamp, entry=eid, notice=notice)
    message = entry.get("message")
    if not isinstance(message, dict) or message.get("role") != kind:
        role = message.get("role") if isinstance(message, dict) else message
        return _role_notice(uuid, eid, line, timestamp, f"its message is {describe(role)}, not a {kind} message")
    content = message.get("content")
    if kind == "assistant":
        attrs: dict[str, Json] = {"stopReason": _str(message.get("stop_reason")), "model": _str(message.get("model")),
                                  "messageId": _str(message.get("id"))}
        blocks = _content_blocks(content, results=False)
        return Item(eid, "assistant", line, timestamp, tuple(blocks), _sidechain_attrs(entry, attrs, sidechain), eid)
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []
    if results:
        first = results[0]
        call = first.get("tool_use_id")
        is_error = first.get("is_error")
        attrs = {"toolCallId": safe_id(call) if isinstance(call, str) else None,
                 "isError": is_error if isinstance(is_error, bool) else None}
        blocks = _content_blocks(content, results=True)
        return Item(eid, "toolResult", line, timestamp, tuple(blocks), _sidechain_attrs(entry, attrs, sidechain), eid)
    origin = entry.get("origin")
    attrs = {"origin": _str(origin.get("kind")) if isinstance(origin, dict) else None}
    if entry.get("isMeta") is True:  # a note the binary added for the model (the `[Image: source: …]` path)
        attrs["isMeta"] = True
    blocks = _content_blocks(content, results=False)
    return Item(eid, "user", line, timestamp, tuple(blocks), _sidechain_attrs(entry, attrs, sidechain), eid)


def _role_notice(uuid: str, eid: str, line: int, timestamp: str | None, why: str) -> Item:
    notice = Notice(f"{NOTICE_PREFIX}role-{safe_id(uuid)}", "unknown-role", f"line {line}: the entry is not shown: {why}",
                    line)
    return Item(notice.id, "notice", line, timestamp, entry=eid, notice=notice)


def other_line_item(value: dict[str, Any] | None, line: int) -> Item:
    """The notice of a line that has no uuid and is not one of the meta lines 2.1.283 writes."""
    kind = describe(value.get("type")) if value is not None else "(undecodable)"
    notice = Notice(f"{NOTICE_PREFIX}line-{line}", "unknown-entry-type",
                    f"line {line}: a line of type {kind} without a uuid is not shown (not part of the history)", line)
    return Item(notice.id, "notice", line, None, notice=notice)


def run_item(first: int, count: int, reason: str) -> Item:
    """The one malformed-line notice of a run of consecutive unreadable lines."""
    last = first + count - 1
    message = (f"line {first} is unreadable ({reason})" if count == 1
               else f"lines {first}-{last} are unreadable ({count} lines; the first: {reason})")
    notice = Notice(f"{NOTICE_PREFIX}line-{first}", "malformed-line", message, first, through=last)
    return Item(notice.id, "notice", first, None, notice=notice)


def gap_item(uuid: str, line: int, parent: str | None, before: tuple[int, int] | None, lines_cap: int) -> Item:
    """The missing-parent notice in place before an entry whose parent is not in the transcript. `before` is
    the run of unreadable lines that ends just before it (the likely place of the parent), if any."""
    named = f"parent {describe(parent)}" if parent is not None else "a parentUuid that is neither a string nor null"
    lines: tuple[int, ...] = ()
    extra = ""
    if before is not None:
        first, count = before
        lines = tuple(range(max(first, first + count - lines_cap), first + count))
        extra = f"; the unreadable line{'s' if count > 1 else ''} just before it ({first}-{first + count - 1}) may have held it"
    notice = Notice(f"{NOTICE_PREFIX}gap-{safe_id(uuid)}", "missing-parent",
                    f"line {line} names {named}, which is not in the transcript: the history before it is not "
                    f"shown{extra}", line, lines)
    return Item(notice.id, "notice", line, None, entry=native_id(uuid), notice=notice)


def loop_item(uuid: str, line: int, size: int, members: tuple[int, ...]) -> Item:
    """The loop notice in place before the entry where a parentUuid loop of `size` entries was cut; `members`
    lists the first lines of the loop (at most LINES_CAP)."""
    notice = Notice(f"{NOTICE_PREFIX}loop-{safe_id(uuid)}", "loop",
                    f"line {line} closes a loop of parentUuid links ({size} entries): the history is cut there",
                    line, members)
    return Item(notice.id, "notice", line, None, entry=native_id(uuid), notice=notice)


def duplicate_notice(earlier: int, later: int) -> Notice:
    return Notice(f"{NOTICE_PREFIX}dup-{earlier}", "duplicate-id",
                  f"line {earlier} is replaced by line {later}, which carries the same uuid", earlier, (later,))
