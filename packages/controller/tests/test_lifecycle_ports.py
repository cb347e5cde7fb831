"""The lifecycle's K and W rules on in-memory ports, without root (issue 31 item 3): the real writer claim on
a tmp_path claim root, the engine (pi-rpc's fake) a plain child of this process under `MemoryCohort`, whose
force stop runs cgroup-cohort's real stop machine over a scripted world, and controllers that crash at a
named point (`crash_at`: a `Crash` ends a runner as a SIGKILL there would; `Liveness` tells the claim's
owner check it is gone). The kernel suites (`tests_cohort/`) run the same rules on real cgroups, uids and
SIGKILLs, and hold the real ports to these outcomes; these run in the unit suite, in seconds.

Every named crash point of `LAUNCH_POINTS` and `STOP_POINTS` is crashed here, and the restart after it goes
the way the claim on disk says (brief §2 "Restart", W6, W13, W14, W20, K10, K11).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import FixtureVerifier
from mosaic.controller import EngineUids, Hooks, LaunchingController, PiSpec, Placement
from mosaic.controller.lifecycle import LAUNCH_POINTS, STOP_POINTS
from mosaic.controller.testing import Crash, FixtureTree, Liveness, MemoryCohort, RawClient, crash_at
from mosaic.safe_open import Refusal, current_host
from mosaic.writer_claim import ClaimStore, ProofKind, State

FAKE = (sys.executable, "-m", "mosaic.pi_rpc.testing.fake_engine")


class Lab:
    """One fixture tree (root's uid here), one memory cohort, the runners' liveness, a private socket
    directory. Two labs may share a cohort and a liveness (two placements on one machine: K4)."""

    def __init__(self, root: Path, *, cohort: MemoryCohort | None = None, liveness: Liveness | None = None) -> None:
        self.tree = FixtureTree(root / "fx")
        self.tree.make((os.getuid(), os.getgid()))
        self.cohort = cohort if cohort is not None else MemoryCohort()
        self.liveness = liveness if liveness is not None else Liveness()
        self.crashes: list[str] = []  # the points runners crashed at, in order
        self.verifier = FixtureVerifier()
        self.socket_dir = tempfile.mkdtemp(prefix="mcm-", dir="/tmp")
        os.chmod(self.socket_dir, 0o700)
        self.controllers: list[LaunchingController] = []
        self.owners: dict[int, Any] = {}

    def controller(self, *, point: str | None = None, stop_point: str | None = None,
                   on_step: Callable[[str], None] | None = None, barrier: Any = None,
                   eligibility: str | None = None, model: str = "fake-model-1", pin_tree: str | None = None,
                   **options: Any) -> LaunchingController:
        owner = self.liveness.runner()
        crash = crash_at(point) if point is not None else None

        def step(name: str) -> None:
            if on_step is not None:
                on_step(name)
            if crash is not None:
                if name == point:
                    self.crashes.append(name)
                crash(name)

        stop_crash = crash_at(stop_point) if stop_point is not None else None

        def stop_phase(name: str) -> None:
            if stop_crash is not None:
                if name == stop_point:
                    self.crashes.append(name)
                stop_crash(name)

        spec = PiSpec(env=self.tree.engine_env(), command=FAKE, provider="fakeprov", model=model,
                          pin_tree=pin_tree)
        controller = LaunchingController(Placement(**self.tree.placement(self.socket_dir)), spec, None,
                                verifier=self.verifier, cohort=self.cohort, claims_owner=owner, stop_grace=0.2,
                                hooks=Hooks(on_launch_step=step, barrier=barrier, on_stop_phase=stop_phase),
                                eligibility=eligibility, **options)
        self.controllers.append(controller)
        self.owners[id(controller)] = owner
        return controller

    async def crashed(self, controller: LaunchingController) -> None:
        """What the runner's SIGKILL leaves: its process gone (its claims' owner is dead), its engine link
        closed; its engine, cohort and claim as they are."""
        self.liveness.crashed(self.owners[id(controller)])
        if controller.runtime is not None:
            await controller.runtime.aclose()
        elif controller.execution is not None and controller.execution.link is not None:
            await controller.execution.link.aclose()
        controller.pool.shutdown()

    def heads(self, controller: LaunchingController) -> tuple[Any, Any]:
        pair = ClaimStore(str(self.tree.claims)).observe(controller.seat_key, controller.session_key)
        return pair.seat.revision, pair.session.revision

    def records(self) -> list[str]:
        path = self.tree.claims / "eligibility"
        return sorted(os.listdir(path)) if path.exists() else []

    async def close(self) -> None:
        for controller in self.controllers:
            with contextlib.suppress(Exception):
                await controller.aclose()
        self.cohort.cleanup()
        shutil.rmtree(self.socket_dir, ignore_errors=True)


@contextlib.asynccontextmanager
async def lab_at(root: Path) -> AsyncIterator[Lab]:
    lab = Lab(root)
    try:
        yield lab
    finally:
        await lab.close()


async def until(condition: Callable[[], bool], what: str = "the condition") -> None:
    """Poll `condition` on the loop (bounded: 10 s, far beyond any step here)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} never held")


