"""Pi's tables: what the pinned Pi's wire means, data beside the brief's text, each walked by a test.

1. TEXT_PREFIXES (brief §4 "Interpretation"; FACTS.md (f), checked against Pi 0.85.1's source and
   binary): what the pinned Pi's RPC `prompt` interprets, and whether admission refuses it. `prefix_problem`
   (the seam's `text_problem`, after the core's `draft`) reads this table; the S2 test iterates the same table.
2. EVENT_MAP (brief §3 "Events"; FACTS.md (b) "Every record type written to stdout"): each native
   event type (and each `assistantMessageEvent.type` of `message_update`) to the CHAT-01 event type it
   becomes, or to INTERNAL (read by the controller, shown as no client event), or DIALOG. A type not in
   the table is unknown: counted in evidence with its byte count, no client event (C-4 interim).
3. OVERLAP_SIGNALS (seed README "Choices": Overlap, Run order; brief §3 "Seal and attribution"): the wire
   orders that show a run the slot's attribution cannot account for. Each one closes admission, makes the
   binding uncertain and settles the slot's receipt delivery-unknown, reason run-overlap.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from .._seam import OverlapSignal

__all__ = ["DIALOG", "DIALOG_METHODS", "EVENT_MAP", "INTERNAL", "LATER_LINE_SLASH_INTERPRETED", "MESSAGE_UPDATE_MAP",
           "OVERLAP_SIGNALS", "TEXT_PREFIXES", "UI_NOTICE_METHODS", "OverlapSignal", "Prefix", "classify_native",
           "prefix_problem"]

# ----------------------------------------------------------------------------------- 1. the text prefixes

@dataclass(frozen=True)
class Prefix:
    """One row of the prefix table: `prefix` at `position`, whether Pi interprets it there, and whether
    admission refuses it (it may refuse more than Pi interprets: safe)."""

    prefix: str
    position: Literal["first-non-whitespace", "index-0", "later-line"]
    interpreted: bool
    refused: bool
    source: str
    example: str


TEXT_PREFIXES: tuple[Prefix, ...] = (
    Prefix("/", "index-0", True, True,
           "agent-session.js 827-835, 954-976 (extension command, runs even while streaming); 983-1007 "
           "(/skill:); prompt-templates.js 221-235 (templates). FACTS (f), study run G1", "/goal x"),
    Prefix("/skill:", "index-0", True, True, "agent-session.js 983-1007; brief §4 S2", "/skill:ms-unslop"),
    Prefix("/", "first-non-whitespace", False, True,
           "Pi tests index 0 only (startsWith); admission refuses a `/` after leading whitespace too "
           "(brief §4, CHAT-01 lines 181-183): stricter than Pi, safe", " \t/goal x"),
    Prefix("!", "index-0", False, False,
           "interactive-mode.js 2502-2503 only; RPC sends it verbatim (FACTS (f), study run G3)", "!echo bang"),
    Prefix("!!", "index-0", False, False, "interactive mode only (FACTS (f))", "!!echo bang"),
    Prefix("@", "index-0", False, False,
           "CLI file arguments only, refused in RPC mode (main.js 506-509; FACTS (f), study run G4)", "@hello.txt what"),
    Prefix("/", "later-line", False, False,
           "every check is at index 0 (FACTS (f), study run G5): LATER_LINE_SLASH_INTERPRETED = false (S3)",
           "first line\n/goal x"),
)

# Extension `input` handlers can interpret any text (agent-session.js 840-851); the seal runs
# `--no-extensions`, so none is registered (FACTS (b) "Extension UI under the seal"). Not a prefix row.
LATER_LINE_SLASH_INTERPRETED = False


def prefix_problem(text: str) -> tuple[str, str] | None:
    """("text-policy", message) when a refused row of TEXT_PREFIXES matches `text` (the first non-whitespace
    character is `/`, brief §4); None otherwise (the seam's `EngineRules.text_problem`)."""
    stripped = text.lstrip()
    for row in TEXT_PREFIXES:
        if not row.refused:
            continue
        subject = text if row.position == "index-0" else stripped
        if row.position in ("index-0", "first-non-whitespace") and subject.startswith(row.prefix):
            # Plain words for the person who typed it; the Pi sources stay in the row (and the README).
            return ("text-policy", f"text starting with {row.prefix!r} is interpreted by Pi (as a command, "
                                   "a skill or a template), so it is not sent")
    return None



# ----------------------------------------------------------------------------------------- 2. events

INTERNAL = "internal"  # read by the controller (runs, queues, responses); no client event
DIALOG = "dialog"  # an extension dialog: shown disabled with a reason, never answered (P3)

# native type -> CHAT-01 event type, INTERNAL or DIALOG. `message_update` is looked up by its
# assistantMessageEvent.type in MESSAGE_UPDATE_MAP.
EVENT_MAP: Mapping[str, str] = MappingProxyType({
    "agent_start": INTERNAL,  # a run begins (the slot's, or an external one: N13)
    "agent_end": INTERNAL,  # may come more than once per settle (retries, FACTS conformance 7)
    "agent_settled": "run-settled",  # never cohort termination (brief §3)
    "turn_start": INTERNAL,
    "turn_end": INTERNAL,
    "message_start": "message-start",
    "message_update": "message_update",  # see MESSAGE_UPDATE_MAP
    "message_end": "message-end",  # updateMode: replace
    "tool_execution_start": "tool-start",
    "tool_execution_update": "tool-update",
    "tool_execution_end": "tool-end",
    "queue_update": INTERNAL,  # native queues: the stop chain reads clear_queue, not this
    "compaction_start": INTERNAL,
    "compaction_end": INTERNAL,
    "auto_retry_start": INTERNAL,
    "auto_retry_end": INTERNAL,
    "summarization_retry_scheduled": INTERNAL,
    "summarization_retry_attempt_start": INTERNAL,
    "summarization_retry_finished": INTERNAL,
    "bash_execution_update": INTERNAL,  # the controller never sends `bash`
    "entry_appended": INTERNAL,  # extension custom entries only (agent-session.js 2033)
    "session_info_changed": INTERNAL,
    "thinking_level_changed": INTERNAL,
    "extension_error": INTERNAL,
    "extension_ui_request": DIALOG,  # select/confirm/input/editor; notify & co. are INTERNAL (below)
})

MESSAGE_UPDATE_MAP: Mapping[str, str] = MappingProxyType({
    "text_delta": "text-delta",
    "thinking_delta": "thinking-delta",
    "text_start": INTERNAL,
    "text_end": INTERNAL,  # message_end carries the whole text (updateMode: replace)
    "thinking_start": INTERNAL,
    "thinking_end": INTERNAL,
    "toolcall_start": INTERNAL,  # the call shows at tool-start (tool_execution_start) with its args
    "toolcall_delta": INTERNAL,
    "toolcall_end": INTERNAL,
    "start": INTERNAL,
    "done": INTERNAL,
    "error": INTERNAL,
})

# extension_ui_request methods (rpc-mode.js 47-192): the four dialogs, and fire-and-forget requests.
DIALOG_METHODS = frozenset({"select", "confirm", "input", "editor"})
UI_NOTICE_METHODS = frozenset({"notify", "setStatus", "setWidget", "setTitle", "set_editor_text"})

def classify_native(record: Mapping[str, object]) -> str | None:
    """The CHAT-01 event type, INTERNAL or DIALOG for a native record; None when it is unknown (C-4)."""
    kind = record.get("type")
    if not isinstance(kind, str):
        return None
    mapped = EVENT_MAP.get(kind)
    if mapped == "message_update":
        sub = record.get("assistantMessageEvent")
        sub_type = sub.get("type") if isinstance(sub, Mapping) else None
        return MESSAGE_UPDATE_MAP.get(sub_type) if isinstance(sub_type, str) else None
    if mapped == DIALOG:
        method = record.get("method")
        if method in DIALOG_METHODS:
            return DIALOG
        return INTERNAL if method in UI_NOTICE_METHODS else None
    return mapped


# ------------------------------------------------------------------------------- 3. the overlap signals


OVERLAP_SIGNALS: Mapping[str, OverlapSignal] = MappingProxyType({
    "O1": OverlapSignal(
        "O1", "an agent_start while a run is inside a turn (no agent_end since its agent_start)",
        "two runs at once: pi-agent-core refuses a second run (agent.js 226-229), so the stream no longer "
        "shows one run at a time"),
    "O2": OverlapSignal(
        "O2", "the slot's prompt is acknowledged while a run it did not start is active (that run's "
        "agent_start was read before the ack)",
        "Pi acked the prompt in another prompt's preflight window (FACTS a5, Part 2 F): it can never run, "
        "and a settle that is not its run's follows"),
    "O3": OverlapSignal(
        "O3", "an agent_settled while the run is inside a turn (no agent_end since its agent_start)",
        "the losing prompt's settle (its _runAgentPrompt threw: agent-session.js 780-785, FACTS Part 2 F; "
        "the seed's N8 order: the Mosaic ack, another run's agent_start and user message, then the settle)"),
    "O4": OverlapSignal(
        "O4", "an aborted assistant message while no abort of the controller's is outstanding (no stop in "
        "progress, or one that has not written its abort yet)",
        "someone else aborted the run (lead decision 34, N9): it is never a stop link"),
    "O5": OverlapSignal(
        "O5", "external input queued (a queue_update with a non-empty queue) in an interrupt's pause: after "
        "its clear was answered and before its abort is written (read in the same chunk as the answer)",
        "the abort would run what was queued (rpc.md 158; H10): no abort is written"),
    "O6": OverlapSignal(
        "O6", "a run's event (turn_*, message_*, tool_execution_*, agent_end, agent_settled) while no run "
        "is active and no acknowledged prompt explains it",
        "a run the stream never started: its agent_start was taken for another run's end"),
})
