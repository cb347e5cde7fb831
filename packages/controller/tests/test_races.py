"""Control races (brief §5) on the sans-io core, both orders where a race has two; and the stop side the
core owns (K5, K9 at the core; the cohort itself is the lifecycle layer's effect)."""

from __future__ import annotations

import pytest
from core_harness import EXECUTION, Harness, deltas, full_run, queues, refused, run_end, run_start, state

from mosaic.controller.core import EngineEvents
from mosaic.pi_rpc.link import LinkPoisoned


def interrupt(h: Harness, conn: str = "c1") -> object:
    return h.call(conn, "interrupt", generation=h.core.generation)


# ---------------------------------------------------------------------------------------------- H3, H9

@pytest.mark.parametrize("order", ["prompt-first", "takeover-first"])
def test_H3_a_takeover_and_a_prompt_never_dispatch_under_both_controllers(order: str) -> None:
    h = Harness()
    h.controller("a")
    gen = h.core.generation
    h.observe("b")
    if order == "prompt-first":
        assert h.prompt("a", "hello", generation=gen)["outcome"] == "admitted"
        assert isinstance(h.call("b", "takeover", expectedGeneration=gen), dict)
        (request,) = h.core.requests.values()
        assert request.conn == "a" and request.generation == gen  # the receipt keeps the old actor
        assert h.written_types() == ["prompt"]
    else:
        assert isinstance(h.call("b", "takeover", expectedGeneration=gen), dict)
        refused(h.prompt("a", "hello", generation=gen), "generation")
        assert h.engine_bytes == b""


@pytest.mark.parametrize("order", ["interrupt-first", "prompt-first"])
def test_H9_interrupt_racing_a_prompts_dispatch(order: str) -> None:
    h = Harness()
    h.controller()
    h.engine(*full_run("an extension's message"))  # a run that came and went: an idle engine
    if order == "interrupt-first":
        h.engine(*run_start("another extension message"))  # something to interrupt
        assert isinstance(interrupt(h), dict)
        refused(h.prompt("c1", "late"), "fenced")  # before the write: refused
        assert h.written_types() == ["clear_queue"]
    else:
        assert h.prompt("c1", "early")["outcome"] == "admitted"
        assert isinstance(interrupt(h), dict)  # after it: the R3-1 rules (preflight in flight)
        assert h.written_types() == ["prompt", "clear_queue"]
        assert h.core.stop is not None and h.core.stop.slot_case == "preflight"


# ---------------------------------------------------------------------------------------------- H10

@pytest.mark.parametrize("order", ["interrupt-first", "force-first"])
def test_H10_interrupt_and_force_stop_make_one_stop_chain_force_supersedes(order: str) -> None:
    h = Harness()
    h.controller()
    h.engine({"type": "agent_start"})
    if order == "interrupt-first":
        first = interrupt(h)
        assert isinstance(first, dict)
        # The confirmation is asked for while the interrupt runs: it is bound to that stop context (H17).
        force = h.call("c1", "force-stop", confirmation=h.confirm("c1"))
        assert isinstance(force, dict)
        assert force["stop"]["supersedes"] == first["stop"]["stop"]
        superseded = [r for r in h.clients["c1"].records("stop") if r["stop"] == first["stop"]["stop"]][-1]
        assert superseded["state"] == "superseded" and superseded["supersededBy"] == force["stop"]["stop"]
        # The interrupt's clear answer arrives late: the superseded chain sends nothing more.
        h.respond("clear_queue", data=queues())
        assert h.written_types() == ["clear_queue"]
    else:
        assert isinstance(h.call("c1", "force-stop", confirmation=h.confirm("c1")), dict)
        refused(interrupt(h), "fenced")
        assert h.engine_bytes == b""
    assert len(h.effect("force-stop")) == 1


def test_a_second_force_stop_while_one_runs_is_fenced_and_after_uncertain_a_fresh_confirmation_retries() -> None:
    h = Harness()
    h.controller()
    first = h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    assert isinstance(first, dict)
    issued = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.call("c1", "answer-confirmation", confirmation=issued, answer="confirm")
    refused(h.call("c1", "force-stop", confirmation=issued), "fenced")
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="uncertain", reason="containment-not-held")
    assert h.core.binding_state == "uncertain"
    retry = h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    assert isinstance(retry, dict) and len(h.effect("force-stop")) == 2


# ---------------------------------------------------------------------------------------------- H14