async def start_crashing(lab: Lab, controller: LaunchingController, point: str) -> None:
    with pytest.raises(Crash) as crashed:
        await controller.start()
    assert crashed.value.args == (point,)
    await lab.crashed(controller)


async def stop_proven(controller: LaunchingController, *, recovery: bool = False) -> tuple[RawClient, dict[str, Any]]:
    """A client of `controller` takes control (recovery control when admission is closed) and force stops;
    the stop record it reads in the end."""
    client = await RawClient.connect(controller.socket_path)
    if recovery:
        token = (await client.call("observe"))["result"]["incarnation"]
        took = await client.call("acquire-recovery-control", incarnation=token)
        auth = {"incarnation": token, "generation": took["result"]["generation"]}
    else:
        auth = await client.control()
    await client.force_stop(auth)
    return client, {**auth, "final": await client.stop_outcome()}


async def recovered(lab: Lab) -> tuple[LaunchingController, dict[str, Any]]:
    """A first controller, a force stop with a proof, a recover: the controller (still serving) and the
    eligibility record."""
    first = lab.controller()
    await first.start()
    client, auth = await stop_proven(first)
    assert auth["final"]["state"] == "stopped", auth["final"]
    cid = await client.confirm("recover", auth)
    reply = await client.call("recover", incarnation=auth["incarnation"], confirmation=cid)
    await client.close()
    assert "result" in reply, reply
    return first, dict(reply["result"]["eligibility"])


# ------------------------------------------------------------------------- a first launch's crash points

FIRST_LAUNCH = ("acquiring", "reserved", "spawn-marker", "launched", "first-get-state", "active")


@pytest.mark.parametrize("point", FIRST_LAUNCH)
def test_W6_W13_W14_W20_a_launch_crashed_at_each_point_restarts_as_its_claim_says(tmp_path: Path, point: str) -> None:
    """Before the reservation, or with one and no spawn marker (W14): the next launch goes. A spawn marker and
    no unit (W20): unsafe-replacement, nothing launched. A launched engine (W13: its reference not yet
    recorded, rediscovered by the recorded unit name; W6): an orphan, served uncertain, never launched
    over: one engine for the claim."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller(point=point)
            await start_crashing(lab, first, point)
            second = lab.controller()
            if point == "spawn-marker":
                with pytest.raises(Refusal) as refused:
                    await second.start()
                assert refused.value.code == "unsafe-replacement", refused.value.to_dict()
                assert all(h.state is State.UNCERTAIN for h in lab.heads(second))
                assert lab.cohort.log == []  # nothing was ever launched
                return
            await second.start()
            launches = [entry for entry in lab.cohort.log if entry.startswith("launch ")]
            if point in ("acquiring", "reserved"):
                assert second.mode == "new" and len(launches) == 1
                if point == "reserved":
                    assert second.execution is not None and first.execution is None
                return
            assert second.mode == "orphan" and len(launches) == 1  # never launched over
            assert second.execution is not None and second.execution.ref is not None
            assert second.execution.ref.unit in lab.cohort.units  # rediscovered when it was not recorded (W13)
            assert "orphan" in second.core.fences and second.core.binding_state == "uncertain"

    asyncio.run(main())


def test_W14_a_launch_crashed_once_its_engine_uid_is_leased_leaves_a_pair_the_next_launch_takes(
        tmp_path: Path) -> None:
    """The uid is leased and the engine's state handed to it, no spawn marker yet: the claim names no uid and
    no unit was made, so the restart frees the pair and the next launch goes (under a uid of the range)."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            state = tmp_path / "engine-uids"
            state.mkdir(mode=0o700)
            uids = EngineUids(64000, 4, os.getgid(), str(state))
            first = lab.controller(point="engine-uid", engine_uids=uids)
            await start_crashing(lab, first, "engine-uid")
            assert all(h.engine_uid is None and not h.spawn_marker for h in lab.heads(first))
            second = lab.controller(engine_uids=uids)
            await second.start()
            assert second.mode == "new" and second.execution is not None
            assert second.execution.claim.engine_uid in range(64000, 64004)

    asyncio.run(main())


