"""Claude's overlap table (`CLAUDE_OVERLAP_SIGNALS`, issue 32 item 2) row by row on the recordings, and R3-1's
"nothing queued runs after an interrupt" (item 3) checked against what the binary did after each recorded
interrupt. Each row is raised by the core fed a recording (fixtures/claude-2.1.283/recordings) in which the
controller wrote only its own lines; the recording driver's other lines (another message, another interrupt)
are the input from elsewhere the row is about. O1 and O5 are in `test_claude_engine.py`; O3 cannot be
raised on Claude (its test says why); O6 has no recording of its own (its test says what it is fed)."""

from __future__ import annotations

from typing import Any

import pytest
from claude_recorded import (
    FIXTURES,
    claude_harness,
    feed_each,
    initialized,
    ins,
    outs,
    recording,
    upto,
)
from core_harness import refused

from mosaic.claude_rpc.testing.recordings import U1, U2
from mosaic.controller.engines.claude import CLAUDE_OVERLAP_SIGNALS, read

Record = dict[str, Any]


def _signals(h: Any) -> list[str]:
    return [o[0] for o in h.core.overlaps]


@pytest.mark.parametrize("name", ["sealed-interrupt-no-uuid", "sealed-interrupt-pending-permission"])
def test_claude_O4_a_turn_interrupted_by_someone_else_is_an_overlap(name: str) -> None:
    """The controller's turn (U1) is interrupted by the recording driver's `interrupt`, not the controller's:
    its answer is for a request the controller never wrote (the link is poisoned: a foreign writer), and
    the interrupted turn's user record (`[Request interrupted by user]`, or `... for tool use` when a
    permission request was pending) is O4: the receipt settles delivery-unknown, never finished completed."""
    h = claude_harness(U1)
    rest = initialized(h, recording(name))
    h.controller()
    line = rest[0]["msg"]
    assert h.prompt("c1", line["message"]["content"])["outcome"] == "admitted" and h.written()[-1] == line
    feed_each(h, outs(rest[1:]))
    assert "O4" in _signals(h), h.core.overlaps
    receipt = h.receipt()
    assert receipt["state"] == "delivery-unknown" and receipt["reason"] == "run-overlap", receipt
    assert h.core.binding_state == "uncertain" and not h.core.admission_open
    assert not any(r.get("request", {}).get("subtype") == "interrupt" for r in h.written())


def test_claude_O2_the_prompts_queued_frame_read_while_anothers_turn_runs() -> None:
    """sealed-interrupt-still-queued with the controller as the writer of its second message (U2): the
    controller saw the engine idle and wrote it, but the driver's U1 had started first (the core reads its
    frames after the write); U2's `queued` frame, the prompt's acknowledgement, is read while U1's turn runs:
    O2, the receipt delivery-unknown (the recording shows it then runs after U1, in an order the slot cannot
    attribute)."""
    h = claude_harness(U2)
    records = recording("sealed-interrupt-still-queued")
    rest = initialized(h, records)
    h.controller()
    line = next(m for m in ins(rest) if m["type"] == "user" and m["uuid"] == U2)
    assert h.prompt("c1", line["message"]["content"])["outcome"] == "admitted" and h.written()[-1] == line
    before, after = upto(rest, lambda m: m.get("type") == "command_lifecycle" and m["command_uuid"] == U2)
    feed_each(h, outs(before))  # U1 queued, started, init: another's turn
    assert h.core.run.active and not h.core.run.ours and not h.core.overlaps
    feed_each(h, outs(after[:1]))
    assert _signals(h) == ["O2"]
    assert h.receipt()["state"] == "delivery-unknown" and h.receipt()["reason"] == "run-overlap"
    refused(h.prompt("c1", "more"), "fenced")


def test_claude_O3_cannot_be_raised_a_result_always_ends_the_turn_it_settles() -> None:
    """O3 (a settle inside a turn) is Pi's losing prompt's `agent_settled`; Claude's only settle is `result`,
    and its reading ends the turn in the same record (`turn_end` with `run_settled`), so the core never reads
    a settle inside a turn. Every `result` of every recording reads so, and every recording fed to the core
    with the controller as its first message's writer raises no O3."""
    results = 0
    for path in sorted((FIXTURES / "claude-2.1.283" / "recordings").glob("sealed-*.jsonl")):
        records = recording(path.stem)
        for msg in outs(records):
            if msg["type"] == "result":
                reading = read(msg)
                assert reading.turn_end and reading.run_settled, path.stem
                results += 1
        first = next((m for m in ins(records) if m["type"] == "user"), None)
        if first is None:
            continue
        h = claude_harness(first["uuid"])
        rest = initialized(h, records)
        h.controller()
        h.prompt("c1", first["message"]["content"])
        feed_each(h, [m for m in outs(rest) if m["type"] != "control_response"])
        assert "O3" not in _signals(h), (path.stem, h.core.overlaps)
    assert results >= 14


