"""What the lifecycle reads of a Claude Code transcript: its place, its session id and the leaf `--resume`
continues (issue 32 item 1; FACTS §2).

1. The place. A transcript is `<config>/projects/<slug>/<uuid>.jsonl` (FACTS §2 "Layout"), where `<config>` is
   the engine's `CLAUDE_CONFIG_DIR` and `<slug>` the slug of the project the engine runs in (its cwd):
   every character of the project's real path outside `[a-zA-Z0-9]` becomes `-`, one per UTF-16 unit (an
   astral character gives two). A slug over 200 characters is cut and hashed by the binary (`Bun.hash`),
   which is not recomputed here: such a project refuses `configuration`, as does any other path.
2. The session key. Claude Code has no header line: the session id is the file's name (the uuid the engine
   is launched with, `--session-id` or `--resume`), and every entry that names a `sessionId` must name it
   (else `configuration`: not this session's transcript). A new session has no transcript yet (the binary
   writes it at the first turn): its read is empty, with no leaf, and it is launched `--session-id`.
3. The leaf is what `--resume` continues: the `leafUuid` of the last `last-prompt` line, else the last
   entry with a uuid in file order (claude-rpc's `leaf_by_rule`, proven on the binary by the committed trees),
   its raw uuid as the claim records it; the branch is claude-format's name for the branch that ends there
   (the reader's, so the claim and the history pages agree). A transcript claude-format refuses
   (another version, ...) refuses `configuration`.
4. Open tool calls: every `tool_use` block of an `assistant` entry that no `tool_result` of a `user` entry
   answers, in file order (W7: after a crash, effects nobody saw end).
5. A torn tail (bytes after the last LF) is refused before a launch (`loadable`: `session-drift`), as on Pi:
   the binary would append its next entry after them.

The controller never writes the transcript; it is opened read-only through safe-open (no symlinks,
O_NOFOLLOW, (dev, ino) checked) beneath the config directory. One read, linear in its bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from mosaic.claude_format import MAIN_BRANCH, TranscriptRefusal, safe_id
from mosaic.claude_format import parse as parse_transcript
from mosaic.claude_rpc.resume import leaf_by_rule
from mosaic.claude_rpc.seal import is_session_uuid
from mosaic.controller_client import ControlRefusal
from mosaic.safe_open import SafeOpenRefusal, open_root

__all__ = ["MAX_SLUG", "ClaudePlace", "ClaudeSessionRead", "claude_place", "claude_slug", "read_transcript"]

MAX_SLUG = 200  # past this the binary cuts the slug and appends a hash (FACTS §2 "Slug rule")


def claude_slug(project: str) -> str:
    """The binary's slug of a real path (rule 1): each UTF-16 unit outside `[a-zA-Z0-9]` becomes `-`."""
    out: list[str] = []
    for ch in project:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        else:
            out.append("--" if ord(ch) > 0xFFFF else "-")
    return "".join(out)


@dataclass(frozen=True)
class ClaudePlace:
    """A transcript's place (the seam's `Place`): `project` is the engine's cwd (its real path) and the seat
    tuple's project, `seat` the seat's name (chat-pages' Claude seat), `config_dir` the engine's
    `CLAUDE_CONFIG_DIR`. `sessions_rel` is relative to `config_dir`, not to the project (the transcript
    does not live in the project)."""

    project: str
    seat: str
    config_dir: str
    slug: str
    session_id: str

    @property
    def name(self) -> str:
        return f"{self.session_id}.jsonl"

    @property
    def sessions_rel(self) -> str:
        return f"projects/{self.slug}"

    @property
    def path(self) -> str:
        return os.path.join(self.config_dir, "projects", self.slug, self.name)


@dataclass(frozen=True)
class ClaudeSessionRead:
    """One read of a transcript (the seam's `SessionRead`): the session id (the claim's key), the leaf
    `--resume` continues and its branch, the open tool calls, the bytes after the last LF (`tail`), the
    file's identity, and whether it exists (`exists` False: a new session, launched `--session-id`)."""

    header_id: str
    leaf: str | None
    branch: str = MAIN_BRANCH
    open_tools: tuple[tuple[str, str], ...] = ()
    tail: int = 0
    size: int = 0
    inode: int = 0
    exists: bool = False
    # The drift check's baseline (`engines/claude/_drift` rule 1): the file's device, the SHA-256 of its bytes
    # and how many lines (LF-terminated) they hold, as this read saw them.
    dev: int = 0
    sha256: str = ""
    lines: int = 0

    def torn_tail(self) -> str | None:
        if not self.tail:
            return None
        start = self.size - self.tail
        return (f"partial-line: the transcript ends with {self.tail} bytes after its last LF (bytes {start} to "
                f"{self.size - 1}, a torn line); Claude Code would append its next entry after them, so a launch "
                f"would write to a torn transcript. Remove or finish the torn line (truncate the file to {start} "
                "bytes) first")


