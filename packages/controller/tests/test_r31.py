"""R3-1 (brief §3): dispatched input when a fence lands. N1-N13 on the sans-io core, each landed at its
exact step by deciding what the engine writes and when; every engine byte is checked."""

from __future__ import annotations

import pytest
from core_harness import Harness, deltas, queues, refused, run_end, run_start, state

from mosaic.controller.tables import SLOT_TABLE


def interrupt(h: Harness, conn: str = "c1") -> dict:
    result = h.call(conn, "interrupt", generation=h.core.generation)
    assert isinstance(result, dict), result
    return result["stop"]


def stop_records(h: Harness, conn: str = "c1") -> list[dict]:
    return h.clients[conn].records("stop")


def proofs(h: Harness, conn: str = "c1") -> list[dict]:
    return h.clients[conn].records("turnProof")


def aborted(h: Harness) -> None:
    """The aborted run ends as Pi ends it: the aborted assistant message, agent_end, agent_settled."""
    h.engine(*run_end("tick00 ", "aborted"))


def external_run(h: Harness) -> None:
    h.engine({"type": "agent_start"}, {"type": "turn_start"})


# ------------------------------------------------------------------------------------------ N1, N2

def test_N1_N2_clear_goes_before_abort_a_nonempty_clear_leaves_the_stop_uncertain() -> None:
    h = Harness()
    h.controller()
    external_run(h)  # a run with an extension's follow-up queued
    stop = interrupt(h)
    assert h.written_types() == ["clear_queue"]  # rule 1: admission closed, then clear_queue ...
    h.respond("clear_queue", data=queues(follow_up=["FOLLOWUP-A queued"]))
    assert h.written_types() == ["clear_queue", "abort"]  # ... then abort (N2: abort first is the mutant)
    aborted(h)
    h.respond("abort")
    assert h.written_types() == ["clear_queue", "abort", "clear_queue"]  # the post-settle clear
    h.respond("clear_queue", data=queues())
    final = stop_records(h)[-1]
    assert final["stop"] == stop["stop"] and final["state"] == "uncertain"
    assert final["reason"] == "external-items-removed"  # C-1 interim (rule 3)
    assert not [r for r in stop_records(h) if r["state"] == "reconciled"]  # mutant 26 publishes it
    (proof,) = proofs(h)
    assert proof["removedExternal"] == 1 and proof["nativePending"] == []
    refused(h.prompt("c1", "next"), "fenced")  # prompts refuse
    (removed,) = [e for e in h.evidence if e.kind == "removed-external-items"]
    (item,) = removed.detail["items"]
    assert item["queue"] == "followUp" and item["digest"].startswith("sha256:") and item["bytes"] == 17
    assert not h.core.requests  # no Mosaic receipt changes: the item is never attributed or resent


# ------------------------------------------------------------------------------------------ N3, N4

def test_N3_fence_during_preflight_then_an_error_response_fails_with_the_native_error() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    interrupt(h)
    h.respond("clear_queue", data=queues())
    h.respond("abort")  # Pi was idle: answered at once
    assert h.core.slot is not None  # the slot's preflight is awaited (rule 4), never abandoned
    h.respond("prompt", success=False, error="No API key found for fakeprov.")
    receipt = h.receipt()
    assert receipt["state"] == "failed" and receipt["nativeError"] == "No API key found for fakeprov."
    assert h.core.slot is None
    assert h.written_types() == ["prompt", "clear_queue", "abort", "clear_queue"]
    h.respond("clear_queue", data=queues())
    assert stop_records(h)[-1]["state"] == "reconciled" and h.core.admission_open


@pytest.mark.parametrize("order", ["abort-answered-first", "ack-first"])
def test_N4_preflight_ack_after_the_first_abort_gets_a_second_abort_and_the_turn_is_interrupted(order: str) -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    interrupt(h)
    h.respond("clear_queue", data=queues())
    assert h.written_types() == ["prompt", "clear_queue", "abort"]
    if order == "abort-answered-first":
        h.respond("abort")  # Pi was still in preflight: idle, answered at once
        h.respond("prompt")  # the ack: the run starts now
        h.engine(*run_start("hello"))
    else:
        h.respond("prompt")
        h.engine(*run_start("hello"))
        h.respond("abort")  # answered while a run is active: it was answered before that run began
    # A second cycle: clear then abort (mutant 27 never sends this abort).
    assert h.written_types().count("abort") == 1 and h.written_types()[-1] == "clear_queue"
    h.respond("clear_queue", data=queues())
    assert h.written_types().count("abort") == 2
    assert h.core.admission_open is False
    h.respond("get_state", data=state(True))
    aborted(h)
    h.respond("abort")
    assert h.core.admission_open is False  # waits for the post-settle empty clear (mutant 18 opens here)
    assert h.written_types()[-1] == "clear_queue"
    h.respond("clear_queue", data=queues())
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted"
    final = stop_records(h)[-1]
    assert final["state"] == "reconciled" and h.core.admission_open
    (proof,) = proofs(h)
    assert proof["nativeQueue"] == "cleared" and proof["aborts"] == 2 and proof["cycles"] == 2
    assert proof["slot"] == "preflight"


