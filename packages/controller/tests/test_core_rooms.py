"""The core's rooms and what they share (issue 31): the effect table every dispatch site reads, and the
records a client sees for each way the dispatch slot settles.

`EFFECTS` has one row per effect kind: the core's handler of its result and the port that runs it. The
core, the runtime, `no_cohort_effects` and the lifecycle's ports all read it; adding a kind is one row and
one `EffectPorts` method.

The dispatch slot settles in eight ways (an error response, an ack read after the pipe was poisoned, an ack
with no run, an unknown write, an ack then a settle with no start, the run's settle, an overlap signal, a
force stop). What an observer reads of each, in order, is pinned here: receipts, stop records and the
binding, with their states (a client reconciles on exactly these; `test_client.py` counts binding records).
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from core_harness import EXECUTION, Harness, run_start, state

import mosaic.controller.core
from mosaic.controller.core import (
    EFFECTS,
    FIELD_OWNERS,
    ControllerCore,
    CoreConfig,
    Effect,
    EffectDone,
    EffectName,
    EffectPorts,
    EngineEvents,
)
from mosaic.controller.engines.pi import PI_RULES
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


# ------------------------------------------------------------------ the records of each way the slot settles

def _seen(h: Harness, start: int) -> list[tuple[Any, ...]]:
    """What the observer read from `start` on: each record's type and the states a client acts on."""
    out: list[tuple[Any, ...]] = []
    for rec in h.clients["obs"].records()[start:]:
        kind = rec["type"]
        if kind == "receipt":
            out.append(("receipt", rec["state"], rec.get("reason"), rec.get("turnState")))
        elif kind == "binding":
            out.append(("binding", rec["state"], rec["admission"], tuple(rec["fences"])))
        elif kind == "stop":
            out.append(("stop", rec["kind"], rec["state"], rec["phase"], rec.get("reason")))
        else:
            out.append((kind,))
    return out


def _observed() -> tuple[Harness, int]:
    h = Harness()
    h.controller("c1")
    h.observe("obs")
    return h, len(h.clients["obs"].records())


def _working(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.respond("prompt")
    h.engine(*run_start("hi"))
    h.respond("get_state", data=state(True))


def _force_stop(h: Harness, **result: Any) -> None:
    cid = h.confirm("c1")
    h.call("c1", "force-stop", confirmation=cid)
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, **result)