# ------------------------------------------------------------------------------------ K10, K11, W15

@pytest.mark.parametrize("phase", STOP_POINTS)
def test_K10_K11_a_force_stop_crashed_at_its_phase_is_rerun_from_TERM_by_the_restart(tmp_path: Path, phase: str) -> None:
    """The controller dies once the phase is published (before its first action): the restart adopts the
    claim, re-runs the recorded stop from TERM (identity checked again), proves it and releases the claim
    with the proof. Mutant 23 takes a published kill phase for done and runs nothing."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller(stop_point=phase)
            await first.start()
            client = await RawClient.connect(first.socket_path)
            auth = await client.control()
            cid = await client.confirm("force-stop", auth)
            await client.send("force-stop", incarnation=auth["incarnation"], confirmation=cid)
            for _ in range(500):  # the phase is published on both keys, then the runner crashes (bounded)
                if lab.crashes:
                    break
                await asyncio.sleep(0.01)
            assert lab.crashes == [phase]
            await client.close()
            await lab.crashed(first)
            for head in lab.heads(first):
                assert head.state is State.STOPPING and head.stop.phase == phase
            before = len(lab.cohort.log)
            second = lab.controller()
            await second.start()
            rerun = [entry.split(" ")[0] for entry in lab.cohort.log[before:]]
            assert second.mode == "continued-stop"
            assert rerun[:2] == ["CheckIdentity", "SendTerm"] and "Kill" in rerun  # from TERM, to the end
            assert second.core.binding_state == "stopped"
            for head in lab.heads(second):
                assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT

    asyncio.run(main())


def test_W15_a_crash_between_the_two_keys_of_the_release_is_finished_by_the_restart(tmp_path: Path) -> None:
    def barrier(b: Any) -> None:
        if b.point == "between-keys" and b.step == "stopped":
            raise Crash("between-keys:stopped")

    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller(barrier=barrier)
            await first.start()
            client = await RawClient.connect(first.socket_path)
            auth = await client.control()
            cid = await client.confirm("force-stop", auth)
            await client.send("force-stop", incarnation=auth["incarnation"], confirmation=cid)
            for _ in range(500):
                states = {h.state for h in lab.heads(first)}
                if State.STOPPED in states:
                    break
                await asyncio.sleep(0.01)
            seat, session = lab.heads(first)
            # Released in reverse order: the session key is stopped with the proof, the seat key still holds it.
            assert session.state is State.STOPPED and session.proof.kind is ProofKind.COHORT
            assert seat.state is State.STOPPING and seat.claim_id == session.claim_id
            await client.close()
            await lab.crashed(first)
            second = lab.controller()
            await second.start()
            chain = [r for r in ClaimStore(str(lab.tree.claims)).read_chain(second.seat_key)
                     if getattr(r, "claim_id", None) == seat.claim_id]
            assert chain[-1].state is State.STOPPED and chain[-1].reason == "restart-finish-release"
            assert chain[-1].proof == session.proof  # under the same claim ID, with the same proof
            assert second.mode == "new"  # the pair was free once the release was finished

    asyncio.run(main())


def test_W12_H16_a_second_runner_while_the_first_lives_refuses_already_active_the_first_untouched(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            before = lab.heads(first)
            second = lab.controller()
            second.placement = Placement(**lab.tree.placement(tempfile.mkdtemp(prefix="mcm-", dir="/tmp")))
            with pytest.raises(Refusal) as refused:
                await second.start()
            shutil.rmtree(second.placement.socket_dir, ignore_errors=True)
            assert refused.value.code == "already-active", refused.value.to_dict()
            assert lab.heads(first) == before and first.core.admission_open
            assert len([e for e in lab.cohort.log if e.startswith("launch ")]) == 1

    asyncio.run(main())


# ------------------------------------------------------------------------------ recover and its launch

@pytest.mark.parametrize("point", ("recover-reserved", "recover-recorded"))
def test_a_recover_crashed_at_each_point_leaves_a_reservation_its_record_launches_or_a_proof_releases(
        tmp_path: Path, point: str) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller(point=point)
            await first.start()
            client, auth = await stop_proven(first)
            cid = await client.confirm("recover", auth)
            await client.send("recover", incarnation=auth["incarnation"], confirmation=cid)
            await until(lambda: lab.crashes == [point], f"the crash at {point}")
            await client.close()
            await lab.crashed(first)
            seat, session = lab.heads(first)
            assert seat.state is State.RESERVED and session.claim_id == seat.claim_id
            eligibility = seat.eligibility.id
            plain = lab.controller()
            with pytest.raises(Refusal) as refused:
                await plain.start()
            assert refused.value.code == "already-active" and eligibility in refused.value.message
            if point == "recover-recorded":
                launched = lab.controller(eligibility=eligibility)
                await launched.start()
                assert launched.mode == "recovered" and launched.execution is not None
                assert launched.execution.claim.claim_id == seat.claim_id
                return
            assert lab.records() == []
            released = lab.controller()
            await released.release_reservation(eligibility)
            for head in lab.heads(released):
                assert head.state is State.STOPPED and head.proof.kind is ProofKind.NO_UNIT
            fresh = lab.controller()
            await fresh.start()
            assert fresh.mode == "new"

    asyncio.run(main())


@pytest.mark.parametrize("point", ("revalidated", "held", "taken-over", "settled"))
def test_the_launchers_call_crashed_at_each_point_restarts_safely(tmp_path: Path, point: str) -> None:
    """Before the hold the record still launches; after it the record stays held (`launching`) and the pair
    goes as the claim shows; a launch whose load check ended (`settled`) consumed its record."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)
            await first.aclose()
            dying = lab.controller(point=point, eligibility=record["id"])
            await start_crashing(lab, dying, point)
            again = lab.controller(eligibility=record["id"])
            if point == "revalidated":
                await again.start()
                assert again.mode == "recovered"
                return
            with pytest.raises(Refusal) as refused:
                await again.start()
            assert refused.value.code == "eligibility", refused.value.to_dict()
            if point == "settled":
                assert lab.records() == [f"{record['id']}.used"]
                return
            assert lab.records() == [f"{record['id']}.launching"]
            plain = lab.controller()
            if point == "held":
                with pytest.raises(Refusal) as held:
                    await plain.start()
                assert held.value.code == "already-active" and record["id"] in held.value.message
            else:  # taken over by a dead launcher, never marked: the pair is freed (W14)
                await plain.start()
                assert plain.mode == "new" and plain.execution is not None
                assert plain.execution.claim.claim_id != record["claim_id"]

    asyncio.run(main())


