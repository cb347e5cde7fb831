"""The fake engine's dialogs on a fixture seat (issue 33), landed at exact steps with the ``dialog`` and
``dialog-settled`` hold points: the engine side of P1, P2, P4, P6 and H6 to H8. The conformance goldens
(``dialog-*``) hold the same behaviours to the real Pi 0.85.1; these tests pin the steps the real binary
cannot be stopped at. No sleeps: every wait is on a record or a notification, with a bound."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc.seal import FIXTURE_EXTENSION_ENV, FIXTURE_EXTENSION_PATH
from mosaic.pi_rpc.testing import WAIT, FakeRun, prepare_fake_engine
from mosaic.pi_rpc.testing.dialogs import DIALOG_TOOL, FIXTURE_DIALOGS, dialog_prompt


def fixture_run(fake_run: Any) -> FakeRun:
    run: FakeRun = fake_run(fixture_extension=True)
    return run


def cue(run: FakeRun, cid: str, kind: str, **how: Any) -> dict[str, Any]:
    """Prompt a dialog of ``kind``; return its request."""
    run.send({"id": cid, "type": "prompt", "message": dialog_prompt(kind, **how)})
    return run.wait(type="extension_ui_request", method=kind)


def answer(run: FakeRun, did: str, **fields: Any) -> None:
    run.send({"type": "extension_ui_response", "id": did, **fields})


def tool_text(record: dict[str, Any]) -> str:
    text: str = record["result"]["content"][0]["text"]
    return text


def settles(run: FakeRun, count: int = 1) -> list[dict[str, Any]]:
    """The fake's dialog-settled notifications, once ``count`` have arrived: they come on the control channel,
    which can lag behind the stdout record a test waited for."""
    assert run.ctl is not None
    return run.ctl.wait_all(lambda e: e.get("event") == "dialog-settled", count, WAIT)


@pytest.mark.parametrize("kind", ["confirm", "select", "input", "editor"])
def test_P1_P2_the_fixture_raises_each_kind_with_pis_shape_and_its_exact_labels(fake_run: Any, kind: str) -> None:
    run = fixture_run(fake_run)
    request = cue(run, "p1", kind, timeout=60_000)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in FIXTURE_DIALOGS[kind].items()}
    expected = {"type": "extension_ui_request", "id": request["id"], "method": kind, **fields}
    if kind != "editor":
        expected["timeout"] = 60_000  # the editor takes none (rpc-mode.js 174-192)
    assert request == expected
    assert list(request) == list(expected)  # Pi's key order
    # P2: the labels go out verbatim: bidi controls raw, the escape as JSON writes it, markup untouched.
    line = next(raw for raw in run.proc.lines if '"extension_ui_request"' in raw)
    if kind == "select":
        assert "Always \u202ewolla\u202c" in line and "\\u001b[2Jclear" in line and "<i>Deny</i>" in line
    previous = run.records[-2]
    assert previous["type"] == "tool_execution_start" and previous["toolName"] == DIALOG_TOOL


def test_P1_one_answer_with_the_exact_id_settles_the_dialog_and_the_answer_writes_nothing(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    request = cue(run, "p1", "confirm")
    mark = len(run.records)
    answer(run, request["id"], confirmed=True)
    end = run.wait(type="tool_execution_end")
    assert run.types(mark)[0] == "tool_execution_end"  # nothing between the answer and the tool's end
    assert tool_text(end) == "confirm answered true" and end["isError"] is False
    assert end["result"]["details"] == {}
    run.wait(type="agent_settled")
    assert settles(run) == [{"event": "dialog-settled", "id": request["id"], "method": "confirm",
                             "how": "answered", "value": True}]


@pytest.mark.parametrize(
    ("kind", "response", "handler_got"),
    [
        ("confirm", {"confirmed": False}, "false"),
        ("confirm", {"confirmed": "yes"}, '"yes"'),  # Pi passes any value through: a generic yes is truthy
        ("confirm", {"value": "yes"}, "false"),
        ("confirm", {"cancelled": True, "confirmed": True}, "false"),
        ("confirm", {"cancelled": [], "confirmed": True}, "false"),  # [] is truthy in JavaScript
        ("confirm", {"cancelled": 0, "confirmed": True}, "true"),
        ("select", {"value": "Not one of the options"}, '"Not one of the options"'),
        ("select", {"cancelled": True}, "undefined"),
        ("select", {"confirmed": True}, "undefined"),
        ("select", {"value": None}, "null"),
        ("input", {"value": "typed"}, '"typed"'),
        ("editor", {"value": "a\nb"}, '"a\\nb"'),
        ("editor", {"cancelled": True, "value": "x"}, "undefined"),
    ],
)
def test_the_fake_reads_a_response_as_pi_does(fake_run: Any, kind: str, response: dict[str, Any],
                                               handler_got: str) -> None:
    run = fixture_run(fake_run)
    request = cue(run, "p1", kind)
    answer(run, request["id"], **response)
    assert tool_text(run.wait(type="tool_execution_end")) == f"{kind} answered {handler_got}"


def test_P4_H8_at_a_timeout_nothing_is_written_and_an_answer_at_the_settle_is_ignored(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    assert run.ctl is not None
    run.ctl.hold("dialog-settled")
    request = cue(run, "p1", "select", timeout=50)
    held = run.ctl.wait_held("dialog-settled", WAIT)
    assert held["detail"] == {"id": request["id"], "method": "select", "how": "timeout"}
    mark = len(run.records)
    answer(run, request["id"], value="Allow once")  # lands after the timeout fired, before the tool resumes
    run.ask("s1", "get_state")
    assert run.types(mark) == ["s1"]  # neither the timeout nor the late answer wrote anything
    run.ctl.release("dialog-settled")
    assert tool_text(run.wait(type="tool_execution_end")) == "select answered undefined"
    types = run.types()
    between = types[types.index(request["id"]) + 1:types.index("tool_execution_end")]
    assert between == ["s1"]  # from the request to the tool's end, only the get_state's answer
    assert settles(run) == [{"event": "dialog-settled", "id": request["id"], "method": "select", "how": "timeout"}]
    answer(run, request["id"], value="Allow once")  # and after the tool ended
    run.wait(type="agent_settled")
    run.ask("s2", "get_state")
    assert run.types()[-2:] == ["agent_settled", "s2"]


def test_H6_H7_duplicate_and_conflicting_answers_settle_once_and_the_rest_write_nothing(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    request = cue(run, "p1", "select")
    mark = len(run.records)
    response = {"type": "extension_ui_response", "id": request["id"], "value": "<i>Deny</i>"}
    run.send(response, response, {**response, "value": "Allow once"},
             {"type": "extension_ui_response", "id": "no-such-request", "value": "Allow once"},
             {"type": "extension_ui_response", "value": "Allow once"},
             {"type": "extension_ui_response", "id": 7, "value": "Allow once"})
    assert tool_text(run.wait(type="tool_execution_end")) == 'select answered "<i>Deny</i>"'
    run.wait(type="agent_settled")
    assert len(settles(run)) == 1
    assert not any(r.get("type") == "response" for r in run.records[mark:])  # no answer is ever acknowledged


def test_H8_an_answer_after_a_cancel_is_ignored(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    request = cue(run, "p1", "confirm")
    answer(run, request["id"], cancelled=True)
    answer(run, request["id"], confirmed=True)
    assert tool_text(run.wait(type="tool_execution_end")) == "confirm answered false"
    run.wait(type="agent_settled")
    assert [e["how"] for e in settles(run)] == ["answered"]


def test_the_dialog_hold_point_lands_before_anything_is_registered_or_written(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    assert run.ctl is not None
    run.ctl.hold("dialog")
    run.send({"id": "p1", "type": "prompt", "message": dialog_prompt("confirm")})
    assert run.ctl.wait_held("dialog", WAIT)["detail"] == {"method": "confirm"}
    run.ask("s1", "get_state")
    assert "extension_ui_request" not in run.types()
    assert run.types()[-2:] == ["tool_execution_start", "s1"]
    run.ctl.release("dialog")
    request = run.wait(type="extension_ui_request")
    answer(run, request["id"], confirmed=True)
    assert tool_text(run.wait(type="tool_execution_end")) == "confirm answered true"


def test_P6_an_interrupt_waits_for_a_plain_dialog_and_settles_an_abortable_one_at_once(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    plain = cue(run, "p1", "confirm")
    run.ask("q1", "clear_queue")
    run.send({"id": "a1", "type": "abort"})
    state = run.ask("s1", "get_state")
    assert state["data"]["isStreaming"] is True and "a1" not in run.types()  # the abort waits for the dialog
    answer(run, plain["id"], confirmed=True)
    run.wait(id="a1", type="response")
    end = [r for r in run.records if r.get("type") == "tool_execution_end"][-1]
    assert tool_text(end) == "confirm answered true"  # the late answer still reached the tool
    last = [r["message"] for r in run.records if r.get("type") == "message_end"][-1]
    assert (last["role"], last["stopReason"], last["errorMessage"]) == ("assistant", "error",
                                                                       "This operation was aborted")
    abortable = cue(run, "p2", "select", abortable=True)
    run.ask("q2", "clear_queue")
    run.ask("a2", "abort")  # answered: the abort settled the dialog with its default
    assert [(e["id"], e["how"]) for e in settles(run, 2)][-1] == (abortable["id"], "aborted")
    ends = [r for r in run.records if r.get("type") == "tool_execution_end"]
    assert tool_text(ends[-1]) == "select answered undefined"
    assert [r["type"] for r in run.records if r.get("type") == "extension_ui_request"] == ["extension_ui_request"] * 2


def test_the_editor_ignores_its_timeout_and_the_abort_signal(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    assert run.ctl is not None
    request = cue(run, "p1", "editor", timeout=1, abortable=True)
    assert "timeout" not in request
    run.send({"id": "a1", "type": "abort"})
    run.ask("s1", "get_state")
    assert settles(run, 0) == [] and "a1" not in run.types()
    answer(run, request["id"], value="kept")
    run.wait(id="a1", type="response")
    assert settles(run)[0]["how"] == "answered"


def test_stdin_eof_while_a_dialog_is_pending_exits_zero_and_writes_nothing_more(fake_run: Any) -> None:
    run = fixture_run(fake_run)
    cue(run, "p1", "confirm")
    mark = len(run.records)
    assert run.proc.p.stdin is not None
    run.proc.p.stdin.close()
    assert run.proc.p.wait(WAIT) == 0
    assert run.records[mark:] == []
    lines = [json.loads(x) for x in run.session.read_text().splitlines()]
    assert lines[-1]["message"]["content"][0]["type"] == "toolCall"  # the call has no result on disk


def test_the_cue_without_the_fixture_finds_no_tool_and_raises_no_dialog(fake_run: Any) -> None:
    run = fake_run()
    run.send({"id": "p1", "type": "prompt", "message": dialog_prompt("confirm")})
    end = run.wait(type="tool_execution_end")
    assert end["isError"] is True and tool_text(end) == f"Tool {DIALOG_TOOL} not found"
    run.wait(type="agent_settled")
    assert "extension_ui_request" not in run.types()


@pytest.mark.parametrize("how", ["another-extension", "no-jiti-env", "twice"])
def test_the_fake_refuses_an_extension_the_seal_would_refuse(tmp_path: Path, how: str) -> None:
    setup = prepare_fake_engine(tmp_path / "t", control=False, fixture_extension=True)
    argv, env = list(setup.argv), dict(setup.env)
    if how == "another-extension":
        other = tmp_path / "other.js"
        other.write_bytes(Path(FIXTURE_EXTENSION_PATH).read_bytes())
        argv[argv.index(FIXTURE_EXTENSION_PATH)] = str(other)
    elif how == "no-jiti-env":
        for key in FIXTURE_EXTENSION_ENV:
            del env[key]
    else:
        argv += ["--extension", FIXTURE_EXTENSION_PATH]
    out = subprocess.run(argv, env=env, cwd=setup.cwd, capture_output=True, text=True, timeout=WAIT,
                         input="")
    assert out.returncode == 2, out.stderr
    assert "loads only the fixture extension" in out.stderr
