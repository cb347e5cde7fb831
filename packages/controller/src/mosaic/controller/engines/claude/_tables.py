"""Claude Code 2.1.283's tables for the core: its overlap table (`CLAUDE_OVERLAP_SIGNALS`, the same row shape and
codes as Pi's, each row in Claude's own wire orders) and its text policy (`text_problem`).

1. CLAUDE_OVERLAP_SIGNALS: the wire orders that show input the controller did not send entering the engine, or a
   turn the slot's attribution cannot account for. The core decides what each does (`core/_answers.overlap`:
   admission closes, the binding goes uncertain, the slot settles delivery-unknown, run-overlap). Claude's
   own case beside Pi's: a user message may be queued inside the engine (stdin is read while a turn runs;
   `command_lifecycle` `queued`) and run after an interrupt as a new turn unless the interrupt cancelled it
   (`interrupt_cancel_queued_v1`; recordings sealed-interrupt-still-queued, sealed-interrupt-then-message).
   The controller writes one user message at a time and none during a stop, so a `started` frame it cannot
   attribute is input from elsewhere (a message folded into a running turn: sealed-queued-mid-turn).
2. Text policy: the binary reads a user message starting with `/` as a slash command (its `initialize`
   answer lists them: recordings/sealed-text.jsonl line 2); admission refuses `/` as the first non-blank
   character (stricter than the binary, safe), as Pi's policy refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .._seam import OverlapSignal

__all__ = ["CLAUDE_OVERLAP_SIGNALS", "text_problem"]

CLAUDE_OVERLAP_SIGNALS: Mapping[str, OverlapSignal] = MappingProxyType({
    "O1": OverlapSignal("O1", "a `command_lifecycle` `started` while a turn runs (the message is folded into "
                              "that turn: recordings/sealed-queued-mid-turn)",
                        "two inputs in one turn: its events cannot be given to one request"),
    "O2": OverlapSignal("O2", "the prompt's `queued` frame read while a turn it did not start runs",
                        "the prompt waits behind another's turn and may run in any order after it"),
    "O3": OverlapSignal("O3", "a `result` read while no `result` can end a turn of the slot's (never seen on "
                              "this pin: `result` ends the turn it settles)",
                        "a settle that is not this run's"),
    "O4": OverlapSignal("O4", "a turn ended by an interrupt (`[Request interrupted by user]`) with no "
                              "interrupt of the controller's outstanding",
                        "someone else interrupted: the stop cannot be attributed"),
    "O5": OverlapSignal("O5", "a `queued` frame for a message the controller never wrote, between the "
                              "interrupt's answer and the end of the interrupted turn",
                        "input the interrupt did not cancel would run after it as a new turn "
                        "(recordings/sealed-interrupt-still-queued: R3-1's 'nothing queued runs' broken)"),
    "O6": OverlapSignal("O6", "a turn's record (`system/init`, `assistant`, `user`, `result`) with no turn "
                              "started (no `started` frame before it)",
                        "a run the stream never started"),
})


def text_problem(text: str) -> tuple[str, str] | None:
    """None when Claude takes `text` as plain text; else (`text-policy`, message) (rule 2)."""
    if text.lstrip().startswith("/"):
        return ("text-policy", "text starting with '/' is a Claude Code slash command, so it is not sent")
    return None
