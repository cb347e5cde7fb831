"""The Claude engine's lifecycle half (issue 32 item 1-3), without root: the transcript's place and what a read
of it gives on the recorded trees (fixtures/claude-2.1.283/trees, each resumed by the pinned binary), the
sealed argv and its refusals, the pins (L7 at construction: a spec whose install is not the pin refuses
`engine-pin-mismatch`; at bind: the launch checked whole again), and `LaunchingController` on claude-rpc's fake
Claude engine (held to the binary by claude-rpc's conformance suite) in the in-memory cohort: take control,
prompt, a tool call, interrupt, force stop with the cohort's proof, recover (`--resume`), prompt again; K8's
load check refusing a transcript moved between the claim and the launch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from claude_recorded import claude_harness, feed_each, initialized, outs, recording, wire

from mosaic.cgroup_cohort import FixtureVerifier
from mosaic.claude_rpc.seal import SEALED_FLAGS
from mosaic.claude_rpc.testing import ModelServer
from mosaic.claude_rpc.testing.drive import FAKE_KEY
from mosaic.claude_rpc.testing.fake_engine import fake_engine_command
from mosaic.claude_rpc.testing.recordings import OTHER_SESSION_UUID, SESSION_UUID, U1
from mosaic.controller import Hooks, LaunchingController, Placement
from mosaic.controller.client import AdmissionUnknown, Admitted, ControllerClient, Refused, RemoteRefusal
from mosaic.controller.engines.claude import (
    ClaudeSpec,
    ClaudeWire,
    claude_place,
    claude_slug,
    read_transcript,
)
from mosaic.controller.testing import Liveness, MemoryCohort, RawClient
from mosaic.pi_rpc.link import CommandWritten
from mosaic.safe_open import Refusal
from mosaic.writer_claim import ClaimStore, State

REPO = Path(__file__).resolve().parents[3]
TREES = REPO / "fixtures" / "claude-2.1.283" / "trees"
WAIT = 30.0
SID = "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b"


def code(call: Callable[[], Any]) -> str:
    with pytest.raises(Refusal) as refused:
        call()
    return refused.value.code


# ----------------------------------------------------------------------------------- place and read


@pytest.mark.parametrize(("tail", "want"), [
    ("a.b/.hidden dir", "a-b--hidden-dir"),
    ("unicode é 日本", "unicode-----"),
    ("emoji😀x", "emoji--x"),
    ("under_score-dash+plus", "under-score-dash-plus"),
])
def test_L1_the_slug_is_the_binarys_one_utf16_unit_a_dash(tail: str, want: str) -> None:
    """FACTS §2 "Slug rule", each row seen on the binary (an astral character is two UTF-16 units: two dashes)."""
    assert claude_slug("/x/" + tail) == "-x-" + want


def test_a_transcript_path_outside_config_projects_slug_uuid_refuses_configuration(tmp_path: Path) -> None:
    config, project = str(tmp_path / "claude"), str(tmp_path / "proj")
    good = os.path.join(config, "projects", claude_slug(project), f"{SID}.jsonl")
    place = claude_place(good, project=project, seat="alpha", config_dir=config)
    assert (place.session_id, place.path, place.sessions_rel) == (SID, good, f"projects/{claude_slug(project)}")
    for bad in (os.path.join(config, "projects", "-other-project", f"{SID}.jsonl"),     # another project's slug
                os.path.join(config, "projects", claude_slug(project), "notes.jsonl"),  # not a session uuid
                os.path.join(config, "projects", claude_slug(project), f"{SID.upper()}.jsonl"),
                os.path.join(config, "elsewhere", claude_slug(project), f"{SID}.jsonl"),
                os.path.join(config, "projects", claude_slug(project), f"{SID}.json")):
        assert code(lambda b=bad: claude_place(b, project=project, seat="alpha", config_dir=config)) == "configuration"
    long_project = "/" + "p" * 230
    assert code(lambda: claude_place(good, project=long_project, seat="alpha", config_dir=config)) == "configuration"


def copy_tree(name: str, root: Path) -> tuple[str, str, dict[str, Any]]:
    """A recorded tree under `root`, its projects directory renamed to the slug of `root/proj`: (config dir,
    project, expected.json)."""
    expected = json.loads((TREES / name / "expected.json").read_text())
    config = root / "claude"
    shutil.copytree(TREES / name / "claude", config)
    project = root / "proj"
    project.mkdir()
    (config / "projects" / expected["slug"]).rename(config / "projects" / claude_slug(str(project)))
    return str(config), str(project), expected


@pytest.mark.parametrize("tree", ["linear", "edit-branch", "edit-branch-old-leaf", "edit-branch-no-last-prompt",
                                  "edit-branch-file-order", "fork", "image"])
def test_L1_read_gives_the_session_id_and_the_leaf_the_binary_resumed(tmp_path: Path, tree: str) -> None:
    """On each recorded tree, the leaf read is the parent the binary's `--resume` gave its next prompt
    (expected.json `resumeContinuedParent`, recorded on 2.1.283), the session key is the file's uuid."""
    config, project, expected = copy_tree(tree, tmp_path)
    sid = expected["sessionId"]
    place = claude_place(os.path.join(config, "projects", claude_slug(project), f"{sid}.jsonl"), project=project,
                         seat=expected["seat"], config_dir=config)
    read = read_transcript(place)
    assert read.exists and read.header_id == sid
    assert read.leaf == expected["resumeContinuedParent"]
    assert read.torn_tail() is None and read.open_tools == ()
    assert read.branch  # the reader's name of that branch


