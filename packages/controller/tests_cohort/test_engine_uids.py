"""An engine uid per execution on the real parts (issue 28 item 3; README "An engine uid per execution"):
real controller processes with `EngineUids`, pi-rpc's fake engine in a real cohort on both routes, a real
writer claim. Each execution's engine runs as its own uid, in the engine group, recorded in the claim with
the spawn marker and on the binding record; the K13 canary holds for it as for the one account, and its
force stop still proves. The fork storm beside another conversation's tool runs on the real Pi
(tests_smoke/test_lifecycle_real.py)."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lifecycle_helpers import WAIT, ControllerProc, World, client
from test_lifecycle import heads

from mosaic.controller.testing import receipt_is
from mosaic.writer_claim import ProofKind, State

# A range no account names on this machine (checked below), apart from tests/test_engine_uids.py's.
FIRST, COUNT = 64100, 4


@pytest.fixture
def state_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="mosaic-uids-", dir="/tmp")
    os.chmod(path, 0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _shared_world(lab: Any, vendored: str, run_marker: str) -> Iterator[World]:
    """A conversation's fixture tree (its own project, session and claim root) that engines of several uids
    in the engine group share: group-writable (the world fixture's is the one account's)."""
    root = Path(tempfile.mkdtemp(prefix="mosaic-fx-", dir="/tmp"))
    os.chmod(root, 0o755)
    w = World(root=root, lab=lab, vendored=vendored, run_marker=run_marker)
    w.make(group_writable=True)
    yield w
    problems = w.cleanup()
    assert not problems, problems


@pytest.fixture
def conversation_a(lab: Any, vendored_engine: str, run_marker: str) -> Iterator[World]:
    yield from _shared_world(lab, vendored_engine, run_marker)


@pytest.fixture
def conversation_b(lab: Any, vendored_engine: str, run_marker: str) -> Iterator[World]:
    yield from _shared_world(lab, vendored_engine, run_marker)


def ids_of(pid: int) -> tuple[list[int], list[int]]:
    """(the real, effective, saved and file-system uids; the same gids) of a process."""
    with open(f"/proc/{pid}/status") as f:
        rows = {k: v.split() for k, _, v in (line.partition(":") for line in f)}
    return [int(x) for x in rows["Uid"]], [int(x) for x in rows["Gid"]]


def test_each_execution_runs_as_its_own_uid_recorded_in_claim_and_binding_and_its_stop_still_proves(
        conversation_a: World, conversation_b: World, state_dir: str) -> None:
    import pwd  # noqa: PLC0415

    for uid in range(FIRST, FIRST + COUNT):
        with pytest.raises(KeyError):
            pwd.getpwuid(uid)  # the range is nobody's account
    world, other = conversation_a, conversation_b
    gid = world.lab.engine.gid
    uids = {"first": FIRST, "count": COUNT, "gid": gid, "state_dir": state_dir}
    procs: list[ControllerProc] = [w.spawn(engine_uids=uids) for w in (world, other)]
    for w, proc in zip((world, other), procs, strict=True):
        proc.wait_first()
        w.note(proc)
        assert proc.first.get("mode") == "new", proc.first
    got = []
    for w, proc in zip((world, other), procs, strict=True):
        ref = proc.ref
        assert ref is not None and ref.containment.held, ref.containment  # K13: the canary was refused
        (uid, *rest), gids = ids_of(ref.engine.pid)
        assert rest == [uid] * 3 and gids == [gid] * 4, (uid, rest, gids)  # all four ids: the engine's own
        got.append(uid)
        for head in heads(w):
            assert head.engine_uid == uid and head.spawn_marker  # recorded with the spawn marker
    assert sorted(got) == [FIRST, FIRST + 1]  # one each, never shared

    async def run(proc: ControllerProc, stop: bool) -> dict[str, Any]:
        c = await client(proc)
        binding = (await c.call("observe"))["result"]["binding"]
        out: dict[str, Any] = {"binding": binding}
        if stop:
            auth = await c.control()
            await c.call("prompt", **auth, clientRequestId="d1", text="DAEMON please")
            await c.until(receipt_is("finished"), WAIT)
            await c.force_stop(auth)
            out["stop"] = await c.stop_outcome(WAIT)
            out["proofs"] = c.records("cohortProof")
        await c.close()
        return out

    first = asyncio.run(run(procs[0], stop=True))
    second = asyncio.run(run(procs[1], stop=False))
    assert first["binding"]["engineUid"] == got[0] and second["binding"]["engineUid"] == got[1]
    # The force stop of an execution under its own uid proves as before: its setsid daemon (the uid's too,
    # ignoring SIGTERM) is frozen, listed, killed and reaped; both keys stopped with the cohort proof.
    assert first["stop"]["state"] == "stopped", first["stop"]
    (proof,) = first["proofs"]
    assert proof["proof"]["membershipComplete"] is True and proof["proof"]["members"]
    for head in heads(world):
        assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
        assert head.engine_uid == got[0]
    # The next launch on the freed pair gets a uid of its own: the next in the cycle, not the one just freed.
    procs[0].terminate()
    third = world.start(engine_uids=uids)
    assert third.first.get("mode") == "new", third.first
    assert third.ref is not None and ids_of(third.ref.engine.pid)[0][0] == FIRST + 2
