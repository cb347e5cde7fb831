"""Claude's stream-json records in neutral terms (`ClaudeRules.read`, the seam's `Reading`): which of a turn's
facts a record is and the CHAT-01 events it shows, in the shape the Pi adapter gives the same turn. The core
decides what each fact does (`core/_events`); here only what Claude's record says. Orders cited are the
recordings in fixtures/claude-2.1.283/recordings (sealed-*.jsonl).

1. A turn on the wire: `command_lifecycle` `queued` (the message was read: the prompt's acknowledgement,
   taken by the link), `started` (a turn takes it: the run starts, and the person's message is being worked
   on), `system/init`, `assistant` and `user` messages, `result` (the turn ends and the run settles), then
   the message's terminal frame (`completed`, `cancelled`, ...: nothing more to read, the link forgets it).
2. A `queued` frame is queued input (O5 in an interrupt's pause: the controller writes no message during a
   stop, so it is another's). A `cancelled` frame names an input the engine dropped (`input_cancelled`): the
   slot's prompt, when an interrupt cancelled it before its turn started (the core settles it); the
   terminal frame of a turn that ran, or another's message, changes nothing.
3. `system/init`, `assistant`, `user`, `result` and `stream_event` need a turn started (O6 otherwise).
4. An `assistant` message shows as Pi's does: `message-start` (role assistant, no content yet), one
   `text-delta` per text block, `message-end` (the whole content, Claude's blocks in Pi's names: `tool_use`
   becomes `toolCall` with `arguments`; `stopReason` `toolUse` when it calls a tool, else `stop`), then
   `tool-start` per tool use. A `user` message carrying `tool_result` blocks shows `tool-end` per result; the
   user message `[Request interrupted by user]` (or `[Request interrupted by user for tool use]`, when the
   interrupt cut a tool use) is the aborted message (the interrupt's, or O4). `result` is
   `run-settled`. Claude does not echo the person's prompt (no `--replay-user-messages` in the seal), so a
   Claude turn has no user `message-start`/`message-end`: the only difference from Pi's events.
5. The engine's `can_use_tool` requests are dialogs (P3 here; P7's answers are not built in this slice).
6. Any other record type (and any `system` subtype but init) is unknown: its type and its size as Claude
   wrote it, counted (C-4 interim); a `system/status` and the `control_cancel_request` are internal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._seam import DialogAsk, Reading

__all__ = ["INTERRUPTED_TEXT", "read"]

INTERRUPTED_TEXT = "[Request interrupted by user]"  # sealed-interrupt-*.jsonl: the user record the interrupt writes
# ... and its form when the interrupt cut a tool use (a permission request pending or answered:
# sealed-interrupt-pending-permission, sealed-allow-then-interrupt): the same aborted message (rule 4).
_INTERRUPTED_FOR_TOOL = "[Request interrupted by user for tool use]"
_INTERRUPTED = frozenset({INTERRUPTED_TEXT, _INTERRUPTED_FOR_TOOL})
_TURN_RECORDS = frozenset({"assistant", "user", "result", "stream_event"})


def read(record: Mapping[str, Any]) -> Reading:
    """One Claude record in neutral terms (rules 1-6)."""
    kind = record.get("type")
    name = kind if isinstance(kind, str) else ""
    if name == "command_lifecycle":
        state = record.get("state")
        uuid = record.get("command_uuid")
        return Reading(name, run_start=state == "started", user_message_start=state == "started",
                       queued_input=state == "queued",
                       input_cancelled=uuid if state == "cancelled" and isinstance(uuid, str) else None)
    if name == "system":
        subtype = record.get("subtype")
        if subtype == "init":
            return Reading(name, run_event=True)
        if subtype == "status":
            return Reading(name)
        return _unknown(f"system/{subtype}", record)
    if name == "control_request":
        request = record.get("request")
        if isinstance(request, Mapping) and request.get("subtype") == "can_use_tool":
            return Reading(name, dialog=DialogAsk(str(record.get("request_id")), "confirm",
                                                  {"title": f"Claude asks to use {request.get('tool_name')}",
                                                   "options": None}))
        return _unknown(f"control_request/{request.get('subtype') if isinstance(request, Mapping) else None}",
                        record)
    if name == "control_cancel_request":
        return Reading(name)
    if name not in _TURN_RECORDS:
        return _unknown(name or "?", record)
    message = record.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    blocks = [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []
    if name == "assistant":
        return _assistant(blocks)
    if name == "user":
        return _user(blocks)
    if name == "result":
        return Reading(name, run_event=True, turn_end=True, run_settled=True, event=("run-settled", {}))
    return Reading(name, run_event=True)  # stream_event: the assistant record that follows carries the whole


def _assistant(blocks: list[Mapping[str, Any]]) -> Reading:
    converted = [_block(b) for b in blocks]
    tools = [b for b in blocks if b.get("type") == "tool_use"]
    events: list[tuple[str, Mapping[str, Any]]] = [
        ("text-delta", {"contentIndex": i, "delta": b.get("text", "")})
        for i, b in enumerate(blocks) if b.get("type") == "text"]
    events.append(("message-end", {"role": "assistant", "content": converted, "updateMode": "replace",
                                   "stopReason": "toolUse" if tools else "stop"}))
    events += [("tool-start", {"toolCallId": t.get("id"), "toolName": t.get("name"), "args": t.get("input")})
               for t in tools]
    first = (str(tools[0].get("id")), str(tools[0].get("name"))) if tools else None
    return Reading("assistant", run_event=True, tool_start=first,
                   event=("message-start", {"role": "assistant", "content": []}), events=tuple(events))


def _user(blocks: list[Mapping[str, Any]]) -> Reading:
    results = [b for b in blocks if b.get("type") == "tool_result"]
    aborted = any(b.get("type") == "text" and b.get("text") in _INTERRUPTED for b in blocks)
    events = tuple(("tool-end", {"toolCallId": r.get("tool_use_id"), "result": r.get("content"),
                                 "isError": r.get("is_error") is True}) for r in results)
    return Reading("user", run_event=True, aborted_message=aborted,
                   tool_end=str(results[0].get("tool_use_id")) if results else None,
                   event=events[0] if events else None, events=events[1:])


def _block(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Claude content block in Pi's names (rule 4)."""
    if block.get("type") == "tool_use":
        return {"type": "toolCall", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    return dict(block)


def _unknown(name: str, record: Mapping[str, Any]) -> Reading:
    size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return Reading(name, unknown=(name, size))