def test_L1_a_new_session_reads_empty_and_a_foreign_sessions_entry_refuses(tmp_path: Path) -> None:
    config, project = str(tmp_path / "claude"), str(tmp_path / "proj")
    path = os.path.join(config, "projects", claude_slug(project), f"{SID}.jsonl")
    os.makedirs(config)
    place = claude_place(path, project=project, seat="alpha", config_dir=config)
    new = read_transcript(place)
    assert (new.exists, new.header_id, new.leaf) == (False, SID, None)
    os.makedirs(os.path.dirname(path))
    Path(path).write_text(json.dumps({"type": "user", "uuid": "u1", "sessionId": "another", "version": "2.1.283"})
                          + "\n")
    assert code(lambda: read_transcript(place)) == "configuration"


def test_W7_open_tool_calls_and_a_torn_tail(tmp_path: Path) -> None:
    """An assistant tool use with no tool result is open (W7); bytes after the last LF refuse the launch
    (`session-drift`) before anything is claimed."""
    config, project = tmp_path / "claude", tmp_path / "proj"
    project.mkdir()
    spec = ClaudeSpec(project=str(project), seat="alpha", scratch=str(tmp_path / "s"), config_dir=str(config),
                      command=tuple(fake_engine_command()), base_url="http://127.0.0.1:9", api_key=FAKE_KEY)
    engine = spec.engine()
    path = config / "projects" / claude_slug(str(project)) / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    base = {"sessionId": SID, "version": "2.1.283", "cwd": str(project), "timestamp": "2026-01-01T00:00:00Z"}
    lines = [
        {**base, "type": "user", "uuid": "a1", "parentUuid": None, "message": {"role": "user", "content": "go"}},
        {**base, "type": "assistant", "uuid": "a2", "parentUuid": "a1", "message": {
            "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}},
                                             {"type": "tool_use", "id": "toolu_2", "name": "Write", "input": {}}]}},
        {**base, "type": "user", "uuid": "a3", "parentUuid": "a2", "message": {
            "role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    place = engine.place(str(path))
    read = engine.read(place)
    assert read.open_tools == (("toolu_2", "Write"),) and read.leaf == "a3"
    engine.loadable(read)
    with path.open("a") as f:
        f.write('{"type":"user","uu')
    assert code(lambda: engine.loadable(engine.read(place))) == "session-drift"


# ----------------------------------------------------------------------------------- seal and pins


def fake_spec(tmp_path: Path, **options: Any) -> ClaudeSpec:
    project = tmp_path / "proj"
    project.mkdir(exist_ok=True)
    return ClaudeSpec(project=str(project), seat="alpha", scratch=str(tmp_path / "s"),
                      command=tuple(fake_engine_command()), base_url="http://127.0.0.1:9", api_key=FAKE_KEY,
                      **options)


def transcript(engine: Any, spec: ClaudeSpec) -> str:
    return os.path.join(engine.config_dir, "projects", claude_slug(spec.project), f"{SID}.jsonl")


def test_the_argv_is_the_seal_with_session_id_for_a_new_session_and_resume_for_an_existing_one(tmp_path: Path) -> None:
    spec = fake_spec(tmp_path, model="claude-fake")
    engine = spec.engine()
    path = transcript(engine, spec)
    new = engine.argv(path)
    at = len(fake_engine_command())
    assert new[:at] == fake_engine_command() and new[at: at + len(SEALED_FLAGS)] == list(SEALED_FLAGS)
    assert new[at + len(SEALED_FLAGS):] == ["--session-id", SID, "--model", "claude-fake"]
    first = engine.pins(new)
    os.makedirs(os.path.dirname(path))
    Path(path).write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": SID,
                                      "version": "2.1.283", "message": {"role": "user", "content": "x"}}) + "\n")
    resumed = engine.argv(path)
    assert resumed[at + len(SEALED_FLAGS):] == ["--resume", SID, "--model", "claude-fake"]
    # The session flag is the transcript's state, not the engine's: the same pins (a recover's launch).
    assert engine.pins(resumed) == first
    env = engine.env
    assert env["CLAUDE_CODE_TMPDIR"].startswith(spec.scratch + "/")
    assert os.stat(env["CLAUDE_CODE_TMPDIR"]).st_mode & 0o777 == 0o700
    # Any argv the seal did not make for this session is unsealed.
    assert code(lambda: engine.pins([*resumed, "--dangerously-skip-permissions"])) == "unsealed-engine"
    assert code(lambda: engine.bind(new)) == "unsealed-engine"


def test_options_outside_the_seal_refuse_unsealed_engine(tmp_path: Path) -> None:
    engine = fake_spec(tmp_path, model="--permission-mode").engine()
    assert code(lambda: engine.argv(transcript(engine, fake_spec(tmp_path)))) == "unsealed-engine"
    engine = fake_spec(tmp_path).engine()
    argv = engine.argv(transcript(engine, fake_spec(tmp_path)))
    os.chmod(engine.env["CLAUDE_CODE_TMPDIR"], 0o755)  # the private temp directory opened up since construction
    assert code(lambda: engine.bind(argv)) == "unsealed-engine"


