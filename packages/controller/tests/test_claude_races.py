"""The brief's §5 control races again, on Claude (issue 32 item 6: "the §5 and §9 fixtures then run again against
the recordings"): the core on `ClaudeRules` fed the lines the real Claude Code 2.1.283 wrote
(fixtures/claude-2.1.283/recordings, `claude_recorded`), every line the core writes checked against the
recorded client line where the recording has one. Each test is named `test_H<n>_claude_...` after the race it
runs; the ones that cannot apply to Claude, and why, are in the controller README "The §5 and §9 fixtures on
Claude". H5-H8 (permission answers) belong to issue 32 item 4, not here.

A race lands at an exact step because the test decides when each recorded line is read. A recorded order is
one the binary wrote with its driver's input at the recorded moments; the core may write its own line earlier
than the recording's driver did (its reads lag the engine's writes), so a recording whose engine read the line
after the point the race needs is that race's order (H3, H9)."""

from __future__ import annotations

from typing import Any

import pytest
from claude_recorded import (
    claude_harness,
    feed,
    feed_each,
    initialized,
    ins,
    is_control,
    outs,
    recording,
    upto,
    wire,
)
from core_harness import EXECUTION, INCARNATION, Harness, refused

from mosaic.claude_rpc.testing.recordings import U1
from mosaic.controller.core import EngineEvents
from mosaic.controller.engines.claude import ClaudeRules
from mosaic.pi_rpc.link import EngineEvent

Record = dict[str, Any]


def _ready(name: str, *uuids: str) -> tuple[Harness, list[Record]]:
    """The core on Claude's rules after the lifecycle's recorded `initialize` of `name`; the rest of it."""
    h = claude_harness(*(uuids or (U1,)))
    return h, initialized(h, recording(name))


def _init_only(h: Harness) -> None:
    """Nothing but the lifecycle's `initialize` reached the engine."""
    assert [r.get("request", {}).get("subtype") for r in h.written()] == ["initialize"]


def _prompt_line(rest: list[Record]) -> tuple[Record, list[Record]]:
    """The recording's first client line (the user message the controller writes) and what follows it."""
    assert rest[0]["dir"] == "in" and rest[0]["msg"]["type"] == "user"
    return rest[0]["msg"], rest[1:]


def _interrupt(h: Harness, conn: str = "c1") -> Any:
    return h.call(conn, "interrupt", generation=h.core.generation)


def _idle_answer(request_id: str) -> Record:
    """The binary's answer to an interrupt read while no turn runs (recordings/sealed-controls r2: both lists
    empty), with the id of the interrupt the core wrote: the chain's abort, answered once the turn ended, and
    its post-settle clear."""
    idle: Record = recording("sealed-controls")[3]["msg"]
    assert idle["response"]["response"] == {"still_queued": [], "cancelled": []}
    return {**idle, "response": {**idle["response"], "request_id": request_id}}


def _finish_chain(h: Harness) -> None:
    """After the interrupted turn's `result`: the chain's abort and its post-settle clear answered as an idle
    binary answers them."""
    for _ in range(2):
        last = h.written()[-1]
        assert last["request"] == {"subtype": "interrupt", "cancel_queued": True}, last
        feed(h, _idle_answer(last["request_id"]))


# ----------------------------------------------------------------------------------------- H1, H2, H4

def test_H1_claude_two_takeovers_with_the_same_expected_generation_one_wins() -> None:
    h, rest = _ready("sealed-text")
    h.observe("a")
    h.observe("b")
    gen = h.core.generation
    first = h.call("a", "takeover", expectedGeneration=gen)
    refused(h.call("b", "takeover", expectedGeneration=gen), "generation")
    assert isinstance(first, dict) and first["generation"] == gen + 1
    assert h.core.controller == "a" and h.core.generation == gen + 1
    _init_only(h)
    line, _ = _prompt_line(rest)
    assert h.prompt("a", "hello text")["outcome"] == "admitted"  # the winner's prompt: the recorded line
    assert h.written()[-1] == line


def test_H2_claude_the_old_controllers_prompt_after_a_takeover_is_refused_with_zero_bytes() -> None:
    h, rest = _ready("sealed-text")
    h.controller("a")
    old = h.core.generation
    h.observe("b")
    assert isinstance(h.call("b", "takeover", expectedGeneration=old), dict)
    refused(h.prompt("a", "hello text", generation=old), "generation")
    _init_only(h)  # zero engine bytes for the refused prompt
    line, after = _prompt_line(rest)
    assert h.prompt("b", "hello text")["outcome"] == "admitted" and h.written()[-1] == line
    feed_each(h, outs(after))
    assert h.receipt()["state"] == "finished" and h.core.requests[h.receipt()["clientRequest"]].conn == "b"


