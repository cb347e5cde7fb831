"""The identities every Mosaic layer shares: a host and its boot, a process, and the one digest form.

Why here: the writer claim records who owns it and which engine it launched, and cgroup-cohort records
the cohort it launched and proves who died. A restarted controller compares the two byte for byte (brief
§2 "Owner check", §6 "Identity and epoch"), so there must be one reading of `/etc/machine-id`, one of the
boot ID, one parser of `/proc/<pid>/stat` and one digest form, not one per package. safe-open is the
bottom layer every package may declare (DESIGN.md, "Packages and layers"), so the shared values live in
it, beside the `Refusal` base. Nothing here opens anything below a root; it is pure parsing plus three
tiny readers of kernel files.

Forms, fixed:

- machine ID and boot ID: 32 lowercase hex digits (systemd's `sd_id128` form; the kernel's boot_id file
  has dashes, which are removed);
- a process: (pid, start time), the start time in clock ticks after boot (`/proc/<pid>/stat` field 22).
  A reused pid is another process;
- a digest: `sha256:` and 64 lowercase hex digits, over `canonical_json` (sorted keys, no spaces, UTF-8).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# What mosaic.safe_open.identity offers (it star-imports this list); the paths read and PF_EXITING stay here.
__all__ = [
    "DIGEST_RE",
    "HostIdentity",
    "ProcStat",
    "ProcessRef",
    "boot_id",
    "canonical_json",
    "current_host",
    "machine_id",
    "parse_stat",
    "process_ref",
    "read_stat",
    "sha256_digest",
]

MACHINE_ID_PATH = "/etc/machine-id"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
PF_EXITING = 0x4  # include/linux/sched.h: the task is in do_exit()

_ID128 = re.compile(r"^[0-9a-f]{32}$")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}\Z")  # \Z: a trailing newline is not a digest


def canonical_json(value: object) -> bytes:
    """The canonical bytes of a JSON value: sorted keys, no spaces, non-ASCII kept, UTF-8.

    Raises ValueError for NaN or infinity (not JSON) and TypeError for a value JSON cannot hold.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def sha256_digest(data: bytes) -> str:
    """`sha256:` and the lowercase hex SHA-256 of `data`: the one digest form of every Mosaic record."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _id128(value: object, what: str) -> str:
    if not isinstance(value, str) or not _ID128.fullmatch(value):
        raise ValueError(f"{what} must be 32 lowercase hex digits, not {value!r}")
    return value


@dataclass(frozen=True)
class HostIdentity:
    """A host (/etc/machine-id) and one boot of it (the kernel's boot ID), both 32 lowercase hex."""

    machine_id: str
    boot_id: str

    def __post_init__(self) -> None:
        _id128(self.machine_id, "machine id")
        _id128(self.boot_id, "boot id")

    def to_dict(self) -> dict[str, str]:
        return {"machineId": self.machine_id, "bootId": self.boot_id}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostIdentity:
        """Raises KeyError or ValueError for a mapping that is not a host identity."""
        return cls(d["machineId"], d["bootId"])


@dataclass(frozen=True, order=True)
class ProcessRef:
    """A process named by pid AND start time (clock ticks after boot): a reused pid is another process."""

    pid: int
    start_time: int

    def __post_init__(self) -> None:
        for what, value, low in (("pid", self.pid, 1), ("start time", self.start_time, 0)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{what} must be an integer >= {low}, not {value!r}")

    def to_dict(self) -> dict[str, int]:
        return {"pid": self.pid, "startTime": self.start_time}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProcessRef:
        """Raises KeyError or ValueError for a mapping that is not a process reference."""
        return cls(d["pid"], d["startTime"])


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat that Mosaic uses."""

    pid: int
    comm: str
    state: str  # field 3: R, S, D, T, t, Z, X, ...
    ppid: int
    pgid: int
    sid: int
    flags: int  # PF_* (field 9)
    start_time: int  # clock ticks after boot (field 22)

    @property
    def exiting(self) -> bool:
        """PF_EXITING: the task is in do_exit (irreversible), though not yet a zombie."""
        return bool(self.flags & PF_EXITING)

    @property
    def dead(self) -> bool:
        """A zombie or a dead task: it can never act again."""
        return self.state in ("Z", "X", "x")

    @property
    def ref(self) -> ProcessRef:
        return ProcessRef(self.pid, self.start_time)


def parse_stat(text: str) -> ProcStat:
    """Parse one /proc/<pid>/stat line.

    The command name is enclosed in the first '(' and the LAST ')' because it may itself hold spaces and
    parentheses. Raises ValueError on anything that is not a complete stat line.
    """
    open_ = text.find("(")
    close = text.rfind(")")
    if open_ < 1 or close < open_:
        raise ValueError("not a /proc/<pid>/stat line")
    rest = text[close + 1 :].split()
    # rest[0] is field 3 (state); field n is rest[n - 3].
    if len(rest) < 20:
        raise ValueError("truncated /proc/<pid>/stat line")
    try:
        return ProcStat(
            pid=int(text[:open_].strip()),
            comm=text[open_ + 1 : close],
            state=rest[0],
            ppid=int(rest[1]),
            pgid=int(rest[2]),
            sid=int(rest[3]),
            flags=int(rest[6]),
            start_time=int(rest[19]),
        )
    except ValueError:
        raise ValueError("a /proc/<pid>/stat field is not a number") from None


def read_stat(pid: int | str, *, proc: str = "/proc") -> ProcStat | None:
    """/proc/<pid>/stat parsed, or None when no such process exists (ENOENT, ESRCH, or released between
    the open and the read). `pid` may be "self".

    Other errors (EACCES on a hidepid /proc, ...) raise OSError: unknown is not absent.
    """
    try:
        with open(f"{proc}/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not text:
        return None
    return parse_stat(text)


def process_ref(pid: int | str, *, proc: str = "/proc") -> ProcessRef | None:
    """The (pid, start time) of `pid` ("self" allowed), or None when no such process exists."""
    st = read_stat(pid, proc=proc)
    return None if st is None else st.ref


def _first_line(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.readline().strip()


def machine_id(path: str = MACHINE_ID_PATH) -> str:
    """The host identity: /etc/machine-id, 32 lowercase hex. Raises OSError or ValueError if absent or bad
    (a claim written without it could never be told apart from a copy)."""
    return _id128(_first_line(path), path)


def boot_id(path: str = BOOT_ID_PATH) -> str:
    """The kernel's boot ID without dashes, 32 lowercase hex. Raises OSError or ValueError."""
    return _id128(_first_line(path).replace("-", "").lower(), path)


def current_host(*, machine_id_path: str = MACHINE_ID_PATH, boot_id_path: str = BOOT_ID_PATH) -> HostIdentity:
    """This machine's ID and the current boot ID. Raises OSError or ValueError when either cannot be read."""
    return HostIdentity(machine_id(machine_id_path), boot_id(boot_id_path))
