"""What the terminal shows, as styled lines of inert text: pure functions of the client library's values.

A line is a list of ``(style, text)`` fragments (prompt_toolkit's formatted text). Every string that reaches
a fragment passes through `_inert.inert_spans`, whatever field it came in (text, a tool name, a refusal
message, a dialog title), so a string from the engine or the session can never reach the terminal as a
control sequence; each escape gets ``class:escape`` on top of its line's style, so the screen tells an
escape from the same characters typed. ``plain`` drops the styles (what a text capture of the screen
shows).

The transcript (`item_fragments`, `transcript_rows`) is a view over
`mosaic.controller_client.Transcript.items`; this module adds no rule of its own about the seam, only
words, styles and wrapping: `wrap` breaks a line at the last space that fits the width (a word longer than
the width is cut), never between a character and a zero-width one that joins it, and indents continuation
rows by two cells, so lines wrap at the window's width instead of being cut at its edge.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from prompt_toolkit.utils import get_cwidth

from mosaic.controller_client import (
    HistoryItem,
    HistoryUnavailable,
    LiveMessage,
    ReconcileMarker,
    SentRequest,
    ToolRun,
    TranscriptItem,
    TranscriptStatus,
)

from ._inert import inert, inert_spans

__all__ = [
    "Fragments",
    "confirmation_lines",
    "details_line",
    "dialog_line",
    "header_line",
    "item_fragments",
    "item_lines",
    "plain",
    "receipt_words",
    "request_line",
    "status_line",
    "stop_words",
    "styled",
    "transcript_lines",
    "transcript_rows",
    "wrap",
]

Fragments = list[tuple[str, str]]

INCARNATION_SHOWN = 12
"""Characters of the incarnation token the details row shows (``inc-`` and 8 hex digits)."""

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
"""The frames of the spinner shown while a run streams."""

INDENT = 2
"""Cells a continuation row (a wrapped row, or a later line of an item) is indented by."""


def styled(text: str, style: str = "") -> Fragments:
    """`text` made inert, as fragments in `style`; each escape also gets ``class:escape``."""
    escape = f"{style} class:escape".strip()
    return [(escape if is_escape else style, part) for is_escape, part in inert_spans(text)]


def plain(line: Iterable[tuple[str, str]]) -> str:
    """A line's text without its styles."""
    return "".join(fragment[1] for fragment in line)


# ------------------------------------------------------------------------------------------ wrapping


def wrap(line: Fragments, width: int, indent: int = INDENT) -> list[Fragments]:
    """`line` as rows of at most `width` cells (module docstring; a character wider than a whole row gets
    a row of its own). Linear in the line's length: a character moves to the next row at most once."""
    width = max(width, indent + 2)
    rows: list[Fragments] = []
    row: list[tuple[str, str]] = []  # one (style, char) per character; a continuation row starts with the pad
    start = 0  # entries of `row` that are padding
    cells = 0
    space = -1  # index in `row` just after its last space: where the row may break
    for style, text in line:
        for ch in text:
            w = get_cwidth(ch)
            if w == 0 and len(row) > start:
                row.append((style, ch))  # a joiner or combining mark stays with the character before it
                continue
            if cells + w > width and len(row) > start:
                cut, moved = len(row), 0
                if space > start:  # break after the last space if the word after it fits the next row
                    moved = sum(get_cwidth(c) for _, c in row[space:])
                    if indent + moved + w <= width:
                        cut = space
                    else:
                        moved = 0
                head, tail = row[:cut], row[cut:]
                rows.append(_merge(head))
                row, start, cells, space = [], 0, 0, -1
                if indent:
                    row, start, cells = [("", " " * indent)], 1, indent
                row += tail
                cells += moved
            row.append((style, ch))
            cells += w
            if ch == " ":
                space = len(row)
    rows.append(_merge(row))
    return rows


def _merge(chars: list[tuple[str, str]]) -> Fragments:
    out: Fragments = []
    for style, text in chars:
        if out and out[-1][0] == style:
            out[-1] = (style, out[-1][1] + text)
        else:
            out.append((style, text))
    return out


# ---------------------------------------------------------------------------------------- the items


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _text_of(value: object) -> str:
    return value if isinstance(value, str) else ""


Segment = tuple[str, str]  # (style, text that may hold newlines)


