"""The controller core, sans-io (brief §1, §3, §9; docs/design.md "The controller core"): one execution's
`ControllerCore` fed `Input`s (`Connected`, `Call` (a prompt's with the shell's look at the session file,
`SessionStat`), `EngineEvents`, `TimerFired`, `EffectDone`,
`PageRead`, `Disconnected`) through `receive(input, now=)`, returning `Action`s (`Reply`, `Refuse`,
`Notify`, `ReadPage`, `FlushEngine`, `SetTimer`, `CancelTimer`, `Effect`, `Evidence`,
`CloseConnection`) for the shells to carry out. Its configuration (`CoreConfig`, `Bounds`), its ordered
tables (admission: `CALL_GATE`, `PROMPT_ADMISSION`; the R3-1 stop chain: `StopStep`,
`CHAIN_TRANSITIONS`; the effects it asks for: `EFFECTS`), its timer and effect names, and the request
record whose receipt moves only along the table (`Request`, `IllegalTransition`)."""

from __future__ import annotations

from ..engines._seam import ENGINE_RECORD_CAP
from ._admission import CALL_GATE, PROMPT_ADMISSION, AdmissionCheck
from ._chain import CHAIN_TRANSITIONS, SETTLE_TIMER
from ._drift import DRIFT_READ_TIMER, DRIFT_START
from ._effects import EFFECTS, EffectKind, EffectPorts, effect_failed
from ._io import (
    CENSUS,
    CLAIM_GENERATION,
    CLAIM_UNCERTAIN,
    FORCE_STOP,
    READ_SESSION,
    RECOVER,
    Action,
    Call,
    CancelTimer,
    CloseConnection,
    Connected,
    ConnId,
    Disconnected,
    Effect,
    EffectDone,
    EffectName,
    EngineEvents,
    Evidence,
    FlushEngine,
    Input,
    Notify,
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    RpcId,
    SessionStat,
    SetTimer,
    TimerFired,
)
from ._receive import ControllerCore, new_incarnation
from ._state import FIELD_OWNERS, Bounds, CoreConfig
from ._values import IllegalTransition, Request, StopStep

__all__ = [
    "CALL_GATE",
    "CENSUS",
    "CHAIN_TRANSITIONS",
    "CLAIM_GENERATION",
    "CLAIM_UNCERTAIN",
    "DRIFT_READ_TIMER",
    "DRIFT_START",
    "EFFECTS",
    "ENGINE_RECORD_CAP",
    "FIELD_OWNERS",
    "FORCE_STOP",
    "PROMPT_ADMISSION",
    "READ_SESSION",
    "RECOVER",
    "SETTLE_TIMER",
    "Action",
    "AdmissionCheck",
    "Bounds",
    "Call",
    "CancelTimer",
    "CloseConnection",
    "ConnId",
    "Connected",
    "ControllerCore",
    "CoreConfig",
    "Disconnected",
    "Effect",
    "EffectDone",
    "EffectKind",
    "EffectName",
    "EffectPorts",
    "EngineEvents",
    "Evidence",
    "FlushEngine",
    "IllegalTransition",
    "Input",
    "Notify",
    "PageRead",
    "ReadPage",
    "Refuse",
    "Reply",
    "Request",
    "RpcId",
    "SessionStat",
    "SetTimer",
    "StopStep",
    "TimerFired",
    "effect_failed",
    "new_incarnation",
]


def __dir__() -> list[str]:
    return list(__all__)
