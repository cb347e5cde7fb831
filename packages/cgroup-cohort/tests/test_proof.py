"""cohortProof, boot proof and the fixture verifier (seeds/003 §6 "Proof", "Boot proof"; K1, K16)."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest

from mosaic.cgroup_cohort import (
    CohortRefusal,
    FixtureVerifier,
    StopRequest,
    UnlaunchedCohort,
    build_boot_proof,
)
from mosaic.cgroup_cohort.internals import classify_host, proof_digest
from mosaic.cgroup_cohort.proof import build_cohort_proof, proof_json_schema
from mosaic.cgroup_cohort.stop import (
    Death,
    Enumerated,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    IdentityObserved,
    IdentityUnavailable,
    Killed,
    Reaped,
    StopMachine,
    TermSent,
)
from mosaic.safe_open import DIGEST_RE, HostIdentity, ProcessRef, canonical_json, sha256_digest

M1, M2 = ProcessRef(10, 100), ProcessRef(11, 101)


def _stopped(ref, identity, request):
    m = StopMachine(ref, request)
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
def test_K1_proof_carries_every_chat01_field(kind, ref_factory, identity_factory, request_):
    ref = ref_factory(kind)
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
    _validate(proof)
    # seeds/003 §6 "Proof": every field the brief names.
    for key in ("stop", "authority", "conversation", "execution", "cohort", "membershipEpoch",
                "membershipComplete", "members", "observedAt", "verification"):
        assert key in proof
    assert proof["stop"] == "stop-1" and proof["conversation"] == "pi-conv-1" and proof["execution"] == "exec-1"
    assert proof["membershipComplete"] is True
    assert proof["authority"]["live"] is False and proof["authority"]["confirmation"] == "conf-1"
    assert [(m["pid"], m["startTime"]) for m in proof["members"]] == [(10, 100), (11, 101)]
    assert all(m["boot"] == ref.host.boot_id and m["deathTime"] for m in proof["members"])
    assert proof["members"][0]["death"] == "reaped:signal 9"
    assert proof["observedAt"] == "2027-01-15T08:00:00.250000Z"
    if kind == "scope":
        assert proof["membershipEpoch"]["kind"] == "invocation-id"
        assert proof["membershipEpoch"]["invocationId"] == ref.invocation_id
    else:
        assert proof["membershipEpoch"] == {"kind": "cgroup-id", "host": ref.host.machine_id, "boot": ref.host.boot_id,
                                            "cgroupPath": ref.cgroup_path, "cgroupId": ref.unit_cgroup_id}
    assert proof["verification"]["digest"] == proof_digest(proof)
    assert "claimId" not in proof["cohort"] and proof["cohort"]["unit"] == ref.unit  # the unit ties it to the ref


def test_K1_fixture_verifier_accepts_only_registered_untouched_proofs(ref_factory, identity_factory,
                                                                      request_):
    ref = ref_factory("scope")
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
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
def test_verifier_checks_the_record_not_only_the_digest(path, value, why, ref_factory, identity_factory,
                                                        request_):
    ref = ref_factory("direct")
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
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


def test_member_without_death_time_is_refused(ref_factory, identity_factory, request_):
    ref = ref_factory("direct")
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
    proof["members"][1]["deathTime"] = ""
    proof["verification"]["digest"] = proof_digest(proof)
    v = FixtureVerifier()
    v.register(proof)
    with pytest.raises(CohortRefusal):
        v.verify(proof)


def test_no_proof_for_an_uncertain_stop(ref_factory, request_):
    m = StopMachine(ref_factory("scope"), request_)
    m.feed(IdentityUnavailable("shim-gone", "x"))
    assert m.outcome is not None
    with pytest.raises(ValueError):
        build_cohort_proof(m.ref, request_, m.outcome)


def test_no_proof_carries_live_authority(ref_factory, identity_factory):
    ref = ref_factory("scope")
    live = StopRequest("s", "c", "e", {"live": True})
    outcome = _stopped(ref, identity_factory(ref), live)
    with pytest.raises(ValueError):
        build_cohort_proof(ref, live, outcome)


OTHER_BOOT = "9" * 32


def _current(ref, boot: str = OTHER_BOOT) -> HostIdentity:  # type: ignore[no-untyped-def]
    return HostIdentity(ref.host.machine_id, boot)


@pytest.mark.parametrize("kind", ["scope", "direct", "pgroup"])
def test_W7_boot_proof_from_the_full_reference(kind, ref_factory, request_):
    """An earlier boot of this host: every recorded process is listed with the current boot's start as
    the upper bound of its death (§6 "Boot proof"), and the proof goes through the same verifier."""
    ref = ref_factory(kind)
    proof = build_boot_proof(ref, request_, current=_current(ref), boot_time=1_800_000_100, observed_at=1_800_000_200)
    _validate(proof)
    assert proof["kind"] == "boot" and proof["cohort"]["launcher"] == kind
    assert proof["evidence"]["recordedBoot"] == ref.host.boot_id and proof["evidence"]["currentBoot"] == OTHER_BOOT
    assert proof["evidence"]["reference"] == "cohort" and proof["evidence"]["membersListed"] is True
    listed = {(4242, 1000), (4240, 990)} if kind != "pgroup" else {(4242, 1000)}
    assert {(m["pid"], m["startTime"]) for m in proof["members"]} == listed
    assert all(m["death"] == "boot-change" and m["deathTime"] == "2027-01-15T08:01:40.000000Z"
               for m in proof["members"])
    v = FixtureVerifier()
    assert v.register(proof) == proof["verification"]["digest"]
    assert v.verify(proof) == proof["verification"]["digest"]


def test_W20_boot_proof_from_only_the_unit_name_and_host(ref_factory, request_):
    """A crash after the spawn marker, before the launcher's reference was recorded (W20): the claim holds
    only the unit name and its host, and only a boot proof moves it on. It lists no member and says so."""
    ref = ref_factory("scope")
    recorded = UnlaunchedCohort(ref.unit, ref.host)
    proof = build_boot_proof(recorded, request_, current=_current(ref), boot_time=1.0, observed_at=2.0)
    _validate(proof)
    assert proof["members"] == [] and proof["membershipComplete"] is True
    assert proof["evidence"]["reference"] == "unit" and proof["evidence"]["membersListed"] is False
    assert "no member was recorded" in proof["evidence"]["note"]
    assert proof["cohort"] == {"launcher": None, "host": ref.host.machine_id, "boot": ref.host.boot_id,
                               "unit": ref.unit, "invocationId": None, "cgroupPath": None, "unitCgroupId": None,
                               "engineCgroupId": None}
    assert proof["membershipEpoch"] == {"kind": "boot", "host": ref.host.machine_id, "boot": ref.host.boot_id}
    v = FixtureVerifier()
    v.register(proof)
    assert v.verify(proof, stop="stop-1") == proof["verification"]["digest"]


@pytest.mark.parametrize("form", ["reference", "unit-only"])
def test_K16_boot_proof_for_another_machine_is_foreign_host_and_no_proof(form, ref_factory, request_):
    ref = ref_factory("direct")
    recorded = ref if form == "reference" else UnlaunchedCohort(ref.unit, ref.host)
    with pytest.raises(CohortRefusal) as e:
        build_boot_proof(recorded, request_, current=HostIdentity("e" * 32, OTHER_BOOT), boot_time=1.0,
                         observed_at=2.0)
    assert e.value.code == "foreign-host" and e.value.reconcile is False
    with pytest.raises(CohortRefusal):
        classify_host(ref.host, HostIdentity("e" * 32, ref.host.boot_id))


@pytest.mark.parametrize("form", ["reference", "unit-only"])
def test_boot_proof_refused_for_the_current_boot(form, ref_factory, request_):
    ref = ref_factory("scope")
    recorded = ref if form == "reference" else UnlaunchedCohort(ref.unit, ref.host)
    with pytest.raises(CohortRefusal) as e:
        build_boot_proof(recorded, request_, current=ref.host, boot_time=1.0, observed_at=2.0)
    assert e.value.code == "boot-unchanged"
    assert classify_host(ref.host, ref.host) == "same-boot"
    assert classify_host(ref.host, _current(ref, "1" * 32)) == "other-boot"


def test_boot_proof_that_does_not_change_boot_is_refused_by_the_verifier(ref_factory, request_):
    ref = ref_factory("scope")
    proof = build_boot_proof(ref, request_, current=_current(ref), boot_time=1.0, observed_at=2.0)
    proof["evidence"]["currentBoot"] = ref.host.boot_id
    proof["verification"]["digest"] = proof_digest(proof)
    v = FixtureVerifier()
    v.register(proof)
    with pytest.raises(CohortRefusal):
        v.verify(proof)


def test_unlaunched_cohort_is_a_unit_name_and_a_host(ref_factory):
    ref = ref_factory("scope")
    with pytest.raises(ValueError):
        UnlaunchedCohort("mosaic/x.scope", ref.host)
    with pytest.raises(ValueError):
        UnlaunchedCohort(ref.unit, ref.host.to_dict())  # type: ignore[arg-type]


def test_digest_is_canonical_json_without_the_verification_field(ref_factory, identity_factory, request_):
    """One digest form (safe_open): sha256:<64 hex> over canonical JSON; verification.digest is that string,
    the form the writer claim's ProofRef stores byte for byte."""
    ref = ref_factory("scope")
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
    body = {k: v for k, v in proof.items() if k != "verification"}
    assert proof_digest(proof) == sha256_digest(canonical_json(body)) == proof["verification"]["digest"]
    assert DIGEST_RE.fullmatch(proof["verification"]["digest"])
    reordered = json.loads(json.dumps(proof, sort_keys=False))
    reordered = dict(reversed(list(reordered.items())))
    assert proof_digest(reordered) == proof_digest(proof)
    reordered["verification"] = {"digest": "x"}
    assert proof_digest(reordered) == proof_digest(proof)


def test_verifier_compares_the_prefixed_digest_only(ref_factory, identity_factory, request_):
    """The bare hex of the old form is not the digest: verification.digest must be sha256:<hex> exactly."""
    ref = ref_factory("direct")
    proof = build_cohort_proof(ref, request_, _stopped(ref, identity_factory(ref), request_))
    v = FixtureVerifier()
    v.register(proof)
    bare = copy.deepcopy(proof)
    bare["verification"]["digest"] = proof["verification"]["digest"].removeprefix("sha256:")
    with pytest.raises(CohortRefusal) as e:
        v.verify(bare)
    assert "does not match" in e.value.message
    with pytest.raises(jsonschema.ValidationError):
        _validate(bare)
