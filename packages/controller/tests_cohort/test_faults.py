"""The controller under faults (README "Faults"), on the real parts: real controller processes, a real
cohort, a real writer claim on a real file system, pi-rpc's fake engine as the engine uid.

3. a full disk (a small tmpfs mounted for the test: the fake tears its line as Pi does, the stop's claim
   revisions come from the room reserved at launch, or say which key could not be written and why);
4. recover after a torn write (refused with the bytes' position before anything is reserved; an
   eligibility is consumed only by a launch that passed its load check);
5. a crashed controller's socket file (removed and rebound at the restart; a live one refuses
   already-active before the claim is touched), and two controllers starting at once on it (one wins, the
   other refuses already-active, never unsafe-replacement).
"""

from __future__ import annotations

import asyncio
import errno
import gc
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lifecycle_helpers import World, client
from test_lifecycle import WAIT, force_stop, heads, keys
from test_recover import records_dir, recover, stopped

from mosaic.cgroup_cohort.testing import alive
from mosaic.controller.server import socket_state
from mosaic.controller.testing import receipt_is
from mosaic.writer_claim import RESERVE_REVISIONS, ProofKind, State

# The tmpfs a full-disk test mounts: room for the fixture tree, the claim root, the session and the stop's
# reserved claim revisions, little enough to fill in a moment.
FULL_DISK_SIZE = "8m"


@pytest.fixture
def full_disk(lab: Any, vendored_engine: str, run_marker: str) -> Iterator[tuple[World, Path]]:
    """A World whose fixture tree (claim root, session directory, evidence files) lives on a small tmpfs
    mounted for this test on a directory it made under /tmp, unmounted by that exact name afterwards (no
    host mount is touched). The direct route only: the scope route's engine runs in the sandboxed user
    manager's own mount namespace, made before this mount, so it would not see the tmpfs; what is tested
    here is the controller's and the claim's, not the route's."""
    if lab.path != "direct":
        pytest.skip("a full disk runs under the direct route only: the scope sandbox's mount namespace was made "
                    "before this test's tmpfs and does not see it")
    mount = Path(tempfile.mkdtemp(prefix="mosaic-full-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={FULL_DISK_SIZE},mode=0755", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(mount)
        pytest.skip(f"cannot mount a tmpfs for the full-disk test: {done.stderr.strip()}")
    world: World | None = None
    try:
        root = mount / "fx"
        root.mkdir(mode=0o755)
        world = World(root=root, lab=lab, vendored=vendored_engine, run_marker=run_marker)
        world.make()
        yield world, mount
    finally:
        problems = world.cleanup() if world is not None else []
        problems += unmount(mount)
    assert not problems, problems


def unmount(mount: Path) -> list[str]:
    """Unmount the test's tmpfs by the exact name it was mounted on and remove the directory. A busy one
    (a descriptor still open on it) is a failure of the test, and is detached all the same (`umount -l`)
    so nothing stays mounted."""
    if subprocess.run(["umount", str(mount)], capture_output=True).returncode == 0:
        os.rmdir(mount)
        return []
    gc.collect()  # a store or file object nothing refers to any more still holds its descriptor
    if subprocess.run(["umount", str(mount)], capture_output=True).returncode == 0:
        os.rmdir(mount)
        return []
    subprocess.run(["umount", "-l", str(mount)], check=True)
    os.rmdir(mount)
    return [f"{mount} was busy at unmount (a descriptor left open on it): detached lazily"]


def fill(mount: Path) -> Path:
    """Fill the file system at `mount` to its last page (a root-owned filler file, written until ENOSPC in
    ever smaller writes); returns the filler's path (unlink it to free the room)."""
    filler = mount / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            while True:
                try:
                    if os.write(fd, b"\0" * size) < size:
                        break
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return filler


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr[-4000:]


def test_crashed_controller_socket_is_rebound_at_the_restart_and_a_live_one_refuses_before_the_claim(
        world: World) -> None:
    """Case 5: SIGKILL a controller (its socket file stays, nobody accepts on it), restart on the same
    placement: the stale socket is removed and the orphan served on the same path; force stop, recover.
    While that controller serves, a launcher with the record on the same placement refuses already-active
    with nothing touched (record unused, reservation untaken); once it is killed too, the launcher's call
    rebinds the path and the conversation takes a prompt again."""
    first = world.start()
    placement = first.args["placement"]
    path = first.socket

    async def turn(proc: Any, crid: str) -> dict[str, Any]:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId=crid, text="Say hello")
        await c.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == crid, WAIT)
        receipt = [r for r in c.records("receipt") if r["clientRequest"] == crid][-1]
        await c.close()
        return receipt

    assert asyncio.run(turn(first, "before"))["turnState"] == "completed"
    first.kill()  # SIGKILL: no aclose, so the socket file stays
    assert os.path.lexists(path) and socket_state(path) == "stale"

    second = world.start(placement=placement)
    assert second.first.get("mode") == "orphan", second.first  # not SocketPathError "exists" after the adopt
    assert second.socket == path and socket_state(path) == "live"

    async def stop_and_recover() -> dict[str, Any]:
        c = await client(second)
        token = (await c.call("observe"))["result"]["incarnation"]
        took = await c.call("acquire-recovery-control", incarnation=token)
        auth = {"incarnation": token, "generation": took["result"]["generation"]}
        await stopped(c, auth)
        reply = await recover(c, auth=auth)
        await c.close()
        assert "result" in reply, reply
        return dict(reply["result"]["eligibility"])

    record = asyncio.run(stop_and_recover())
    before = heads(world)
    blocked = world.spawn(placement=placement, eligibility=record["id"])
    try:
        blocked.wait_first()
        ended = ""
    except ChildProcessError as exc:  # it ended without a line: judged below by what it left
        ended = str(exc)
    world.note(blocked)
    # Refused before the claim: the record unused, the claim untouched (still the untaken reservation).
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"], ended
    assert heads(world) == before, ended
    assert blocked.first.get("refused", {}).get("code") == "already-active", (blocked.first, ended)
    assert path in blocked.first["refused"]["message"]
    assert socket_state(path) == "live"  # and the serving controller kept its socket

    second.kill()
    assert socket_state(path) == "stale"
    third = world.start(placement=placement, eligibility=record["id"])
    assert third.first.get("mode") == "recovered", third.first
    assert third.socket == path
    again = asyncio.run(turn(third, "after"))
    assert (again["state"], again["turnState"]) == ("finished", "completed")
    for head in heads(world):
        assert head.claim_id == record["claim_id"] and head.state is State.ACTIVE