# ------------------------------------------------------------------------------------------ N5

def test_N5_ack_then_no_run_is_delivery_unknown_handled_without_run_and_nothing_is_resent() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "text an extension input handler takes over")
    h.respond("prompt")
    assert h.written_types() == ["prompt", "get_state"]  # written after the ack was read (FACTS a5)
    h.respond("get_state", data=state(False))  # not streaming, no agent_start between
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "handled-without-run"
    assert h.core.slot is None and h.written_types() == ["prompt", "get_state"]  # nothing resent


def test_N5_a_run_seen_between_ack_and_reply_is_not_handled_without_run() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    h.respond("prompt")
    h.engine(*run_start("hello"))
    h.respond("get_state", data=state(False))  # a settled run may answer false; the agent_start counts
    assert h.receipt()["state"] == "working"


# ------------------------------------------------------------------------------------------ N6, N7

def test_N6_an_extension_queueing_on_every_cycle_is_bounded_at_three_cycles() -> None:
    h = Harness()
    h.controller()
    external_run(h)
    interrupt(h)
    h.respond("clear_queue", data=queues(follow_up=["A"]))
    for n in range(3):
        aborted(h) if n == 0 else h.engine({"type": "agent_start"}, *run_end("", "aborted"))
        h.respond("abort")
        h.respond("clear_queue", data=queues(follow_up=[f"again-{n}"]))
    assert h.written_types().count("abort") == 3
    final = stop_records(h)[-1]
    assert final["state"] == "uncertain" and final["reason"] == "cycles-exhausted"
    assert proofs(h)[-1]["nativeQueue"] == "unknown" and not h.core.admission_open


def test_N7_clear_queue_timeout_sends_no_abort_and_a_force_stop_still_goes() -> None:
    h = Harness()
    h.controller()
    external_run(h)
    interrupt(h)
    h.advance(h.core.bounds.clear + 0.1)  # no response within the bound
    assert "abort" not in h.written_types()  # rule 2 (mutant 19 sends it)
    final = stop_records(h)[-1]
    assert final["state"] == "uncertain" and proofs(h)[-1]["nativeQueue"] == "unknown"
    assert not h.core.admission_open and h.core.binding_state == "uncertain"
    conf = h.confirm("c1")
    result = h.call("c1", "force-stop", confirmation=conf)
    assert isinstance(result, dict) and result["stop"]["kind"] == "force-stop"
    assert len(h.effect("force-stop")) == 1


def test_rule2_a_failed_clear_sends_no_abort() -> None:
    h = Harness()
    h.controller()
    external_run(h)
    interrupt(h)
    h.respond("clear_queue", success=False, error="boom")
    assert h.written_types() == ["clear_queue"]
    assert stop_records(h)[-1]["reason"] == "clear-failed"


# ------------------------------------------------------------------------------------------ N8, N9

def test_N8_prompt_written_just_before_an_external_agent_start_is_refused_by_pi_and_fails() -> None:
    # The brief's order: Pi had started the external run when it read the prompt (agent-session.js 860).
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.engine(*run_start("an extension's message"))  # an external run, read before our answer
    h.respond("prompt", success=False, error="Agent is already processing. Specify streamingBehavior "
                                             "('steer' or 'followUp') to queue the message.")
    receipt = h.receipt()
    assert receipt["state"] == "failed" and receipt["nativeError"].startswith("Agent is already processing")
    assert h.core.slot is None and not h.core.overlaps
    refused(h.prompt("c1", "mine"), "busy")  # the external run still streams; the client keeps the text
    h.engine(*deltas("Hello"), *run_end("Hello"))
    assert h.prompt("c1", "mine")["outcome"] == "admitted"  # an explicit resend, as a new request


