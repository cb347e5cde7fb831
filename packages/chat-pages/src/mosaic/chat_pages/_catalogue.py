"""Catalogue rows (seed README "Sources" and "API": reader.catalogue()).

One row per *.jsonl in an approved root, its header read for sessionId, createdAt and engineStartedAt (a
file whose open or header is refused carries `refusal`), one row per session a Claude seat's launcher
receipts name (its transcript's head read: the lines up to its first entry), and one row per unsupported
seat, whose directory is never read. The catalogue opens each approved file to read line 1 only (a Claude
transcript: its head), however long it is (package README, "Decisions"). Every row names its harness.
"""

from __future__ import annotations

import os
from typing import Any

import mosaic.claude_format as claude_format
from mosaic.pi_format import FormatRefusal, parse
from mosaic.safe_open import Root, SafeOpenRefusal, open_root
from mosaic.safe_open.root import Method

from ._claude import Receipted, locate, receipted
from ._jsonout import iso_time
from ._refusal import ReaderRefusal
from ._sources import CLAUDE_HARNESS, PI_HARNESS, ClaudeRoot, SessionRoot, UnsupportedRoot, conversation_id

#: The first read of line 1; each further read doubles, up to this much at once.
_FIRST_READ = 64 * 1024
_MAX_READ = 8 << 20


def catalogue_row(root: Root, sroot: SessionRoot, name: str) -> dict[str, Any]:
    """The row of session file `name` in `sroot` (opened below `root`). Never raises a refusal: safe-open's
    and pi-format's refusals become the row's `refusal`."""
    row: dict[str, Any] = {
        "kind": "conversation",
        "id": conversation_id(sroot.project_root, sroot.seat, name),
        "project": sroot.project,
        "seat": sroot.seat,
        "file": name,
        "size": None,
        "modifiedAt": None,
        "sessionId": None,
        "createdAt": None,
        "engineStartedAt": None,
        "refusal": None,
        "harness": PI_HARNESS,
    }
    try:
        with root.open_session_file(sroot.sessions_rel, name) as f:
            row["size"] = f.size
            row["modifiedAt"] = iso_time(f.mtime_ns / 1e9)
            head = read_header_line(f.fd, f.size)
    except SafeOpenRefusal as e:
        row["refusal"] = ReaderRefusal(e.code, e.message).to_dict()
        return row
    result = parse(head, project=root.path, realpath=os.path.realpath)
    if isinstance(result, FormatRefusal):
        row["refusal"] = ReaderRefusal(result.code, result.message).to_dict()
        return row
    row["sessionId"] = result.header.id
    row["createdAt"] = result.header.timestamp
    row["engineStartedAt"] = sroot.engine_started_at(result.header.timestamp)
    return row


def read_header_line(fd: int, size: int) -> bytes:
    """Line 1 with its LF, however long: read until the first LF or to `size` (the file's size when it
    was opened, which safe-open caps at 256 MiB), so the catalogue judges the same line 1 that `open` does
    (a shorter limit would call a longer, complete header `incomplete-header`). Linear in the
    line: each read doubles and only the new bytes are searched."""
    buf = bytearray()
    want = _FIRST_READ
    while len(buf) < size:
        chunk = os.pread(fd, min(want, size - len(buf)), len(buf))
        if not chunk:
            break
        start = len(buf)
        buf += chunk
        lf = buf.find(b"\n", start)
        if lf >= 0:
            return bytes(buf[: lf + 1])
        want = min(want * 2, _MAX_READ)
    return bytes(buf)


def claude_rows(croot: ClaudeRoot, method: Method) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of a Claude seat: one per session its launcher receipts name (`_claude.receipted`), never a
    file of a Claude directory no receipt names; and the refusedRoots entries of what could not be read (the
    project root, a receipt, the Claude root). Never raises a refusal."""
    rows: list[dict[str, Any]] = []
    refused: list[dict[str, Any]] = []

    def refuse(refusal: ReaderRefusal | SafeOpenRefusal) -> None:
        refused.append({"projectRoot": croot.project_root, "project": croot.project, "seat": croot.seat,
                        "refusal": ReaderRefusal(refusal.code, refusal.message).to_dict()})

    try:
        with open_root(croot.project_root, method=method) as proot:
            sessions, bad = receipted(proot, croot)
            project = proot.path
    except SafeOpenRefusal as e:
        refuse(e)
        return rows, refused
    for r in bad:
        refuse(r)
    if not sessions:
        return rows, refused
    try:
        claude_root = open_root(croot.claude_root, method=method)
    except SafeOpenRefusal as e:
        refuse(ReaderRefusal(e.code, f"the Claude root {croot.claude_root}: {e.message}"))
        return rows, refused
    with claude_root:
        for session in sessions:
            rows.append(claude_row(claude_root, croot, session, project))
    return rows, refused


def claude_row(claude_root: Root, croot: ClaudeRoot, session: Receipted, project: str) -> dict[str, Any]:
    """The row of one session a receipt names: its transcript resolved and opened (safe-open), its head read
    for createdAt (the first entry's timestamp), the version and the project (claude-format's refusals:
    unsupported-harness, foreign-project). A refusal of the receipt's line, the resolution, the open or the
    head is the row's `refusal`."""
    row: dict[str, Any] = {
        "kind": "conversation",
        "id": session.conversation,
        "project": croot.project,
        "seat": croot.seat,
        "file": session.file,
        "size": None,
        "modifiedAt": None,
        "sessionId": session.session_id if session.valid else None,
        "createdAt": None,
        "engineStartedAt": None,
        "refusal": None,
        "harness": CLAUDE_HARNESS,
    }
    try:
        rel = locate(claude_root, session)
        with claude_root.open_session_file(rel, session.file) as f:
            row["size"] = f.size
            row["modifiedAt"] = iso_time(f.mtime_ns / 1e9)
            head = read_head(f.fd, f.size)
    except ReaderRefusal as r:
        row["refusal"] = r.to_dict()
        return row
    except SafeOpenRefusal as e:
        row["refusal"] = ReaderRefusal(e.code, e.message).to_dict()
        return row
    result = claude_format.parse(head, project=project, realpath=os.path.realpath)
    if isinstance(result, claude_format.TranscriptRefusal):
        row["refusal"] = ReaderRefusal(result.code, result.message).to_dict()
        return row
    row["createdAt"] = result.created_at
    row["engineStartedAt"] = croot.engine_started_at(result.created_at)
    return row


def read_head(fd: int, size: int) -> bytes:
    """A transcript's head: its lines up to and with the first entry line (claude-format's
    `first_entry_end`), however long, or the whole file (up to `size`) when it holds no entry yet. Reads
    double, and each search starts where the complete lines already searched ended: linear in the head."""
    buf = bytearray()
    want = _FIRST_READ
    searched = 0
    while len(buf) < size:
        chunk = os.pread(fd, min(want, size - len(buf)), len(buf))
        if not chunk:
            break
        buf += chunk
        end = claude_format.first_entry_end(buf, searched)
        if end is not None:
            return bytes(buf[:end])
        searched = buf.rfind(b"\n") + 1
        want = min(want * 2, _MAX_READ)
    return bytes(buf)


def unsupported_row(u: UnsupportedRoot) -> dict[str, Any]:
    """The one row of a non-Pi seat (D2): `unsupportedReason: "unsupported-harness"`, never read."""
    return {
        "kind": "unsupported",
        "id": conversation_id(u.project_root, u.seat, ""),
        "project": u.project,
        "seat": u.seat,
        "harness": u.harness,
        "unsupportedReason": "unsupported-harness",
        "placeholder": u.placeholder,
    }
