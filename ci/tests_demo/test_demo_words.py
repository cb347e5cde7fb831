"""What the demo says when a step is refused (issue 29, item 4): the step, the refusal in plain words, why
the controller had closed new prompts (each fence with its detail, from the controller's core), and what to
do next; nothing when the controller's admission was open."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import demo  # ci/demo.py (conftest.py puts ci/ on the path)

from mosaic.controller import ControlRefusal


def controller(state: str, fences: dict[str, str]) -> Any:
    """A stand-in with what `closed_because` reads of a LaunchingController: its runtime's core."""
    return SimpleNamespace(runtime=SimpleNamespace(core=SimpleNamespace(binding_state=state, fences=fences)))


def test_a_refused_step_says_the_step_why_admission_was_closed_and_what_to_do() -> None:
    why = demo.closed_because(controller("uncertain", {"drift-check": "the session file read did not finish "
                                                                       "within 10.0 s (agent-session.js 1-2)"}))
    assert why == "the binding is uncertain; drift-check: the session file read did not finish within 10.0 s"
    refusal = ControlRefusal("fenced", "an ordinary takeover is refused while admission is closed (K9); force stop "
                                       "needs recovery control")
    lines = demo.refused_lines("step 3 (B takes control)", refusal, why)
    assert lines == [
        "demo: refused at step 3 (B takes control): fenced: an ordinary takeover is refused while admission is "
        "closed (K9); force stop needs recovery control",
        f"demo: the controller had closed new prompts: {why}",
        "demo: what to do: nothing is left behind (everything the run made is removed below); run it again (bash "
        "ci/main). If the same step is refused again, bash ci/main --verbose shows each step's technical state: "
        "report the lines above with it"]


def test_an_open_controller_or_none_adds_no_reason() -> None:
    assert demo.closed_because(controller("active", {})) == ""
    assert demo.closed_because(None) == ""
    refusal = ControlRefusal("controller", "this connection is not the controller")
    assert len(demo.refused_lines("the set-up", refusal, "")) == 2
