"""The fake held to the real binary: every conformance scenario, fake against the real Pi 0.85.1 golden.

The goldens in data/conformance/ are the normalised transcripts of the real sealed binary talking to the
scripted model server (``python -m mosaic.pi_rpc.testing.record <pi dir> <dir>``); the smoke
suite checks the real binary against the same goldens and against the fake live, so a golden that no
longer describes the binary fails there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mosaic.pi_rpc.testing import (
    CONFORMANCE,
    WAIT,
    Script,
    child_env,
    diff_transcripts,
    load_golden,
    run_normalized,
)
from mosaic.pi_rpc.testing.conformance import fake_engine

GOLDENS = Path(__file__).parent / "data" / "conformance"


def test_every_scenario_has_a_golden() -> None:
    assert sorted(p.stem for p in GOLDENS.glob("*.json")) == sorted(s.name for s in CONFORMANCE)


@pytest.mark.parametrize("script", CONFORMANCE, ids=[s.name for s in CONFORMANCE])
def test_fake_matches_the_real_binary(script: object, tmp_path: Path) -> None:
    assert isinstance(script, Script)
    got = run_normalized(script, fake_engine(env=child_env()), scratch_parent=str(tmp_path))
    want = load_golden(GOLDENS, script.name)
    diff = diff_transcripts(want, got, names=("real pi 0.85.1", "fake"))
    assert diff == "", f"fake differs from the real binary in {script.name}:\n{diff}"


def test_N10_fake_conformance_refuses_while_streaming_acks_before_running_settles_from_finally(
        fake_run: object) -> None:
    """N10: the fake throws on a prompt while streaming (agent-session.js 860-863), acks before running
    (948, with the streaming flag set in the same step, 773), and emits agent_settled from the finally
    (780-785). A fake that queued the prompt instead would ack it (and run it later): this fails."""
    run = fake_run()  # type: ignore[operator]
    ctl = run.ctl
    # Acks before running: hold the run before agent_start; the ack is already on the wire.
    ctl.hold("run-start")
    run.send({"id": "p1", "type": "prompt", "message": "SLOW stream please"})
    ctl.wait_held("run-start", WAIT)
    ack = run.wait(id="p1")
    assert ack == {"id": "p1", "type": "response", "command": "prompt", "success": True}
    assert "agent_start" not in run.types()
    state = run.ask("s1", "get_state")
    assert state["data"]["isStreaming"] is True  # set in the same step as the ack
    ctl.release("run-start")
    run.wait(delta="tick00 ")
    # Throws while streaming, with the exact text; nothing queued.
    refused = run.ask("p2", "prompt", message="second prompt while streaming")
    assert refused == {"id": "p2", "type": "response", "command": "prompt", "success": False,
                       "error": "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') "
                                "to queue the message."}
    assert run.ask("s2", "get_state")["data"]["pendingMessageCount"] == 0
    assert not any(r.get("type") == "queue_update" for r in run.records)
    run.ask("a1", "abort")
    assert run.ask("s3", "get_state")["data"]["isStreaming"] is False
    user_texts = [r["message"]["content"][0]["text"] for r in run.records
                  if r.get("type") == "message_start" and r["message"]["role"] == "user"]
    assert user_texts == ["SLOW stream please"]  # the refused prompt never ran
    # agent_settled from the finally: a run that throws at its start still settles, with no agent_start.
    ctl.request("throw_at_run_start", message="scripted failure at run start")
    mark = len(run.records)
    ack3 = run.ask("p3", "prompt", message="Say hello")
    assert ack3["success"] is True
    run.wait(type="agent_settled")
    assert run.types(mark) == ["p3", "agent_settled"]


def test_fake_runs_from_installed_package_without_source_paths() -> None:
    # The fake is started as `python -m mosaic.pi_rpc.testing.fake_engine`: it must be importable from the
    # interpreter running the tests (nox installs the package; a checkout passes PYTHONPATH).
    import importlib.util

    assert importlib.util.find_spec("mosaic.pi_rpc.testing.fake_engine") is not None
    assert ("PYTHONPATH" in os.environ) == ("PYTHONPATH" in child_env())
