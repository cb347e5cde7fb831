"""Records: the cohort claim a launcher produces, a stop request, members, deaths, observed identity.

All are frozen dataclasses with ``to_dict``/``from_dict`` so that a controller can store them in its
writer-claim revision (seeds/003 §2 "Fields") and a restarted controller can rebuild them (K10, K11).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "CohortClaim",
    "Containment",
    "Death",
    "LauncherKind",
    "MemberRef",
    "ObservedIdentity",
    "StopRequest",
]

LauncherKind = Literal["scope", "direct", "pgroup"]


@dataclass(frozen=True, order=True)
class MemberRef:
    """A process named by pid AND start time (clock ticks since boot): a reused pid is another process."""

    pid: int
    start_time: int

    def to_dict(self) -> dict[str, int]:
        return {"pid": self.pid, "startTime": self.start_time}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MemberRef:
        return cls(int(d["pid"]), int(d["startTime"]))


@dataclass(frozen=True)
class Containment:
    """The launch canary's result (K13): can a process with the engine's credentials leave engine/?

    ``held`` is True only when every escape the canary tried was refused by a kernel permission check
    (EACCES, or ENOENT from a cgroup namespace on an nsdelegate mount). ``method`` names the boundary:
    "engine-uid" (the engine's kuid owns no ancestor of engine/, facts §4.4), "nsdelegate" (cgroup
    namespace on an nsdelegate mount), or "none". ``attempts`` maps each target to "EACCES", "MOVED", ...
    """

    held: bool
    method: str
    attempts: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"held": self.held, "method": self.method, "attempts": [list(a) for a in self.attempts]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Containment:
        return cls(bool(d["held"]), str(d["method"]), tuple((str(a), str(b)) for a, b in d.get("attempts", ())))


@dataclass(frozen=True)
class CohortClaim:
    """What a launcher records about one cohort. The cohort reference and its membership epoch.

    * scope:  epoch = (machine id, boot id, unit name, InvocationID); cgroup ids are a second check.
    * direct: epoch = (machine id, boot id, cgroup path, cgroup id) (facts §5).
    * pgroup: (machine id, boot id, engine pid and start time, process group id); no epoch that a
      kernel enforces, so it can never support ``stopped`` (K2).
    """

    kind: LauncherKind
    claim_id: str
    unit: str
    machine_id: str
    boot_id: str
    engine: MemberRef
    socket_path: str | None = None
    invocation_id: str | None = None
    cgroup_path: str | None = None
    unit_cgroup_id: int | None = None
    engine_cgroup_id: int | None = None
    shim: MemberRef | None = None
    pgid: int | None = None
    containment: Containment = field(default_factory=lambda: Containment(False, "none"))
    features: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "claimId": self.claim_id,
            "unit": self.unit,
            "machineId": self.machine_id,
            "bootId": self.boot_id,
            "engine": self.engine.to_dict(),
            "socketPath": self.socket_path,
            "invocationId": self.invocation_id,
            "cgroupPath": self.cgroup_path,
            "unitCgroupId": self.unit_cgroup_id,
            "engineCgroupId": self.engine_cgroup_id,
            "shim": None if self.shim is None else self.shim.to_dict(),
            "pgid": self.pgid,
            "containment": self.containment.to_dict(),
            "features": list(self.features),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CohortClaim:
        kind = d["kind"]
        if kind not in ("scope", "direct", "pgroup"):
            raise ValueError(f"unknown launcher kind {kind!r}")
        return cls(
            kind=kind,
            claim_id=str(d["claimId"]),
            unit=str(d["unit"]),
            machine_id=str(d["machineId"]),
            boot_id=str(d["bootId"]),
            engine=MemberRef.from_dict(d["engine"]),
            socket_path=d.get("socketPath"),
            invocation_id=d.get("invocationId"),
            cgroup_path=d.get("cgroupPath"),
            unit_cgroup_id=d.get("unitCgroupId"),
            engine_cgroup_id=d.get("engineCgroupId"),
            shim=None if d.get("shim") is None else MemberRef.from_dict(d["shim"]),
            pgid=d.get("pgid"),
            containment=Containment.from_dict(d.get("containment", {"held": False, "method": "none"})),
            features=tuple(d.get("features", ())),
        )


@dataclass(frozen=True)
class StopRequest:
    """One force stop: its id, the conversation and execution it targets, and who authorised it.

    ``authority`` carries the answered confirmation (seeds/003 §6 "Force stop ... Needs an answered
    confirmation"); this package records it and never treats it as live authority.
    """

    stop_id: str
    conversation: str
    execution: str
    authority: Mapping[str, Any]


@dataclass(frozen=True)
class Death:
    """How the death of one member was observed.

    ``how`` is "reaped" (the shim collected it: ``signal``/``status`` set) or "populated-0" (it was in the
    frozen cohort and engine/ read populated 0 afterwards, and /proc no longer shows that (pid, start)).
    ``time`` is Unix seconds of the observation, an upper bound on the death.
    """

    member: MemberRef
    time: float
    how: str
    signal: int | None = None
    status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.member.to_dict(), "time": self.time, "how": self.how, "signal": self.signal,
                "status": self.status}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Death:
        return cls(MemberRef.from_dict(d), float(d["time"]), str(d["how"]), d.get("signal"), d.get("status"))


@dataclass(frozen=True)
class ObservedIdentity:
    """What the live system says about the cohort under the claim's name, at the identity check.

    ``invocation_id`` comes from the manager (systemctl show), ``shim_invocation_id`` from the shim's own
    reading of the manager at its start; both must equal the claim's for a scope. ``unit_cgroup_id`` is
    the caller's own reading of the cgroup under the recorded path (direct) and ``shim_unit_cgroup_id``
    the id the shim that answered reports; both must equal the claim's.
    """

    machine_id: str | None
    boot_id: str | None
    invocation_id: str | None = None
    shim_invocation_id: str | None = None
    unit_cgroup_id: int | None = None
    shim_unit_cgroup_id: int | None = None
    engine_cgroup_id: int | None = None
    containment: Containment | None = None
    features: tuple[str, ...] = ()
