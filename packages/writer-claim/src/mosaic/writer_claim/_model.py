"""The values a writer claim is made of: keys, identities, proofs, states and revisions.

Brief §2 "Writer-claim record (D1)", "Fields". Everything here is a frozen value with no I/O, so the
decision core (`_core`) and the tests can build and compare them freely. The JSON form is `_codec`'s.

The host, a process and the digest form are safe-open's (`HostIdentity`, `ProcessRef`, `sha256_digest`
over `canonical_json`): the claim and the cohort record them, and a restarted controller compares the
two byte for byte (docs/design.md, "safe-open: `Refusal` and the identities"). Only `ProcessIdentity` is
this package's own, because the owner check needs the pid namespace as well.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Literal, TypeAlias

from mosaic.safe_open import DIGEST_RE, HostIdentity, ProcessRef, canonical_json, sha256_digest

# What mosaic.writer_claim.model offers (it star-imports this list): the record's values and their parts.
__all__ = [
    "Binding",
    "Eligibility",
    "JSON",
    "KeyKind",
    "MAX_COHORT_BYTES",
    "Outcome",
    "Owner",
    "Pins",
    "ProcessIdentity",
    "ProofKind",
    "ProofRef",
    "Revision",
    "SeatKey",
    "SessionKey",
    "State",
    "StopInfo",
    "UnitObservation",
    "Writer",
]

# A claim ID is minted at acquisition (§2 "Keys and claim ID": "A claim ID, random and minted at
# acquisition"): 128 random bits, so two contenders never mint the same one.
CLAIM_ID_RE = re.compile(r"^claim-[0-9a-f]{32}$")
# Every free-text field is bounded so a revision stays small (the reader caps a revision file's size).
MAX_TEXT = 4096
MAX_DETAIL_ITEMS = 32
# The cohort reference is cgroup-cohort's, opaque here. A launcher's `CohortRef.to_dict()` is
# well under 1 KiB; 16 KiB of canonical JSON leaves room for what a launcher adds later while keeping a
# revision far below the reader's 64 KiB cap (`_codec.MAX_REVISION_BYTES`). The depth bound keeps the
# recursive checks and the JSON reader clear of Python's recursion limit.
MAX_COHORT_BYTES = 16 * 1024
MAX_COHORT_DEPTH = 32
# An eligibility ID names the controller's single-use eligibility record (§6 "Recover"). The record itself
# is the controller's; the claim only carries its ID, so the ID is kept short and path- and JSON-safe.
ELIGIBILITY_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

KeyKind = Literal["seat", "session"]
JSONScalar = str | int | bool | None
# A JSON value as this package holds it: objects and arrays are read-only (`Mapping`, and `Sequence`,
# a tuple once frozen).
JSON: TypeAlias = str | int | float | bool | None | Sequence["JSON"] | Mapping[str, "JSON"]


def _text(value: object, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    if not value and not empty:
        raise ValueError(f"{what} must not be empty")
    if len(value) > MAX_TEXT or "\0" in value:
        raise ValueError(f"{what} is longer than {MAX_TEXT} characters or holds a NUL")
    return value


def _count(value: object, what: str, *, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}")
    return value


def utc_timestamp(now: float) -> str:
    """`now` (seconds since the epoch) as the informational `publishedAt` form: UTC, ISO 8601, milliseconds
    and `Z`, e.g. `2026-01-01T00:00:00.000Z`. Raises ValueError for a value that is not a finite time.

    The text is `datetime.fromtimestamp(now, UTC)`'s, whose seconds and microseconds are worked out here as
    it works them out (the fraction rounded half to even to microseconds, carried into the second): the
    date and time of a second is made once and kept for the next reading within the same second (the steps
    of a claim come in bursts), so most readings only format their milliseconds."""
    if type(now) is not float and (isinstance(now, bool) or not isinstance(now, (int, float))):
        raise ValueError(f"a clock reading is seconds since the epoch, not {now!r}")
    if not math.isfinite(now):
        raise ValueError(f"a clock reading is seconds since the epoch, not {now!r}")
    if isinstance(now, int):
        second, micro = int(now), 0
    else:
        fraction, whole = math.modf(now)
        micro = round(fraction * 1e6)
        if micro >= 1_000_000:
            micro, whole = micro - 1_000_000, whole + 1.0
        elif micro < 0:
            micro, whole = micro + 1_000_000, whole - 1.0
        second = int(whole)
    global _stamp_second
    cached, prefix = _stamp_second
    if cached != second:
        try:
            moment = datetime.fromtimestamp(now, UTC)
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"{now!r} is out of the range of a timestamp") from None
        prefix = moment.isoformat(timespec="seconds").removesuffix("+00:00")
        _stamp_second = (second, prefix)
    return f"{prefix}.{micro // 1000:03d}Z"


# The last second `utc_timestamp` formatted, and its text up to the seconds.
_stamp_second: tuple[int | None, str] = (None, "")


class _FrozenObject(Mapping[str, JSON]):
    """A read-only JSON object (see `freeze_cohort`). Two compare equal when their canonical JSON is the
    same bytes, also against a plain mapping, so equality means "the same record bytes"; hashable."""

    __slots__ = ("_items", "_encoded")

    def __init__(self, items: dict[str, JSON]) -> None:
        self._items = items
        self._encoded: bytes | None = None

    def __getitem__(self, key: str) -> JSON:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def encoded(self) -> bytes:
        """The canonical JSON bytes of this object."""
        if self._encoded is None:
            self._encoded = canonical_json(thaw_json(self))
        return self._encoded

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _FrozenObject):
            return self.encoded == other.encoded
        if isinstance(other, Mapping):
            try:
                return self.encoded == canonical_json(thaw_json(other))
            except (TypeError, ValueError):
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.encoded)

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{k!r}: {v!r}' for k, v in self._items.items())}}}"


def thaw_json(value: object) -> object:
    """A plain copy of a JSON value: mappings become dicts and tuples lists (what `json` encodes)."""
    if type(value) is _FrozenObject or type(value) is dict:  # before the (slower) abstract Mapping check
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, Mapping):
        return {k: thaw_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw_json(v) for v in value]
    return value


def _freeze(value: object, where: str, depth: int, plain: list[bool]) -> JSON:
    """`value` as a read-only JSON value; `plain[0]` is cleared when it holds anything but exactly dict,
    list, str, int, float, bool and None (what json.loads makes)."""
    if value is None:
        return None
    t = type(value)
    if t is str or t is int or t is bool:
        return value  # type: ignore[return-value]
    if t is dict:
        if depth > MAX_COHORT_DEPTH:
            raise ValueError(f"{where} is nested deeper than {MAX_COHORT_DEPTH} levels")
        items: dict[str, JSON] = {}
        for k, v in value.items():  # type: ignore[attr-defined]
            if type(k) is not str:
                plain[0] = False
                if not isinstance(k, str):
                    raise ValueError(f"{where} has a key {k!r} that is not a string")
                k = str.__str__(k)
            items[k] = _freeze(v, f"{where}.{k}", depth + 1, plain)
        return _FrozenObject(items)
    if t is not list and t is not float:
        plain[0] = False
    if isinstance(value, str):
        return value if type(value) is str else str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}, which JSON cannot hold")
        return float(value)
    if depth > MAX_COHORT_DEPTH and isinstance(value, Mapping | list | tuple):
        raise ValueError(f"{where} is nested deeper than {MAX_COHORT_DEPTH} levels")
    if isinstance(value, Mapping):
        items = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where} has a key {k!r} that is not a string")
            key = k if type(k) is str else str.__str__(k)
            items[key] = _freeze(v, f"{where}.{key}", depth + 1, plain)
        return _FrozenObject(items)
    if isinstance(value, list | tuple):
        return tuple(_freeze(v, f"{where}[{i}]", depth + 1, plain) for i, v in enumerate(value))
    raise ValueError(f"{where} is a {type(value).__name__}, not a JSON value")


def freeze_cohort(value: object) -> Mapping[str, JSON]:
    """The cohort reference as a deep, read-only copy: objects become read-only mappings, arrays tuples.

    The value must be a JSON object of JSON values (str, int, bool, None, finite float, list or tuple,
    mapping with str keys), nested at most MAX_COHORT_DEPTH levels, and at most MAX_COHORT_BYTES as
    canonical JSON. Raises ValueError otherwise. What the object says is cgroup-cohort's business; this
    package only stores it and carries it.
    """
    if isinstance(value, _FrozenObject):
        return value  # frozen (and checked) by this function before
    if not isinstance(value, Mapping):
        raise ValueError(f"a cohort reference is a JSON object, not a {type(value).__name__}")
    plain = [True]
    frozen = _freeze(value, "cohort", 1, plain)
    assert isinstance(frozen, _FrozenObject)
    if plain[0]:
        # Nothing but what json.loads makes (a revision read back, or a caller's plain dict): its canonical
        # bytes are the frozen copy's, without making a plain copy of the copy first.
        try:
            frozen._encoded = canonical_json(value)
        except UnicodeEncodeError:
            raise ValueError("the cohort reference holds text that is not valid Unicode (a lone surrogate)") from None
    try:
        size = len(frozen.encoded)
    except UnicodeEncodeError:
        raise ValueError("the cohort reference holds text that is not valid Unicode (a lone surrogate)") from None
    if size > MAX_COHORT_BYTES:
        raise ValueError(f"the cohort reference is {size} bytes of canonical JSON, over {MAX_COHORT_BYTES}")
    return frozen


class State(StrEnum):
    """A key's state. §2 "Pair state": uncertain, stopping, active, reserved, stopped, most conservative
    first."""

    RESERVED = "reserved"
    ACTIVE = "active"
    STOPPING = "stopping"
    UNCERTAIN = "uncertain"
    STOPPED = "stopped"


# §2 "Pair state": "The pair's state is the more conservative of the two, in this order: uncertain,
# stopping, active, reserved, stopped." A higher rank is more conservative.
CONSERVATIVE_RANK: Mapping[State, int] = MappingProxyType(
    {State.STOPPED: 0, State.RESERVED: 1, State.ACTIVE: 2, State.STOPPING: 3, State.UNCERTAIN: 4}
)


def more_conservative(a: State, b: State) -> State:
    """The more conservative of two states (§2 "Pair state")."""
    return a if CONSERVATIVE_RANK[a] >= CONSERVATIVE_RANK[b] else b


@dataclass(frozen=True)
class SeatKey:
    """The seat tuple (seat, project, workspace): one of the two keys of a claim (§2, RUNTIME.md §3 item 3)."""

    seat: str
    project: str
    workspace: str

    def __post_init__(self) -> None:
        _text(self.seat, "seat")
        _text(self.project, "project")
        _text(self.workspace, "workspace")

    kind: KeyKind = field(default="seat", init=False, repr=False, compare=False)

    def to_json(self) -> dict[str, object]:
        return {"seat": self.seat, "project": self.project, "workspace": self.workspace}

    @functools.cached_property
    def dirname(self) -> str:
        """The key's directory under the claim root: `seat-` and the SHA-256 of the canonical tuple.

        Hashing keeps any seat, project or workspace text (slashes, dots, long names) out of the path; the
        full key is stored in every revision and checked on read.
        """
        return "seat-" + hashlib.sha256(canonical_json(["seat", self.seat, self.project, self.workspace])).hexdigest()


@dataclass(frozen=True)
class SessionKey:
    """The native session identity: the Pi header ID (or a Claude session UUID), with its harness (§2)."""

    harness: str
    session_id: str

    def __post_init__(self) -> None:
        _text(self.harness, "harness")
        _text(self.session_id, "session id")

    kind: KeyKind = field(default="session", init=False, repr=False, compare=False)

    def to_json(self) -> dict[str, object]:
        return {"harness": self.harness, "sessionId": self.session_id}

    @functools.cached_property
    def dirname(self) -> str:
        """The key's directory under the claim root: `session-` and the SHA-256 of (harness, id)."""
        return "session-" + hashlib.sha256(canonical_json(["session", self.harness, self.session_id])).hexdigest()


