"""The words the terminal shows, as pure functions of the library's values: receipts (never "unsent"),
the status line in plain words and the developer fields, the header, the confirmations, the stop's outcome
(with approval uncertain), a Pi dialog's line, the styles of the transcript and its wrapping."""

from __future__ import annotations

from typing import Any

import pytest

from mosaic.controller_client import (
    Block,
    ClientRefusal,
    HistoryItem,
    LiveMessage,
    ReconcileMarker,
    RemoteRefusal,
    SentRequest,
    ToolRun,
    TranscriptStatus,
)
from mosaic.mediated_terminal.render import (
    confirmation_lines,
    details_line,
    dialog_line,
    header_line,
    item_fragments,
    item_lines,
    plain,
    receipt_words,
    request_line,
    status_line,
    stop_words,
    styled,
    wrap,
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
    ("settled", {"state": "delivery-unknown", "reason": "transport-unknown"}, "outcome unknown, check the transcript (never resent)"),
    ("outcome-unknown", None, "outcome unknown, check the transcript (never resent)"),
    ("outcome-unknown", {"state": "working"}, "outcome unknown, check the transcript (never resent)"),
])
def test_receipt_words(state: str, receipt: dict[str, Any] | None, words: str) -> None:
    assert receipt_words(request(state, receipt)) == words


def test_a_refusal_reads_not_admitted_with_its_code_and_nothing_reads_unsent() -> None:
    refused = request("refused", refusal=RemoteRefusal("controller", "not the controller"))
    assert receipt_words(refused) == "not admitted: controller"
    client = request("refused", refusal=ClientRefusal("channel", "not connected"))
    assert receipt_words(client) == "not admitted: channel"
    for state in ("sending", "pending", "settled", "refused", "outcome-unknown"):
        for receipt in (None, {"state": "admitted"}, {"state": "delivery-unknown"}):
            assert "unsent" not in receipt_words(request(state, receipt))


def test_a_request_line_is_inert_and_cut() -> None:
    entry = SentRequest("cr-2", "\x1b[2J" + "x" * 100, "inc-1", 1)
    line = request_line(entry)
    assert line.startswith('prompt "^[[2J') and "..." in line and "\x1b" not in line
    assert request_line(SentRequest("cr-3", "one\ntwo", "inc-1", 1)) == 'prompt "one^Jtwo": sending'


def status(**kw: Any) -> TranscriptStatus:
    base: dict[str, Any] = {
        "connected": True, "role": "observer", "generation": 3, "incarnation": "inc-0123456789abcdef",
        "binding_state": "active", "engine_state": "idle", "admission": "open", "fences": (),
        "unknown_native_events": 2, "late_events": 0, "dialogs": 0, "reconciling": False, "reading": False}
    base.update(kw)
    return TranscriptStatus(**base)


def test_the_status_line_says_in_plain_words_who_controls_what_pi_does_and_what_is_closed() -> None:
    assert status_line(status()) == "Watching (Ctrl-T takes control) · Pi is idle"
    streaming = status(role="controller", engine_state="streaming")
    assert status_line(streaming, running_for=12.7, frame=1) == "You control this conversation · Pi is answering ⠙ 12s"
    stopping = status(role="controller", engine_state="stopping", binding_state="uncertain",
                      admission="closed", fences=("force-stop",), reconciling=True)
    assert status_line(stopping) == ("You control this conversation · Pi is stopping · the binding is uncertain · "
                                     "new prompts are closed (force-stop) · re-reading the history")
    stopped = status(role="controller", engine_state="stopped", binding_state="stopped", admission="closed")
    assert status_line(stopped) == ("You control this conversation · stopped: Ctrl-R recovers (asks first), "
                                    "Ctrl-C quits")
    assert status_line(status(), below=4).endswith(" · scrolled up: 4 new below (PgDn)")
    gone = status_line(status(connected=False, role=None), disconnected="shutdown")
    assert gone == "NOT CONNECTED (shutdown): Ctrl-O reconnects; your draft is kept"


def test_the_details_name_role_generation_incarnation_states_counters_and_the_conversation() -> None:
    assert details_line(status(), reads=3, conversation="pi-abc") == (
        "role observer | generation 3 | incarnation inc-01234567 | binding active | engine idle | admission open | "
        "unknown events 2 | late events 0 | dialogs 0 | markers none | re-reads 3 | conversation pi-abc")


def test_the_header_names_the_conversation_shortened_and_the_execution_as_far_as_they_fit() -> None:
    binding = {"conversation": "pi-" + "3f25b891" * 5, "execution": "exec-1"}
    assert header_line(binding, 80) == "mosaic-terminal · conversation pi-3f25b891… · execution exec-1"
    assert header_line(binding, 50) == "mosaic-terminal · conversation pi-3f25b891…"
    assert header_line(None) == "mosaic-terminal"
    assert header_line({"conversation": "pi-a\nb", "execution": "e"}) == "mosaic-terminal · conversation pi-a^Jb · execution e"


