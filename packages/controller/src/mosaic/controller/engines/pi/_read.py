"""Pi's native records in neutral terms (`PiRules.read`, the seam's `Reading`): which of a run's facts a
record is, the CHAT-01 event it shows (`EVENT_MAP`), and the dialog it asks. The core decides what each fact
does (`core/_events`); here only what Pi's record says.

1. Unknown records (not in `EVENT_MAP`) carry their type and their size as Pi wrote them (JSON.stringify is
   compact, non-ASCII raw: FACTS (b) "Framing"), C-4 interim.
2. The run grammar's events (FACTS "What a Python fake engine must mimic" 6) need an active run (O6);
   agent_settled is judged by the core's settle rule, not here.
3. agent_start starts a run, agent_end ends its turn, a user message_start makes the slot's receipt working,
   an assistant message_end with stopReason "aborted" is an abort (the chain's, or O4), a queue_update with a
   non-empty queue is queued input (O5 in an interrupt's pause), tool_execution_start/end open and close a
   tool call (K5), agent_settled settles the run.
4. A dialog's answers (issue 33; docs/pi-0.85.1.md "Extension UI under the seal"): a confirm offers
   `confirm` (`{"confirmed": true}`) and `decline` (`{"confirmed": false}`), a select its options' labels
   exactly (`{"value": <label>}`); no other value (Pi hands a confirm's `"confirmed": "yes"` to the handler
   as truthy, and a select's value unchecked). Cancel is never offered: on a confirm Pi reads it as a
   decline, on a select as a timeout, whose meaning (maybe allow) only the extension decides. Input and
   editor take free text: not answerable here. `timeout` (ms) becomes seconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._seam import DialogAsk, Reading
from ._tables import DIALOG, INTERNAL, classify_native

__all__ = ["read"]

_RUN_EVENTS = frozenset({"turn_start", "turn_end", "message_start", "message_update", "message_end",
                         "tool_execution_start", "tool_execution_update", "tool_execution_end", "agent_end"})
_DIALOG_FIELDS = ("title", "options", "message", "placeholder", "prefill", "timeout")  # rpc-mode.js 47-192


def read(record: Mapping[str, Any]) -> Reading:
    """One native record of Pi's in neutral terms (rules 1-3)."""
    kind = record.get("type")
    name = kind if isinstance(kind, str) else ""
    mapped = classify_native(record)
    if mapped is None:
        size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
        return Reading(name, unknown=(name or "?", size))
    message = record.get("message")
    role = message.get("role") if isinstance(message, Mapping) else None
    queued = [q for q in (record.get("steering"), record.get("followUp")) if isinstance(q, list) and q]
    dialog = None
    event = None
    if mapped == DIALOG:
        dialog = _dialog(record)
    elif mapped != INTERNAL:
        event = (mapped, _payload(mapped, record))
    return Reading(
        name,
        run_event=name in _RUN_EVENTS,
        run_start=name == "agent_start",
        turn_end=name == "agent_end",
        user_message_start=name == "message_start" and role == "user",
        aborted_message=(name == "message_end" and role == "assistant" and isinstance(message, Mapping)
                         and message.get("stopReason") == "aborted"),
        queued_input=name == "queue_update" and bool(queued),
        tool_start=(str(record.get("toolCallId")), str(record.get("toolName")))
        if name == "tool_execution_start" else None,
        tool_end=str(record.get("toolCallId")) if name == "tool_execution_end" else None,
        run_settled=name == "agent_settled",
        event=event,
        dialog=dialog,
    )


_CANCEL_CONFIRM = ("cancel", "Pi reads a cancel on a confirm as a decline: choose decline")
_CANCEL_SELECT = ("cancel", "Pi reads a cancel on a select as a timeout: the extension's own default, which "
                            "may mean allow")
_FREE_TEXT = "this controller answers only confirm and select; {} takes free text, so Pi decides on its own"


def _dialog(record: Mapping[str, Any]) -> DialogAsk:
    """A dialog request and the answers it may take from the controller (rule 4)."""
    method = record.get("method")
    fields = {k: record[k] for k in _DIALOG_FIELDS if k in record}
    ask_id = str(record["id"]) if "id" in record else None
    timeout = record.get("timeout")
    seconds = timeout / 1000 if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0 \
        else None
    options = record.get("options")
    if method == "confirm":
        return DialogAsk(ask_id, method, fields, (("confirm", {"confirmed": True}), ("decline", {"confirmed": False})),
                         (_CANCEL_CONFIRM,), timeout=seconds)
    if method == "select" and isinstance(options, list) and options and all(isinstance(o, str) for o in options) \
            and len(set(options)) == len(options):
        return DialogAsk(ask_id, method, fields, tuple((o, {"value": o}) for o in options), (_CANCEL_SELECT,),
                         timeout=seconds)
    why = _FREE_TEXT.format(method) if method in ("input", "editor") else "its options are not distinct labels"
    return DialogAsk(ask_id, method, fields, unanswerable=why, timeout=seconds)


def _payload(event_type: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The CHAT-01 payload of a mapped record, without the message number (the core adds it)."""
    if event_type == "message-start":
        message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
        assert isinstance(message, Mapping)
        return {"role": message.get("role"), "content": message.get("content", [])}
    if event_type in ("text-delta", "thinking-delta"):
        sub = record.get("assistantMessageEvent")
        assert isinstance(sub, Mapping)
        return {"contentIndex": sub.get("contentIndex"), "delta": sub.get("delta", "")}
    if event_type == "message-end":
        message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
        assert isinstance(message, Mapping)
        payload: dict[str, Any] = {"role": message.get("role"), "content": message.get("content", []),
                                   "updateMode": "replace"}
        for key in ("stopReason", "errorMessage", "toolCallId", "toolName", "isError"):
            if key in message:
                payload[key] = message[key]
        return payload
    if event_type in ("tool-start", "tool-update", "tool-end"):
        keys = {"tool-start": ("toolCallId", "toolName", "args"),
                "tool-update": ("toolCallId", "toolName", "partialResult"),
                "tool-end": ("toolCallId", "toolName", "result", "isError")}[event_type]
        return {k: record.get(k) for k in keys if k in record}
    return {}