def _overlapped(h: Harness, signal: str) -> None:
    """Seed README "Overlap": admission closed, the binding uncertain, the slot's receipt run-overlap."""
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "run-overlap"
    assert [s for s, _ in h.core.overlaps][:1] == [signal]
    assert h.core.slot is None and not h.core.admission_open and h.core.binding_state == "uncertain"
    assert {"overlap", "uncertain"} <= set(h.core.binding_record()["fences"])
    refused(h.prompt("c1", "next"), "fenced")


def test_N8_O3_the_seeds_order_ack_then_another_runs_start_and_user_message_then_the_losing_settle() -> None:
    # Seed README "Run order": the Mosaic ack, another run's agent_start and user message, then the losing
    # Mosaic settle (its _runAgentPrompt threw: FACTS Part 2 F). Never finished (completed).
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.respond("prompt")
    h.engine(*run_start("an extension's message"))
    assert h.receipt()["state"] == "working"  # by order, until the settle shows otherwise
    h.engine({"type": "agent_settled"})  # inside the other run's turn: not its settle
    _overlapped(h, "O3")
    assert h.core.run.active  # the other run streams on; its own settle ends it
    h.respond("get_state", data=state(True))
    h.engine(*deltas("Hello"), *run_end("Hello"))
    assert h.receipt()["state"] == "delivery-unknown" and not h.core.admission_open
    assert h.written_types() == ["prompt", "get_state"]  # nothing written for the overlap


def test_N8_O3_the_recorded_order_the_losing_settle_right_after_agent_start() -> None:
    # The real binary's pipelined-prompts recording: ack, agent_start, agent_settled, turn_start, user ...
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.respond("prompt")
    h.engine({"type": "agent_start"}, {"type": "agent_settled"}, *run_start("PIPE-1 SLOW")[1:])
    _overlapped(h, "O3")


def test_O2_an_ack_read_while_a_run_that_began_during_the_preflight_streams() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.engine(*run_start("an extension's message"))  # began before our ack: another's run
    h.respond("prompt")  # Pi acked ours in that run's preflight window: it can never run
    _overlapped(h, "O2")
    assert h.written_types() == ["prompt"]  # no get_state probe: the outcome is already unknown


def test_O1_a_second_agent_start_inside_a_turn() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.respond("prompt")
    h.engine(*run_start("mine"), {"type": "agent_start"})
    _overlapped(h, "O1")


def test_O6_run_events_with_no_run_active() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "mine")
    h.respond("prompt")
    h.engine({"type": "turn_start"})  # a turn of a run whose agent_start was never read
    _overlapped(h, "O6")


def test_O6_a_continuation_after_agent_end_is_not_an_overlap() -> None:
    # FACTS Part 2 R: agent_end{willRetry}, auto_retry_start, agent_start (a continuation), ..., agent_settled.
    h = Harness()
    h.controller()
    h.prompt("c1", "FAILONCE please")
    h.respond("prompt")
    h.engine(*run_start("FAILONCE please"))
    h.respond("get_state", data=state(True))
    err = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": "500"}
    h.engine({"type": "message_end", "message": err}, {"type": "turn_end", "message": err, "toolResults": []},
             {"type": "agent_end", "messages": [], "willRetry": True},
             {"type": "auto_retry_start", "attempt": 1, "maxAttempts": 3, "delayMs": 2000, "errorMessage": "500"},
             {"type": "agent_start"}, {"type": "turn_start"},
             {"type": "message_start", "message": {"role": "assistant", "content": [], "stopReason": "pending"}},
             *run_end("Hello from the fake model.")[:1], {"type": "auto_retry_end", "success": True, "attempt": 1},
             *run_end("Hello from the fake model.")[1:])
    assert not h.core.overlaps and h.core.admission_open
    assert h.receipt()["state"] == "finished" and h.receipt()["turnState"] == "completed"


def test_N9_O4_an_aborted_run_with_no_stop_in_progress_is_an_overlap_never_a_stop_link() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "SLOW stream please")
    h.respond("prompt")
    h.engine(*run_start("SLOW stream please"), *deltas("tick00 "))
    h.respond("get_state", data=state(True))
    h.engine(*run_end("tick00 ", "aborted"))  # someone else aborted it
    _overlapped(h, "O4")
    assert not h.clients["c1"].records("stop") and not h.clients["c1"].records("turnProof")


