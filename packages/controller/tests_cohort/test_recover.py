"""Recover and launch on the real parts (brief §6 "Recover (Q15)", "Pi resume"): a force stop with a
cohort proof, recover through the socket (eligibility only: a new reserved claim and a single-use record),
then the launcher's call in another controller process. Fixture ids are in the names."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from typing import Any

import pytest
from lifecycle_helpers import World, client
from test_lifecycle import WAIT, force_stop, heads, keys

from mosaic.controller.testing import RawClient, receipt_is
from mosaic.writer_claim import ClaimStore, ProofKind, State


async def stopped(c: RawClient, auth: dict[str, Any] | None = None) -> dict[str, Any]:
    await force_stop(c, auth)
    final = await c.stop_outcome()
    assert final["state"] == "stopped", final
    return final


async def recover(c: RawClient, *, answer: bool = True, auth: dict[str, Any] | None = None) -> dict[str, Any]:
    auth = auth or await c.control()
    cid = await c.confirm("recover", auth, answer=answer)
    return await c.call("recover", incarnation=auth["incarnation"], confirmation=cid)


def code(reply: dict[str, Any]) -> str:
    assert "error" in reply, reply  # answered, not refused: an assertion (the mutation pass counts only those)
    return str(reply["error"]["data"]["refusal"]["code"])


def records_dir(world: World) -> str:
    return str(world.claims / "eligibility")


def recovered(world: World, *, prompt: str | None = None) -> tuple[Any, dict[str, Any]]:
    """A first controller, (optionally a prompt), a force stop with a proof, a recover: the controller and
    the eligibility record."""
    first = world.start()

    async def main() -> dict[str, Any]:
        c = await client(first)
        auth = await c.control()
        if prompt is not None:
            await c.call("prompt", **auth, clientRequestId="cancelled", text=prompt)
            await c.until(receipt_is("working"), WAIT)
        await stopped(c, auth)
        reply = await recover(c, auth=auth)
        await c.close()
        assert "result" in reply, reply
        return dict(reply["result"]["eligibility"])

    return first, asyncio.run(main())


def test_K7_W8_recover_after_a_proof_then_launch_new_claim_incarnation_generation_plus_one_same_leaf(
        world: World) -> None:
    first, record = recovered(world, prompt="LONGTOOL now")
    old_claim = first.first["claimId"]
    seat, _session = keys(world)
    stopped_head = [r for r in ClaimStore(str(world.claims)).read_chain(seat)
                    if getattr(r, "claim_id", None) == old_claim][-1]
    assert stopped_head.state is State.STOPPED
    # Recover reported eligibility only: a new reserved claim on both keys, nothing launched.
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):
        assert head.claim_id == record["claim_id"] != old_claim and head.state is State.RESERVED
        assert not head.spawn_marker and head.eligibility.id == record["id"] and not head.eligibility.taken
        # generation + 1 over the stopped claim's last (a takeover had raised it: the controller generation)
        assert head.generation == stopped_head.generation + 1 == record["generation"]
    assert record["previous_claim_id"] == old_claim and record["incarnation"] == first.first["incarnation"]
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]
    lines_before = world.session.read_text().splitlines()
    assert json.loads(lines_before[-1])["id"] == record["leaf"]  # the leaf the stopped engine left

    second = world.start(eligibility=record["id"])
    assert second.first.get("mode") == "recovered", second.first
    assert second.first["claimId"] == record["claim_id"]
    assert second.first["incarnation"] != first.first["incarnation"]
    assert second.first["generation"] == record["generation"]
    assert sorted(os.listdir(records_dir(world))) == [f"{record['id']}.used"]  # consumed, once
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):
        assert head.state is State.ACTIVE and head.eligibility.taken and head.binding.leaf == record["leaf"]
        assert head.binding.conversation == record["conversation"] and head.binding.branch == record["branch"]

    async def main() -> dict[str, Any]:
        c = await client(second)
        observed = (await c.call("observe"))["result"]
        await c.close()
        return {"observed": observed}

    out = asyncio.run(main())
    binding = out["observed"]["binding"]
    assert binding["state"] == "active" and binding["admission"] == "open"
    assert binding["generation"] == record["generation"]
    # The cancelled prompt is not replayed: the new execution has no request, and the session file gained
    # nothing but the engine's own startup entries (no user message).
    assert out["observed"].get("receipts", []) == []
    added = [json.loads(x) for x in world.session.read_text().splitlines()[len(lines_before):]]
    assert all(e["type"] in ("model_change", "thinking_level_change") for e in added), added


def test_K7_taking_control_after_a_proven_stop_publishes_nothing_and_recover_still_works(world: World) -> None:
    """A client that comes back after the stop (the terminal reconnected, or serve's own stop at its end)
    takes control again; the claim, released with the proof, is stopped for good: its generation is not
    published (stopped is the claim's last step), nothing fails, and recover still works (issue 29)."""
    first = world.start()

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        c = await client(first)
        auth = await c.control()
        await stopped(c, auth)
        await c.close()  # the controller's connection goes: recovery control is the way back in
        d = await client(first)
        observed = (await d.call("observe"))["result"]
        took = await d.call("acquire-recovery-control", incarnation=observed["incarnation"])
        assert took["result"]["generation"] == observed["generation"] + 1, took
        stopped_heads = heads(world)
        reply = await recover(d, auth={"incarnation": observed["incarnation"],
                                       "generation": took["result"]["generation"]})
        binding = (await d.call("observe"))["result"]["binding"]
        await d.close()
        return {"heads": stopped_heads, "binding": binding}, reply

    out, reply = asyncio.run(main())
    for head in out["heads"]:
        assert head.state is State.STOPPED and head.proof is not None and head.proof.kind is ProofKind.COHORT
    assert out["binding"]["state"] == "stopped"
    assert "eligibility" in reply.get("result", {}), reply  # the proof still stands: recover goes on
    said = first.terminate()
    assert "Traceback" not in said and "claim-generation" not in said and "lifecycle step" not in said, said


def test_K6_recover_without_proof_without_confirmation_or_with_changed_pins_is_refused(world: World) -> None:
    tree = world.root / "engine-tree"
    shutil.copytree(world.vendored, tree)
    os.chmod(tree, 0o755)
    env = dict(world.args()["engine_env"], PYTHONPATH=str(tree))
    first = world.start(engine_env=env, pin_tree=str(tree))

    async def main() -> dict[str, Any]:
        c = await client(first)
        auth = await c.control()
        no_proof = await recover(c, auth=auth)
        await stopped(c, auth)
        no_confirmation = await recover(c, answer=False, auth=auth)
        (tree / "changed.py").write_text("# the engine's install changed after the launch\n")
        os.chmod(tree / "changed.py", 0o644)
        changed_pins = await recover(c, auth=auth)
        await c.close()
        return {"no_proof": no_proof, "no_confirmation": no_confirmation, "changed_pins": changed_pins}

    out = asyncio.run(main())
    assert code(out["no_proof"]) == "stop-proof"
    assert code(out["no_confirmation"]) == "confirmation"
    assert code(out["changed_pins"]) == "engine-pin-mismatch"
    # Nothing was reserved: the pair is the stopped claim's, free, and no record exists.
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):
        assert head.claim_id == first.first["claimId"] and head.state is State.STOPPED
        assert head.proof.kind is ProofKind.COHORT
    assert not os.path.exists(records_dir(world)) or os.listdir(records_dir(world)) == []


def test_K17_two_launcher_calls_with_one_record_make_one_engine(world: World) -> None:
    _first, record = recovered(world)
    a = world.spawn(eligibility=record["id"])
    b = world.spawn(eligibility=record["id"])
    outs = [a.wait_first(), b.wait_first()]
    world.note(a)
    world.note(b)
    launched = [o for o in outs if "ready" in o]
    refused = [o for o in outs if "refused" in o]
    assert len(launched) == 1 and len(refused) == 1, outs
    assert refused[0]["refused"]["code"] == "eligibility"
    # Which words depends on how far the winner got when the loser read the record: still launching (held),
    # past its load check (used), or it had taken the reservation over first (taken). Each names the record
    # as consumed by the other launch, never some other cause.
    message = refused[0]["refused"]["message"]
    assert any(words in message for words in ("held by a launch", "already used by a launch", "taken")), message
    # One engine: exactly one cohort was launched for the new claim.
    units = [r.unit for r in world.refs if r.unit == f"cohort-{record['claim_id']}.scope"]
    assert units == [f"cohort-{record['claim_id']}.scope"]
    seat_head, _ = heads(world)
    assert seat_head.state is State.ACTIVE and seat_head.claim_id == record["claim_id"]


def test_K18_the_leaf_moves_after_eligibility_launch_refused_and_the_reservation_stays_until_released(
        world: World) -> None:
    _first, record = recovered(world)
    before = heads(world)
    with open(world.session, "a") as f:  # another writer appends after eligibility
        f.write(json.dumps({"type": "custom", "customType": "foreign", "data": {}, "id": "f0f0f0f0",
                            "parentId": record["leaf"], "timestamp": "2026-12-01T00:00:01.000Z"}) + "\n")
    launch = world.start(eligibility=record["id"])
    assert launch.first.get("refused", {}).get("code") == "target", launch.first
    assert heads(world) == before  # the reservation stays, untouched
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]  # not held: nothing was launched
    # Nobody takes the pair while it is reserved for the eligibility, the reserving controller alive or not.
    plain = world.start()
    assert plain.first["refused"]["code"] == "already-active", plain.first
    # Released with a proof (the claim never spawned), the pair is free again.
    released = world.start(release_reservation=record["id"])
    assert "released" in released.first, released.first
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):
        assert head.state is State.STOPPED and head.proof.kind is ProofKind.NO_UNIT
        assert head.claim_id == record["claim_id"]