def test_K8_a_launch_from_a_record_whose_engine_loads_another_leaf_spends_the_record_never_uses_it(
        tmp_path: Path) -> None:
    """The file changes after the launcher revalidated and took the reservation over, before the engine
    loads it: the load check fails, admission never opens, and the record is spent, not used."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)
            await first.aclose()
            foreign = json.dumps({"type": "custom", "customType": "foreign", "data": {}, "id": "e0e0e0e0",
                                  "parentId": record["leaf"], "timestamp": "2026-12-01T00:00:01.000Z"})

            def append(name: str) -> None:
                if name == "taken-over":
                    with open(lab.tree.session, "a") as f:
                        f.write(foreign + "\n")

            second = lab.controller(on_step=append, eligibility=record["id"])
            await second.start()
            assert second.mode == "recovered" and "preflight" in second.core.fences
            assert not second.core.admission_open
            assert lab.records() == [f"{record['id']}.spent"]

    asyncio.run(main())


def test_G3_a_recover_after_the_session_was_swapped_for_a_live_one_is_refused_and_reserves_nothing(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            client, auth = await stop_proven(first)
            live = lab.tree.root / "operator-home" / ".pi" / "agent" / "sessions" / "live.jsonl"
            live.parent.mkdir(parents=True)
            live.write_bytes(lab.tree.session.read_bytes())
            lab.tree.session.unlink()
            lab.tree.session.symlink_to(live)
            before = lab.heads(first)
            cid = await client.confirm("recover", auth)
            reply = await client.call("recover", incarnation=auth["incarnation"], confirmation=cid)
            await client.close()
            assert reply["error"]["data"]["refusal"]["code"] == "live-session-refused", reply
            assert lab.heads(first) == before and lab.records() == []

    asyncio.run(main())


def test_a_recover_of_a_session_whose_last_line_is_torn_refuses_with_its_position_before_anything_is_reserved(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            client, auth = await stop_proven(first)
            with open(lab.tree.session, "ab") as f:
                f.write(b'{"type":"message","id":"torn"')
            before = lab.heads(first)
            cid = await client.confirm("recover", auth)
            reply = await client.call("recover", incarnation=auth["incarnation"], confirmation=cid)
            await client.close()
            assert "error" in reply, reply  # refused: never an eligibility on a torn file
            refusal = reply["error"]["data"]["refusal"]
            assert refusal["code"] == "session-drift" and "partial-line" in refusal["message"], refusal
            assert lab.heads(first) == before and lab.records() == []

    asyncio.run(main())


def test_a_live_controller_on_the_placement_refuses_a_launchers_call_before_the_claim_is_touched(
        tmp_path: Path) -> None:
    """While a controller serves the placement's socket, the launcher's call with a recover's record refuses
    already-active with nothing touched: the record unused, the reservation untaken."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)  # still serving
            before = lab.heads(first)
            blocked = lab.controller(eligibility=record["id"])
            outcome: BaseException | None = None
            try:
                await blocked.start()
            except Exception as exc:  # noqa: BLE001 - judged below: only this refusal is right
                outcome = exc
            assert isinstance(outcome, Refusal) and outcome.code == "already-active", repr(outcome)
            assert lab.records() == [f"{record['id']}.json"] and lab.heads(first) == before

    asyncio.run(main())


