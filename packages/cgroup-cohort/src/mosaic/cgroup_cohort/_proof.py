"""cohortProof records, boot proofs, their digest, and the fixture verifier (a trusted digest registry).

seeds/003 §6 "Proof": stopped needs a cohortProof with every CHAT-01 field: stop, authority,
conversation, execution, cohort reference and membership epoch, membershipComplete, members with boot,
pid and start time and a death time each, observation time, and verification digest.

CHAT-01 lines 330-333 (as quoted in §6): a self-posted hash is not trust. The digest below only makes a
record tamper-evident; what makes it accepted is that the trusted party that ran the stop registered that
digest with the verifier. The verifier is the fixture's registry, so no proof here is live authority:
``authority.live`` is always False and the verifier refuses any record that says otherwise.

The digest is Mosaic's one digest form (``mosaic.safe_open.sha256_digest`` over ``canonical_json``):
``"sha256:<64 hex>"``, and ``verification.digest`` holds exactly that string, so the writer claim stores
``ProofRef(kind, digest=proof["verification"]["digest"])`` byte for byte.

Pure: no I/O. Times are Unix seconds in, RFC 3339 UTC strings out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from mosaic.safe_open import HostIdentity, ProcessRef, canonical_json, sha256_digest

from ._errors import CohortRefusal
from ._events import StopOutcome
from ._model import CohortRef, Death, StopRequest, UnlaunchedCohort

__all__ = [
    "PROOF_SCHEMA",
    "VERIFIER_KIND",
    "FixtureVerifier",
    "HostRelation",
    "build_boot_proof",
    "build_cohort_proof",
    "classify_host",
    "proof_digest",
    "proof_json_schema",
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


def proof_digest(record: Mapping[str, Any]) -> str:
    """``"sha256:<64 hex>"`` of the canonical JSON of ``record`` without its ``verification`` field.

    Exactly ``sha256_digest(canonical_json(record without "verification"))``, the form
    ``verification.digest`` holds. Raises TypeError or ValueError for a record JSON cannot hold (NaN, ...).
    """
    body = {k: v for k, v in record.items() if k != "verification"}
    return sha256_digest(canonical_json(body))


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


def _cohort_reference(recorded: CohortRef | UnlaunchedCohort) -> tuple[dict[str, Any], dict[str, Any]]:
    """The proof's ``cohort`` and ``membershipEpoch`` (seeds/003 §6 "Identity and epoch"; facts §5)."""
    host, boot = recorded.host.machine_id, recorded.host.boot_id
    if isinstance(recorded, UnlaunchedCohort):
        # Only the unit name was recorded: the epoch is the boot itself, which is all a boot proof needs.
        cohort: dict[str, Any] = {"launcher": None, "host": host, "boot": boot, "unit": recorded.unit,
                                  "invocationId": None, "cgroupPath": None, "unitCgroupId": None,
                                  "engineCgroupId": None}
        return cohort, {"kind": "boot", "host": host, "boot": boot}
    ref = recorded
    cohort = {
        "launcher": ref.kind,
        "host": host,
        "boot": boot,
        "unit": ref.unit,
        "invocationId": ref.invocation_id,
        "cgroupPath": ref.cgroup_path,
        "unitCgroupId": ref.unit_cgroup_id,
        "engineCgroupId": ref.engine_cgroup_id,
    }
    epoch: dict[str, Any]
    if ref.kind == "scope":
        epoch = {"kind": "invocation-id", "host": host, "boot": boot, "unit": ref.unit,
                 "invocationId": ref.invocation_id}
    elif ref.kind == "direct":
        epoch = {"kind": "cgroup-id", "host": host, "boot": boot, "cgroupPath": ref.cgroup_path,
                 "cgroupId": ref.unit_cgroup_id}
    else:
        # Not an epoch any kernel enforces (K2); only a boot proof can ever name it.
        epoch = {"kind": "process-group", "host": host, "boot": boot, "engine": ref.engine.to_dict(),
                 "pgid": ref.pgid}
    return cohort, epoch


def _member(boot: str, death: Death) -> dict[str, Any]:
    return {
        "boot": boot,
        "pid": death.member.pid,
        "startTime": death.member.start_time,
        "deathTime": rfc3339(death.time),
        "death": death.how if death.signal is None else f"{death.how}:signal {death.signal}",
    }


