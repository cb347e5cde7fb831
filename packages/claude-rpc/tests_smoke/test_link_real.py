"""The Claude link over the real pinned binary, sealed (``seal_launch``: the pin checked at construction),
through :class:`mosaic.claude_rpc.link.ClaudeEngineLink`: a prompt with a tool call answered allow (P7),
an interrupt with ``cancel_queued`` that proves nothing queued runs (R3-1), an interrupt while a permission is
pending and the late answer refused (H8), the exit status at stdin EOF, then ``--resume`` of the same
session with the load check's evidence (K8): every init names the claimed session, and the transcript's new
user entry is the link's uuid hanging on the leaf the written rule picks (through the one synthetic entry the
binary adds, since the first launch ended with an interrupted turn)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from mosaic.claude_rpc import ClaudeInstall, ClaudeRpcRefusal
from mosaic.claude_rpc.link import (
    ClaudeEngineLink,
    InterruptSettled,
    LinkEvent,
    Outgoing,
    PermissionAsked,
    PermissionCancelled,
    PermissionState,
    RanAfterInterrupt,
    SessionMismatch,
    TurnFinished,
    TurnStarted,
)
from mosaic.claude_rpc.resume import check_resumed, leaf_by_rule
from mosaic.claude_rpc.seal import check_launch, seal_launch
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.recordings import SESSION_UUID, slug

WAIT = 60.0
UUIDS = [f"00000000-0000-4000-8000-0000000001{i:02x}" for i in range(16)]


async def until(link: ClaudeEngineLink, kind: type, seen: list[LinkEvent]) -> LinkEvent:
    while True:
        ev = await link.next_event(WAIT)
        seen.append(ev)
        if isinstance(ev, kind):
            return ev


async def _first_launch(claude: ClaudeInstall, tmp_path: Path, proj: Path, server: ModelServer) -> ClaudeEngineLink:
    """The sealed binary launched on a new session in `proj` against `server`, under the link."""
    launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s", cwd=proj,
                         base_url=server.base_url, api_key=FAKE_KEY)
    assert launch.pinned and check_launch(launch) is None
    return await ClaudeEngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, stderr=subprocess.PIPE,
                                        expected_session_id=SESSION_UUID)


async def _interrupt_the_pending_request(link: ClaudeEngineLink, pending: LinkEvent,
                                         seen: list[LinkEvent]) -> LinkEvent:
    """H8: an interrupt with the request `pending`: the binary cancels it, a late answer is refused; the
    turn's end."""
    assert isinstance(pending, PermissionAsked)
    link.send_interrupt()
    cancelled = await until(link, PermissionCancelled, seen)
    assert isinstance(cancelled, PermissionCancelled) and cancelled.request is pending.request
    late = link.allow(pending.request.request_id)
    assert isinstance(late, ClaudeRpcRefusal) and late.code == "permission-cancelled"
    return await until(link, TurnFinished, seen)


