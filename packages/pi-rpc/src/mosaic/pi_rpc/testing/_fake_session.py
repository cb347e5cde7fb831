"""Pi 0.85.1's SessionManager as the fake engine needs it: load (with its side effects), persist, tree.

A port of the behaviour (not the code) of P/dist/core/session-manager.js, read from the installed package
(FACTS.md (c), "Loader quirks"): every write the real loader makes, the fake makes, byte for byte apart
from ids and timestamps.

* Load: lines split on LF only, blank or malformed lines skipped (265-276); the first parsed value must be
  a header ``{type: "session", id: <str>}`` else the file is "not a valid pi session" (315-317, 628); an
  unterminated last line gets ``"\\n"`` appended (319); a 0-byte file gets a fresh header written
  (627-633); a header version below 3 (missing = 1) migrates the entries and rewrites the whole file, v1
  giving every entry a fresh id chained in file order (31-69, 671-685, 708-720).
* Default leaf: the last non-header entry in file order (686-707); ``byId`` keeps the later of two
  duplicate ids, ``fileEntries`` keeps both.
* Persist (739-768): a session that did not exist at start writes nothing until the first assistant
  message, then every entry at once with exclusive create (``wx``); an existing file gets each entry
  appended synchronously.
* Tree (1003-1039): a node per entry, duplicates listed once per occurrence, orphans as roots, children
  sorted by timestamp with a stable sort (an unparseable timestamp compares equal to everything).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import secrets
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from mosaic.pi_rpc._framing import js_json_dumps

__all__ = ["InvalidSession", "SessionFile", "iso_now", "ms_now", "new_entry_id", "uuidv7"]

CURRENT_VERSION = 3
Entry = dict[str, Any]


class InvalidSession(Exception):
    """The file is not a Pi session (Pi exits 1 with ``Error: <message>``)."""


def iso_now() -> str:
    """``new Date().toISOString()``: UTC, milliseconds, ``Z``."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def ms_now() -> int:
    """``Date.now()``."""
    return time.time_ns() // 1_000_000


def uuidv7() -> str:
    """A UUIDv7 (48-bit ms timestamp, version 7, variant 10, random rest), as Pi's session ids."""
    ts = ms_now() & ((1 << 48) - 1)
    rand = int.from_bytes(secrets.token_bytes(10), "big")
    value = (ts << 80) | (0x7 << 76) | ((rand >> 68) & 0xFFF) << 64 | (0b10 << 62) | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def new_entry_id(taken: Callable[[str], bool]) -> str:
    """``generateId``: 8 hex characters of a random UUID, not ``taken``; a full UUID after 100 tries."""
    for _ in range(100):
        cand = str(uuid.uuid4())[:8]
        if not taken(cand):
            return cand
    return str(uuid.uuid4())


_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:\d{2})?)?$")


def _date_ms(value: Any) -> float:
    """``new Date(value).getTime()`` for the ISO forms Pi writes; NaN for anything else."""
    if not isinstance(value, str):
        return math.nan
    m = _ISO.match(value)
    if not m:
        return math.nan
    y, mo, d, hh, mi, ss, frac, tz = m.groups()
    try:
        dt = datetime(int(y), int(mo), int(d), int(hh or 0), int(mi or 0), int(ss or 0), tzinfo=UTC)
    except ValueError:
        return math.nan
    ms = dt.timestamp() * 1000 + (int((frac or "0")[:3].ljust(3, "0")))
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        ms -= sign * (int(tz[1:3]) * 60 + int(tz[4:6])) * 60000
    return ms


def _cmp_ts(a: dict[str, Any], b: dict[str, Any]) -> int:
    # JS comparator `new Date(a).getTime() - new Date(b).getTime()`: NaN is neither < 0 nor > 0 (equal).
    d = _date_ms(a["entry"].get("timestamp")) - _date_ms(b["entry"].get("timestamp"))
    if math.isnan(d) or d == 0:
        return 0
    return -1 if d < 0 else 1