def test_L7_I4_a_spec_whose_install_is_not_the_pin_refuses_engine_pin_mismatch_and_runs_nothing(tmp_path: Path) -> None:
    """The brief's I4 mutant "the pin check is skipped": an install whose binary is not the pinned one (here a
    stand-in that would leave a marker if run) refuses at construction, before anything is made or run."""
    install = tmp_path / "install"
    native = install / "node_modules" / "@anthropic-ai" / "claude-code-linux-x64"
    native.mkdir(parents=True)
    marker = tmp_path / "ran"
    binary = native / "claude"
    binary.write_text(f"#!/bin/sh\ntouch {marker}\necho '2.1.283 (Claude Code)'\n")
    binary.chmod(0o755)
    project = tmp_path / "proj"
    project.mkdir()
    spec = ClaudeSpec(project=str(project), seat="alpha", scratch=str(tmp_path / "s"), claude_dir=str(install),
                      base_url="http://127.0.0.1:9", api_key=FAKE_KEY)
    engine = spec.engine()
    assert code(lambda: engine.argv(transcript(engine, spec))) == "engine-pin-mismatch"
    assert not marker.exists()


# ----------------------------------------------------------------------------------- the lifecycle


class ClaudeLab:
    """A fixture root (project, scratch, operator home, claim root), the scripted model server, the memory
    cohort, a private socket directory; controllers over the fake Claude engine."""

    def __init__(self, root: Path, server: ModelServer) -> None:
        self.root = root / "fx"
        for d in ("proj", "scratch", "operator-home", "claims"):
            (self.root / d).mkdir(parents=True)
        os.chmod(self.root / "claims", 0o700)
        self.project = os.path.realpath(self.root / "proj")
        self.server = server
        self.cohort = MemoryCohort()
        self.liveness = Liveness()
        self.socket_dir = tempfile.mkdtemp(prefix="mcc-", dir="/tmp")
        os.chmod(self.socket_dir, 0o700)
        self.controllers: list[LaunchingController] = []
        self.spec = ClaudeSpec(project=self.project, seat="alpha", scratch=str(self.root / "scratch"),
                               command=tuple(fake_engine_command()), base_url=server.base_url, api_key=FAKE_KEY)
        self.transcript = os.path.join(self.root, "scratch", "claude", "projects", claude_slug(self.project),
                                       f"{SID}.jsonl")

    def controller(self, *, claims_owner: Any = None, **options: Any) -> LaunchingController:
        placement = Placement(fixture_root=str(self.root), claim_root=str(self.root / "claims"),
                              session_file=self.transcript, socket_dir=self.socket_dir,
                              home=str(self.root / "operator-home"))
        owner = claims_owner if claims_owner is not None else self.liveness.runner()
        controller = LaunchingController(placement, self.spec, None, verifier=FixtureVerifier(), cohort=self.cohort,
                                         claims_owner=owner, stop_grace=0.2, **options)
        self.controllers.append(controller)
        return controller

    async def close(self) -> None:
        for controller in self.controllers:
            with contextlib.suppress(Exception):
                await controller.aclose()
        self.cohort.cleanup()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def claude_lab(root: Path) -> AsyncIterator[ClaudeLab]:
    with ModelServer() as server:
        lab = ClaudeLab(root, server)
        try:
            yield lab
        finally:
            await lab.close()


async def open_decision(sub: Any) -> dict[str, Any]:
    """The first nativeDecision record in state open on the subscription `sub` (bounded by WAIT)."""
    async with asyncio.timeout(WAIT):
        while True:
            while (note := sub.get_nowait()) is not None:
                if note.method == "record" and note.params.get("type") == "nativeDecision" \
                        and note.params.get("state") == "open":
                    return dict(note.params)
            await asyncio.sleep(0.01)


async def prompt_finished(client: ControllerClient, text: str) -> dict[str, Any]:
    admitted = await client.prompt(text)
    assert isinstance(admitted, Admitted), admitted
    async with asyncio.timeout(WAIT):
        done = await client.wait_settled(admitted.request.client_request_id)
    assert done.receipt is not None and done.receipt_state == "finished", done
    return dict(done.receipt)


