"""Catalogue rows (seed README "Sources" and "API": reader.catalogue()).

One row per *.jsonl in an approved root, its header read for sessionId, createdAt and engineStartedAt (a
file whose open or header is refused carries `refusal`), and one row per unsupported seat, whose
directory is never read. The catalogue opens each approved file to read line 1 only (package README,
"Decisions").
"""

from __future__ import annotations

import os
from typing import Any

from mosaic.pi_format import FormatRefusal, parse
from mosaic.safe_open import Root, SafeOpenRefusal

from ._jsonout import iso_time
from ._refusal import ReaderRefusal
from ._sources import SessionRoot, UnsupportedRoot, conversation_id

#: At most about this much of line 1 is read; with no LF by then, pi-format sees a partial header line.
_HEADER_MAX = 1 << 20


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
            head = read_header_line(f.fd)
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


def read_header_line(fd: int) -> bytes:
    """Line 1 with its LF (or whatever there is when no LF comes within 1 MiB or before EOF)."""
    data = b""
    while len(data) < _HEADER_MAX:
        chunk = os.pread(fd, 64 * 1024, len(data))
        if not chunk:
            return data
        data += chunk
        lf = data.find(b"\n")
        if lf >= 0:
            return data[: lf + 1]
    return data


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
