"""The lifecycle on the real Pi 0.85.1 (the real sealed Pi talking to the scripted model
server in the loopback-only namespace): a `LaunchingController` launches the pinned Pi under a writer claim in a
direct cgroup, the load check passes on the real binary's own startup append, a turn runs, a force stop
proves the stop and releases both keys with the proof's digest, recover reserves, and the launcher's call
resumes the same session with the real Pi loading the recorded leaf (K7, W8, K8's check on the real
binary) without replaying anything.

The engine runs as the unprivileged engine account (`cohorttest` by default: cgroup-cohort's
`testing.account`, a system account created once), as a
contained cohort must: an engine with its controller's uid could leave its cgroup, so no stop of it is ever
proven (cgroup-cohort "containment-not-held"). It runs a hard-linked copy of the pinned install
(`readable_install`: the checkout may sit under a 0700 home). The parent cgroup is made under the cgroup2
mount found in /proc/self/mountinfo and removed by its recorded name; every cohort is released by its
recorded reference; the fixture tree and the copy are removed by name."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import (
    Credentials,
    DirectCgroupLauncher,
    EngineLimits,
    FixtureVerifier,
    release_cohort,
)
from mosaic.controller import LaunchingController, PiSpec, Placement
from mosaic.controller.testing import FixtureTree, RawClient, readable_install, receipt_is
from mosaic.pi_rpc.testing import ModelServer
from mosaic.writer_claim import ClaimStore, ProofKind, SeatKey, SessionKey, State

WAIT = 60.0



def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.parametrize("uids", ["one account", "a uid per execution"])
def test_K7_W8_launch_stop_recover_and_resume_on_the_real_pi(scratch: Path, pi_dir: Path, model: ModelServer,
                                                              parent: str, engine_uid: Credentials, uids: str) -> None:
    """With "a uid per execution" (issue 28 item 3) the two executions run as two uids no passwd entry names,
    in the engine group, HOME and the agent dir given in the environment (Pi reads `process.env.HOME` first,
    `os.homedir()` only without it; it never asks for a passwd entry): the second appends to the session the
    first wrote, through the group (a tree executions share is the engine group's), and reads the credential
    store the first created 0600 in the agent dir (`auth.json`), which its launch handed over to its uid
    (`PiSpec.state_dirs`, as systemd's StateDirectory=; without it Pi failed the turn, EACCES)."""
    from mosaic.controller import EngineUids

    tree = FixtureTree(scratch / "fx")
    tree.make((engine_uid.uid, engine_uid.gid), model_url=model.base_url, group_writable=uids != "one account")
    state = tempfile.mkdtemp(prefix="mosaic-smoke-uids-")
    os.chmod(state, 0o700)
    allocator = EngineUids(STORM_UIDS + 8, 4, engine_uid.gid, state) if uids != "one account" else None
    tree.root.chmod(0o755)
    project, session, session_id = tree.project, tree.session, tree.session_id
    installed = readable_install(pi_dir, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-smoke-sock-")
    os.chmod(sockets, 0o700)
    launcher = DirectCgroupLauncher(parent, sockets, engine=engine_uid)
    env = tree.engine_env()
    refs = []

    def controller(eligibility: str | None = None) -> LaunchingController:
        socket_dir = tempfile.mkdtemp(prefix="c-", dir=sockets)
        return LaunchingController(
            Placement(**tree.placement(socket_dir)),
            PiSpec(env=env, pi_dir=str(installed), provider="fakeprov", model="fake-model-1",
                       state_dirs=(str(tree.root / "agent"), str(tree.root / "home"))),
            launcher, verifier=FixtureVerifier(), stop_grace=2.0, eligibility=eligibility, engine_uids=allocator)

    async def stop(c: RawClient, auth: dict[str, Any]) -> dict[str, Any]:
        await c.force_stop(auth)
        return await c.stop_outcome(WAIT)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        first = controller()
        await first.start()
        assert first.execution is not None and first.execution.ref is not None
        refs.append(first.execution.ref)
        try:
            c = await RawClient.connect(first.socket_path)
            observed = (await c.call("observe"))["result"]
            out["first_binding"] = observed["binding"]
            auth = await c.control()
            reply = await c.call("prompt", **auth, clientRequestId="hello", text="Say hello")
            assert reply["result"]["outcome"] == "admitted", reply
            await c.until(receipt_is("finished"), WAIT)
            out["first_stop"] = await stop(c, auth)
            out["proofs"] = c.records("cohortProof")
            cid = await c.confirm("recover", auth)
            recovered = await c.call("recover", incarnation=auth["incarnation"], confirmation=cid)
            assert "result" in recovered, recovered
            out["record"] = recovered["result"]["eligibility"]
            out["first_incarnation"] = auth["incarnation"]
            await c.close()
        finally:
            await first.aclose()
        out["lines_before"] = len(lines(session))
        second = controller(eligibility=out["record"]["id"])
        await second.start()
        assert second.execution is not None and second.execution.ref is not None
        refs.append(second.execution.ref)
        try:
            c = await RawClient.connect(second.socket_path)
            observed = (await c.call("observe"))["result"]
            out["second"] = {"mode": second.mode, "binding": observed["binding"], "incarnation": observed["incarnation"],
                             "receipts": observed["receipts"], "claim": second.execution.claim.claim_id}
            auth = await c.control()
            reply = await c.call("prompt", **auth, clientRequestId="again", text="Say hello")
            assert reply["result"]["outcome"] == "admitted", reply
            await c.until(receipt_is("finished"), WAIT)
            out["second_stop"] = await stop(c, auth)
            await c.close()
        finally:
            await second.aclose()
        return out

    try:
        out = asyncio.run(main())
    finally:
        for ref in refs:
            release_cohort(ref, force=True)
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)

    if allocator is not None:  # two executions, two uids of the range, each on its binding and in its claim
        assert out["first_binding"]["engineUid"] == STORM_UIDS + 8
        assert out["second"]["binding"]["engineUid"] == STORM_UIDS + 9
    else:
        assert out["first_binding"]["engineUid"] is None and out["second"]["binding"]["engineUid"] is None
    # The load check passed on the real binary (its startup append included): admission opened.
    assert out["first_binding"]["state"] == "active" and out["first_binding"]["admission"] == "open"
    assert out["first_stop"]["state"] == "stopped"
    (proof,) = out["proofs"]
    record = out["record"]
    # Resumed: a new claim and incarnation, generation + 1, the same conversation and leaf, the real Pi
    # loaded the recorded leaf (the load check let admission open).
    second = out["second"]
    assert second["mode"] == "recovered" and second["claim"] == record["claim_id"]
    assert second["incarnation"] != out["first_incarnation"]
    assert second["binding"]["state"] == "active" and second["binding"]["admission"] == "open"
    assert second["binding"]["generation"] == record["generation"]
    assert second["receipts"] == []  # nothing replayed
    users = [e["message"]["content"][0]["text"] for e in lines(session)
             if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert users == ["Say hello", "Say hello"]  # the first turn once, the new turn once: no replay
    assert out["second_stop"]["state"] == "stopped"
    store = ClaimStore(str(tree.claims))
    seat = SeatKey("seat", str(project), str(project))
    chain = [r for r in store.read_chain(seat) if getattr(r, "claim_id", None) is not None]
    first_stopped = [r for r in chain if r.claim_id != record["claim_id"] and r.state is State.STOPPED]
    assert first_stopped and first_stopped[-1].proof.kind is ProofKind.COHORT
    assert first_stopped[-1].proof.digest == proof["proof"]["verification"]["digest"]
    pair = store.observe(seat, SessionKey("pi", session_id))
    assert pair.free and pair.seat.head.claim_id == record["claim_id"]


K5_RUNS = 30


def _longtool(req: Any) -> Any:
    """A bash tool call that runs far longer than any stop takes (the force stop ends it)."""
    from mosaic.pi_rpc.testing import StreamText, StreamToolCall

    if req.last_tool_text is not None:
        return StreamText(("the tool ended",))
    return StreamToolCall(f"call_long_{req.index}", "bash", (json.dumps({"command": "sleep 120"}),))


def test_K5_a_tool_call_open_when_the_force_stop_began_is_an_uncertain_effect_every_time_on_the_real_pi(
        scratch: Path, pi_dir: Path, parent: str, engine_uid: Credentials) -> None:
    """K5 on the real Pi, 30 times: a bash tool call is running when the force stop begins. Pi handles the
    stop's SIGTERM and sometimes reports the tool ended before it exits (2 of 34 runs once lost the effect
    that way); the effect report must list the call in every run, and the stop must be proven."""
    from mosaic.pi_rpc.testing import DEFAULT_SCENARIOS, Scenario

    installed = readable_install(pi_dir, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-smoke-sock-")
    os.chmod(sockets, 0o700)
    launcher = DirectCgroupLauncher(parent, sockets, engine=engine_uid)
    refs = []
    reports: list[dict[str, Any]] = []
    tool_ends_seen = 0
    scenarios = (Scenario("longtool", "LONGTOOL", _longtool, "bash `sleep 120`"), *DEFAULT_SCENARIOS)

    async def one(n: int, model_url: str) -> None:
        nonlocal tool_ends_seen
        tree = FixtureTree(scratch / f"fx-{n}")
        tree.make((engine_uid.uid, engine_uid.gid), model_url=model_url)
        tree.root.chmod(0o755)
        socket_dir = tempfile.mkdtemp(prefix="c-", dir=sockets)
        controller = LaunchingController(
            Placement(**tree.placement(socket_dir)),
            PiSpec(env=tree.engine_env(), pi_dir=str(installed), provider="fakeprov", model="fake-model-1"),
            launcher, verifier=FixtureVerifier(), stop_grace=2.0)
        await controller.start()
        assert controller.execution is not None and controller.execution.ref is not None
        refs.append(controller.execution.ref)
        try:
            c = await RawClient.connect(controller.socket_path)
            if n == 0:
                # Pi runs every turn here under the default limits: where no memory controller holds,
                # RLIMIT_AS stands in, and it must leave room for the ~21 GiB of address space Pi reserves (under
                # 21 GiB its model requests fail: cgroup-cohort README "Limits").
                held = (await c.call("observe"))["result"]["binding"]["limits"]
                if held["memory"]["via"] == "rlimit":
                    assert held["memory"]["value"] == EngineLimits().address_space, held
                    with open(f"/proc/{controller.execution.ref.engine.pid}/limits") as f:
                        row = next(line for line in f if line.startswith("Max address space"))
                    assert row.split()[3:5] == [str(EngineLimits().address_space)] * 2, row
            auth = await c.control()
            await c.call("prompt", **auth, clientRequestId="long", text="LONGTOOL please")
            await c.until(lambda m: m.get("method") == "event" and m["params"]["eventType"] == "tool-start", WAIT)
            await c.force_stop(auth)
            final = await c.stop_outcome(WAIT)
            assert final["state"] == "stopped", final
            (report,) = c.records("effectReport")
            reports.append(report)
            tool_ends_seen += sum(1 for e in c.events() if e["eventType"] == "tool-end")
            await c.close()
        finally:
            await controller.aclose()

    async def main() -> None:
        from mosaic.pi_rpc.testing import ModelServer as Server

        with Server(scenarios=scenarios) as server:
            for n in range(K5_RUNS):
                await one(n, server.base_url)

    try:
        asyncio.run(main())
    finally:
        for ref in refs:
            release_cohort(ref, force=True)
        shutil.rmtree(sockets, ignore_errors=True)
    assert len(reports) == K5_RUNS
    for report in reports:
        assert [(e["toolName"], e["state"]) for e in report["effects"]] == [("bash", "uncertain")], report
        assert report["rollback"] is False and report["network"] == "uncertain"
    print(f"K5 x{K5_RUNS}: the engine reported the tool ended before exiting in {tool_ends_seen} runs")


# The storm test's own budget of tasks (RLIMIT_NPROC here: this host's cgroup2 offers no pids controller). A
# storm fills it in a moment; Pi itself is ~11 threads.
STORM_PIDS = 96
# The engine uid range of the storm test (no passwd entry names one: checked).
STORM_UIDS = 64200
STORM_BOUND = 90.0


def _tool(command: str, after: str) -> Any:
    from mosaic.pi_rpc.testing import StreamText, StreamToolCall

    def respond(req: Any) -> Any:
        if req.last_tool_text is not None:
            return StreamText((after,))
        return StreamToolCall(f"call_{req.index}", "bash", (json.dumps({"command": command}),))
    return respond


def _tasks_of(uid: int) -> int:
    """How many tasks (threads included: what RLIMIT_NPROC counts) processes of real uid `uid` hold now."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                rows = {k: v.split() for k, _, v in (line.partition(":") for line in f)}
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(rows["Uid"][0]) == uid:
            total += int(rows["Threads"][0])
    return total


def test_a_fork_storm_in_one_conversation_and_another_conversations_bash_tool_on_the_real_pi(
        scratch: Path, pi_dir: Path, parent: str, engine_uid: Credentials) -> None:
    """Issue 28 item 3: conversation A's bash tool starts a fork storm (`sleep`s in the background, as fast as
    bash forks, forever); while it holds its whole budget of tasks, conversation B's real Pi runs a bash tool.
    On this host the pids limit is RLIMIT_NPROC (no pids controller), which the kernel counts per uid. With one
    engine account for both (the control arm, as before) B's tool cannot start: Pi reports `spawn /bin/bash
    EAGAIN`. With a uid per execution (`EngineUids`) each conversation has its own budget: B's tool runs and
    says `b-tool-ran-42`. In both arms both engines are then force stopped with a proof (membership complete,
    K13's canary refused for each), and nothing of A's uid is left."""
    import pwd  # noqa: PLC0415

    from mosaic.controller import EngineUids
    from mosaic.pi_rpc.testing import DEFAULT_SCENARIOS, Scenario
    from mosaic.pi_rpc.testing import ModelServer as Server

    for uid in range(STORM_UIDS, STORM_UIDS + 4):
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)
    installed = readable_install(pi_dir, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-smoke-sock-")
    os.chmod(sockets, 0o700)
    state = tempfile.mkdtemp(prefix="mosaic-smoke-uids-")
    os.chmod(state, 0o700)
    launcher = DirectCgroupLauncher(parent, sockets, engine=engine_uid)
    refs = []
    storm = ("for i in $(seq 100000); do sleep 600 </dev/null >/dev/null 2>&1 & done; echo storm-ended")
    scenarios = (Scenario("storm", "STORM", _tool(storm, "storm over"), "a fork storm"),
                 Scenario("btool", "BTOOL", _tool("echo b-tool-ran-$((6*7))", "b tool done"), "a bash tool"),
                 *DEFAULT_SCENARIOS)

    async def arm(name: str, uids: EngineUids | None, model_url: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        controllers: list[LaunchingController] = []
        clients: list[RawClient] = []
        try:
            for side in ("a", "b"):
                tree = FixtureTree(scratch / f"{name}-{side}")
                tree.make((engine_uid.uid, engine_uid.gid), model_url=model_url, group_writable=True)
                tree.root.chmod(0o755)
                socket_dir = tempfile.mkdtemp(prefix="c-", dir=sockets)
                controller = LaunchingController(
                    Placement(**tree.placement(socket_dir)),
                    PiSpec(env=tree.engine_env(), pi_dir=str(installed), provider="fakeprov",
                               model="fake-model-1", limits=EngineLimits(pids=STORM_PIDS)),
                    launcher, verifier=FixtureVerifier(), stop_grace=2.0, engine_uids=uids)
                await controller.start()
                controllers.append(controller)
                assert controller.execution is not None and controller.execution.ref is not None
                refs.append(controller.execution.ref)
                assert controller.execution.ref.containment.held  # K13, for each engine uid
                clients.append(await RawClient.connect(controller.socket_path))
            a, b = clients
            ids = [c.execution.ref.engine.pid for c in controllers]  # type: ignore[union-attr]
            uid_of = []
            for pid in ids:
                with open(f"/proc/{pid}/status") as f:
                    uid_of.append(int(next(line for line in f if line.startswith("Uid:")).split()[1]))
            out["uids"] = uid_of
            out["bindings"] = [(await c.call("observe"))["result"]["binding"] for c in clients]
            auth_a, auth_b = await a.control(), await b.control()
            await a.call("prompt", **auth_a, clientRequestId="storm", text="STORM please")
            await a.until(lambda m: m.get("method") == "event" and m["params"]["eventType"] == "tool-start", WAIT)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + STORM_BOUND
            while _tasks_of(uid_of[0]) < STORM_PIDS - 2:  # the storm reaches its budget (bounded wait)
                assert loop.time() < deadline, f"the storm held only {_tasks_of(uid_of[0])} tasks"
                await asyncio.sleep(0.2)
            out["storm_tasks"] = _tasks_of(uid_of[0])
            await b.call("prompt", **auth_b, clientRequestId="btool", text="BTOOL please")
            await b.until(receipt_is("finished"), STORM_BOUND)
            ends = [e for e in b.events() if e["eventType"] == "tool-end"]
            out["b_tool"] = [str(part.get("text")) for e in ends for part in e["payload"]["result"]["content"]]
            out["storm_still"] = _tasks_of(uid_of[0])
            out["stops"] = []
            for c, auth in ((a, auth_a), (b, auth_b)):
                await c.force_stop(auth)
                out["stops"].append(await c.stop_outcome(STORM_BOUND))
            out["storm_proof"] = a.records("cohortProof")
            out["after_stop"] = _tasks_of(uid_of[0]) if uids is not None else None
        finally:
            for c in clients:
                await c.close()
            for controller in controllers:
                await controller.aclose()
        return out

    try:
        async def main() -> tuple[dict[str, Any], dict[str, Any]]:
            with Server(scenarios=scenarios) as server:
                shared = await arm("shared", None, server.base_url)
                own = await arm("own", EngineUids(STORM_UIDS, 4, engine_uid.gid, state), server.base_url)
            return shared, own

        shared, own = asyncio.run(main())
    finally:
        for ref in refs:
            release_cohort(ref, force=True)
        shutil.rmtree(sockets, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)
    print(f"storm: shared account {shared['storm_tasks']} tasks, B's tool {shared['b_tool']}; "
          f"own uids {own['uids']}, {own['storm_tasks']} tasks, B's tool {own['b_tool']}")
    # The control arm: one account, one budget: the storm took it, and B's tool could not start.
    assert shared["uids"] == [engine_uid.uid] * 2
    assert shared["b_tool"] and "EAGAIN" in " ".join(shared["b_tool"]), shared["b_tool"]
    assert "b-tool-ran-42" not in " ".join(shared["b_tool"])
    # A uid per execution: the storm still holds A's whole budget while B's tool runs.
    assert own["uids"] == [STORM_UIDS, STORM_UIDS + 1]
    assert [b["engineUid"] for b in own["bindings"]] == own["uids"]
    assert own["storm_still"] >= STORM_PIDS - 2
    assert own["b_tool"] == ["b-tool-ran-42\n"] or "b-tool-ran-42" in " ".join(own["b_tool"]), own["b_tool"]
    for result in (shared, own):
        assert [s["state"] for s in result["stops"]] == ["stopped", "stopped"], result["stops"]
        (proof,) = result["storm_proof"]
        assert proof["proof"]["membershipComplete"] is True  # the storm's sleeps died of the TERM phase or the kill
    assert own["after_stop"] == 0  # nothing of A's uid is left: the uid can be proven free again
