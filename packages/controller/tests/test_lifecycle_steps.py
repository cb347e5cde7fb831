"""The lifecycle's start as named steps, and the named points a crash can land on (issue 31 item 3;
`lifecycle/_steps`): every point the lifecycle's code reaches is a name of `LAUNCH_POINTS`, every name is
reached, and the step table hands on only to steps, from each of which `done` can be reached."""

from __future__ import annotations

import ast
from pathlib import Path

import mosaic.controller.engines.pi
import mosaic.controller.lifecycle
from mosaic.controller.lifecycle import LAUNCH_POINTS, START_STEPS, STOP_POINTS

SOURCES = [*Path(mosaic.controller.lifecycle.__file__).parent.glob("*.py"),
           *Path(mosaic.controller.engines.pi.__file__).parent.glob("*.py")]


def _points_reached() -> set[str]:
    """Every string literal the lifecycle passes to its crash-point hook (`_step(...)`, `step(...)`)."""
    found: set[str] = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in ("_step", "step"):
                    found.add(node.args[0].value)
    return found


def test_every_crash_point_the_lifecycle_reaches_is_a_named_point_and_each_named_point_is_reached() -> None:
    assert _points_reached() == set(LAUNCH_POINTS)
    assert len(set(LAUNCH_POINTS)) == len(LAUNCH_POINTS) and set(STOP_POINTS) == {"term", "kill"}


def test_the_start_steps_hand_on_only_to_steps_and_done_is_reached_from_every_step() -> None:
    steps = set(START_STEPS) | {"done"}
    assert "bind" in START_STEPS and all(after and after <= steps for after in START_STEPS.values())
    for start in START_STEPS:
        seen, todo = set(), [start]
        while todo:
            step = todo.pop()
            if step not in seen:
                seen.add(step)
                todo.extend(START_STEPS.get(step, ()))  # type: ignore[call-overload]
        assert "done" in seen, start
    # The guard and the socket come before the claim root is opened; the spawn only after a reservation.
    assert START_STEPS["bind"] == {"socket"} and START_STEPS["socket"] == {"open-claims"}
    assert {step for step, after in START_STEPS.items() if "spawn" in after} == {"launch-new", "use-eligibility"}
