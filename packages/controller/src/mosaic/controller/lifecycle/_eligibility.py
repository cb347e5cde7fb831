"""The single-use eligibility record recover publishes and launch consumes (brief §6 "Recover"; K17, K18).

"Recover publishes a new reserved claim, under a new claim ID, on both keys. The eligibility record names
that claim, the stop, the pins, the leaf and the controller incarnation token, and it is single-use. [...]
Launching is a separate library call made by a launcher. It revalidates the record against the claim and
the current leaf, consumes it once, and spawns."

A record lives at `<claim root>/eligibility/<id>.json`, written once with `O_CREAT | O_EXCL | O_NOFOLLOW`
and fsynced (file and directory) before recover answers. Its later states are names in that directory,
each reached by one `rename(2)` and made durable by a directory fsync:

    <id>.json       unused: recover wrote it; a launcher may use it
    <id>.launching  held: one launcher took it before its spawn (`hold_record`; of two launchers only one
                    rename finds the file: K17, mutant 24 is a hold that does not)
    <id>.used       consumed: the launch under it passed its load check (`settle_record(passed=True)`)
    <id>.spent      the launch under it failed its load check, or the reservation was released without a
                    launch (`settle_record(passed=False)`): never usable again, never read as launched

So single use is decided before the spawn (the hold), and "consumed" means only "a launch passed its load
check". A held record never goes back to unused: an engine was spawned under its reservation (or may have
been, after a crash), so the reservation it names is gone, and what Pi loaded may have moved the leaf it
names (the startup append, FACTS (d)); the way on from a spent record is a force stop and a new recover.
The claim itself carries the same id (writer-claim's `Eligibility`), so the reservation can be taken over
exactly once, by the launcher, while the recovering controller may still be alive.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mosaic.controller_client import ControlRefusal
from mosaic.safe_open import canonical_json, sha256_digest

__all__ = [
    "RECORD_DIR",
    "EligibilityRecord",
    "hold_record",
    "mint_eligibility_id",
    "read_record",
    "record_state",
    "settle_record",
    "write_record",
]

RECORD_DIR = "eligibility"
RECORD_TYPE = "eligibility"
RECORD_VERSION = 1
MAX_RECORD_BYTES = 64 * 1024
ELIGIBILITY_ID_RE = re.compile(r"elig-[0-9a-f]{32}")


def mint_eligibility_id() -> str:
    return "elig-" + secrets.token_hex(16)


@dataclass(frozen=True)
class EligibilityRecord:
    """What recover proved and reserved: the new claim, the stop it rests on (its proof's digest), the pins,
    the session (header ID, file, conversation, branch, leaf), the new generation, and the recovering
    controller's incarnation token."""

    id: str
    claim_id: str
    previous_claim_id: str
    stop: str | None
    proof_digest: str
    pins: Mapping[str, str]
    session_id: str
    session_file: str
    conversation: str
    branch: str
    leaf: str | None
    generation: int
    incarnation: str
    issued_at: float

    def to_dict(self) -> dict[str, Any]:
        body = asdict(self)
        body["pins"] = dict(self.pins)
        return {"type": RECORD_TYPE, "version": RECORD_VERSION, **body}

    @property
    def digest(self) -> str:
        return sha256_digest(canonical_json(self.to_dict()))

    @classmethod
    def from_dict(cls, value: Any) -> EligibilityRecord:
        if not isinstance(value, Mapping) or value.get("type") != RECORD_TYPE or value.get("version") != RECORD_VERSION:
            raise ValueError("not an eligibility record of this version")
        fields: dict[str, Any] = {k: value.get(k) for k in cls.__dataclass_fields__}
        if set(value) - set(fields) - {"type", "version"}:
            raise ValueError(f"unknown fields {sorted(set(value) - set(fields) - {'type', 'version'})}")
        for name in ("id", "claim_id", "previous_claim_id", "proof_digest", "session_id", "session_file",
                     "conversation", "branch", "incarnation"):
            if not isinstance(fields[name], str) or not fields[name]:
                raise ValueError(f"{name} must be a non-empty string")
        if not ELIGIBILITY_ID_RE.fullmatch(fields["id"]):
            raise ValueError("not an eligibility id")
        if fields["stop"] is not None and not isinstance(fields["stop"], str):
            raise ValueError("stop must be a string or null")
        if fields["leaf"] is not None and not isinstance(fields["leaf"], str):
            raise ValueError("leaf must be a string or null")
        pins = fields["pins"]
        if not isinstance(pins, Mapping) or set(pins) != {"engine_version", "binary_sha256", "argv_digest"} \
                or not all(isinstance(v, str) for v in pins.values()):
            raise ValueError("pins must name engine_version, binary_sha256 and argv_digest")
        generation = fields["generation"]
        if not isinstance(generation, int) or isinstance(generation, bool) or generation < 1:
            raise ValueError("generation must be an int >= 1")
        issued = fields["issued_at"]
        if not isinstance(issued, (int, float)) or isinstance(issued, bool):
            raise ValueError("issued_at must be a number")
        return cls(**fields)


def _records_dir(claim_root: str, *, create: bool) -> int:
    root = os.open(claim_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if create:
            try:
                os.mkdir(RECORD_DIR, 0o700, dir_fd=root)
                os.fsync(root)
            except FileExistsError:
                pass
        return os.open(RECORD_DIR, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=root)
    finally:
        os.close(root)


def write_record(claim_root: str, record: EligibilityRecord) -> None:
    """Publish the record once (`O_EXCL`: an id is never written twice), durable before this returns."""
    data = json.dumps(record.to_dict(), sort_keys=True).encode() + b"\n"
    d = _records_dir(claim_root, create=True)
    try:
        fd = os.open(f"{record.id}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=d)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.fsync(d)
    finally:
        os.close(d)


def _check_id(record_id: str) -> None:
    if not isinstance(record_id, str) or not ELIGIBILITY_ID_RE.fullmatch(record_id):
        raise ControlRefusal("eligibility", f"{record_id!r} is not an eligibility record id")


def _read(d: int, name: str) -> EligibilityRecord:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=d)
    try:
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_RECORD_BYTES:
        raise ControlRefusal("eligibility", f"{name} is larger than a record")
    try:
        return EligibilityRecord.from_dict(json.loads(data))
    except ValueError as exc:
        raise ControlRefusal("eligibility", f"{name} is not a valid eligibility record: {exc}") from None


# A record's states and the suffix of its name in each (module docstring).
_STATES = (("unused", ".json"), ("launching", ".launching"), ("used", ".used"), ("spent", ".spent"))
_GONE = {
    "launching": "is held by a launch (under way, or one whose controller died before its load check ended)",
    "used": "was already used by a launch that passed its load check",
    "spent": "was spent by a launch that failed its load check, or released without a launch",
}


def _state(d: int, record_id: str) -> str:
    for state, suffix in _STATES:
        if _exists(d, record_id + suffix):
            return state
    return "unknown"


def record_state(claim_root: str, record_id: str) -> str:
    """`unused`, `launching`, `used`, `spent` or `unknown` (module docstring)."""
    _check_id(record_id)
    try:
        d = _records_dir(claim_root, create=False)
    except FileNotFoundError:
        return "unknown"
    try:
        return _state(d, record_id)
    finally:
        os.close(d)


def _not_usable(d: int, record_id: str) -> ControlRefusal:
    state = _state(d, record_id)
    return ControlRefusal("eligibility", f"eligibility record {record_id} {_GONE[state]}" if state in _GONE
                          else f"no eligibility record {record_id}")


def read_record(claim_root: str, record_id: str) -> EligibilityRecord:
    """The unused record, or the refusal `eligibility` (unknown id, already used, unreadable)."""
    _check_id(record_id)
    try:
        d = _records_dir(claim_root, create=False)
    except FileNotFoundError:
        raise ControlRefusal("eligibility", f"no eligibility record {record_id}") from None
    try:
        try:
            record = _read(d, f"{record_id}.json")
        except FileNotFoundError:
            raise _not_usable(d, record_id) from None
        except OSError as exc:
            raise ControlRefusal("eligibility", f"eligibility record {record_id} is unreadable: {exc}") from None
    finally:
        os.close(d)
    if record.id != record_id:
        raise ControlRefusal("eligibility", f"the record in {record_id}.json names {record.id}")
    return record


def _exists(d: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=d, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def hold_record(claim_root: str, record_id: str) -> None:
    """Take the record for one launch, before its spawn: `rename(<id>.json, <id>.launching)`. Of two callers
    exactly one finds the file; the other is refused `eligibility` (K17). Durable (directory fsync) before
    this returns. The record is consumed only later, by `settle_record`, once the launch passed its load
    check."""
    _check_id(record_id)
    d = _records_dir(claim_root, create=False)
    try:
        try:
            os.rename(f"{record_id}.json", f"{record_id}.launching", src_dir_fd=d, dst_dir_fd=d)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise _not_usable(d, record_id) from None
            raise
        os.fsync(d)
    finally:
        os.close(d)


def settle_record(claim_root: str, record_id: str, *, passed: bool) -> None:
    """End a held record: `used` when its launch passed its load check (the engine loaded the recorded
    leaf, the takeover drift check found the file the engine's, admission opened), `spent` otherwise.
    Raises `eligibility` when the record is not held (a settle without a hold is a bug or a second
    settle). Durable (directory fsync) before this returns."""
    _check_id(record_id)
    d = _records_dir(claim_root, create=False)
    try:
        try:
            os.rename(f"{record_id}.launching", f"{record_id}.{'used' if passed else 'spent'}",
                      src_dir_fd=d, dst_dir_fd=d)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                raise ControlRefusal("eligibility", f"eligibility record {record_id} is not held: "
                                                    f"{_state(d, record_id)}") from None
            raise
        os.fsync(d)
    finally:
        os.close(d)