def test_N9_O4_an_aborted_after_the_fence_but_before_any_abort_is_the_same_overlap() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "SLOW stream please")
    h.respond("prompt")
    h.engine(*run_start("SLOW stream please"), *deltas("tick00 "))
    h.respond("get_state", data=state(True))
    interrupt(h)
    assert h.written_types()[-1] == "clear_queue"
    h.engine(*run_end("tick00 ", "aborted"))  # aborted, and the chain has written no abort yet
    _overlapped(h, "O4")
    (final,) = [r for r in stop_records(h) if r["state"] != "stopping"]
    assert final["state"] == "uncertain" and final["reason"] == "run-overlap"
    h.respond("clear_queue", data=queues())
    assert "abort" not in h.written_types()  # the stop ended: no abort after an overlap


@pytest.mark.parametrize("same_chunk", [True, False])
def test_H10_O5_input_queued_in_the_chunk_of_the_clears_answer_means_no_abort(same_chunk: bool) -> None:
    # Seed README "Interrupt": the interrupt checks for an overlap again right before its abort, so an O5 in
    # the same chunk as the clear's response means no abort (it would run what was queued: rpc.md 158).
    h = Harness()
    h.controller()
    h.prompt("c1", "SLOW stream please")
    h.respond("prompt")
    h.engine(*run_start("SLOW stream please"), *deltas("tick00 "))
    h.respond("get_state", data=state(True))
    interrupt(h)
    clear = {"id": h.last("clear_queue")["id"], "type": "response", "command": "clear_queue", "success": True,
             "data": queues()}
    queued = {"type": "queue_update", "steering": [], "followUp": ["an extension's follow-up"]}
    if same_chunk:
        h.engine({"type": "queue_update", "steering": [], "followUp": []}, clear, queued)
        assert "abort" not in h.written_types()
        (final,) = [r for r in stop_records(h) if r["state"] != "stopping"]
        assert final["state"] == "uncertain" and final["reason"] == "run-overlap"
        _overlapped(h, "O5")
    else:
        h.engine({"type": "queue_update", "steering": [], "followUp": []}, clear)
        assert h.written_types()[-1] == "abort"  # no overlap in the pause: the abort goes out
        h.engine(queued)  # after the abort was written: rule 5's post-settle clear finds it (N6)
        assert not h.core.overlaps


def test_N9_the_items_run_started_before_the_fence_follows_the_interrupted_turn() -> None:
    h = Harness()
    h.controller()
    h.prompt("c1", "SLOW stream please")
    h.respond("prompt")
    h.engine(*run_start("SLOW stream please"), *deltas("tick00 "))
    h.respond("get_state", data=state(True))
    assert h.receipt()["state"] == "working"
    interrupt(h)
    h.respond("clear_queue", data=queues())
    aborted(h)
    h.respond("abort")
    h.respond("clear_queue", data=queues())
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted"  # never delivery-unknown
    assert proofs(h)[-1]["slot"] == "run-started" and h.core.admission_open


# ------------------------------------------------------------------------------------------ N11, N12, N13

def test_N11_ack_then_the_run_throws_before_any_user_message_is_failed_ack_without_start() -> None:
    # As Pi and the fake write it (pi-rpc test_fake_engine N11): the ack, then agent_settled from the
    # finally (agent-session.js 780-785) and no agent_start: the run threw before it began.
    h = Harness()
    h.controller()
    h.prompt("c1", "hello")
    h.respond("prompt")
    h.engine({"type": "agent_settled"})
    receipt = h.receipt()
    assert receipt["state"] == "failed" and receipt["reason"] == "ack-without-start"
    assert h.core.slot is None and not h.core.overlaps and h.core.admission_open
    h.respond("get_state", data=state(False))  # the probe's answer comes after: it changes nothing
    assert h.receipt()["state"] == "failed"
    assert h.prompt("c1", "again")["outcome"] == "admitted"


def test_N12_input_queued_after_the_final_empty_clear_is_the_next_turn_not_the_stopped_one() -> None:
    h = Harness()
    h.controller()
    external_run(h)
    interrupt(h)
    h.respond("clear_queue", data=queues())
    aborted(h)
    h.respond("abort")
    h.now += 1.0
    h.respond("clear_queue", data=queues())
    (proof,) = proofs(h)
    assert proof["observedAt"] == h.now and proof["nativeQueue"] == "cleared"  # as of the last clear (rule 6)
    h.now += 1.0
    h.engine({"type": "agent_start"})  # an extension queued after that clear: it runs as the next turn
    assert proofs(h) == [proof] and stop_records(h)[-1]["state"] == "reconciled"
    refused(h.prompt("c1", "mine"), "busy")  # a new run, not part of the stopped turn