def _line(entry: Any) -> str:
    return js_json_dumps(entry) + "\n"


def _truthy(value: Any) -> bool:
    # JS truthiness of a parsed JSON value (Loader quirk 4: any truthy value is an entry).
    return value not in (None, False, 0, "") and not (isinstance(value, float) and math.isnan(value))


class SessionFile:
    """One session, in memory and on disk. ``path`` is the ``--session`` path (absolute)."""

    def __init__(self, path: str, cwd: str) -> None:
        self.path = path
        self.cwd = cwd
        self.file_entries: list[Any] = []
        self.by_id: dict[Any, Any] = {}
        self.labels: dict[Any, Any] = {}
        self.label_ts: dict[Any, Any] = {}
        self.leaf_id: Any = None
        self.session_id = ""
        self.flushed = False

    # -- opening --------------------------------------------------------------------------------------

    @staticmethod
    def header_cwd(path: str) -> str | None:
        """The header's cwd (``SessionManager.open``'s header scan, 337-378), or ``None``."""
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
        except OSError:
            return None
        for raw in data.split(b"\n"):
            text = raw.decode("utf-8", "replace")
            if not text.strip():
                continue
            try:
                entry = json.loads(text)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") == "session" and isinstance(entry.get("id"), str):
                cwd = entry.get("cwd")
                return cwd if isinstance(cwd, str) and cwd else None
            return None
        return None

    @classmethod
    def open(cls, path: str, fallback_cwd: str) -> SessionFile:
        """``SessionManager.open(path)`` with its load side effects. Raises :class:`InvalidSession`."""
        cwd = (cls.header_cwd(path) if os.path.exists(path) else None) or fallback_cwd
        sm = cls(path, cwd)
        if os.path.exists(path):
            entries = sm._load_file()
            if not entries:
                if os.stat(path).st_size > 0:
                    raise InvalidSession(f"Session file is not a valid pi session: {path}")
                sm._new_session()
                sm._rewrite()
                sm.flushed = True
                return sm
            sm.file_entries = entries
            header = next(e for e in entries if isinstance(e, dict) and e.get("type") == "session")
            sm.session_id = header["id"]
            if sm._migrate():
                sm._rewrite()
            sm._build_index()
            sm.flushed = True
        else:
            sm._new_session()
        return sm

    def _load_file(self) -> list[Any]:
        with open(self.path, "rb") as f:
            data = f.read()
        parts = data.split(b"\n")
        pending = parts.pop()  # after the last LF
        entries: list[Any] = []
        for raw in [*parts, pending]:
            text = raw.decode("utf-8", "replace")
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if _truthy(value):
                entries.append(value)
        if not entries:
            return entries
        head = entries[0]
        if not (isinstance(head, dict) and head.get("type") == "session" and isinstance(head.get("id"), str)):
            return []
        if pending:
            with open(self.path, "ab") as f:
                f.write(b"\n")
        return entries

    def _new_session(self) -> None:
        self.session_id = uuidv7()
        header = {"type": "session", "version": CURRENT_VERSION, "id": self.session_id, "timestamp": iso_now(),
                  "cwd": self.cwd}
        self.file_entries = [header]
        self.by_id.clear()
        self.labels.clear()
        self.label_ts.clear()
        self.leaf_id = None
        self.flushed = False

    def _migrate(self) -> bool:
        header = next(e for e in self.file_entries if isinstance(e, dict) and e.get("type") == "session")
        version = header.get("version", 1)
        if not isinstance(version, (int, float)) or version >= CURRENT_VERSION:
            return False
        if version < 2:
            ids: set[str] = set()
            prev: Any = None
            for e in self.file_entries:
                if not isinstance(e, dict):
                    continue
                if e.get("type") == "session":
                    e["version"] = 2
                    continue
                e["id"] = new_entry_id(ids.__contains__)
                e["parentId"] = prev
                prev = e["id"]
            # (ids are generated against an empty set, as migrateV1ToV2 does: it never adds to it)
        for e in self.file_entries:
            if not isinstance(e, dict):
                continue
            if e.get("type") == "session":
                e["version"] = 3
            elif e.get("type") == "message" and isinstance(e.get("message"), dict) and \
                    e["message"].get("role") == "hookMessage":
                e["message"]["role"] = "custom"
        return True

    def _rewrite(self) -> None:
        with open(self.path, "wb") as f:
            for e in self.file_entries:
                f.write(_line(e).encode("utf-8", "surrogatepass"))

    def _build_index(self) -> None:
        self.by_id.clear()
        self.labels.clear()
        self.label_ts.clear()
        self.leaf_id = None
        for e in self.file_entries:
            if isinstance(e, dict) and e.get("type") == "session":
                continue
            eid = e.get("id") if isinstance(e, dict) else None
            self.by_id[_key(eid)] = e
            self.leaf_id = eid
            if isinstance(e, dict) and e.get("type") == "label":
                if e.get("label"):
                    self.labels[_key(e.get("targetId"))] = e["label"]
                    self.label_ts[_key(e.get("targetId"))] = e.get("timestamp")
                else:
                    self.labels.pop(_key(e.get("targetId")), None)
                    self.label_ts.pop(_key(e.get("targetId")), None)

    # -- reading --------------------------------------------------------------------------------------

    def entries(self) -> list[Any]:
        """``getEntries()``: every entry but the header, in append order (duplicates kept)."""
        return [e for e in self.file_entries if not (isinstance(e, dict) and e.get("type") == "session")]

    def get(self, eid: Any) -> Any:
        return self.by_id.get(_key(eid))

    def branch(self, from_id: Any = None) -> list[Any]:
        """``getBranch()``: the path from the root to the leaf (or ``from_id``), via ``byId``."""
        path: list[Any] = []
        start = from_id if from_id is not None else self.leaf_id
        cur = self.get(start) if start is not None else None
        seen = 0
        while cur is not None:
            path.append(cur)
            seen += 1
            if seen > len(self.file_entries) + 1:
                raise RuntimeError("Invalid array length")  # Loader quirk 6: a parent loop
            parent = cur.get("parentId") if isinstance(cur, dict) else None
            cur = self.get(parent) if parent else None
        path.reverse()
        return path

    def context_messages(self) -> list[dict[str, Any]]:
        """``buildSessionContext().messages`` for the entry types a sealed run produces."""
        out: list[dict[str, Any]] = []
        for e in self.branch() if self.leaf_id is not None else []:
            if isinstance(e, dict) and e.get("type") == "message" and isinstance(e.get("message"), dict):
                msg = dict(e["message"])
                if msg.get("role") in ("user", "assistant", "toolResult") and msg.get("content") is None:
                    msg["content"] = []
                out.append(msg)
            elif isinstance(e, dict) and e.get("type") == "custom_message":
                out.append({"role": "custom", "customType": e.get("customType"), "content": e.get("content") or [],
                            "display": e.get("display"), "details": e.get("details"), "timestamp": e.get("timestamp")})
        return out

    def context_settings(self) -> tuple[str, dict[str, Any] | None]:
        """(thinkingLevel, model) from the branch (getSessionContextSettings)."""
        level = "off"
        model: dict[str, Any] | None = None
        for e in self.branch() if self.leaf_id is not None else []:
            if not isinstance(e, dict):
                continue
            if e.get("type") == "thinking_level_change":
                level = e.get("thinkingLevel", level)
            elif e.get("type") == "model_change":
                model = {"provider": e.get("provider"), "modelId": e.get("modelId")}
            elif e.get("type") == "message" and isinstance(e.get("message"), dict) and \
                    e["message"].get("role") == "assistant":
                model = {"provider": e["message"].get("provider"), "modelId": e["message"].get("model")}
        return level, model

    def tree(self) -> list[dict[str, Any]]:
        """``getTree()`` (1003-1039)."""
        entries = self.entries()
        nodes: dict[Any, dict[str, Any]] = {}
        for e in entries:
            eid = e.get("id") if isinstance(e, dict) else None
            node: dict[str, Any] = {"entry": e, "children": []}
            if _key(eid) in self.labels:
                node["label"] = self.labels[_key(eid)]
                node["labelTimestamp"] = self.label_ts.get(_key(eid))
            nodes[_key(eid)] = node
        roots: list[dict[str, Any]] = []
        for e in entries:
            eid = e.get("id") if isinstance(e, dict) else None
            node = nodes[_key(eid)]
            parent = e.get("parentId") if isinstance(e, dict) else None
            if parent is None or parent == eid:
                roots.append(node)
            else:
                pnode = nodes.get(_key(parent))
                (pnode["children"] if pnode is not None else roots).append(node)
        # A node reached twice (duplicate ids) is sorted twice; the sort is idempotent and stable.
        stack = list(roots)
        visited = 0
        while stack:
            node = stack.pop()
            visited += 1
            if visited > 10 * (len(entries) + 1) ** 2:
                break  # a loop through duplicate ids; Pi would not terminate either
            node["children"].sort(key=functools.cmp_to_key(_cmp_ts))
            stack.extend(node["children"])
        return roots

    def session_name(self) -> str | None:
        for e in reversed(self.entries()):
            if isinstance(e, dict) and e.get("type") == "session_info":
                name = e.get("name")
                return name.strip() or None if isinstance(name, str) else None
        return None

    # -- appending ------------------------------------------------------------------------------------

    def _append(self, entry: Entry) -> str:
        self.file_entries.append(entry)
        self.by_id[_key(entry["id"])] = entry
        self.leaf_id = entry["id"]
        self._persist(entry)
        return str(entry["id"])

    def _base(self, etype: str) -> Entry:
        return {"type": etype, "id": new_entry_id(lambda c: _key(c) in self.by_id), "parentId": self.leaf_id,
                "timestamp": iso_now()}

    def append_message(self, message: dict[str, Any]) -> str:
        return self._append({**self._base("message"), "message": message})

    def append_thinking_level_change(self, level: str) -> str:
        return self._append({**self._base("thinking_level_change"), "thinkingLevel": level})

    def append_model_change(self, provider: str, model_id: str) -> str:
        return self._append({**self._base("model_change"), "provider": provider, "modelId": model_id})

    def append_session_info(self, name: str) -> str:
        clean = re.sub(r"[\r\n]+", " ", name).strip()
        return self._append({**self._base("session_info"), "name": clean})

    def append_custom_entry(self, custom_type: str, data: Any) -> str:
        base = self._base("custom")
        entry = {"type": "custom", "customType": custom_type, "data": data, "id": base["id"],
                 "parentId": base["parentId"], "timestamp": base["timestamp"]}
        return self._append(entry)

    def _persist(self, entry: Entry) -> None:
        has_assistant = any(isinstance(e, dict) and e.get("type") == "message" and
                            isinstance(e.get("message"), dict) and e["message"].get("role") == "assistant"
                            for e in self.file_entries)
        if not has_assistant:
            if self.flushed:
                with open(self.path, "ab") as f:
                    f.write(_line(entry).encode("utf-8", "surrogatepass"))
            return
        if not self.flushed:
            # openSync(path, "wx"): fails if another process created the file meanwhile (754-763).
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "wb") as f:
                for e in self.file_entries:
                    f.write(_line(e).encode("utf-8", "surrogatepass"))
            self.flushed = True
        else:
            with open(self.path, "ab") as f:
                f.write(_line(entry).encode("utf-8", "surrogatepass"))


def _key(value: Any) -> Any:
    # Map keys follow JS Map identity for primitives: "1" and 1 differ, as do None and "null".
    if isinstance(value, (dict, list)):
        return ("json", json.dumps(value, sort_keys=True))
    return (type(value).__name__, value)
