"""The lifecycle on the real parts (brief §2, §6): writer-claim on a real file system, cgroup-cohort on the
real cgroup2 tree (direct cgroup and systemd scope), real controller processes killed at exact steps, and
pi-rpc's fake engine as the engine, in the cohort, as the engine uid. Fixture ids are in the names."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from lifecycle_helpers import ControllerProc, World, client, dead

from mosaic.cgroup_cohort import CohortRef
from mosaic.cgroup_cohort.proof import proof_json_schema
from mosaic.cgroup_cohort.testing import alive, populated
from mosaic.controller.client import AdmissionUnknown, Admitted, ControllerClient, Refused, RemoteRefusal
from mosaic.controller.testing import RawClient, event_is, receipt_is, stop_is
from mosaic.safe_open import ProcessRef, current_host
from mosaic.writer_claim import ClaimStore, ProofKind, SeatKey, SessionKey, State

WAIT = 60.0


def keys(world: World) -> tuple[SeatKey, SessionKey]:
    return SeatKey("seat", str(world.project), str(world.project)), SessionKey("pi", world.session_id)


def heads(world: World) -> tuple[Any, Any]:
    seat, session = keys(world)
    with ClaimStore(str(world.claims)) as store:  # closed: a held claim root keeps its file system busy
        pair = store.observe(seat, session)
    return pair.seat.head, pair.session.head


def members_of(ref: CohortRef, world: World) -> list[ProcessRef]:
    """Every process in the engine cgroup now (as the test sees it)."""
    _, host = world.lab.paths(ref.unit)
    found = []
    for dirpath, _dirs, files in os.walk(os.path.join(host, "engine")):
        if "cgroup.procs" in files:
            with open(os.path.join(dirpath, "cgroup.procs")) as f:
                for pid in f.read().split():
                    with open(f"/proc/{pid}/stat") as s:
                        text = s.read()
                    found.append(ProcessRef(int(pid), int(text[text.rfind(")") + 1:].split()[19])))
    return found


async def force_stop(c: RawClient, auth: dict[str, Any] | None = None) -> dict[str, Any]:
    """Confirm and request a force stop; takes control first unless `auth` says this client has it."""
    return await c.force_stop(auth or await c.control())


def _binding_limits_hold(binding: dict[str, Any], ref: CohortRef, world: World) -> None:
    """The binding record says where each limit the PiSpec asked holds (schema-valid), and the
    engine's cgroup or its rlimits show exactly that: the cgroup where the unit's parent enables the
    controller, else the rlimit (cpu: none)."""
    schema = json.loads((Path(os.environ["MOSAIC_REPO"]) / "schemas" / "chat-01-control.schema.json").read_text())
    jsonschema.validate(binding, {"$ref": "#/$defs/binding", "$defs": schema["$defs"]})
    _, host = world.lab.paths(ref.unit)
    with open(os.path.join(host, "cgroup.controllers")) as f:
        offered = set(f.read().split())
    held = binding["limits"]
    assert {n: h["via"] for n, h in held.items()} == {
        "pids": "cgroup" if "pids" in offered else "rlimit", "memory": "cgroup" if "memory" in offered else "rlimit",
        "data": "rlimit", "cpu": "cgroup" if "cpu" in offered else "none", "core": "rlimit"}
    with open(f"/proc/{ref.engine.pid}/limits") as f:
        rows = {line[:26].strip(): line[26:].split()[:2] for line in f}
    if held["pids"]["via"] == "rlimit":
        assert held["pids"]["value"] == LIMITS["pids"] and rows["Max processes"] == [str(LIMITS["pids"])] * 2
    else:
        with open(os.path.join(host, "engine", "pids.max")) as f:
            assert f.read().strip() == str(LIMITS["pids"]) == str(held["pids"]["value"])
    assert rows["Max core file size"] == ["0", "0"]
    assert held["data"]["value"] == LIMITS["data"] and rows["Max data size"] == [str(LIMITS["data"])] * 2


# Not the defaults, so the test sees that the PiSpec's limits are the ones that reach the engine.
LIMITS = {"pids": 700, "memory": 1 << 30, "addressSpace": 9 << 30, "cpu": 0.5, "core": 0, "data": 2 << 30}


def test_K1_force_stop_kills_a_setsid_child_and_releases_the_claim_with_the_proofs_digest(world: World) -> None:
    proc = world.start(limits=LIMITS)
    assert proc.first.get("mode") == "new", proc.first
    ref = proc.ref
    assert ref is not None and ref.unit == f"cohort-{proc.first['claimId']}.scope"  # the recorded unit name

    async def main() -> dict[str, Any]:
        c = await client(proc)
        _binding_limits_hold((await c.call("observe"))["result"]["binding"], ref, world)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="d1", text="DAEMON please")
        await c.until(receipt_is("finished"), WAIT)
        members = members_of(ref, world)
        assert len(members) >= 2  # the engine and its setsid daemon
        issued = await c.call("issue-confirmation", incarnation=auth["incarnation"], operation="force-stop")
        cid = issued["result"]["confirmation"]["confirmation"]
        summary = issued["result"]["confirmation"]["summary"]
        assert summary["unit"] == ref.unit
        # what the stop will kill, counted now (not a proof): the engine and its daemon in the cgroup
        assert summary["members"] == len(members) and summary["membersComplete"] is True, summary
        await c.call("answer-confirmation", incarnation=auth["incarnation"], confirmation=cid, answer="confirm")
        stop = (await c.call("force-stop", incarnation=auth["incarnation"], confirmation=cid))["result"]["stop"]
        final = await c.stop_outcome()
        proofs = c.records("cohortProof")
        await c.close()
        return {"members": members, "stop": stop, "final": final, "proofs": proofs}

    out = asyncio.run(main())
    assert out["final"]["state"] == "stopped", out["final"]
    assert dead(out["members"])  # the setsid daemon too: the cgroup, not the process group
    (proof,) = out["proofs"]
    jsonschema.validate(proof["proof"], proof_json_schema())
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):
        assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
        assert head.proof.digest == proof["proof"]["verification"]["digest"]  # byte for byte
        assert head.stop.stop_id == out["stop"]["stop"]
    # The daemon ignored SIGTERM: it was frozen, enumerated and killed in the kill phase, and the proof
    # lists it with its death (the engine itself ended at TERM: it exited before the freeze).
    listed = {ProcessRef(m["pid"], m["startTime"]) for m in proof["proof"]["members"]}
    assert listed and listed <= set(out["members"]) and proof["proof"]["membershipComplete"] is True


@pytest.mark.parametrize("step", ["launched", "active"])
def test_W6_W13_a_controller_killed_after_the_spawn_leaves_an_orphan_served_uncertain(world: World, step: str) -> None:
    """Crash after the engine spawned (before active: W13; after: W6, mid-life): the restart finds the
    reservation or active claim with a live unit: uncertain, no second spawn, prompts refuse, force stop
    of the recorded scope is the only way on."""
    first = world.start(die_at=step)
    assert first.first == {"dying": step}
    assert first.died() == -9
    second = world.start()
    assert second.first.get("mode") == "orphan", second.first
    assert second.ref is not None
    seat_head, _ = heads(world)
    assert seat_head.state is State.UNCERTAIN and seat_head.claim_id == second.first["claimId"]
    # The unit is there (the shim holds it; Pi itself exits on the stdin EOF the crash made, FACTS (b)), and
    # it is the one cohort of this claim: no second spawn.
    assert os.path.isdir(world.lab.paths(second.ref.unit)[1])
    assert [r for r in world.refs if r.unit == second.ref.unit] == [second.ref]

    async def main() -> None:
        c = await client(second)
        observed = (await c.call("observe"))["result"]
        assert observed["binding"]["state"] == "uncertain" and observed["binding"]["admission"] == "closed"
        assert observed["binding"]["limits"] is None  # launched by the dead incarnation: unknown, not "none"
        token = observed["incarnation"]
        took = await c.call("acquire-recovery-control", incarnation=token)
        generation = took["result"]["generation"]
        refused = await c.call("prompt", incarnation=token, generation=generation, clientRequestId="p", text="hi")
        assert refused["error"]["data"]["refusal"]["code"] == "fenced"
        await c.force_stop({"incarnation": token, "generation": generation})
        await c.stop_outcome()
        assert c.records("stop")[-1]["state"] == "stopped"
        await c.close()

    asyncio.run(main())
    seat_head, session_head = heads(world)
    assert seat_head.state is State.STOPPED and session_head.state is State.STOPPED


def test_H20_a_prompt_written_whole_whose_ack_died_with_the_controller_is_outcome_unknown_and_never_resent(
        world: World) -> None:
    """H20: the prompt's line is wholly in the engine's pipe and the controller dies before its core reads the
    ack. The restart finds an orphan (W6): uncertain, no second spawn. The client library's request is
    outcome-unknown, never resent; its exact retry under the old token refuses stale-incarnation."""
    text = "Say hello, H20"

    async def main() -> tuple[ControllerProc, ControllerProc]:
        first = await asyncio.to_thread(world.start, die_at="prompt-written")
        a = await ControllerClient.connect(first.socket, ping_interval=None)
        try:
            await a.observe()
            await a.takeover()
            old_token = a.incarnation
            outcome = await a.prompt(text, client_request_id="h20")
            # Admitted (the reply left before the crash) or outcome-unknown (it did not): never refused.
            assert isinstance(outcome, (Admitted, AdmissionUnknown)), outcome
            entry = outcome.request
            await asyncio.wait_for(a.wait_until(lambda: not a.connected), WAIT)
            assert await asyncio.to_thread(first.next_line) == {"dying": "prompt-written"}
            assert await asyncio.to_thread(first.died) == -9

            second = await asyncio.to_thread(world.start)
            assert second.first.get("mode") == "orphan", second.first
            again = await asyncio.wait_for(a.reconnect(second.socket), WAIT)
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
            return first, second
        finally:
            await a.aclose()

    first, second = asyncio.run(main())
    seat_head, _ = heads(world)
    assert seat_head.state is State.UNCERTAIN and seat_head.claim_id == second.first["claimId"]
    assert second.ref is not None and second.ref == first.ref  # the one cohort of this claim: no second spawn
    assert {r.unit for r in world.refs} == {second.ref.unit}
    # Nothing resent: the text is in the session file at most once (Pi may have run it before the crash's
    # stdin EOF ended it), and the orphan has no engine link to write on.
    with open(world.session, encoding="utf-8") as f:
        users = [line for line in f if '"role":"user"' in line.replace(" ", "") and text in line]
    assert len(users) <= 1, users


def test_disconnect_settle_an_abort_ack_idle_engine_eof_and_SIGTERM_never_release_the_claim(world: World) -> None:
    """Brief §2 "What never releases a claim": after each of these the claim is the same claim, on both keys,
    and never stopped; only a force stop with a proof (or a boot proof) ends it."""
    proc = world.start()
    ref = proc.ref
    assert ref is not None
    claim_id = proc.first["claimId"]

    def unreleased(after: str) -> None:
        for head in heads(world):
            assert head.claim_id == claim_id and head.state in (State.ACTIVE, State.UNCERTAIN), (after, head)

    async def main() -> None:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="s", text="Say hello")
        await c.until(event_is("run-settled"), WAIT)  # agent_settled
        await c.until(receipt_is("finished"), WAIT)
        unreleased("agent_settled")
        await c.call("prompt", **auth, clientRequestId="slow", text="SLOW please")
        await c.until(receipt_is("working"), WAIT)
        reply = await c.call("interrupt", **auth)  # R3-1: clear_queue, then abort, acked; the run settles
        assert "result" in reply, reply
        stop = reply["result"]["stop"]
        ended = await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "stop"
                              and n["params"]["stop"] == stop["stop"] and n["params"]["state"] != "stopping", WAIT)
        assert ended["params"]["state"] == "reconciled", ended
        unreleased("an abort ack")
        await c.close()  # the controlling connection goes away
        await asyncio.sleep(1.5)  # idle, nobody connected
        unreleased("disconnect and idle")
        c = await client(proc)
        await c.call("observe")
        os.kill(ref.engine.pid, 9)  # the engine ends on its own: EOF on its stdout
        await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "binding"
                      and n["params"]["state"] == "uncertain", WAIT)
        unreleased("engine EOF")
        await c.close()

    asyncio.run(main())
    proc.proc.terminate()  # SIGTERM: the controller stops serving and exits
    assert proc.died() == 0
    unreleased("SIGTERM")
    assert os.path.isdir(world.lab.paths(ref.unit)[1])  # the cohort stays, for a force stop to prove it empty


def test_W14_a_crash_after_the_reservation_is_classified_no_unit_and_the_next_launch_goes(world: World) -> None:
    first = world.start(die_at="reserved")
    assert first.died() == -9
    second = world.start()
    assert second.first.get("mode") == "new", second.first  # restart freed it (stopped, no-unit), then launched
    seat = ClaimStore(str(world.claims)).read_chain(keys(world)[0])
    stopped = [r for r in seat if getattr(r, "state", None) is State.STOPPED]
    assert stopped and stopped[0].proof.kind is ProofKind.NO_UNIT


def test_W20_a_crash_after_the_spawn_marker_with_no_unit_stays_uncertain_and_refuses_launch(world: World) -> None:
    first = world.start(die_at="spawn-marker")
    assert first.died() == -9
    second = world.start()
    assert second.first.get("refused", {}).get("code") == "unsafe-replacement", second.first
    seat_head, _ = heads(world)
    assert seat_head.state is State.UNCERTAIN  # only a boot proof moves it on


@pytest.mark.parametrize("phase", ["term", "kill"])
def test_K10_K11_a_controller_killed_during_force_stop_is_restarted_and_reruns_from_TERM(world: World,
                                                                                           phase: str) -> None:
    """K11 (killed once the stop ID, the confirmation and phase term are recorded, before the identity check
    and SIGTERM: term), K10 (between the TERM and kill phases: TERM sent, the grace over, the kill phase
    recorded and not begun: kill; mutant 23 takes that as done): the restart checks the invocation ID and
    re-runs from TERM for the same stop."""
    proc = world.start(die_at=phase)
    ref = proc.ref
    assert ref is not None

    async def main() -> str:
        c = await client(proc)
        stop = await force_stop(c)
        return str(stop["stop"])

    stop_id = asyncio.run(main())
    assert proc.died() == -9
    seat_head, _ = heads(world)
    assert seat_head.state is State.STOPPING and seat_head.stop.stop_id == stop_id
    assert seat_head.stop.phase == phase
    restarted = world.start()
    assert restarted.first.get("mode") == "continued-stop", restarted.first
    seat_head, session_head = heads(world)
    assert seat_head.state is State.STOPPED and session_head.state is State.STOPPED
    assert seat_head.stop.stop_id == stop_id  # the same stop record, continued
    evidence = [json.loads(x) for x in open(restarted.args["evidence"]).read().splitlines()] if os.path.exists(
        restarted.args["evidence"]) else []
    assert not [e for e in evidence if e.get("kind") == "error"]
    assert not alive(ref.engine)


def test_K4_two_controllers_stop_one_the_other_still_answers(world: World, tmp_path: Any) -> None:
    other = World(root=world.root / "second", lab=world.lab, vendored=world.vendored, run_marker=world.run_marker)
    os.makedirs(other.root)
    other.make()
    try:
        a, b = world.start(), other.start()
        assert a.ref is not None and b.ref is not None and a.ref.unit != b.ref.unit

        async def main() -> None:
            ca, cb = await client(a), await client(b)
            await force_stop(ca)
            await ca.until(lambda n: stop_is("stopped")(n), WAIT)
            auth = await cb.control()
            reply = await cb.call("prompt", **auth, clientRequestId="still", text="Say hello")
            assert reply["result"]["outcome"] == "admitted"
            await cb.until(receipt_is("finished"), WAIT)
            await ca.close()
            await cb.close()

        asyncio.run(main())
        assert populated(os.path.join(world.lab.paths(b.ref.unit)[1], "engine"))
        # The stopped one's cgroup is gone (released and removed by its recorded identity) or empty.
        # Its release may still be removing it in the background: a read that finds it gone counts as gone.
        stopped_engine = os.path.join(world.lab.paths(a.ref.unit)[1], "engine")
        try:
            assert not populated(stopped_engine)
        except FileNotFoundError:
            pass  # gone
    finally:
        problems = other.cleanup()
        assert not problems, problems


def test_K5_a_tool_call_open_at_the_stop_is_an_uncertain_effect(world: World) -> None:
    proc = world.start()

    async def main() -> dict[str, Any]:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="t", text="LONGTOOL please")
        await c.until(event_is("tool-start"), WAIT)
        await force_stop(c, auth)
        await c.stop_outcome()
        (report,) = c.records("effectReport")
        await c.close()
        return report

    report = asyncio.run(main())
    (effect,) = report["effects"]
    assert effect["toolName"] == "bash" and effect["state"] == "uncertain" and report["rollback"] is False


def test_K5_a_tool_that_starts_in_the_term_grace_and_is_open_at_the_stops_end_is_an_uncertain_effect(
        world: World) -> None:
    """K5's union, its second half, on the real kernel: the engine (the fake behind term_grace_relay.py) has
    started a tool call, but the controller reads its start only once the stop's TERM reached the cohort;
    the relay stays until the kill phase, so the tool is open when the stop ends. No tool was open when the
    force stop began; the effect report lists this one, uncertain."""
    held = world.root / "relay"
    held.mkdir()
    os.chown(held, world.lab.engine.uid, world.lab.engine.gid)
    marker = held / "holding"
    fake = ["/usr/bin/python3", "-m", "mosaic.pi_rpc.testing.fake_engine", "--fake-scenarios", "cohort_scenarios:SCENARIOS"]
    proc = world.start(engine_command=["/usr/bin/python3", "-m", "term_grace_relay", str(marker), *fake], grace=5.0)

    async def main() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="t", text="LONGTOOL please")
        for _ in range(int(WAIT / 0.05)):  # until the relay holds the tool's start (bounded)
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        else:
            raise TimeoutError(f"the engine never started the tool within {WAIT}s")
        assert not any(e["eventType"] == "tool-start" for e in c.events())  # nothing open when the stop begins
        await force_stop(c, auth)
        await c.stop_outcome()
        reports = c.records("effectReport")
        notes = list(c.notes)
        await c.close()
        assert len(reports) == 1, reports
        return reports[0], notes

    report, notes = asyncio.run(main())
    kinds = [(n["method"], n["params"].get("eventType") or n["params"].get("type")) for n in notes]
    assert ("event", "tool-start") in kinds and ("record", "stop") in kinds
    assert kinds.index(("event", "tool-start")) > kinds.index(("record", "stop"))  # read during the stop
    assert ("event", "tool-end") not in kinds
    assert [(e["toolName"], e["state"]) for e in report["effects"]] == [("bash", "uncertain")]
    assert report["rollback"] is False


def test_H16_W12_a_second_controller_for_the_same_session_refuses_and_the_first_is_untouched(world: World) -> None:
    first = world.start()
    before = heads(world)
    second = world.start()
    assert second.first["refused"]["code"] == "already-active", second.first
    assert heads(world)[0].number == before[0].number  # nothing published over the first

    async def main() -> None:
        c = await client(first)
        auth = await c.control()
        reply = await c.call("prompt", **auth, clientRequestId="ok", text="Say hello")
        assert reply["result"]["outcome"] == "admitted"
        await c.until(receipt_is("finished"), WAIT)
        await c.close()

    asyncio.run(main())


def test_K15_the_shim_gone_makes_the_stop_uncertain_never_stopped(world: World) -> None:
    proc = world.start()
    ref = proc.ref
    assert ref is not None and ref.shim is not None
    os.kill(ref.shim.pid, 9)

    async def main() -> dict[str, Any]:
        c = await client(proc)
        await force_stop(c)
        final = await c.stop_outcome()
        await c.close()
        return final

    final = asyncio.run(main())
    assert final["state"] == "uncertain" and final["reason"] in ("shim-gone", "identity-unavailable")
    seat_head, _ = heads(world)
    assert seat_head.state is State.UNCERTAIN  # never released without a proof


def _daemon_pid(world: World) -> int:
    """The setsid daemon's pid, from the tool result the engine persisted (`started <pid>`)."""
    for line in world.session.read_text().splitlines():
        entry = json.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "toolResult":
            for part in message.get("content") or []:
                text = part.get("text", "") if isinstance(part, dict) else ""
                if text.startswith("started "):
                    return int(text.split()[1])
    raise AssertionError("no daemon pid in the session file")