def build_cohort_proof(ref: CohortRef, request: StopRequest, outcome: StopOutcome) -> dict[str, Any]:
    """The cohortProof for a force stop of ``ref`` that ended ``stopped``, sealed with its digest.

    Refuses (ValueError, a programming error) to build one for an outcome that is not ``stopped`` with
    ``membership_complete``, for a process-group reference, and for a request carrying live authority: an
    uncertain stop has evidence, never a proof. Every enumerated member appears with its death; members
    are as of the freeze (a process that exited earlier belongs to the effect report, not the death proof).
    """
    if outcome.state != "stopped" or not outcome.membership_complete:
        raise ValueError("only a stopped outcome with complete membership has a cohortProof")
    if ref.kind == "pgroup":
        raise ValueError("the process-group fallback never has a cohortProof (K2)")
    ev = outcome.evidence
    if ev.populated0_at is None:
        raise ValueError("a stopped outcome without a populated 0 observation")
    deaths = {d.member: d for d in ev.deaths}
    identity = ev.identity
    containment = identity.containment if identity and identity.containment else ref.containment
    return _sealed_proof(
        "cohort",
        ref,
        request,
        containment=containment.to_dict(),
        members=[_member(ref.host.boot_id, deaths[m]) for m in sorted(ev.members)],
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
    recorded: CohortRef | UnlaunchedCohort,
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
    cohort, epoch = _cohort_reference(recorded)
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


def classify_host(recorded: HostIdentity, current: HostIdentity) -> HostRelation:
    """Where a reference was recorded relative to this host: the same boot, or an earlier boot of it.

    A different machine id refuses ``foreign-host`` (K16; seeds/003 §2 "Restart": a copied claim root never
    becomes stopped).
    """
    if recorded.machine_id != current.machine_id:
        raise CohortRefusal("foreign-host", f"recorded on host {recorded.machine_id}, this is {current.machine_id}")
    return "same-boot" if recorded.boot_id == current.boot_id else "other-boot"


def build_boot_proof(
    recorded: CohortRef | UnlaunchedCohort,
    request: StopRequest,
    *,
    current: HostIdentity,
    boot_time: float,
    observed_at: float,
) -> dict[str, Any]:
    """A cohortProof (``kind: "boot"``) whose evidence is the boot change (seeds/003 §6 "Boot proof").

    Answerable from what a claim revision stores: the full ``CohortRef``, or, for a crash after the spawn
    marker and before the launcher's reference was recorded (seeds/003 §2 "Restart", W20), only the unit
    name and the recorded host (``UnlaunchedCohort``). Every process of the recorded boot is gone either
    way, so the full form lists the recorded engine (and shim) with ``deathTime`` the start of the current
    boot (``boot_time``, Unix seconds: an upper bound on the death), and the minimal form lists no member
    and says so in ``evidence`` (``reference: "unit"``, ``membersListed: false``).

    Refuses ``foreign-host`` for another machine id (K16: no proof) and ``boot-unchanged`` for the current
    boot (a force stop is needed instead). Raises ValueError for a request carrying live authority.
    """
    relation = classify_host(recorded.host, current)
    if relation == "same-boot":
        raise CohortRefusal("boot-unchanged", f"{recorded.unit} was recorded in the current boot {current.boot_id}")
    listed: list[ProcessRef] = []
    if isinstance(recorded, CohortRef):
        listed = [recorded.engine] + ([recorded.shim] if recorded.shim is not None else [])
        containment = recorded.containment.to_dict()
        note = "the recorded engine and shim are listed; no process of the recorded boot survived its end"
    else:
        containment = {"held": False, "method": "not-recorded", "attempts": []}
        note = ("no member was recorded (the launcher's reference was never stored); no process of the "
                "recorded boot survived its end")
    boot = recorded.host.boot_id
    return _sealed_proof(
        "boot",
        recorded,
        request,
        containment=containment,
        members=[_member(boot, Death(m, boot_time, "boot-change")) for m in sorted(set(listed))],
        observed_at=observed_at,
        evidence={"kind": "boot-change", "recordedBoot": boot, "currentBoot": current.boot_id,
                  "currentBootStartedAt": rfc3339(boot_time),
                  "reference": "cohort" if isinstance(recorded, CohortRef) else "unit",
                  "membersListed": bool(listed), "note": note},
    )


class FixtureVerifier:
    """The fixture's trusted digest registry (CHAT-01 lines 330-333; seeds/003 §6).

    The party that ran a stop (or issued a boot proof) registers the proof's digest here (``register``);
    ``verify`` accepts a proof only if its ``verification.digest`` is its recomputed digest
    (``"sha256:<64 hex>"``), that digest was registered, and the record is a stop: membershipComplete true,
    a death for every member, no live authority; a cohort proof from a scope or direct cohort whose
    containment held; a boot proof (either form) on a changed boot of the cohort's boot. It is a fixture:
    accepting a proof here is not live authority.
    """

    def __init__(self) -> None:
        self._trusted: set[str] = set()

    def register(self, proof: Mapping[str, Any]) -> str:
        """Trust this proof's digest (recomputed here, never read from the record). Returns it.

        Raises TypeError or ValueError for a record JSON cannot hold.
        """
        digest = proof_digest(proof)
        self._trusted.add(digest)
        return digest

    def verify(self, proof: Mapping[str, Any], *, stop: str | None = None) -> str:
        """Return the digest of an accepted proof (equal to its ``verification.digest``); refuse
        ``verification`` with the reason otherwise (also for a record that is not JSON at all)."""
        try:
            digest = proof_digest(proof)
        except (TypeError, ValueError) as e:
            raise CohortRefusal("verification", f"not a JSON record: {e}") from e
        verification = proof.get("verification")
        stated = verification.get("digest") if isinstance(verification, Mapping) else None
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
        cohort = proof.get("cohort")
        if not isinstance(cohort, Mapping):
            raise CohortRefusal("verification", "no cohort reference")
        if kind == "boot":
            ev = proof.get("evidence")
            if not isinstance(ev, Mapping) or ev.get("recordedBoot") == ev.get("currentBoot"):
                raise CohortRefusal("verification", "a boot proof without a boot change")
            if cohort.get("boot") != ev.get("recordedBoot"):
                raise CohortRefusal("verification", "boot proof for another boot than the cohort's")
        elif kind == "cohort":
            if cohort.get("launcher") not in ("scope", "direct"):
                raise CohortRefusal("verification", "only a scope or direct cgroup cohort can prove a stop "
                                                    "(the process-group fallback cannot, K2)")
            containment = proof.get("containment")
            if not isinstance(containment, Mapping) or containment.get("held") is not True:
                raise CohortRefusal("verification", "containment did not hold for this cohort")
        else:
            raise CohortRefusal("verification", f"unknown proof kind {kind!r}")
        return digest