def test_claude_under_the_lifecycle_prompt_tool_interrupt_force_stop_recover_and_prompt_again(tmp_path: Path) -> None:
    """Issue 32 items 1-3 on the fake Claude engine: a new session is launched `--session-id` under the writer
    claim (session key: the Claude session uuid) in the cohort; take control, prompt, a read-only Bash tool
    call (the binary runs it without asking), a slow reply interrupted (the stop reconciled), force stop
    with the cohort's proof, recover (an eligibility record), the launch from it `--resume`s the claimed
    session at its leaf (K8 passed: admission open), prompt again."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            first = lab.controller()
            assert first.argv[-2:] == ["--session-id", SID]
            assert first.session_key.harness == "claude" and first.session_key.session_id == SID
            await first.start()
            assert first.core.admission_open and not first.core.fences
            client = await ControllerClient.connect(first.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                assert (await prompt_finished(client, "hello lifecycle"))["turnState"] == "completed"
                tool = await prompt_finished(client, "BASH: echo tool-ran-42")
                assert tool["turnState"] == "completed"
                assert any(r.scenario == "tool-result" for r in lab.server.requests), lab.server.requests
                # A tool the engine asks for (P7): answered allow once through the controller, it runs.
                sub = client.subscribe(maxsize=100_000)
                made = os.path.join(lab.project, "made-by-tool")
                asked = await client.prompt(f"BASH: mkdir {made}")
                assert isinstance(asked, Admitted), asked
                shown = await open_decision(sub)
                assert shown["method"] == "can_use_tool" and shown["choices"] == ["allow once", "deny"], shown
                await client.approve(shown["nativeDecision"], "allow once")
                async with asyncio.timeout(WAIT):
                    allowed = await client.wait_settled(asked.request.client_request_id)
                assert allowed.receipt is not None and allowed.receipt["turnState"] == "completed", allowed
                assert os.path.isdir(made)
                slow = await client.prompt("SLOW please")
                assert isinstance(slow, Admitted), slow
                runtime = first.runtime
                assert runtime is not None
                await runtime.wait_core(lambda c: c.slot is not None and c.slot.user_started, WAIT)
                stop = await client.interrupt()
                async with asyncio.timeout(WAIT):
                    record = await client.wait_stop(stop["stop"])
                    cut = await client.wait_settled(slow.request.client_request_id)
                assert record["state"] == "reconciled", record
                assert cut.receipt is not None and cut.receipt["turnState"] == "interrupted", cut
            finally:
                await client.aclose()
            leaf = read_transcript(first.place).leaf
            assert leaf is not None
            raw = await RawClient.connect(first.socket_path)
            try:
                auth = await raw.control()
                await raw.force_stop(auth)
                final = await raw.stop_outcome()
                assert final["state"] == "stopped", final
                cid = await raw.confirm("recover", auth)
                reply = await raw.call("recover", incarnation=auth["incarnation"], confirmation=cid)
                assert "result" in reply, reply
                record_id = reply["result"]["eligibility"]["id"]
            finally:
                await raw.close()
            await first.aclose()
            second = lab.controller(eligibility=record_id)
            assert second.argv[-2:] == ["--resume", SID] and second.pins == first.pins
            await second.start()
            assert second.mode == "recovered" and second.core.admission_open, second.core.fences
            assert second.identity.leaf == leaf
            assert await second.claims.record_state(record_id) == "used"  # consumed: its launch passed K8
            client = await ControllerClient.connect(second.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                assert (await prompt_finished(client, "hello again"))["turnState"] == "completed"
            finally:
                await client.aclose()
            async with asyncio.timeout(WAIT):  # the engine writes the turn's last-prompt line after its result
                while (after := read_transcript(second.place)).leaf == leaf:
                    await asyncio.sleep(0.02)
            assert after.header_id == SID  # the same session continued: its transcript grew past the leaf

    asyncio.run(main())


def test_K8_a_transcript_moved_between_the_claim_and_the_launch_fences_preflight(tmp_path: Path) -> None:
    """K8: the engine continues the transcript as read at the claim, or admission never opens: an entry
    appended after the claim was taken (here: once the engine is launched) moves the leaf `--resume` would
    continue, so the load check fails and prompts refuse `preflight`."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            client = await ControllerClient.connect(first.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                await prompt_finished(client, "make the transcript")
                raw = await RawClient.connect(first.socket_path)
                auth = await raw.control()
                await raw.force_stop(auth)
                assert (await raw.stop_outcome())["state"] == "stopped"
                cid = await raw.confirm("recover", auth)
                reply = await raw.call("recover", incarnation=auth["incarnation"], confirmation=cid)
                await raw.close()
            finally:
                await client.aclose()
            record_id = reply["result"]["eligibility"]["id"]
            await first.aclose()

            def step(name: str) -> None:
                if name == "launched":  # a foreign writer appends once the engine runs
                    with open(lab.transcript, "a") as f:
                        f.write(json.dumps({"type": "user", "uuid": "f0reign", "parentUuid": None, "sessionId": SID,
                                            "version": "2.1.283", "message": {"role": "user", "content": "x"}})
                                + "\n" + json.dumps({"type": "last-prompt", "lastPrompt": "x", "leafUuid": "f0reign",
                                                     "sessionId": SID}) + "\n")

            second = lab.controller(eligibility=record_id, hooks=Hooks(on_launch_step=step))
            await second.start()
            assert "preflight" in second.core.fences and not second.core.admission_open
            assert "f0reign" in second.core.fences["preflight"]

    asyncio.run(main())