def test_H4_claude_self_takeover_is_refused() -> None:
    h, _ = _ready("sealed-text")
    h.controller("a")
    refused(h.call("a", "takeover", expectedGeneration=h.core.generation), "already-controller")
    _init_only(h)


# ---------------------------------------------------------------------------------------------- H3

@pytest.mark.parametrize("order", ["prompt-first", "takeover-first"])
def test_H3_claude_a_takeover_and_a_prompt_never_dispatch_under_both_controllers(order: str) -> None:
    """sealed-text: prompt first, the user message (the recorded line) is written under a's control and its
    receipt keeps a as its actor through the recorded turn to finished; takeover first, a's prompt is
    refused and nothing but the lifecycle's initialize was written."""
    h, rest = _ready("sealed-text")
    h.controller("a")
    gen = h.core.generation
    h.observe("b")
    line, after = _prompt_line(rest)
    if order == "prompt-first":
        assert h.prompt("a", "hello text", generation=gen)["outcome"] == "admitted"
        assert isinstance(h.call("b", "takeover", expectedGeneration=gen), dict)
        assert h.written()[-1] == line
        feed_each(h, outs(after))
        (request,) = h.core.requests.values()
        assert request.conn == "a" and request.generation == gen  # the receipt keeps the old actor
        assert h.receipt()["state"] == "finished" and h.receipt()["turnState"] == "completed"
        assert [r["type"] for r in h.written()] == ["control_request", "user"]  # one dispatch, a's
    else:
        assert isinstance(h.call("b", "takeover", expectedGeneration=gen), dict)
        refused(h.prompt("a", "hello text", generation=gen), "generation")
        _init_only(h)


# ---------------------------------------------------------------------------------------------- H9

def test_H9_claude_an_interrupt_before_a_prompts_write_refuses_the_prompt_fenced() -> None:
    """sealed-interrupt-no-uuid, the turn the recording's driver started (U1: not the controller's) running:
    the controller interrupts (exactly the recorded `interrupt` with `cancel_queued`); its prompt in the same
    moment is refused `fenced` before anything is written; the recorded rest (the receipt, the interrupted
    turn) and the idle answers to the chain's abort and post-settle clear reconcile the stop, and the prompt
    is admitted after."""
    h, rest = _ready("sealed-interrupt-no-uuid")
    h.controller()
    before, rest = upto(rest, is_control("interrupt"))
    feed_each(h, outs(before))  # queued, started, init of the driver's U1
    assert h.core.run.active and h.core.slot is None
    assert isinstance(_interrupt(h), dict)
    assert h.written()[-1] == rest[0]["msg"]
    refused(h.prompt("c1", "late"), "fenced")  # before the write: refused
    assert [r["type"] for r in h.written()] == ["control_request", "control_request"]
    feed_each(h, outs(rest))
    _finish_chain(h)
    stop = h.clients["c1"].records("stop")[-1]
    assert stop["state"] == "reconciled" and not h.core.overlaps, stop
    assert h.prompt("c1", "after")["outcome"] == "admitted"


def test_H9_claude_an_interrupt_after_a_prompts_write_follows_the_R31_rules() -> None:
    """sealed-interrupt-pending-permission: the prompt is written, then the interrupt before any frame of the
    message was read (the slot in preflight: `slot_case`); the binary read the interrupt once the turn ran
    (the recorded order): the turn ends interrupted, the chain's abort and post-settle clear answered idle, the
    stop reconciled and the receipt finished interrupted. The interrupt read before the turn starts (the
    message cancelled while queued) is no recording's order: `test_claude_fake_engine.py`
    `test_H9_claude_...` derives it from the fake engine."""
    h, rest = _ready("sealed-interrupt-pending-permission")
    h.controller()
    line, after = _prompt_line(rest)
    assert h.prompt("c1", "BASH: touch pending-one")["outcome"] == "admitted"
    assert isinstance(_interrupt(h), dict)  # after the write: the R3-1 rules
    assert h.written()[-2:] == [line, next(m for m in ins(after) if m["type"] == "control_request")]
    assert h.core.stop is not None and h.core.stop.slot_case == "preflight"
    assert h.receipt()["state"] == "dispatched"
    feed_each(h, [m for m in outs(after)])
    _finish_chain(h)
    receipt = h.receipt()
    assert receipt["state"] == "finished" and receipt["turnState"] == "interrupted", receipt
    assert h.clients["c1"].records("stop")[-1]["state"] == "reconciled" and not h.core.overlaps


