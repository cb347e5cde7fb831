"""A controller process for the real-kernel lifecycle tests: it can be SIGKILLed at an exact step.

With `eligibility` it is the launcher's call (launch under a recover's eligibility record); with
`release_reservation` it releases a record's reservation with a never-spawned proof and prints
`{"released": digest}`. `append_at` appends a line to the session file at a launch step. `engine_uids`
({first, count, gid, state_dir}) gives each launch its own engine uid (`EngineUids`).

Run as `python controller_child.py '<json>'`. It builds a `LaunchingController` (lifecycle) from the arguments,
starts it, prints one JSON line `{"ready": socket_path, "claimId", "mode", "unit"}` (or `{"refused":
{code, ...}}` and exit 3), then serves until SIGTERM. `die_at` names a launch step ("reserved",
"spawn-marker", "launched", "active"; with `eligibility` also "revalidated", "held", "taken-over",
"settled"), a
recover step ("recover-reserved", "recover-recorded"), a stop phase as the claim records it ("term", "kill") or
"prompt-written" (a prompt's line wholly written to the engine, its ack not yet seen by the core: H20)
at which it SIGKILLs itself: a controller crash at exactly that point, nothing cleaned up.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from mosaic.cgroup_cohort import (
    Credentials,
    DirectCgroupLauncher,
    EngineLimits,
    FixtureVerifier,
    PgroupLauncher,
    ScopeLauncher,
    UserManager,
)
from mosaic.controller import Bounds, EngineUids, Hooks, LaunchingController, PiSpec, Placement
from mosaic.pi_rpc.link import CommandWritten
from mosaic.safe_open import Refusal


def die_at(step: str | None):  # type: ignore[no-untyped-def]
    def hook(name: str) -> None:
        if name == step:
            sys.stdout.write(json.dumps({"dying": name}) + "\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    return hook


async def main(args: dict[str, Any]) -> int:
    creds = Credentials(args["engine_uid"], args["engine_gid"], ())
    manager = UserManager(args["manager_prefix"]) if args.get("manager_prefix") else None
    if args["route"] == "direct":
        launcher: Any = DirectCgroupLauncher(args["direct_parent"], args["socket_dir"], engine=creds)
    elif args["route"] == "scope":
        assert manager is not None
        launcher = ScopeLauncher(manager, args["socket_dir"], engine=creds)
    else:
        launcher = PgroupLauncher(engine=creds)
    hook = die_at(args.get("die_at"))
    barrier_step = args.get("die_at_barrier")

    def barrier(b: Any) -> None:
        # A crash between the two keys of one claim step (writer-claim's barrier): W15 during release.
        if b.point == "between-keys" and b.step == barrier_step:
            sys.stdout.write(json.dumps({"dying": f"between-keys:{b.step}"}) + "\n")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
    append = args.get("append_at")

    def on_engine_events(batch: list[Any]) -> None:
        # H20: the prompt's whole line is in the pipe; whatever the engine answered dies with this process.
        if any(isinstance(e, CommandWritten) and e.command.type == "prompt" for e in batch):
            hook("prompt-written")

    def on_step(name: str) -> None:
        if append is not None and name == append["step"]:
            # A foreign append to the session file at an exact launch step (K8: the engine then loads
            # another leaf than the one recorded).
            with open(args["placement"]["session_file"], "a") as f:
                f.write(append["line"] + "\n")
        hook(name)
    controller = LaunchingController(
        Placement(**args["placement"]),
        PiSpec(env=args["engine_env"], command=tuple(args["engine_command"]), provider="fakeprov",
                   model=args.get("model", "fake-model-1"), pin_tree=args.get("pin_tree"),
                   limits=EngineLimits.from_dict(args["limits"]) if args.get("limits") else None),
        launcher, verifier=FixtureVerifier(), manager=manager, stop_grace=args.get("grace", 0.3),
        bounds=Bounds(settle=args.get("settle", 30.0)), hooks=Hooks(on_launch_step=on_step, on_stop_phase=hook, barrier=barrier if barrier_step else None,
                                                                      on_engine_events=on_engine_events),
        evidence_path=args.get("evidence"), eligibility=args.get("eligibility"),
        engine_uids=EngineUids(**args["engine_uids"]) if args.get("engine_uids") else None)
    try:
        if args.get("release_reservation"):
            proof = await controller.release_reservation(args["release_reservation"])
            sys.stdout.write(json.dumps({"released": proof.digest}) + "\n")
            sys.stdout.flush()
            return 0
        await controller.start()
    except Refusal as refusal:
        sys.stdout.write(json.dumps({"refused": refusal.to_dict()}) + "\n")
        sys.stdout.flush()
        return 3
    execution = controller.execution
    assert execution is not None
    sys.stdout.write(json.dumps({"ready": controller.socket_path, "claimId": execution.claim.claim_id,
                                 "mode": controller.mode, "unit": execution.claim.unit_name,
                                 "incarnation": controller.core.config.incarnation,
                                 "generation": execution.claim.head("seat").generation,
                                 "ref": execution.ref.to_dict() if execution.ref else None}) + "\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await controller.aclose()
    return 0


if __name__ == "__main__":
    import faulthandler

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck child tells where, on request
    sys.exit(asyncio.run(main(json.loads(sys.argv[1]))))
