"""mosaic.controller: one controller per execution. Admission, the dispatch slot, turns, the R3-1 stop
chain, events, the socket protocol and the client library (issue 10); the claim-backed lifecycle
(issue 11).

The core is sans-io (`ControllerCore.receive(input, now=) -> actions`); the shells (the socket server,
the engine link, timers, effects) move bytes and carry out actions. `ClaimCohortProbe`,
`run_force_stop` and `cohort_proof_ref` join the writer claim and the cohort (issue 9's contract).
"""

from ._cohort import ClaimCohortProbe, StopRun, cohort_proof_ref, run_force_stop
from ._core import Bounds, ControllerCore, CoreConfig, new_incarnation
from ._io import (
    Action,
    Call,
    CancelTimer,
    CloseConnection,
    Connected,
    ConnId,
    Disconnected,
    Effect,
    EffectDone,
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
    SetTimer,
    TimerFired,
)
from ._lifecycle import Controller, EngineSpec, Hooks, Placement
from ._refusal import ControlRefusal
from ._tables import (
    EVENT_MAP,
    MAX_TEXT_CHARS,
    MESSAGE_UPDATE_MAP,
    RECEIPT_TRANSITIONS,
    SLOT_TABLE,
    TEXT_PREFIXES,
    check_text,
    classify_native,
)

__all__ = [
    "Action",
    "Bounds",
    "Call",
    "CancelTimer",
    "ClaimCohortProbe",
    "CloseConnection",
    "ConnId",
    "Connected",
    "ControlRefusal",
    "Controller",
    "ControllerCore",
    "CoreConfig",
    "Disconnected",
    "EVENT_MAP",
    "Effect",
    "EffectDone",
    "EngineSpec",
    "EngineEvents",
    "Evidence",
    "FlushEngine",
    "Hooks",
    "Input",
    "MAX_TEXT_CHARS",
    "MESSAGE_UPDATE_MAP",
    "Notify",
    "PageRead",
    "Placement",
    "RECEIPT_TRANSITIONS",
    "ReadPage",
    "Refuse",
    "Reply",
    "RpcId",
    "SLOT_TABLE",
    "SetTimer",
    "StopRun",
    "TEXT_PREFIXES",
    "TimerFired",
    "check_text",
    "classify_native",
    "cohort_proof_ref",
    "new_incarnation",
    "run_force_stop",
]
