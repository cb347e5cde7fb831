"""The core under faults (a full disk), on the byte-level scripted engine: what the drift
check after a turn says about that turn's receipt, and what a force stop that could not write its claim
tells clients. The real-kernel half (a filled tmpfs, the claim's reserved room) is
tests_cohort/test_faults.py.

The engine side is what pinned Pi writes when a session append fails (session-manager.js `_persist`:
appendFileSync throws ENOSPC) and its next append succeeds: the listener's throw ends the run through
pi-agent-core `agent.js` 342-364 (handleRunFailure: an assistant message with stopReason "error" and the
error's text, its turn_end and agent_end), then AgentSession's agent_settled. The file holds what the
failed write left: a torn line with the failure message appended to it, or nothing of the failed entry.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from core_harness import assistant, refused, state, user_message
from test_drift import DriftHarness, clean_turn, entry, line, session_bytes, started

from mosaic.controller.core import EngineEvents
from mosaic.controller.drift import PERSISTENCE_DRIFT, FileIdentity, SessionBytes
from mosaic.controller.testing import RawClient, fake_controller, receipt_is

ENOSPC = "ENOSPC: no space left on device, write"


def failed_run(h: DriftHarness, text: str) -> None:
    """The prompt's run as Pi writes it when the user entry's append threw: the ack, the user message, then
    handleRunFailure's failure message, turn_end, agent_end, and agent_settled."""
    failure = {**assistant(stop="error"), "content": [{"type": "text", "text": ""}], "errorMessage": ENOSPC}
    h.respond("prompt")
    h.engine({"type": "agent_start"}, {"type": "turn_start"},
             {"type": "message_start", "message": user_message(text)},
             {"type": "message_end", "message": user_message(text)})
    h.respond("get_state", data=state(True))
    h.engine({"type": "message_start", "message": failure}, {"type": "message_end", "message": failure},
             {"type": "turn_end", "message": failure, "toolResults": []},
             {"type": "agent_end", "messages": [failure], "willRetry": False}, {"type": "agent_settled"})


def disk_after(case: str, listed: list[dict[str, Any]], user: dict[str, Any], failure: dict[str, Any]) -> SessionBytes:
    """The session file after the failed append, then the failure message's append."""
    clean = session_bytes(listed).data
    if case == "torn-then-appended":  # the user line cut at the full page, the failure line right after it
        data = clean + line(user)[:57] + line(failure)
    elif case == "failed-whole-then-appended":  # nothing of the user line, the failure line after the last
        data = clean + line(failure)
    elif case == "another-writer-mid-line":  # the engine's entries whole, then another writer's partial line
        data = clean + line(user) + line(failure) + line(entry("f0000001", parent=failure["id"]))[:40]
    else:
        assert case == "foreign"  # the engine's entries whole, then another writer's entry
        data = clean + line(user) + line(failure) + line(entry("f0000001", parent=failure["id"]))
    return SessionBytes(data, FileIdentity(1, 7, len(data)))


@pytest.mark.parametrize(("case", "reason"), [("torn-then-appended", "invalid-line"),
                                              ("failed-whole-then-appended", "not-prefix"),
                                              ("another-writer-mid-line", "partial-line")])
def test_disk_full_a_turn_whose_entries_the_check_finds_torn_or_missing_is_unpersisted_never_completed(
        case: str, reason: str) -> None:
    """The turn ended the way Pi ends it; the check after it does not find the turn's entries whole and in
    order (a torn line with the next entry on it; an entry missing before the next; bytes after the last
    LF, which stop the check before it verified the turn's lines). Its receipt reads finished
    (unpersisted) everywhere a client can read it: the record, an observe made while the check ran, an
    exact retry's reply. Never finished (completed)."""
    h = DriftHarness()
    listed = started(h)
    listed, _disk = clean_turn(h, 1, listed)
    text = "prompt 2 on a full disk"
    assert h.prompt("c1", text, crid="full")["outcome"] == "admitted"
    failed_run(h, text)
    assert h.checking()
    rpc = h._rpc
    h.call("c2", "observe")  # answered once the check ends
    h.call("c1", "prompt", text=text, clientRequestId="full", generation=h.core.generation)  # an exact retry
    user = entry("u2000001", parent=listed[-1]["id"], message=user_message(text))
    failure = entry("e2000002", parent=user["id"],
                    message={**assistant(stop="error"), "content": [{"type": "text", "text": ""}],
                             "errorMessage": ENOSPC})
    assert reason in PERSISTENCE_DRIFT
    h.check([*listed, user, failure], disk_after(case, listed, user, failure))
    verdict = h.core.drift_verdict
    assert verdict is not None and (verdict.drift, verdict.reason) == (True, reason), verdict
    seen: list[dict[str, Any]] = []
    for conn in ("c1", "c2"):
        seen += [r for r in h.clients[conn].records("receipt") if r["clientRequest"] == "full"]
    observed = h.clients["c2"].replies[rpc + 1]
    seen += [r for r in observed["receipts"] if r["clientRequest"] == "full"]
    retry = h.clients["c1"].replies[rpc + 2]
    assert retry["outcome"] == "duplicate"
    seen.append(retry["receipt"])
    finished = [r for r in seen if r["state"] == "finished"]
    assert finished and all(r["turnState"] == "unpersisted" for r in finished), seen
    assert h.receipt("full")["turnState"] == "unpersisted"
    # And the rest of drift: uncertain, admission closed, the marker naming the reason.
    assert h.binding("c2")["state"] == "uncertain" and h.markers("c2")[-1]["drift"] == reason
    refused(h.prompt("c1", "after"), "session-drift")