@dataclass(frozen=True)
class Pins:
    """The config pins a claim was launched with (§2 "Fields": engine version, binary sha256, argv digest)."""

    engine_version: str
    binary_sha256: str
    argv_digest: str

    def __post_init__(self) -> None:
        _text(self.engine_version, "engine version")
        _text(self.binary_sha256, "binary sha256")
        _text(self.argv_digest, "argv digest")


@dataclass(frozen=True)
class Binding:
    """What the claim binds (§2 "Fields"): the binding ID, harness, conversation, branch and leaf at launch,
    and the config pins. The leaf is None for a session with no entries yet."""

    binding_id: str
    harness: str
    conversation: str
    branch: str
    leaf: str | None
    pins: Pins

    def __post_init__(self) -> None:
        _text(self.binding_id, "binding id")
        _text(self.harness, "harness")
        _text(self.conversation, "conversation")
        _text(self.branch, "branch")
        if self.leaf is not None:
            _text(self.leaf, "leaf")
        if not isinstance(self.pins, Pins):
            raise ValueError("pins must be a Pins")


@dataclass(frozen=True)
class ProcessIdentity:
    """A process as the owner check sees it: pid, start time (clock ticks after boot, /proc/<pid>/stat
    field 22) and the pid namespace the pid is read in (`pid:[inode]` from /proc/self/ns/pid).

    §2 "Owner check": the owner is gone when "no process with the recorded pid and start time" exists.
    The namespace is this package's addition: a pid means nothing in another pid namespace, so an owner
    recorded in another namespace is never proven gone from this one.
    """

    pid: int
    start_time: int
    pid_namespace: str

    def __post_init__(self) -> None:
        ProcessRef(self.pid, self.start_time)  # the shared form's checks: pid >= 1, start time >= 0
        _text(self.pid_namespace, "pid namespace")

    @property
    def ref(self) -> ProcessRef:
        """The process without its namespace, in the shared form."""
        return ProcessRef(self.pid, self.start_time)