def test_H14_late_stdout_of_an_old_engine_is_dropped_by_execution_and_counted() -> None:
    h = Harness()
    h.observe("o")
    h.controller()
    before = len(h.clients["o"].events())
    h.feed(EngineEvents("exec-0", [*_engine_events(h, run_start("old")), *_engine_events(h, deltas("x"))]))
    assert len(h.clients["o"].events()) == before  # never rendered (mutant 4 renders it)
    assert h.core.late_events > 0 and h.core.binding_record()["evidence"]["lateEvents"] == h.core.late_events
    assert [e.kind for e in h.evidence] == ["late-events"]


def _engine_events(h: Harness, records: list[dict]) -> list:
    from mosaic.pi_rpc.link import EngineEvent

    return [EngineEvent(i, r) for i, r in enumerate(records)]


# ---------------------------------------------------------------------------------------------- H17

def test_H17_a_confirmation_is_single_use() -> None:
    h = Harness()
    h.controller()
    conf = h.confirm("c1")
    assert isinstance(h.call("c1", "force-stop", confirmation=conf), dict)
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="uncertain", reason="identity-unavailable")
    refused(h.call("c1", "force-stop", confirmation=conf), "confirmation")  # reused (mutant 8 lets it through)
    assert len(h.effect("force-stop")) == 1