def test_interrupt_with_no_slot_and_no_run_is_no_turn_and_sets_no_fence() -> None:
    h = Harness()
    h.controller()
    refused(h.call("c1", "interrupt", generation=h.core.generation), "no-turn")
    assert h.core.admission_open and h.engine_bytes == b""


def test_slot_table_is_walked_every_row_is_reached() -> None:
    # Each row of SLOT_TABLE (brief §3 rule 4) is the case a fence sees somewhere in this file's scenarios;
    # here each is produced directly and checked against the table's receipt column.
    seen = {}
    h = Harness(); h.controller()  # noqa: E702
    h.engine(*run_start("an extension's message"))  # no slot: the fence of an interrupt sees "none"
    interrupt(h)
    assert h.core.stop is not None
    seen["none"] = h.core.stop.slot_case
    h = Harness(); h.controller()  # noqa: E702
    h.prompt("c1", "a")
    seen["preflight"] = h.core.slot.case()  # type: ignore[union-attr]
    h.respond("prompt")
    seen["ack-no-run"] = h.core.slot.case()  # type: ignore[union-attr]
    h.engine(*run_start("a"))
    seen["run-started"] = h.core.slot.case()  # type: ignore[union-attr]
    assert seen == {k: k for k in seen}
    assert set(SLOT_TABLE) == {"none", "preflight", "run-started", "ack-no-run", "ack-run-threw", "write-unknown"}
    # ack-run-threw is N11's outcome, write-unknown H19's: both tested by name.
    assert SLOT_TABLE["ack-run-threw"].reason == "ack-without-start"
    assert SLOT_TABLE["write-unknown"].reason == "transport-unknown"
    assert SLOT_TABLE["ack-no-run"].reason == "handled-without-run"


def test_every_overlap_signal_of_the_table_is_landed_by_a_test_named_after_it() -> None:
    # OVERLAP_SIGNALS is data (seed README "Overlap"); each row has a test here that lands its wire order
    # and checks the seed's three consequences (`_overlapped`).
    from mosaic.controller.tables import OVERLAP_SIGNALS

    names = [n for n in globals() if n.startswith("test_")]
    for signal in OVERLAP_SIGNALS:
        assert any(f"_{signal}_" in name for name in names), f"no test lands {signal}"


def test_the_overlap_table_walked_row_by_row_is_the_seeds_O1_to_O6_as_the_readme_table_lists_them() -> None:
    """Seed README "Overlap": an overlap signal (O1-O6) closes admission, makes the binding uncertain and
    settles the slot's receipt run-overlap. OVERLAP_SIGNALS is that list as data (the core judges each signal
    by it): walked row by row, it holds the six signals, each row keyed by its own name with the wire order
    that shows it and why; and the README's table lists exactly those rows. A row lost from the table (say
    O5, H10's input queued in an interrupt's pause) fails here, by name, not as the core's own assert."""
    from pathlib import Path

    from mosaic.controller.tables import OVERLAP_SIGNALS, OverlapSignal

    walked = []
    for name, row in OVERLAP_SIGNALS.items():
        assert isinstance(row, OverlapSignal) and row.signal == name, (name, row)
        assert row.when.strip() and row.why.strip(), name
        walked.append(name)
    assert walked == [f"O{n}" for n in range(1, 7)], f"the table holds {walked}, the seed's O1-O6 are six"
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8").splitlines()
    start = readme.index("| signal | the wire order | why it breaks attribution by order |")
    listed = []
    for text in readme[start + 2:]:
        if not text.startswith("|"):
            break
        listed.append(text.strip("|").split("|")[0].strip())
    assert listed == walked


# ------------------------------------------------------------------- rule 8: the chain's rows, walked

