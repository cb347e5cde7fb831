"""The shell around the core (`ControllerRuntime`): the event loop that feeds the core its inputs (the
socket, the engine link, timers, effects, page reads) and carries out its actions; the readers it is
given (`history_reader`, `SessionFileReader`; a prompt's look at the session file, `SessionStatter`) and the
effect handler seam (`EffectHandler`, `no_cohort_effects`, `ports_from_handler`: the `EffectPorts` of one
handler)."""

from __future__ import annotations

from .engines.pi._history import history_reader
from .lifecycle._session_reader import SessionFileReader
from .server._runtime import (
    ControllerRuntime,
    EffectHandler,
    PageReader,
    SessionReader,
    SessionStatter,
    no_cohort_effects,
    ports_from_handler,
)

__all__ = [
    "ControllerRuntime",
    "EffectHandler",
    "PageReader",
    "SessionFileReader",
    "SessionReader",
    "SessionStatter",
    "history_reader",
    "no_cohort_effects",
    "ports_from_handler",
]


def __dir__() -> list[str]:
    return list(__all__)
