"""Records: the cohort reference a launcher produces, a stop request, deaths, the observed identity.

The cohort reference (``CohortRef``) is what the controller stores, opaquely, in its writer-claim revision
once the engine is launched (seeds/003 §2 "Fields": "once known, the scope's systemd invocation ID and the
engine pid and start time"; §2 "Lifecycle" step 2), and what a restarted controller rebuilds the force
stop from (K10, K11). It comes back from disk, so ``CohortRef.from_dict`` is strict: anything malformed
raises ValueError and nothing half-built is ever returned. Every ``CohortRef`` (however it was made) is
well formed for its kind and small: its canonical JSON is at most ``MAX_REF_BYTES`` (the claim caps the
stored object at 16 KiB).

Host and process identities are ``mosaic.safe_open``'s ``HostIdentity`` and ``ProcessRef``: the writer
claim records the same values and compares them byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from mosaic.safe_open import HostIdentity, ProcessRef, canonical_json

from ._errors import CohortRefusal

__all__ = [
    "MAX_REF_BYTES",
    "UNIT_NAME_MAX",
    "CohortRef",
    "Containment",
    "Death",
    "LauncherKind",
    "ObservedIdentity",
    "StopRequest",
    "UnlaunchedCohort",
    "check_unit",
]

LauncherKind = Literal["scope", "direct", "pgroup"]
KINDS: tuple[LauncherKind, ...] = get_args(LauncherKind)

# systemd's UNIT_NAME_MAX is 256 with the terminating NUL (src/basic/unit-name.h); it is also NAME_MAX, so
# the direct launcher can use the same name for its cgroup directory.
UNIT_NAME_MAX = 255
# The characters systemd allows in a unit name without escaping (unit_name_is_valid, VALID_CHARS), minus
# "@" and "\\" (templates and escapes are not ours), ending in the scope suffix.
_UNIT_RE = re.compile(r"[A-Za-z0-9:_.\-]+\.scope")
# sun_path is 108 bytes with the terminating NUL (unix(7)).
SOCKET_PATH_MAX = 107
PATH_MAX = 4096
# Half the writer claim's 16 KiB cap on the stored object; a real reference is well under 1 KiB.
MAX_REF_BYTES = 8192
_ID128 = re.compile(r"[0-9a-f]{32}")


def unit_problem(unit: object) -> str | None:
    """Why ``unit`` cannot be a scope unit name recorded in a claim (None when it can). Pure."""
    if not isinstance(unit, str):
        return f"unit name must be a string, not {type(unit).__name__}"
    if len(unit) > UNIT_NAME_MAX:
        return f"unit name longer than {UNIT_NAME_MAX} characters"
    if unit in (".", "..") or "/" in unit or not _UNIT_RE.fullmatch(unit):
        return f"{unit!r} is not a scope unit name ([A-Za-z0-9:_.-], ending in .scope)"
    return None


def check_unit(unit: object) -> str:
    """``unit`` itself when it can name a scope unit (and the direct launcher's cgroup directory).

    Refuses ``configuration`` otherwise: the name recorded in the claim is the only one a launcher uses
    (seeds/003 §2 "Fields": "the intended scope unit name, derived from the claim ID, recorded before
    anything is spawned"), so a launcher never derives or repairs one.
    """
    problem = unit_problem(unit)
    if problem is not None:
        raise CohortRefusal("configuration", problem)
    assert isinstance(unit, str)
    return unit


# ------------------------------------------------------------------------------------------- validation
def _need(ok: bool, what: str) -> None:
    if not ok:
        raise ValueError(what)


def _is_int(value: object, low: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _is_array(value: object) -> bool:
    """A JSON array as Python holds it: a list, or the tuple a frozen copy makes of one (the writer claim
    stores the reference deep-frozen: objects as read-only mappings, arrays as tuples)."""
    return isinstance(value, (list, tuple))


def _is_text(value: object, limit: int) -> bool:
    return isinstance(value, str) and 0 < len(value) <= limit and "\0" not in value


def _exact_keys(d: object, keys: frozenset[str], what: str) -> Mapping[str, Any]:
    if not isinstance(d, Mapping):
        raise ValueError(f"{what} must be a JSON object, not {type(d).__name__}")
    missing, unknown = sorted(keys - set(d)), sorted(set(d) - keys)
    if missing or unknown:
        raise ValueError(f"{what}: missing keys {missing}, unknown keys {unknown}")
    return d


def _host_from(d: object) -> HostIdentity:
    m = _exact_keys(d, frozenset({"machineId", "bootId"}), "host")
    return HostIdentity.from_dict(m)


def _process_from(d: object, what: str) -> ProcessRef:
    m = _exact_keys(d, frozenset({"pid", "startTime"}), what)
    return ProcessRef.from_dict(m)


# ---------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Containment:
    """The launch canary's result (K13): can a process with the engine's credentials leave engine/?

    ``held`` is True only when every escape the canary tried was refused by a kernel permission check
    (EACCES, or ENOENT from a cgroup namespace on an nsdelegate mount). ``method`` names the boundary:
    "engine-uid" (the engine's kuid owns no ancestor of engine/, facts §4.4), "nsdelegate" (cgroup
    namespace on an nsdelegate mount), or "none". ``attempts`` maps each target to "EACCES", "MOVED", ...

    Raises ValueError when a field has the wrong type.
    """

    held: bool
    method: str
    attempts: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        _need(isinstance(self.held, bool), "containment.held must be a boolean")
        _need(_is_text(self.method, 64), "containment.method must be a short string")
        _need(isinstance(self.attempts, tuple) and len(self.attempts) <= 16, "containment.attempts: at most 16")
        for a in self.attempts:
            _need(isinstance(a, tuple) and len(a) == 2 and all(_is_text(x, PATH_MAX) for x in a),
                  f"containment attempt {a!r} is not a (target, result) pair of strings")

    def to_dict(self) -> dict[str, Any]:
        return {"held": self.held, "method": self.method, "attempts": [list(a) for a in self.attempts]}

    @classmethod
    def from_dict(cls, d: object) -> Containment:
        """Rebuild from ``to_dict()``'s form. Raises ValueError for anything else."""
        m = _exact_keys(d, frozenset({"held", "method", "attempts"}), "containment")
        attempts = m["attempts"]
        _need(_is_array(attempts) and all(_is_array(a) and len(a) == 2 for a in attempts),
              "containment.attempts must be a list of [target, result] pairs")
        return cls(m["held"], m["method"], tuple((a[0], a[1]) for a in attempts))


_REF_KEYS = frozenset({"kind", "unit", "host", "engine", "socketPath", "invocationId", "cgroupPath",
                       "unitCgroupId", "engineCgroupId", "shim", "pgid", "containment", "features"})


@dataclass(frozen=True)
class CohortRef:
    """What a launcher records about one cohort: the cohort reference and its membership epoch.

    * scope:  epoch = (machine id, boot id, unit name, InvocationID); cgroup ids are a second check.
    * direct: epoch = (machine id, boot id, cgroup path, cgroup id) (facts §5); the unit name is the name
      of the cgroup directory.
    * pgroup: (machine id, boot id, engine pid and start time, process group id); no epoch that a kernel
      enforces, so it can never support ``stopped`` (K2). Its unit name only ties it to the claim.

    ``unit`` is the name the claim recorded before the spawn; the reference carries no claim ID (the unit
    name is derived from it). A scope or direct reference has a socket path, cgroup path, both cgroup ids
    and the shim (and a scope an invocation ID, 32 lowercase hex), and no pgid; a pgroup reference has a
    pgid and none of the others. Anything else raises ValueError, as does a reference whose canonical JSON
    is larger than ``MAX_REF_BYTES``.

    ``to_dict()`` is a JSON object of JSON types only, the form the writer claim stores;
    ``from_dict(to_dict())`` is the same reference.
    """

    kind: LauncherKind
    unit: str
    host: HostIdentity
    engine: ProcessRef
    socket_path: str | None = None
    invocation_id: str | None = None
    cgroup_path: str | None = None
    unit_cgroup_id: int | None = None
    engine_cgroup_id: int | None = None
    shim: ProcessRef | None = None
    pgid: int | None = None
    containment: Containment = Containment(False, "none")
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _need(self.kind in KINDS, f"unknown launcher kind {self.kind!r}")
        problem = unit_problem(self.unit)
        _need(problem is None, str(problem))
        _need(isinstance(self.host, HostIdentity), "host must be a HostIdentity")
        _need(isinstance(self.engine, ProcessRef), "engine must be a ProcessRef")
        _need(isinstance(self.containment, Containment), "containment must be a Containment")
        _need(isinstance(self.features, tuple) and len(self.features) <= 16
              and all(_is_text(f, 64) for f in self.features), "features must be at most 16 short strings")
        if self.kind == "pgroup":
            _need(_is_int(self.pgid), "a pgroup reference needs a pgid >= 1")
            absent = {"socket_path": self.socket_path, "invocation_id": self.invocation_id,
                      "cgroup_path": self.cgroup_path, "unit_cgroup_id": self.unit_cgroup_id,
                      "engine_cgroup_id": self.engine_cgroup_id, "shim": self.shim}
            extra = sorted(k for k, v in absent.items() if v is not None)
            _need(not extra, f"a pgroup reference has no {', '.join(extra)}")
        else:
            _need(self.pgid is None, f"a {self.kind} reference has no pgid")
            _need(_is_text(self.socket_path, SOCKET_PATH_MAX) and str(self.socket_path).startswith("/"),
                  f"socket path must be absolute and at most {SOCKET_PATH_MAX} characters")
            _need(_is_text(self.cgroup_path, PATH_MAX) and str(self.cgroup_path).startswith("/"),
                  "cgroup path must be absolute")
            _need(_is_int(self.unit_cgroup_id) and _is_int(self.engine_cgroup_id),
                  "unit and engine cgroup ids must be integers >= 1")
            _need(isinstance(self.shim, ProcessRef), "a scope or direct reference names its shim")
            if self.kind == "scope":
                _need(isinstance(self.invocation_id, str) and bool(_ID128.fullmatch(self.invocation_id)),
                      "a scope reference needs its InvocationID (32 lowercase hex)")
            else:
                _need(self.invocation_id is None, "a direct cgroup has no InvocationID")
        size = len(canonical_json(self.to_dict()))
        _need(size <= MAX_REF_BYTES, f"cohort reference is {size} bytes of JSON, over {MAX_REF_BYTES}")

    @property
    def epoch_id(self) -> str:
        """The membership epoch as one string, for a claim's `invocationId` field (brief §2 "Fields": the
        scope's invocation ID once known): the systemd InvocationID for a scope; for the direct route,
        which has none, `cgroup-<id>` (its epoch is the kernfs cgroup id, facts §5); for the process-group
        fallback `pgroup-<pgid>-<engine start time>` (no kernel epoch at all: it never proves, K2)."""
        if self.kind == "scope":
            assert self.invocation_id is not None
            return self.invocation_id
        if self.kind == "direct":
            return f"cgroup-{self.unit_cgroup_id}"
        return f"pgroup-{self.pgid}-{self.engine.start_time}"

    def to_dict(self) -> dict[str, Any]:
        """The stored form: a JSON object of JSON types only (strings, integers, booleans, null, lists)."""
        return {
            "kind": self.kind,
            "unit": self.unit,
            "host": self.host.to_dict(),
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
    def from_dict(cls, d: object) -> CohortRef:
        """Rebuild a reference from ``to_dict()``'s form, as read back from a claim revision.

        Strict: exactly the keys ``to_dict`` writes, each of its JSON type, and a reference well formed
        for its kind. Anything else raises ValueError naming what is wrong; nothing half-built is returned.
        """
        try:
            m = _exact_keys(d, _REF_KEYS, "cohort reference")
            features = m["features"]
            _need(_is_array(features), "features must be a list")
            shim = m["shim"]
            return cls(
                kind=m["kind"],
                unit=m["unit"],
                host=_host_from(m["host"]),
                engine=_process_from(m["engine"], "engine"),
                socket_path=m["socketPath"],
                invocation_id=m["invocationId"],
                cgroup_path=m["cgroupPath"],
                unit_cgroup_id=m["unitCgroupId"],
                engine_cgroup_id=m["engineCgroupId"],
                shim=None if shim is None else _process_from(shim, "shim"),
                pgid=m["pgid"],
                containment=Containment.from_dict(m["containment"]),
                features=tuple(features),
            )
        except (KeyError, TypeError) as e:  # a value of the wrong shape deep inside
            raise ValueError(f"malformed cohort reference: {e!r}") from None


@dataclass(frozen=True)
class UnlaunchedCohort:
    """What a claim revision holds about a cohort whose launcher reference was never recorded.

    A controller that crashed after publishing the spawn marker and before recording the launcher's
    reference (seeds/003 §2 "Restart", W20) left only the unit name recorded at reservation and the host
    identity of the claim. That is enough for a boot proof once the boot has changed, and for nothing else.
    Raises ValueError for a unit that is not a scope unit name or a host that is not a ``HostIdentity``.
    """

    unit: str
    host: HostIdentity

    def __post_init__(self) -> None:
        problem = unit_problem(self.unit)
        _need(problem is None, str(problem))
        _need(isinstance(self.host, HostIdentity), "host must be a HostIdentity")


@dataclass(frozen=True)
class StopRequest:
    """One force stop: its id, the conversation and execution it targets, and who authorised it.

    ``authority`` carries the answered confirmation (seeds/003 §6 "Force stop ... Needs an answered
    confirmation"); this package records it and never treats it as live authority. A restarted controller
    rebuilds the same request from its stopping revision (K10, K11): it continues that stop.
    """

    stop_id: str
    conversation: str
    execution: str
    authority: Mapping[str, Any]


@dataclass(frozen=True)
class Death:
    """How the death of one member was observed.

    ``how`` is "reaped" (the shim collected it: ``signal``/``status`` set), "populated-0" (it was in the
    frozen cohort and engine/ read populated 0 afterwards, and /proc no longer shows that (pid, start)),
    "zombie", "exiting" (in do_exit, PF_EXITING) or "boot-change". ``time`` is Unix seconds of the
    observation, an upper bound on the death.
    """

    member: ProcessRef
    time: float
    how: str
    signal: int | None = None
    status: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**self.member.to_dict(), "time": self.time, "how": self.how, "signal": self.signal,
                "status": self.status}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Death:
        """Rebuild from ``to_dict()``'s form (the shim's ``deaths`` reply). Raises KeyError, TypeError or
        ValueError for anything else."""
        return cls(ProcessRef.from_dict(d), float(d["time"]), str(d["how"]), d.get("signal"), d.get("status"))


@dataclass(frozen=True)
class ObservedIdentity:
    """What the live system says about the cohort under the reference's name, at the identity check.

    ``host`` is this machine and boot (None: unreadable). ``invocation_id`` comes from the manager
    (systemctl show), ``shim_invocation_id`` from the shim's own reading of the manager at its start; both
    must equal the reference's for a scope. ``unit_cgroup_id`` is the caller's own reading of the cgroup
    under the recorded path (direct) and ``shim_unit_cgroup_id`` the id the shim that answered reports;
    both must equal the reference's.
    """

    host: HostIdentity | None
    invocation_id: str | None = None
    shim_invocation_id: str | None = None
    unit_cgroup_id: int | None = None
    shim_unit_cgroup_id: int | None = None
    engine_cgroup_id: int | None = None
    containment: Containment | None = None
    features: tuple[str, ...] = ()
