"""The engine seam proven engine-neutral (issue 31 S12): the core runs a second engine, the toy of
`toy_engine.py` (other command and event names, no probe, an interrupt that clears and aborts in one request),
through admission, a run and its settle, an interrupt reconciled and a drift check; and no Pi command or event
name is written in the core's source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from core_harness import Harness, refused
from test_drift import DriftHarness
from toy_engine import TOY_COMMANDS, TOY_RULES, toy_file, toy_turn

from mosaic.controller.core import DRIFT_START, TimerFired
from mosaic.controller.drift import DriftConfig
from mosaic.controller.engines.pi import EVENT_MAP, PI_RULES

CORE = Path(__file__).resolve().parents[1] / "src" / "mosaic" / "controller" / "core"


def test_a_second_engine_runs_admission_a_run_and_its_settle_with_no_probe() -> None:
    """A prompt is written as the toy's `say`; the ack writes nothing more (no probe: `send_probe` is None);
    the toy's run, in its own event names, makes the receipt working then finished completed, and the
    subscriber sees CHAT-01 events numbered as for Pi. Not one byte of Pi's wire is written."""
    h = Harness(engine=TOY_RULES)
    h.controller()
    refused(h.prompt("c1", "#directive"), "text-policy")  # the toy's own text policy
    assert h.prompt("c1", "hello")["outcome"] == "admitted"
    assert h.written() == [{"id": h.written()[0]["id"], "type": "say", "words": "hello"}]
    h.respond("say")
    assert h.receipt()["state"] == "acknowledged"
    assert h.written_types() == ["say"]  # the None branch: no probe follows the ack
    assert h.core.slot is not None and h.core.slot.probe is None
    refused(h.prompt("c1", "again"), "busy")  # the slot stays held until the run reconciles it
    h.engine(*toy_turn("hello", "Hi there"))
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "completed"
    assert h.core.slot is None and h.core.admission_open
    events = h.clients["c1"].events()
    assert [e["eventType"] for e in events] == ["message-start", "text-delta", "text-delta", "message-end",
                                                "run-settled"]
    assert events[0]["payload"] == {"message": "m1", "role": "user", "content": [{"type": "text", "text": "hello"}]}
    assert events[1]["payload"] == {"message": "m1", "contentIndex": 0, "delta": "Hi"}
    assert events[3]["payload"]["message"] == "m1" and events[3]["payload"]["updateMode"] == "replace"
    assert all(e["request"] == receipt["request"] for e in events)
    assert set(h.written_types()) <= set(TOY_COMMANDS) and not h.core.overlaps


def test_a_second_engine_whose_one_interrupt_clears_and_aborts_is_reconciled_interrupted() -> None:
    """The toy's `hush` empties its queue and ends the run in one request: its answer and the cut run arrive in
    one chunk, before the chain's abort is written. The cut answer is the chain's doing, not O4 (`clear_aborts`);
    the turn ends interrupted; the chain's abort (`wait-idle`, answered at once: the toy is idle) and the
    post-settle clear follow; the stop is reconciled and admission opens again."""
    h = Harness(engine=TOY_RULES)
    h.controller()
    h.prompt("c1", "count to a million")
    h.respond("say")
    h.engine({"type": "went"}, {"type": "heard", "words": "count to a million"}, {"type": "bit", "words": "1 2"})
    assert h.receipt()["state"] == "working"
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert h.written_types() == ["say", "hush"]
    hush = h.last("hush")["id"]
    h.engine({"type": "response", "id": hush, "success": True, "dropped": []},
             {"type": "spoke", "words": "1 2", "cut": True}, {"type": "paused"}, {"type": "idle"})
    assert not h.core.overlaps  # the cut run is the interrupt's, never O4
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted"
    assert h.written_types() == ["say", "hush", "wait-idle"]
    h.respond("wait-idle")
    assert h.written_types() == ["say", "hush", "wait-idle", "hush"]  # the post-settle clear
    assert not h.core.admission_open
    h.respond("hush", dropped=[])
    final = h.clients["c1"].records("stop")[-1]
    assert final["stop"] == stop["stop"] and final["state"] == "reconciled"
    assert h.core.admission_open and h.core.stop is None


def test_a_second_engine_dialog_is_shown_disabled_in_its_own_name() -> None:
    """P3 through the seam: the toy's `ask` is a native decision shown disabled, never answered, in its words."""
    h = Harness(engine=TOY_RULES)
    h.controller()
    h.engine({"type": "ask", "qid": "q7", "title": "Delete it?"})
    (decision,) = h.clients["c1"].records("nativeDecision")
    assert decision["nativeDecision"] == "q7" and decision["state"] == "disabled"
    assert decision["title"] == "Delete it?" and decision["reason"].startswith("Toy asks a question here")
    assert h.written_types() == []


@pytest.mark.parametrize("disk,drift", [(["a", "b"], None), (["a", "b", "x"], "unknown-id"), (["a"], "disk-behind")])
def test_a_second_engine_drift_check_runs_through_the_core(disk: list[str], drift: str | None) -> None:
    """The takeover check asks the toy (`list-ids`), reads the file and compares them by the toy's rules: the
    same ids are no drift; an id the toy never wrote or one it holds and the file lacks is drift, admission
    closed and the binding uncertain (session-drift)."""
    h = DriftHarness(engine=TOY_RULES, drift=DriftConfig("toy-session"))
    h.feed(TimerFired(DRIFT_START))
    assert h.written_types() == ["list-ids"] and h.last("list-ids")["after"] is None
    h.respond("list-ids", ids=["a", "b"])
    h.read({"ok": True, "file": toy_file(disk)})
    verdict = h.core.drift_verdict
    assert verdict is not None and verdict.reason == drift
    assert verdict.drift is (drift is not None)
    if drift is None:
        h.controller("c1")
        assert h.prompt("c1", "hello")["outcome"] == "admitted"
        assert h.written_types() == ["list-ids", "say"]
    else:
        assert h.core.binding_state == "uncertain" and not h.core.admission_open
        h.observe("c1")
        refused(h.call("c1", "takeover", expectedGeneration=h.core.generation), "fenced")
        assert h.written_types() == ["list-ids"]


# ------------------------------------------------------------------------------------ no Pi names in the core

# Pi's commands, its event types and the fields only Pi's records carry. "abort" is not here: it is also the
# chain's own step (the seed's stop record says `phase: abort`), and "prompt" is CHAT-01's method.
PI_NAMES = frozenset({
    "get_state", "clear_queue", "get_entries", "get_tree", "extension_ui_response", *EVENT_MAP,
    "text_delta", "thinking_delta", "stopReason", "assistantMessageEvent", "isStreaming", "leafId", "sessionFile",
})


def test_the_core_writes_no_pi_command_or_event_name() -> None:
    """No Pi command or event name is an exact string literal in `core/`: the core reads its engine only
    through `CoreConfig.engine` (the seam's `EngineRules`). The list is Pi's own tables, so it grows with them."""
    assert {"agent_start", "agent_settled", "message_start", "queue_update", "extension_ui_request"} <= PI_NAMES
    found = [(path.name, node.lineno, node.value)
             for path in sorted(CORE.glob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PI_NAMES]
    assert found == []
    assert PI_RULES.name == "Pi" and TOY_RULES.name == "Toy"
