"""What a session drift check takes and returns, for every engine (the seam's values; Pi's comparison is
`engines/pi/_drift`), and a prompt's look at the file against the last verified point (`stat_verdict`).

The values: the check's configuration (`DriftConfig`), one read of the session file (`SessionBytes`, its
`FileIdentity`), the engine's own entry list (`EngineList`), what a clean check proved (`Checkpoint`, the
incremental check's starting point) and the verdict (`Verdict`).

Before a prompt runs (`stat_verdict`, issue 27: a second writer seen before the next prompt, beyond the
brief's "at the next idle check"). The shell looks at the file (its (dev, ino) and size, one stat) just
before it feeds a prompt; the last clean check's verified point is the reference (the checkpoint's
identity, or no file). While the engine is idle it writes nothing (Pi appends only during a run, FACTS (c)
`_persist`, and every run ends with a check), so anything else than the verified point is another writer's:

E. the same (dev, ino) and size (or no file, as verified): the prompt runs;
F. no file where one was verified: `file-removed`; another (dev, ino): `file-replaced`; fewer bytes:
   `file-shrank`: drift, decided here;
G. more bytes, or a file where none was verified, or no look at all: `stat_verdict` decides nothing and the
   core runs the check (incremental from the checkpoint, the full one without) before the prompt runs.

Not caught here: a rewrite in place that keeps the inode and the size (the next check's `prefix-changed`
catches it: a stat compares no content).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

__all__ = ["Checkpoint", "DriftConfig", "EngineList", "FileIdentity", "SessionBytes", "Verdict", "session_bytes",
           "stat_verdict"]


@dataclass(frozen=True)
class DriftConfig:
    """What the drift check needs (`CoreConfig.drift`; None turns the check off): the session header id
    recorded for the claim (the claim's session key, brief §2 D1). `incremental` False runs the full check
    at every turn end (for comparison: the bench's "check off" and "full" rows). `baseline` (None on Pi) is
    a verified point the core starts from, as if a clean check had left it: an engine that cannot list the
    entries it held before this execution (Claude: only its stream names what it writes) gives the file as
    the claim read it, and its first check goes on from there (`engines/claude/_drift` rule 1)."""

    session_id: str
    incremental: bool = True
    baseline: Checkpoint | None = None


@dataclass(frozen=True)
class FileIdentity:
    """The session file as one read saw it: device, inode and the number of bytes read."""

    dev: int
    ino: int
    size: int


@dataclass(frozen=True)
class SessionBytes:
    """One read of the session file: the bytes from `offset` on (all of them when `offset` is 0) and the
    identity of the descriptor read (`identity.size`: every byte read). `prefix_sha256` is the SHA-256 of
    the bytes before `offset` as read now (None: the file is shorter than `offset`), `sha256` that of every
    byte read (None: not computed; the full check then hashes `data`)."""

    data: bytes
    identity: FileIdentity
    offset: int = 0
    prefix_sha256: str | None = None
    sha256: str | None = None


def session_bytes(data: bytes, identity: FileIdentity, offset: int = 0) -> SessionBytes:
    """What a read from `offset` returns for a file holding `data` (the pure form of the runtime's reader,
    for tests and tools)."""
    whole = hashlib.sha256(data).hexdigest()
    if len(data) < offset:
        return SessionBytes(b"", identity, offset, None, whole)
    return SessionBytes(data[offset:], identity, offset, hashlib.sha256(data[:offset]).hexdigest(), whole)


@dataclass(frozen=True)
class Checkpoint:
    """What a clean check proved (the incremental check's starting point): the file's identity, with
    `identity.size` bytes verified (ending at an LF, or none), their SHA-256, how many entries they hold
    (`entries`), how many lines (`lines`, the header included) and the id of the last entry (None: none)."""

    identity: FileIdentity
    sha256: str
    entries: int
    lines: int
    last_id: str | None


@dataclass(frozen=True)
class EngineList:
    """The engine's `get_entries` answer: its entries in append order and its leaf id (None: no leaf)."""

    entries: tuple[Any, ...]
    leaf_id: str | None


@dataclass(frozen=True)
class Verdict:
    """The check's answer. `drift` False: the file is the engine's; `seen` is the identity to pass as
    `previous` to the next check (None: no file). `drift` True: `reason` is a key of DRIFT_REASONS,
    `detail` says what was seen and `line` is the 1-based line it was seen on (None: not a line)."""

    drift: bool
    reason: str | None
    detail: str
    line: int | None
    seen: FileIdentity | None
    disk_entries: int
    engine_entries: int
    checkpoint: Checkpoint | None = None  # a clean check's starting point for the next one
    incremental: bool = False  # decided by `check_appended`

    def to_evidence(self) -> dict[str, Any]:
        """The verdict as an evidence line's fields (JSON values only)."""
        return {"drift": self.drift, "reason": self.reason, "detail": self.detail, "line": self.line,
                "diskEntries": self.disk_entries, "engineEntries": self.engine_entries,
                "file": None if self.seen is None else {"dev": self.seen.dev, "ino": self.seen.ino,
                                                        "size": self.seen.size}}


def stat_verdict(stat: FileIdentity | None, *, verified: FileIdentity | None, checkpoint: Checkpoint | None) \
        -> Verdict | bool:
    """The prompt's look at the file against the last verified point (module rules E-G): True when it is
    the verified point (the prompt runs), a drift `Verdict` (`file-removed`, `file-replaced`, `file-shrank`)
    when it cannot be, False when only a check can decide (the file grew or appeared). `stat` is the
    shell's look (None: no file), `verified` what the last clean check saw (None: no file), `checkpoint`
    its starting point for the incremental check (the entry counts of a verdict). Never raises."""
    entries = checkpoint.entries if checkpoint is not None else 0

    def drift(reason: str, detail: str) -> Verdict:
        return Verdict(True, reason, detail, None, stat, entries, entries)

    if stat is None:
        if verified is None:
            return True
        return drift("file-removed", f"inode {verified.ino} ({verified.size} bytes) was there at the last check")
    if verified is None:
        return False  # a file appeared: only the engine's first reply creates one (W19); the check decides
    if (stat.dev, stat.ino) != (verified.dev, verified.ino):
        return drift("file-replaced", f"inode {stat.ino} on device {stat.dev}, was {verified.ino} on {verified.dev}")
    if stat.size < verified.size:
        return drift("file-shrank", f"{stat.size} bytes, was {verified.size}")
    return stat.size == verified.size
