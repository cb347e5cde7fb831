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