def test_K2_K1_on_the_process_group_fallback_is_uncertain_never_stopped(world: World) -> None:
    if world.lab.path != "direct":
        pytest.skip("K2 runs on the process-group launcher whatever the lab's route: once, under the direct route")
    proc = world.start(route="pgroup")
    daemon: ProcessRef | None = None
    try:
        async def main() -> dict[str, Any]:
            c = await client(proc)
            auth = await c.control()
            await c.call("prompt", **auth, clientRequestId="d1", text="DAEMON please")
            await c.until(receipt_is("finished"), WAIT)
            await force_stop(c, auth)
            final = await c.stop_outcome()
            await c.close()
            return final

        final = asyncio.run(main())
        pid = _daemon_pid(world)
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
        daemon = ProcessRef(pid, int(text[text.rfind(")") + 1:].split()[19]))
        assert final["state"] == "uncertain", final  # never stopped: a process group proves nothing
        assert alive(daemon)  # and indeed the setsid daemon left the group and survived
        seat_head, session_head = heads(world)
        assert seat_head.state is State.UNCERTAIN and session_head.state is State.UNCERTAIN
    finally:
        if daemon is not None and alive(daemon):
            os.kill(daemon.pid, 9)  # the one process this test started that escaped: by its recorded pid


def test_W15_a_crash_between_the_two_keys_during_release_is_finished_by_the_restart(world: World) -> None:
    proc = world.start(die_at_barrier="stopped")

    async def main() -> None:
        c = await client(proc)
        await force_stop(c)

    asyncio.run(main())
    assert proc.died() == -9
    seat_head, session_head = heads(world)
    claim_id = proc.first["claimId"]
    # Released in reverse order: the session key is stopped with the proof, the seat key still holds the pair.
    assert session_head.state is State.STOPPED and session_head.proof.kind is ProofKind.COHORT
    assert seat_head.state is State.STOPPING and seat_head.claim_id == claim_id
    plain = ClaimStore(str(world.claims))
    seat, session = keys(world)
    assert not plain.observe(seat, session).free  # the pair stays held
    restarted = world.start()
    chain = [r for r in plain.read_chain(seat) if getattr(r, "claim_id", None) == claim_id]
    finished = chain[-1]
    assert finished.state is State.STOPPED and finished.reason == "restart-finish-release"
    assert finished.proof == session_head.proof  # under the same claim ID, with the same proof
    # The pair was free again, so the restarted controller launched its own execution under a new claim.
    assert restarted.first.get("mode") == "new" and restarted.first["claimId"] != claim_id


