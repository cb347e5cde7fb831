"""The controller's tables as data (seed README "Receipts", "Run order", "Overlap"; brief §3, §4, §9): the
text policy (`TEXT_PREFIXES`, `check_text`, `MAX_TEXT_CHARS` counted in UTF-16 units), the receipt states
and their moves (`RECEIPT_STATES`, `RECEIPT_TRANSITIONS`), the native event map (`EVENT_MAP`,
`MESSAGE_UPDATE_MAP`, `classify_native`, `CHAT01_EVENT_TYPES`), the slot's release table (`SLOT_TABLE`)
and the overlap signals (`OVERLAP_SIGNALS`)."""

from __future__ import annotations

from .core._tables import (
    CHAT01_EVENT_TYPES,
    MAX_TEXT_CHARS,
    RECEIPT_STATES,
    RECEIPT_TRANSITIONS,
    SLOT_TABLE,
    TERMINAL_RECEIPT_STATES,
    SlotRow,
    draft_problem,
    receipt_move_allowed,
    utf16_units,
)
from .engines.pi._tables import (
    DIALOG,
    DIALOG_METHODS,
    EVENT_MAP,
    INTERNAL,
    MESSAGE_UPDATE_MAP,
    OVERLAP_SIGNALS,
    TEXT_PREFIXES,
    UI_NOTICE_METHODS,
    OverlapSignal,
    Prefix,
    classify_native,
)
from .engines.pi._wire import PI_RULES

__all__ = [
    "CHAT01_EVENT_TYPES",
    "DIALOG",
    "DIALOG_METHODS",
    "EVENT_MAP",
    "INTERNAL",
    "MAX_TEXT_CHARS",
    "MESSAGE_UPDATE_MAP",
    "OVERLAP_SIGNALS",
    "RECEIPT_STATES",
    "RECEIPT_TRANSITIONS",
    "SLOT_TABLE",
    "TERMINAL_RECEIPT_STATES",
    "TEXT_PREFIXES",
    "UI_NOTICE_METHODS",
    "OverlapSignal",
    "Prefix",
    "SlotRow",
    "check_text",
    "classify_native",
    "receipt_move_allowed",
    "utf16_units",
]


def check_text(text: str) -> tuple[str, str] | None:
    """The text policy of a prompt to Pi: None when `text` may be sent; else (refusal code, message): the core's
    `draft` (`core/_tables.draft_problem`), then Pi's prefix rows (`PI_RULES.text_problem`)."""
    return draft_problem(text) or PI_RULES.text_problem(text)


def __dir__() -> list[str]:
    return list(__all__)
