"""Pi's dialogs answered as an opt-in (issue 33, the brief's I2 after C-2: §7 P1-P6, §5 H5-H8).

Every engine record fed here is one the real Pi 0.85.1 wrote, in its order: the runs of pi-rpc's dialog
conformance goldens (`packages/pi-rpc/tests/data/conformance/dialog-*.json`, recorded from the sealed Pi with
the fixture extension), their placeholders made concrete. The controller's own commands and their answers
(prompt ack, get_state, clear_queue, abort) are placed where the goldens place them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core_harness import REPO, Harness, queues, refused, run_start, state

from mosaic.controller.core import CoreConfig

GOLDENS = REPO / "packages" / "pi-rpc" / "tests" / "data" / "conformance"
DATA = Path(__file__).resolve().parent / "data"


def _concrete(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _concrete(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    if value == "<ts>":
        return 1765000000000
    if value == "<usage>":
        return {"input": 0, "output": 0, "totalTokens": 0}
    if value == "<partial>":
        return []
    if isinstance(value, str) and value.startswith("<id:"):
        return f"id-{value[4:-1]}"
    return value


def golden_run(name: str, index: int = 0) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The `index`-th run of golden `name` as Pi wrote it: (agent_start .. the dialog request, the rest ..
    agent_settled), no responses (the controller's commands are answered by the test)."""
    records = json.loads((GOLDENS / f"{name}.json").read_text(encoding="utf-8"))["transcript"]["records"]
    runs: list[list[dict[str, Any]]] = []
    for record in records:
        if record.get("type") == "agent_start":
            runs.append([])
        if runs and record.get("type") != "response" and (not runs[-1] or runs[-1][-1]["type"] != "agent_settled"):
            runs[-1].append(_concrete(record))
    run = runs[index]
    cut = next(i for i, r in enumerate(run) if r["type"] == "extension_ui_request") + 1
    return run[:cut], run[cut:]