# ---------------------------------------------------------------------------------------------- H10

@pytest.mark.parametrize("order", ["interrupt-first", "force-first"])
def test_H10_claude_interrupt_and_force_stop_make_one_stop_chain_force_supersedes(order: str) -> None:
    """sealed-interrupt-pending-permission: the controller's turn runs; interrupt first, then force stop: one
    chain, the interrupt superseded, and its receipt read late (the recorded answer) writes nothing more;
    force stop first, the interrupt is refused `fenced` with no line written. One force-stop effect."""
    h, rest = _ready("sealed-interrupt-pending-permission")
    h.controller()
    line, after = _prompt_line(rest)
    h.prompt("c1", "BASH: touch pending-one")
    before, tail = upto(after, is_control("interrupt"))
    feed_each(h, outs(before))
    written = len(h.written())
    if order == "interrupt-first":
        first = _interrupt(h)
        assert isinstance(first, dict) and h.written()[-1] == tail[0]["msg"]
        force = h.call("c1", "force-stop", confirmation=h.confirm("c1"))
        assert isinstance(force, dict) and force["stop"]["supersedes"] == first["stop"]["stop"]
        superseded = [r for r in h.clients["c1"].records("stop") if r["stop"] == first["stop"]["stop"]][-1]
        assert superseded["state"] == "superseded" and superseded["supersededBy"] == force["stop"]["stop"]
        feed_each(h, outs(tail))  # the interrupt's receipt and the interrupted turn, read late
        assert len(h.written()) == written + 1  # the superseded chain wrote no abort
    else:
        assert isinstance(h.call("c1", "force-stop", confirmation=h.confirm("c1")), dict)
        refused(_interrupt(h), "fenced")
        assert len(h.written()) == written
    assert len(h.effect("force-stop")) == 1


# ---------------------------------------------------------------------------------------------- H11

def test_H11_claude_a_controller_that_disconnects_mid_turn_keeps_control_and_the_turn_goes_on() -> None:
    h, rest = _ready("sealed-text")
    h.controller("a")
    _, after = _prompt_line(rest)
    h.prompt("a", "hello text")
    msgs = outs(after)
    feed_each(h, msgs[:3])  # queued, started, init: mid-turn
    h.disconnect("a")
    assert h.core.controller == "a"
    binding = h.core.binding_record()
    assert binding["controllerConnection"] == "a" and binding["controllerConnected"] is False
    feed_each(h, msgs[3:])  # work continues
    assert h.receipt()["state"] == "finished" and h.receipt()["turnState"] == "completed"
    h.observe("b")
    refused(h.prompt("b", "mine now?"), "controller")  # nothing happened automatically
    assert isinstance(h.call("b", "takeover", expectedGeneration=h.core.generation), dict)
    assert not h.effect("claim-uncertain") and h.core.binding_state == "active"


# ---------------------------------------------------------------------------------------- H12, H13

def test_H12_claude_an_exact_retry_after_reconnecting_gets_the_same_receipt_and_no_second_write() -> None:
    h, rest = _ready("sealed-text")
    h.controller("a")
    _, after = _prompt_line(rest)
    first = h.prompt("a", "hello text", crid="req-1")
    feed_each(h, outs(after)[:2])  # queued, started
    h.disconnect("a")
    h.observe("a2")
    again = h.call("a2", "prompt", text="hello text", clientRequestId="req-1", generation=h.core.generation)
    assert again["outcome"] == "duplicate" and again["request"]["request"] == first["request"]["request"]
    assert again["receipt"]["state"] == "working"
    feed_each(h, outs(after)[2:])
    done = h.call("a2", "prompt", text="hello text", clientRequestId="req-1", generation=h.core.generation)
    assert done["outcome"] == "duplicate" and done["receipt"]["state"] == "finished"
    assert [r["type"] for r in h.written()] == ["control_request", "user"]


def test_H13_claude_a_retry_with_the_same_request_id_and_other_text_is_refused() -> None:
    h, rest = _ready("sealed-text")
    h.controller()
    line, _ = _prompt_line(rest)
    h.prompt("c1", "hello text", crid="req-1")
    refused(h.prompt("c1", "hello text!", crid="req-1"), "conflicting-request")
    assert h.written()[1:] == [line]


# ---------------------------------------------------------------------------------------------- H14