def _rewrite_claims(world: World, old: str, new: str, *, everywhere: bool = True) -> None:
    """Edit the claim root as another writer (or another boot, another machine) would have left it: `new`
    for `old` in every revision file (`everywhere`: the value must be in each one, as a host identity is)."""
    for dirpath, _dirs, files in os.walk(world.claims):
        for name in files:
            if not name.endswith(".json") or dirpath.endswith("eligibility"):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                text = f.read()
            assert old in text or not everywhere
            with open(path, "w") as f:
                f.write(text.replace(old, new))


def _rewrite_host(world: World, field: str, old: str, new: str) -> None:
    """Make the claim root look as if written on another boot or machine: every revision's `host` (and the
    cohort reference's, which names the same host) gets `new` for `old` in `field`."""
    _rewrite_claims(world, old, new)


def _kill_cohort(world: World, ref: CohortRef) -> None:
    """What the reboot did: every process of the cohort ended, its cgroup gone (by its recorded identity)."""
    from mosaic.cgroup_cohort import force_stop as cohort_stop  # noqa: PLC0415
    from mosaic.cgroup_cohort import release_cohort  # noqa: PLC0415

    cohort_stop(ref, world.lab.request(ref), manager=world.lab.user_manager(), grace=0.2)
    release_cohort(ref, force=True)