def _lines(label: str, label_style: str, segments: Iterable[Segment]) -> list[Fragments]:
    """`label: first line`, each later line indented by two cells; every segment split at LF, each line
    made inert in its segment's style."""
    raw: list[tuple[str, str]] = []
    for style, text in segments:
        raw.extend((style, part) for part in text.split("\n"))
    if not raw:
        raw = [("", "")]
    first_style, first = raw[0]
    out = [styled(label + ":", label_style) + [("", " ")] + styled(first, first_style)]
    out += [[("", " " * INDENT)] + styled(text, style) for style, text in raw[1:]]
    return out


def _history_block(block: Mapping[str, Any]) -> Segment:
    kind = block.get("kind")
    if kind == "text":
        return "", _text_of(block.get("text"))
    if kind == "thinking":
        return "class:thinking", "(thinking) " + _text_of(block.get("text"))
    if kind == "toolCall":
        return "class:tool", f"[tool call {_text_of(block.get('name'))}] {_text_of(block.get('arguments'))}"
    if kind == "image":
        return "class:meta", f"[image {_text_of(block.get('mimeType'))}]"
    if kind == "command":
        return "class:tool", "$ " + _text_of(block.get("text"))
    if kind == "unavailable":
        return "class:meta", f"[unavailable: {_text_of(block.get('reason'))}]"
    return "class:meta", f"[unsupported block: {_text_of(block.get('type'))}]"


def _label_style(role: str) -> str:
    if role in ("user", "assistant"):
        return f"class:label.{role}"
    if role.startswith(("tool", "bash")):
        return "class:label.tool"
    if role.startswith("notice"):
        return "class:label.notice"
    return "class:label.other"


def _history_label(item: HistoryItem) -> str:
    if item.kind == "toolResult":
        name = _text_of(item.attrs.get("toolName"))
        return f"tool result {name}" + (" (error)" if item.attrs.get("isError") is True else "")
    if item.kind == "notice":
        code = item.notice.get("code") if item.notice is not None else None
        return f"notice {_text_of(code)}"
    return {"bashExecution": "bash", "custom_message": "custom", "compaction": "compaction summary",
            "branch_summary": "branch summary"}.get(item.kind, item.kind)


def _live_block(block_type: str, text: str, data: Mapping[str, Any]) -> Segment:
    if block_type == "text":
        return "", text
    if block_type == "thinking":
        return "class:thinking", "(thinking) " + text
    if block_type == "toolCall":
        return "class:tool", f"[tool call {_text_of(data.get('name'))}] {_json(data.get('arguments'))}"
    if block_type == "image":
        return "class:meta", f"[image {_text_of(data.get('mimeType'))}]"
    return "class:meta", f"[{block_type} block]"


def _tool_value(value: Any) -> str:
    """A tool result as text: Pi's ``{"content": [{"type": "text", "text": ...}]}`` joined, else JSON."""
    if isinstance(value, Mapping) and isinstance(value.get("content"), list):
        texts = [c.get("text") for c in value["content"] if isinstance(c, Mapping) and c.get("type") == "text"]
        if texts and all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    return _json(value)


def item_key(item: TranscriptItem) -> str:
    """A stable name for `item` while the view holds it (the reading position is kept by it)."""
    if isinstance(item, HistoryItem):
        return "h:" + item.item
    if isinstance(item, LiveMessage):
        return f"m:{item.execution}:{item.message}"
    if isinstance(item, ToolRun):
        return "t:" + item.tool_call_id
    if isinstance(item, ReconcileMarker):
        return "marker"
    return "unavailable"


def item_fragments(item: TranscriptItem) -> list[Fragments]:
    """One transcript item as styled lines (before wrapping): the role label in the role's colour,
    thinking dim, tool calls and runs marked, an aborted or failed message's reason in the error style."""
    if isinstance(item, HistoryItem):
        label = _history_label(item)
        return _lines(label, _label_style(label), [_history_block(b) for b in item.blocks])
    if isinstance(item, HistoryUnavailable):
        code, message = item.refusal.get("code"), item.refusal.get("message")
        return [styled(f"[history unavailable: {_text_of(code)}] {_text_of(message)}", "class:meta")]
    if isinstance(item, ReconcileMarker):
        reading = ", re-reading" if item.reading else ""
        return [styled(f"~~ reconcile marker ({', '.join(item.reasons)}{reading}): the seam is not exact; "
                       "a message near here may repeat or be missing ~~", "class:marker")]
    if isinstance(item, LiveMessage):
        role = item.role or "message"
        if role == "toolResult":
            role = f"tool result {item.tool_name or ''}" + (" (error)" if item.is_error else "")
        label = role if item.ended else f"{role} (streaming)"
        segments = [_live_block(b.type, b.text, b.data) for b in item.blocks]
        if item.stop_reason in ("aborted", "error"):
            segments.append(("class:error", f"[{item.stop_reason}]"
                             + (f" {item.error_message}" if item.error_message else "")))
        return _lines(label, _label_style(role), segments)
    if isinstance(item, ToolRun):
        state = "running" if item.running else ("error" if item.is_error else "done")
        parts: list[Segment] = [("class:tool", f"args {_json(item.args)}")]
        if item.running and item.partial_result is not None:
            parts.append(("class:tool", f"progress {_tool_value(item.partial_result)}"))
        if not item.running:
            parts.append(("class:tool", f"result {_tool_value(item.result)}"))
        return _lines(f"tool {item.tool_name or '?'} ({state})", "class:label.tool", parts)
    return [styled(f"[{type(item).__name__}]", "class:meta")]


