"""The fake engine's behaviours (FACTS.md "What a Python fake engine must mimic"), landed at exact steps
through its named hold points. No sleeps: every wait is on a record or a notification, with a bound.

The conformance goldens (test_conformance_fake.py) pin the same behaviours against the real binary's
transcripts; these tests pin the races the real binary cannot be made to show on demand.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from mosaic.pi_rpc import EngineLink
from mosaic.pi_rpc.internals import GET_TREE_MAX_PATH
from mosaic.pi_rpc.link import CommandOutcome, EngineEvent, OutcomeUnknownError
from mosaic.pi_rpc.seal import build_sealed_argv
from mosaic.pi_rpc.testing import (
    FLUSHED,
    WAIT,
    FakeControl,
    FakeRun,
    Script,
    child_env,
    fake_engine_command,
    prepare_fake_engine,
    prepare_tree,
)
from mosaic.pi_rpc.testing.sessions import session_lines

SID = "0199dddd-4444-7000-8000-000000000004"

ALREADY = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."


def user_texts(run: FakeRun) -> list[str]:
    return [r["message"]["content"][0]["text"] for r in run.records
            if r.get("type") == "message_start" and r["message"]["role"] == "user"]


def file_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


# --------------------------------------------------------------------------------------------------------
# 1, 2, 3, 4: framing, concurrent dispatch, the ack at preflight, the preflight window
# --------------------------------------------------------------------------------------------------------


def test_fake_framing_raw_separators_crlf_input_and_v8_parse_errors(fake_run: Any) -> None:
    run = fake_run(control=False)
    run.send(b'{"id":"p","type":"prompt","message":"a\xe2\x80\xa8b\xe2\x80\xa9c"}\r\n')
    run.wait(type="agent_settled")
    raw = b"".join(line.encode() + b"\n" for line in run.proc.lines)
    assert "\u2028".encode() in raw and b"\\u2028" not in raw and b"\r" not in raw
    assert "a\u2028b\u2029c" in user_texts(run)
    run.send(b"this is not json\n")
    err = run.wait(type="response", command="parse")
    assert err == {"type": "response", "command": "parse", "success": False,
                   "error": "Failed to parse command: Unexpected token 'h', \"this is not json\" is not valid JSON"}
    run.send(b"\n")
    assert run.wait(type="response", command="parse")["error"] == \
        "Failed to parse command: Unexpected end of JSON input"


def test_concurrent_dispatch_get_state_answers_while_a_prompt_is_in_preflight(fake_run: Any) -> None:
    run = fake_run()
    run.ctl.hold("preflight")
    run.send({"id": "p1", "type": "prompt", "message": "Say hello"})
    run.ctl.wait_held("preflight", WAIT)
    state = run.ask("s1", "get_state")
    assert state["data"]["isStreaming"] is False
    assert run.types() == ["s1"]  # answered while the prompt has no ack
    run.ctl.release("preflight")
    assert run.wait(id="p1")["success"] is True
    run.wait(type="agent_settled")


def test_preflight_window_second_prompt_acked_never_runs_spurious_settle(fake_run: Any) -> None:
    """FACTS.md a5 / Part 2 F, landed with the preflight hold: both prompts pass the streaming check, both
    are acked, the second one's run throws, its finally emits agent_settled and clears isStreaming while
    the first run streams, and abort is answered before that run ends."""
    run = fake_run()
    ctl = run.ctl
    ctl.hold("preflight", 2)
    run.send({"id": "pp1", "type": "prompt", "message": "PIPE-1 SLOW"})
    ctl.wait_held("preflight", WAIT)
    run.send({"id": "pp2", "type": "prompt", "message": "PIPE-2 plain"})
    ctl.wait_held("preflight", WAIT)
    ctl.hold("user-message")  # keeps the first run from streaming until the second has settled
    ctl.release("preflight")
    run.wait(id="pp1")
    ctl.wait_held("user-message", WAIT)
    ctl.release("preflight")
    assert run.wait(id="pp2")["success"] is True
    run.wait(type="agent_settled")  # spurious: pp2's run threw
    ctl.release("user-message")
    run.wait(delta="tick00 ")
    assert run.ask("ps2", "get_state")["data"]["isStreaming"] is False  # wrong, as in Pi
    mark = len(run.records)
    run.ask("a3", "abort")
    assert run.types(mark)[0] == "a3"  # acked before the run's agent_end: waitForIdle saw idle
    run.wait(type="agent_end")
    run.wait(type="agent_settled")
    assert user_texts(run) == ["PIPE-1 SLOW"]  # PIPE-2 never ran


def test_N8_run_start_hold_external_run_takes_the_engine_before_the_mosaic_run(fake_run: Any) -> None:
    """N8's wire order (seed README "Run order"): the Mosaic ack, another run's agent_start and user
    message, then the losing Mosaic settle."""
    run = fake_run()
    ctl = run.ctl
    ctl.hold("preflight")
    run.send({"id": "m1", "type": "prompt", "message": "mosaic prompt"})
    ctl.wait_held("preflight", WAIT)
    ctl.hold("run-start")
    ctl.request("inject_prompt", text="EXTERNAL turn")  # an extension's sendUserMessage
    ctl.wait_held("run-start", WAIT)  # the external run holds isStreaming and the agent; no agent_start yet
    ctl.hold("settle")
    ctl.hold("user-message")
    ctl.release("preflight")
    assert run.wait(id="m1")["success"] is True  # acked: its preflight passed before the other run started
    ctl.wait_held("settle", WAIT)  # the Mosaic run threw ("already processing a prompt"): settling
    ctl.release("run-start")
    ctl.wait_held("user-message", WAIT)
    ctl.release("settle")
    run.wait(type="agent_settled")
    ctl.release("user-message")
    run.wait(type="agent_settled")
    assert run.types() == ["m1", "agent_start", "turn_start", "message_start", "message_end", "agent_settled",
                           "message_start", "message_update", "message_update", "message_update",
                           "message_update", "message_update", "message_end", "turn_end", "agent_end",
                           "agent_settled"]
    assert user_texts(run) == ["EXTERNAL turn"]


def test_N8_prompt_written_after_external_run_started_is_refused(fake_run: Any) -> None:
    run = fake_run()
    ctl = run.ctl
    ctl.hold("run-start")
    ctl.request("inject_prompt", text="EXTERNAL turn")
    ctl.wait_held("run-start", WAIT)
    refused = run.ask("m1", "prompt", message="mosaic prompt")  # Pi refuses it (agent-session.js 860)
    assert refused["success"] is False and refused["error"] == ALREADY
    ctl.release("run-start")
    run.wait(type="agent_settled")
    assert user_texts(run) == ["EXTERNAL turn"]


# --------------------------------------------------------------------------------------------------------
# 7, 8, 9: settles, abort, queues
# --------------------------------------------------------------------------------------------------------


def test_N1_external_follow_up_cleared_before_abort_does_not_run(fake_run: Any) -> None:
    run = fake_run()
    run.ask("p1", "prompt", message="SLOW stream please")
    run.wait(delta="tick00 ")
    run.ctl.request("queue", kind="followUp", text="EXTERNAL follow-up")
    cleared = run.ask("q1", "clear_queue")
    assert cleared["data"] == {"steering": [], "followUp": ["EXTERNAL follow-up"]}
    run.ask("a1", "abort")
    assert user_texts(run) == ["SLOW stream please"]
    assert run.ask("s1", "get_state")["data"]["pendingMessageCount"] == 0


def test_N2_abort_before_clear_runs_the_external_follow_up(fake_run: Any) -> None:
    run = fake_run()
    run.ask("p1", "prompt", message="SLOW stream please")
    run.wait(delta="tick00 ")
    run.ctl.request("queue", kind="followUp", text="EXTERNAL follow-up")
    run.ask("a1", "abort")  # abort first: the queued item runs (rpc.md 158)
    assert user_texts(run) == ["SLOW stream please", "EXTERNAL follow-up"]
    ends = [r for r in run.records if r.get("type") in ("agent_end", "agent_settled")]
    assert [r["type"] for r in ends] == ["agent_end", "agent_end", "agent_settled"]  # two agent_end, one settle


def test_abort_takes_a_run_out_of_a_model_chunk_hold(fake_run: Any) -> None:
    run = fake_run()
    run.ctl.hold("model-chunk", -1)
    run.send({"id": "p1", "type": "prompt", "message": "SLOW stream please"})
    run.ctl.wait_held("model-chunk", WAIT)
    run.ask("a1", "abort")
    run.ctl.wait_event(lambda e: e.get("event") == "unheld" and e.get("point") == "model-chunk", WAIT)
    end = next(r for r in run.records if r.get("type") == "message_end" and r["message"]["role"] == "assistant")
    assert end["message"]["stopReason"] == "aborted"
    assert end["message"]["errorMessage"] == "Request was aborted"


def test_failonce_retry_gives_two_agent_end_before_one_settle(fake_run: Any) -> None:
    run = fake_run(settings={"retry": {"baseDelayMs": 1}})
    run.ask("r1", "prompt", message="FAILONCE please")
    run.wait(type="agent_settled")
    kinds = [r["type"] for r in run.records if r["type"] in ("agent_end", "auto_retry_start", "auto_retry_end",
                                                             "agent_settled")]
    assert kinds == ["agent_end", "auto_retry_start", "auto_retry_end", "agent_end", "agent_settled"]
    first_end = next(r for r in run.records if r["type"] == "agent_end")
    assert first_end["willRetry"] is True


# --------------------------------------------------------------------------------------------------------
# The brief's N3, N5, N7, N11 shapes, through the engine link (the link's outcomes against a process)
# --------------------------------------------------------------------------------------------------------


async def _link(tmp: Path, *, seed: str | None = None) -> tuple[EngineLink, FakeControl, Path]:
    setup = prepare_fake_engine(tmp, seed=seed)
    ctl = setup.ctl
    assert ctl is not None
    try:
        link = await EngineLink.spawn(setup.argv, env=setup.env, cwd=str(setup.cwd))
    except BaseException:
        setup.close()
        raise
    try:
        await asyncio.get_running_loop().run_in_executor(None, ctl.accept, WAIT)
    except BaseException:
        await link.aclose()
        setup.close()
        raise
    return link, ctl, setup.session


async def _held(ctl: FakeControl, point: str) -> None:
    await asyncio.get_running_loop().run_in_executor(None, ctl.wait_held, point, WAIT)


def test_N3_preflight_error_is_an_error_response(tmp_path: Path) -> None:
    async def main() -> None:
        link, ctl, _ = await _link(tmp_path)
        try:
            ctl.request("fail_preflight", message="scripted preflight failure")
            p = await link.prompt("hello")
            assert p.outcome is CommandOutcome.ACKNOWLEDGED and not p.succeeded
            assert p.response is not None and p.response["error"] == "scripted preflight failure"
            assert link.core.can_send_prompt()
        finally:
            await link.aclose()
            ctl.close()

    asyncio.run(main())


def test_N5_ack_then_no_run_is_visible_only_through_a_get_state_written_after_the_ack(tmp_path: Path) -> None:
    async def main() -> None:
        link, ctl, _ = await _link(tmp_path)
        try:
            ctl.request("input_handler", action="handled")  # an extension handles the input: no run
            p = await link.prompt("handled by an extension")
            assert p.succeeded
            s = await link.request({"type": "get_state"})
            ev = link.prompt_state(p, s)
            assert ev.is_streaming is False and ev.agent_start_between is False
        finally:
            await link.aclose()
            ctl.close()

    asyncio.run(main())


def test_N7_clear_queue_without_response_is_unknown_and_poisons(tmp_path: Path) -> None:
    async def main() -> None:
        link, ctl, _ = await _link(tmp_path)
        try:
            ctl.hold("clear-queue")
            c = link.send({"type": "clear_queue"}, bound=0.3)
            await _held(ctl, "clear-queue")
            with pytest.raises(OutcomeUnknownError):
                await link.outcome(c)
            assert c.unknown_reason == "no-response"
            with pytest.raises(Exception, match="poisoned"):
                link.send({"type": "abort"})  # N7: no abort after a clear timeout; the link cannot write it
        finally:
            await link.aclose()
            ctl.close()

    asyncio.run(main())


def test_N11_ack_then_run_throws_settles_without_user_entry(tmp_path: Path) -> None:
    async def main() -> None:
        link, ctl, session = await _link(tmp_path, seed=FLUSHED)
        try:
            before = session.read_bytes()
            ctl.request("throw_at_run_start", message="boom before the user message")
            p = await link.prompt("this run throws")
            assert p.succeeded
            ev = await link.wait_event(EngineLink.is_event("agent_settled"), WAIT)
            assert isinstance(ev, EngineEvent)
            s = await link.request({"type": "get_state"})
            assert link.prompt_state(p, s).agent_start_between is False
            assert session.read_bytes() == before  # no user entry on disk
        finally:
            await link.aclose()
            ctl.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------------------------
# 13: persistence timing; 18: no entry ids on the stream
# --------------------------------------------------------------------------------------------------------


def test_persistence_the_file_gets_ahead_of_stdout(fake_run: Any) -> None:
    run = fake_run(seed=FLUSHED)
    run.ctl.hold("stdout", -1)
    run.send({"id": "p1", "type": "prompt", "message": "Say hello"})
    while True:
        held = run.ctl.wait_held("stdout", WAIT)
        if held["detail"]["type"] == "message_end" and held["detail"]["role"] == "user":
            break
        run.ctl.release("stdout")
    # The user entry is on disk; its message_end has not reached stdout.
    texts = [e["message"]["content"][0]["text"] for e in file_lines(run.session) if e["type"] == "message"]
    assert texts[-1] == "Say hello"
    run.ctl.release("stdout")  # let the held record go before the writer can see the disarm
    run.ctl.unhold("stdout")
    run.ctl.release("stdout", all_held=True)
    run.wait(type="agent_settled")


def test_new_session_file_appears_only_at_the_first_assistant_message(fake_run: Any) -> None:
    run = fake_run()
    run.ctl.hold("user-message")
    run.send({"id": "p1", "type": "prompt", "message": "Say hello"})
    run.ctl.wait_held("user-message", WAIT)
    assert not run.session.exists()  # the user entry is held in memory (session-manager.js 739-768)
    run.ctl.release("user-message")
    run.wait(type="agent_settled")
    assert [e["type"] for e in file_lines(run.session)] == ["session", "model_change", "thinking_level_change",
                                                            "message", "message"]


def test_no_entry_ids_on_the_stream(fake_run: Any) -> None:
    run = fake_run()
    run.ask("p1", "prompt", message="TOOLCALL please run it")
    run.wait(type="agent_settled")
    entries = run.ask("e1", "get_entries")["data"]["entries"]
    ids = {e["id"] for e in entries}
    assert len(ids) == len(entries) >= 6
    stream = json.dumps([r for r in run.records if r.get("type") != "response"])
    assert not any(f'"{i}"' in stream for i in ids)


# --------------------------------------------------------------------------------------------------------
# 10: dialogs; 16: lifecycle; 15: load side effects
# --------------------------------------------------------------------------------------------------------


def test_dialog_requests_and_unknown_responses_are_ignored(fake_run: Any) -> None:
    run = fake_run()
    did = run.ctl.request("dialog", method="select", title="Pick", options=["a", "b"])["id"]
    req = run.wait(type="extension_ui_request")
    assert req == {"type": "extension_ui_request", "id": did, "method": "select", "title": "Pick",
                   "options": ["a", "b"]}
    mark = len(run.records)
    run.send({"type": "extension_ui_response", "id": "no-such-request", "value": "x"})
    run.send({"type": "extension_ui_response", "id": did, "value": "b"})
    answered = run.ctl.wait_event(lambda e: e.get("event") == "dialog-answered", WAIT)
    assert answered["response"]["value"] == "b"
    run.ask("s1", "get_state")
    assert run.types(mark) == ["s1"]  # neither response produced output


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_signals_exit_with_pi_codes(fake_run: Any, sig: int, code: int) -> None:
    run = fake_run(control=False)
    run.ask("s1", "get_state")
    run.proc.p.send_signal(sig)
    assert run.proc.p.wait(WAIT) == code


def test_stdin_eof_exits_zero(fake_run: Any) -> None:
    run = fake_run(control=False)
    run.ask("s1", "get_state")
    run.proc.close()
    assert run.proc.p.wait(WAIT) == 0


def _start_raw(tmp: Path, seed: str) -> tuple[int, str, Path]:
    import subprocess

    agent, proj, session = prepare_tree(tmp, Script("raw", (), seed=seed), "http://127.0.0.1:9/v1")
    argv = [*fake_engine_command(), *build_sealed_argv(str(session))]
    env = {"HOME": str(tmp / "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent), **child_env()}
    out = subprocess.run(argv, env=env, cwd=str(proj), input=b"", capture_output=True, timeout=WAIT, check=False)
    assert out.stdout == b""  # exits before any output
    return out.returncode, out.stderr.decode(), session


def test_missing_header_cwd_exits_1_before_output(tmp_path: Path) -> None:
    seed = FLUSHED.replace('"cwd":"{cwd}"', '"cwd":"/nonexistent/cwd"')
    code, err, _ = _start_raw(tmp_path, seed)
    assert code == 1 and "Stored session working directory does not exist: /nonexistent/cwd" in err


def test_non_session_file_exits_1_and_is_not_modified(tmp_path: Path) -> None:
    code, err, session = _start_raw(tmp_path, '{"hello":"world"}\nnot a header')
    assert code == 1 and "Session file is not a valid pi session" in err
    assert session.read_text() == '{"hello":"world"}\nnot a header'


def test_v1_session_is_rewritten_with_fresh_ids(tmp_path: Path) -> None:
    seed = ('{"type":"session","id":"0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee","timestamp":"2026-01-01T00:00:00.000Z",'
            '"cwd":"{cwd}"}\n{"type":"message","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user",'
            '"content":[{"type":"text","text":"hi"}],"timestamp":1}}\n')
    code, _, session = _start_raw(tmp_path, seed)
    assert code == 0
    lines = file_lines(session)
    assert lines[0]["version"] == 3
    assert len(lines[1]["id"]) == 8 and lines[1]["parentId"] is None
    assert lines[2]["type"] == "thinking_level_change" and lines[2]["parentId"] == lines[1]["id"]


def test_fake_refuses_to_start_without_an_agent_dir(tmp_path: Path) -> None:
    import subprocess

    argv = [*fake_engine_command(), *build_sealed_argv(str(tmp_path / "s.jsonl"))]
    out = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **child_env()},
                         cwd=str(tmp_path), input=b"", capture_output=True, timeout=WAIT, check=False)
    assert out.returncode == 1 and b"PI_CODING_AGENT_DIR" in out.stderr
    assert not (tmp_path / "s.jsonl").exists()


def test_fake_accepts_only_the_sealed_arguments(tmp_path: Path) -> None:
    import subprocess

    argv = [*fake_engine_command(), *build_sealed_argv(str(tmp_path / "s.jsonl")), "--no-session"]
    out = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", **child_env()}, cwd=str(tmp_path), input=b"",
                         capture_output=True, timeout=WAIT, check=False)
    assert out.returncode == 2 and b"unsupported argument" in out.stderr
    assert sys.executable and os.path.isabs(fake_engine_command()[0])


# --------------------------------------------------------------------------------------------------------
# 11, 12 at depth (issue 27): get_tree, get_entries and get_state of a long chain, as the pinned Pi answers
# --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes", [GET_TREE_MAX_PATH, GET_TREE_MAX_PATH + 1])
def test_the_fake_answers_get_tree_up_to_pis_stack_limit_and_fails_past_it_as_pi_does(tmp_path: Path,
                                                                                      nodes: int) -> None:
    """A realistic session (pi-rpc's generator) of `nodes` entries in one chain: get_tree answers, nested
    two levels per node, up to the limit measured on the pinned binary, and past it answers Pi's own
    error (rpc-mode.js 627-639; the conformance goldens hold both sides at 800 and 3,000 messages);
    get_entries since the leaf answers flat with leafId at any length; get_state names the session."""
    seed = "".join(line + "\n" for line in session_lines(cwd="{cwd}", session_id=SID, entries=nodes))
    leaf = json.loads(seed.rsplit("\n", 2)[-2])["id"]
    run = FakeRun(tmp_path / "t", seed=seed, control=False)
    try:
        tree = run.ask("t", "get_tree")
        after = run.ask("e", "get_entries", since=leaf)
        state = run.ask("s", "get_state")
    finally:
        run.close()
    if nodes <= GET_TREE_MAX_PATH:
        assert tree["success"] is True and tree["tooDeep"]["bytes"] > len(seed) - 4096  # every entry, nested
    else:
        assert tree == {"id": "t", "type": "response", "command": "get_tree", "success": False,
                        "error": "Maximum call stack size exceeded"}
    assert after["data"] == {"entries": [], "leafId": leaf}
    assert state["data"]["sessionId"] == SID and state["data"]["sessionFile"] == str(run.session)