def test_W7_a_claim_from_an_earlier_boot_is_stopped_by_a_boot_proof_and_its_open_tool_calls_are_uncertain(
        world: World) -> None:
    first = world.start()
    ref = first.ref
    assert ref is not None

    async def main() -> None:
        c = await client(first)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="t", text="LONGTOOL please")
        await c.until(event_is("tool-start"), WAIT)
        await c.close()

    asyncio.run(main())
    first.kill()  # the machine went down with the tool call open ...
    _kill_cohort(world, ref)
    _rewrite_host(world, "bootId", current_host().boot_id, "f" * 32)  # ... and came back: another boot ID, the same machine
    second = world.start()
    assert second.first.get("mode") == "new", second.first
    seat, _session = keys(world)
    old = [r for r in ClaimStore(str(world.claims)).read_chain(seat)
           if getattr(r, "claim_id", None) == first.first["claimId"]]
    assert old[-1].state is State.STOPPED and old[-1].proof.kind is ProofKind.BOOT

    async def observe() -> dict[str, Any]:
        c = await client(second)
        observed = (await c.call("observe"))["result"]
        await c.close()
        return dict(observed)

    (report,) = asyncio.run(observe())["inherited"]
    assert report["execution"] == first.first["claimId"] and report["stop"] == f"boot-{first.first['claimId']}"
    (effect,) = report["effects"]
    assert effect["toolName"] == "bash" and effect["state"] == "uncertain" and report["rollback"] is False