def _error_response(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.respond("prompt", success=False, error="boom")


def _ack_after_poison(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.auto_flush = False  # the interrupt's clear waits in the outbox past its bound: the pipe is poisoned
    h.call("c1", "interrupt", generation=h.core.generation)
    h.advance(h.core.bounds.clear + 1)
    h.respond("prompt")


def _handled_without_run(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.respond("prompt")
    h.respond("get_state", data=state(False))


def _write_unknown(h: Harness) -> None:
    h.auto_flush = False
    h.prompt("c1", "x" * 200_000)
    link = h.core.link
    command = link.next_write()
    assert command is not None
    h.feed(EngineEvents(EXECUTION, link.write_done(command, accepted=65536, error=None, now=h.now)))


def _ack_without_start(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.respond("prompt")
    h.engine({"type": "agent_settled"})


def _run_settled(h: Harness) -> None:
    h.prompt("c1", "hi")
    h.turn("hi")


def _overlap(h: Harness) -> None:
    _working(h)
    h.engine({"type": "agent_start"})  # O1: inside the run's turn


def _overlap_interrupt(h: Harness) -> None:
    _working(h)
    h.call("c1", "interrupt", generation=h.core.generation)
    h.engine({"type": "agent_start"})


def _force_stop_uncertain(h: Harness) -> None:
    _working(h)
    _force_stop(h, state="uncertain", reason="no-cohort", detail="x")


def _superseded(h: Harness) -> None:
    _working(h)
    h.call("c1", "interrupt", generation=h.core.generation)
    _force_stop(h, state="stopped", proofDigest="sha256:" + "0" * 64)


SCENARIOS: dict[str, Callable[[Harness], None]] = {
    "error_response": _error_response, "ack_after_poison": _ack_after_poison,
    "handled_without_run": _handled_without_run, "write_unknown": _write_unknown,
    "ack_without_start": _ack_without_start, "run_settled": _run_settled, "overlap": _overlap,
    "overlap_interrupt": _overlap_interrupt, "force_stop": _force_stop_uncertain, "superseded": _superseded,
}

EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    'error_response': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'failed', None, None),
        ('binding', 'active', 'open', ()),
    ],
    'ack_after_poison': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('stop', 'interrupt', 'stopping', 'start', None),
        ('binding', 'active', 'closed', ('interrupt',)),
        ('turnProof',),
        ('stop', 'interrupt', 'uncertain', 'done', 'transport-unknown'),
        ('binding', 'uncertain', 'closed', ('interrupt', 'transport', 'uncertain')),
        ('binding', 'uncertain', 'closed', ('interrupt', 'transport', 'uncertain')),
        ('receipt', 'acknowledged', None, None),
        ('receipt', 'delivery-unknown', 'transport-unknown', None),
        ('binding', 'uncertain', 'closed', ('interrupt', 'transport', 'uncertain')),
    ],
    'handled_without_run': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('receipt', 'delivery-unknown', 'handled-without-run', None),
        ('binding', 'active', 'open', ()),
    ],
    'write_unknown': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'delivery-unknown', 'transport-unknown', None),
        ('binding', 'active', 'open', ()),
        ('binding', 'uncertain', 'closed', ('transport', 'uncertain')),
    ],
    'ack_without_start': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('receipt', 'failed', 'ack-without-start', None),
        ('binding', 'active', 'open', ()),
    ],
    'run_settled': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'working', None, None),
        ('receipt', 'finished', None, 'completed'),
        ('binding', 'active', 'open', ()),
    ],
    'overlap': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'working', None, None),
        ('receipt', 'delivery-unknown', 'run-overlap', None),
        ('binding', 'uncertain', 'closed', ('overlap', 'uncertain')),
    ],
    'overlap_interrupt': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'working', None, None),
        ('stop', 'interrupt', 'stopping', 'start', None),
        ('binding', 'active', 'closed', ('interrupt',)),
        ('receipt', 'delivery-unknown', 'run-overlap', None),
        ('turnProof',),
        ('stop', 'interrupt', 'uncertain', 'done', 'run-overlap'),
        ('binding', 'uncertain', 'closed', ('interrupt', 'overlap', 'uncertain')),
        ('binding', 'uncertain', 'closed', ('interrupt', 'overlap', 'uncertain')),
    ],
    'force_stop': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'working', None, None),
        ('stop', 'force-stop', 'stopping', 'requested', None),
        ('binding', 'stopping', 'closed', ('force-stop',)),
        ('receipt', 'finished', None, 'unknown'),
        ('effectReport',),
        ('stop', 'force-stop', 'uncertain', 'done', 'no-cohort'),
        ('binding', 'uncertain', 'closed', ('force-stop', 'uncertain')),
    ],
    'superseded': [
        ('request',),
        ('receipt', 'admitted', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'dispatched', None, None),
        ('receipt', 'acknowledged', None, None),
        ('binding', 'active', 'open', ()),
        ('receipt', 'working', None, None),
        ('stop', 'interrupt', 'stopping', 'start', None),
        ('binding', 'active', 'closed', ('interrupt',)),
        ('stop', 'interrupt', 'superseded', 'clear', None),
        ('stop', 'force-stop', 'stopping', 'requested', None),
        ('binding', 'stopping', 'closed', ('force-stop', 'interrupt')),
        ('receipt', 'finished', None, 'unknown'),
        ('effectReport',),
        ('stop', 'force-stop', 'stopped', 'done', None),
        ('binding', 'stopped', 'closed', ('force-stop', 'interrupt')),
    ],
}