def test_W9_resume_with_a_changed_binary_or_argv_is_refused_and_the_claim_is_unchanged(world: World) -> None:
    _first, record = recovered(world)
    before = heads(world)
    base = world.args()["engine_command"]
    other_binary = world.start(eligibility=record["id"], engine_command=["/usr/bin/python3.11", *base[1:]])
    assert other_binary.first.get("refused", {}).get("code") == "engine-pin-mismatch", other_binary.first
    assert heads(world) == before
    # Another model is another sealed argv: another argv digest.
    other_argv = world.start(eligibility=record["id"], model="fake-model-2")
    assert other_argv.first.get("refused", {}).get("code") == "engine-pin-mismatch", other_argv.first
    assert heads(world) == before
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]


def test_K8_the_engine_loads_another_leaf_on_resume_refused_before_admission_contained_until_force_stop(
        world: World) -> None:
    _first, record = recovered(world)
    foreign = json.dumps({"type": "custom", "customType": "foreign", "data": {}, "id": "e0e0e0e0",
                          "parentId": record["leaf"], "timestamp": "2026-12-01T00:00:01.000Z"})
    # The file changes after the launcher revalidated and consumed the record, before the engine loads it.
    second = world.start(eligibility=record["id"], append_at={"step": "taken-over", "line": foreign})
    assert second.first.get("mode") == "recovered", second.first

    async def main() -> dict[str, Any]:
        c = await client(second)
        observed = (await c.call("observe"))["result"]
        token = observed["incarnation"]
        ordinary = await c.call("takeover", incarnation=token, expectedGeneration=observed["generation"])
        took = await c.call("acquire-recovery-control", incarnation=token)  # fenced: recovery control (K9)
        auth = {"incarnation": token, "generation": took["result"]["generation"]}
        prompt = await c.call("prompt", **auth, clientRequestId="p", text="hello")
        final = await stopped(c, auth)
        await c.close()
        return {"observed": observed, "prompt": prompt, "final": final, "ordinary": ordinary}

    out = asyncio.run(main())
    binding = out["observed"]["binding"]
    assert binding["state"] == "uncertain" and binding["admission"] == "closed"
    # The launch failed its load check: the record is spent, never consumed as a launch (README "Faults").
    assert os.listdir(records_dir(world)) == [f"{record['id']}.spent"]
    assert code(out["ordinary"]) == "fenced"  # ordinary takeover is refused while fenced
    assert "preflight" in binding["fences"]
    assert code(out["prompt"]) in ("preflight", "fenced")
    seat_head, session_head = heads(world)
    for head in (seat_head, session_head):  # claimed and contained until the force stop proved it stopped
        assert head.claim_id == record["claim_id"] and head.state is State.STOPPED
        assert head.proof.kind is ProofKind.COHORT



