"""mosaic.controller: one controller per execution. Admission, the dispatch slot, turns, the R3-1 stop
chain, events, the socket protocol and the client library (issue 10); the claim-backed lifecycle
(issue 11).

The core is sans-io (`ControllerCore.receive(input, now=) -> actions`); the shells (the socket server,
the engine link, timers, effects) move bytes and carry out actions. `ClaimCohortProbe`,
`run_force_stop` and `cohort_proof_ref` join the writer claim and the cohort (issue 9's contract).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._access import (
        METHOD_OPERATIONS,
        OPERATIONS,
        AccessPolicy,
        Grants,
        Peer,
    )
    from ._cohort import (
        ClaimCohortProbe,
        StopRun,
        cohort_proof_ref,
        run_force_stop,
    )
    from ._core import (
        ControllerCore,
        new_incarnation,
    )
    from ._core_admission import (
        CALL_GATE,
        PROMPT_ADMISSION,
        AdmissionCheck,
    )
    from ._core_state import (
        ENGINE_RECORD_CAP,
        Bounds,
        CoreConfig,
        engine_link_core,
    )
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
    from ._lifecycle import (
        Controller,
        EngineSpec,
        Hooks,
        Placement,
    )
    from ._refusal import (
        ControlRefusal,
    )
    from ._tables import (
        EVENT_MAP,
        MAX_TEXT_CHARS,
        MESSAGE_UPDATE_MAP,
        OVERLAP_SIGNALS,
        RECEIPT_TRANSITIONS,
        SLOT_TABLE,
        TEXT_PREFIXES,
        check_text,
        classify_native,
    )

# Importing the package loads none of its modules: each name loads its module on first use, so
# `mosaic.controller.client` (the terminal's, any client's) does not pay for the core, the server,
# the lifecycle or cgroup-cohort (issue 22: the client under 60 ms).
_LAZY: dict[str, str] = {
    "AccessPolicy": "_access",
    "Action": "_io",
    "AdmissionCheck": "_core_admission",
    "Bounds": "_core_state",
    "Call": "_io",
    "CALL_GATE": "_core_admission",
    "CancelTimer": "_io",
    "check_text": "_tables",
    "ClaimCohortProbe": "_cohort",
    "classify_native": "_tables",
    "CloseConnection": "_io",
    "cohort_proof_ref": "_cohort",
    "Connected": "_io",
    "ConnId": "_io",
    "Controller": "_lifecycle",
    "ControllerCore": "_core",
    "ControlRefusal": "_refusal",
    "CoreConfig": "_core_state",
    "Disconnected": "_io",
    "Effect": "_io",
    "EffectDone": "_io",
    "engine_link_core": "_core_state",
    "ENGINE_RECORD_CAP": "_core_state",
    "EngineEvents": "_io",
    "EngineSpec": "_lifecycle",
    "EVENT_MAP": "_tables",
    "Evidence": "_io",
    "FlushEngine": "_io",
    "Grants": "_access",
    "Hooks": "_lifecycle",
    "Input": "_io",
    "MAX_TEXT_CHARS": "_tables",
    "MESSAGE_UPDATE_MAP": "_tables",
    "METHOD_OPERATIONS": "_access",
    "new_incarnation": "_core",
    "Notify": "_io",
    "OPERATIONS": "_access",
    "OVERLAP_SIGNALS": "_tables",
    "PageRead": "_io",
    "Peer": "_access",
    "Placement": "_lifecycle",
    "PROMPT_ADMISSION": "_core_admission",
    "ReadPage": "_io",
    "RECEIPT_TRANSITIONS": "_tables",
    "Refuse": "_io",
    "Reply": "_io",
    "RpcId": "_io",
    "run_force_stop": "_cohort",
    "SetTimer": "_io",
    "SLOT_TABLE": "_tables",
    "StopRun": "_cohort",
    "TEXT_PREFIXES": "_tables",
    "TimerFired": "_io",
}

__all__ = [
    "AccessPolicy",
    "Action",
    "AdmissionCheck",
    "Bounds",
    "CALL_GATE",
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
    "ENGINE_RECORD_CAP",
    "EVENT_MAP",
    "Effect",
    "EffectDone",
    "EngineSpec",
    "EngineEvents",
    "Evidence",
    "FlushEngine",
    "Grants",
    "Hooks",
    "Input",
    "MAX_TEXT_CHARS",
    "MESSAGE_UPDATE_MAP",
    "METHOD_OPERATIONS",
    "OPERATIONS",
    "OVERLAP_SIGNALS",
    "Notify",
    "PROMPT_ADMISSION",
    "PageRead",
    "Peer",
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
    "engine_link_core",
    "cohort_proof_ref",
    "new_incarnation",
    "run_force_stop",
]



def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
