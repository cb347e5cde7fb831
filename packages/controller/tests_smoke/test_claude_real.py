"""The Claude adapter on the real pinned Claude Code 2.1.283 (issue 32), sealed by claude-rpc's `seal_launch`
(the pin, L7, checked at construction), in the loopback-only namespace against claude-rpc's scripted Anthropic
Messages server: pi-rpc's `EngineLink` shell over `ClaudeWire`, the controller's runtime on a private socket, a
client: take control, prompt, finished completed (every init names the sealed session); a slow reply
interrupted, finished interrupted and the stop reconciled. Run by `nox -s claude-smoke` (it needs
`MOSAIC_CLAUDE_DIR`, the install `smoke prepare` verified; a missing one fails, never skips).

Then the same binary through `LaunchingController` (`test_claude_real_under_the_lifecycle_...`): a `ClaudeSpec`
on a hard-linked copy of the pinned install (L7 at construction and at bind), the engine in a direct cgroup as
the engine account (another uid than the controller's, as a cohort's proof needs; its scratch directories are
its own: `ClaudeSpec.engine_uid`), or, parametrized, each execution as its own uid of an `EngineUids` range
(issue 28 item 3 on Claude: the seal's directories given to each execution's uid at bind), under the writer claim: take control, prompt, a read-only Bash tool (run
without asking), a `can_use_tool` answered allow once through the controller, interrupt, force stop with the
cohort's proof, recover, the launch from the eligibility record `--resume`s the session at its leaf (K8),
prompt again, force stop again. The permission flows (issue 32 item 4: P7, H5-H8) are
`tests/claude_permission_flows.py`'s, the same as on the fake engine."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import claude_permission_flows
import pytest
from claude_rig import claude_controller
from claude_rig import wire as rig_wire

from mosaic.cgroup_cohort import CohortRef, Credentials, DirectCgroupLauncher, FixtureVerifier, release_cohort
from mosaic.claude_rpc import ClaudeInstall
from mosaic.claude_rpc.seal import check_launch, seal_launch
from mosaic.claude_rpc.testing import ModelServer, RecordedRequest
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.recordings import SESSION_UUID
from mosaic.controller import LaunchingController, Placement
from mosaic.controller.client import Admitted, ControllerClient, Refused
from mosaic.controller.core import ControllerCore, CoreConfig
from mosaic.controller.engines import DriftConfig
from mosaic.controller.engines.claude import (
    CLAUDE_RULES,
    ClaudeSpec,
    ClaudeWire,
    claude_slug,
)
from mosaic.controller.runtime import ControllerRuntime
from mosaic.controller.testing import RawClient, private_socket_dir, readable_install, session_reader
from mosaic.pi_rpc import EngineLink
from mosaic.safe_open import Refusal
from mosaic.writer_claim import ClaimStore, ProofKind, SeatKey, SessionKey, State

WAIT = 60.0


@pytest.fixture(scope="module")
def claude() -> ClaudeInstall:
    value = os.environ.get("MOSAIC_CLAUDE_DIR")
    if not value or not Path(value).is_dir():
        pytest.fail(f"MOSAIC_CLAUDE_DIR must name the install `smoke prepare` verified (nox -s claude-smoke); got {value!r}")
    return ClaudeInstall(Path(value).resolve())


def test_claude_real_take_control_prompt_finish_interrupt(claude: ClaudeInstall, tmp_path: Path) -> None:
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=tmp_path / "proj", base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                core, wire = runtime.core, rig_wire(runtime)
                client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    admitted = await client.prompt("hello real")
                    assert isinstance(admitted, Admitted), admitted
                    async with asyncio.timeout(WAIT):
                        done = await client.wait_settled(admitted.request.client_request_id)
                    assert done.receipt is not None
                    assert done.receipt_state == "finished" and done.receipt["turnState"] == "completed", done
                    assert wire.claude.session_id == SESSION_UUID
                    slow = await client.prompt("SLOW please")
                    assert isinstance(slow, Admitted), slow
                    await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
                    stop = await client.interrupt()
                    async with asyncio.timeout(WAIT):
                        record = await client.wait_stop(stop["stop"])
                        cut = await client.wait_settled(slow.request.client_request_id)
                    assert record["state"] == "reconciled", record
                    assert cut.receipt is not None
                    assert cut.receipt_state == "finished" and cut.receipt["turnState"] == "interrupted", cut
                    assert core.admission_open and not core.overlaps
                finally:
                    await client.aclose()

    asyncio.run(scenario())


def test_claude_real_drift_the_binarys_own_appends_pass_and_a_foreign_entry_refuses_the_next_prompt(
        claude: ClaudeInstall, tmp_path: Path) -> None:
    """The idle transcript drift check on the real binary (issue 32 item 3, `engines/claude/_drift`): the
    stream's uuids are the transcript's entries (the check's premise: a text turn and a Bash turn pass it, the
    told entries counted), and an entry another writer appends while the engine is idle refuses the next prompt
    `session-drift` (`unknown-id`) before a byte of it is written."""
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=tmp_path / "proj", base_url=server.base_url, api_key=FAKE_KEY)
            config = Path(launch.env["CLAUDE_CONFIG_DIR"])
            transcript = config / "projects" / claude_slug(str((tmp_path / "proj").resolve())) / f"{SESSION_UUID}.jsonl"
            wire = CLAUDE_RULES.new_wire(command_bound=30.0)
            assert isinstance(wire, ClaudeWire)
            wire.claude.expected_session_id = SESSION_UUID
            link = await EngineLink.spawn(launch.argv, env=launch.env, cwd=launch.cwd, core=wire, clock=time.time)
            try:
                core = ControllerCore(CoreConfig(conversation="claude-conversation", execution="exec-1",
                                                 binding="binding-1", incarnation="inc-" + "a" * 32,
                                                 engine=CLAUDE_RULES, drift=DriftConfig(SESSION_UUID)),
                                      now=time.time(), link=wire)
                runtime = ControllerRuntime(core, link, os.path.join(sockets, "c.sock"),
                                            session_reader=session_reader(config, transcript))
                await runtime.start()
                try:
                    client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                    try:
                        await client.observe()
                        await client.takeover()
                        for text in ("hello real", "BASH: echo drift"):
                            await finished(client, text)
                            await runtime.wait_core(lambda c: c.drift_check is None and c.drift_verdict is not None,
                                                    WAIT)
                            verdict = core.drift_verdict
                            assert verdict is not None and not verdict.drift, verdict
                        # A text turn names 2 entries (the prompt, the reply), a Bash turn 4 (the prompt, the
                        # tool call, its result, the reply): every one found on disk in the stream's order.
                        assert verdict.disk_entries == verdict.engine_entries == 6, verdict
                        last = json.loads(transcript.read_bytes().splitlines()[-1])
                        foreign = {"parentUuid": None, "isSidechain": False, "type": "user",
                                   "uuid": "f0000000-0000-4000-8000-000000000001", "sessionId": SESSION_UUID,
                                   "message": {"role": "user", "content": "from another writer"}}
                        assert last.get("sessionId") in (None, SESSION_UUID)
                        with open(transcript, "ab") as f:
                            f.write(json.dumps(foreign).encode() + b"\n")
                        told = wire.told(None)
                        # After a Bash turn the binary writes `system/background_tasks_changed` once idle: that
                        # record voids the check in flight and a new one runs, during which a prompt is refused
                        # `busy` (the core's rule: nothing is written); the client keeps its text and asks again.
                        async with asyncio.timeout(WAIT):
                            while True:
                                refused = await client.prompt("hello again")
                                if not (isinstance(refused, Refused) and refused.refusal.code == "busy"):
                                    break
                                await asyncio.sleep(0.2)
                        assert isinstance(refused, Refused) and refused.refusal.code == "session-drift", refused
                        verdict = core.drift_verdict
                        assert verdict is not None and verdict.reason == "unknown-id", verdict
                        assert wire.told(None) == told and b"hello again" not in transcript.read_bytes()
                    finally:
                        await client.aclose()
                finally:
                    await runtime.aclose()
            finally:
                await link.aclose()

    asyncio.run(scenario())


def _permission_flow(claude: ClaudeInstall, tmp_path: Path,
                     flow: Callable[[str, Path], Awaitable[None]]) -> tuple[RecordedRequest, ...]:
    """`flow(socket_path, project)` against the sealed binary under the controller, the scripted model
    behind it; the requests the model server saw."""

    async def scenario() -> tuple[RecordedRequest, ...]:
        with ModelServer() as server, private_socket_dir() as sockets:
            project = tmp_path / "proj"
            project.mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=project, base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                async with asyncio.timeout(WAIT * 2):
                    await flow(runtime.socket_path, project)
            return server.requests

    return asyncio.run(scenario())


@pytest.mark.parametrize("flow", claude_permission_flows.FLOWS)
def test_P7_H5_H6_H7_H8_claude_permission_flows_on_the_real_binary(flow: str, claude: ClaudeInstall,
                                                                   tmp_path: Path) -> None:
    """Issue 32 item 4 on the real pinned binary, sealed, in the namespace: a `BASH: touch ...` prompt makes
    the scripted model call Bash, Claude asks `can_use_tool`; allow once runs the command once (H6, H7),
    deny never runs it, an interrupt makes Claude cancel the request and a late answer is refused (H8, P6),
    a takeover answers once through the new projection (H5). What Claude did is read from the project
    directory and its tool result."""
    _permission_flow(claude, tmp_path, getattr(claude_permission_flows, flow))


def test_H8_P6_claude_real_an_interrupt_while_the_reply_still_streams(claude: ClaudeInstall, tmp_path: Path) -> None:
    """H8 and P6 when the binary asks `can_use_tool` before the model's message has ended (`BASH-LATE: `, the
    scripted reply's end 5 s after its tool_use block; a slow model stream does this): the interrupt still
    makes Claude cancel the request, a late answer is refused, nothing runs, the approval stays uncertain and
    the stop is reconciled, though the binary ends the turn `aborted_streaming` rather than `aborted_tools`."""
    h8 = claude_permission_flows.H8_P6_an_interrupt_cancels_the_pending_request_and_a_late_answer_is_refused
    requests = _permission_flow(claude, tmp_path, lambda socket_path, project: h8(socket_path, project,
                                                                                  cue="BASH-LATE: "))
    late = [r for r in requests if r.scenario == "bash-late"]
    assert [r.events for r in late] == [4], late  # the reply's end (events 5 and 6) never reached Claude


def test_H9_claude_real_an_interrupt_written_right_after_a_prompt_ends_reconciled(claude: ClaudeInstall,
                                                                                  tmp_path: Path) -> None:
    """H9 on the real binary: the interrupt is written right after the prompt, with no wait for any frame of
    it. Whichever order the binary reads them in (the turn started, or the message cancelled while queued:
    `tests/test_claude_fake_races.py` holds the fake there), the stop is reconciled, the receipt settles (finished
    interrupted, or failed ack-without-start when the message never started) and admission reopens: nothing
    hangs, nothing runs after."""
    async def scenario() -> None:
        with ModelServer() as server, private_socket_dir() as sockets:
            (tmp_path / "proj").mkdir()
            launch = seal_launch(claude.root, session_id=SESSION_UUID, resume=False, scratch=tmp_path / "s",
                                 cwd=tmp_path / "proj", base_url=server.base_url, api_key=FAKE_KEY)
            assert launch.pinned and check_launch(launch) is None
            async with claude_controller(launch.argv, launch.env, launch.cwd, sockets) as runtime:
                core = runtime.core
                client = await ControllerClient.connect(runtime.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    admitted = await client.prompt("SLOW please")
                    assert isinstance(admitted, Admitted), admitted
                    stop = await client.interrupt()
                    await runtime.wait_core(lambda c: c.stop is None or c.stop.step == "slot-wait", WAIT)
                    assert core.slot is None and core.stops[-1].state == "reconciled", core.stops[-1].record()
                    async with asyncio.timeout(WAIT):
                        record = await client.wait_stop(stop["stop"])
                        done = await client.wait_settled(admitted.request.client_request_id)
                    assert record["state"] == "reconciled", record
                    assert done.receipt is not None
                    outcome = (done.receipt_state, done.receipt.get("turnState") or done.receipt.get("reason"))
                    assert outcome in {("finished", "interrupted"), ("failed", "ack-without-start")}, done
                    print(f"H9 on the real binary: the prompt {outcome}")
                    assert core.admission_open and not core.overlaps and not core.run.active
                finally:
                    await client.aclose()

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ through LaunchingController



async def open_decision(sub: Any) -> dict[str, Any]:
    """The first nativeDecision record in state open on the subscription `sub` (bounded by WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            while (note := sub.get_nowait()) is not None:
                if note.method == "record" and note.params.get("type") == "nativeDecision" \
                        and note.params.get("state") == "open":
                    return dict(note.params)
            await asyncio.sleep(0.02)


async def finished(client: ControllerClient, text: str) -> dict[str, Any]:
    admitted = await client.prompt(text)
    assert isinstance(admitted, Admitted), admitted
    async with asyncio.timeout(WAIT):
        done = await client.wait_settled(admitted.request.client_request_id)
    assert done.receipt is not None and done.receipt_state == "finished", done
    return dict(done.receipt)


async def stopped(controller: LaunchingController, *, recover: bool) -> tuple[dict[str, Any], dict[str, Any], str]:
    """Force stop with a proof through a client, then (`recover`) recover; (the final stop record, its proofs and
    the recover's reply, the incarnation)."""
    raw = await RawClient.connect(controller.socket_path)
    try:
        auth = await raw.control()
        await raw.force_stop(auth)
        final = await raw.stop_outcome(WAIT)
        proofs = raw.records("cohortProof")
        cid = await raw.confirm("recover", auth) if recover and final["state"] == "stopped" else ""
        reply = await raw.call("recover", incarnation=auth["incarnation"], confirmation=cid) if cid else {}
        return final, {"proofs": proofs, "reply": reply}, auth["incarnation"]
    finally:
        await raw.close()


# An engine uid per execution on the real binary: a range no account names here (checked), apart from the
# other suites' ranges (tests_cohort 64100, tests_smoke's Pi 64200-64211, tests/ 64000 and 64300).
UIDS_FIRST = 64240


def uids_of(pid: int) -> tuple[list[int], list[int]]:
    """(the real, effective, saved and file-system uids; the same gids) of a process."""
    with open(f"/proc/{pid}/status") as f:
        rows = {k: v.split() for k, _, v in (line.partition(":") for line in f)}
    return [int(x) for x in rows["Uid"]], [int(x) for x in rows["Gid"]]


@pytest.mark.parametrize("uids", ["the engine account", "a uid per execution"])
def test_claude_real_under_the_lifecycle_prompt_tool_permission_interrupt_force_stop_recover_prompt(
        claude: ClaudeInstall, scratch: Path, parent: str, engine_uid: Credentials, uids: str) -> None:
    """With "a uid per execution" (`EngineUids`, issue 28 item 3 on Claude) the first execution and the one
    recovered from its record run as two uids of the range no passwd entry names, in the engine group (all
    four ids of the binary's process, read from /proc while it runs), each recorded in its claim with the
    spawn marker and on its binding record: the seal's directories were made the first uid's at its bind and
    handed to the second's at its (the transcript the first wrote 0600 is the second's, which `--resume`s and
    appends to it), the project is the engine group's (setgid, group-writable), and each force stop ends with
    the cohort's proof."""
    import pwd  # noqa: PLC0415

    from mosaic.controller import EngineUids  # noqa: PLC0415

    per_execution = uids == "a uid per execution"
    fx = scratch / "fx"
    for d in ("proj", "operator-home", "claims", "cs"):
        (fx / d).mkdir(parents=True)
    os.chmod(fx / "claims", 0o700)
    os.chown(fx / "proj", engine_uid.uid, engine_uid.gid)  # the engine's tools write in its project
    allocator = None
    if per_execution:
        for uid in range(UIDS_FIRST, UIDS_FIRST + 4):
            with pytest.raises(KeyError):
                pwd.getpwuid(uid)  # the range is nobody's account
        os.chmod(fx / "proj", 0o2775)  # the engine group's: every execution's uid writes in it
        state = tempfile.mkdtemp(prefix="mosaic-claude-smoke-uids-", dir=str(scratch))
        os.chmod(state, 0o700)
        allocator = EngineUids(UIDS_FIRST, 4, engine_uid.gid, state)
    project = os.path.realpath(fx / "proj")
    installed = readable_install(claude.root, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-claude-smoke-sock-")
    os.chmod(sockets, 0o700)
    launcher = DirectCgroupLauncher(parent, sockets, engine=engine_uid)
    refs: list[CohortRef] = []
    transcript = os.path.join(fx, "cs", "claude", "projects", claude_slug(project), f"{SESSION_UUID}.jsonl")

    def controller(server: ModelServer, eligibility: str | None = None) -> LaunchingController:
        spec = ClaudeSpec(project=project, seat="alpha", scratch=str(fx / "cs"), claude_dir=str(installed),
                          base_url=server.base_url, api_key=FAKE_KEY,
                          engine_uid=None if per_execution else engine_uid.uid)
        return LaunchingController(
            Placement(fixture_root=str(fx), claim_root=str(fx / "claims"), session_file=transcript,
                      socket_dir=tempfile.mkdtemp(prefix="c-", dir=sockets), home=str(fx / "operator-home")),
            spec, launcher, verifier=FixtureVerifier(), stop_grace=2.0, eligibility=eligibility,
            engine_uids=allocator)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with ModelServer() as server:
            first = controller(server)
            assert first.argv[-2:] == ["--session-id", SESSION_UUID] and first.argv[0].startswith(str(installed))
            await first.start()
            assert first.execution is not None and first.execution.ref is not None
            refs.append(first.execution.ref)
            out["first_ids"] = uids_of(first.execution.ref.engine.pid)
            out["first_engine_uid"] = first.core.binding_record()["engineUid"]
            try:
                assert first.core.admission_open and not first.core.fences, first.core.fences
                client = await ControllerClient.connect(first.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    sub = client.subscribe(maxsize=100_000)
                    out["hello"] = await finished(client, "hello real lifecycle")
                    out["tool"] = await finished(client, "BASH: echo tool-ran-42")
                    made = os.path.join(project, "made-by-tool")
                    asked = await client.prompt(f"BASH: mkdir {made}")
                    assert isinstance(asked, Admitted), asked
                    shown = await open_decision(sub)
                    out["shown"] = shown
                    await client.approve(shown["nativeDecision"], "allow once")
                    async with asyncio.timeout(WAIT):
                        allowed = await client.wait_settled(asked.request.client_request_id)
                    out["allowed"] = allowed.receipt
                    out["made"] = os.path.isdir(made)
                    slow = await client.prompt("SLOW please")
                    assert isinstance(slow, Admitted), slow
                    runtime = first.runtime
                    assert runtime is not None
                    await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
                    stop = await client.interrupt()
                    async with asyncio.timeout(WAIT):
                        out["interrupt"] = await client.wait_stop(stop["stop"])
                        cut = await client.wait_settled(slow.request.client_request_id)
                    out["cut"] = cut.receipt
                finally:
                    await client.aclose()
                out["first_stop"], out["first"], out["first_incarnation"] = await stopped(first, recover=True)
            finally:
                await first.aclose()
            record = out["first"]["reply"]["result"]["eligibility"]
            out["record"] = record
            second = controller(server, eligibility=record["id"])
            out["second_argv"] = second.argv[-2:]
            out["same_pins"] = second.pins == first.pins
            await second.start()
            assert second.execution is not None and second.execution.ref is not None
            refs.append(second.execution.ref)
            out["second_ids"] = uids_of(second.execution.ref.engine.pid)
            out["second_engine_uid"] = second.core.binding_record()["engineUid"]
            try:
                out["second"] = {"mode": second.mode, "open": second.core.admission_open,
                                 "fences": dict(second.core.fences), "leaf": second.identity.leaf,
                                 "used": await second.claims.record_state(record["id"])}
                client = await ControllerClient.connect(second.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    out["again"] = await finished(client, "hello again after recover")
                finally:
                    await client.aclose()
                out["second_stop"], _, _ = await stopped(second, recover=False)
            finally:
                await second.aclose()
        return out

    try:
        out = asyncio.run(main())
    finally:
        for ref in refs:
            with contextlib.suppress(Exception):
                release_cohort(ref, force=True)
        shutil.rmtree(sockets, ignore_errors=True)

    assert out["hello"]["turnState"] == "completed" and out["tool"]["turnState"] == "completed", out
    assert out["shown"]["method"] == "can_use_tool" and out["shown"]["choices"] == ["allow once", "deny"], out["shown"]
    assert out["allowed"] is not None and out["allowed"]["turnState"] == "completed" and out["made"], out
    assert out["interrupt"]["state"] == "reconciled" and out["cut"]["turnState"] == "interrupted", out
    # The force stop ends with the cohort's proof; recover reserves the pair for an eligibility record.
    assert out["first_stop"]["state"] == "stopped", out["first_stop"]
    (proof,) = out["first"]["proofs"]
    # The launch from the record resumes the claimed session at the recorded leaf: K8 passed, admission open.
    assert out["second_argv"] == ["--resume", SESSION_UUID] and out["same_pins"]
    second = out["second"]
    assert second["mode"] == "recovered" and second["open"] and not second["fences"], second
    # (The leaf read right after the interrupt may precede the binary's own last writes of that turn: the record's
    # is read at recover, after the proven stop.)
    assert out["record"]["leaf"] is not None and second["leaf"] == out["record"]["leaf"], (second, out["record"])
    assert second["used"] == "used", second
    assert out["again"]["turnState"] == "completed" and out["second_stop"]["state"] == "stopped"
    store = ClaimStore(str(fx / "claims"))
    seat = SeatKey("alpha", project, project)
    chain = [r for r in store.read_chain(seat) if getattr(r, "claim_id", None) is not None]
    first_stopped = [r for r in chain if r.claim_id != out["record"]["claim_id"] and r.state is State.STOPPED]
    assert first_stopped and first_stopped[-1].proof.kind is ProofKind.COHORT
    assert first_stopped[-1].proof.digest == proof["proof"]["verification"]["digest"]
    assert store.observe(seat, SessionKey("claude", SESSION_UUID)).free  # released by the second stop's proof
    stopped_uids = [r.engine_uid for r in chain if r.state is State.STOPPED and r.proof.kind is ProofKind.COHORT]
    if per_execution:  # two executions, two uids of the range, each its own, recorded, each stop proven
        one, two = UIDS_FIRST, UIDS_FIRST + 1
        assert out["first_ids"] == ([one] * 4, [engine_uid.gid] * 4), out["first_ids"]
        assert out["second_ids"] == ([two] * 4, [engine_uid.gid] * 4), out["second_ids"]
        assert (out["first_engine_uid"], out["second_engine_uid"]) == (one, two)
        assert stopped_uids == [one, two], stopped_uids
        assert os.stat(transcript).st_uid == two  # the first uid's transcript, handed to the second, resumed
    else:  # the engine account, as before: no uid recorded
        assert out["first_ids"][0] == [engine_uid.uid] * 4 and out["second_ids"][0] == [engine_uid.uid] * 4
        assert (out["first_engine_uid"], out["second_engine_uid"]) == (None, None)
        assert stopped_uids == [None, None], stopped_uids


def test_L7_I4_at_bind_a_binary_swapped_since_construction_refuses_and_nothing_runs(claude: ClaudeInstall,
                                                                                    scratch: Path) -> None:
    """The pin at bind on the real install (a hard-linked copy): construction passes L7; the binary is then
    replaced by other bytes, and `start()` refuses `engine-pin-mismatch` at bind, before the spawn marker:
    the replacement never runs, nothing is launched, the reservation is released with the never-spawned
    proof."""
    from mosaic.controller.testing import MemoryCohort

    fx = scratch / "fx"
    for d in ("proj", "operator-home", "claims", "cs"):
        (fx / d).mkdir(parents=True)
    os.chmod(fx / "claims", 0o700)
    project = os.path.realpath(fx / "proj")
    installed = readable_install(claude.root, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-claude-smoke-sock-")
    os.chmod(sockets, 0o700)
    cohort = MemoryCohort()
    marker = scratch / "ran"

    async def main() -> str:
        spec = ClaudeSpec(project=project, seat="alpha", scratch=str(fx / "cs"), claude_dir=str(installed),
                          base_url="http://127.0.0.1:9", api_key=FAKE_KEY)
        transcript = os.path.join(fx, "cs", "claude", "projects", claude_slug(project), f"{SESSION_UUID}.jsonl")
        controller = LaunchingController(
            Placement(fixture_root=str(fx), claim_root=str(fx / "claims"), session_file=transcript,
                      socket_dir=sockets, home=str(fx / "operator-home")),
            spec, None, verifier=FixtureVerifier(), cohort=cohort)
        binary = Path(controller.argv[0])
        assert binary == ClaudeInstall(installed).binary
        binary.unlink()  # the copy's link only: the cached install keeps its bytes
        binary.write_text(f"#!/bin/sh\ntouch {marker}\necho '2.1.283 (Claude Code)'\n")
        binary.chmod(0o755)
        try:
            with pytest.raises(Refusal) as refused:
                await controller.start()
            return refused.value.code
        finally:
            await controller.aclose()

    try:
        code = asyncio.run(main())
    finally:
        cohort.cleanup()
        shutil.rmtree(sockets, ignore_errors=True)
    assert code == "engine-pin-mismatch"
    assert not marker.exists() and [e for e in cohort.log if e.startswith("launch ")] == []
    seat = SeatKey("alpha", project, project)
    assert ClaimStore(str(fx / "claims")).observe(seat, SessionKey("claude", SESSION_UUID)).free