@pytest.mark.parametrize("step", ["revalidated", "held", "taken-over", "spawn-marker", "launched", "active"])
def test_the_launchers_call_killed_at_each_step_restarts_safely(world: World, step: str) -> None:
    """A real launcher process SIGKILLed at each step of launching a recover's record, then the
    launcher's call again and a plain controller on the same claim root. Before the hold the record
    still launches; after it the record stays held (its launch never ended its load check) and the pair goes
    the way the claim shows: a pending reservation is released with a never-spawned proof (the crash
    between hold and take-over), a taken
    one with its owner gone is freed (no unit, W14), a spawn marker with no unit stays uncertain (W20), a
    launched engine is an orphan (W13, W6). Never a second engine for the claim."""
    _first, record = recovered(world)
    dying = world.start(eligibility=record["id"], die_at=step)
    assert dying.first == {"dying": step} and dying.died() == -9
    again = world.start(eligibility=record["id"])
    new_unit = f"cohort-{record['claim_id']}.scope"
    if step == "revalidated":
        assert again.first.get("mode") == "recovered", again.first
        assert [r.unit for r in world.refs if r.unit == new_unit] == [new_unit]
        return
    assert again.first["refused"]["code"] == "eligibility" and "held by a launch" in again.first["refused"]["message"]
    assert os.listdir(records_dir(world)) == [f"{record['id']}.launching"]
    plain = world.start()
    if step == "held":
        # The reservation is still pending: nobody takes the pair until it is released with a proof.
        assert plain.first["refused"]["code"] == "already-active", plain.first
        assert record["id"] in plain.first["refused"]["message"]
        released = world.start(release_reservation=record["id"])
        assert "released" in released.first, released.first
        for head in heads(world):
            assert head.claim_id == record["claim_id"] and head.state is State.STOPPED
            assert head.proof.kind is ProofKind.NO_UNIT
        assert os.listdir(records_dir(world)) == [f"{record['id']}.spent"]  # never launched: never used
        plain = world.start()
        assert plain.first.get("mode") == "new" and plain.first["claimId"] != record["claim_id"], plain.first
    elif step == "taken-over":
        assert plain.first.get("mode") == "new" and plain.first["claimId"] != record["claim_id"], plain.first
        seat = ClaimStore(str(world.claims)).read_chain(keys(world)[0])
        freed = [r for r in seat if getattr(r, "claim_id", None) == record["claim_id"]][-1]
        assert freed.state is State.STOPPED and freed.proof.kind is ProofKind.NO_UNIT
    elif step == "spawn-marker":
        assert plain.first["refused"]["code"] == "unsafe-replacement", plain.first
        assert all(h.state is State.UNCERTAIN and h.claim_id == record["claim_id"] for h in heads(world))
    else:
        assert plain.first.get("mode") == "orphan" and plain.first["claimId"] == record["claim_id"], plain.first
        assert all(h.state is State.UNCERTAIN for h in heads(world))
    # Never a second engine: the claim's one cohort is the dead launcher's (an orphan now), or there is none.
    assert len({r for r in world.refs if r.unit == new_unit}) == (1 if step in ("launched", "active") else 0)