def test_L7_at_bind_a_launch_whose_seal_broke_since_construction_spawns_nothing(tmp_path: Path) -> None:
    """The launch is checked whole again at bind (claude-rpc `check_launch`): the private temp directory
    opened up after construction refuses `unsealed-engine` at start; nothing is launched and the
    reservation is released with the never-spawned proof."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            controller = lab.controller()
            os.chmod(controller.engine.env["CLAUDE_CODE_TMPDIR"], 0o755)
            with pytest.raises(Refusal) as refused:
                await controller.start()
            assert refused.value.code == "unsealed-engine", refused.value.to_dict()
            assert [e for e in lab.cohort.log if e.startswith("launch ")] == []

    asyncio.run(main())



def test_L1_observe_serves_the_claude_seats_history_pages_once_a_receipt_names_the_session(tmp_path: Path) -> None:
    """The history an observe serves is chat-pages' Claude seat: before the launcher's receipt names the
    session (and before the transcript exists) it is the reader's refusal, never an empty history; once the
    seat's receipt names it, the page holds the turn, under the conversation id the controller serves."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            controller = lab.controller()
            await controller.start()
            assert controller.conversation.startswith("claude-")
            raw = await RawClient.connect(controller.socket_path)
            try:
                before = (await raw.call("observe"))["result"]
                assert before["history"]["ok"] is False, before["history"]
                client = await ControllerClient.connect(controller.socket_path, ping_interval=None)
                try:
                    await client.observe()
                    await client.takeover()
                    await prompt_finished(client, "hello history")
                finally:
                    await client.aclose()
                receipt = Path(lab.project) / ".pi" / "state" / "alpha" / "session-id"
                receipt.parent.mkdir(parents=True)
                receipt.write_text(SID + "\n")
                after = (await raw.call("observe"))["result"]
                assert after["history"]["ok"] is True, after["history"]
                page = json.dumps(after["history"])
                assert "hello history" in page and "Reply to: hello history" in page
            finally:
                await raw.close()

    asyncio.run(main())


