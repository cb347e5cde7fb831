"""The engine link: `LinkCore`, the sans-io state machine, and `EngineLink`, its asyncio shell over two pipe
fds (README "The engine link").

A command (`Command`, id `m<seq>`) has a write outcome (`CommandOutcome`): `written`, `acknowledged`, or
`unknown` with an `UnknownReason`; every change is a row of `OUTCOME_TABLE`, keyed by (outcome,
`OutcomeInput`). The first `unknown` poisons the pipe (`LinkPoisoned`). Events come out in order:
`EngineEvent`, `CommandWritten`, `OutcomeKnown`, `OutcomeUnknown`, `LateResponse`, `ProtocolViolation`,
`TruncatedOutput`, `Poisoned` (their union is `LinkEvent`). The two prompt rules are API:
`PromptNotAcknowledged` and `NotEvidence` (through `PromptStateEvidence`). `DEFAULT_BOUND` is a command's
default bound, `DEFAULT_MAX_QUEUED_EVENTS` the shell's event queue bound; `OutcomeUnknownError` is the
shell's `outcome()` when the outcome is unknown; `LinkUsageError` a programming error. A dialog's answer
(`UI_RESPONSE`, `send_ui_response`) is a line Pi never answers: `written` is its last outcome.
"""

from __future__ import annotations

from ._link import (
    DEFAULT_BOUND,
    OUTCOME_TABLE,
    UI_RESPONSE,
    Command,
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LateResponse,
    LinkCore,
    LinkEvent,
    LinkPoisoned,
    LinkUsageError,
    NotEvidence,
    OutcomeInput,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    PromptNotAcknowledged,
    PromptStateEvidence,
    ProtocolViolation,
    TruncatedOutput,
    UnknownReason,
)
from ._shell import DEFAULT_MAX_QUEUED_EVENTS, EngineLink, OutcomeUnknownError

__all__ = [
    "DEFAULT_BOUND",
    "DEFAULT_MAX_QUEUED_EVENTS",
    "OUTCOME_TABLE",
    "Command",
    "CommandOutcome",
    "CommandWritten",
    "EngineEvent",
    "EngineLink",
    "LateResponse",
    "LinkCore",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "NotEvidence",
    "OutcomeInput",
    "OutcomeKnown",
    "OutcomeUnknown",
    "OutcomeUnknownError",
    "Poisoned",
    "PromptNotAcknowledged",
    "PromptStateEvidence",
    "ProtocolViolation",
    "TruncatedOutput",
    "UI_RESPONSE",
    "UnknownReason",
]


def __dir__() -> list[str]:
    return sorted(__all__)
