"""The core's rooms and what they share (issue 31): the effect table every dispatch site reads.

`EFFECTS` has one row per effect kind: the core's handler of its result and the port that runs it. The
core, the runtime, `no_cohort_effects` and the lifecycle's ports all read it; adding a kind is one row and
one `EffectPorts` method.
"""

from __future__ import annotations

import asyncio
import inspect
import typing

from core_harness import Harness

from mosaic.controller.core import EFFECTS, Effect, EffectDone, EffectName, EffectPorts
from mosaic.controller.lifecycle import LifecyclePorts
from mosaic.controller.runtime import ControllerRuntime, no_cohort_effects, ports_from_handler


def test_every_effect_row_has_a_handler_and_a_runner_everywhere() -> None:
    ports = {name for name, _ in inspect.getmembers(EffectPorts, inspect.isfunction) if not name.startswith("_")}
    assert set(EFFECTS) == set(typing.get_args(EffectName))
    assert {row.port for row in EFFECTS.values()} == ports  # every port is some row's, every row has one
    handler = ports_from_handler(no_cohort_effects)
    for kind, row in EFFECTS.items():
        assert row.kind == kind and callable(row.done)
        runner = ControllerRuntime if row.runs_in == "runtime" else LifecyclePorts
        assert inspect.iscoroutinefunction(getattr(runner, row.port)), (kind, runner)
        assert inspect.iscoroutinefunction(getattr(handler, row.port)), kind
        assert row.claim_lock == (row.runs_in == "lifecycle" and kind != "census"), kind


def test_with_no_lifecycle_each_effect_answers_its_rows_unattached_word() -> None:
    async def answers() -> dict[str, typing.Any]:
        return {kind: await no_cohort_effects(Effect("e1", kind)) for kind in EFFECTS}

    got = asyncio.run(answers())
    assert got["force-stop"] == {"state": "uncertain", "reason": "no-cohort",
                                 "detail": "no cohort is attached to this controller"}
    assert got["recover"]["refusal"]["code"] == "stop-proof"
    assert got["claim-generation"] == got["claim-uncertain"] == got["census"] == {"ok": True}
    got["recover"]["refusal"]["code"] = "changed"  # each answer is the caller's own copy
    assert asyncio.run(answers())["recover"]["refusal"]["code"] == "stop-proof"


def test_an_effect_result_of_a_kind_no_row_names_is_evidence_and_changes_nothing() -> None:
    h = Harness()
    h.controller("c1")
    before = (h.core.binding_record(), dict(h.core.fences), h.core.context)
    actions = h.feed(EffectDone("e99", "no-such-effect", {"ok": False, "state": "uncertain"}))  # type: ignore[arg-type]
    assert [(type(a).__name__, getattr(a, "kind", None)) for a in actions] == [("Evidence", "unknown-effect")]
    assert h.evidence[-1].detail == {"effect": "e99", "effectKind": "no-such-effect"}
    assert (h.core.binding_record(), dict(h.core.fences), h.core.context) == before
