"""What the terminal shows, as lines of inert text: pure functions of the client library's values.

The transcript (`transcript_lines`) is a view over `mosaic.controller.client.Transcript.items`; this module
adds no rule of its own about the seam, only words. Every line passes through `inert` as a whole, so a
string from the engine or the session can never reach the terminal as a control sequence, whatever field
it came in (text, a tool name, a refusal message, an incarnation token).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mosaic.controller.client import (
    HistoryItem,
    HistoryUnavailable,
    LiveMessage,
    ReconcileMarker,
    SentRequest,
    ToolRun,
    TranscriptItem,
    TranscriptStatus,
)

from ._inert import inert

__all__ = [
    "binding_line",
    "confirmation_lines",
    "item_lines",
    "receipt_words",
    "request_line",
    "status_line",
    "stop_words",
    "transcript_lines",
]

INCARNATION_SHOWN = 12
"""Characters of the incarnation token the status line shows (``inc-`` and 8 hex digits)."""


def _lines(label: str, segments: Iterable[str]) -> list[str]:
    """`label: first line`, the rest indented by two spaces; each line made inert."""
    raw: list[str] = []
    for segment in segments:
        raw.extend(segment.split("\n"))
    if not raw:
        raw = [""]
    out = [f"{label}: {raw[0]}"] + [f"  {line}" for line in raw[1:]]
    return [inert(line) for line in out]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _text_of(value: object) -> str:
    return value if isinstance(value, str) else ""


def _history_block(block: Mapping[str, Any]) -> str:
    kind = block.get("kind")
    if kind == "text":
        return _text_of(block.get("text"))
    if kind == "thinking":
        return "(thinking) " + _text_of(block.get("text"))
    if kind == "toolCall":
        return f"[tool call {_text_of(block.get('name'))}] {_text_of(block.get('arguments'))}"
    if kind == "image":
        return f"[image {_text_of(block.get('mimeType'))}]"
    if kind == "command":
        return "$ " + _text_of(block.get("text"))
    if kind == "unavailable":
        return f"[unavailable: {_text_of(block.get('reason'))}]"
    return f"[unsupported block: {_text_of(block.get('type'))}]"


def _history_label(item: HistoryItem) -> str:
    if item.kind == "toolResult":
        name = _text_of(item.attrs.get("toolName"))
        return f"tool result {name}" + (" (error)" if item.attrs.get("isError") is True else "")
    if item.kind == "notice":
        code = item.notice.get("code") if item.notice is not None else None
        return f"notice {_text_of(code)}"
    return {"bashExecution": "bash", "custom_message": "custom", "compaction": "compaction summary",
            "branch_summary": "branch summary"}.get(item.kind, item.kind)


def _live_block(block_type: str, text: str, data: Mapping[str, Any]) -> str:
    if block_type == "text":
        return text
    if block_type == "thinking":
        return "(thinking) " + text
    if block_type == "toolCall":
        return f"[tool call {_text_of(data.get('name'))}] {_json(data.get('arguments'))}"
    if block_type == "image":
        return f"[image {_text_of(data.get('mimeType'))}]"
    return f"[{block_type} block]"


def _tool_value(value: Any) -> str:
    """A tool result as text: Pi's ``{"content": [{"type": "text", "text": ...}]}`` joined, else JSON."""
    if isinstance(value, Mapping) and isinstance(value.get("content"), list):
        texts = [c.get("text") for c in value["content"] if isinstance(c, Mapping) and c.get("type") == "text"]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    return _json(value)


def item_lines(item: TranscriptItem) -> list[str]:
    """One transcript item as inert lines."""
    if isinstance(item, HistoryItem):
        return _lines(_history_label(item), [_history_block(b) for b in item.blocks])
    if isinstance(item, HistoryUnavailable):
        code, message = item.refusal.get("code"), item.refusal.get("message")
        return [inert(f"[history unavailable: {_text_of(code)}] {_text_of(message)}")]
    if isinstance(item, ReconcileMarker):
        reading = ", re-reading" if item.reading else ""
        return [inert(f"~~ reconcile marker ({', '.join(item.reasons)}{reading}): the seam is not exact; "
                      "a message near here may repeat or be missing ~~")]
    if isinstance(item, LiveMessage):
        role = item.role or "message"
        if role == "toolResult":
            role = f"tool result {item.tool_name or ''}" + (" (error)" if item.is_error else "")
        label = role if item.ended else f"{role} (streaming)"
        segments = [_live_block(b.type, b.text, b.data) for b in item.blocks]
        if item.stop_reason in ("aborted", "error"):
            segments.append(f"[{item.stop_reason}]" + (f" {item.error_message}" if item.error_message else ""))
        return _lines(label, segments)
    if isinstance(item, ToolRun):
        state = "running" if item.running else ("error" if item.is_error else "done")
        segments = [f"args {_json(item.args)}"]
        if item.running and item.partial_result is not None:
            segments.append(f"progress {_tool_value(item.partial_result)}")
        if not item.running:
            segments.append(f"result {_tool_value(item.result)}")
        return _lines(f"tool {item.tool_name or '?'} ({state})", segments)
    return [inert(f"[{type(item).__name__}]")]


def transcript_lines(items: Iterable[TranscriptItem]) -> list[str]:
    """Every item's lines, in order."""
    out: list[str] = []
    for item in items:
        out.extend(item_lines(item))
    return out