def test_the_header_and_the_status_name_the_engine_the_controller_names() -> None:
    """Issue 32 item 7: the engine's name from the observe reply in the header, and in the status's words;
    Pi when the controller does not say (one from before issue 32 serves Pi only)."""
    binding = {"conversation": "claude-" + "ab" * 20, "execution": "exec-1"}
    assert header_line(binding, 80, "Claude") == "mosaic-terminal · Claude · conversation claude-abab… · execution exec-1"
    assert header_line(None, 80, "Claude\x1b[2J") == "mosaic-terminal · Claude^[[2J"  # inert, as every field
    assert status_line(status(), engine_name="Claude") == "Watching (Ctrl-T takes control) · Claude is idle"
    streaming = status(role="controller", engine_state="streaming")
    assert status_line(streaming, running_for=3.2, engine_name="Claude") == ("You control this conversation · Claude is "
                                                                          "answering ⠋ 3s")


def test_a_dialog_line_shows_its_kind_title_options_and_reason_on_one_line() -> None:
    record = {"type": "nativeDecision", "nativeDecision": "d1", "method": "select", "title": "Pick\none",
              "options": ["a", "b\x1b"], "state": "disabled", "reason": "never answered (P3)"}
    assert dialog_line(record) == ('Pi dialog (select) "Pick^Jone" options [a | b^[]: disabled, not answered here: '
                                   "never answered (P3)")
    assert dialog_line({"method": "editor", "title": None, "state": "disabled", "reason": "r"}) == (
        'Pi dialog (editor) "": disabled, not answered here: r')


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


def test_the_recover_confirmation_says_what_a_recovery_makes() -> None:
    lines = confirmation_lines({"operation": "recover", "summary": {"operation": "recover", "execution": "exec-1",
                                                                    "binding": "stopped"}})
    assert lines[0] == "Recover execution exec-1?" and lines[-1] == "y: recover    n: cancel"
    assert lines[2] == "The execution is stopped now."


def test_stop_words_show_the_proof_or_why_the_stop_is_uncertain() -> None:
    uncertain = {"kind": "force-stop", "state": "uncertain", "reason": "no-cohort",
                 "detail": "no cohort is attached to this controller"}
    assert stop_words(uncertain) == "force stop: UNCERTAIN (no-cohort): no cohort is attached to this controller"
    stopped = {"kind": "force-stop", "state": "stopped"}
    proof = {"members": [1, 2], "membershipComplete": True, "verification": {"digest": "sha256:" + "a" * 64}}
    assert stop_words(stopped, proof) == ("force stop: stopped with a proof (2 member(s) left at the freeze, killed; "
                                          "membership complete; digest sha256:aaaaaaaaaaaa…)")
    empty = {**proof, "members": []}
    assert stop_words(stopped, empty) == ("force stop: stopped with a proof (the cohort was empty at the freeze; "
                                          "membership complete; digest sha256:aaaaaaaaaaaa…)")
    assert stop_words({"kind": "interrupt", "state": "reconciled"}).startswith("interrupt: reconciled")
    assert stop_words({"kind": "interrupt", "state": "stopping", "phase": "clear"}) == "interrupt: stopping (clear)"


def test_a_stop_that_saw_a_dialog_shows_approval_uncertain_as_the_record_says() -> None:
    said = {"kind": "interrupt", "state": "reconciled", "approvalDisposition": "uncertain"}
    uncertain = "; approval uncertain (a Pi dialog was seen during this execution)"
    assert stop_words(said).endswith(uncertain)
    assert stop_words({"kind": "interrupt", "state": "reconciled", "approvalDisposition": "resolved"}) == (
        "interrupt: reconciled (the queue was cleared and the turn ended)")
    absent = {"kind": "force-stop", "state": "uncertain", "reason": "no-cohort"}
    assert stop_words(absent) == "force stop: UNCERTAIN (no-cohort)"  # a record without the field says nothing



def test_on_a_claude_seat_a_dialog_line_and_a_stop_name_the_engine_the_controller_names() -> None:
    """Issue 32 item 7: the notes name the engine the controller's observe reply names, never Pi on a Claude
    seat (the name inert like every field)."""
    record = {"type": "nativeDecision", "nativeDecision": "d1", "method": "can_use_tool",
              "title": "Claude asks to use Bash", "state": "disabled", "reason": "no id to answer"}
    assert dialog_line(record, "Claude") == ('Claude dialog (can_use_tool) "Claude asks to use Bash": disabled, not '
                                             "answered here: no id to answer")
    assert dialog_line(record, "Claude\x1b[2J").startswith("Claude^[[2J dialog (can_use_tool)")
    said = {"kind": "force-stop", "state": "uncertain", "reason": "no-cohort", "approvalDisposition": "uncertain"}
    assert stop_words(said, None, "Claude") == ("force stop: UNCERTAIN (no-cohort); approval uncertain (a Claude "
                                                "dialog was seen during this execution)")
    assert "Pi" not in dialog_line(record, "Claude") + stop_words(said, None, "Claude")

