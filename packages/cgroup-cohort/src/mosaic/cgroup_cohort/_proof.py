"""cohortProof records, boot proofs, their digest, and the fixture verifier (a trusted digest registry).

seeds/003 §6 "Proof": stopped needs a cohortProof with every CHAT-01 field: stop, authority,
conversation, execution, cohort reference and membership epoch, membershipComplete, members with boot,
pid and start time and a death time each, observation time, and verification digest.

CHAT-01 lines 330-333 (as quoted in §6): a self-posted hash is not trust. The digest below only makes a
record tamper-evident; what makes it accepted is that the trusted party that ran the stop registered that
digest with the verifier. The verifier is the fixture's registry, so no proof here is live authority:
``authority.live`` is always False and the verifier refuses any record that says otherwise.

Pure: no I/O. Times are Unix seconds in, RFC 3339 UTC strings out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from ._errors import CohortRefusal
from ._model import CohortClaim, Death, MemberRef, StopRequest
from ._stop import StopOutcome

__all__ = [
    "PROOF_SCHEMA",
    "proof_json_schema",
    "FixtureVerifier",
    "HostRelation",
    "build_boot_proof",
    "build_cohort_proof",
    "classify_host",
    "proof_digest",
    "rfc3339",
]

PROOF_SCHEMA = "mosaic.cgroup-cohort/cohortProof@1"
VERIFIER_KIND = "fixture-digest-registry"

HostRelation = Literal["same-boot", "other-boot"]


def proof_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the records this module builds (cohort_proof.schema.json)."""
    from importlib import resources

    text = resources.files(__package__).joinpath("cohort_proof.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def rfc3339(t: float) -> str:
    """Unix seconds as an RFC 3339 UTC timestamp with microseconds (``2026-09-26T20:10:57.123456Z``)."""
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _canonical(record: Mapping[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def proof_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``record`` without its ``verification`` field."""
    body = {k: v for k, v in record.items() if k != "verification"}
    return hashlib.sha256(_canonical(body)).hexdigest()


def _seal(record: dict[str, Any]) -> dict[str, Any]:
    record["verification"] = {"algorithm": "sha256", "digest": proof_digest(record), "verifier": VERIFIER_KIND}
    return record


def _authority(request: StopRequest) -> dict[str, Any]:
    auth = dict(request.authority)
    if auth.get("live"):
        raise ValueError("a CHAT-03 proof never carries live authority")
    auth["live"] = False
    auth["verifier"] = VERIFIER_KIND
    return auth


def _cohort_reference(claim: CohortClaim) -> tuple[dict[str, Any], dict[str, Any]]:
    epoch: dict[str, Any]
    cohort: dict[str, Any] = {
        "launcher": claim.kind,
        "claimId": claim.claim_id,
        "host": claim.machine_id,
        "boot": claim.boot_id,
        "unit": claim.unit,
        "invocationId": claim.invocation_id,
        "cgroupPath": claim.cgroup_path,
        "unitCgroupId": claim.unit_cgroup_id,
        "engineCgroupId": claim.engine_cgroup_id,
    }
    if claim.kind == "scope":
        epoch = {"kind": "invocation-id", "host": claim.machine_id, "boot": claim.boot_id,
                 "unit": claim.unit, "invocationId": claim.invocation_id}
    else:
        epoch = {"kind": "cgroup-id", "host": claim.machine_id, "boot": claim.boot_id,
                 "cgroupPath": claim.cgroup_path, "cgroupId": claim.unit_cgroup_id}
    return cohort, epoch


def _member(boot: str, death: Death) -> dict[str, Any]:
    return {
        "boot": boot,
        "pid": death.member.pid,
        "startTime": death.member.start_time,
        "deathTime": rfc3339(death.time),
        "death": death.how if death.signal is None else f"{death.how}:signal {death.signal}",
    }


def build_cohort_proof(claim: CohortClaim, request: StopRequest, outcome: StopOutcome) -> dict[str, Any]:
    """The cohortProof for a force stop that ended ``stopped``.

    Refuses (ValueError, a programming error) to build one for an outcome that is not ``stopped`` with
    ``membership_complete``: an uncertain stop has evidence, never a proof. Every enumerated member appears
    with its death; members are as of the freeze (a process that exited earlier belongs to the effect
    report, not the death proof).
    """
    if outcome.state != "stopped" or not outcome.membership_complete:
        raise ValueError("only a stopped outcome with complete membership has a cohortProof")
    if claim.kind == "pgroup":
        raise ValueError("the process-group fallback never has a cohortProof (K2)")
    ev = outcome.evidence
    if ev.populated0_at is None:
        raise ValueError("a stopped outcome without a populated 0 observation")
    deaths = {d.member: d for d in ev.deaths}
    identity = ev.identity
    containment = identity.containment if identity and identity.containment else claim.containment
    return _sealed_proof(
        "cohort",
        claim,
        request,
        containment=containment.to_dict(),
        members=[_member(claim.boot_id, deaths[m]) for m in sorted(ev.members)],
        observed_at=ev.populated0_at,
        evidence={
            "kind": "freeze-enumerate-kill",
            "termed": len(ev.termed),
            "frozen": ev.frozen,
            "enumerationStable": ev.enumeration_stable,
            "frozenRechecked": ev.frozen_rechecked,
            "populated0": ev.populated0,
        },
    )


def _sealed_proof(
    kind: str,
    claim: CohortClaim,
    request: StopRequest,
    *,
    containment: dict[str, Any],
    members: list[dict[str, Any]],
    observed_at: float,
    evidence: dict[str, Any],
) -> dict[str, Any]:
    """The cohortProof record both kinds share (every CHAT-01 field of §6 "Proof"), sealed.

    membershipComplete is always true here: a cohort proof is built only from a complete stop, and a boot
    proof is complete in the only sense a boot change gives (no process of the recorded boot survives it).
    """
    cohort, epoch = _cohort_reference(claim)
    record: dict[str, Any] = {
        "schema": PROOF_SCHEMA,
        "kind": kind,
        "stop": request.stop_id,
        "authority": _authority(request),
        "conversation": request.conversation,
        "execution": request.execution,
        "cohort": cohort,
        "membershipEpoch": epoch,
        "membershipComplete": True,
        "containment": containment,
        "members": members,
        "observedAt": rfc3339(observed_at),
        "evidence": evidence,
    }
    return _seal(record)


def classify_host(claim: CohortClaim, *, machine_id: str, boot_id: str) -> HostRelation:
    """Where a claim was recorded relative to this host: the same boot, or an earlier boot of this host.

    A different machine id refuses ``foreign-host`` (K16): a copied claim root never becomes stopped.
    """
    if claim.machine_id != machine_id:
        raise CohortRefusal("foreign-host", f"claim recorded on host {claim.machine_id}, this is {machine_id}")
    return "same-boot" if claim.boot_id == boot_id else "other-boot"


def build_boot_proof(
    claim: CohortClaim,
    request: StopRequest,
    *,
    machine_id: str,
    boot_id: str,
    boot_time: float,
    observed_at: float,
) -> dict[str, Any]:
    """A cohortProof whose evidence is the boot change (seeds/003 §6 "Boot proof").

    Every process of the recorded boot is gone, so every recorded member is listed with ``deathTime`` the
    start of the current boot (an upper bound on its death). Refuses ``foreign-host`` for another
    machine id (K16: no proof) and ``boot-unchanged`` for the current boot (a force stop is needed).
    """
    relation = classify_host(claim, machine_id=machine_id, boot_id=boot_id)
    if relation == "same-boot":
        raise CohortRefusal("boot-unchanged", f"claim {claim.claim_id} is from the current boot {boot_id}")
    recorded = [claim.engine] + ([claim.shim] if claim.shim is not None else [])
    return _sealed_proof(
        "boot",
        claim,
        request,
        containment=claim.containment.to_dict(),
        members=[_member(claim.boot_id, Death(m, boot_time, "boot-change")) for m in sorted(set(recorded))],
        observed_at=observed_at,
        evidence={"kind": "boot-change", "recordedBoot": claim.boot_id, "currentBoot": boot_id,
                  "currentBootStartedAt": rfc3339(boot_time)},
    )


class FixtureVerifier:
    """The fixture's trusted digest registry (CHAT-01 lines 330-333; seeds/003 §6).

    The party that ran a stop registers the proof's digest here (``register``); ``verify`` accepts a proof
    only if its digest recomputes, was registered, and the record is a stop: membershipComplete true, a
    death for every member, no live authority, and for a boot proof a changed boot on the same host.
    It is a fixture: accepting a proof here is not live authority.
    """

    def __init__(self) -> None:
        self._trusted: set[str] = set()

    def register(self, proof: Mapping[str, Any]) -> str:
        """Trust this proof's digest (recomputed here, never read from the record). Returns it."""
        digest = proof_digest(proof)
        self._trusted.add(digest)
        return digest

    def verify(self, proof: Mapping[str, Any], *, stop: str | None = None) -> str:
        """Return the digest of an accepted proof; refuse ``verification`` with the reason otherwise."""
        digest = proof_digest(proof)
        stated = proof.get("verification", {}).get("digest") if isinstance(proof.get("verification"), Mapping) else None
        if stated != digest:
            raise CohortRefusal("verification", "the digest does not match the record (altered or self-made)")
        if digest not in self._trusted:
            raise CohortRefusal("verification", "the digest is not in the trusted registry")
        if proof.get("schema") != PROOF_SCHEMA:
            raise CohortRefusal("verification", f"unknown proof schema {proof.get('schema')!r}")
        if stop is not None and proof.get("stop") != stop:
            raise CohortRefusal("verification", f"proof is for stop {proof.get('stop')!r}, not {stop!r}")
        if proof.get("membershipComplete") is not True:
            raise CohortRefusal("verification", "membership is not complete")
        authority = proof.get("authority")
        if not isinstance(authority, Mapping) or authority.get("live") is not False:
            raise CohortRefusal("verification", "a fixture proof cannot claim live authority")
        members = proof.get("members")
        if not isinstance(members, list) or any(
            not isinstance(m, Mapping) or not m.get("deathTime") or m.get("boot") is None for m in members
        ):
            raise CohortRefusal("verification", "a member without boot or death time")
        kind = proof.get("kind")
        if kind == "boot":
            ev = proof.get("evidence", {})
            cohort = proof.get("cohort", {})
            if not isinstance(ev, Mapping) or ev.get("recordedBoot") == ev.get("currentBoot"):
                raise CohortRefusal("verification", "a boot proof without a boot change")
            if not isinstance(cohort, Mapping) or cohort.get("boot") != ev.get("recordedBoot"):
                raise CohortRefusal("verification", "boot proof for another boot than the cohort's")
        elif kind == "cohort":
            cohort = proof.get("cohort", {})
            if isinstance(cohort, Mapping) and cohort.get("launcher") == "pgroup":
                raise CohortRefusal("verification", "the process-group fallback cannot prove a stop")
            containment = proof.get("containment", {})
            if not isinstance(containment, Mapping) or containment.get("held") is not True:
                raise CohortRefusal("verification", "containment did not hold for this cohort")
        else:
            raise CohortRefusal("verification", f"unknown proof kind {kind!r}")
        return digest


def members_of(proof: Mapping[str, Any]) -> list[MemberRef]:
    """The (pid, start time) of every member a proof lists."""
    return [MemberRef(int(m["pid"]), int(m["startTime"])) for m in proof.get("members", [])]
