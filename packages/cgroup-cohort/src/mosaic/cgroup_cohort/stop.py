"""The force stop: the request, the sans-io machines, their actions and events, the executors, the outcome.

``force_stop(ref, request, ...)`` is the whole stop in one call (a ``StopResult``: the outcome and, when
``stopped``, the cohortProof). A controller that publishes each phase drives it itself: ``machine_for``
and ``executor_for``, then ``machine.feed(executor.perform(machine.action))`` until the action is a
``Finish``. The transitions are data (``STOP_TRANSITIONS``, ``PGROUP_TRANSITIONS``); a stop that cannot
prove ends ``uncertain`` with one of ``UNCERTAIN_REASONS``. ``census`` counts a cohort now, for a
confirmation (a count, never a proof). README "Driving a stop from outside", "The force stop".
"""

from ._census import Census, census
from ._driver import StopExecutor, StopResult, executor_for, force_stop
from ._events import (
    Acknowledged,
    Action,
    AwaitGrace,
    CheckIdentity,
    Collect,
    Enumerate,
    Enumerated,
    Event,
    Finish,
    Freeze,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    GroupObserved,
    IdentityObserved,
    IdentityUnavailable,
    Kill,
    Killed,
    KillGroup,
    ObserveGroup,
    Reaped,
    RecheckFrozen,
    SendTerm,
    StopEvidence,
    StopOutcome,
    TermSent,
    Unavailable,
)
from ._evidence import UNCERTAIN_REASONS
from ._model import Death, ObservedIdentity, StopRequest
from ._stop import (
    PGROUP_TRANSITIONS,
    STOP_TRANSITIONS,
    PgPhase,
    PgroupStopMachine,
    Phase,
    StopMachine,
    check_identity,
    machine_for,
)

__all__ = [
    # the request and the one-call stop
    "StopRequest",
    "StopResult",
    "force_stop",
    # driving it step by step
    "PGROUP_TRANSITIONS",
    "STOP_TRANSITIONS",
    "PgPhase",
    "PgroupStopMachine",
    "Phase",
    "StopExecutor",
    "StopMachine",
    "check_identity",
    "executor_for",
    "machine_for",
    # the actions
    "Action",
    "AwaitGrace",
    "CheckIdentity",
    "Collect",
    "Enumerate",
    "Finish",
    "Freeze",
    "Kill",
    "KillGroup",
    "ObserveGroup",
    "RecheckFrozen",
    "SendTerm",
    # the events
    "Acknowledged",
    "Enumerated",
    "Event",
    "Frozen",
    "FrozenRechecked",
    "GraceEnded",
    "GroupObserved",
    "IdentityObserved",
    "IdentityUnavailable",
    "Killed",
    "Reaped",
    "TermSent",
    "Unavailable",
    # what a stop observed and how it ended
    "UNCERTAIN_REASONS",
    "Death",
    "ObservedIdentity",
    "StopEvidence",
    "StopOutcome",
    # before a stop: the cohort's size now
    "Census",
    "census",
]


def __dir__() -> list[str]:
    return sorted(__all__)