def test_items_render_inert_with_their_roles() -> None:
    hist = HistoryItem("i1", "user", 2, None, "e1", {}, None, ({"kind": "text", "block": 0, "text": "a\nb\x1b"},))
    assert item_lines(hist) == ["user: a", "  b^["]
    live = LiveMessage("m1", "exec-1", "assistant", (), False, 3, 4)
    assert item_lines(live) == ["assistant (streaming): "]
    tool = ToolRun("t1", "bash", {"command": "ls"}, None, {"content": [{"type": "text", "text": "ok"}]}, False,
                   False, 5, 6)
    assert item_lines(tool) == ['tool bash (done): args {"command": "ls"}', "  result ok"]
    marker = ReconcileMarker(("not-quiet",), 7, True)
    assert item_lines(marker)[0].startswith("~~ reconcile marker (not-quiet, re-reading)")


def test_roles_thinking_tools_and_escapes_carry_their_styles() -> None:
    thinking = Block("thinking", "hmm", {})
    text = Block("text", "hi \x1b", {})
    live = LiveMessage("m1", "exec-1", "assistant", (thinking, text), True, 3, 4)
    first, second = item_fragments(live)
    assert first[0] == ("class:label.assistant", "assistant:") and first[-1] == ("class:thinking", "(thinking) hmm")
    assert second == [("", "  "), ("", "hi "), ("class:escape", "^[")]
    user = HistoryItem("i1", "user", 2, None, "e1", {}, None, ({"kind": "text", "block": 0, "text": "x"},))
    assert item_fragments(user)[0][0] == ("class:label.user", "user:")
    tool = ToolRun("t1", "bash", {}, None, None, None, True, 5, 6)
    assert all(style.startswith("class:") for style, _ in item_fragments(tool)[0] if _.strip())
    assert styled("a\u202eb", "class:note.refusal") == [("class:note.refusal", "a"),
                                                        ("class:note.refusal class:escape", "<U+202E>"),
                                                        ("class:note.refusal", "b")]


def test_lines_wrap_at_the_width_at_a_space_with_continuations_indented_and_nothing_lost() -> None:
    line = styled("assistant: one two three four five six seven eight nine ten")
    rows = [plain(r) for r in wrap(line, 20)]
    assert rows == ["assistant: one two ", "  three four five ", "  six seven eight ", "  nine ten"]
    assert all(len(r) <= 20 for r in rows)
    long = [plain(r) for r in wrap(styled("x" * 45), 20)]  # a word longer than a row is broken, not dropped
    assert long == ["x" * 20, "  " + "x" * 18, "  " + "x" * 7]
    wide = [plain(r) for r in wrap(styled("日本語日本語日本語"), 10)]  # two cells each
    assert wide == ["日本語日本", "  語日本語"]
    family = "\U0001f468\u200d\U0001f469"
    joined = [plain(r) for r in wrap(styled("ab " + family * 4), 7)]
    assert all(not r.lstrip().startswith("\u200d") for r in joined)  # a joiner stays with what it joins
    assert "".join(r[2:] if i else r for i, r in enumerate(joined)) == "ab " + family * 4
    assert wrap([], 10) == [[]]


def test_P2_an_answerable_decision_shows_its_choices_numbered_with_their_exact_labels_inert_and_cancel_disabled() -> None:
    """Issue 33 (the controller answers dialogs): the choices' labels exactly as Pi sent them (markup kept,
    bidi and escape controls made visible, never obeyed), each with its number, and the refused cancel with
    why; a disabled dialog's line is as before (P3)."""
    record = {"type": "nativeDecision", "nativeDecision": "d3", "native": "u-1", "method": "select",
              "title": "Pick", "options": ["<i>Deny</i>", "Always \u202ewolla\u202c", "\u001b[2Jclear"],
              "choices": ["<i>Deny</i>", "Always \u202ewolla\u202c", "\u001b[2Jclear"], "state": "open",
              "refusedChoices": [{"choice": "cancel", "reason": "Pi reads it as a timeout"}], "reason": "answer"}
    line = dialog_line(record)
    assert "1: <i>Deny</i>" in line and "3: ^[[2Jclear" in line and "\u202e" not in line and "\x1b" not in line
    assert "(cancel: disabled, Pi reads it as a timeout): open: answer" in line
    answered = dialog_line({**record, "state": "settled", "how": "answered", "answer": "<i>Deny</i>"})
    assert answered.endswith(': settled (answered) answered "<i>Deny</i>": answer')

