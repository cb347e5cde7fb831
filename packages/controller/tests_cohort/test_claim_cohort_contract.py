"""The claim <-> cohort contract over the real adapters, nothing faked between them (docs/design.md
"writer-claim <-> cgroup-cohort").

writer-claim on a real file system, cgroup-cohort on the real cgroup2 tree (both launch routes: a
delegated direct cgroup and a systemd --user scope in the CI sandbox), the controller's adapter between
them. Phase one runs in a child process that reserves a claim, publishes the spawn marker, launches under
the unit name the claim recorded, records the invocation ID, engine and cohort reference, publishes
active, and exits without closing or releasing anything (a crashed controller). Phase two is this process,
which holds nothing but the claim root: it classifies the pair, adopts the claim, rebuilds the cohort
reference from the claim alone, force stops step by step publishing each phase, gets a cohort proof and
releases the claim with it; the stored proof digest must equal the proof's, byte for byte. The boot-proof
path does the same with a claim recorded on a faked earlier boot, with and without a recorded cohort.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mosaic.cgroup_cohort import CohortRef, FixtureVerifier, StopRequest, force_stop, release_cohort
from mosaic.cgroup_cohort.testing import alive, kill_member
from mosaic.controller.lifecycle import ClaimCohortProbe, cohort_proof_ref, run_force_stop
from mosaic.safe_open import DIGEST_RE, ProcessRef, current_host
from mosaic.writer_claim import ClaimStore, Outcome, ProofKind, SeatKey, SessionKey, State

CHILD = Path(__file__).with_name("contract_child.py")
SPEC = {"sleepers": 1, "term_ignorers": 1, "setsid_daemon": True}
GRACE = 0.3


@pytest.fixture
def claim_root() -> Iterator[str]:
    d = tempfile.mkdtemp(prefix="mosaic-contract-claims-")
    yield d
    subprocess.run(["rm", "-rf", "--one-file-system", d], check=False)


def _phase_one(lab: Any, claim_root: str, mode: str, run_marker: str, **extra: Any) -> tuple[dict[str, Any], SeatKey,
                                                                                          SessionKey]:
    seat = ("seat-contract", "proj-contract", "ws-contract")
    session = ("pi", "0199a1b2-" + secrets.token_hex(4) + "-7000-8000-" + secrets.token_hex(6))
    args = {
        "mode": mode, "route": lab.path, "claim_root": claim_root, "socket_dir": lab.socket_dir,
        "stage": lab.stage, "engine": [lab.engine.uid, lab.engine.gid], "direct_parent": lab.direct_parent,
        "manager_prefix": lab.manager.prefix() if lab.manager is not None else None, "marker": run_marker,
        "spec": SPEC, "seat": seat, "session": session, "conversation": "pi-contract", **extra,
    }
    env = {**os.environ, "MOSAIC_COHORT_RUN": run_marker}
    done = subprocess.run([sys.executable, str(CHILD), json.dumps(args)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    if "ref" in out:  # the real cohort: tracked so the fixture kills it if the test fails
        ref = CohortRef.from_dict(out["ref"])
        lab.tracked.append(ref.engine)
        lab.tracked.extend(ProcessRef(m["pid"], m["startTime"]) for m in out["ready"]["members"])
    return out, SeatKey(*seat), SessionKey(*session)


def _cleanup(ref: CohortRef, lab: Any) -> None:
    """A cohort phase two did not stop (the boot path, or a failed test): stopped and let go by its exact
    recorded reference."""
    if any(alive(m) for m in [ref.engine, *lab.tracked]):
        force_stop(ref, lab.request(ref), manager=lab.user_manager(), grace=GRACE)
    assert release_cohort(ref, force=True)


def test_contract_crashed_controller_then_a_fresh_process_stops_from_the_claim_alone(lab, claim_root, run_marker):
    out, seat, session = _phase_one(lab, claim_root, "active", run_marker)
    launched_ref = CohortRef.from_dict(out["ref"])
    assert launched_ref.unit == out["unit"] == f"cohort-{out['claimId']}.scope"  # the recorded name, launched
    try:
        store = ClaimStore(claim_root)
        probe = ClaimCohortProbe(lab.launcher(lab.engine), verifier=FixtureVerifier())
        # The owner (the child) is proven gone; the engine and its unit are alive: an orphan (W6, W13).
        report = store.restart(seat, session, probe)
        assert report.outcomes == (Outcome.UNCERTAIN_UNIT,), report
        claim = store.adopt(seat, session, out["claimId"])
        assert claim.cohort is not None
        ref = CohortRef.from_dict(claim.cohort)  # from the claim on disk, nothing else
        assert ref == launched_ref
        assert claim.head("seat").invocation_id == ref.epoch_id and claim.head("session").engine == ref.engine
        verifier = FixtureVerifier()
        request = StopRequest("stop-contract", "pi-contract", "binding-contract", {"confirmation": "conf-contract"})
        phases: list[str] = []
        run = run_force_stop(claim, ref, request, confirmation="conf-contract", manager=lab.user_manager(),
                             verifier=verifier, grace=GRACE, on_phase=phases.append)
        assert run.outcome.state == "stopped", run.outcome
        assert run.published == ("term", "kill")  # the brief's two signalling phases, each before its action
        # Each phase was in the claim before its action: the last stopping revision names the last phase.
        assert claim.state is State.STOPPING and claim.head("seat").stop is not None
        assert claim.head("seat").stop.phase == run.published[-1] and claim.head("seat").stop.confirmation == "conf-contract"
        assert run.proof is not None
        digest = verifier.verify(run.proof, stop="stop-contract")
        claim.release(cohort_proof_ref(run.proof), stop_id="stop-contract")
        for key in ("seat", "session"):
            head = claim.head(key)  # type: ignore[arg-type]
            assert head.state is State.STOPPED and head.proof is not None
            assert head.proof.kind is ProofKind.COHORT
            assert head.proof.digest == run.proof["verification"]["digest"] == digest  # byte for byte
            assert DIGEST_RE.match(head.proof.digest)
        # Read back by a third reader: the pair is free, and every member the proof lists is dead.
        fresh = ClaimStore(claim_root)
        assert fresh.restart(seat, session, probe).free
        assert not any(alive(ProcessRef(m["pid"], m["startTime"])) for m in run.proof["members"])
        assert release_cohort(ref)
        assert probe.observe_unit(ref.unit).presence == "absent"
    finally:
        if launched_ref.engine is not None:
            _cleanup(launched_ref, lab)
        for m in lab.tracked:
            if alive(m):
                kill_member(m)


@pytest.mark.parametrize("recorded", ["cohort", "unit-and-host"])
def test_contract_boot_proof_from_the_claim_alone(lab, claim_root, run_marker, recorded):
    """W7 through the real adapters: the claim says an earlier boot of this host (a faked boot ID); the
    probe issues the boot proof from the stored cohort reference, or from the unit name and host alone when
    the crash came right after the spawn marker (W20), and restart publishes stopped with its digest."""
    fake_boot = secrets.token_hex(16)
    assert fake_boot != current_host().boot_id
    out, seat, session = _phase_one(lab, claim_root, "active" if recorded == "cohort" else "marker", run_marker,
                                    fake_boot=fake_boot)
    real = CohortRef.from_dict(out["ref"]) if "ref" in out else None
    try:
        verifier = FixtureVerifier()
        probe = ClaimCohortProbe(lab.launcher(lab.engine), verifier=verifier)
        store = ClaimStore(claim_root)
        report = store.restart(seat, session, probe)
        assert report.outcomes == (Outcome.STOPPED_BOOT_PROOF,), report
        assert report.free
        heads = store.observe(seat, session)
        digests = set()
        for obs in (heads.seat, heads.session):
            head = obs.head
            assert head is not None and head.state is State.STOPPED and head.proof is not None
            assert head.proof.kind is ProofKind.BOOT
            digests.add(head.proof.digest)
        (digest,) = digests
        proof = probe.proofs[digest]
        assert proof["verification"]["digest"] == digest  # byte for byte
        assert verifier.verify(proof) == digest
        assert proof["kind"] == "boot" and proof["cohort"]["unit"] == out["unit"]
        assert proof["evidence"]["recordedBoot"] == fake_boot
        assert proof["evidence"].get("membersListed", True) is (recorded == "cohort")
    finally:
        if real is not None:
            _cleanup(real, lab)


def test_contract_W20_marker_without_unit_on_this_boot_stays_uncertain(lab, claim_root, run_marker):
    """The same crash on this boot: a spawn marker and no unit is an absent observation, never an empty
    one; only a boot proof could free the pair (W20), so the real probe's `absent` leaves it uncertain."""
    out, seat, session = _phase_one(lab, claim_root, "marker", run_marker)
    probe = ClaimCohortProbe(lab.launcher(lab.engine), verifier=FixtureVerifier())
    assert probe.observe_unit(out["unit"]).presence == "absent"
    report = ClaimStore(claim_root).restart(seat, session, probe)
    assert report.outcomes == (Outcome.UNCERTAIN_SPAWN_MARKER,), report
    assert not report.free and not probe.proofs