def claude_place(real_path: str, *, project: str, seat: str, config_dir: str) -> ClaudePlace:
    """Take a transcript's real path apart (rule 1). Refuses `configuration` when it is not
    `<config_dir>/projects/<slug of project>/<uuid>.jsonl`."""
    path = PurePosixPath(real_path)
    want = f"<{config_dir}>/projects/<slug of {project}>/<session uuid>.jsonl"
    if str(path.parent.parent) != os.path.join(config_dir, "projects") or not path.name.endswith(".jsonl"):
        raise ControlRefusal("configuration", f"{real_path} is not {want}")
    session_id = path.name[: -len(".jsonl")]
    if not is_session_uuid(session_id):
        raise ControlRefusal("configuration", f"{real_path}: the file name is not a lowercase session uuid "
                                              f"({want})")
    slug = claude_slug(project)
    if len(slug) > MAX_SLUG:
        raise ControlRefusal("configuration", f"the project {project!r} has a slug longer than {MAX_SLUG} "
                                              "characters, which the binary hashes: not recomputed here")
    if path.parent.name != slug:
        raise ControlRefusal("configuration", f"{real_path} is under projects/{path.parent.name}, not under the "
                                              f"project's slug projects/{slug} ({want})")
    return ClaudePlace(project, seat, config_dir, slug, session_id)


def read_transcript(place: ClaudePlace) -> ClaudeSessionRead:
    """Read the transcript (rules 2-5). A missing file is a new session (no leaf). Refuses `configuration`
    for a transcript that cannot be read, names another session, or that claude-format refuses."""
    try:
        with open_root(place.config_dir) as root:
            if place.name not in root.listdir(place.sessions_rel):
                return ClaudeSessionRead(place.session_id, None)
            with root.open_session_file(place.sessions_rel, place.name) as f:
                chunks = []
                while chunk := os.read(f.fd, 1 << 20):
                    chunks.append(chunk)
                data = b"".join(chunks)
                inode, dev = f.ino, f.dev
    except SafeOpenRefusal as refusal:
        if refusal.code == "unavailable":  # no projects/<slug> directory yet: a new session
            return ClaudeSessionRead(place.session_id, None)
        raise ControlRefusal("configuration", f"the transcript {place.path} cannot be read: {refusal}") from None
    except OSError as exc:
        raise ControlRefusal("configuration", f"the transcript {place.path} cannot be read: {exc}") from None
    end = data.rfind(b"\n") + 1
    entries: list[Mapping[str, Any]] = []
    calls: dict[str, str] = {}
    for line in data[:end].split(b"\n"):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            continue  # claude-format shows it as unreadable; the binary skips it
        if not isinstance(entry, dict):
            continue
        sid = entry.get("sessionId")
        if sid is not None and sid != place.session_id:
            raise ControlRefusal("configuration", f"{place.path} holds an entry of session {sid!r}, not "
                                                  f"{place.session_id} (rule 2)")
        entries.append(entry)
        _tool_calls(entry, calls)
    try:
        _rule, leaf = leaf_by_rule(entries)
    except ValueError:
        leaf = None
    parsed = parse_transcript(data)
    if isinstance(parsed, TranscriptRefusal):
        raise ControlRefusal("configuration", f"the reader refuses the transcript: {parsed.code}: {parsed.message}")
    branch = parsed.default_branch
    if leaf is not None:
        for candidate in parsed.branches.values():
            if candidate.leaf == safe_id(leaf) and not candidate.sidechain:
                branch = candidate.name
                break
    return ClaudeSessionRead(place.session_id, leaf, branch, tuple(calls.items()), len(data) - end, len(data),
                             inode, True, dev, hashlib.sha256(data).hexdigest(), data.count(b"\n"))


def _tool_calls(entry: Mapping[str, Any], calls: dict[str, str]) -> None:
    """Note an assistant entry's tool uses and strike those a user entry's tool result answers (rule 4)."""
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list) or entry.get("isSidechain") is True:
        return
    for block in content:
        if not isinstance(block, Mapping):
            continue
        if entry.get("type") == "assistant" and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            name = block.get("name")
            calls[block["id"]] = name if isinstance(name, str) else "unknown"
        elif entry.get("type") == "user" and block.get("type") == "tool_result" \
                and isinstance(block.get("tool_use_id"), str):
            calls.pop(block["tool_use_id"], None)
