"""The controller's rules that are tables: data beside the brief's text, each walked by a test.

1. RECEIPT_TRANSITIONS (CHAT-01 receipt states as this project reconstructs them; brief §1 "Write
   outcomes", §3 table): the only moves a receipt may make. There is no "unsent" state, and nothing
   leaves delivery-unknown, failed or finished.
2. SLOT_TABLE (brief §3 R3-1 rule 4, the pending slot when a fence lands): the slot's state, what the
   controller does, and where the receipt goes.
3. The text policy (`draft_problem`): a prompt's text is there and within MAX_TEXT_CHARS (the seed's `draft`);
   then the engine's rules say whether it would interpret it (`EngineRules.text_problem`: Pi's prefix table,
   `engines/pi/_tables.TEXT_PREFIXES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["CHAT01_EVENT_TYPES", "MAX_TEXT_CHARS", "RECEIPT_STATES", "RECEIPT_TRANSITIONS", "SLOT_TABLE",
           "TERMINAL_RECEIPT_STATES", "ReceiptState", "SlotCase", "SlotRow", "draft_problem", "receipt_move_allowed",
           "utf16_units"]

# ----------------------------------------------------------------------------------- 3. the text policy

# seed README "Refusals": draft, "prompt text missing or longer than 262,144 characters". Characters as the
# seed's JavaScript counts them (`text.length`): UTF-16 code units, so an astral character counts two, as
# the reader's string limit does (chat-pages `_parts`) and the socket server's line cap assumes.
MAX_TEXT_CHARS = 262_144


def utf16_units(text: str) -> int:
    """The length of `text` in UTF-16 code units (JavaScript's `length`)."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def draft_problem(text: str) -> tuple[str, str] | None:
    """None when `text` is there and within the limit; else ("draft", message): empty, or longer than
    MAX_TEXT_CHARS characters (UTF-16 code units, as JavaScript counts them: the seed's controller is
    JavaScript). The engine's own text policy follows (`EngineRules.text_problem`: Pi's prefix rows)."""
    if not text or not text.strip():
        return ("draft", "prompt text is missing")
    units = len(text) if len(text) * 2 <= MAX_TEXT_CHARS else utf16_units(text)
    if units > MAX_TEXT_CHARS:
        return ("draft", f"prompt text is {units} characters (UTF-16 units), over {MAX_TEXT_CHARS}")
    return None


# ------------------------------------------------------------------------------ 1. receipt transitions

ReceiptState = Literal["admitted", "dispatched", "acknowledged", "working", "finished", "failed",
                       "delivery-unknown"]

RECEIPT_STATES: tuple[ReceiptState, ...] = ("admitted", "dispatched", "acknowledged", "working", "finished",
                                            "failed", "delivery-unknown")
TERMINAL_RECEIPT_STATES = frozenset({"finished", "failed", "delivery-unknown"})

# (from, to) -> why. Brief §1: written (dispatched), acknowledged, unknown (delivery-unknown,
# transport-unknown); §3: working at the first user message_start after the ack; failed on an error
# response (native error kept) or ack-without-start; delivery-unknown on handled-without-run; the turn
# finishes (completed, interrupted, or unknown when the engine ended mid-run).
RECEIPT_TRANSITIONS: Mapping[tuple[str, str], str] = MappingProxyType({
    ("admitted", "dispatched"): "the whole line was accepted by the pipe",
    ("admitted", "acknowledged"): "Pi answered before the shell reported the write (it read the whole line)",
    ("admitted", "failed"): "Pi's error response arrived before the write was reported",
    ("admitted", "delivery-unknown"): "the write was partial or failed: transport-unknown",
    ("dispatched", "acknowledged"): "Pi's prompt response (success) arrived",
    ("dispatched", "failed"): "Pi's prompt response was an error (native error kept)",
    ("dispatched", "delivery-unknown"): "no response within the bound, or the output ended: transport-unknown",
    ("acknowledged", "working"): "the first user message_start after the ack (working is inferred from order)",
    ("acknowledged", "failed"): "the run threw before any user message_start: ack-without-start",
    ("acknowledged", "delivery-unknown"): "get_state after the ack: no run, none started: handled-without-run",
    ("working", "finished"): "agent_settled for the run it started (completed, interrupted or unknown; "
                             "unpersisted when the drift check after it found its entries torn or missing)",
    ("working", "delivery-unknown"): "an overlap signal: the run the item seemed to start may be another's "
                                     "(run-overlap); working was an inference from order, now withdrawn",
})


def receipt_move_allowed(old: str, new: str) -> bool:
    return (old, new) in RECEIPT_TRANSITIONS


# CHAT-01's event types, the ones a native event maps to (`engines/pi/_tables.EVENT_MAP`).
CHAT01_EVENT_TYPES = ("message-start", "text-delta", "thinking-delta", "tool-start", "tool-update", "tool-end",
                      "message-end", "run-settled")


# ---------------------------------------------------------------------------------- 2. the R3-1 slot table

SlotCase = Literal["none", "preflight", "run-started", "ack-no-run", "ack-run-threw", "write-unknown"]


@dataclass(frozen=True)
class SlotRow:
    """Brief §3 rule 4: "Each case settles the Mosaic item without reading clear_queue"."""

    case: SlotCase
    when: str
    does: str
    receipt: str
    reason: str | None


SLOT_TABLE: Mapping[SlotCase, SlotRow] = MappingProxyType({
    "none": SlotRow("none", "no prompt holds the slot", "nothing", "-", None),
    "preflight": SlotRow(
        "preflight", "the prompt was written and has no response yet",
        "waits for the response, bounded; an ack means a run started, so clear then abort again, at most "
        "three cycles", "failed (error response) / follows the interrupted turn (ack) / delivery-unknown "
        "(no response in bounds)", None),
    "run-started": SlotRow(
        "run-started", "agent_start and the user message_start arrived while the slot was held",
        "nothing extra", "finished, turnState interrupted", None),
    "ack-no-run": SlotRow(
        "ack-no-run", "get_state written after the ack says not streaming, no agent_start between",
        "nothing (extension-handled input, agent-session.js 832/845)", "delivery-unknown",
        "handled-without-run"),
    "ack-run-threw": SlotRow(
        "ack-run-threw", "acked, the run settled with no user message_start",
        "nothing", "failed", "ack-without-start"),
    "write-unknown": SlotRow(
        "write-unknown", "the write outcome is unknown", "the pipe is poisoned (§1); only force stop moves on",
        "delivery-unknown", "transport-unknown"),
})