@pytest.mark.parametrize("step", ["recover-reserved", "recover-recorded"])
def test_a_controller_killed_during_recover_leaves_a_reservation_its_record_launches_or_a_proof_releases(
        world: World, step: str) -> None:
    """The controller that recovers SIGKILLed after the new reservation is published, before the
    record is written (recover-reserved), or after (recover-recorded). The pair stays reserved for the
    eligibility either way. With the record, the launcher's call launches it; without, the reservation is
    released with a never-spawned proof by the eligibility ID the refusal names, and the pair is free."""
    first = world.start(die_at=step)

    async def main() -> None:
        c = await client(first)
        auth = await c.control()
        await stopped(c, auth)
        cid = await c.confirm("recover", auth)
        await c.send("recover", incarnation=auth["incarnation"], confirmation=cid)
        await c.close()

    asyncio.run(main())
    assert first.next_line() == {"dying": step} and first.died() == -9
    seat_head, session_head = heads(world)
    assert seat_head.state is State.RESERVED and seat_head.eligibility is not None
    assert session_head.claim_id == seat_head.claim_id and not seat_head.eligibility.taken
    eligibility = seat_head.eligibility.id
    plain = world.start()
    assert plain.first["refused"]["code"] == "already-active" and eligibility in plain.first["refused"]["message"]
    if step == "recover-recorded":
        launched = world.start(eligibility=eligibility)
        assert launched.first.get("mode") == "recovered" and launched.first["claimId"] == seat_head.claim_id
        return
    assert not os.path.exists(os.path.join(records_dir(world), f"{eligibility}.json"))
    missing = world.start(eligibility=eligibility)
    assert missing.first["refused"]["code"] == "eligibility", missing.first
    released = world.start(release_reservation=eligibility)
    assert "released" in released.first, released.first
    for head in heads(world):
        assert head.claim_id == seat_head.claim_id and head.state is State.STOPPED
        assert head.proof.kind is ProofKind.NO_UNIT
    fresh = world.start()
    assert fresh.first.get("mode") == "new", fresh.first