def test_H14_claude_late_stdout_of_an_old_engine_is_dropped_by_execution_and_counted() -> None:
    """The recorded turn of sealed-text, as an old execution's output arriving after a replacement: never
    rendered, counted in evidence; the new execution's own turn renders."""
    h, rest = _ready("sealed-text")
    h.observe("o")
    h.controller()
    old = [EngineEvent(i, m) for i, m in enumerate(outs(rest[1:]))]
    h.feed(EngineEvents("exec-0", old))
    assert h.clients["o"].events() == []
    assert h.core.late_events == len(old) and h.core.binding_record()["evidence"]["lateEvents"] == len(old)
    assert [e.kind for e in h.evidence] == ["late-events"] and h.core.execution == EXECUTION
    _, after = _prompt_line(rest)
    h.prompt("c1", "hello text")
    feed_each(h, outs(after))
    assert [e["eventType"] for e in h.clients["o"].events()][-1] == "run-settled"


# ---------------------------------------------------------------------------------------------- H15

def test_H15_claude_a_revoked_connection_is_refused_every_command() -> None:
    h, rest = _ready("sealed-text")
    h.controller("a")
    gen = h.core.generation
    _, after = _prompt_line(rest)
    h.prompt("a", "hello text")
    feed_each(h, outs(after)[:3])  # a turn runs: an interrupt would have something to stop
    h.observe("b")
    h.call("b", "takeover", expectedGeneration=gen)
    refused(h.call("a", "interrupt", generation=gen), "generation")
    refused(h.call("a", "interrupt", generation=h.core.generation), "controller")
    refused(h.call("a", "issue-confirmation", operation="force-stop"), "controller")
    refused(h.prompt("a", "more", generation=h.core.generation), "controller")
    assert [r["type"] for r in h.written()] == ["control_request", "user"]


# ---------------------------------------------------------------------------------------------- H17