# -------------------------------------------------------- K4, K7, K14, K15, W7, W17, what never releases

def test_K4_two_controllers_stop_one_the_other_still_answers(tmp_path: Path) -> None:
    """Two placements on one machine (one cohort, one liveness): a force stop of one proves and releases
    its own claim and acts on its own unit only; the other still answers and can be controlled."""
    async def main() -> None:
        async with lab_at(tmp_path / "a") as a:
            b = Lab(tmp_path / "b", cohort=a.cohort, liveness=a.liveness)
            try:
                first, second = a.controller(), b.controller()
                await first.start()
                await second.start()
                assert first.execution is not None and second.execution is not None
                unit_a, unit_b = first.execution.ref.unit, second.execution.ref.unit  # type: ignore[union-attr]
                assert unit_a != unit_b
                client, auth = await stop_proven(first)
                await client.close()
                assert auth["final"]["state"] == "stopped", auth["final"]
                await until(lambda: f"let go {unit_a}" in a.cohort.log)  # the proven cohort is let go after
                acted = {entry.rsplit(" ", 1)[1] for entry in a.cohort.log if not entry.startswith("launch ")}
                assert acted == {unit_a}  # every stop action and the let-go on the stopped unit alone
                assert unit_b in a.cohort.units and unit_a not in a.cohort.units
                for head in b.heads(second):
                    assert head.state is State.ACTIVE
                other = await RawClient.connect(second.socket_path)
                observed = (await other.call("observe"))["result"]
                assert observed["binding"]["state"] == "active" and observed["binding"]["admission"] == "open"
                took = await other.control()
                assert took["generation"] == observed["generation"] + 1
                await other.close()
            finally:
                await b.close()

    asyncio.run(main())