def test_claude_O6_a_turns_records_with_no_turn_started() -> None:
    """No recording holds a turn whose `started` frame the binary did not write: a controller reads its
    engine's stdout from the spawn, so it sees every frame. The row is fed the recorded turn of sealed-text
    from its `system/init` on (what a reader that missed the `queued` and `started` frames sees): O6 at the
    first record."""
    h = claude_harness(U1)
    rest = initialized(h, recording("sealed-text"))
    h.observe("o")
    _, turn = upto(rest, lambda m: m.get("type") == "system" and m.get("subtype") == "init")
    feed_each(h, outs(turn[:1]))
    assert _signals(h) == ["O6"] and h.core.binding_state == "uncertain"


def test_claude_every_overlap_row_has_a_recorded_test() -> None:
    """Each row of `CLAUDE_OVERLAP_SIGNALS` is raised (or shown unreachable) by a test named after it."""
    import test_claude_engine

    here = globals()
    named = [n for n in (*here, *vars(test_claude_engine)) if n.startswith("test_claude_O")]
    assert {n.split("_")[2] for n in named} == set(CLAUDE_OVERLAP_SIGNALS)


# ------------------------------------------------------------------------------ R3-1 on the recordings

# recording -> the interrupt was sent with `cancel_queued`
_INTERRUPTS = {
    "sealed-interrupt-still-queued": False,
    "sealed-interrupt-cancel-queued": True,
    "sealed-interrupt-no-uuid": True,
    "sealed-interrupt-pending-permission": True,
    "sealed-allow-then-interrupt": True,
    "sealed-interrupt-then-message": True,
}


@pytest.mark.parametrize("name", sorted(_INTERRUPTS))
def test_claude_R31_what_the_interrupts_receipt_reports_is_what_ran_after_it(name: str) -> None:
    """R3-1 ("nothing queued runs after an interrupt") against each recorded interrupt: the messages whose
    `queued` frame was read before the receipt and were not running are exactly the receipt's `still_queued`
    plus its `cancelled`; those `still_queued` (a plain interrupt's) start after the interrupted turn's
    `result`, those `cancelled` never start; with `cancel_queued` nothing queued before the receipt starts
    after it. A message that starts after it was queued only after the receipt (sealed-interrupt-then-message:
    written after the interrupt): the receipt cannot speak for it, and the core reads that `queued` frame
    as O5 (`test_claude_engine.py::test_claude_O5_...`)."""
    records = recording(name)
    interrupt = next(m for m in ins(records) if m["type"] == "control_request"
                     and m["request"]["subtype"] == "interrupt")
    assert (interrupt["request"].get("cancel_queued") is True) == _INTERRUPTS[name]
    msgs = outs(records)
    at = next(i for i, m in enumerate(msgs) if m["type"] == "control_response"
              and m["response"]["request_id"] == interrupt["request_id"])
    receipt = msgs[at]["response"]["response"]
    ended = next(i for i, m in enumerate(msgs) if i > at and m["type"] == "result")

    def frames(lo: int, hi: int, state: str) -> list[str]:
        return [m["command_uuid"] for m in msgs[lo:hi] if m["type"] == "command_lifecycle" and m["state"] == state]

    running = set(frames(0, at, "started")) - set(frames(0, at, "completed"))
    queued_before = [u for u in frames(0, at, "queued") if u not in running]
    started_after = frames(ended, len(msgs), "started")
    assert sorted(queued_before) == sorted([*receipt["still_queued"], *receipt.get("cancelled", [])]), receipt
    assert started_after == list(receipt["still_queued"]) + [u for u in started_after if u in
                                                             frames(at, len(msgs), "queued")]
    assert not set(receipt.get("cancelled", [])) & set(started_after)
    if _INTERRUPTS[name]:
        assert not set(queued_before) & set(started_after)  # nothing queued before the receipt runs after
    late = [u for u in started_after if u not in queued_before]
    assert (name == "sealed-interrupt-then-message") == bool(late)
