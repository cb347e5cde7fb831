"""Catalogue rows (seed README "Sources" and "API": reader.catalogue()).

One row per *.jsonl in an approved root, its header read for sessionId, createdAt and engineStartedAt (a
file whose open or header is refused carries `refusal`), and one row per unsupported seat, whose
directory is never read. The catalogue opens each approved file to read line 1 only, however long it is
(package README, "Decisions").
"""

from __future__ import annotations

import os
from typing import Any

from mosaic.pi_format import FormatRefusal, parse
from mosaic.safe_open import Root, SafeOpenRefusal

from ._jsonout import iso_time
from ._refusal import ReaderRefusal
from ._sources import SessionRoot, UnsupportedRoot, conversation_id

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