# ------------------------------------------------------------------------------------------ requests


def receipt_words(request: SentRequest) -> str:
    """A prompt's state in words: sending, sent, working, done, failed, outcome unknown, or not admitted.
    There is no "unsent": an unknown outcome is never offered as a safe resend."""
    if request.outcome_unknown:
        return "outcome unknown (never resent)"
    if request.state == "refused":
        code = request.refusal.code if request.refusal is not None else "refused"
        return f"not admitted: {code}"
    state = request.receipt_state
    if state is None:
        return "sending"
    if state in ("admitted", "dispatched", "acknowledged"):
        return "sent"
    if state == "working":
        return "working"
    receipt = request.receipt or {}
    if state == "finished":
        turn = receipt.get("turnState")
        return "done" if turn in (None, "completed") else f"done ({_text_of(turn)})"
    if state == "failed":
        why = receipt.get("nativeError") or receipt.get("reason")
        return "failed" + (f": {why}" if isinstance(why, str) else "")
    return state


def request_line(request: SentRequest, width: int = 48) -> str:
    """`prompt "<text, cut>": <words>`, inert."""
    text = request.text.replace("\n", " ")
    short = text if len(text) <= width else text[: width - 3] + "..."
    return inert(f'prompt "{short}": {receipt_words(request)}')


# ------------------------------------------------------------------------------------------- status


def status_line(status: TranscriptStatus, *, disconnected: str | None = None) -> str:
    """The status line: this terminal's role (or that it is disconnected), the generation, the controller
    incarnation, the engine state (idle, streaming, stopping, uncertain, stopped), the unknown native event
    count (C-4 interim) and the reconcile markers."""
    role = status.role or "no role"
    incarnation = (status.incarnation or "-")[:INCARNATION_SHOWN]
    parts = [role if status.connected else f"DISCONNECTED ({disconnected or 'no connection'}); was {role}",
             f"generation {status.generation if status.generation is not None else '-'}",
             f"incarnation {incarnation}", f"engine {status.engine_state or '-'}",
             f"unknown events {status.unknown_native_events}",
             "markers " + ("reconciling" if status.reconciling else "none")]
    return inert(" | ".join(parts))


def binding_line(status: TranscriptStatus) -> str:
    """The second status line: the binding's state when it is not active, and admission when closed, with
    its fences; empty otherwise."""
    parts = []
    if status.binding_state not in (None, "active"):
        parts.append(f"binding {status.binding_state}")
    if status.admission == "closed":
        parts.append("admission closed" + (f" ({', '.join(status.fences)})" if status.fences else ""))
    return inert(" | ".join(parts))


# ------------------------------------------------------------------------------------- stop and confirm


def confirmation_lines(confirmation: Mapping[str, Any]) -> list[str]:
    """The force-stop confirmation: what will be killed (the execution, its scope, its member count)."""
    summary = confirmation.get("summary")
    summary = summary if isinstance(summary, Mapping) else {}
    unit, members, tools = summary.get("unit"), summary.get("members"), summary.get("openTools")
    lines = [
        f"Force stop execution {_text_of(summary.get('execution'))}?",
        f"It kills: {_text_of(summary.get('kills')) or 'the execution'}",
        "Scope: " + (f"cgroup unit {unit}" if isinstance(unit, str) and unit
                     else "no cohort attached to this controller (the stop cannot be proven)"),
        "Processes in it now: " + (f"{members}" + ("" if summary.get("membersComplete") is True
                                                   else " (two readings disagreed)")
                                   if isinstance(members, int) and not isinstance(members, bool)
                                   else f"not counted ({_text_of(summary.get('census')) or 'no census'})"),
        f"Open tool calls: {tools if isinstance(tools, int) else '-'} (their effects become uncertain, "
        "never rolled back)",
        "y: force stop    n: cancel",
    ]
    return [inert(line) for line in lines]


def stop_words(stop: Mapping[str, Any], proof: Mapping[str, Any] | None = None) -> str:
    """A stop's outcome: the proof of a verified force stop, or why the stop is uncertain."""
    kind = "force stop" if stop.get("kind") == "force-stop" else "interrupt"
    state = _text_of(stop.get("state"))
    if state == "stopped":
        members = proof.get("members") if proof is not None else None
        count = f"{len(members)} member(s)" if isinstance(members, Sequence) and not isinstance(members, str) else "-"
        verification = proof.get("verification") if proof is not None else None
        digest = verification.get("digest") if isinstance(verification, Mapping) else None
        complete = proof.get("membershipComplete") if proof is not None else None
        words = f"{kind}: stopped with a proof ({count} left at the freeze, killed"
        words += ", membership complete" if complete is True else ""
        words += f", digest {digest})" if isinstance(digest, str) else ")"
        return inert(words)
    if state == "uncertain":
        reason, detail = _text_of(stop.get("reason")) or "unknown", _text_of(stop.get("detail"))
        return inert(f"{kind}: UNCERTAIN ({reason})" + (f": {detail}" if detail else ""))
    if state == "reconciled":
        return inert(f"{kind}: reconciled (the queue was cleared and the turn ended)")
    if state == "superseded":
        return inert(f"{kind}: superseded by a force stop")
    return inert(f"{kind}: {state or 'stopping'} ({_text_of(stop.get('phase'))})")