#: Rounds of the start race: the loser read the winner's claim as unsafe in 4 of 28 starts in the probe.
START_RACE_ROUNDS = 12


def test_two_controllers_starting_at_once_on_a_crashed_controllers_socket_the_loser_refuses_already_active(
        world: World) -> None:
    """Issue 28 item 6: SIGKILL a controller (its socket file stays, its claim an orphan), then start two
    controllers on the same placement at once, round after round (the round's winner is SIGKILLed too, so
    the next round starts on a crashed controller's socket again). Exactly one serves the orphan each round;
    the other refuses `already-active`, the other start being live, never `unsafe-replacement` (which sends
    an operator to repair a claim that is fine): the loser found the winner's adoption (an uncertain claim
    whose owner is alive) and its refusal was the pair's state-based one, or lost the adoption's link()."""
    first = world.start()
    placement = first.args["placement"]
    path = first.socket
    first.kill()
    assert socket_state(path) == "stale"
    seen: list[tuple[str, str]] = []
    for n in range(START_RACE_ROUNDS):
        pair = [world.spawn(placement=placement), world.spawn(placement=placement)]
        for proc in pair:
            proc.wait_first()
            world.note(proc)
        modes = sorted(str(p.first.get("mode") or p.first.get("refused", {}).get("code")) for p in pair)
        seen.append((modes[0], modes[1]))
        assert modes == ["already-active", "orphan"], (n, [p.first for p in pair])
        loser = next(p for p in pair if "refused" in p.first)
        loser.proc.wait(timeout=WAIT)  # it exits after refusing, having started nothing
        winner = next(p for p in pair if p.first.get("mode") == "orphan")
        assert winner.socket == path and socket_state(path) == "live"
        winner.kill()
        assert socket_state(path) == "stale"
    assert len(seen) == START_RACE_ROUNDS
    for head in heads(world):
        assert head.state is State.UNCERTAIN  # the orphan, untouched but adopted round after round