@dataclass(frozen=True)
class Owner:
    """The owning controller of a claim: its process and its incarnation token (§2 "Fields")."""

    process: ProcessIdentity
    incarnation: str

    def __post_init__(self) -> None:
        _text(self.incarnation, "incarnation token")


WriterRole = Literal["owner", "restart"]


@dataclass(frozen=True)
class Writer:
    """Who published one revision. The owner publishes its own lifecycle; a restart classifier publishes
    the revisions of a claim whose owner is proven gone, and never becomes its owner (§2 "Restart")."""

    process: ProcessIdentity
    incarnation: str
    role: WriterRole

    def __post_init__(self) -> None:
        _text(self.incarnation, "incarnation token")
        if self.role not in ("owner", "restart"):
            raise ValueError(f"writer role {self.role!r} is not owner or restart")


@dataclass(frozen=True)
class StopInfo:
    """§6 "Force stop": "The stop ID, the answered confirmation and the current phase go into the stopping
    revision before any signal." The confirmation is an opaque reference (None for a plain release)."""

    stop_id: str
    confirmation: str | None
    phase: str

    def __post_init__(self) -> None:
        _text(self.stop_id, "stop id")
        if self.confirmation is not None:
            _text(self.confirmation, "confirmation")
        _text(self.phase, "stop phase")


