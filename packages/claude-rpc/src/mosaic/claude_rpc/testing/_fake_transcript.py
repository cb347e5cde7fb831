"""The fake engine's transcript: ``CLAUDE_CONFIG_DIR/projects/<slug of the cwd>/<session>.jsonl``, mode 0600,
in the binary's shape for what a load check reads (docs/claude-2.1.283.md "Transcripts"): ``user`` and
``assistant`` entries chained by ``parentUuid`` (a user message keeps the uuid the client stamped), then a
``last-prompt`` line naming the leaf. Tool results and the interruption notes are user entries too, so an
interrupted turn leaves a user leaf, which a resume closes with a synthetic assistant entry as the binary
does. ``--resume`` continues the leaf the written rule picks
(:func:`mosaic.claude_rpc.resume.leaf_by_rule`). Attachments, queue operations and the rest of the
binary's entry types are not written (a known limit: nothing in the link reads them)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mosaic.claude_rpc._resume import SYNTHETIC_MODEL, leaf_by_rule
from mosaic.claude_rpc.testing._fake_wire import VERSION, new_uuid, now_stamp
from mosaic.claude_rpc.testing.recordings import slug


def find(config_dir: str, session: str) -> Path | None:
    """The transcript of ``session`` under any project of ``config_dir``, if one exists."""
    projects = Path(config_dir) / "projects"
    if not projects.is_dir():
        return None
    found = sorted(projects.glob(f"*/{session}.jsonl"))
    return found[0] if found else None


class Transcript:
    def __init__(self, config_dir: str, cwd: str, session: str) -> None:
        self.session = session
        self.cwd = cwd
        self.path = Path(config_dir) / "projects" / slug(os.path.realpath(cwd)) / f"{session}.jsonl"
        self.leaf: str | None = None
        self.leaf_type: str | None = None
        if self.path.exists():
            lines = [json.loads(x) for x in self.path.read_text().splitlines() if x.strip()]
            if any(isinstance(x.get("uuid"), str) for x in lines):
                self.leaf = leaf_by_rule(lines)[1]
                self.leaf_type = next((str(x.get("type")) for x in lines if x.get("uuid") == self.leaf), None)

    def _append(self, entry: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        finally:
            os.close(fd)

    def entry(self, kind: str, message: Mapping[str, Any], *, entry_uuid: str | None = None) -> str:
        """Append a ``user``/``assistant`` entry hanging on the leaf; it becomes the leaf."""
        uid = entry_uuid or new_uuid()
        self._append({"parentUuid": self.leaf, "isSidechain": False, "type": kind, "message": dict(message),
                      "uuid": uid, "timestamp": now_stamp(), "sessionId": self.session, "version": VERSION,
                      "cwd": self.cwd, "userType": "external", "entrypoint": "sdk-cli"})
        self.leaf = uid
        self.leaf_type = kind
        return uid

    def close_interrupted(self) -> None:
        """Resuming a session whose leaf is a user entry (its last turn was interrupted): the binary first
        appends one synthetic assistant entry (``model`` ``<synthetic>``, ``No response requested.``)."""
        if self.leaf is not None and self.leaf_type == "user":
            self.entry("assistant", {"id": new_uuid(), "model": SYNTHETIC_MODEL, "role": "assistant",
                                     "type": "message", "stop_reason": "stop_sequence",
                                     "content": [{"type": "text", "text": "No response requested."}]})

    def last_prompt(self, prompt: str) -> None:
        if self.leaf is not None:
            self._append({"type": "last-prompt", "lastPrompt": prompt, "leafUuid": self.leaf, "sessionId": self.session})