def test_the_link_drives_the_sealed_binary_through_allow_interrupt_h8_eof_and_resume(claude: ClaudeInstall,
                                                                                     tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()

    async def first(server: ModelServer) -> None:
        link = await _first_launch(claude, tmp_path, proj, server)
        seen: list[LinkEvent] = []
        try:
            assert (await link.outcome(link.send_initialize())).succeeded
            # P7: a tool call, allowed once with exactly its input
            link.send_user("BASH: touch made-by-the-link", uuid=UUIDS[0])
            asked = await until(link, PermissionAsked, seen)
            assert isinstance(asked, PermissionAsked)
            answer = link.allow(asked.request.request_id)
            assert isinstance(answer, Outgoing)
            again = link.allow(asked.request.request_id)
            assert isinstance(again, ClaudeRpcRefusal) and again.code == "permission-answered"
            await until(link, TurnFinished, seen)
            assert asked.request.state is PermissionState.RESOLVED and (proj / "made-by-the-link").exists()
            # R3-1: a queued message and an interrupt with cancel_queued while the stream runs
            link.send_user("SLOW please", uuid=UUIDS[1])
            await asyncio.get_running_loop().run_in_executor(
                None, server.wait_for, lambda rs: any(r.scenario == "slow" and r.events >= 4 for r in rs), WAIT)
            link.send_user("queued while busy", uuid=UUIDS[2])
            interrupt = link.send_interrupt(cancel_queued=True)
            settled = await until(link, InterruptSettled, seen)
            assert isinstance(settled, InterruptSettled) and settled.interrupt is interrupt
            ev = settled.evidence
            assert ev is not None and ev.nothing_queued_runs and [m.key for m in ev.ours_cancelled] == [UUIDS[2]]
            await until(link, TurnFinished, seen)
            # H8: the interrupt cancels a pending request; the late answer is refused, nothing runs
            link.send_user("BASH: touch never-made", uuid=UUIDS[3])
            pending = await until(link, PermissionAsked, seen)
            assert isinstance(pending, PermissionAsked)
            finished = await _interrupt_the_pending_request(link, pending, seen)
            assert isinstance(finished, TurnFinished) and finished.result.stop_reason == "tool_use"
            link.close_stdin()
            await link.wait_output_end(WAIT)
            while link.queued_events:
                seen.append(await link.next_event(WAIT))
            assert await link.wait(WAIT) == 1  # the last turn ended with an error result
        finally:
            await link.aclose()
        assert not (proj / "never-made").exists()
        assert [e for e in seen if isinstance(e, (RanAfterInterrupt, SessionMismatch))] == []
        assert not [r for r in server.requests if r.last_user_text == "queued while busy"]

    async def resumed(server: ModelServer) -> None:
        transcript = tmp_path / "s" / "claude" / "projects" / slug(str(proj.resolve())) / f"{SESSION_UUID}.jsonl"
        before = [json.loads(x) for x in transcript.read_text().splitlines()]
        _rule, leaf = leaf_by_rule(before)
        launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=True, scratch=tmp_path / "s", cwd=proj,
                             base_url=server.base_url, api_key=FAKE_KEY)
        link = await ClaudeEngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd,
                                            expected_session_id=SESSION_UUID)
        seen: list[LinkEvent] = []
        try:
            link.send_user("after the resume", uuid=UUIDS[4])
            started = await until(link, TurnStarted, seen)
            assert isinstance(started, TurnStarted) and started.init.session_id == SESSION_UUID
            await until(link, TurnFinished, seen)
            link.close_stdin()
            assert await link.wait(WAIT) == 0
        finally:
            await link.aclose()
        after = [json.loads(x) for x in transcript.read_text().splitlines()]
        check = check_resumed(before, after, session_id=SESSION_UUID, message_uuid=UUIDS[4])
        # the first launch's last turn was interrupted: the binary closes it with one synthetic entry
        assert check.ok and check.leaf == leaf and len(check.synthetic) == 1, check
        assert not any(isinstance(e, SessionMismatch) for e in seen)

    with ModelServer() as server:
        asyncio.run(first(server))
        asyncio.run(resumed(server))


def test_h8_while_the_reply_still_streams_the_binary_cancels_the_request_and_ends_aborted_streaming(
        claude: ClaudeInstall, tmp_path: Path) -> None:
    """The binary asks `can_use_tool` as the tool_use block ends, before the model's message ends (seen when
    a CI run's model server was slow to write the reply's last events; `BASH-LATE` ends it 5 s late on
    purpose). An interrupt then still cancels the pending request (`control_cancel_request`), the late answer
    is refused and nothing runs; the turn ends `aborted_streaming` with no stop reason, not `aborted_tools` /
    `tool_use` as with the reply whole (the test above, FACTS' recording)."""
    proj = tmp_path / "proj"
    proj.mkdir()

    async def run(server: ModelServer) -> None:
        link = await _first_launch(claude, tmp_path, proj, server)
        seen: list[LinkEvent] = []
        try:
            assert (await link.outcome(link.send_initialize())).succeeded
            link.send_user("BASH-LATE: touch never-made-late", uuid=UUIDS[8])
            pending = await until(link, PermissionAsked, seen)
            assert isinstance(pending, PermissionAsked)
            streaming = [r for r in server.requests if r.scenario == "bash-late"]
            assert [r.outcome for r in streaming] == ["pending"]  # the reply has not ended yet
            finished = await _interrupt_the_pending_request(link, pending, seen)
            assert isinstance(finished, TurnFinished), finished
            result = finished.result
            assert (result.subtype, result.stop_reason, result.terminal_reason) == (
                "error_during_execution", None, "aborted_streaming"), result
            link.close_stdin()
            await link.wait_output_end(WAIT)
            await link.wait(WAIT)
        finally:
            await link.aclose()
        assert not (proj / "never-made-late").exists()
        assert [e for e in seen if isinstance(e, (RanAfterInterrupt, SessionMismatch))] == []

    with ModelServer() as server:
        asyncio.run(run(server))
