"""A dialog's answer through the link (issue 33; rule 8 of _link.py): ``send_ui_response`` writes
``{"type": "extension_ui_response", "id": <the dialog's id>, ...}`` under the write rules, and ``written`` is
its last outcome, since Pi never answers it (rpc-mode.js 614-626). The engine side of P1 ("one
extension_ui_response with the exact ID and value"): the core, then the shell against the fake engine with
the fixture extension."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc import EngineLink, LinkCore
from mosaic.pi_rpc.framing import encode_record
from mosaic.pi_rpc.link import (
    UI_RESPONSE,
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LinkPoisoned,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    ProtocolViolation,
)
from mosaic.pi_rpc.testing import WAIT, prepare_fake_engine
from mosaic.pi_rpc.testing.dialogs import dialog_prompt

DIALOG = "6b820d16-61c3-452b-850f-6d86f4a6ce11"


def test_P1_the_answer_is_one_line_with_the_exact_id_and_value_and_written_is_final() -> None:
    core = LinkCore(default_bound=5.0)
    answer = core.send_ui_response(DIALOG, {"confirmed": True}, now=0)
    assert answer.type == UI_RESPONSE and answer.id == DIALOG
    assert answer.data == b'{"type":"extension_ui_response","id":"' + DIALOG.encode() + b'","confirmed":true}\n'
    assert core.next_write() is answer
    assert core.write_done(answer, accepted=len(answer.data), error=None, now=0) == [CommandWritten(answer)]
    assert answer.outcome is CommandOutcome.WRITTEN
    assert core.in_flight == ()  # out of flight: nothing will ever answer it
    # Neither a passing bound nor the end of the output changes it, and the link stays healthy.
    assert core.tick(now=100) == []
    state = core.send({"type": "get_state"}, now=100)
    assert core.next_write() is state
    core.write_done(state, accepted=len(state.data), error=None, now=100)
    events = core.feed(encode_record({"id": state.id, "type": "response", "command": "get_state",
                                      "success": True}), now=101)
    assert events == [OutcomeKnown(state)]
    core.output_ended(now=102)
    assert answer.outcome is CommandOutcome.WRITTEN and answer.unknown_reason is None


def test_the_answer_keeps_the_write_rules_a_partial_write_is_unknown_and_poisons() -> None:
    core = LinkCore()
    answer = core.send_ui_response(DIALOG, {"value": "Allow once"}, now=0)
    behind = core.send({"type": "get_state"}, now=0)
    assert core.next_write() is answer
    events = core.write_done(answer, accepted=5, error=None, now=0)
    assert events[0] == OutcomeUnknown(answer) and isinstance(events[1], Poisoned)
    assert answer.unknown_reason == "partial-write"
    assert behind.outcome is CommandOutcome.NOT_WRITTEN
    with pytest.raises(LinkPoisoned):
        core.send_ui_response(DIALOG, {"value": "Allow once"}, now=1)


def test_an_answer_the_pipe_does_not_take_in_time_is_write_stalled() -> None:
    core = LinkCore()
    answer = core.send_ui_response(DIALOG, {"cancelled": True}, now=0, bound=1.0)
    assert core.next_write() is answer
    events = core.tick(now=2)
    assert events[0] == OutcomeUnknown(answer) and answer.unknown_reason == "write-stalled"


def test_a_response_naming_the_answers_seq_is_a_violation_not_its_acknowledgement() -> None:
    core = LinkCore()
    answer = core.send_ui_response(DIALOG, {"confirmed": False}, now=0)
    assert core.next_write() is answer  # still writing: in flight
    events = core.feed(encode_record({"id": f"m{answer.seq}", "type": "response", "command": "x",
                                      "success": True}), now=0)
    assert isinstance(events[0], ProtocolViolation)
    assert answer.outcome is not CommandOutcome.ACKNOWLEDGED


@pytest.mark.parametrize(("dialog_id", "answer"), [
    ("", {"confirmed": True}), (7, {"confirmed": True}), (DIALOG, {}), (DIALOG, {"id": "other"}),
    (DIALOG, {"type": "get_state"}), (DIALOG, {"confirmed": True, "message": "x"}),
])
def test_send_ui_response_refuses_what_is_not_a_dialog_answer(dialog_id: Any, answer: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        LinkCore().send_ui_response(dialog_id, answer, now=0)


def test_send_still_refuses_the_ui_response_type() -> None:
    with pytest.raises(ValueError, match="send_ui_response"):
        LinkCore().send({"type": UI_RESPONSE, "value": "y"}, now=0)


def test_P1_the_shell_answers_the_fixtures_dialog_and_the_handler_gets_the_value(tmp_path: Path) -> None:
    setup = prepare_fake_engine(tmp_path / "t", control=False, fixture_extension=True)

    async def main() -> tuple[str, list[str]]:
        link = await EngineLink.spawn(setup.argv, env=setup.env, cwd=str(setup.cwd))
        try:
            prompt = await link.prompt(dialog_prompt("select"))
            assert prompt.succeeded
            request = await link.wait_event(
                lambda e: isinstance(e, EngineEvent) and e.type == "extension_ui_request", WAIT)
            assert isinstance(request, EngineEvent)
            answer = link.send_ui_response(request.record["id"], {"value": "<i>Deny</i>"})
            assert await asyncio.wait_for(link.outcome(answer), WAIT) is answer
            assert answer.outcome is CommandOutcome.WRITTEN
            end = await link.wait_event(
                lambda e: isinstance(e, EngineEvent) and e.type == "tool_execution_end", WAIT)
            assert isinstance(end, EngineEvent)
            await link.wait_event(EngineLink.is_event("agent_settled"), WAIT)
            state = await link.request({"type": "get_state"})
            assert state.succeeded and link.core.poisoned is None
            return str(end.record["result"]["content"][0]["text"]), [json.dumps(answer.record)]
        finally:
            await link.aclose()

    text, _ = asyncio.run(main())
    assert text == 'select answered "<i>Deny</i>"'
