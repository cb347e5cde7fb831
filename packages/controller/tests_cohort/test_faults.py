"""The controller under faults (issue 19, cases 3-5), on the real parts: real controller processes, a real
cohort, a real writer claim on a real file system, pi-rpc's fake engine as the engine uid.

3. a full disk (a small tmpfs mounted for the test: the fake tears its line as Pi does, the stop's claim
   revisions come from the room reserved at launch, or say which key could not be written and why);
4. recover after a torn write (refused with the bytes' position before anything is reserved; an
   eligibility is consumed only by a launch that passed its load check);
5. a crashed controller's socket file (removed and rebound at the restart; a live one refuses
   already-active before the claim is touched).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from lifecycle_helpers import World, client
from test_lifecycle import WAIT, heads
from test_recover import records_dir, recover, stopped

from mosaic.controller._server import socket_state
from mosaic.controller.testing import receipt_is
from mosaic.writer_claim import State


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
    blocked = world.start(placement=placement, eligibility=record["id"])
    assert blocked.first["refused"]["code"] == "already-active", blocked.first
    assert path in blocked.first["refused"]["message"]
    assert heads(world) == before  # the claim untouched: still the untaken reservation
    assert os.listdir(records_dir(world)) == [f"{record['id']}.json"]  # the record unused
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