# ------------------------------------------------------------------ W8, W9 on a branch other than main

def _entry(kind: str, eid: str, parent: str | None, **fields: Any) -> str:
    return json.dumps({"type": kind, "id": eid, "parentId": parent, "timestamp": "2026-12-01T00:00:00.000Z",
                       **fields}) + "\n"


def _message(eid: str, parent: str, role: str, text: str) -> str:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    if role == "assistant":
        message.update(api="openai-completions", provider="fakeprov", model="fake-model-1", stopReason="stop")
    return _entry("message", eid, parent, message=message)


@pytest.fixture
def forked_world(world: World) -> World:
    """The session Pi will resume ends on a fork: its default leaf (the last entry in file order) is on the
    reader's branch `b.cccc0003`, a later child of `aaaa0002`, not on `main` (whose leaf is `bbbb0004`).
    The branch holds a thinking entry, so neither the fake nor Pi appends at startup (FACTS (d))."""
    header = world.session.read_text()
    world.session.write_text(
        header + _entry("thinking_level_change", "tttt0000", None, thinkingLevel="off")
        + _message("uuuu0001", "tttt0000", "user", "first")
        + _message("aaaa0002", "uuuu0001", "assistant", "first answer")
        + _message("bbbb0003", "aaaa0002", "user", "on main")
        + _message("bbbb0004", "bbbb0003", "assistant", "main's answer")
        + _message("cccc0003", "aaaa0002", "user", "on the fork")
        + _message("cccc0004", "cccc0003", "assistant", "the fork's answer"))
    return world


def test_W8_recover_and_launch_on_a_branch_other_than_main_keep_that_branch_and_leaf(forked_world: World) -> None:
    world = forked_world
    first, record = recovered(world)
    assert (record["branch"], record["leaf"]) == ("b.cccc0003", "cccc0004")
    stopped_heads = [r for r in ClaimStore(str(world.claims)).read_chain(keys(world)[0])
                     if getattr(r, "claim_id", None) == first.first["claimId"]]
    assert stopped_heads[0].binding.branch == "b.cccc0003"  # recorded at launch, before anything ran
    second = world.start(eligibility=record["id"])
    assert second.first.get("mode") == "recovered", second.first
    for head in heads(world):
        assert head.state is State.ACTIVE and head.claim_id == record["claim_id"]
        assert (head.binding.branch, head.binding.leaf) == ("b.cccc0003", "cccc0004")


def test_W9_the_default_leaf_moved_to_another_branch_after_eligibility_is_refused_and_the_claim_is_unchanged(
        forked_world: World) -> None:
    world = forked_world
    _first, record = recovered(world)
    before = heads(world)
    with open(world.session, "a") as f:  # another writer continues main: Pi's leaf is now on main
        f.write(_message("bbbb0005", "bbbb0004", "user", "main again"))
    launch = world.start(eligibility=record["id"])
    assert launch.first.get("refused", {}).get("code") == "target", launch.first
    assert "b.cccc0003" in launch.first["refused"]["message"]
    assert heads(world) == before
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]  # not consumed


def test_G3_recover_after_the_session_was_swapped_for_a_live_one_is_refused_and_reserves_nothing(
        world: World) -> None:
    first = world.start()
    live = world.root / "operator-home" / ".pi" / "state" / "seat" / "sessions" / "live.jsonl"
    live.parent.mkdir(parents=True)

    async def main() -> dict[str, Any]:
        c = await client(first)
        auth = await c.control()
        await stopped(c, auth)
        before = heads(world)
        live.write_bytes(world.session.read_bytes())
        world.session.unlink()
        world.session.symlink_to(live)  # the fixture path now leads to a live session (G3)
        reply = await recover(c, auth=auth)
        await c.close()
        assert heads(world) == before  # nothing reserved
        return reply

    reply = asyncio.run(main())
    assert code(reply) == "live-session-refused", reply
    assert not os.path.exists(records_dir(world)) or os.listdir(records_dir(world)) == []