def test_K7_taking_control_after_a_proven_stop_publishes_nothing_and_recover_still_works(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The claim released with the proof is stopped for good: a generation taken after it (recovery control)
    is not published there, the effect does not fail (no error logged: the kernel twin reads the process's
    stderr for the traceback), and recover still goes."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            client, auth = await stop_proven(first)
            assert auth["final"]["state"] == "stopped", auth["final"]
            await client.close()
            again = await RawClient.connect(first.socket_path)
            observed = (await again.call("observe"))["result"]
            took = await again.call("acquire-recovery-control", incarnation=observed["incarnation"])
            assert took["result"]["generation"] == observed["generation"] + 1, took
            recovery = {"incarnation": observed["incarnation"], "generation": took["result"]["generation"]}
            stopped = lab.heads(first)
            cid = await again.confirm("recover", recovery)
            reply = await again.call("recover", incarnation=recovery["incarnation"], confirmation=cid)
            binding = (await again.call("observe"))["result"]["binding"]
            await again.close()
            for head in stopped:
                assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
            assert binding["state"] == "stopped", binding
            assert "eligibility" in reply.get("result", {}), reply

    with caplog.at_level(logging.WARNING, logger="mosaic.controller"):
        asyncio.run(main())
    failed = [r.getMessage() for r in caplog.records if r.name.startswith("mosaic.controller")]
    assert failed == [], failed


def test_K15_a_cohort_whose_identity_cannot_be_read_makes_the_stop_uncertain_and_sends_no_signal(
        tmp_path: Path) -> None:
    """The world answers nothing at the identity check (K15: the shim gone, nothing readable): the real stop
    machine ends uncertain before any signal, and the claim stays held, uncertain, never released."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            before = len(lab.cohort.log)
            lab.cohort.world.unavailable = "the shim is gone"
            client, auth = await stop_proven(first)
            await client.close()
            final = auth["final"]
            assert final["state"] == "uncertain" and final["reason"] in ("shim-gone", "identity-unavailable"), final
            assert [entry.split(" ")[0] for entry in lab.cohort.log[before:]] == ["CheckIdentity"]
            for head in lab.heads(first):
                assert head.state is State.UNCERTAIN and head.proof is None

    asyncio.run(main())


def test_K14_a_restart_finding_another_identity_under_the_recorded_name_sends_no_signal(tmp_path: Path) -> None:
    """The runner dies with the stop recorded (term); under the recorded unit name the world now shows another
    cgroup id (another epoch). The restart continues the same stop, its identity check fails: no signal, the
    engine untouched, the claim uncertain and admission closed."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller(stop_point="term")
            await first.start()
            assert first.execution is not None and first.execution.ref is not None
            unit = first.execution.ref.unit
            client = await RawClient.connect(first.socket_path)
            auth = await client.control()
            cid = await client.confirm("force-stop", auth)
            await client.send("force-stop", incarnation=auth["incarnation"], confirmation=cid)
            await until(lambda: bool(lab.crashes), "the crash at term")
            await client.close()
            await lab.crashed(first)
            stop_id = lab.heads(first)[0].stop.stop_id
            lab.cohort.world.epoch_changed = True
            before = len(lab.cohort.log)
            second = lab.controller()
            await second.start()
            assert second.mode == "continued-stop"
            assert [entry.split(" ")[0] for entry in lab.cohort.log[before:]] == ["CheckIdentity"]
            ended = lab.cohort.units[unit].popen.poll()  # it may have ended on its stdin's EOF, never by a signal
            assert ended is None or ended >= 0, ended
            for head in lab.heads(second):
                assert head.state is State.UNCERTAIN and head.stop.stop_id == stop_id
            assert second.core.binding_state == "uncertain" and not second.core.admission_open

    asyncio.run(main())


def rewrite_claims(lab: Lab, old: str, new: str) -> None:
    """Edit the claim root as another boot or machine would have left it: `new` for `old` in every revision
    file (a host identity is in each one)."""
    for dirpath, _dirs, files in os.walk(lab.tree.claims):
        if dirpath.endswith("eligibility"):
            continue
        for name in files:
            if name.endswith(".json"):
                path = Path(dirpath) / name
                text = path.read_text()
                assert old in text, path
                path.write_text(text.replace(old, new))


async def rebooted(lab: Lab, controller: LaunchingController) -> None:
    """The machine went down under a running controller: the runner gone, its cohort with it."""
    await lab.crashed(controller)
    assert controller.execution is not None and controller.execution.ref is not None
    lab.cohort.let_go(controller.execution.ref)


def test_W7_a_claim_from_an_earlier_boot_is_stopped_by_a_boot_proof_and_the_next_launch_goes(
        tmp_path: Path) -> None:
    """Another boot id on the same machine, the unit gone with the reboot: the restart stops the old claim
    with a boot proof (under its claim ID) and launches anew. (The open tool call this fixture also carries
    needs a model behind the fake engine: that half stays in the kernel suite.)"""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            old = first.execution.claim.claim_id  # type: ignore[union-attr]
            await rebooted(lab, first)
            rewrite_claims(lab, current_host().boot_id, "f" * 32)
            second = lab.controller()
            await second.start()
            assert second.mode == "new"
            chain = [r for r in ClaimStore(str(lab.tree.claims)).read_chain(second.seat_key)
                     if getattr(r, "claim_id", None) == old]
            assert chain[-1].state is State.STOPPED and chain[-1].proof.kind is ProofKind.BOOT

    asyncio.run(main())


def test_W17_a_claim_root_from_another_machine_is_foreign_host_and_nothing_is_promoted(tmp_path: Path) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            await rebooted(lab, first)
            rewrite_claims(lab, current_host().machine_id, "e" * 32)
            before = lab.heads(first)
            second = lab.controller()
            with pytest.raises(Refusal) as refused:
                await second.start()
            assert refused.value.code == "foreign-host", refused.value.to_dict()
            assert lab.heads(first) == before  # nothing published, nothing promoted
            assert [entry for entry in lab.cohort.log if entry.startswith("launch ")] == [lab.cohort.log[0]]

    asyncio.run(main())


def test_disconnect_idle_engine_eof_and_stopping_to_serve_never_release_the_claim(tmp_path: Path) -> None:
    """Brief §2 "What never releases a claim": after each of these the claim is the same claim, on both keys,
    and never stopped; the cohort stays for a force stop to prove it empty. (A settle and an abort ack need a
    model behind the fake engine: they stay in the kernel suite's twin.)"""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first = lab.controller()
            await first.start()
            assert first.execution is not None and first.execution.ref is not None
            claim_id, unit = first.execution.claim.claim_id, first.execution.ref.unit

            def unreleased(after: str) -> None:
                for head in lab.heads(first):
                    assert head.claim_id == claim_id and head.state in (State.ACTIVE, State.UNCERTAIN), (after, head)

            client = await RawClient.connect(first.socket_path)
            await client.control()
            await client.close()  # the controlling connection goes away
            await asyncio.sleep(0.3)  # idle, nobody connected
            unreleased("disconnect and idle")
            client = await RawClient.connect(first.socket_path)
            await client.call("observe")
            lab.cohort.units[unit].popen.kill()  # the engine ends on its own: EOF on its stdout
            await client.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "binding"
                               and n["params"]["state"] == "uncertain")
            unreleased("engine EOF")
            await client.close()
            await first.aclose()  # the controller stops serving (what its SIGTERM does)
            unreleased("stopping to serve")
            assert unit in lab.cohort.units and not any(e.startswith("let go") for e in lab.cohort.log)

    asyncio.run(main())


