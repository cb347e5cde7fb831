"""What the lifecycle reads of a session file: its place, its header ID and the leaf Pi will load.

The controller never writes a session file (brief §2 "No writes to sessions", W11) and never loads one
through Pi's SessionManager (which writes at load: FACTS.md "Loader quirks" 1); it opens the file
read-only through safe-open (no symlinks, O_NOFOLLOW, (dev, ino) checked) and scans the lines itself.

The leaf is Pi's default leaf: the last non-header entry in file order (session-manager.js `_buildIndex`
686-707, FACTS (c) "Default leaf"), malformed and blank lines skipped; a resumed Pi loads exactly that
leaf, which the load check (K8) compares. The leaf's branch is named by the reader's rules (pi-format:
`main` for the first root's line, `b.<entry id>` for each later root and later child at a fork), the name
the claim and an eligibility record carry (brief §2 "branch and leaf at launch"; W8, W9).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import PurePosixPath

from mosaic.controller_client import ControlRefusal
from mosaic.pi_format import MAIN_BRANCH, FormatRefusal
from mosaic.pi_format import parse as parse_session
from mosaic.safe_open import open_root

__all__ = ["SessionIdentity", "SessionPlace", "read_session", "session_place"]


@dataclass(frozen=True)
class SessionPlace:
    """`<project>/.pi/state/<seat>/sessions/<name>.jsonl`, taken apart (seed README "Mediated control": the
    session file must sit there)."""

    project: str
    seat: str
    name: str

    @property
    def sessions_rel(self) -> str:
        return f".pi/state/{self.seat}/sessions"

    @property
    def path(self) -> str:
        return os.path.join(self.project, self.sessions_rel, self.name)


@dataclass(frozen=True)
class SessionIdentity:
    """The header ID (the claim's session key, D1), the leaf Pi will load (None: no entries), the entry
    that leaf is, and the file's identity when read."""

    header_id: str
    leaf: str | None
    leaf_type: str | None
    inode: int
    size: int
    # Tool calls an assistant message made with no tool result in the file: (toolCallId, toolName), in file
    # order. After a crash or a reboot these are effects nobody saw end (W7: uncertain, never rolled back).
    open_tools: tuple[tuple[str, str], ...] = ()
    branch: str = MAIN_BRANCH  # the reader's name of the branch that ends at `leaf`
    # Bytes after the last LF (0: the file ends at an LF). Pi appends "\n" to them at load and takes them as
    # an entry (FACTS (c) "Writes at load" (i), loader quirk 3): a launch on such a file writes to it.
    tail: int = 0

    def torn_tail(self) -> str | None:
        """None when the file ends at an LF; else what the drift check calls `partial-line`, with the
        bytes' position: a launch on this file would have Pi write to it at load (a newline after the
        torn line, then its startup append), so the drift check right after the launch would find an
        invalid line and fence session-drift at once."""
        if not self.tail:
            return None
        start = self.size - self.tail
        return (f"partial-line: the session file ends with {self.tail} bytes after its last LF (bytes {start} "
                f"to {self.size - 1}, a torn line: a write cut short, by a full disk or another writer); Pi "
                "would append a newline to them at load and take them as an entry (FACTS (c) \"Writes at load\"), "
                "so a launch would write to the session and fence session-drift at once. Remove or finish "
                f"the torn line (truncate the file to {start} bytes) first")


def session_place(real_path: str) -> SessionPlace:
    """Take a session file's real path apart. Refuses `configuration` when it is not
    `<project>/.pi/state/<seat>/sessions/<name>.jsonl`."""
    parts = PurePosixPath(real_path).parts
    if (len(parts) < 6 or parts[-5:-3] != (".pi", "state") or parts[-2] != "sessions"
            or not parts[-1].endswith(".jsonl") or parts[-1].startswith(".")):
        raise ControlRefusal("configuration", f"{real_path} is not <project>/.pi/state/<seat>/sessions/<name>.jsonl")
    return SessionPlace(str(PurePosixPath(*parts[:-5])), parts[-3], parts[-1])


def read_session(place: SessionPlace) -> SessionIdentity:
    """Open the session file read-only and find its header ID and Pi's default leaf.

    Refuses `configuration` for a file that is missing, unreadable (safe-open's refusal is the cause) or
    has no Pi header on line 1 (the session key is the header ID: a session without one cannot be
    claimed). Costs one read of the file, linear in its bytes.
    """
    try:
        with open_root(place.project) as root, root.open_session_file(place.sessions_rel, place.name) as f:
            chunks = []
            while chunk := os.read(f.fd, 1 << 20):
                chunks.append(chunk)
            data = b"".join(chunks)
            inode, size = f.ino, len(data)
    except ControlRefusal:
        raise
    except Exception as exc:  # noqa: BLE001 - safe-open refusals and OSErrors alike: the file cannot be used
        raise ControlRefusal("configuration", f"the session file {place.path} cannot be read: {exc}") from exc
    first, _, rest = data.partition(b"\n")
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("type") != "session" or not isinstance(header.get("id"), str):
        raise ControlRefusal("configuration", f"{place.path} has no Pi session header on line 1 (the session key "
                                              "is the header ID)")
    leaf: str | None = None
    leaf_type: str | None = None
    calls: dict[str, str] = {}
    for line in rest.split(b"\n"):  # LF only: U+2028 inside a line is ordinary
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue  # Pi skips a malformed line (session-manager.js 265-276); a line nested too deep for Python too
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry.get("type") != "session":
            leaf, leaf_type = entry["id"], entry.get("type") if isinstance(entry.get("type"), str) else None
            if entry.get("type") == "message":
                _tool_calls(entry.get("message"), calls)
    return SessionIdentity(header["id"], leaf, leaf_type, inode, size, tuple(calls.items()),
                           _branch_of(data, place.project, leaf), len(data) - (data.rfind(b"\n") + 1))


def _branch_of(data: bytes, project: str, leaf: str | None) -> str:
    """The reader's name of the branch ending at Pi's leaf. Where the reader's view ends elsewhere (its
    snapshot stops at the last LF, Pi's leaf may be an unterminated last line: FACTS "Loader quirks" 3), the
    reader's default branch, which holds the entries before it. Refuses `configuration` where the reader
    refuses the file: a session the reader cannot show is not one a controller may bind."""
    parsed = parse_session(data, project=project, realpath=os.path.realpath)
    if isinstance(parsed, FormatRefusal):
        raise ControlRefusal("configuration", f"the reader refuses the session file: {parsed.code}: {parsed.message}")
    for branch in parsed.branches.values():
        if leaf is not None and branch.leaf == leaf:
            return branch.name
    return parsed.default_branch


def _tool_calls(message: object, calls: dict[str, str]) -> None:
    """Note an assistant message's tool calls and strike those a tool result answers."""
    if not isinstance(message, dict):
        return
    if message.get("role") == "assistant" and isinstance(message.get("content"), list):
        for part in message["content"]:
            if isinstance(part, dict) and part.get("type") == "toolCall" and isinstance(part.get("id"), str):
                name = part.get("name")
                calls[part["id"]] = name if isinstance(name, str) else "unknown"
    elif message.get("role") == "toolResult" and isinstance(message.get("toolCallId"), str):
        calls.pop(message["toolCallId"], None)