def test_H17_claude_a_confirmation_after_the_stop_context_changed_is_refused() -> None:
    """The controller's turn runs (sealed-interrupt-pending-permission); a force-stop confirmation answered,
    then an interrupt starts (the recorded line): the context changed, the confirmation is refused."""
    h, rest = _ready("sealed-interrupt-pending-permission")
    h.controller()
    _, after = _prompt_line(rest)
    h.prompt("c1", "BASH: touch pending-one")
    before, _ = upto(after, is_control("interrupt"))
    feed_each(h, outs(before))
    issued = h.call("c1", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.call("c1", "answer-confirmation", confirmation=issued, answer="confirm")
    assert isinstance(_interrupt(h), dict)
    assert "context" in refused(h.call("c1", "force-stop", confirmation=issued), "confirmation")["message"]
    assert not h.effect("force-stop")


def test_H17_claude_a_confirmation_is_single_use_and_bound_to_its_connection() -> None:
    h, _ = _ready("sealed-text")
    h.controller("a")
    issued = h.call("a", "issue-confirmation", operation="force-stop")["confirmation"]["confirmation"]
    h.observe("b")
    refused(h.call("b", "answer-confirmation", confirmation=issued, answer="confirm"), "confirmation")
    conf = h.confirm("a")
    assert isinstance(h.call("a", "force-stop", confirmation=conf), dict)
    (effect,) = h.effect("force-stop")
    h.finish_effect(effect, state="uncertain", reason="identity-unavailable")
    refused(h.call("a", "force-stop", confirmation=conf), "confirmation")
    assert len(h.effect("force-stop")) == 1
    _init_only(h)


# ---------------------------------------------------------------------------------------------- H18

def test_H18_claude_two_prompts_before_any_native_output_the_second_refuses_busy_one_write() -> None:
    h, rest = _ready("sealed-text")
    h.controller()
    line, after = _prompt_line(rest)
    h.prompt("c1", "hello text")
    refused(h.prompt("c1", "two"), "busy")
    assert h.written()[1:] == [line]
    feed(h, outs(after)[0])  # the `queued` frame: acknowledged, the slot still held
    refused(h.prompt("c1", "two"), "busy")
    assert h.written()[1:] == [line]


# ---------------------------------------------------------------------------------------------- H19

@pytest.mark.parametrize("how", ["epipe-mid-line", "partial"])
def test_H19_claude_a_broken_write_is_delivery_unknown_the_pipe_is_poisoned_nothing_more_is_written(
        how: str) -> None:
    h, _ = _ready("sealed-text")
    h.auto_flush = False
    h.controller()
    h.prompt("c1", "x" * 200_000)  # a large user message under backpressure
    link = wire(h)
    command = link.next_write()
    assert command is not None and command.type == "user"
    error = BrokenPipeError(32, "EPIPE") if how == "epipe-mid-line" else None
    before = len(h.engine_bytes)
    h.engine_bytes += command.data[:65536]
    h.feed(EngineEvents(EXECUTION, link.write_done(command, accepted=65536, error=error, now=h.now)))
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "transport-unknown"
    assert h.core.binding_state == "uncertain" and not h.core.admission_open and link.poisoned is not None
    refused(h.prompt("c1", "again"), "fenced")
    refused(_interrupt(h), "fenced")
    assert link.next_write() is None and len(h.engine_bytes) == before + 65536  # no retry, no later write
    assert h.effect("claim-uncertain")


# ---------------------------------------------------------------------------------------- H21, H22

NEW_TOKEN = "inc-" + "b" * 32


def _restarted() -> tuple[Harness, list[Record]]:
    """The controller restarted after a crash: a new incarnation token and an empty request index, its engine
    resumed (sealed-resume: the recorded `initialize` and the next turn), c1 reconnected and in control."""
    records = recording("sealed-resume")
    stamp = next(m["uuid"] for m in ins(records) if m["type"] == "user")  # the recorded message's uuid
    h = Harness(engine=ClaudeRules(uuids=iter([stamp]).__next__), conversation="claude-conversation",
                incarnation=NEW_TOKEN)
    rest = initialized(h, records)
    assert h.observe("c1")["incarnation"] == NEW_TOKEN
    assert isinstance(h.call("c1", "takeover", expectedGeneration=h.core.generation, incarnation=NEW_TOKEN), dict)
    return h, rest


def test_H21_claude_a_retry_with_the_old_incarnation_token_is_refused_with_no_second_write() -> None:
    old, rest = _ready("sealed-text")
    old.controller()
    old.prompt("c1", "hello text", crid="req-1")
    feed_each(old, outs(rest[1:])[:1])  # dispatched and acknowledged (`queued`); the controller dies here
    assert old.receipt()["state"] == "acknowledged"
    new, _ = _restarted()
    retry = new.call("c1", "prompt", incarnation=INCARNATION, text="hello text", clientRequestId="req-1",
                     generation=new.core.generation)
    refused(retry, "stale-incarnation")
    _init_only(new)  # no second write


def test_H22_claude_after_H21_a_new_request_under_the_new_token_is_admitted() -> None:
    new, rest = _restarted()
    refused(new.call("c1", "prompt", incarnation=INCARNATION, text="hello text", clientRequestId="req-1",
                     generation=new.core.generation), "stale-incarnation")
    line, after = _prompt_line(rest)
    result = new.call("c1", "prompt", incarnation=NEW_TOKEN, text="second turn", clientRequestId="req-2",
                      generation=new.core.generation)
    assert result["outcome"] == "admitted" and new.written()[1:] == [line]
    feed_each(new, outs(after))
    receipt = new.receipt()
    assert receipt["state"] == "finished" and receipt["incarnation"] == NEW_TOKEN


# ------------------------------------------------------------------------------------- the README's table

def test_the_readmes_claude_fixture_table_covers_every_id_and_names_tests_that_exist() -> None:
    """README "The §5 and §9 fixtures on Claude": a row for every H and E id of the brief (H5-H8 as one row,
    item 4's), each naming tests that exist in this directory (`file::name`, named after its id) or saying
    why it does not apply."""
    import re
    from pathlib import Path

    here = Path(__file__).resolve().parent
    readme = (here.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("### The §5 and §9 fixtures on Claude", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    rows = {cells[0]: cells[1] for line in section.splitlines() if line.startswith("| H") or line.startswith("| E")
            for cells in [[c.strip() for c in line.strip()[1:-1].split("|", 1)]]}
    expected = {f"H{n}" for n in range(1, 24) if not 5 <= n <= 8} | {"H5-H8"} | {f"E{n}" for n in range(1, 8)}
    assert set(rows) == expected
    for fixture, where in rows.items():
        tests = re.findall(r"`(tests\w*/test_\w+\.py)::(test_\w+)`", where)
        if not tests:
            assert where.startswith(("does not apply", "issue 32 item 4")), (fixture, where)
            continue
        for file, name in tests:
            assert re.search(rf"^def {name}\(", (here.parent / file).read_text(encoding="utf-8"), re.MULTILINE), \
                (file, name)
            assert name.startswith(f"test_{fixture}_claude_"), name