def asked(h: Harness, name: str, index: int = 0, conn: str = "c1") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The controller's prompt runs up to Pi's dialog request (the golden's order): the request and the rest."""
    before, after = golden_run(name, index)
    text = before[2]["message"]["content"][0]["text"]
    h.prompt(conn, text)
    h.respond("prompt")
    h.engine(*before[:3])
    h.respond("get_state", data=state(True))
    h.engine(*before[3:])
    return before[-1], after


def through(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The records up to and including the first of type `kind`."""
    return records[:next(i for i, r in enumerate(records) if r["type"] == kind) + 1]


def ui_responses(h: Harness) -> list[dict[str, Any]]:
    return [r for r in h.written() if r["type"] == "extension_ui_response"]


def decisions(h: Harness, conn: str = "o") -> list[dict[str, Any]]:
    return h.clients[conn].records("nativeDecision")


def answering() -> Harness:
    h = Harness(answer_dialogs=True)
    h.observe("o")
    h.controller("c1")
    return h


def approve(h: Harness, decision: str, choice: str, conn: str = "c1", generation: int | None = None) -> Any:
    return h.call(conn, "approval", generation=h.core.generation if generation is None else generation,
                  decision=decision, choice=choice)


# -- off by default: P3 byte for byte ---------------------------------------------------------------------


def _p3_scenario(h: Harness) -> None:
    """Every kind of dialog the goldens hold, as Pi asks it, then the run's end, an interrupt and a force stop."""
    h.observe("o")
    h.controller("c1")
    for name, index in (("dialog-confirm-answers", 0), ("dialog-select-answers", 0),
                        ("dialog-input-editor-answers", 0), ("dialog-timeouts", 0)):
        _, after = asked(h, name, index)
        h.engine(*after)
    h.call("c1", "approval", generation=h.core.generation, decision="d1", choice="confirm")
    h.engine(*golden_run("dialog-interrupt-pending")[0][:1])
    h.call("c1", "interrupt", generation=h.core.generation)
    h.respond("clear_queue", data=queues())
    h.respond("abort")


def _scrub(value: Any) -> Any:
    """The records with the test process's own ids left out (they differ from run to run)."""
    if isinstance(value, dict):
        return {k: "<id>" if k in ("pid", "uid", "gid") else _scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def test_P3_off_by_default_the_observer_sees_todays_records_and_events_byte_for_byte() -> None:
    """The option's default is off, and off is P3 exactly: the records and events an observer saw, and the
    bytes Pi got, are those the controller produced before issue 33 (`data/p3-before-issue-33.json`, made by
    running `_p3_scenario` on commit 188d97f, the parent of this work)."""
    assert CoreConfig.__dataclass_fields__["answer_dialogs"].default is False
    h = Harness()
    _p3_scenario(h)
    seen = {"observer": h.clients["o"].notes, "controller": h.clients["c1"].notes,
            "replies": {str(k): v for k, v in h.clients["c1"].replies.items()},
            "engine": bytes(h.engine_bytes).decode("utf-8")}
    before = json.loads((DATA / "p3-before-issue-33.json").read_text(encoding="utf-8"))
    # The observe reply names the engine since issue 32 (item 7: a client's title says which); not a dialog's
    # doing, so it is left out of the comparison, once checked.
    observes = [r for r in seen["replies"].values() if isinstance(r, dict) and "seam" in r]
    assert observes and all(r.pop("engine") == "Pi" for r in observes)
    assert _scrub(json.loads(json.dumps(seen))) == _scrub(before)
    assert all(d["state"] == "disabled" for d in decisions(h)) and len(decisions(h)) == 4
    assert not ui_responses(h)


# -- on: P1-P6 --------------------------------------------------------------------------------------------


def test_P1_a_confirm_is_answered_with_one_extension_ui_response_with_the_exact_id_and_a_generic_yes_is_refused() -> None:
    h = answering()
    request, after = asked(h, "dialog-confirm-answers")
    (shown,) = decisions(h)
    assert shown["state"] == "open" and shown["native"] == request["id"] and shown["title"] == request["title"]
    assert shown["message"] == request["message"] and shown["choices"] == ["confirm", "decline"]
    assert [c["choice"] for c in shown["refusedChoices"]] == ["cancel"]  # cancel never offered on a confirm
    for generic in ("yes", "Yes", "true", "allow", "cancel", " confirm"):
        assert "P1" in refused(approve(h, shown["nativeDecision"], generic), "decision")["message"]
    assert ui_responses(h) == []
    reply = approve(h, shown["nativeDecision"], "confirm")
    assert reply["decision"]["state"] == "answered" and reply["decision"]["answer"] == "confirm"
    assert ui_responses(h) == [{"type": "extension_ui_response", "id": request["id"], "confirmed": True}]
    h.engine(*after)  # the tool ran with the answer: the decision is settled by native evidence
    assert decisions(h)[-1]["state"] == "settled" and decisions(h)[-1]["how"] == "answered"
    assert len(ui_responses(h)) == 1


def test_P1_a_stop_after_every_decision_was_answered_and_settled_is_resolved() -> None:
    h = answering()
    _, after = asked(h, "dialog-confirm-answers")
    approve(h, decisions(h)[0]["nativeDecision"], "decline")
    assert ui_responses(h)[0]["confirmed"] is False
    h.engine(*through(after, "tool_execution_end"))  # the tool's end settles it; the run goes on
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "resolved"


def test_P2_select_labels_are_exact_and_inert_and_the_answer_is_the_exact_label() -> None:
    h = answering()
    request, after = asked(h, "dialog-select-answers")
    (shown,) = decisions(h)
    labels = ["Allow once", "<i>Deny</i>", "Always \u202ewolla\u202c", "\u001b[2Jclear"]
    assert request["options"] == labels and shown["choices"] == labels and shown["options"] == labels
    assert shown["title"] == "Pick \u202eeno\u202c <i>now</i>"  # markup and bidi controls as Pi sent them
    for near in ("Deny", "Always wolla", "<i>deny</i>", "Not one of the options", "cancel"):
        refused(approve(h, shown["nativeDecision"], near), "decision")
    approve(h, shown["nativeDecision"], "<i>Deny</i>")
    assert ui_responses(h) == [{"type": "extension_ui_response", "id": request["id"], "value": "<i>Deny</i>"}]
    h.engine(*after)
    assert decisions(h)[-1]["state"] == "settled"


def test_P3_with_the_option_on_input_and_editor_stay_disabled_with_a_reason_and_nothing_is_sent() -> None:
    h = answering()
    _, after = asked(h, "dialog-input-editor-answers", 0)
    h.engine(*after)
    shown = decisions(h)
    assert [d["method"] for d in shown] == ["input"] and shown[0]["state"] == "disabled"
    assert "free text" in shown[0]["reason"]
    refused(approve(h, shown[0]["nativeDecision"], "anything"), "decision")
    assert ui_responses(h) == []
    stop = h.call("c1", "force-stop", confirmation=h.confirm("c1"))["stop"]
    assert stop["approvalDisposition"] == "uncertain"  # a disabled dialog: what Pi decided is unknown


def test_P4_a_native_timeout_before_the_answer_is_uncertain_then_resolved_from_native_evidence() -> None:
    """dialog-timeouts: a confirm with timeout 200 ms; Pi writes nothing at its timeout, the tool's end is
    the evidence. Past the timeout (less the margin) the decision is uncertain and a late answer is refused
    (H8); the tool's end settles it (`how: engine`); a stop begun after is resolved."""
    h = answering()
    request, after = asked(h, "dialog-timeouts", 0)
    assert request["timeout"] == 200
    projection = decisions(h)[0]["nativeDecision"]
    h.advance(0.2)
    assert decisions(h)[-1]["state"] == "uncertain" and decisions(h)[-1]["how"] == "timeout"
    assert "H8" in refused(approve(h, projection, "confirm"), "decision")["message"]
    h.engine(*through(after, "tool_execution_end"))  # tool_execution_end: "confirm answered false", Pi's default
    assert decisions(h)[-1]["state"] == "settled" and decisions(h)[-1]["how"] == "engine"
    refused(approve(h, projection, "confirm"), "decision")
    assert ui_responses(h) == []
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "resolved"


def test_H8_an_answer_inside_the_margin_before_the_engines_timeout_is_refused() -> None:
    """The timer has not fired yet, but Pi's own timer started before the controller read the ask: an
    answer within the margin (here a 200 ms select, all of it inside the margin) is refused."""
    h = answering()
    asked(h, "dialog-timeouts", 1)
    projection = decisions(h)[0]["nativeDecision"]
    assert "H8" in refused(approve(h, projection, "Allow once"), "decision")["message"]
    assert ui_responses(h) == [] and decisions(h)[-1]["state"] == "uncertain"


def test_P5_takeover_while_pending_reprojects_the_decision_and_gives_one_native_answer() -> None:
    h = answering()
    request, after = asked(h, "dialog-confirm-answers")
    old = decisions(h)[0]["nativeDecision"]
    h.controller("c2")
    superseded, new = decisions(h)[1:]
    assert superseded["nativeDecision"] == old and superseded["state"] == "superseded"
    assert new["state"] == "open" and new["nativeDecision"] != old and superseded["supersededBy"] == new["nativeDecision"]
    assert new["native"] == superseded["native"] == request["id"]
    approve(h, new["nativeDecision"], "confirm", conn="c2")
    assert ui_responses(h) == [{"type": "extension_ui_response", "id": request["id"], "confirmed": True}]
    h.engine(*after)
    assert decisions(h)[-1]["state"] == "settled"


def test_H5_the_old_controllers_answer_after_a_takeover_is_refused_and_the_old_projection_too() -> None:
    h = answering()
    request, _ = asked(h, "dialog-confirm-answers")
    old = decisions(h)[0]["nativeDecision"]
    stale = h.core.generation
    h.controller("c2")
    new = decisions(h)[-1]["nativeDecision"]
    refused(approve(h, old, "confirm", conn="c1", generation=stale), "generation")
    refused(approve(h, old, "confirm", conn="c1"), "controller")
    assert "H5" in refused(approve(h, old, "confirm", conn="c2"), "decision")["message"]
    assert ui_responses(h) == []
    approve(h, new, "decline", conn="c2")
    assert ui_responses(h) == [{"type": "extension_ui_response", "id": request["id"], "confirmed": False}]


def test_P6_interrupt_while_pending_makes_the_approval_uncertain_not_denied() -> None:
    """dialog-interrupt-pending: the controller's clear_queue and abort while the confirm is pending. Pi
    keeps the dialog pending (the abort waits); the controller sends no answer (no deny, no cancel), the
    decision and the stop's approval are uncertain, and an answer from then on is refused (H8)."""
    h = answering()
    _, after = asked(h, "dialog-interrupt-pending")
    projection = decisions(h)[0]["nativeDecision"]
    stop = h.call("c1", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "uncertain"
    assert decisions(h)[-1]["state"] == "uncertain" and decisions(h)[-1]["how"] == "stop"
    h.respond("clear_queue", data=queues())
    assert "abort" in h.written_types()
    refused(approve(h, projection, "confirm"), "decision")
    assert ui_responses(h) == []  # never denied on the person's behalf
    assert {r["approvalDisposition"] for r in h.clients["o"].records("stop")} == {"uncertain"}


def test_H6_duplicate_identical_answers_give_one_native_response() -> None:
    h = answering()
    _, after = asked(h, "dialog-select-answers")
    projection = decisions(h)[0]["nativeDecision"]
    first = approve(h, projection, "Allow once")
    again = approve(h, projection, "Allow once")
    assert first == again and first["decision"]["answer"] == "Allow once"
    assert len(ui_responses(h)) == 1
    h.engine(*after)
    late = approve(h, projection, "Allow once")  # after the settle: the same answer, reported settled
    assert late["decision"]["state"] == "settled" and late["decision"]["answer"] == "Allow once"
    assert len(ui_responses(h)) == 1


def test_H7_conflicting_answers_with_one_id_the_second_is_refused() -> None:
    h = answering()
    asked(h, "dialog-select-answers")
    projection = decisions(h)[0]["nativeDecision"]
    approve(h, projection, "Allow once")
    assert "H7" in refused(approve(h, projection, "<i>Deny</i>"), "decision")["message"]
    assert ui_responses(h) == [{"type": "extension_ui_response", "id": decisions(h)[0]["native"],
                                "value": "Allow once"}]


def test_H8_an_answer_after_the_native_cancel_is_refused_and_the_state_comes_from_native_evidence() -> None:
    """dialog-interrupt-abortable: the dialog settled at the abort with its default, Pi wrote nothing for it;
    the tool's end is the evidence. The decision is settled by the engine and an answer is refused."""
    h = answering()
    _, after = asked(h, "dialog-interrupt-abortable")
    projection = decisions(h)[0]["nativeDecision"]
    h.call("c1", "interrupt", generation=h.core.generation)
    h.respond("clear_queue", data=queues())
    h.engine(*through(after, "tool_execution_end"))  # tool_execution_end with the default, as Pi wrote it after the abort
    assert decisions(h)[-1]["state"] == "settled" and decisions(h)[-1]["how"] == "engine"
    assert "H8" in refused(approve(h, projection, "Allow once"), "decision")["message"]
    assert ui_responses(h) == []


# -- cost: the settled decisions are never walked (`_dialogs` rule 8) --------------------------------------

SETTLED = 10_000


def test_a_new_decisions_handling_walks_none_of_10000_settled_ones() -> None:
    """Rule 8, counted (not timed): a tool raises 10,000 confirms in turn (each answered before the next, as
    an extension awaiting each does), the tool's end settles them all; from then on every attribute read of
    any of those decisions is counted, and a new prompt's dialog (asked, answered twice, the takeover that
    reprojects it, an answer to an old settled projection, the tool's end, the run's end, then an interrupt
    with its approval disposition) reads none but the one old decision the old projection names."""
    h = answering()
    request, after = asked(h, "dialog-confirm-answers")
    old = decisions(h)[0]["nativeDecision"]
    approve(h, old, "confirm")
    made = [h.core._s.decisions[request["id"]]]
    h.clients["o"].notes.clear()
    for i in range(1, SETTLED):
        native = f"{request['id']}-{i}"
        h.engine({**request, "id": native})
        approve(h, decisions(h)[-1]["nativeDecision"], "confirm")
        made.append(h.core._s.decisions[native])
        h.clients["o"].notes.clear()
    assert len(ui_responses(h)) == SETTLED and all(d.state == "answered" for d in made)
    h.engine(*after)
    assert all(d.state == "settled" and d.how == "answered" for d in made)

    reads = [0]
    kind = type(made[0])

    class Counted(kind):  # type: ignore[misc, valid-type]
        def __getattribute__(self, name: str) -> Any:
            reads[0] += 1
            return object.__getattribute__(self, name)

    for dec in made:
        dec.__class__ = Counted
    request2, after2 = asked(h, "dialog-select-answers")
    projection = decisions(h)[-1]["nativeDecision"]
    h.controller("c2")  # a takeover: rule 4 reprojects the open decision
    projection = decisions(h)[-1]["nativeDecision"]
    approve(h, projection, "Allow once", conn="c2")
    approve(h, projection, "Allow once", conn="c2")
    h.engine(*after2)
    assert decisions(h)[-1]["state"] == "settled" and reads[0] == 0
    assert approve(h, old, "confirm", conn="c2")["decision"]["state"] == "settled"  # H6 on a settled one: found
    found = reads[0]
    assert 0 < found < 100  # that one decision's own fields, nothing more
    h.prompt("c2", "Say hello")
    h.respond("prompt")
    h.engine(*run_start("Say hello"))
    h.respond("get_state", data=state(True))
    stop = h.call("c2", "interrupt", generation=h.core.generation)["stop"]
    assert stop["approvalDisposition"] == "resolved"  # every decision settled: rule 7, from the open ones only
    assert reads[0] == found and ui_responses(h)[-1] == {"type": "extension_ui_response", "id": request2["id"],
                                                         "value": "Allow once"}
