"""The Claude link: `ClaudeLinkCore`, the sans-io state machine over a sealed Claude Code's stream-json, and
`ClaudeEngineLink`, its asyncio shell over two pipe fds (README "The link").

What the link writes is an `Outgoing` (a user message, a control request `r<n>`, a permission answer) with a
write `Outcome` (`written`, `acknowledged`, or `unknown` with an `UnknownReason`), every change a row of
`OUTCOME_TABLE`; the first `unknown` poisons the pipe (`LinkPoisoned`). A `can_use_tool` is a
`PermissionRequest` (`PermissionState`), answered at most once with `allow`/`deny`; an interrupt's receipt
is `InterruptEvidence`. Events (`LinkEvent`, their union) come out in read order. `DEFAULT_BOUND`,
`DEFAULT_PERMISSION_HISTORY`, `DEFAULT_MAX_QUEUED_EVENTS`, `NARROW_MODES` and `KNOWN_TYPES` are the
link's constants; `OutcomeUnknownError` is the shell's `outcome()` when the outcome is unknown.
"""

from __future__ import annotations

from ._link import DEFAULT_BOUND, DEFAULT_PERMISSION_HISTORY, KNOWN_TYPES, NARROW_MODES, ClaudeLinkCore
from ._link_model import (
    OUTCOME_TABLE,
    Acknowledged,
    EngineRequest,
    InitInfo,
    InterruptEvidence,
    InterruptSettled,
    Lifecycle,
    LinkEvent,
    LinkPoisoned,
    LinkUsageError,
    Outcome,
    OutcomeInput,
    OutcomeUnknown,
    Outgoing,
    OutKind,
    PermissionAsked,
    PermissionCancelled,
    PermissionRequest,
    PermissionResolved,
    PermissionState,
    Poisoned,
    ProtocolViolation,
    RanAfterInterrupt,
    ResultInfo,
    SessionMismatch,
    StatusChanged,
    StreamEvent,
    SystemEvent,
    TruncatedOutput,
    TurnFinished,
    TurnMessage,
    TurnStarted,
    UnknownReason,
    UnknownRecord,
    Written,
)
from ._shell import DEFAULT_MAX_QUEUED_EVENTS, ClaudeEngineLink, OutcomeUnknownError

__all__ = [
    "DEFAULT_BOUND",
    "DEFAULT_MAX_QUEUED_EVENTS",
    "DEFAULT_PERMISSION_HISTORY",
    "KNOWN_TYPES",
    "NARROW_MODES",
    "OUTCOME_TABLE",
    "Acknowledged",
    "ClaudeEngineLink",
    "ClaudeLinkCore",
    "EngineRequest",
    "InitInfo",
    "InterruptEvidence",
    "InterruptSettled",
    "Lifecycle",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "OutKind",
    "Outcome",
    "OutcomeInput",
    "OutcomeUnknown",
    "OutcomeUnknownError",
    "Outgoing",
    "PermissionAsked",
    "PermissionCancelled",
    "PermissionRequest",
    "PermissionResolved",
    "PermissionState",
    "Poisoned",
    "ProtocolViolation",
    "RanAfterInterrupt",
    "ResultInfo",
    "SessionMismatch",
    "StatusChanged",
    "StreamEvent",
    "SystemEvent",
    "TruncatedOutput",
    "TurnFinished",
    "TurnMessage",
    "TurnStarted",
    "UnknownReason",
    "UnknownRecord",
    "Written",
]


def __dir__() -> list[str]:
    return sorted(__all__)
