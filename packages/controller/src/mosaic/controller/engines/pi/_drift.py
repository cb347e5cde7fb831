"""Pi's session drift check, pure: the engine's own entry list against the session file's bytes (brief §2
"Session drift, not foreign-writer attribution"). No I/O: the core asks the engine (`get_entries`) and the
shell (`Effect("read-session")`), then calls `check_drift` with what came back.

Why a comparison and not attribution: pinned Pi emits no entry id on the stream for its own appends
(FACTS (a) a7, conformance item 18), so nothing tells the engine's writes from another writer's. Pi's
SessionManager reads the file only at load (FACTS (c): construction or setSessionFile; no timer or watcher
re-reads it), so an entry another writer appends is on disk and never in the engine's list. The engine's
list (`get_entries`: every entry but the header, in append order, duplicates kept, entries not yet on
disk included; FACTS (b) "get_entries", (e) rpc.md 717-745) is therefore the reference.

The rules `check_drift` keeps, in the order it applies them (the first that fails is the verdict):

1. No file now: no drift if none was seen at the last check (before the first assistant message Pi
   holds every entry in memory and creates the file only then, FACTS (c) `_persist` 739-768: W19); drift
   `file-removed` if one was.
2. The file's (dev, ino) differs from the last check's: `file-replaced`. Its size is smaller: `file-shrank`.
3. Lines are split on LF bytes only (U+2028, U+2029 and U+0085 inside a line are ordinary: FACTS (b)
   "Framing", loader quirk 9). Bytes after the last LF: `partial-line`. Pi writes every entry as one
   `JSON.stringify(entry) + "\\n"`, synchronously (appendFileSync, session-manager.js 745; the first flush
   754-763), before the event that follows it reaches stdout (FACTS (a) a6); the check runs only once
   the engine is idle and has answered get_entries, so no write of the engine's is in progress and an
   unterminated tail is not the engine's. It is not harmless either: Pi's own next load appends "\\n" to
   it and takes it as an entry (FACTS (c) "Writes at load" (i), loader quirk 3).
4. Line 1 is the header, a JSON object with type "session" and a string id (`no-header`, `bad-header`),
   and its id is the session identity recorded for the claim (`header-id`). get_entries omits the header
   (rpc.md 719), so it is checked here and never compared with the list.
5. Every later line is a valid entry: valid UTF-8, a JSON object, a string `id` and a string `type` that
   is not "session" (`invalid-line`; Pi skips malformed lines and takes any truthy JSON value as an entry
   (loader quirk 4), so such a line was not written by this engine's appends).
6. No id appears twice on disk (`duplicate-id`), and every id is in the engine's list (`unknown-id`: the
   foreign entry with a new id; mutant 25a ignores it).
7. The disk's ids are the engine's first ids, in order (`not-prefix`).
8. A file that exists holds every entry of the engine's list (`disk-behind`): once the file exists Pi
   appends each entry at once (`flushed`, session-manager.js 745; FACTS (c) `_persist`), so at an idle
   check only a file that did not exist may lag the list (rule 1). A tail cut off by whole lines before
   any check saw the file's size is caught here.

Not drift: the engine's own settings, model-change, thinking, label, session-info, compaction, custom and
branch-summary entries, and the startup append (FACTS (d)): they are in its list (W18; mutant 25b counts
them as drift). Not caught (brief §2 "Stated limits"): an in-place rewrite that keeps every id, the order,
the inode and does not shrink the file (the content is not compared: ids only); a foreign write made
mid-turn is caught at the next idle check, not when it happens.

Cost: one pass over the bytes (one `json.loads` per line), a set of ids and an index comparison: linear in
the file and the list.

The incremental check (`check_appended`, what the core runs at every turn end once a check has passed).
A clean check leaves a `Checkpoint`: the file's (dev, ino), the bytes it verified (they end at an LF),
their SHA-256, how many entries they hold and the id of the last one. The next check asks the engine only
for what follows that id (`get_entries since=<id>`: the entries strictly after the first entry with that
id, rpc-mode.js 505-516; a clean check saw no duplicate id on disk and Pi's generateId never makes one, so
the first is the only one) and reads the file from the start, hashing the verified bytes as it goes and
keeping only what follows them (`SessionBytes.offset`). Its rules:

A. (dev, ino) as at the checkpoint, else `file-replaced`; at least as many bytes, else `file-shrank`;
B. the verified bytes hash as they did (`prefix-changed`: rewritten in place since they were checked; the
   full check compares ids, not content, so this is stricter than it: brief §2 "Stated limits");
C. what follows ends at an LF (`partial-line`) and each of its lines is a valid entry (`invalid-line`);
D. its ids are the engine's answer, in order, all of it (then no id can repeat an earlier one, none is
   unknown, the disk is a prefix and not behind: rules 6-8). Where they are not, `check_appended` names no
   reason of its own: it returns None and the core runs the full check, which names it exactly.

So a turn end costs one read and one SHA-256 pass over the file (the floor of re-proving its bytes) and a
decode of the turn's own lines, whatever the file's size; the full check runs at the start (the takeover
check), where no checkpoint exists (no file yet), and after a check that could not decide incrementally.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .._verdict import Checkpoint, EngineList, FileIdentity, SessionBytes, Verdict

__all__ = ["DRIFT_REASONS", "PERSISTENCE_DRIFT", "check_appended", "check_drift", "engine_list"]

DRIFT_REASONS: Mapping[str, str] = {
    "file-removed": "the session file was there at the last check and is gone",
    "file-replaced": "the session file is another inode than at the last check",
    "file-shrank": "the session file is smaller than at the last check",
    "partial-line": "the file ends with bytes after its last LF while the engine is idle",
    "no-header": "the file has no line 1",
    "bad-header": "line 1 is not a Pi session header (a JSON object, type session, a string id)",
    "header-id": "the header's id is not the session identity recorded for the claim",
    "invalid-line": "a line is not a valid entry (UTF-8 JSON object with a string id and type, not a header)",
    "duplicate-id": "an entry id appears twice on disk",
    "unknown-id": "an entry id on disk is not in the engine's list",
    "not-prefix": "the disk's entries are not the engine's first entries, in order",
    "disk-behind": "the file exists but lacks entries the engine holds",
    "prefix-changed": "bytes a clean check verified were rewritten in place (their SHA-256 differs)",
}
"""Every drift reason `check_drift` can give, with what it means (the README's table)."""

PERSISTENCE_DRIFT = frozenset({"partial-line", "invalid-line", "not-prefix", "disk-behind"})
"""The reasons that say the file does not hold the engine's own entries whole and in order: what a write
that failed leaves (Pi's appendFileSync on a full disk, FACTS (c) `_persist`): a torn last line
(partial-line); a torn line with the engine's next entry appended to it, once there was room again
(invalid-line: pi-agent-core `agent.js` handleRunFailure appends a failure message after the write that
threw); an entry missing before the next (not-prefix: a write that failed whole, then one that did not);
entries missing at the end (disk-behind). At the check after a turn, that turn's persistence is then not
shown, so its finished receipt reads turnState `unpersisted`, never `completed` (the core's rule 8). The
other reasons say another writer or another file (unknown-id, duplicate-id, a replaced, shrunk or
rewritten file, the header): drift all the same, but nothing about this engine's writes."""


def engine_list(data: Any) -> EngineList:
    """The `data` of a successful get_entries response as an EngineList. Raises ValueError when it is not
    `{entries: [...], leafId?: string|null}` (rpc-types.d.ts; an absent leafId is Pi's undefined)."""
    if not isinstance(data, Mapping):
        raise ValueError("get_entries data is not an object")
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise ValueError("get_entries data has no entries list")
    leaf = data.get("leafId")
    if leaf is not None and not isinstance(leaf, str):
        raise ValueError("get_entries leafId is neither a string nor null")
    return EngineList(tuple(entries), leaf)


def _object(raw: bytes) -> dict[str, Any] | None:
    """One line as a JSON object, or None (not UTF-8, not JSON, not an object)."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, a number past the digit limit, nested too deep
        return None
    return value if isinstance(value, dict) else None


def check_drift(engine: EngineList, read: SessionBytes | None, *, session_id: str,
                previous: FileIdentity | None) -> Verdict:
    """Decide whether the session file moved under the engine (module rules 1-8).

    `engine` is the engine's get_entries answer, `read` the file read after it (None: no file),
    `session_id` the header id recorded for the claim, `previous` what the last check without drift saw
    (None at the first check or when there was no file). Never raises for any bytes or list: whatever
    they hold is a verdict. Linear in the file's bytes and the list's length.
    """
    # Every entry of the engine's list counts, whatever its type (W18; mutant 25b keeps messages only).
    engine_ids = [e.get("id") if isinstance(e, Mapping) else None for e in engine.entries]
    n_engine = len(engine_ids)

    def drift(reason: str, detail: str, line: int | None = None, disk: int = 0) -> Verdict:
        return Verdict(True, reason, detail, line, None if read is None else read.identity, disk, n_engine)

    if read is None:
        if previous is not None:
            return drift("file-removed", f"inode {previous.ino} ({previous.size} bytes) was there at the last check")
        return Verdict(False, None, "no file yet: the engine holds its entries in memory (W19)", None, None, 0, n_engine)
    now = read.identity
    if previous is not None:
        if (now.dev, now.ino) != (previous.dev, previous.ino):
            return drift("file-replaced", f"inode {now.ino} on device {now.dev}, was {previous.ino} on {previous.dev}")
        if now.size < previous.size:
            return drift("file-shrank", f"{now.size} bytes, was {previous.size}")
    lines = read.data.split(b"\n")  # LF only (module rule 3)
    tail = lines.pop()
    if tail:
        return drift("partial-line", f"{len(tail)} bytes after the last LF", len(lines) + 1)
    if not lines:
        return drift("no-header", "the file is empty")
    header = _object(lines[0])
    if header is None or header.get("type") != "session" or not isinstance(header.get("id"), str):
        return drift("bad-header", "line 1 is not a session header", 1)
    if header["id"] != session_id:
        return drift("header-id", f"header id {header['id']!r}, recorded {session_id!r}", 1)

    known = set(engine_ids)
    seen: set[str] = set()
    disk_ids: list[str] = []
    for number, raw in enumerate(lines[1:], start=2):
        entry = _object(raw)
        eid = entry.get("id") if entry is not None else None
        etype = entry.get("type") if entry is not None else None
        if not isinstance(eid, str) or not isinstance(etype, str) or etype == "session":
            what = "a second session header" if etype == "session" else "not a JSON object with a string id and type"
            return drift("invalid-line", what, number, len(disk_ids))
        if eid in seen:
            return drift("duplicate-id", f"entry id {eid!r} appears twice", number, len(disk_ids))
        seen.add(eid)
        if eid not in known:
            # Mutant 25a skips this entry instead: a foreign entry with a new id is ignored.
            return drift("unknown-id", f"entry id {eid!r} ({etype}) is not in the engine's list", number, len(disk_ids))
        disk_ids.append(eid)
    n_disk = len(disk_ids)
    for index, eid in enumerate(disk_ids):
        if index >= n_engine or engine_ids[index] != eid:
            return drift("not-prefix", f"disk entry {index + 1} is {eid!r}, the engine's is "
                         f"{engine_ids[index] if index < n_engine else None!r}", index + 2, n_disk)
    if n_disk < n_engine:
        return drift("disk-behind", f"{n_disk} entries on disk, {n_engine} in the engine's list", None, n_disk)
    digest = read.sha256 if read.sha256 is not None and read.offset == 0 else hashlib.sha256(read.data).hexdigest()
    checkpoint = Checkpoint(now, digest, n_disk, len(lines), disk_ids[-1] if disk_ids else None)
    return Verdict(False, None, f"{n_disk} entries, the engine's own", None, now, n_disk, n_engine, checkpoint)


def check_appended(engine: EngineList, read: SessionBytes | None, *, checkpoint: Checkpoint) -> Verdict | None:
    """The incremental check (module rules A-D): `engine` is the engine's answer to `get_entries
    since=<checkpoint.last_id>` (every entry when it is None), `read` the file read from
    `checkpoint.identity.size`. A verdict (drift, or clean with the next checkpoint), or None when it
    cannot decide alone: the ids that follow are not the engine's answer; the core then runs the full
    check, which names the reason. Never raises. Linear in the bytes that follow the checkpoint (and in
    the engine's answer); the prefix was hashed by the reader."""
    new_ids = [e.get("id") if isinstance(e, Mapping) else None for e in engine.entries]
    n_engine = checkpoint.entries + len(new_ids)

    def drift(reason: str, detail: str, line: int | None = None, disk: int = checkpoint.entries) -> Verdict:
        return Verdict(True, reason, detail, line, None if read is None else read.identity, disk, n_engine,
                       None, True)

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
    lines = read.data.split(b"\n")
    tail = lines.pop()
    if tail:
        return drift("partial-line", f"{len(tail)} bytes after the last LF", checkpoint.lines + len(lines) + 1)
    disk_ids: list[str] = []
    for number, raw in enumerate(lines, start=checkpoint.lines + 1):
        entry = _object(raw)
        eid = entry.get("id") if entry is not None else None
        etype = entry.get("type") if entry is not None else None
        if not isinstance(eid, str) or not isinstance(etype, str) or etype == "session":
            what = "a second session header" if etype == "session" else "not a JSON object with a string id and type"
            return drift("invalid-line", what, number, checkpoint.entries + len(disk_ids))
        disk_ids.append(eid)
    if disk_ids != new_ids:
        return None  # rule D: the full check names it (unknown, duplicate, out of order, behind)
    if read.sha256 is None:
        return None  # nothing to carry forward: check it whole
    n_disk = checkpoint.entries + len(disk_ids)
    nxt = Checkpoint(now, read.sha256, n_disk, checkpoint.lines + len(lines),
                     disk_ids[-1] if disk_ids else checkpoint.last_id)
    return Verdict(False, None, f"{n_disk} entries, the engine's own ({len(disk_ids)} new)", None, now, n_disk,
                   n_engine, nxt, True)