def item_lines(item: TranscriptItem) -> list[str]:
    """One transcript item as lines of plain inert text (before wrapping)."""
    return [plain(line) for line in item_fragments(item)]


def transcript_lines(items: Iterable[TranscriptItem]) -> list[str]:
    """Every item's plain lines, in order (before wrapping)."""
    out: list[str] = []
    for item in items:
        out.extend(item_lines(item))
    return out


def transcript_rows(items: Iterable[TranscriptItem], width: int) -> list[str]:
    """Every item's lines wrapped at `width`, as plain text: what the transcript shows at that width."""
    return [plain(row) for item in items for line in item_fragments(item) for row in wrap(line, width)]


# ------------------------------------------------------------------------------------------ requests


def receipt_words(request: SentRequest) -> str:
    """A prompt's state in words: sending, sent, working, done, failed, outcome unknown (check the
    transcript, as the seed says), or not admitted. There is no "unsent": an unknown outcome is never
    offered as a safe resend."""
    if request.outcome_unknown:
        return "outcome unknown, check the transcript (never resent)"
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
    """`prompt "<text, cut>": <words>`, inert (its newlines shown as ^J)."""
    text = request.text
    short = text if len(text) <= width else text[: width - 3] + "..."
    return inert(f'prompt "{short}": {receipt_words(request)}')


# ------------------------------------------------------------------------------------- header, status


ID_SHOWN = 11
"""Characters of a conversation id the header shows (``pi-`` and 8 hex digits); F2 shows it whole."""


def header_line(binding: Mapping[str, Any] | None, width: int = 80, engine: str | None = None) -> str:
    """The header: the terminal, the engine (its name in words, as the controller's observe reply gives it:
    "Pi", "Claude"; issue 32), the conversation (its id shortened) and the execution the controller binds,
    as many of them as fit in `width` cells; inert, one line."""
    binding = binding or {}
    parts = ["mosaic-terminal"] + ([engine] if engine else [])
    conversation, execution = binding.get("conversation"), binding.get("execution")
    if isinstance(conversation, str):
        parts.append("conversation " + (conversation if len(conversation) <= ID_SHOWN + 1
                                        else conversation[:ID_SHOWN] + "…"))
    if isinstance(execution, str):
        parts.append(f"execution {execution}")
    out = ""
    for part in parts:
        line = f"{out} · {part}" if out else part
        if get_cwidth(inert(line)) > width:
            break
        out = line
    return inert(out)


_ENGINE_WORDS = {"idle": "{engine} is idle", "stopping": "{engine} is stopping",
                 "stopped": "stopped: Ctrl-R recovers (asks first), Ctrl-C quits",
                 "uncertain": "UNCERTAIN: Ctrl-K force stops it, Ctrl-C quits"}


def status_line(status: TranscriptStatus, *, disconnected: str | None = None, running_for: float | None = None,
                frame: int = 0, below: int | None = None, engine_name: str = "Pi") -> str:
    """The status line in plain words: who controls (you, or you are watching), what the engine
    (`engine_name`: Pi unless the controller names another) is doing (with a
    spinner and the seconds it has been answering), whether new prompts are closed, whether the history
    is being re-read, and, scrolled up, how many new lines wait below. `below` is None when the view
    follows the end. The developer fields are in `details_line`."""
    if not status.connected:
        parts = [f"NOT CONNECTED ({disconnected or 'no connection'}): Ctrl-O reconnects; your draft is kept"]
    else:
        role = {"controller": "You control this conversation",
                "observer": "Watching (Ctrl-T takes control)"}.get(status.role or "", "Attaching")
        parts = [role]
        engine = status.engine_state
        if engine == "streaming":
            seconds = f" {int(running_for)}s" if running_for is not None else ""
            parts.append(f"{engine_name} is answering {SPINNER[frame % len(SPINNER)]}{seconds}")
        elif engine in _ENGINE_WORDS:
            parts.append(_ENGINE_WORDS[engine].format(engine=engine_name))
        elif engine:
            parts.append(f"{engine_name} is {engine}")
        if status.binding_state in ("uncertain", "stopped") and engine not in ("uncertain", "stopped"):
            parts.append(f"the binding is {status.binding_state}")
        if status.admission == "closed" and engine not in ("uncertain", "stopped"):
            fences = f" ({', '.join(status.fences)})" if status.fences else ""
            parts.append(f"new prompts are closed{fences}")
    if status.reconciling:
        parts.append("re-reading the history")
    if below is not None:
        parts.append(f"scrolled up: {below} new below (PgDn)")
    return inert(" · ".join(parts))