class ProofKind(StrEnum):
    """The three proof kinds that allow stopped (§2 "Fields"). Nothing else does: disconnect,
    agent_settled, EOF, SIGTERM, idle and an abort acknowledgement are not proofs (§2 "What never releases
    a claim") and cannot be expressed as one."""

    COHORT = "cohort-proof"
    BOOT = "boot-proof"
    NO_UNIT = "no-unit"


@dataclass(frozen=True)
class ProofRef:
    """A reference to the proof that allowed stopped: its kind, the verification digest of the full proof
    (the cohortProof itself belongs to cgroup-cohort and the controller's evidence) and a small detail
    mapping of JSON scalars.

    A no-unit observation is valid only for a claim with no spawn marker (§2); the store enforces that.
    """

    kind: ProofKind
    digest: str
    detail: Mapping[str, JSONScalar] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        try:
            kind = ProofKind(self.kind)
        except ValueError:
            raise ValueError(
                f"{self.kind!r} is not a proof kind; only {[k.value for k in ProofKind]} allow stopped"
            ) from None
        object.__setattr__(self, "kind", kind)
        if not isinstance(self.digest, str) or not DIGEST_RE.fullmatch(self.digest):
            raise ValueError("a proof digest is sha256:<64 lowercase hex>")
        if not isinstance(self.detail, Mapping) or len(self.detail) > MAX_DETAIL_ITEMS:
            raise ValueError(f"proof detail must be a mapping of at most {MAX_DETAIL_ITEMS} items")
        clean: dict[str, JSONScalar] = {}
        for k, v in self.detail.items():
            _text(k, "proof detail key")
            if isinstance(v, str):
                _text(v, f"proof detail {k!r}", empty=True)
            elif v is not None and not isinstance(v, bool | int):
                raise ValueError(f"proof detail {k!r} must be a JSON scalar (str, int, bool or null)")
            clean[k] = v
        object.__setattr__(self, "detail", MappingProxyType(dict(sorted(clean.items()))))

    def __hash__(self) -> int:
        return hash((self.kind, self.digest, tuple(self.detail.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProofRef):
            return NotImplemented
        return (self.kind, self.digest, dict(self.detail)) == (other.kind, other.digest, dict(other.detail))

    @classmethod
    def never_spawned(cls, claim_id: str, reason: str) -> ProofRef:
        """The no-unit reference of a claim that this process itself never spawned under: the W4 loser's
        follow-up (§2 "Keys and claim ID": "it follows that revision with stopped and a no-unit proof
        reference (it never spawned)")."""
        detail: dict[str, JSONScalar] = {"basis": "never-spawned", "claimId": claim_id, "reason": reason}
        return cls(ProofKind.NO_UNIT, sha256_digest(canonical_json(detail)), detail)


UnitPresence = Literal["absent", "present", "unavailable"]


@dataclass(frozen=True)
class UnitObservation:
    """A probe's answer about the intended unit of a claim (§2 "Restart", §6 "Unavailable is not empty").

    - absent: the probe looked and no unit of that name exists;
    - present: a unit of that name exists (whatever its invocation ID);
    - unavailable: the probe could not tell. It counts as present: unavailable is never absent.
    """

    unit_name: str
    presence: UnitPresence
    detail: Mapping[str, JSONScalar] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        _text(self.unit_name, "unit name")
        if self.presence not in ("absent", "present", "unavailable"):
            raise ValueError(f"unit presence {self.presence!r} is not absent, present or unavailable")
        object.__setattr__(self, "detail", MappingProxyType(dict(self.detail)))

    def no_unit_proof(self, claim_id: str, host: HostIdentity) -> ProofRef:
        """The no-unit observation as a proof reference. Only an `absent` answer makes one."""
        if self.presence != "absent":
            raise ValueError(f"a {self.presence} unit is not a no-unit observation")
        detail: dict[str, JSONScalar] = {
            "basis": "probe",
            "claimId": claim_id,
            "unitName": self.unit_name,
            "machineId": host.machine_id,
            "bootId": host.boot_id,
        }
        for k, v in sorted(self.detail.items()):
            detail.setdefault(f"probe.{k}", v)
        return ProofRef(ProofKind.NO_UNIT, sha256_digest(canonical_json(detail)), detail)


@dataclass(frozen=True)
class Eligibility:
    """The single-use eligibility a recovery reservation is made for (§6 "Recover", CHAT-03; K17, K18).

    A recovering controller reserves the pair under a new claim ID with `Eligibility(id, taken=False)` on
    both keys and writes its eligibility record (the controller's, naming the claim); a launcher, another
    process, later takes the claim over with the same ID (`ClaimStore.take_over`), which publishes
    `taken=True` on both keys, once. While it is pending (set and not taken) nobody spawns under the claim:
    the reserving owner's `mark_spawn` raises, and restart classification leaves the pair held.

    `id` is 1 to 128 characters of `[A-Za-z0-9._:-]`; `taken` a bool. Raises ValueError otherwise.
    """

    id: str
    taken: bool

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not ELIGIBILITY_ID_RE.fullmatch(self.id):
            raise ValueError(f"an eligibility ID is 1 to 128 characters of [A-Za-z0-9._:-], not {self.id!r}")
        if not isinstance(self.taken, bool):
            raise ValueError("eligibility.taken must be a bool")

    @property
    def pending(self) -> bool:
        """Reserved for a launcher that has not taken the claim over yet."""
        return not self.taken


def mint_claim_id() -> str:
    """A fresh random claim ID (`claim-` and 32 hex digits)."""
    return "claim-" + secrets.token_hex(16)


def unit_name_for(claim_id: str) -> str:
    """The intended scope unit name, derived from the claim ID (§2 "Fields", §6 "Producer").

    The shape follows cgroup-facts.md (`systemd-run --user --scope --unit=cohort-<claim>`), so the name
    recorded before anything is spawned is the name the launcher uses.
    """
    if not CLAIM_ID_RE.fullmatch(claim_id):
        raise ValueError(f"{claim_id!r} is not a claim ID")
    return f"cohort-{claim_id}.scope"


#: The highest engine uid a revision records ((uid_t)-1 is "no id" to the kernel).
ENGINE_UID_MAX = 2**32 - 2


@dataclass(frozen=True)
class Revision:
    """One revision of one key: the complete record, as published at `r<number, 10 digits>.json`.

    Every revision is complete on its own (§2 "Atomic publication"): it names both keys of its pair, so
    the head of either chain says which other key to look at. `key` says which chain it was published in.

    `eligibility` is set only on a claim reserved for a launcher (`acquire(..., eligibility=...)`): the
    same ID in every revision of the claim, `taken` turning True once, by `ClaimStore.take_over`. None on
    every other claim (and on every revision written before the field existed).

    `engine_uid` is the uid the claim's engine runs as when one was allocated for this execution (the
    controller's engine uid range): recorded with the spawn marker, before anything runs as it, and carried
    into every later revision, so the uid is never given to another execution while this claim is not
    stopped with a proof. None when the launcher's one account runs the engine (and on every revision
    written before the field existed).

    `invocation_id`, `engine` and `cohort` are recorded once the engine runs (§2 "Lifecycle" 2) and then
    carried into every later revision of the claim. `cohort` is the launcher's cohort reference (host,
    boot, unit, invocation ID, cgroup path and ids, shim socket, containment: cgroup-cohort's
    `CohortRef.to_dict()`), stored so that a restarted controller can force stop the recorded scope
    (§6 "Controller death during force stop", K10, K11) and ask for a boot proof (§6 "Boot proof", W7,
    K16) from the claim alone. This package never interprets it; it is held as a read-only deep copy
    (`freeze_cohort`: a JSON object, at most MAX_COHORT_BYTES of canonical JSON).
    """

    key: KeyKind
    number: int
    seat: SeatKey
    session: SessionKey
    claim_id: str
    state: State
    binding: Binding
    host: HostIdentity
    owner: Owner
    writer: Writer
    unit_name: str
    spawn_marker: bool
    invocation_id: str | None
    engine: ProcessRef | None
    cohort: Mapping[str, JSON] | None
    generation: int
    stop: StopInfo | None
    proof: ProofRef | None
    reason: str
    published_at: str
    eligibility: Eligibility | None = None
    engine_uid: int | None = None

    def __post_init__(self) -> None:
        if self.key not in ("seat", "session"):
            raise ValueError(f"key {self.key!r} is not seat or session")
        _count(self.number, "revision number", minimum=1)
        if self.number > 9_999_999_999:
            raise ValueError("revision numbers have at most 10 digits")
        if not isinstance(self.claim_id, str) or not CLAIM_ID_RE.fullmatch(self.claim_id):
            raise ValueError(f"{self.claim_id!r} is not a claim ID")
        object.__setattr__(self, "state", State(self.state))
        if self.unit_name != unit_name_for(self.claim_id):
            raise ValueError("the unit name is not the one derived from the claim ID")
        if not isinstance(self.spawn_marker, bool):
            raise ValueError("spawn marker must be a bool")
        if not isinstance(self.host, HostIdentity):
            raise ValueError("host must be a mosaic.safe_open.HostIdentity")
        if self.invocation_id is not None:
            _text(self.invocation_id, "invocation id")
        if self.engine is not None and not isinstance(self.engine, ProcessRef):
            raise ValueError("engine must be a mosaic.safe_open.ProcessRef")
        if self.cohort is not None:
            object.__setattr__(self, "cohort", freeze_cohort(self.cohort))
        if self.eligibility is not None and not isinstance(self.eligibility, Eligibility):
            raise ValueError("eligibility must be an Eligibility")
        if self.engine_uid is not None and (not isinstance(self.engine_uid, int) or isinstance(self.engine_uid, bool)
                                            or not 1 <= self.engine_uid <= ENGINE_UID_MAX):
            raise ValueError(f"engine uid {self.engine_uid!r} is not a uid from 1 to {ENGINE_UID_MAX}")
        _count(self.generation, "generation", minimum=1)
        _text(self.reason, "reason")
        _text(self.published_at, "published at")
        if self.state is State.STOPPING and self.stop is None:
            raise ValueError("a stopping revision records its stop")
        if self.proof is not None and self.state is not State.STOPPED:
            raise ValueError("only a stopped revision carries a proof reference")
        # A stopped revision without a proof is representable (another writer may have made one); it is
        # never held free, and this package never writes one (`_core.check_proof`).

    @property
    def key_value(self) -> SeatKey | SessionKey:
        return self.seat if self.key == "seat" else self.session

    @property
    def dirname(self) -> str:
        return self.key_value.dirname

    @property
    def filename(self) -> str:
        return revision_name(self.number)

    @property
    def is_free(self) -> bool:
        """§2: "A key counts as held when its highest revision is anything other than stopped with a proof
        reference"."""
        return self.state is State.STOPPED and self.proof is not None

    def evolve(self, **changes: object) -> Revision:
        """This revision with `changes` (field names; TypeError for anything else), checked as a new one is
        (`__post_init__`). What `dataclasses.replace` does, without reading every field through getattr
        and passing it to `__init__` again: a publication builds one per key and step."""
        unknown = changes.keys() - _REVISION_FIELDS
        if unknown:
            raise TypeError(f"Revision has no field {sorted(unknown)[0]!r}")
        new = object.__new__(Revision)
        values = new.__dict__
        values.update(self.__dict__)
        values.update(changes)
        new.__post_init__()
        return new


_REVISION_FIELDS = frozenset(f.name for f in fields(Revision))

REVISION_NAME_RE = re.compile(r"^r([0-9]{10})\.json$")


def revision_name(number: int) -> str:
    """`r` and the number in 10 digits, `.json`: r0000000001.json is the first revision of a key."""
    if not 1 <= number <= 9_999_999_999:
        raise ValueError(f"revision number {number} out of range")
    return f"r{number:010d}.json"


def parse_revision_name(name: str) -> int | None:
    m = REVISION_NAME_RE.fullmatch(name)
    if m is None:
        return None
    n = int(m.group(1))
    return n if n >= 1 else None


class Outcome(StrEnum):
    """What restart classification found for one claim on a pair (§2 "Owner check", "Restart and
    half-done pairs"). The package README lists each with the revisions it publishes."""

    FREE = "free"
    FOREIGN_HOST = "foreign-host"
    UNREADABLE = "unreadable"
    OWNER_ALIVE = "owner-alive"
    STOPPED_BOOT_PROOF = "stopped-boot-proof"
    BOOT_PROOF_UNAVAILABLE = "boot-proof-unavailable"
    STOPPED_NO_UNIT = "stopped-no-unit"
    UNCERTAIN_SPAWN_MARKER = "uncertain-spawn-marker"
    UNCERTAIN_UNIT = "uncertain-unit"
    UNCERTAIN_HELD = "uncertain-held"
    STOP_IN_PROGRESS = "stop-in-progress"
    RELEASE_COMPLETED = "release-completed"
    ELIGIBILITY_PENDING = "eligibility-pending"