def test_H17_a_confirmation_answered_from_another_connection_is_refused() -> None:
    h = Harness()
    h.controller("a")
    issued = h.call("a", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.observe("b")
    refused(h.call("b", "answer-confirmation", confirmation=issued, answer="confirm"), "confirmation")


def test_H17_a_confirmation_after_the_stop_context_changed_is_refused() -> None:
    h = Harness()
    h.controller()
    h.engine({"type": "agent_start"})
    issued = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.call("c1", "answer-confirmation", confirmation=issued, answer="confirm")
    assert isinstance(interrupt(h), dict)  # a stop started: the context changed
    result = refused(h.call("c1", "force-stop", confirmation=issued), "confirmation")
    assert "context" in result["message"]


def test_H17_cancelled_expired_and_unknown_confirmations_are_refused() -> None:
    h = Harness()
    h.controller()
    issued = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.call("c1", "answer-confirmation", confirmation=issued, answer="cancel")
    refused(h.call("c1", "force-stop", confirmation=issued), "confirmation")
    late = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.call("c1", "answer-confirmation", confirmation=late, answer="confirm")
    h.now += h.core.bounds.confirmation_ttl + 1
    refused(h.call("c1", "force-stop", confirmation=late), "confirmation")
    refused(h.call("c1", "force-stop", confirmation="k999"), "confirmation")
    unanswered = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    refused(h.call("c1", "force-stop", confirmation=unanswered), "confirmation")
    recover = h.confirm("c1", "recover")
    refused(h.call("c1", "force-stop", confirmation=recover), "confirmation")  # another operation
    assert not h.effect("force-stop")


# ---------------------------------------------------------------------------------------------- H19

@pytest.mark.parametrize("how", ["epipe-mid-line", "partial"])
def test_H19_a_broken_write_is_delivery_unknown_the_pipe_is_poisoned_nothing_more_is_written(how: str) -> None:
    h = Harness()
    h.auto_flush = False
    h.controller()
    h.prompt("c1", "x" * 200_000)  # a large line under backpressure
    link = h.core.link
    command = link.next_write()
    assert command is not None
    error = BrokenPipeError(32, "EPIPE") if how == "epipe-mid-line" else None
    h.engine_bytes += command.data[:65536]
    h.feed(EngineEvents(EXECUTION, link.write_done(command, accepted=65536, error=error, now=h.now)))
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "transport-unknown"
    assert h.core.binding_state == "uncertain" and not h.core.admission_open
    refused(h.prompt("c1", "again"), "fenced")
    assert link.next_write() is None and len(h.engine_bytes) == 65536  # no retry, no later write
    assert h.effect("claim-uncertain")


def test_H19_an_ack_read_after_the_pipe_was_poisoned_ends_outcome_unknown_and_writes_nothing() -> None:
    """The slot's prompt is written; an interrupt's clear_queue waits in the outbox past its bound, so the
    pipe is poisoned; then Pi's ack of the prompt is read. Nothing may be written (no get_state probe):
    the receipt ends delivery-unknown (transport-unknown) and the core goes on (the random-interleavings
    test found this raising LinkPoisoned out of the core)."""
    h = Harness()
    h.controller("a")
    h.prompt("a", "hello")
    assert h.written_types()[-1] == "prompt"
    h.auto_flush = False  # the pipe takes nothing more
    assert isinstance(interrupt(h, "a"), dict)
    h.advance(h.core.bounds.clear + 1)
    assert h.core.link.poisoned is not None and h.core.binding_state == "uncertain"
    written = bytes(h.engine_bytes)
    try:
        h.respond("prompt")
    except LinkPoisoned as exc:
        pytest.fail(f"the core raised {exc!r} on an ack read after the poison: it must go on, writing nothing")
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "transport-unknown"
    assert h.core.slot is None and h.core.link.next_write() is None and bytes(h.engine_bytes) == written
    refused(h.prompt("a", "again"), "fenced")


# ---------------------------------------------------------------------------------------------- K9, K5

def test_K9_an_interrupt_that_never_settles_stays_uncertain_takeover_refused_force_stop_available() -> None:
    h = Harness()
    h.controller("a")
    h.engine(*run_start("x"))
    assert isinstance(interrupt(h, "a"), dict)
    h.respond("clear_queue", data=queues())
    assert h.written_types()[-1] == "abort"
    h.advance(h.core.bounds.settle + 0.1)  # the run never settles, abort is never answered
    stops = h.clients["a"].records("stop")
    assert stops[-1]["state"] == "uncertain" and stops[-1]["reason"] == "never-settled"
    h.observe("b")
    refused(h.call("b", "takeover", expectedGeneration=h.core.generation), "fenced")
    assert isinstance(h.call("a", "force-stop", confirmation=h.confirm("a")), dict)


def test_recovery_control_when_the_controller_is_gone_and_fenced() -> None:
    h = Harness()
    h.controller("a")
    h.engine({"type": "agent_start"})
    interrupt(h, "a")
    h.advance(h.core.bounds.clear + 0.1)  # uncertain
    h.observe("b")
    refused(h.call("b", "acquire-recovery-control"), "controller-present")
    h.disconnect("a")
    got = h.call("b", "acquire-recovery-control")
    assert isinstance(got, dict) and got["how"] == "recovery"
    assert isinstance(h.call("b", "force-stop", confirmation=h.confirm("b")), dict)


def test_K5_a_tool_call_open_at_the_stop_is_an_uncertain_effect() -> None:
    h = Harness()
    h.observe("o")
    h.controller()
    h.prompt("c1", "TOOLCALL please run it")
    h.respond("prompt")
    h.engine(*run_start("TOOLCALL please run it"))
    h.respond("get_state", data=state(True))
    h.engine({"type": "tool_execution_start", "toolCallId": "call_fake_2", "toolName": "bash",
              "args": {"command": "sleep 100"}})
    h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    (effect,) = h.effect("force-stop")
    assert effect.payload["openTools"] == {"call_fake_2": "bash"}
    h.finish_effect(effect, state="stopped", proofDigest="sha256:" + "0" * 64)
    (report,) = h.clients["o"].records("effectReport")
    assert report["effects"] == [{"toolCallId": "call_fake_2", "toolName": "bash", "state": "uncertain"}]
    assert report["rollback"] is False and report["network"] == "uncertain"
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "unknown"
    assert h.core.binding_state == "stopped"
    refused(h.prompt("c1", "more"), "fenced")


@pytest.mark.parametrize("stopped", [True, False])
def test_K5_a_tool_call_open_when_the_stop_began_stays_uncertain_after_the_engine_reports_it_ended(
        stopped: bool) -> None:
    # The real Pi handles SIGTERM (the stop's TERM phase) and may report the tool ended before it exits
    # (2 of 34 runs): the call was open when the stop began, so it is an uncertain effect all the same.
    h = Harness()
    h.observe("o")
    h.controller()
    h.prompt("c1", "LONGTOOL please")
    h.respond("prompt")
    h.engine(*run_start("LONGTOOL please"))
    h.respond("get_state", data=state(True))
    h.engine({"type": "tool_execution_start", "toolCallId": "call_fake_2", "toolName": "bash",
              "args": {"command": "sleep 100"}})
    h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    (effect,) = h.effect("force-stop")
    h.engine({"type": "tool_execution_end", "toolCallId": "call_fake_2", "toolName": "bash",
              "result": {"content": [{"type": "text", "text": "Terminated"}]}, "isError": True})
    assert h.core.run.open_tools == {}  # the engine says it ended ...
    h.finish_effect(effect, **({"state": "stopped", "proofDigest": "sha256:" + "0" * 64} if stopped
                               else {"state": "uncertain", "reason": "no-cohort"}))
    (report,) = h.clients["o"].records("effectReport")  # ... it is an uncertain effect all the same (K5)
    assert report["effects"] == [{"toolCallId": "call_fake_2", "toolName": "bash", "state": "uncertain"}]


def test_recover_needs_a_stopped_execution_and_asks_the_lifecycle_layer() -> None:
    h = Harness()
    h.controller()
    refused(h.call("c1", "recover", confirmation=h.confirm("c1", "recover")), "stop-proof")
    h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="stopped")
    conf = h.confirm("c1", "recover")
    assert h.call("c1", "recover", confirmation=conf) is None  # answered when the effect is done
    (rec,) = h.effect("recover")
    h.finish_effect(rec, eligibility={"claim": "claim-x"})
    assert h.clients["c1"].replies[max(h.clients["c1"].replies)] == {"eligibility": {"claim": "claim-x"}}