def test_rule8_every_chain_row_names_where_it_leads_and_every_ending_is_a_row() -> None:
    """h11's form: each (step, event) row names the steps its handler may leave the stop in; the settle bound,
    an overlap and a poisoned pipe end any waiting step (done), a superseding force stop keeps the step it
    stood in, a force stop's result ends it; from every waiting step, done can be reached."""
    from typing import get_args

    from mosaic.controller.core import CHAIN_TRANSITIONS, StopStep

    steps = set(get_args(StopStep))
    waiting = {st for st, _ in CHAIN_TRANSITIONS if st != "requested"}
    assert waiting == {"clear", "abort-due", "abort", "preflight-wait", "probe-wait", "post-clear", "slot-wait"}
    for (step, event), row in CHAIN_TRANSITIONS.items():
        assert row.leads_to and row.leads_to <= steps, (step, event)
    for step in waiting:
        for ending in ("settle-timeout", "overlap", "poisoned"):
            assert CHAIN_TRANSITIONS[step, ending].leads_to == {"done"}, (step, ending)
        assert CHAIN_TRANSITIONS[step, "superseded"].leads_to == {step}
    assert CHAIN_TRANSITIONS["requested", "stop-done"].leads_to == {"done"}
    onward = {st: set().union(*(row.leads_to for (s, ev), row in CHAIN_TRANSITIONS.items() if s == st
                                and ev not in ("settle-timeout", "overlap", "poisoned", "superseded")))
              for st in waiting}
    for start in waiting:
        seen, todo = set(), [start]
        while todo:
            st = todo.pop()
            if st not in seen:
                seen.add(st)
                todo.extend(onward.get(st, ()))
        assert "done" in seen, start


def _at(step: str) -> Harness:
    """A harness whose interrupt waits in `step`."""
    h = Harness()
    h.controller()
    if step in ("clear", "abort", "post-clear"):
        external_run(h)
        interrupt(h)
        if step != "clear":
            h.respond("clear_queue", data=queues())
        if step == "post-clear":
            aborted(h)
            h.respond("abort")
    elif step == "preflight-wait":
        h.prompt("c1", "hello")  # written, no answer yet
        interrupt(h)
        h.respond("clear_queue", data=queues())
        h.respond("abort")  # Pi was still in preflight: idle, answered at once
    elif step == "probe-wait":
        h.prompt("c1", "hello")
        h.respond("prompt")  # its probe (get_state) is in flight
        interrupt(h)
        h.respond("clear_queue", data=queues())
        h.respond("abort")
    assert h.core.stop is not None and h.core.stop.step == step, (step, h.core.stop)
    return h


STEPS = ("clear", "abort", "post-clear", "preflight-wait", "probe-wait")


@pytest.mark.parametrize("step", STEPS)
def test_rule8_an_overlap_ends_the_interrupt_in_any_step_uncertain_with_no_further_write(step: str) -> None:
    h = _at(step)
    written = h.written_types()
    if h.core.run.active:
        h.engine({"type": "agent_start"})  # O1: inside the run's turn
    else:
        h.engine({"type": "turn_start"})  # O6: a run event with no run active
    final = stop_records(h)[-1]
    assert (final["state"], final["phase"], final["reason"]) == ("uncertain", "done", "run-overlap")
    assert h.core.stop is None and h.written_types() == written and not h.core.admission_open


@pytest.mark.parametrize("step", ("clear", "post-clear", "probe-wait"))
def test_rule8_a_poisoned_pipe_ends_the_interrupt_in_any_step_uncertain(step: str) -> None:
    h = _at(step)
    h.advance(max(h.core.bounds.clear, h.core.bounds.probe) + 1)  # its command waits past its bound: poisoned
    assert h.core.link.poisoned is not None
    final = stop_records(h)[-1]
    assert (final["state"], final["phase"], final["reason"]) == ("uncertain", "done", "transport-unknown")
    assert h.core.stop is None and h.core.binding_state == "uncertain"


@pytest.mark.parametrize("step", STEPS)
def test_rule8_a_force_stop_supersedes_the_interrupt_in_any_step_whose_record_keeps_its_phase(step: str) -> None:
    h = _at(step)
    interrupted = h.core.stop
    assert interrupted is not None
    cid = h.confirm("c1")
    reply = h.call("c1", "force-stop", confirmation=cid)
    assert isinstance(reply, dict), reply
    superseded = [r for r in stop_records(h) if r["stop"] == interrupted.stop_id][-1]
    assert (superseded["state"], superseded["phase"]) == ("superseded", step)
    assert superseded["supersededBy"] == reply["stop"]["stop"] == h.core.stop.stop_id
    assert reply["stop"]["supersedes"] == interrupted.stop_id and h.core.stop.step == "requested"