def test_K6_recover_without_proof_without_confirmation_or_with_changed_pins_is_refused(tmp_path: Path) -> None:
    """Recover before a proven stop is `stop-proof`; with the confirmation declined, `confirmation`; after the
    engine's install tree changed since the launch, `engine-pin-mismatch`. Nothing is reserved by any."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            tree = tmp_path / "engine-tree"
            tree.mkdir()
            (tree / "engine.py").write_text("# the engine's install, pinned at the launch\n")
            first = lab.controller(pin_tree=str(tree))
            await first.start()
            client = await RawClient.connect(first.socket_path)
            auth = await client.control()

            async def recover(*, answer: bool = True) -> dict[str, Any]:
                cid = await client.confirm("recover", auth, answer=answer)
                return await client.call("recover", incarnation=auth["incarnation"], confirmation=cid)

            def code(reply: dict[str, Any]) -> str:
                assert "error" in reply, reply
                return str(reply["error"]["data"]["refusal"]["code"])

            assert code(await recover()) == "stop-proof"
            await client.force_stop(auth)
            assert (await client.stop_outcome())["state"] == "stopped"
            assert code(await recover(answer=False)) == "confirmation"
            (tree / "changed.py").write_text("# the engine's install changed after the launch\n")
            assert code(await recover()) == "engine-pin-mismatch"
            await client.close()
            for head in lab.heads(first):
                assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
            assert lab.records() == []

    asyncio.run(main())


# ------------------------------------------------------------------------------------ K17, K18, W9

def test_K17_two_launcher_calls_with_one_record_make_one_engine(tmp_path: Path) -> None:
    """Two runners in one process race on one eligibility record: exactly one launches (one engine, under the
    record's claim), the other is refused `eligibility`, naming the record as consumed by the other launch."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)
            await first.aclose()
            before = [e for e in lab.cohort.log if e.startswith("launch ")]
            a, b = lab.controller(eligibility=record["id"]), lab.controller(eligibility=record["id"])
            outs = await asyncio.gather(a.start(), b.start(), return_exceptions=True)
            refused = [o for o in outs if isinstance(o, BaseException)]
            assert len(refused) == 1 and isinstance(refused[0], Refusal), outs
            assert refused[0].code == "eligibility", refused[0].to_dict()
            assert any(words in refused[0].message for words in ("held by a launch", "already used by a launch",
                                                                  "taken")), refused[0].message
            winner = a if outs[0] is None else b
            assert winner.mode == "recovered" and winner.execution is not None
            assert winner.execution.claim.claim_id == record["claim_id"]
            launches = [e for e in lab.cohort.log if e.startswith("launch ")][len(before):]
            assert launches == [f"launch cohort-{record['claim_id']}.scope"]  # one engine
            seat, _session = lab.heads(winner)
            assert seat.state is State.ACTIVE and seat.claim_id == record["claim_id"]

    asyncio.run(main())


def test_K18_the_leaf_moves_after_eligibility_launch_refused_and_the_reservation_stays_until_released(
        tmp_path: Path) -> None:
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)
            await first.aclose()
            before = lab.heads(first)
            with open(lab.tree.session, "a") as f:  # another writer appends after eligibility
                f.write(json.dumps({"type": "custom", "customType": "foreign", "data": {}, "id": "f0f0f0f0",
                                    "parentId": record["leaf"], "timestamp": "2026-12-01T00:00:01.000Z"}) + "\n")
            launch = lab.controller(eligibility=record["id"])
            with pytest.raises(Refusal) as refused:
                await launch.start()
            assert refused.value.code == "target", refused.value.to_dict()
            assert lab.heads(first) == before  # the reservation stays, untouched
            assert lab.records() == [f"{record['id']}.json"]  # not held: nothing was launched
            plain = lab.controller()
            with pytest.raises(Refusal) as held:
                await plain.start()
            assert held.value.code == "already-active", held.value.to_dict()
            released = lab.controller()
            await released.release_reservation(record["id"])  # with a proof: the claim never spawned
            for head in lab.heads(released):
                assert head.state is State.STOPPED and head.proof.kind is ProofKind.NO_UNIT
                assert head.claim_id == record["claim_id"]

    asyncio.run(main())