def test_abort_acknowledgement_and_settle_never_release_or_stop_anything() -> None:
    h = Harness()
    h.controller()
    h.engine(*full_run("x"))  # an external run settles: nothing released, nothing stopped
    assert h.core.binding_state == "active" and not h.effect("force-stop") and not h.effect("claim-uncertain")
    # An aborted run with no stop of ours is an overlap (O4): uncertain, never released, never stopped.
    h.engine(*run_start("y"), *run_end("y", "aborted"))
    assert h.core.binding_state == "uncertain" and not h.effect("force-stop")
    assert [e.payload["reason"] for e in h.effect("claim-uncertain")] == ["run-overlap"]


def test_H17_a_used_confirmation_is_refused_even_when_nothing_else_changed() -> None:
    # recover consumes its confirmation without changing the stop context, so only consumption stops a
    # second use here (brief mutant 8 leaves it answered).
    h = Harness()
    h.controller()
    h.call("c1", "force-stop", confirmation=h.confirm("c1"))
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="stopped")
    conf = h.confirm("c1", "recover")
    assert h.call("c1", "recover", confirmation=conf) is None
    refused(h.call("c1", "recover", confirmation=conf), "confirmation")
    assert len(h.effect("recover")) == 1


def test_K8_a_failed_load_check_hands_over_a_fenced_binding_prompts_refuse_preflight() -> None:
    # The lifecycle's load check (get_state, get_entries since the recorded leaf) failed: admission never opens, the
    # engine stays claimed and contained; force stop is the way on (brief §6 "Pi resume", K8).
    h = Harness(state="uncertain", fences={"preflight": "the engine loaded leaf bbbb0002, not aaaa0001"})
    h.observe("c1")
    refused(h.call("c1", "takeover", expectedGeneration=h.core.generation), "fenced")
    got = h.call("c1", "acquire-recovery-control")
    assert isinstance(got, dict)
    refused(h.prompt("c1", "hello"), "preflight")
    assert h.engine_bytes == b""
    assert isinstance(h.call("c1", "force-stop", confirmation=h.confirm("c1")), dict)


# ------------------------------------------------------------------------------- the force stop's census

def test_a_force_stop_confirmation_waits_for_the_census_and_says_how_many_processes_it_will_kill() -> None:
    """With a cohort to count (the lifecycle's cores), the confirmation is issued only once the census
    effect is back, and its summary carries the unit, the count and how it was taken."""
    h = Harness(census=True, unit="cohort-claim-x.scope")
    h.controller()
    assert h.call("c1", "issue-confirmation", operation="force-stop") is None  # not before the count
    (effect,) = h.effect("census")
    h.finish_effect(effect, members=3, complete=True, detail="counted by the shim, unfrozen, now")
    (reply,) = [r for r in h.clients["c1"].replies.values() if isinstance(r, dict) and "confirmation" in r]
    summary = reply["confirmation"]["summary"]
    # (the harness validates every reply against the control schema)
    assert (summary["unit"], summary["members"], summary["membersComplete"]) == ("cohort-claim-x.scope", 3, True)
    assert "counted" in summary["census"] and "killed" in summary["kills"]


def test_a_census_that_comes_back_after_control_moved_issues_nothing() -> None:
    h = Harness(census=True, unit="cohort-claim-x.scope")
    h.controller("a")
    h.call("a", "issue-confirmation", operation="force-stop")
    h.controller("b")  # b takes control while the cohort is counted
    (effect,) = h.effect("census")
    h.finish_effect(effect, members=1, complete=True, detail="counted")
    answer = list(h.clients["a"].replies.values())[-1]
    assert answer[0] == "refused" and answer[1]["code"] == "controller"
    assert not h.core.confirmations


def test_without_a_cohort_the_summary_says_the_members_are_not_counted() -> None:
    h = Harness()
    h.controller()
    summary = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["summary"]
    assert summary["members"] is None and summary["membersComplete"] is False and "no cohort" in summary["census"]
    assert h.effect("census") == []
