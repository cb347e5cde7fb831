"""cohortProof, boot proof and the fixture verifier (seeds/003 §6 "Proof", "Boot proof"; K1, K16)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from mosaic.cgroup_cohort import (
    CohortRefusal,
    Death,
    FixtureVerifier,
    MemberRef,
    StopMachine,
    StopRequest,
    build_boot_proof,
    build_cohort_proof,
    classify_host,
    proof_digest,
    proof_json_schema,
)
from mosaic.cgroup_cohort._stop import (
    Enumerated,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    IdentityObserved,
    IdentityUnavailable,
    Killed,
    Reaped,
    TermSent,
)

M1, M2 = MemberRef(10, 100), MemberRef(11, 101)


def _stopped(claim, identity, request):
    m = StopMachine(claim, request)
    for ev in (IdentityObserved(identity), TermSent((M1, M2)), GraceEnded(True), Frozen(True),
               Enumerated((M1, M2), True), FrozenRechecked(True), Killed(True, 1_800_000_000.25),
               Reaped((Death(M1, 1_800_000_000.5, "reaped", 9), Death(M2, 1_800_000_000.75, "populated-0")))):
        m.feed(ev)
    assert m.outcome is not None and m.outcome.state == "stopped"
    return m.outcome


def _validate(proof: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator(proof_json_schema(),
                                    format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).validate(proof)


@pytest.mark.parametrize("kind", ["scope", "direct"])
def test_K1_proof_carries_every_chat01_field(kind, claim_factory, identity_factory, request_):
    claim = claim_factory(kind)
    proof = build_cohort_proof(claim, request_, _stopped(claim, identity_factory(claim), request_))
    _validate(proof)
    # seeds/003 §6 "Proof": every field the brief names.
    for key in ("stop", "authority", "conversation", "execution", "cohort", "membershipEpoch",
                "membershipComplete", "members", "observedAt", "verification"):
        assert key in proof
    assert proof["stop"] == "stop-1" and proof["conversation"] == "pi-conv-1" and proof["execution"] == "exec-1"
    assert proof["membershipComplete"] is True
    assert proof["authority"]["live"] is False and proof["authority"]["confirmation"] == "conf-1"
    assert [(m["pid"], m["startTime"]) for m in proof["members"]] == [(10, 100), (11, 101)]
    assert all(m["boot"] == claim.boot_id and m["deathTime"] for m in proof["members"])
    assert proof["members"][0]["death"] == "reaped:signal 9"
    assert proof["observedAt"] == "2027-01-15T08:00:00.250000Z"
    if kind == "scope":
        assert proof["membershipEpoch"]["kind"] == "invocation-id"
        assert proof["membershipEpoch"]["invocationId"] == claim.invocation_id
    else:
        assert proof["membershipEpoch"] == {"kind": "cgroup-id", "host": claim.machine_id, "boot": claim.boot_id,
                                            "cgroupPath": claim.cgroup_path, "cgroupId": claim.unit_cgroup_id}
    assert proof["verification"]["digest"] == proof_digest(proof)


def test_K1_fixture_verifier_accepts_only_registered_untouched_proofs(claim_factory, identity_factory,
                                                                      request_):
    claim = claim_factory("scope")
    proof = build_cohort_proof(claim, request_, _stopped(claim, identity_factory(claim), request_))
    verifier = FixtureVerifier()
    with pytest.raises(CohortRefusal) as e:
        verifier.verify(proof)  # a self-posted hash is not trust (CHAT-01 lines 330-333)
    assert e.value.code == "verification" and "registry" in e.value.message
    verifier.register(proof)
    assert verifier.verify(proof, stop="stop-1") == proof["verification"]["digest"]
    with pytest.raises(CohortRefusal):
        verifier.verify(proof, stop="stop-2")
    tampered = copy.deepcopy(proof)
    tampered["members"] = tampered["members"][:1]  # a member dropped after the fact
    with pytest.raises(CohortRefusal):
        verifier.verify(tampered)
    resealed = copy.deepcopy(tampered)
    resealed["verification"]["digest"] = proof_digest(resealed)  # self-consistent, but never registered
    with pytest.raises(CohortRefusal):
        verifier.verify(resealed)


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("membershipComplete",), False, "membership is not complete"),
        (("authority", "live"), True, "live authority"),
        (("containment", "held"), False, "containment"),
        (("cohort", "launcher"), "pgroup", "process-group"),
        (("kind",), "other", "unknown proof kind"),
        (("schema",), "x", "schema"),
    ],
)
def test_verifier_checks_the_record_not_only_the_digest(path, value, why, claim_factory, identity_factory,
                                                        request_):
    claim = claim_factory("direct")
    proof = build_cohort_proof(claim, request_, _stopped(claim, identity_factory(claim), request_))
    bad = copy.deepcopy(proof)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    bad["verification"]["digest"] = proof_digest(bad)
    verifier = FixtureVerifier()
    verifier.register(bad)  # even a registered record is refused when it is not a stop
    with pytest.raises(CohortRefusal) as e:
        verifier.verify(bad)
    assert why in e.value.message


def test_member_without_death_time_is_refused(claim_factory, identity_factory, request_):
    claim = claim_factory("direct")
    proof = build_cohort_proof(claim, request_, _stopped(claim, identity_factory(claim), request_))
    proof["members"][1]["deathTime"] = ""
    proof["verification"]["digest"] = proof_digest(proof)
    v = FixtureVerifier()
    v.register(proof)
    with pytest.raises(CohortRefusal):
        v.verify(proof)


def test_no_proof_for_an_uncertain_stop(claim_factory, request_):
    m = StopMachine(claim_factory("scope"), request_)
    m.feed(IdentityUnavailable("shim-gone", "x"))
    assert m.outcome is not None
    with pytest.raises(ValueError):
        build_cohort_proof(m.claim, request_, m.outcome)


def test_no_proof_carries_live_authority(claim_factory, identity_factory):
    claim = claim_factory("scope")
    live = StopRequest("s", "c", "e", {"live": True})
    outcome = _stopped(claim, identity_factory(claim), live)
    with pytest.raises(ValueError):
        build_cohort_proof(claim, live, outcome)


def test_boot_proof_for_an_earlier_boot_on_the_same_host(claim_factory, request_):
    claim = claim_factory("scope")
    proof = build_boot_proof(claim, request_, machine_id=claim.machine_id, boot_id="9" * 32,
                             boot_time=1_800_000_100, observed_at=1_800_000_200)
    _validate(proof)
    assert proof["kind"] == "boot" and proof["evidence"]["recordedBoot"] == claim.boot_id
    assert proof["evidence"]["currentBoot"] == "9" * 32
    assert {(m["pid"], m["startTime"]) for m in proof["members"]} == {(4242, 1000), (4240, 990)}
    assert all(m["death"] == "boot-change" for m in proof["members"])
    v = FixtureVerifier()
    v.register(proof)
    assert v.verify(proof)


def test_K16_boot_proof_for_another_machine_is_foreign_host_and_no_proof(claim_factory, request_):
    claim = claim_factory("direct")
    with pytest.raises(CohortRefusal) as e:
        build_boot_proof(claim, request_, machine_id="e" * 32, boot_id="9" * 32, boot_time=1.0, observed_at=2.0)
    assert e.value.code == "foreign-host" and e.value.reconcile is False
    with pytest.raises(CohortRefusal):
        classify_host(claim, machine_id="e" * 32, boot_id=claim.boot_id)


def test_boot_proof_refused_for_the_current_boot(claim_factory, request_):
    claim = claim_factory("scope")
    with pytest.raises(CohortRefusal) as e:
        build_boot_proof(claim, request_, machine_id=claim.machine_id, boot_id=claim.boot_id, boot_time=1.0,
                         observed_at=2.0)
    assert e.value.code == "boot-unchanged"
    assert classify_host(claim, machine_id=claim.machine_id, boot_id=claim.boot_id) == "same-boot"
    assert classify_host(claim, machine_id=claim.machine_id, boot_id="1" * 32) == "other-boot"


def test_boot_proof_that_does_not_change_boot_is_refused_by_the_verifier(claim_factory, request_):
    claim = claim_factory("scope")
    proof = build_boot_proof(claim, request_, machine_id=claim.machine_id, boot_id="9" * 32, boot_time=1.0,
                             observed_at=2.0)
    proof["evidence"]["currentBoot"] = claim.boot_id
    proof["verification"]["digest"] = proof_digest(proof)
    v = FixtureVerifier()
    v.register(proof)
    with pytest.raises(CohortRefusal):
        v.verify(proof)


def test_digest_is_canonical_json_without_the_verification_field(claim_factory, identity_factory, request_):
    claim = claim_factory("scope")
    proof = build_cohort_proof(claim, request_, _stopped(claim, identity_factory(claim), request_))
    reordered = json.loads(json.dumps(proof, sort_keys=False))
    reordered = dict(reversed(list(reordered.items())))
    assert proof_digest(reordered) == proof_digest(proof)
    reordered["verification"] = {"digest": "x"}
    assert proof_digest(reordered) == proof_digest(proof)