# A line cut short: what a full disk leaves of Pi's appendFileSync (case 3's test makes one for real).
TORN = b'{"type":"message","id":"70e00001","parentId":"x","timestamp":"2026-12-01T00:00:0'


def tear(world: World) -> tuple[int, str]:
    """Append a torn line to the session file; its size before and the byte range the refusal must name."""
    size = world.session.stat().st_size
    with open(world.session, "ab") as f:
        f.write(TORN)
    return size, f"bytes {size} to {size + len(TORN) - 1}"


def test_torn_write_recover_refuses_with_the_bytes_position_before_anything_is_reserved(world: World) -> None:
    """Case 4: a session whose last line is torn (bytes after its last LF) is one Pi writes to at load (it
    appends the missing newline and takes the fragment as an entry), so a launch on it would fence
    session-drift at once and spend its eligibility. A plain start, recover and the launcher's call each
    refuse session-drift naming partial-line and the bytes' position, before anything is reserved, held or
    spawned; once the file is repaired the same record launches and is consumed (used) only then."""
    size, where = tear(world)
    plain = world.start()
    assert plain.first["refused"]["code"] == "session-drift", plain.first
    assert "partial-line" in plain.first["refused"]["message"] and where in plain.first["refused"]["message"]
    assert not [n for n in os.listdir(world.claims) if not n.startswith(".")]  # no key directory: nothing claimed
    os.truncate(world.session, size)

    first = world.start()

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        c = await client(first)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="p1", text="Say hello")
        await c.until(receipt_is("finished"), WAIT)
        await stopped(c, auth)
        repaired = world.session.stat().st_size
        _, at = tear(world)
        before = heads(world)
        torn = await recover(c, auth=auth)
        assert heads(world) == before  # nothing reserved
        assert not os.path.exists(records_dir(world))  # no record written
        assert torn["error"]["data"]["refusal"]["code"] == "session-drift", torn
        assert "partial-line" in torn["error"]["data"]["refusal"]["message"]
        assert at in torn["error"]["data"]["refusal"]["message"]
        os.truncate(world.session, repaired)
        granted = await recover(c, auth=auth)
        await c.close()
        return torn, dict(granted["result"]["eligibility"])

    _torn, record = asyncio.run(main())
    # Torn again after eligibility, before the launch: refused before the record is held.
    repaired = world.session.stat().st_size
    _, at = tear(world)
    reserved = heads(world)
    launch = world.start(eligibility=record["id"])
    assert launch.first["refused"]["code"] == "session-drift", launch.first
    assert at in launch.first["refused"]["message"]
    assert heads(world) == reserved  # the untaken reservation, untouched
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]  # unused: still the launcher's to use
    os.truncate(world.session, repaired)
    launched = world.start(eligibility=record["id"])
    assert launched.first.get("mode") == "recovered", launched.first
    assert os.listdir(records_dir(world)) == [f"{record['id']}.used"]  # consumed once its load check passed
    for head in heads(world):
        assert head.state is State.ACTIVE and head.eligibility.taken