def details_line(status: TranscriptStatus, *, reads: int = 0, conversation: str | None = None) -> str:
    """The developer fields (F2): role, generation, incarnation, binding and engine states, admission and
    its fences, the unknown native event count (C-4 interim), late events, dialogs, markers, re-reads, and
    the whole conversation id."""
    incarnation = (status.incarnation or "-")[:INCARNATION_SHOWN]
    fences = f" ({', '.join(status.fences)})" if status.fences else ""
    parts = [f"role {status.role or '-'}",
             f"generation {status.generation if status.generation is not None else '-'}",
             f"incarnation {incarnation}", f"binding {status.binding_state or '-'}",
             f"engine {status.engine_state or '-'}", f"admission {status.admission or '-'}{fences}",
             f"unknown events {status.unknown_native_events}", f"late events {status.late_events}",
             f"dialogs {status.dialogs}", "markers " + ("reconciling" if status.reconciling else "none"),
             f"re-reads {reads}", f"conversation {conversation or '-'}"]
    return inert(" | ".join(parts))


# ------------------------------------------------------------------------------- dialogs, stop, confirm


def dialog_line(record: Mapping[str, Any], engine: str = "Pi") -> str:
    """An engine's dialog (a ``nativeDecision`` record; `engine` its name in words as the controller's observe
    reply gives it, issue 32): its kind, title and options, shown disabled with the controller's reason; never
    answered (P3, lead decision 30). One line: LF shows as ^J."""
    method = _text_of(record.get("method")) or "dialog"
    words = f'{engine} dialog ({method}) "{_text_of(record.get("title"))}"'
    options = record.get("options")
    if isinstance(options, list) and options:
        words += " options [" + " | ".join(o if isinstance(o, str) else _json(o) for o in options) + "]"
    for key, label in (("message", "message"), ("placeholder", "placeholder"), ("prefill", "prefill")):
        if isinstance(record.get(key), str):  # what Pi asks with it (rpc-mode.js 47-192)
            words += f' {label} "{_text_of(record[key])}"'
    state = _text_of(record.get("state")) or "disabled"
    reason = _text_of(record.get("reason")) or "no reason given"
    choices = record.get("choices")
    if state == "disabled" or not isinstance(choices, list):
        return inert(f"{words}: {state}, not answered here: {reason}")
    # Issue 33 (the controller answers dialogs): each choice numbered with its exact label, inert; those the
    # controller does not offer with why.
    words += " choices [" + " | ".join(f"{i}: {_text_of(c)}" for i, c in enumerate(choices, 1)) + "]"
    refused = record.get("refusedChoices")
    for item in refused if isinstance(refused, list) else ():
        if isinstance(item, Mapping):
            words += f" ({_text_of(item.get('choice'))}: disabled, {_text_of(item.get('reason'))})"
    how = f" ({_text_of(record.get('how'))})" if record.get("how") is not None else ""
    answer = f' answered "{_text_of(record.get("answer"))}"' if record.get("answer") is not None else ""
    return inert(f"{words}: {state}{how}{answer}: {reason}")


