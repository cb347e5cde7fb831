"""Claude's idle transcript drift check, pure (issue 32 item 3; the core's rule 8 and issue 27 as on Pi): the
entries Claude Code 2.1.283 said on its stream that it wrote, against the transcript's bytes, read
incrementally from the last verified point.

What the binary offers (verified on the pinned binary, issue 32 i32f; `FACTS.md` §2 lists the entry types).
It has no command that lists its entries (Pi's `get_entries`). What it does show: every `assistant` and
`user` message on the stream carries the `uuid` of the transcript entry it wrote (the same uuid, in the
same order), and the controller's own prompt is written as a `user` entry with the uuid the link stamped on
it (its `command_lifecycle` `started` frame names it). At a turn's `result` every one of those entries is
on disk, the file ends at an LF, and nothing more is written while the engine is idle until it exits (4
turns, text and Bash with a permission answer, read at `result`, after a second `initialize` and 1 s later:
the same bytes). What the stream never names: `attachment` entries (they have uuids), and the meta lines
with none (`queue-operation`, `last-prompt`, `atis-latch`, `cost-state`, `mode`); after a `--resume` of a
session whose last turn was interrupted, one `assistant` entry with model `<synthetic>` ("No response
requested.") that closes that turn before the first prompt (claude-rpc `check_resumed`).

So the engine's list (`EngineList.entries`, each `{"uuid", "type", "sessionId"}`) is what `ClaudeWire`
collected from the stream (rule 7 there), and its answer to the check's question is a second `initialize`
answered `session_state: "idle"` (a barrier: every record the engine wrote before it has been read). The
told entries of the transcript are its `user` and `assistant` lines with a string uuid that are not
sidechains (subagent entries go to their own files).

The rules, in the order they apply (the first that fails is the verdict):

1. The baseline. A transcript that existed at the claim is the verified point the check starts from
   (`DriftConfig.baseline`: its identity, the SHA-256 of its bytes, its lines, and the leaf `--resume`
   continues as `last_id`, with no told entry yet: `entries` 0); K8 read it and the leaf. A new session
   (launched `--session-id`) has none: the first check is the full one (`check_transcript`).
2. No file: none yet is clean (the binary writes the transcript at the first turn); one seen before:
   `file-removed`. Another (dev, ino): `file-replaced`; fewer bytes: `file-shrank`; the verified bytes
   hash otherwise: `prefix-changed` (rewritten in place).
3. The new bytes end at an LF (`partial-line`: the engine is idle and wrote every entry before `result`,
   so an unterminated tail is a torn write, its own or another's); each new line is a JSON object with a
   string `type` (`invalid-line`), and names no other session than the engine's (`session-id`).
4. The told entries appended are exactly the engine's new list, in order: a uuid the stream never named
   (`unknown-id`: a second writer's user or assistant entry), one twice (`duplicate-id`), another order
   (`not-prefix`), fewer (`disk-behind`: the engine said it wrote an entry the file does not hold).
5. K8's parent half: the first told entry of the execution (its first prompt's `user` entry) hangs on the
   recorded leaf (the baseline's `last_id`), directly or through `<synthetic>` assistant entries appended
   just before it that hang on the leaf (the only told entries the stream does not name, accepted only
   there); a new session's first prompt has no parent. Else `not-resumed`: the engine did not continue the
   claimed session at its leaf (preflight's question, answered at the first turn: the binary gives no
   session evidence before one; `engines/claude/_launch` rule 5).

Not drift: attachments and meta lines (rule 3 holds them to the file's shape and session only), and what
the engine wrote at its own exit. Not caught (written in the README): a second writer's attachment or meta
line (a `last-prompt` that moves the leaf: the next launch's K8 compares the leaf with the claim's and
refuses), and an in-place rewrite of a line appended since the last check before it is verified; a
foreign write made mid-turn is seen at the next idle check, as on Pi. Before a prompt runs the shell's look
at the file against the verified point (`stat_verdict`, issue 27) decides as on Pi: grown bytes run this
check first.

Cost: `check_appended` decodes only the bytes after the verified point (one `json.loads` per new line) and
compares them with the engine's new list: linear in the appended bytes, whatever the transcript's size; the
reader hashes the prefix (one SHA-256 pass, the floor of re-proving it, as on Pi).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from mosaic.claude_rpc.resume import SYNTHETIC_MODEL

from .._verdict import Checkpoint, EngineList, FileIdentity, SessionBytes, Verdict

__all__ = ["CLAUDE_DRIFT_REASONS", "CLAUDE_PERSISTENCE_DRIFT", "baseline", "check_appended", "check_transcript"]

CLAUDE_DRIFT_REASONS: Mapping[str, str] = {
    "file-removed": "the transcript was there at the last check and is gone",
    "file-replaced": "the transcript is another inode than at the last check",
    "file-shrank": "the transcript is smaller than at the last check",
    "prefix-changed": "bytes a clean check (or the claim's read) verified were rewritten in place",
    "partial-line": "the transcript ends with bytes after its last LF while the engine is idle",
    "invalid-line": "a new line is not a JSON object with a string type",
    "session-id": "a new line names another session than the engine's",
    "unknown-id": "a user or assistant entry the engine's stream never named (a second writer's)",
    "duplicate-id": "a user or assistant entry appears twice",
    "not-prefix": "the told entries on disk are not the engine's, in its order",
    "disk-behind": "the engine said it wrote an entry the transcript does not hold",
    "not-resumed": "K8: the execution's first prompt does not hang on the recorded leaf",
}
"""Every reason Claude's check gives, with what it means (the README's table)."""

CLAUDE_PERSISTENCE_DRIFT = frozenset({"partial-line", "invalid-line", "not-prefix", "disk-behind"})
"""The reasons that say the transcript does not hold what the engine said it wrote, whole and in order (the
core's rule 4: the turn the check holds reads `unpersisted`), as Pi's `PERSISTENCE_DRIFT`."""

_TOLD = ("user", "assistant")


def baseline(size: int, sha256: str, lines: int, *, dev: int, ino: int, leaf: str | None) -> Checkpoint:
    """Rule 1: the transcript as read at the claim, the point the first check goes on from."""
    return Checkpoint(FileIdentity(dev, ino, size), sha256, 0, lines, leaf)


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _told(entry: Mapping[str, Any]) -> bool:
    return entry.get("type") in _TOLD and isinstance(entry.get("uuid"), str) and entry.get("isSidechain") is not True


def _synthetic(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    return entry.get("type") == "assistant" and isinstance(message, Mapping) and message.get("model") == SYNTHETIC_MODEL


class _Drift(Exception):
    def __init__(self, reason: str, detail: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason, self.detail, self.line = reason, detail, line


def _compare(data: bytes, first_line: int, engine: Sequence[Any], *, session: str | None, first: bool,
             leaf: str | None) -> tuple[int, str | None]:
    """Rules 3-5 over the new bytes `data` (their first line is line `first_line`): the number of lines and
    the session the told entries name. `first`: no told entry of the execution verified yet (rule 5, the
    leaf `leaf`). Raises `_Drift`."""
    lines = data.split(b"\n")
    tail = lines.pop()
    if tail:
        raise _Drift("partial-line", f"{len(tail)} bytes after the last LF", first_line + len(lines))
    want = [e.get("uuid") if isinstance(e, Mapping) else None for e in engine]
    for e in engine:
        if isinstance(e, Mapping) and isinstance(e.get("sessionId"), str):
            session = session or e["sessionId"]
    told: list[tuple[int, Mapping[str, Any]]] = []
    closing: dict[str, Mapping[str, Any]] = {}
    for number, raw in enumerate(lines, start=first_line):
        obj = _object(raw)
        if obj is None or not isinstance(obj.get("type"), str):
            raise _Drift("invalid-line", "not a JSON object with a string type", number)
        sid = obj.get("sessionId")
        if sid is not None and session is not None and sid != session:
            raise _Drift("session-id", f"the line names session {sid!r}, the engine's is {session!r}", number)
        if not _told(obj):
            continue
        if first and not told and _synthetic(obj) and obj["uuid"] not in want:
            closing[obj["uuid"]] = obj  # rule 5: the resume's closing entry, before the first prompt
            continue
        told.append((number, obj))
    seen: set[str] = set()
    for index, (number, entry) in enumerate(told):
        uuid = entry["uuid"]
        if uuid in seen:
            raise _Drift("duplicate-id", f"entry {uuid} appears twice", number)
        seen.add(uuid)
        if uuid not in want:
            # Mutant controller--claude-drift-misses-a-foreign-append skips it: a foreign entry passes.
            raise _Drift("unknown-id", f"{entry['type']} entry {uuid} was never named on the engine's stream",
                         number)
        if index >= len(want) or want[index] != uuid:
            raise _Drift("not-prefix", f"told entry {index + 1} since the last check is {uuid}, the engine's is "
                                       f"{want[index] if index < len(want) else None}", number)
    if len(told) < len(want):
        raise _Drift("disk-behind", f"{len(told)} of the engine's {len(want)} new entries are on disk "
                                    f"(missing {want[len(told)]})")
    if first and told:
        _resumed(told[0], closing, leaf)
    return len(lines), session


def _resumed(first: tuple[int, Mapping[str, Any]], closing: Mapping[str, Mapping[str, Any]], leaf: str | None) -> None:
    """Rule 5: the first told entry hangs on `leaf`, directly or through the closing entries."""
    number, entry = first
    parent = entry.get("parentUuid")
    walked: set[str] = set()
    while isinstance(parent, str) and parent != leaf and parent in closing and parent not in walked:
        walked.add(parent)
        parent = closing[parent].get("parentUuid")
    if parent != leaf:
        raise _Drift("not-resumed", f"the first prompt's entry {entry.get('uuid')} hangs on {parent!r}, not on the "
                                    f"recorded leaf {leaf!r}", number)


def check_transcript(engine: EngineList, read: SessionBytes | None, *, session_id: str,
                     previous: FileIdentity | None) -> Verdict:
    """The full check, for a session that had no transcript at the claim (rules 2-5 over the whole file, the
    leaf None). `engine` is every entry the stream named. Never raises."""
    n_engine = len(engine.entries)

    def drift(reason: str, detail: str, line: int | None = None) -> Verdict:
        return Verdict(True, reason, detail, line, None if read is None else read.identity, 0, n_engine)

    if read is None:
        if previous is not None:
            return drift("file-removed", f"inode {previous.ino} ({previous.size} bytes) was there at the last check")
        if n_engine:
            return drift("disk-behind", f"no transcript, yet the engine named {n_engine} entries it wrote")
        return Verdict(False, None, "no transcript yet: the binary writes it at the first turn", None, None, 0, 0)
    now = read.identity
    if previous is not None:
        if (now.dev, now.ino) != (previous.dev, previous.ino):
            return drift("file-replaced", f"inode {now.ino} on device {now.dev}, was {previous.ino} on {previous.dev}")
        if now.size < previous.size:
            return drift("file-shrank", f"{now.size} bytes, was {previous.size}")
    try:
        lines, _session = _compare(read.data, 1, engine.entries, session=session_id, first=True, leaf=None)
    except _Drift as found:
        return drift(found.reason, found.detail, found.line)
    digest = read.sha256 if read.sha256 is not None and read.offset == 0 else hashlib.sha256(read.data).hexdigest()
    last = _last(engine.entries, None)
    return Verdict(False, None, f"{n_engine} told entries, the engine's own", None, now, n_engine, n_engine,
                   Checkpoint(now, digest, n_engine, lines, last))


def _last(entries: Sequence[Any], default: str | None) -> str | None:
    if entries and isinstance(entries[-1], Mapping) and isinstance(entries[-1].get("uuid"), str):
        return str(entries[-1]["uuid"])
    return default


def check_appended(engine: EngineList, read: SessionBytes | None, *, checkpoint: Checkpoint) -> Verdict:
    """The incremental check from `checkpoint` (a clean check's, or the claim's baseline): `engine` is what the
    stream named since `checkpoint.last_id`, `read` the transcript read from `checkpoint.identity.size`.
    Always decides (never None: the full check cannot know what preceded the baseline). Never raises; linear
    in the bytes after the checkpoint."""
    n_engine = checkpoint.entries + len(engine.entries)

    def drift(reason: str, detail: str, line: int | None = None) -> Verdict:
        return Verdict(True, reason, detail, line, None if read is None else read.identity, checkpoint.entries,
                       n_engine, None, True)

    before = checkpoint.identity
    if read is None:
        return drift("file-removed", f"inode {before.ino} ({before.size} bytes) was there at the last check")
    now = read.identity
    if (now.dev, now.ino) != (before.dev, before.ino):
        return drift("file-replaced", f"inode {now.ino} on device {now.dev}, was {before.ino} on {before.dev}")
    if now.size < before.size or read.offset != before.size or read.prefix_sha256 is None:
        return drift("file-shrank", f"{now.size} bytes, was {before.size}")
    if read.prefix_sha256 != checkpoint.sha256:
        return drift("prefix-changed", f"the first {before.size} bytes hash to {read.prefix_sha256[:16]}..., "
                                       f"were {checkpoint.sha256[:16]}...")
    first = checkpoint.entries == 0
    try:
        lines, _session = _compare(read.data, checkpoint.lines + 1, engine.entries, session=None, first=first,
                                   leaf=checkpoint.last_id)
    except _Drift as found:
        return drift(found.reason, found.detail, found.line)
    if read.sha256 is None:
        return drift("prefix-changed", "the read gave no digest of the whole transcript: nothing to go on from")
    nxt = Checkpoint(now, read.sha256, n_engine, checkpoint.lines + lines, _last(engine.entries, checkpoint.last_id))
    return Verdict(False, None, f"{n_engine} told entries, the engine's own ({len(engine.entries)} new)", None, now,
                   n_engine, n_engine, nxt, True)
