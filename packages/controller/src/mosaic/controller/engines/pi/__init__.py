"""The Pi engine adapter: everything that knows Pi's wire and files. Pi's tables (the text prefixes it
interprets, `TEXT_PREFIXES`; its native events and what each becomes, `EVENT_MAP`, `MESSAGE_UPDATE_MAP`,
`classify_native`; the overlap signals, `OVERLAP_SIGNALS`), its session drift check (`check_drift`,
`check_appended`, `engine_list`: the `get_entries` answer; `DRIFT_REASONS`, `PERSISTENCE_DRIFT`), what the
lifecycle reads of a Pi session file (`session_place`, `SessionPlace`, `read_session`, `SessionIdentity`),
the checks of a launch (`sealed_argv`, `current_pins`, `loadable`, K8's `load_check` with `leaf_query`
and `leaf_problem`) and the history pages an observe serves (`history_reader`). The seam's two halves for Pi:
the core's `PiRules` (`PI_RULES`, `CoreConfig.engine`) and the lifecycle's `PiEngine`, made by `PiSpec.engine()`
(how to run Pi: the `EngineFactory` a `LaunchingController` takes)."""

from __future__ import annotations

from ._adapter import PiEngine
from ._drift import DRIFT_REASONS, PERSISTENCE_DRIFT, check_appended, check_drift, engine_list
from ._history import history_reader
from ._launch import (
    STARTUP_APPEND_TYPES,
    current_pins,
    leaf_problem,
    leaf_query,
    load_check,
    loadable,
    sealed_argv,
    tree_digest,
)
from ._session import SessionIdentity, SessionPlace, read_session, session_place
from ._spec import PiSpec
from ._tables import (
    DIALOG,
    DIALOG_METHODS,
    EVENT_MAP,
    INTERNAL,
    LATER_LINE_SLASH_INTERPRETED,
    MESSAGE_UPDATE_MAP,
    OVERLAP_SIGNALS,
    TEXT_PREFIXES,
    UI_NOTICE_METHODS,
    OverlapSignal,
    Prefix,
    classify_native,
)
from ._wire import PI_RULES, PiRules

__all__ = [
    "DIALOG",
    "DIALOG_METHODS",
    "DRIFT_REASONS",
    "EVENT_MAP",
    "INTERNAL",
    "LATER_LINE_SLASH_INTERPRETED",
    "MESSAGE_UPDATE_MAP",
    "OVERLAP_SIGNALS",
    "PI_RULES",
    "PERSISTENCE_DRIFT",
    "STARTUP_APPEND_TYPES",
    "TEXT_PREFIXES",
    "UI_NOTICE_METHODS",
    "OverlapSignal",
    "PiEngine",
    "PiRules",
    "PiSpec",
    "Prefix",
    "SessionIdentity",
    "SessionPlace",
    "check_appended",
    "check_drift",
    "classify_native",
    "current_pins",
    "engine_list",
    "history_reader",
    "leaf_problem",
    "leaf_query",
    "load_check",
    "loadable",
    "read_session",
    "sealed_argv",
    "session_place",
    "tree_digest",
]


def __dir__() -> list[str]:
    return list(__all__)