def test_W10_issue27_claude_a_foreign_entry_appended_between_turns_refuses_the_next_prompt_session_drift(
        tmp_path: Path) -> None:
    """The idle drift check on Claude under the lifecycle (the fake engine writes its transcript as the binary
    does, each entry by the uuid its stream names): two turns pass the check (the engine's own appends); another
    writer appends a user entry while the engine is idle; the next prompt is refused `session-drift` before a
    byte of it is written, the binding uncertain, the marker naming `unknown-id`."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            controller = lab.controller()
            await controller.start()
            client = await ControllerClient.connect(controller.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                await prompt_finished(client, "hello one")
                await prompt_finished(client, "BASH: echo two")
                assert controller.runtime is not None
                core = controller.runtime.core
                link = core.link
                assert isinstance(link, ClaudeWire)
                assert core.drift_verdict is not None and not core.drift_verdict.drift, core.drift_verdict
                last = json.loads(Path(lab.transcript).read_bytes().splitlines()[-1])
                foreign = {**last, "type": "user", "uuid": "f0000000-0000-4000-8000-000000000001",
                           "parentUuid": last.get("uuid") or last.get("leafUuid"),
                           "message": {"role": "user", "content": "from another writer"}}
                with open(lab.transcript, "ab") as f:
                    f.write(json.dumps(foreign).encode() + b"\n")
                told = link.told(None)
                refused = await client.prompt("hello three")
                assert isinstance(refused, Refused) and refused.refusal.code == "session-drift", refused
                verdict = core.drift_verdict
                assert verdict is not None and verdict.drift and verdict.reason == "unknown-id", verdict
                assert not core.admission_open and link.told(None) == told  # no user message started
                assert b"hello three" not in Path(lab.transcript).read_bytes()
            finally:
                await client.aclose()

    asyncio.run(main())


def test_E4_claude_a_page_holding_transcript_bytes_no_check_verified_is_not_a_quiet_cut(tmp_path: Path) -> None:
    """E4's page-before-persist half on Claude (the seam): the history page is chat-pages' read of the
    transcript, its `snapshotDigest` the SHA-256 of the bytes it shows; the cut is quiet only when those are
    the bytes the last clean drift check verified. After a checked turn it is; once bytes no check verified are
    on the page (another line appended while idle), it is not."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            controller = lab.controller()
            await controller.start()
            receipt = Path(lab.project) / ".pi" / "state" / "alpha" / "session-id"
            receipt.parent.mkdir(parents=True)
            receipt.write_text(SID + "\n")
            raw = await RawClient.connect(controller.socket_path)
            client = await ControllerClient.connect(controller.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                await prompt_finished(client, "hello seam")
                assert controller.runtime is not None
                verdict = controller.runtime.core.drift_verdict
                checkpoint = verdict.checkpoint if verdict is not None else None
                assert checkpoint is not None and checkpoint.entries == 2, checkpoint
                quiet = (await raw.call("observe"))["result"]
                assert quiet["history"]["ok"] is True and quiet["seam"]["quiet"] is True, quiet["seam"]
                assert quiet["history"]["page"]["snapshotDigest"] == checkpoint.sha256
                last = [e for e in map(json.loads, Path(lab.transcript).read_bytes().splitlines()) if "uuid" in e][-1]
                more = {**last, "type": "user", "uuid": "f0000000-0000-4000-8000-000000000002",
                        "parentUuid": last["uuid"], "message": {"role": "user", "content": "a line no check saw"}}
                with open(lab.transcript, "ab") as f:
                    f.write(json.dumps(more).encode() + b"\n")
                loud = (await raw.call("observe"))["result"]
                assert loud["history"]["ok"] is True and loud["seam"]["quiet"] is False, loud["seam"]
            finally:
                await client.aclose()
                await raw.close()

    asyncio.run(main())


def test_H16_claude_W12_a_second_controller_for_the_same_session_refuses_and_the_first_is_untouched(
        tmp_path: Path) -> None:
    """H16 on Claude (the lifecycle's claim, W1/W2/W12): a second controller for the session a running one
    holds refuses `already-active` at start, launching nothing; the first still takes a prompt to finished."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            units = dict(lab.cohort.units)
            second = lab.controller()
            with pytest.raises(Refusal) as refused:
                await second.start()
            assert refused.value.code == "already-active", refused.value
            assert lab.cohort.units == units  # nothing launched for the second
            client = await ControllerClient.connect(first.socket_path, ping_interval=None)
            try:
                await client.observe()
                await client.takeover()
                await prompt_finished(client, "still mine")
            finally:
                await client.aclose()

    asyncio.run(main())


def test_H20_claude_a_prompt_written_whole_whose_ack_died_with_the_controller_is_outcome_unknown_and_never_resent(
        tmp_path: Path) -> None:
    """H20 on Claude: the prompt's user message is wholly in the engine's stdin (the link's `Written`) and the
    controller dies before its core reads the `command_lifecycle` ack. The death, in the memory cohort: the
    batch holding the write (and any ack queued with it) and every later one never reach the core, the
    runner's claims owner is dead, its socket and engine link close; the engine's unit stays (a cgroup outlives
    its controller). The restart finds an orphan (W6): uncertain, admission closed, no second launch. The
    client library's request is outcome-unknown, never resent; its exact retry under the old token refuses
    stale-incarnation."""
    text = "Say hello, H20"

    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            owner = lab.liveness.runner()
            died = asyncio.Event()

            def on_engine_events(batch: list[Any]) -> None:
                # What the engine answered from the prompt's write on dies with the controller: the core never
                # sees it (the hook runs before the core is fed this very batch).
                if not died.is_set() and any(isinstance(e, CommandWritten) and e.command.type == "user"
                                             for e in batch):
                    died.set()
                if died.is_set():
                    batch.clear()

            first = lab.controller(claims_owner=owner, hooks=Hooks(on_engine_events=on_engine_events))
            await first.start()
            a = await ControllerClient.connect(first.socket_path, ping_interval=None)
            try:
                await a.observe()
                await a.takeover()
                old_token = a.incarnation
                sent = asyncio.ensure_future(a.prompt(text, client_request_id="h20"))
                await asyncio.wait_for(died.wait(), WAIT)
                # The SIGKILL's effect, at once: the core holds the written prompt and acted on nothing after its
                # write (the link's command may carry the ack the link read; the core was never fed it).
                slot = first.core.slot
                assert slot is not None and slot.request.client_request_id == "h20", slot
                assert slot.probe is None and not slot.run_started and not slot.user_started, slot
                lab.liveness.crashed(owner)
                assert first.runtime is not None
                await first.runtime.aclose()
                first.pool.shutdown()
                outcome = await asyncio.wait_for(sent, WAIT)
                # Admitted (the reply left before the crash) or outcome-unknown (it did not): never refused.
                assert isinstance(outcome, (Admitted, AdmissionUnknown)), outcome
                entry = outcome.request
                await asyncio.wait_for(a.wait_until(lambda: not a.connected), WAIT)
                assert first.execution is not None and first.execution.ref is not None
                first_ref = first.execution.ref

                second = lab.controller()
                await second.start()
                assert second.mode == "orphan", second.mode
                again = await asyncio.wait_for(a.reconnect(second.socket_path), WAIT)
                assert again.incarnation_changed
                binding = again.observed.binding
                assert binding["state"] == "uncertain" and binding["admission"] == "closed", binding
                assert str(entry.state) == "outcome-unknown" and a.pending() == [] and a.unknown() == [entry]
                retried = await a.retry("h20")  # the library refuses to resend it: nothing is written
                assert isinstance(retried, Refused) and retried.refusal.code == "outcome-unknown"
                with pytest.raises(RemoteRefusal) as stale:
                    await a.request("prompt", {"incarnation": old_token, "generation": 1, "clientRequestId": "h20",
                                               "text": text})
                assert stale.value.code == "stale-incarnation"
                taken = await a.acquire_recovery_control()
                refused = await a.prompt(text, client_request_id="h20-again")
                assert isinstance(refused, Refused) and refused.refusal.code == "fenced", (taken, refused)
            finally:
                await a.aclose()
            assert second.execution is not None
            pair = ClaimStore(str(lab.root / "claims")).observe(second.seat_key, second.session_key)
            seat_head = pair.seat.revision
            assert seat_head.state is State.UNCERTAIN and seat_head.claim_id == second.execution.claim.claim_id
            # The one cohort of this claim: no second launch, the orphan holds no engine link to write on.
            assert second.execution.ref == first_ref and set(lab.cohort.units) == {first_ref.unit}
            assert len([e for e in lab.cohort.log if e.startswith("launch ")]) == 1
            assert second.execution.link is None
            # Nothing resent: the text is in the transcript at most once (the engine may have run it before the
            # crash's stdin EOF ended it).
            users = []
            if os.path.exists(lab.transcript):
                with open(lab.transcript, encoding="utf-8") as f:
                    users = [line for line in f if json.loads(line).get("type") == "user" and text in line]
            assert len(users) <= 1, users

    asyncio.run(main())


def test_K8_an_init_naming_another_session_than_the_claimed_one_fences_the_engine() -> None:
    """K8's first-turn half on the binary's recorded order (sealed-text): the binary names its session only in
    the `init` at each turn's start, so the wire is told the claimed session (the load check does it) and an
    `init` naming another poisons the wire for the core: the transport fenced, the binding uncertain, no prompt
    written again. The same recording with the session it names passes."""
    for expected, fenced in ((SESSION_UUID, False), (OTHER_SESSION_UUID, True)):
        h = claude_harness(U1)
        wire(h).claude.expected_session_id = expected
        rest = initialized(h, recording("sealed-text"))
        h.controller()
        assert h.prompt("c1", "hello text")["outcome"] == "admitted"
        feed_each(h, outs(rest[1:]))
        assert ("transport" in h.core.fences) is fenced, h.core.fences
        if fenced:
            assert h.core.binding_state == "uncertain" and not h.core.admission_open
            assert "K8" in h.core.fences["transport"] and wire(h).poisoned is not None
            assert not wire(h).can_send_prompt()
        else:
            assert h.receipt()["turnState"] == "completed" and h.core.admission_open


# ----------------------------------------------------------------------------- an engine uid per execution

UIDS_FIRST = 64300  # a range no account names here (checked in the test), apart from the other tests' ranges


def owners(engine: Any) -> dict[str, tuple[int, int]]:
    """(owner uid, mode) of each directory the seal made, by its environment key."""
    out = {}
    for key in ("HOME", "CLAUDE_CODE_TMPDIR", "CLAUDE_CONFIG_DIR"):
        st = os.lstat(engine.env[key])
        out[key] = (st.st_uid, st.st_mode & 0o777)
    return out


def test_a_uid_per_claude_execution_its_seal_made_its_recorded_in_claim_and_binding_and_each_stop_proves(
        tmp_path: Path) -> None:
    """Issue 32 "nothing of the Pi side may get weaker" with issue 28 item 3 (README "An engine uid per
    execution"): with `EngineUids` each Claude execution gets its own uid from the range, as a Pi one does.
    Construction makes the seal's directories (HOME, CLAUDE_CONFIG_DIR, the private CLAUDE_CODE_TMPDIR) as
    this process's and gives them to nobody (the claim is not taken yet); at bind they are given to the
    execution's uid and the launch is checked as that uid's (the private directory must be its, 0700); what an
    earlier execution's uid left in them (its transcript) is handed to the next uid. The uid is recorded with
    the spawn marker and on the binding record; the next launch on the pair gets the next uid of the range;
    each force stop ends with the cohort's proof.

    The memory cohort runs the fake engine as this process, not as the uid: the fake checks its environment as
    the seal does (the private directory must be its own), so it refuses the launch, which is sealed for the
    execution's uid, and exits (the load check fences `preflight`). The real binary running as each uid, its
    turns, its transcript carried to the next uid and each stop's proof, is
    `tests_smoke/test_claude_real.py::test_claude_real_under_the_lifecycle_...[a uid per execution]`."""
    import pwd  # noqa: PLC0415

    from mosaic.claude_rpc.seal import check_env  # noqa: PLC0415
    from mosaic.controller import EngineUids  # noqa: PLC0415
    from mosaic.writer_claim import ClaimStore, ProofKind, SeatKey, State  # noqa: PLC0415

    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: giving the seal's directories to other uids needs root (chown)")
    for uid in range(UIDS_FIRST, UIDS_FIRST + 4):
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)  # the range is nobody's account
    state = tmp_path / "uids"
    state.mkdir(mode=0o700)
    uids = EngineUids(UIDS_FIRST, 4, os.getgid(), str(state))
    one, two = UIDS_FIRST, UIDS_FIRST + 1
    seen: dict[str, Any] = {}

    async def stop(controller: LaunchingController) -> dict[str, Any]:
        raw = await RawClient.connect(controller.socket_path)
        try:
            observed = (await raw.call("observe"))["result"]
            # The binding is fenced (`preflight`): force stop is the way on, under recovery control (K9).
            took = await raw.call("acquire-recovery-control", incarnation=observed["incarnation"])
            assert "result" in took, took
            binding = observed["binding"]
            auth = {"incarnation": observed["incarnation"], "generation": took["result"]["generation"]}
            await raw.force_stop(auth)
            final = await raw.stop_outcome()
            assert final["state"] == "stopped", final
            (proof,) = raw.records("cohortProof")
            assert proof["proof"]["membershipComplete"] is True, proof
            return dict(binding)
        finally:
            await raw.close()

    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            def at(name: str, which: str) -> None:
                if name == "spawn-marker":  # after bind: what the launch runs with, as the engine starts
                    engine = lab.controllers[-1].engine
                    seen[which] = {"dirs": owners(engine),
                                   "sealed_for": [u for u in (os.geteuid(), one, two)
                                                  if check_env(engine.env, owner=u) is None],
                                   "transcript": os.stat(lab.transcript).st_uid if os.path.exists(lab.transcript)
                                   else None}

            first = lab.controller(engine_uids=uids, hooks=Hooks(on_launch_step=lambda n: at(n, "first")))
            # Construction gave nothing away: the seal's directories are this process's until the uid is known,
            # and every one of them is a state directory (guarded, handed over).
            assert {o for o, _m in owners(first.engine).values()} == {os.geteuid()}
            assert set(first.engine.seal_dirs) <= set(first.engine.state_dirs)
            await first.start()
            assert "preflight" in first.core.fences  # the fake, run as this process, refused a launch sealed for uid one
            seen["first_binding"] = await stop(first)
            await first.aclose()
            # What the first execution's engine would have written as its uid: its transcript, 0600.
            os.makedirs(os.path.dirname(lab.transcript))
            Path(lab.transcript).write_text(json.dumps({
                "type": "user", "uuid": "u1", "parentUuid": None, "sessionId": SID, "version": "2.1.283",
                "cwd": lab.project, "message": {"role": "user", "content": "x"}}) + "\n")
            for path in (os.path.dirname(os.path.dirname(lab.transcript)), os.path.dirname(lab.transcript),
                         lab.transcript):
                os.chown(path, one, -1)
            os.chmod(lab.transcript, 0o600)
            second = lab.controller(engine_uids=uids, hooks=Hooks(on_launch_step=lambda n: at(n, "second")))
            assert second.argv[-2:] == ["--resume", SID]
            await second.start()
            seen["second_binding"] = await stop(second)
            chain = [r for r in ClaimStore(str(lab.root / "claims")).read_chain(SeatKey("alpha", lab.project,
                                                                                      lab.project))
                     if getattr(r, "claim_id", None) is not None]
            seen["stopped"] = [(r.engine_uid, r.proof.kind) for r in chain if r.state is State.STOPPED]

    asyncio.run(main())
    for which, uid in (("first", one), ("second", two)):
        # At the spawn marker every directory the seal made is the execution's uid's, 0700, and the launch's
        # environment passes the seal's check as that uid's, and no longer as this process's.
        assert seen[which]["dirs"] == {k: (uid, 0o700) for k in ("HOME", "CLAUDE_CODE_TMPDIR", "CLAUDE_CONFIG_DIR")}
        assert seen[which]["sealed_for"] == [uid]
    assert seen["second"]["transcript"] == two  # the first uid's transcript handed to the second's
    assert seen["first_binding"]["engineUid"] == one and seen["second_binding"]["engineUid"] == two
    assert seen["stopped"] == [(one, ProofKind.COHORT), (two, ProofKind.COHORT)]


# ------------------------------------------------------------------------------- the live-session guard


@pytest.mark.parametrize("where", ["scratch in the live ~/.claude", "HOME the operator's home"])
def test_G1_claude_the_seals_home_config_and_temp_directories_are_guarded_before_they_are_made(
        tmp_path: Path, where: str) -> None:
    """Issue 32 item 1 "the live-session guard covers `~/.claude`": the engine's HOME, CLAUDE_CONFIG_DIR and
    CLAUDE_CODE_TMPDIR (the seal makes them, and gives them to the engine's uid) are state directories, each
    checked by the guard at construction before the seal makes anything: a scratch inside the operator's live
    `~/.claude` (the transcript in a configured config directory that is not live), or a scratch whose `home`
    is the operator's home (which holds `~/.claude`), refuses `live-session-refused` and nothing is made."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            live_home = lab.root / ("operator-home" if where.startswith("scratch") else "home")
            (live_home / ".claude").mkdir(parents=True, exist_ok=True)
            before = sorted(os.listdir(live_home / ".claude"))
            config = lab.root / "cfg"
            spec = ClaudeSpec(project=lab.project, seat="alpha", command=lab.spec.command, base_url=lab.spec.base_url,
                              api_key=FAKE_KEY, config_dir=str(config),
                              scratch=str(live_home / ".claude") if where.startswith("scratch") else str(lab.root))
            transcript = os.path.join(config, "projects", claude_slug(lab.project), f"{SID}.jsonl")
            placement = Placement(fixture_root=str(lab.root), claim_root=str(lab.root / "claims"),
                                  session_file=transcript, socket_dir=lab.socket_dir, home=str(live_home))
            with pytest.raises(Refusal) as refused:
                LaunchingController(placement, spec, None, verifier=FixtureVerifier(), cohort=lab.cohort,
                                    claims_owner=lab.liveness.runner())
            assert refused.value.code == "live-session-refused", refused.value.to_dict()
            rule = "live-location" if where.startswith("scratch") else "contains-live-location"
            assert refused.value.message.startswith(rule), refused.value.message
            assert sorted(os.listdir(live_home / ".claude")) == before  # nothing made in the live directory
            assert not (lab.root / "home" / "home").exists() and not (lab.root / "tmp").exists()

    asyncio.run(main())


def test_G3_claude_a_seal_directory_swapped_for_a_link_to_the_live_claude_dir_after_construction_refuses_at_bind(
        tmp_path: Path) -> None:
    """G3 for the seal's directories: HOME checked at construction, then replaced by a symlink to the operator's
    live `~/.claude`; `start()` refuses `live-session-refused` (changed-since-construction) at bind, before the
    claim is touched: nothing is reserved or launched, and the engine never runs with that HOME."""
    async def main() -> None:
        async with claude_lab(tmp_path) as lab:
            controller = lab.controller()
            home = controller.engine.env["HOME"]
            live = lab.root / "operator-home" / ".claude"
            live.mkdir()
            os.rmdir(home)
            os.symlink(live, home)
            with pytest.raises(Refusal) as refused:
                await controller.start()
            assert refused.value.code == "live-session-refused", refused.value.to_dict()
            assert "changed-since-construction" in refused.value.message or "live-location" in refused.value.message
            assert [e for e in lab.cohort.log if e.startswith("launch ")] == []
            assert os.listdir(live) == []

    asyncio.run(main())
