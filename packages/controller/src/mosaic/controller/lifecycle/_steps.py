"""`start()` as named steps, and the named points a crash can land on (as writer-claim's barrier points).

The rules it keeps:

1. `start()` is a walk over `START_STEPS`: each step names the steps it may hand on to, and the walk refuses
   any other (a bug); checked at import: every successor is a step or `done`, and `done` can be reached
   from every step.
2. The points a test may crash the lifecycle at are `LAUNCH_POINTS` (a launch's, a recover's and the
   launcher's call's, each after what it names is durable) and `STOP_POINTS` (a force stop's recorded
   phases, each published before its first action). `Hooks.on_launch_step` and `Hooks.on_stop_phase` are
   called with these names and no other (a test checks every point the code reaches is one of them, and
   that each has a crash test).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, get_args

__all__ = ["LAUNCH_POINTS", "START_STEPS", "STOP_POINTS", "StartStep"]

StartStep = Literal["bind", "socket", "open-claims", "use-eligibility", "classify", "launch-new", "take-over-held",
                    "spawn", "continue-stop", "serve-orphan", "serve", "settle-eligibility", "done"]

# step -> the steps it may hand on to (rule 1)
START_STEPS: Mapping[StartStep, frozenset[StartStep]] = MappingProxyType({
    "bind": frozenset({"socket"}),  # G2/G3: the paths resolve as at construction, before the claim root is opened
    "socket": frozenset({"open-claims"}),  # a live controller on this placement: already-active, nothing touched
    "open-claims": frozenset({"use-eligibility", "classify"}),
    "use-eligibility": frozenset({"spawn"}),  # the launcher's call: revalidate, hold, take the reservation over
    "classify": frozenset({"launch-new", "take-over-held"}),  # restart classification (free, or held)
    "launch-new": frozenset({"spawn"}),  # loadable, acquire
    "take-over-held": frozenset({"continue-stop", "serve-orphan"}),  # the refusals; adopt, top up, rediscover
    "spawn": frozenset({"serve"}),  # bind, stop room, engine uid, the engine's bind check, spawn marker, launch, ...
    "continue-stop": frozenset({"serve"}),  # K10, K11: the recorded stop re-run from TERM
    "serve-orphan": frozenset({"serve"}),  # W6, W13: served uncertain, force stop the way on
    "serve": frozenset({"settle-eligibility", "done"}),
    "settle-eligibility": frozenset({"done"}),  # the record used or spent, by the load check
})

# Where a launch may be crashed (rule 2), in the order a launch reaches them.
LAUNCH_POINTS: tuple[str, ...] = (
    "acquiring", "reserved", "engine-uid", "spawn-marker", "launched", "first-get-state", "active", "settled",
    "revalidated", "held", "taken-over", "recover-reserved", "recover-recorded")
STOP_POINTS: tuple[str, ...] = ("term", "kill")


def _check_steps(table: Mapping[StartStep, frozenset[StartStep]]) -> None:
    """Rule 1: refuse a successor that is no step, a step with none, or a step `done` cannot be reached from."""
    names = set(get_args(StartStep))
    if set(table) != names - {"done"}:
        raise TypeError(f"START_STEPS names {sorted(table)}, not every step but done")
    stray = sorted(f"{st}->{nxt}" for st, after in table.items() for nxt in after if nxt not in names)
    if stray or not all(table.values()):
        raise TypeError(f"START_STEPS successors that are no step, or none: {stray}")
    for start in table:
        seen, todo = set(), [start]
        while todo:
            st = todo.pop()
            if st not in seen:
                seen.add(st)
                todo.extend(table.get(st, ()))
        if "done" not in seen:
            raise TypeError(f"done cannot be reached from {start}")


_check_steps(START_STEPS)