def test_disk_full_another_writers_entry_after_the_turn_keeps_it_completed() -> None:
    """Drift that says nothing of the engine's own writes (an entry with a new id after them) is drift, and
    the turn whose entries are whole on disk keeps its finished (completed)."""
    h = DriftHarness()
    listed = started(h)
    listed, _disk = clean_turn(h, 1, listed)
    assert h.prompt("c1", "prompt 2", crid="p2")["outcome"] == "admitted"
    h.turn("prompt 2")
    user = entry("u2000001", parent=listed[-1]["id"], message=user_message("prompt 2"))
    reply = entry("b2000002", parent=user["id"], message=assistant("Hello from the fake model."))
    h.check([*listed, user, reply], disk_after("foreign", listed, user, reply))
    assert h.core.drift_verdict is not None and h.core.drift_verdict.reason == "unknown-id"
    (done,) = [r for r in h.clients["c1"].records("receipt") if r["clientRequest"] == "p2" and r["state"] == "finished"]
    assert done["turnState"] == "completed"


def test_disk_full_a_force_stop_that_could_not_write_its_claim_says_which_key_and_why_to_every_client() -> None:
    """The lifecycle's stop result when a claim revision could not be written (uncertain, reason
    claim-publication, the detail naming the key and ENOSPC) reaches every subscriber in the stop record,
    not only "uncertain"."""
    h = DriftHarness()
    started(h)
    assert isinstance(h.call("c1", "force-stop", confirmation=h.confirm("c1")), dict)
    (effect,) = h.effect("force-stop")
    detail = ("the seat key (seat-0123) could not be written: stopping, revision 4 of claim-ab: ENOSPC (No space "
              "left on device); nothing was signalled: a stop is recorded before its first signal")
    h.finish_effect(effect, state="uncertain", reason="claim-publication", detail=detail)
    for conn in ("c1", "c2"):
        stop = h.clients[conn].records("stop")[-1]
        assert (stop["state"], stop["reason"], stop.get("detail")) == ("uncertain", "claim-publication", detail)
    assert h.binding("c2")["state"] == "uncertain"


async def arrives(client: RawClient, predicate: Any, what: str) -> None:
    """A notification the controller must send; its absence within the bound is the failure under test."""
    try:
        await client.until(predicate, 10.0)
    except TimeoutError:
        pytest.fail(f"{what} never reached the client: the controller stopped reading the engine")


def test_disk_full_an_evidence_line_that_cannot_be_written_never_raises_out_of_feed(tmp_path: Path) -> None:
    """The rule itself, with no wait: `feed` is the engine pump's path, and an evidence line it carries out
    (here H14's late-events line: output of an execution that is not the current one) goes to a file that
    answers every write with ENOSPC (/dev/full). `feed` returns; the line is kept in memory and its loss
    counted. A raise out of `feed` would end the pump, and the controller would stop reading the engine."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", evidence_path="/dev/full") as rig:
            runtime = rig.runtime
            kept, lost = len(runtime.evidence), runtime.evidence_lost
            try:
                runtime.feed(EngineEvents("an-old-execution", []))
            except OSError as exc:
                pytest.fail(f"feed raised {exc!r}: a lost evidence line must cost the line, never the engine pump")
            assert [e.kind for e in runtime.evidence][kept:] == ["late-events"]
            assert runtime.evidence_lost == lost + 1 and runtime.internal_errors == 0

    asyncio.run(main())


def test_disk_full_an_evidence_file_that_cannot_be_written_costs_its_lines_never_the_engine(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The evidence file is written inside `feed`, on the engine pump's path: an ENOSPC there (/dev/full
    answers every write so) must not kill the pump, or the controller would stop reading the engine. The
    line stays in memory, the loss is counted and said once (no traceback), and the engine's next events
    still reach clients: here another writer's entry makes the check after a turn write its evidence, and
    an extension's run after it is still streamed."""
    async def main() -> None:
        async with fake_controller(tmp_path / "rig", evidence_path="/dev/full") as rig:
            client = await RawClient.connect(rig.socket_path)
            auth = await client.control()
            await client.call("prompt", **auth, clientRequestId="t1", text="Say hello")
            await client.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == "t1")
            with open(rig.session, "ab") as f:  # another writer: the next check's evidence is a session-drift line
                f.write(line(entry("f0000001", parent=None)))
            # The check before this prompt runs (issue 27) writes its evidence lines; the reply is its refusal.
            rid = await client.send("prompt", **auth, clientRequestId="t2", text="Say hello")
            await arrives(client, lambda n: n.get("method") == "marker", "the drift marker after the lost line")
            assert (await client.reply(rid))["error"]["data"]["refusal"]["code"] == "session-drift"
            assert [e.kind for e in rig.runtime.evidence][-1] == "session-drift" and rig.runtime.evidence_lost >= 1
            seen = len(client.events())
            await asyncio.get_running_loop().run_in_executor(
                None, lambda: rig.ctl.request("inject_prompt", text="from an extension"))
            await arrives(client, lambda n: n.get("method") == "event" and len(client.events()) > seen,
                          "the extension's run, read by the engine pump after the lost line")
            assert rig.runtime.internal_errors == 0
            await client.close()

    with caplog.at_level(logging.WARNING, logger="mosaic.controller.runtime"):
        asyncio.run(main())
    said = [r for r in caplog.records if "evidence file" in r.getMessage()]
    assert len(said) == 1 and "ENOSPC" in said[0].getMessage() and said[0].exc_info is None