@pytest.mark.parametrize("cause", sorted(SCENARIOS))
def test_each_way_the_slot_settles_sends_the_records_it_always_sent(cause: str) -> None:
    h, start = _observed()
    SCENARIOS[cause](h)
    assert _seen(h, start) == EXPECTED[cause]
    assert h.core.slot is None


# ------------------------------------------------------------------------------- who writes each field

CORE = Path(mosaic.controller.core.__file__).parent
# A local name that holds a field's value, as the rooms name them (`slot = s.slot`, `for stop in s.stops`).
ALIASES = {"slot": "slot", "stop": "stop", "running": "stop", "check": "drift_check", "run": "run",
           "conf": "confirmations", "conn": "connections", "request": "requests", "held": "held"}
MUTATORS = {"append", "pop", "popleft", "clear", "update", "extend", "setdefault", "remove", "insert", "discard",
            "add"}
# Writes still made outside their owner (room, field), each removed by the step that gives the owner its API:
# none are left.
KNOWN_STRAYS: set[tuple[str, str]] = set()


def _field_of(node: ast.AST, state_name: str) -> str | None:
    """The CoreState field a write target reaches (`s.slot.probe`, `slot.probe`, `s.fences[...]`), or None."""
    chain: list[str] = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            chain.append(node.attr)
        node = node.value
    if not chain or not isinstance(node, ast.Name):
        return None
    if node.id == state_name:
        return chain[-1] if chain[-1] in FIELD_OWNERS else None
    return ALIASES.get(node.id)


def writes() -> set[tuple[str, str, str]]:
    """Every (room, field, where) a core module assigns, deletes or mutates in place."""
    found: set[tuple[str, str, str]] = set()
    for path in sorted(CORE.glob("_*.py")):
        room = path.stem
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            state_name = "self" if room == "_state" else "s"
            for node in ast.walk(fn):
                targets: list[ast.AST] = []
                if isinstance(node, ast.Assign):
                    targets = list(node.targets)
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                    targets = [node.target]
                elif isinstance(node, ast.Delete):
                    targets = list(node.targets)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr in MUTATORS:
                    targets = [node.func.value]
                for target in targets:
                    for one in (target.elts if isinstance(target, ast.Tuple) else [target]):
                        field = _field_of(one, state_name)
                        if field is not None and not (room == "_state" and fn.name == "__init__"):
                            found.add((room, field, f"{path.name}:{node.lineno} {fn.name}"))
    return found


def test_every_core_state_field_has_an_owner() -> None:
    core = ControllerCore(CoreConfig(conversation="c", execution="e", binding="b", incarnation="i", engine=PI_RULES), now=0.0)
    fields = set(vars(core._s))
    assert set(FIELD_OWNERS) == fields
    assert set(FIELD_OWNERS.values()) <= {path.stem for path in CORE.glob("_*.py")}


def test_each_core_state_field_is_written_only_by_its_owner() -> None:
    found = writes()
    assert len({field for _, field, _ in found}) >= 30  # the scan sees the rooms' writes
    strays = sorted((room, field, where) for room, field, where in found
                    if FIELD_OWNERS[field] != room and (room, field) not in KNOWN_STRAYS)
    assert strays == []
    stale = sorted(KNOWN_STRAYS - {(room, field) for room, field, _ in found if FIELD_OWNERS[field] != room})
    assert stale == []  # a stray that is gone leaves the list


def test_the_slot_is_freed_in_one_place_its_release() -> None:
    """Every way the slot settles goes through `_slot.release` (the one release path): no other function of
    the core frees it."""
    frees = []
    for path in sorted(CORE.glob("_*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef):
                frees += [(path.stem, fn.name) for node in ast.walk(fn) if isinstance(node, ast.Assign)
                          and isinstance(node.value, ast.Constant) and node.value.value is None
                          and any(isinstance(t, ast.Attribute) and t.attr == "slot" for t in node.targets)]
    assert frees == [("_slot", "release")]
