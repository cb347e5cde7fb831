"""What the lifecycle checks of the Pi engine before and at a launch, as functions of what they compare (brief
§2 "Fields", §6 "Pi resume"; the lifecycle runs them in order):

1. The engine is sealed and pinned: `sealed_argv` refuses an engine that is neither the pinned Pi nor a test
   command, or an unsealed argument; `current_pins` are the engine version, the binary's digest (the pinned
   Pi's manifest, checked again: `engine-pin-mismatch`; a command engine's command and install tree) and
   the argv digest.
2. Pi must load the session without writing to it: a torn last line refuses `session-drift`
   (`loadable`).
3. K8: the engine shows this session file, its header ID and the recorded leaf before admission opens
   (`load_check`); Pi's own startup append (model and thinking entries chained from the recorded leaf,
   FACTS (d)) is the engine's, not another leaf (`leaf_problem`). The leaf is proven with answers whose size
   and depth do not grow with the session: `get_state`, and `get_entries since=<recorded leaf>` (flat, its
   `leafId` and only the entries after the recorded leaf, docs/pi-0.85.1.md "get_entries and get_tree"),
   never `get_tree`, which nests two levels per entry of a chain (Pi's own answer fails past about 2,047).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from mosaic.controller_client import ControlRefusal
from mosaic.pi_rpc import EngineLink, check_pin, sealed_engine_argv
from mosaic.pi_rpc.install import PI_VERSION
from mosaic.pi_rpc.seal import BUNDLE_MANIFEST_SHA256, check_fixture_env
from mosaic.safe_open import canonical_json, sha256_digest
from mosaic.writer_claim import Pins

from ._session import SessionIdentity

__all__ = [
    "STARTUP_APPEND_TYPES",
    "EngineDescription",
    "current_pins",
    "leaf_problem",
    "leaf_query",
    "load_check",
    "loadable",
    "sealed_argv",
    "tree_digest",
]

# Entries the pinned Pi appends to a session on its own at startup (sdk.js 80-83, 239-252; FACTS (d)).
STARTUP_APPEND_TYPES = frozenset({"model_change", "thinking_level_change"})


class EngineDescription(Protocol):
    """What the checks read of an `PiSpec`."""

    @property
    def pi_dir(self) -> str | None: ...
    @property
    def command(self) -> tuple[str, ...] | None: ...
    @property
    def provider(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def thinking(self) -> str | None: ...
    @property
    def pin_tree(self) -> str | None: ...
    @property
    def fixture_extension(self) -> bool: ...
    @property
    def env(self) -> Mapping[str, str]: ...


def sealed_argv(engine: EngineDescription, session_file: str) -> list[str]:
    """The engine's sealed argv for `session_file`. Raises `configuration` (neither a pinned Pi nor a
    command), the pin's refusal, pi-rpc's seal refusal."""
    if engine.command is None:
        if engine.pi_dir is None:
            raise ControlRefusal("configuration", "an engine needs a pinned Pi directory or a command")
        refusal = check_pin(engine.pi_dir, fixture_extension=engine.fixture_extension)
        if refusal is not None:
            raise refusal
    if engine.fixture_extension:
        refusal = check_fixture_env(engine.env)
        if refusal is not None:
            raise refusal
    return sealed_engine_argv(engine.pi_dir or "", session_file, model=engine.model, provider=engine.provider,
                              thinking=engine.thinking, command=engine.command,
                              fixture_extension=engine.fixture_extension)


def current_pins(engine: EngineDescription, argv: Sequence[str]) -> Pins:
    """The pins as they are now (§2 "Fields": engine version, binary sha256, argv digest). The pinned Pi's
    install is verified against its manifest again (`engine-pin-mismatch`); a command engine's binary
    pin is its command and, when `pin_tree` names one, its install tree's content."""
    if engine.command is None:
        assert engine.pi_dir is not None
        refusal = check_pin(engine.pi_dir, fixture_extension=engine.fixture_extension)
        if refusal is not None:
            raise refusal
        binary = BUNDLE_MANIFEST_SHA256
    else:
        tree = tree_digest(engine.pin_tree) if engine.pin_tree is not None else None
        binary = sha256_digest(canonical_json([list(engine.command), tree]))
    return Pins(PI_VERSION, binary, sha256_digest(canonical_json(list(argv))))


