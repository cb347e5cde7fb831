"""The controller on real-length sessions, on the real Pi 0.85.1 (issue 27): a `LaunchingController` takes a session
of 800, 3,000 or 11,265 entries (pi-rpc's `testing.sessions` generator, written at test time into a scratch
tree: realistic entries, one chain, assistant messages with `usage`, tool calls, a compaction) or the
session the real Pi wrote itself over 300+ turns (the committed fixture `long-tools.jsonl`), launches the
pinned Pi on it in a direct cgroup, and then, on each length:

* K8: the load check passes (the engine loaded the recorded file and leaf): admission opens;
* a prompt runs to its finished receipt;
* N1: an interrupt mid-stream sends `clear_queue` before `abort`, nothing queued runs, the turn ends
  interrupted;
* a force stop proves the stop (a cohort proof);
* K7: recover, then the launch from its eligibility record resumes the same session (a new claim and
  incarnation, generation + 1, nothing replayed) and the load check passes again on the new leaf;
* a prompt runs again;
* W10: another writer appends an entry while the engine is idle; the next prompt is refused
  `session-drift` before anything is written to the engine, and admission closes;
* a force stop ends it.

The engine runs as the engine account, like `test_lifecycle_real.py`; the parent cgroup, every cohort, the
tree and the install copy are removed by their recorded names."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import Credentials, DirectCgroupLauncher, FixtureVerifier, release_cohort
from mosaic.controller import LaunchingController, PiSpec, Placement
from mosaic.controller.testing import FixtureTree, RawClient, event_is, readable_install, receipt_is, stop_is
from mosaic.pi_rpc.testing import ModelServer
from mosaic.pi_rpc.testing.sessions import session_lines

WAIT = 60.0
REPO = Path(os.environ.get("MOSAIC_REPO", Path(__file__).resolve().parents[3]))
REAL_FIXTURE = REPO / "fixtures" / "pi-0.85.1" / "proj-rpc" / ".pi" / "state" / "alpha" / "sessions" / \
    "long-tools.jsonl"
FIXTURE_CWD = "/tmp/mosaic-fixtures/proj-rpc"



def seed_for(length: str, tree: FixtureTree) -> str:
    """The session file's text: generated at `length` entries, or the real Pi's own long session with its
    header rewritten to this tree (fixtures/README.md "Using a fixture in a test": line 1 only)."""
    if length == "real-pi-fixture":
        data = REAL_FIXTURE.read_text(encoding="utf-8")
        first, rest = data.split("\n", 1)
        header = json.loads(first)
        header["cwd"] = str(tree.project) + header["cwd"][len(FIXTURE_CWD):]
        tree.session_id = header["id"]
        return json.dumps(header, ensure_ascii=False, separators=(",", ":")) + "\n" + rest
    return "".join(line + "\n" for line in session_lines(cwd=str(tree.project), session_id=tree.session_id,
                                                         entries=int(length)))


def entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().split(b"\n")[1:] if x]


def user_texts(path: Path) -> list[str]:
    return [e["message"]["content"][0]["text"] for e in entries(path)
            if e.get("type") == "message" and e["message"]["role"] == "user"]


async def run_turn(c: RawClient, auth: dict[str, Any], crid: str, text: str) -> None:
    reply = await c.call("prompt", **auth, clientRequestId=crid, text=text)
    assert reply["result"]["outcome"] == "admitted", reply
    await c.until(lambda n: receipt_is("finished")(n) and n["params"]["clientRequest"] == crid, WAIT)


@pytest.mark.parametrize("length", ["800", "3000", "11265", "real-pi-fixture"])
def test_K8_K7_N1_W10_take_control_of_a_long_session_prompt_interrupt_force_stop_recover_and_prompt_again(
        scratch: Path, pi_dir: Path, model: ModelServer, parent: str, engine_uid: Credentials, length: str) -> None:
    tree = FixtureTree(scratch / "fx")
    seed = seed_for(length, tree)
    tree.make((engine_uid.uid, engine_uid.gid), model_url=model.base_url, seed=seed)
    tree.root.chmod(0o755)
    session = tree.session
    before = entries(session)
    installed = readable_install(pi_dir, str(scratch))
    sockets = tempfile.mkdtemp(prefix="mosaic-smoke-sock-")
    os.chmod(sockets, 0o700)
    launcher = DirectCgroupLauncher(parent, sockets, engine=engine_uid)
    refs = []
    timings: dict[str, float] = {}

    def controller(eligibility: str | None = None) -> LaunchingController:
        socket_dir = tempfile.mkdtemp(prefix="c-", dir=sockets)
        return LaunchingController(
            Placement(**tree.placement(socket_dir)),
            PiSpec(env=tree.engine_env(), pi_dir=str(installed), provider="fakeprov", model="fake-model-1"),
            launcher, verifier=FixtureVerifier(), stop_grace=2.0, eligibility=eligibility)

    async def start(c: LaunchingController, label: str) -> None:
        t0 = time.monotonic()
        await c.start()
        timings[label] = time.monotonic() - t0
        assert c.execution is not None and c.execution.ref is not None
        refs.append(c.execution.ref)

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        first = controller()
        await start(first, "first start")
        try:
            c = await RawClient.connect(first.socket_path)
            binding = out["first_binding"] = (await c.call("observe"))["result"]["binding"]
            # K8: the load check proved the file and the leaf, however long the chain: admission opened.
            assert (binding["state"], binding["admission"], binding["fences"]) == ("active", "open", []), binding
            auth = await c.control()
            await run_turn(c, auth, "hello", "Say hello")
            # N1: clear_queue before abort, on the real binary; nothing queued runs after the abort.
            written: list[str] = []
            take = first.core.link.next_write

            def next_write() -> Any:
                command = take()
                if command is not None:
                    written.append(command.type)
                return command

            first.core.link.next_write = next_write  # type: ignore[method-assign]
            earlier = {id(n) for n in c.notes}  # the hello turn's deltas are not the slow run's
            await c.call("prompt", **auth, clientRequestId="slow", text="SLOW stream please")
            await c.until(lambda n: id(n) not in earlier and event_is("text-delta")(n), WAIT)
            assert (await c.call("interrupt", **auth))["result"]["stop"]["kind"] == "interrupt"
            await c.until(stop_is("reconciled"), WAIT)
            out["interrupt_writes"] = list(written)
            out["turn_proof"] = c.records("turnProof")[-1]
            out["interrupted"] = [r for r in c.records("receipt") if r["clientRequest"] == "slow"][-1]
            await c.force_stop(auth)
            out["first_stop"] = await c.stop_outcome(WAIT)
            out["proofs"] = c.records("cohortProof")
            cid = await c.confirm("recover", auth)
            recovered = await c.call("recover", incarnation=auth["incarnation"], confirmation=cid)
            assert "result" in recovered, recovered
            out["record"] = recovered["result"]["eligibility"]
            out["first_incarnation"] = auth["incarnation"]
            await c.close()
        finally:
            await first.aclose()
        out["users_after_first"] = user_texts(session)
        second = controller(eligibility=out["record"]["id"])
        await start(second, "resume")
        try:
            c = await RawClient.connect(second.socket_path)
            observed = (await c.call("observe"))["result"]
            out["second"] = {"mode": second.mode, "binding": observed["binding"],
                             "incarnation": observed["incarnation"], "receipts": observed["receipts"],
                             "claim": second.execution.claim.claim_id if second.execution else None}
            auth = await c.control()
            await run_turn(c, auth, "again", "Say hello again")
            # W10 before the next prompt runs: another writer appends while the engine is idle.
            last = entries(session)[-1]
            foreign = {"type": "message", "id": "f0000001", "parentId": last["id"], "timestamp": last["timestamp"],
                       "message": {"role": "user", "content": [{"type": "text", "text": "from another writer"}],
                                   "timestamp": 1796006777976}}
            with open(session, "ab") as f:
                f.write(json.dumps(foreign, separators=(",", ":")).encode() + b"\n")
            on_disk = session.read_bytes()
            requests_before = len(model.requests)
            reply = await c.call("prompt", **auth, clientRequestId="after-foreign", text="Say hello once more")
            out["drift_reply"] = reply
            out["drift_binding"] = (await c.call("observe"))["result"]["binding"]
            out["file_unchanged"] = session.read_bytes() == on_disk
            out["model_requests_after_drift"] = len(model.requests) - requests_before
            await c.force_stop(auth)
            out["second_stop"] = await c.stop_outcome(WAIT)
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
    print(f"{length}: {len(before)} entries, {session.stat().st_size} bytes; "
          + ", ".join(f"{k} {v:.2f} s" for k, v in timings.items()))
    # N1 on the real binary: clear_queue before abort, the queue cleared, the turn interrupted.
    writes = out["interrupt_writes"]
    assert writes.index("clear_queue") < writes.index("abort"), writes
    assert out["turn_proof"]["nativeQueue"] == "cleared"
    assert out["interrupted"]["state"] == "finished" and out["interrupted"]["turnState"] == "interrupted"
    assert out["first_stop"]["state"] == "stopped"
    assert len(out["proofs"]) == 1
    # K7: resumed from the record, a new claim and incarnation, generation + 1, the load check passed again.
    second = out["second"]
    assert second["mode"] == "recovered" and second["claim"] == out["record"]["claim_id"]
    assert second["incarnation"] != out["first_incarnation"]
    assert (second["binding"]["state"], second["binding"]["admission"]) == ("active", "open"), second["binding"]
    assert second["binding"]["generation"] == out["record"]["generation"]
    assert second["receipts"] == []
    users = user_texts(session)
    assert users[len(out["users_after_first"]):] == ["Say hello again", "from another writer"]  # nothing replayed
    assert out["users_after_first"][-2:] == ["Say hello", "SLOW stream please"]
    # W10: the second writer is seen before the next prompt runs: refused, nothing written, admission closed.
    refusal = out["drift_reply"]["error"]["data"]["refusal"]
    assert refusal["code"] == "session-drift", out["drift_reply"]
    assert out["file_unchanged"] and out["model_requests_after_drift"] == 0
    drift_binding = out["drift_binding"]
    assert drift_binding["admission"] == "closed" and "session-drift" in drift_binding["fences"]
    assert out["second_stop"]["state"] == "stopped"
