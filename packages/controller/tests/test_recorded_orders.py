"""The event orders the core tests feed are the ones the real Pi 0.85.1 writes (a core fed a sequence no Pi
writes proves nothing about the real one). Each named shape of the byte-level
harness (core_harness) is checked against a conformance transcript recorded from the real binary
(packages/pi-rpc/tests/data/conformance, made by `mosaic.pi_rpc.testing.conformance`): the same record types
in the same order, responses included, message_update deltas aside (their count follows the model's text).
The one shape no recording holds, N11's "ack then agent_settled with no agent_start", is the fake's
`throw_at_run_start` (pi-rpc test_fake_engine.py::test_N11_...): on the real binary a run throws before it
starts only in another prompt's preflight window, which is the recorded pipelined shape, O3 here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core_harness import REPO, deltas, full_run, run_end, run_start

RECORDINGS = REPO / "packages" / "pi-rpc" / "tests" / "data" / "conformance"


def shape(records: list[dict[str, Any]]) -> list[str]:
    return [("response:" + r["command"]) if r.get("type") == "response" else str(r.get("type"))
            for r in records if r.get("type") != "message_update"]


def recorded(name: str) -> list[str]:
    data = json.loads((RECORDINGS / f"{name}.json").read_text())
    return shape(data["transcript"]["records"])


def ack() -> dict[str, Any]:
    return {"type": "response", "command": "prompt", "success": True}


def answer(command: str) -> dict[str, Any]:
    return {"type": "response", "command": command, "success": True}


# name -> (the recording, where in it the shape starts, the harness's records)
SHAPES: dict[str, tuple[str, int, list[dict[str, Any]]]] = {
    # A plain turn (FACTS Part 2 B): what `Harness.turn` and `full_run` feed after the ack.
    "plain-turn": ("text-turn", 0, [ack(), *full_run("Say hello")]),
    # A run's start and the get_state written after the ack (FACTS a5): `Harness.turn`, N9, N4.
    "run-start-and-probe": ("slow-abort", 0, [ack(), *run_start("SLOW stream please"), answer("get_state")]),
    # An abort ends the run, then Pi answers it (waitForIdle; FACTS Part 2 D): `aborted` in test_r31.
    "aborted-run-end": ("slow-abort", 10, [*run_end("tick00 ", "aborted"), answer("abort")]),
    # The losing settle of the preflight window, right after the other run's agent_start (FACTS Part 2 F):
    # test_r31's O3 recorded order.
    "losing-settle": ("pipelined-prompts", 3, [{"type": "agent_start"}, {"type": "agent_settled"},
                                               *run_start("PIPE-1 SLOW")[1:]]),
    # An extension command: its notify, the ack, and no run (FACTS G1): N5's shape.
    "handled-without-run": ("prefixes-and-separators", 0, [
        {"type": "extension_ui_request", "method": "notify"}, ack(), answer("get_state")]),
    # A clear: Pi's empty queue_update before the answer (FACTS Part 2 D; rpc.md 137-158): H10's O5 test.
    "clear": ("queue-clear-abort", 11, [{"type": "queue_update", "steering": [], "followUp": []},
                                        answer("clear_queue")]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_harness_shape_is_the_order_the_real_pi_recorded(name: str) -> None:
    recording, start, records = SHAPES[name]
    mine = shape(records)
    assert recorded(recording)[start:start + len(mine)] == mine


def test_the_harness_deltas_are_message_updates_only() -> None:
    # They are left out of the comparison: every one of them must be a message_update.
    assert {r["type"] for r in deltas("a", "b")} == {"message_update"}