def loadable(identity: SessionIdentity) -> None:
    """The file half of the load check, before anything is reserved, held or spawned: Pi must load the
    session without writing to it. Refuses `session-drift` for a torn last line (its reason, partial-line,
    and the bytes' position: `SessionIdentity.torn_tail`)."""
    torn = identity.torn_tail()
    if torn is not None:
        raise ControlRefusal("session-drift", torn)


def leaf_query(recorded: str | None) -> dict[str, Any]:
    """K8's `get_entries`: the entries after the recorded leaf (`since`: rpc-mode.js 505-516, the first
    entry with that id) and Pi's `leafId`; every entry when nothing is recorded (a session with no entries:
    only Pi's startup append can follow its header)."""
    return {"type": "get_entries"} if recorded is None else {"type": "get_entries", "since": recorded}


async def load_check(link: EngineLink, *, bound: float, session_file: str, identity: SessionIdentity,
                     step: Callable[[str], None]) -> str | None:
    """K8: before admission opens, the engine must show this session file, its header ID and the recorded
    leaf (brief §6 "Pi resume"), each query answered within `bound` seconds. Returns what differs, or
    None. `step` is called after the first answer (a test seam). Two flat answers, whatever the session's
    length: `get_state` and `leaf_query` (module rule 3)."""
    try:
        state = await asyncio.wait_for(link.request({"type": "get_state"}), bound)
        step("first-get-state")
        entries = await asyncio.wait_for(link.request(leaf_query(identity.leaf)), bound)
    except Exception as exc:  # noqa: BLE001 - no answer is no evidence: the check fails
        return f"the engine did not answer the load check: {exc!r}"
    data = (state.response or {}).get("data") or {}
    if data.get("sessionFile") != session_file:
        return f"the engine loaded session file {data.get('sessionFile')!r}, not {session_file!r}"
    if data.get("sessionId") != identity.header_id:
        return f"the engine's session ID is {data.get('sessionId')!r}, not the header's {identity.header_id!r}"
    answer = entries.response or {}
    if answer.get("success") is not True:
        # Pi's "Entry not found: <id>": the recorded leaf is not among the entries it loaded.
        return (f"the engine's entries do not hold the recorded leaf {identity.leaf!r} "
                f"({answer.get('error', 'no answer')})")
    listed = answer.get("data")
    if not isinstance(listed, Mapping) or not isinstance(listed.get("entries"), list):
        return f"the engine's get_entries answer is not an entry list: {str(listed)[:200]}"
    return leaf_problem(identity.leaf, listed.get("leafId"), listed["entries"])


def leaf_problem(recorded: str | None, loaded: Any, after: Sequence[Any]) -> str | None:
    """None when the engine's leaf is the recorded one, or the recorded one followed only by Pi's own
    startup append (model_change / thinking_level_change entries, each the child of the one before, the
    first the child of the recorded leaf); else what differs (K8). `after` is what the engine lists after
    the recorded leaf (`leaf_query`'s answer: every entry when nothing is recorded)."""
    if loaded == recorded:
        return None
    parent = recorded
    for entry in after:
        if not isinstance(entry, Mapping) or entry.get("type") not in STARTUP_APPEND_TYPES \
                or entry.get("parentId") != parent:
            return f"the engine loaded leaf {loaded!r}, not the recorded {recorded!r} (K8)"
        parent = entry.get("id")
    if parent != loaded:
        return f"the engine loaded leaf {loaded!r}, not the recorded {recorded!r} (K8)"
    return None


def tree_digest(root: str) -> str:
    """The content digest of an install tree: every regular file's path below `root` and its SHA-256, in
    path order (`__pycache__` left out: the interpreter writes it). Symlinks are recorded as their target."""
    entries: list[list[str]] = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                entries.append([rel, "link:" + os.readlink(full)])
                continue
            digest = hashlib.sha256()
            with open(full, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 16), b""):
                    digest.update(chunk)
            entries.append([rel, digest.hexdigest()])
    return sha256_digest(canonical_json(entries))