def test_W17_a_claim_root_from_another_machine_is_foreign_host_and_nothing_is_promoted(world: World) -> None:
    first = world.start()
    ref = first.ref
    assert ref is not None
    first.kill()
    _kill_cohort(world, ref)
    _rewrite_host(world, "machineId", current_host().machine_id, "e" * 32)
    before = heads(world)
    second = world.start()
    assert second.first["refused"]["code"] == "foreign-host", second.first
    assert heads(world) == before  # nothing published, nothing promoted


def test_K14_a_restart_finding_another_unit_identity_under_the_recorded_name_sends_no_signal(world: World) -> None:
    """K14 as the controller sees it: the controller dies with the stop recorded; the claim now names another
    identity than the unit's under the recorded name (another systemd InvocationID for a scope, another
    kernfs cgroup id for the direct route). The restart continues the same stop; the identity check fails:
    evidence unavailable, no signal, uncertain. The setsid daemon (TERM-ignoring, so only a kill phase could
    end it, and it outlives the engine's stdin EOF) shows no kill phase ran."""
    proc = world.start(die_at="term")
    ref = proc.ref
    assert ref is not None

    async def main() -> None:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="d", text="DAEMON please")
        await c.until(receipt_is("finished"), WAIT)
        await force_stop(c, auth)

    asyncio.run(main())
    assert proc.died() == -9
    pid = _daemon_pid(world)
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    daemon = ProcessRef(pid, int(text[text.rfind(")") + 1:].split()[19]))
    if ref.kind == "scope":
        assert ref.invocation_id is not None
        _rewrite_claims(world, ref.invocation_id, "".join("1" if ch == "0" else "0" for ch in ref.invocation_id),
                        everywhere=False)
    else:
        other = ref.unit_cgroup_id + 1_000_000
        _rewrite_claims(world, f"cgroup-{ref.unit_cgroup_id}", f"cgroup-{other}", everywhere=False)
        for end in (",", "}"):  # canonical JSON: compact, sorted keys
            _rewrite_claims(world, f'"unitCgroupId":{ref.unit_cgroup_id}{end}', f'"unitCgroupId":{other}{end}',
                            everywhere=False)
    restarted = world.start()
    assert restarted.first.get("mode") == "continued-stop", restarted.first
    seat_head, session_head = heads(world)
    assert seat_head.cohort is not None and dict(seat_head.cohort) != ref.to_dict()  # the edit took
    assert seat_head.state is State.UNCERTAIN and session_head.state is State.UNCERTAIN
    assert alive(daemon)  # no kill phase ran against the unit the claim does not name

    async def observe() -> dict[str, Any]:
        c = await client(restarted)
        observed = (await c.call("observe"))["result"]
        await c.close()
        return dict(observed["binding"])

    binding = asyncio.run(observe())
    assert binding["state"] == "uncertain" and binding["admission"] == "closed"