def test_disk_full_a_torn_turn_is_never_completed_and_the_force_stop_still_proves_and_releases(
        full_disk: tuple[World, Path]) -> None:
    """Case 3 as it happens: the session directory's file system fills up after the launch; Pi (the fake,
    as Pi's appendFileSync does) tears its line for the next turn and fails the run (agent.js
    handleRunFailure). The torn turn's receipt is never finished (completed); the claim goes uncertain and
    the force stop proves the cohort stopped and releases both keys with the proof's digest: its claim
    revisions come from the room reserved at launch. No traceback anywhere."""
    world, mount = full_disk
    proc = world.start()
    text = "Say hello " + "y" * 6000  # a user line longer than a page: the append runs out of room inside it

    async def main() -> dict[str, Any]:
        c = await client(proc)
        auth = await c.control()
        await c.call("prompt", **auth, clientRequestId="fits", text="Say hello")
        await c.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == "fits", WAIT)
        before = world.session.stat().st_size
        fill(mount)
        await c.call("prompt", **auth, clientRequestId="torn", text=text)
        await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "receipt"
                      and n["params"]["clientRequest"] == "torn" and n["params"]["state"] in
                      ("finished", "failed", "delivery-unknown"), WAIT)
        await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "binding"
                      and n["params"]["state"] == "uncertain", WAIT)
        stop = await force_stop(c, auth)
        final = await c.stop_outcome()
        out = {"before": before, "receipts": [r for r in c.records("receipt") if r["clientRequest"] == "torn"],
               "stop": stop, "final": final, "proofs": c.records("cohortProof")}
        await c.close()
        return out

    out = asyncio.run(main())
    data = world.session.read_bytes()
    tail = len(data) - (data.rfind(b"\n") + 1)
    assert tail > 0 or out["before"] % 4096 == 0, "the turn's line was torn (unless the file ended on a page)"
    assert not [r for r in out["receipts"] if r["state"] == "finished" and r.get("turnState") == "completed"], \
        out["receipts"]
    assert out["final"]["state"] == "stopped", out["final"]
    (proof,) = out["proofs"]
    for head in heads(world):
        assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
        assert head.proof.digest == proof["proof"]["verification"]["digest"]
    no_traceback(proc.terminate())


def test_disk_full_with_no_room_left_the_force_stop_says_which_key_and_why_and_signals_nothing(
        full_disk: tuple[World, Path]) -> None:
    """Case 3 past the reserve: with the claim's reserved room gone (a claim root copied without its dot
    files, or spent), a force stop on a full disk cannot record its stopping revision. It ends uncertain,
    reason claim-publication, the stop record naming the key that could not be written and ENOSPC; nothing
    was signalled (the stop is recorded before its first signal: the engine still answers), both keys
    still read what they read, no traceback. With room again, a fresh confirmation stops it with a proof."""
    world, mount = full_disk
    proc = world.start()
    assert proc.ref is not None
    for key in keys(world):
        reserves = [n for n in os.listdir(world.claims / key.dirname) if n.startswith(".reserve-")]
        assert len(reserves) == RESERVE_REVISIONS  # made at launch, before the spawn marker
        for name in reserves:
            os.unlink(world.claims / key.dirname / name)
    before = heads(world)
    filler = fill(mount)

    async def ended(c: Any, stop: dict[str, Any]) -> dict[str, Any]:
        note = await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "stop"
                             and n["params"]["stop"] == stop["stop"]
                             and n["params"]["state"] in ("stopped", "uncertain"), WAIT)
        return dict(note["params"])

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        c = await client(proc)
        auth = await c.control()
        # Taking control publishes the new generation into the claim; with no room and no reserve that write
        # fails, so the binding goes uncertain (claim-publication), which changes the stop context. Wait for
        # it: a confirmation issued before it lands is void by the time it is used (CI once saw that race).
        await c.until(lambda n: n.get("method") == "record" and n["params"].get("type") == "binding"
                      and n["params"]["state"] == "uncertain" and "uncertain" in n["params"]["fences"], WAIT)
        first = await ended(c, await force_stop(c, auth))
        assert proc.ref is not None and alive(proc.ref.engine), "nothing was signalled: the engine runs"
        assert heads(world) == before  # neither key could take a revision: both read what they read
        os.unlink(filler)
        second = await ended(c, await force_stop(c, auth))
        await c.close()
        return first, second

    first, second = asyncio.run(main())
    assert (first["state"], first["reason"]) == ("uncertain", "claim-publication"), first
    assert "ENOSPC" in first["detail"] and "key" in first["detail"], first
    assert "nothing was signalled" in first["detail"], first
    assert second["state"] == "stopped", second
    for head in heads(world):
        assert head.state is State.STOPPED and head.proof.kind is ProofKind.COHORT
    no_traceback(proc.terminate())