def test_W9_a_launch_from_a_record_with_another_sealed_argv_is_refused_and_the_claim_is_unchanged(
        tmp_path: Path) -> None:
    """Another model is another sealed argv, another argv digest than the stopped launch's: refused
    `engine-pin-mismatch` before anything is touched."""
    async def main() -> None:
        async with lab_at(tmp_path) as lab:
            first, record = await recovered(lab)
            await first.aclose()
            before = lab.heads(first)
            other = lab.controller(eligibility=record["id"], model="fake-model-2")
            with pytest.raises(Refusal) as refused:
                await other.start()
            assert refused.value.code == "engine-pin-mismatch", refused.value.to_dict()
            assert lab.heads(first) == before and lab.records() == [f"{record['id']}.json"]

    asyncio.run(main())


def test_every_crash_point_has_a_crash_test() -> None:
    """README "Each step of recover and of the launcher's call has a SIGKILL test": each named point is crashed
    here (in memory) or in the kernel suite."""
    here = set(FIRST_LAUNCH) | {"engine-uid", "recover-reserved", "recover-recorded", "revalidated", "held",
                                "taken-over", "settled"}
    assert here == set(LAUNCH_POINTS)
    assert set(STOP_POINTS) == {"term", "kill"}  # test_K10_K11_..., parametrized over STOP_POINTS
