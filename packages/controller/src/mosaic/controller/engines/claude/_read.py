"""Claude's stream-json records in neutral terms (`ClaudeRules.read`, the seam's `Reading`): which of a turn's
facts a record is and the CHAT-01 events it shows, in the shape the Pi adapter gives the same turn. The core
decides what each fact does (`core/_events`); here only what Claude's record says. Orders cited are the
recordings in fixtures/claude-2.1.283/recordings (sealed-*.jsonl).

1. A turn on the wire: `command_lifecycle` `queued` (the message was read: the prompt's acknowledgement,
   taken by the link), `started` (a turn takes it: the run starts, and the person's message is being worked
   on), `system/init`, `assistant` and `user` messages, `result` (the turn ends and the run settles), then
   the message's terminal frame (`completed`, `cancelled`, ...: nothing more to read, the link forgets it).
2. A `queued` frame is queued input (O5 in an interrupt's pause: the controller writes no message during a
   stop, so it is another's).
3. `system/init`, `assistant`, `user`, `result` and `stream_event` need a turn started (O6 otherwise).
4. An `assistant` message shows as Pi's does: `message-start` (role assistant, no content yet), one
   `text-delta` per text block, `message-end` (the whole content, Claude's blocks in Pi's names: `tool_use`
   becomes `toolCall` with `arguments`; `stopReason` `toolUse` when it calls a tool, else `stop`), then
   `tool-start` per tool use. A `user` message carrying `tool_result` blocks shows `tool-end` per result; the
   user message `[Request interrupted by user]` is the aborted message (the interrupt's, or O4). `result` is
   `run-settled`. Claude does not echo the person's prompt (no `--replay-user-messages` in the seal), so a
   Claude turn has no user `message-start`/`message-end`: the only difference from Pi's events.
5. A `can_use_tool` request is a permission request (P7, `permission_request`): a dialog with Claude's exact
   request id, shown with the tool, its input and Claude's description as data (never interpreted: the
   terminal renders them inert), whose only choices are `allow once` (Claude's `allow` with `updatedInput`
   its own input, unchanged) and `deny` (with `DENY_MESSAGE`), each the exact body of the `control_response`
   the wire writes. Claude's `permission_suggestions` (recordings: a rule saved to localSettings, a directory
   added for the session, the acceptEdits mode) widen what runs without asking: each is listed refused,
   with why, never offered. Claude has no cancel answer, so none is offered or invented. No timeout: Claude
   waits for the answer (an interrupt cancels it, rule 6).
6. A `control_cancel_request` withdraws the permission request it names (`dialog_withdrawn`): Claude will
   take no answer to it (recordings/sealed-interrupt-pending-permission: at an interrupt, before its
   receipt; FACTS: a late allow is ignored and the tool does not run), native evidence for H8.
7. Any other record type (and any `system` subtype but init) is unknown: its type and its size as Claude
   wrote it, counted (C-4 interim); a `system/status` is internal.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._seam import DialogAsk, Reading

__all__ = ["ALLOW_ONCE", "DENY", "DENY_MESSAGE", "INTERRUPTED_TEXT", "permission_request", "read"]

INTERRUPTED_TEXT = "[Request interrupted by user]"  # sealed-interrupt-*.jsonl: the user record the interrupt writes
ALLOW_ONCE = "allow once"  # rule 5: the two choices' labels, exactly
DENY = "deny"
DENY_MESSAGE = "The person controlling this conversation denied this tool use."  # what Claude's tool result says
_TURN_RECORDS = frozenset({"assistant", "user", "result", "stream_event"})


def read(record: Mapping[str, Any]) -> Reading:
    """One Claude record in neutral terms (rules 1-6)."""
    kind = record.get("type")
    name = kind if isinstance(kind, str) else ""
    if name == "command_lifecycle":
        state = record.get("state")
        return Reading(name, run_start=state == "started", user_message_start=state == "started",
                       queued_input=state == "queued")
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
            return Reading(name, dialog=permission_request(record))
        return _unknown(f"control_request/{request.get('subtype') if isinstance(request, Mapping) else None}",
                        record)
    if name == "control_cancel_request":
        rid = record.get("request_id")
        return Reading(name, dialog_withdrawn=rid if isinstance(rid, str) else None)
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
    aborted = any(b.get("type") == "text" and b.get("text") == INTERRUPTED_TEXT for b in blocks)
    events = tuple(("tool-end", {"toolCallId": r.get("tool_use_id"), "result": r.get("content"),
                                 "isError": r.get("is_error") is True}) for r in results)
    return Reading("user", run_event=True, aborted_message=aborted,
                   tool_end=str(results[0].get("tool_use_id")) if results else None,
                   event=events[0] if events else None, events=events[1:])


def permission_request(record: Mapping[str, Any]) -> DialogAsk:
    """A `can_use_tool` control request as the dialog the controller answers (rule 5)."""
    request = record.get("request")
    request = request if isinstance(request, Mapping) else {}
    rid = record.get("request_id")
    tool = request.get("tool_name")
    tool_input = request.get("input")
    fields: dict[str, Any] = {"title": f"Claude asks to use {request.get('display_name') or tool}", "options": None,
                              "tool": tool, "input": tool_input}
    for key, shown in (("description", "description"), ("blocked_path", "blockedPath"),
                       ("tool_use_id", "toolUseId")):
        if key in request:
            fields[shown] = request[key]
    suggestions = request.get("permission_suggestions")
    refused = tuple(_widening(s) for s in suggestions if isinstance(s, Mapping)) if isinstance(suggestions, list) \
        else ()
    if not isinstance(rid, str) or not rid:
        return DialogAsk(None, "can_use_tool", fields, refused=refused,
                         unanswerable="Claude gave this permission request no id to answer")
    allow = {"behavior": "allow", "updatedInput": tool_input if isinstance(tool_input, Mapping) else {}}
    deny = {"behavior": "deny", "message": DENY_MESSAGE}
    return DialogAsk(rid, "can_use_tool", fields, ((ALLOW_ONCE, allow), (DENY, deny)), refused)


_WIDENS = "it widens what Claude runs without asking beyond this one call; the controller answers only allow once or deny (P7)"


def _widening(suggestion: Mapping[str, Any]) -> tuple[str, str]:
    """One of Claude's `permission_suggestions` as a refused choice: its words, and why (rule 5)."""
    kind = suggestion.get("type")
    where = suggestion.get("destination")
    if kind == "addRules":
        rules = suggestion.get("rules")
        named = ", ".join(f"{r.get('toolName')}({r.get('ruleContent')})" for r in rules if isinstance(r, Mapping)) \
            if isinstance(rules, list) else ""
        return (f"always {suggestion.get('behavior')} {named} ({where})",
                f"a rule saved to {where} lets every matching call run without asking: {_WIDENS}")
    if kind == "addDirectories":
        dirs = suggestion.get("directories")
        named = ", ".join(str(d) for d in dirs) if isinstance(dirs, list) else ""
        return (f"allow access to {named} ({where})",
                f"a directory added for the {where} lets calls inside it run without asking: {_WIDENS}")
    if kind == "setMode":
        return (f"switch to {suggestion.get('mode')} mode ({where})",
                f"the {suggestion.get('mode')} mode lets edits run without asking: {_WIDENS}")
    return (f"{kind} ({where})", f"Claude suggests changing its permissions: {_WIDENS}")


def _block(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Claude content block in Pi's names (rule 4)."""
    if block.get("type") == "tool_use":
        return {"type": "toolCall", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    return dict(block)


def _unknown(name: str, record: Mapping[str, Any]) -> Reading:
    size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
    return Reading(name, unknown=(name, size))
