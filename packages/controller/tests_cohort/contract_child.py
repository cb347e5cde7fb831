"""Phase one of the claim <-> cohort contract test, as a controller process that then crashes.

Run as `python contract_child.py '<json>'`. It opens the claim root, reserves a claim, publishes the spawn
marker, launches the engine under the unit name the claim recorded, records the invocation ID, the engine
and the cohort reference, publishes active, prints one JSON line and exits at once with os._exit: no
handle is closed, no claim released, nothing cleaned up, as a SIGKILLed controller leaves things.

Modes: "active" (the whole launch), "marker" (crash right after the spawn marker: nothing launched). With
"fake_boot", the claim is written as if on an earlier boot of this host (and the recorded cohort says that
boot too).
"""

from __future__ import annotations

import json
import os
import sys

from mosaic.cgroup_cohort import Credentials, DirectCgroupLauncher, ScopeLauncher, UserManager
from mosaic.safe_open import HostIdentity, current_host
from mosaic.writer_claim import Binding, ClaimStore, Pins, SeatKey, SessionKey


def main(args: dict) -> dict:
    host = current_host()
    if args.get("fake_boot"):
        host = HostIdentity(host.machine_id, args["fake_boot"])
    store = ClaimStore(args["claim_root"], host=host)
    seat = SeatKey(*args["seat"])
    session = SessionKey(*args["session"])
    binding = Binding("binding-contract", "pi", args["conversation"], "main", None,
                      Pins("0.85.1", "sha256:" + "0" * 64, "sha256:" + "1" * 64))
    claim = store.acquire(seat, session, binding)
    claim.mark_spawn()
    out = {"claimId": claim.claim_id, "unit": claim.unit_name}
    if args["mode"] == "marker":
        return out
    engine = Credentials(args["engine"][0], args["engine"][1], ())
    if args["route"] == "direct":
        launcher = DirectCgroupLauncher(args["direct_parent"], args["socket_dir"], engine=engine)
    else:
        launcher = ScopeLauncher(UserManager(args["manager_prefix"]), args["socket_dir"], engine=engine)
    handle = launcher.launch(claim.unit_name, ["/usr/bin/python3", os.path.join(args["stage"], "misbehaving_tree.py"),
                                               json.dumps(args["spec"])],
                             env={"PATH": "/usr/bin:/bin", "MOSAIC_COHORT_RUN": args["marker"]}, cwd=args["stage"])
    stdin_fd, stdout_fd = handle.take_stdio()  # the engine link would own these
    ready = b""
    while not ready.endswith(b"\n"):  # every member started: the crash finds a live tree
        chunk = os.read(stdout_fd, 4096)
        if not chunk:
            break
        ready += chunk
    ref = handle.ref
    stored = ref.to_dict()
    if args.get("fake_boot"):
        stored["host"] = host.to_dict()  # recorded on the earlier boot, like everything in this claim
    claim.activate(invocation_id=ref.epoch_id, engine=ref.engine,
                   cohort=stored)
    out.update(ref=ref.to_dict(), ready=json.loads(ready))
    return out


if __name__ == "__main__":
    result = main(json.loads(sys.argv[1]))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the crash: no finalizer, no close, no release