def decision_lines(record: Mapping[str, Any], keys: int, sending: bool = False, engine: str = "Pi") -> list[Fragments]:
    """An open decision this terminal answers (issue 33; `_model` rule 6), as styled lines: what Pi asks
    (title, message), each choice's key (1 to `keys`) beside its exact label, inert (markup shown as typed,
    bidi and escape controls made visible, never obeyed), the choices past the keys and those the
    controller refuses with why and no key, then what the keys do."""
    method = _text_of(record.get("method")) or "dialog"
    lines = [styled(f'{engine} asks ({method}): "{_text_of(record.get("title"))}"', "class:dialog")]
    if isinstance(record.get("message"), str):
        lines.append(styled(f'  "{record["message"]}"'))
    choices = [c for c in record.get("choices") or () if isinstance(c, str)]
    for i, label in enumerate(choices, 1):
        if i <= keys:
            lines.append([("class:dialog.key", f"  {i}  ")] + styled(label))
        else:
            lines.append([("", "     ")] + styled(label) + styled(f": no key here (keys answer the first {keys})",
                                                                 "class:meta"))
    refused = record.get("refusedChoices")
    for item in refused if isinstance(refused, list) else ():
        if isinstance(item, Mapping):
            lines.append([("", "     ")] + styled(_text_of(item.get("choice")))
                         + styled(f": disabled, {_text_of(item.get('reason'))}", "class:meta"))
    shown = min(keys, len(choices))
    if sending:
        lines.append(styled("the answer is on its way to the controller...", "class:meta"))
    else:
        lines.append(styled(f"{'1' if shown == 1 else f'1-{shown}'}: answer (the label beside the key, exactly); {engine} waits for it "
                            "or its own timeout; Ctrl-G interrupts; the composer waits", "class:meta"))
    return lines


def confirmation_lines(confirmation: Mapping[str, Any]) -> list[str]:
    """A confirmation the controller issued, before it is answered. Force stop: what will be killed (the
    execution, its scope, its member count, the open tool calls). Recover: what a recovery makes."""
    summary = confirmation.get("summary")
    summary = summary if isinstance(summary, Mapping) else {}
    execution = _text_of(summary.get("execution"))
    if confirmation.get("operation") == "recover" or summary.get("operation") == "recover":
        lines = [f"Recover execution {execution}?",
                 "It records a single-use eligibility: a new controller may then launch on the same leaf "
                 "(a new claim, generation + 1). This controller stays stopped.",
                 f"The execution is {_text_of(summary.get('binding')) or 'in an unknown state'} now.",
                 "y: recover    n: cancel"]
        return [inert(line) for line in lines]
    unit, members, tools = summary.get("unit"), summary.get("members"), summary.get("openTools")
    lines = [
        f"Force stop execution {execution}?",
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


DIGEST_SHOWN = 12
"""Hex digits of a proof's digest a stop's line shows (the proof record holds all of it)."""


def _short_digest(digest: str) -> str:
    kind, _, value = digest.rpartition(":")
    return f"{kind}:{value[:DIGEST_SHOWN]}…" if kind and len(value) > DIGEST_SHOWN else digest


def stop_words(stop: Mapping[str, Any], proof: Mapping[str, Any] | None = None, engine: str = "Pi") -> str:
    """A stop's outcome: the proof of a verified force stop (its digest shortened), or why the stop is
    uncertain; then "approval uncertain" when the stop record's ``approvalDisposition`` says so (the
    controller's word: it saw every dialog of the execution's engine, named `engine`; seed "Approval")."""
    kind = "force stop" if stop.get("kind") == "force-stop" else "interrupt"
    state = _text_of(stop.get("state"))
    if state == "stopped":
        members = proof.get("members") if proof is not None else None
        count = f"{len(members)} member(s)" if isinstance(members, Sequence) and not isinstance(members, str) else "-"
        verification = proof.get("verification") if proof is not None else None
        digest = verification.get("digest") if isinstance(verification, Mapping) else None
        complete = proof.get("membershipComplete") if proof is not None else None
        if isinstance(members, Sequence) and not isinstance(members, str) and not members:
            words = f"{kind}: stopped with a proof (the cohort was empty at the freeze"
        else:
            words = f"{kind}: stopped with a proof ({count} left at the freeze, killed"
        words += "; membership complete" if complete is True else ""
        words += f"; digest {_short_digest(digest)})" if isinstance(digest, str) else ")"
    elif state == "uncertain":
        reason, detail = _text_of(stop.get("reason")) or "unknown", _text_of(stop.get("detail"))
        words = f"{kind}: UNCERTAIN ({reason})" + (f": {detail}" if detail else "")
    elif state == "reconciled":
        words = f"{kind}: reconciled (the queue was cleared and the turn ended)"
    elif state == "superseded":
        words = f"{kind}: superseded by a force stop"
    else:
        words = f"{kind}: {state or 'stopping'} ({_text_of(stop.get('phase'))})"
    if stop.get("approvalDisposition") == "uncertain":
        words += f"; approval uncertain (a {engine} dialog was seen during this execution)"
    return inert(words)
