"""The words the terminal shows, as pure functions of the library's values: receipts (never "unsent"),
the status line, the force-stop confirmation and the stop's outcome."""

from __future__ import annotations

from typing import Any

import pytest

from mosaic.controller.client import (
    ClientRefusal,
    ControllerRefusal,
    HistoryItem,
    LiveMessage,
    ReconcileMarker,
    SentRequest,
    ToolRun,
    TranscriptStatus,
)
from mosaic.mediated_terminal import (
    binding_line,
    confirmation_lines,
    item_lines,
    receipt_words,
    request_line,
    status_line,
    stop_words,
)


def request(state: str = "pending", receipt: dict[str, Any] | None = None, **kw: Any) -> SentRequest:
    entry = SentRequest("cr-1", "Say hello", "inc-1", 1, **kw)
    entry.state = state  # type: ignore[assignment]
    entry.receipt = receipt
    return entry


@pytest.mark.parametrize(("state", "receipt", "words"), [
    ("sending", None, "sending"),
    ("pending", {"state": "admitted"}, "sent"),
    ("pending", {"state": "dispatched"}, "sent"),
    ("pending", {"state": "acknowledged"}, "sent"),
    ("pending", {"state": "working"}, "working"),
    ("settled", {"state": "finished", "turnState": "completed"}, "done"),
    ("settled", {"state": "finished", "turnState": "interrupted"}, "done (interrupted)"),
    ("settled", {"state": "failed", "nativeError": "boom"}, "failed: boom"),
    ("settled", {"state": "failed", "reason": "ack-without-start"}, "failed: ack-without-start"),
    ("settled", {"state": "delivery-unknown", "reason": "transport-unknown"}, "outcome unknown (never resent)"),
    ("outcome-unknown", None, "outcome unknown (never resent)"),
    ("outcome-unknown", {"state": "working"}, "outcome unknown (never resent)"),
])
def test_receipt_words(state: str, receipt: dict[str, Any] | None, words: str) -> None:
    assert receipt_words(request(state, receipt)) == words


def test_a_refusal_reads_not_admitted_with_its_code_and_nothing_reads_unsent() -> None:
    refused = request("refused", refusal=ControllerRefusal("controller", "not the controller"))
    assert receipt_words(refused) == "not admitted: controller"
    client = request("refused", refusal=ClientRefusal("channel", "not connected"))
    assert receipt_words(client) == "not admitted: channel"
    for state in ("sending", "pending", "settled", "refused", "outcome-unknown"):
        for receipt in (None, {"state": "admitted"}, {"state": "delivery-unknown"}):
            assert "unsent" not in receipt_words(request(state, receipt))


def test_a_request_line_is_inert_and_cut() -> None:
    entry = SentRequest("cr-2", "\x1b[2J" + "x" * 100, "inc-1", 1)
    line = request_line(entry)
    assert line.startswith('prompt "\\x1b[2J') and "..." in line and "\x1b" not in line


def status(**kw: Any) -> TranscriptStatus:
    base: dict[str, Any] = {
        "connected": True, "role": "observer", "generation": 3, "incarnation": "inc-0123456789abcdef",
        "binding_state": "active", "engine_state": "idle", "admission": "open", "fences": (),
        "unknown_native_events": 2, "late_events": 0, "dialogs": 0, "reconciling": False, "reading": False}
    base.update(kw)
    return TranscriptStatus(**base)


def test_the_status_line_names_role_generation_incarnation_engine_unknown_events_and_markers() -> None:
    assert status_line(status()) == ("observer | generation 3 | incarnation inc-01234567 | engine idle | "
                                     "unknown events 2 | markers none")
    stopping = status(role="controller", engine_state="stopping", binding_state="uncertain",
                      admission="closed", fences=("force-stop",), reconciling=True)
    line = status_line(stopping)
    assert line.startswith("controller | generation 3") and "engine stopping" in line
    assert line.endswith("markers reconciling")
    assert binding_line(stopping) == "binding uncertain | admission closed (force-stop)"
    assert binding_line(status()) == ""
    gone = status_line(status(connected=False, role=None), disconnected="shutdown")
    assert gone.startswith("DISCONNECTED (shutdown); was no role")


def test_the_confirmation_names_the_execution_its_scope_and_member_count() -> None:
    lines = confirmation_lines({"confirmation": "k1", "summary": {
        "operation": "force-stop", "execution": "exec-1", "unit": None, "members": None, "openTools": 1,
        "census": "no cohort is counted by this controller",
        "kills": "every process of the execution's engine cgroup (the cohort), frozen then killed"}})
    assert lines[0] == "Force stop execution exec-1?"
    assert lines[2] == "Scope: no cohort attached to this controller (the stop cannot be proven)"
    assert lines[3] == "Processes in it now: not counted (no cohort is counted by this controller)"
    assert lines[4].startswith("Open tool calls: 1")
    named = confirmation_lines({"summary": {"execution": "e", "unit": "cohort-x.scope", "members": 3,
                                            "membersComplete": True}})
    assert named[2] == "Scope: cgroup unit cohort-x.scope" and named[3] == "Processes in it now: 3"
    unstable = confirmation_lines({"summary": {"execution": "e", "unit": "u", "members": 2, "membersComplete": False}})
    assert unstable[3] == "Processes in it now: 2 (two readings disagreed)"


def test_stop_words_show_the_proof_or_why_the_stop_is_uncertain() -> None:
    uncertain = {"kind": "force-stop", "state": "uncertain", "reason": "no-cohort",
                 "detail": "no cohort is attached to this controller"}
    assert stop_words(uncertain) == "force stop: UNCERTAIN (no-cohort): no cohort is attached to this controller"
    stopped = {"kind": "force-stop", "state": "stopped"}
    proof = {"members": [1, 2], "membershipComplete": True, "verification": {"digest": "sha256:" + "a" * 64}}
    assert stop_words(stopped, proof) == ("force stop: stopped with a proof (2 member(s) left at the freeze, killed, "
                                          "membership complete, digest sha256:" + "a" * 64 + ")")
    assert stop_words({"kind": "interrupt", "state": "reconciled"}).startswith("interrupt: reconciled")
    assert stop_words({"kind": "interrupt", "state": "stopping", "phase": "clear"}) == "interrupt: stopping (clear)"


def test_items_render_inert_with_their_roles() -> None:
    hist = HistoryItem("i1", "user", 2, None, "e1", {}, None, ({"kind": "text", "block": 0, "text": "a\nb\x1b"},))
    assert item_lines(hist) == ["user: a", "  b\\x1b"]
    live = LiveMessage("m1", "exec-1", "assistant", (), False, 3, 4)
    assert item_lines(live) == ["assistant (streaming): "]
    tool = ToolRun("t1", "bash", {"command": "ls"}, None, {"content": [{"type": "text", "text": "ok"}]}, False,
                   False, 5, 6)
    assert item_lines(tool) == ['tool bash (done): args {"command": "ls"}', "  result ok"]
    marker = ReconcileMarker(("not-quiet",), 7, True)
    assert item_lines(marker)[0].startswith("~~ reconcile marker (not-quiet, re-reading)")
