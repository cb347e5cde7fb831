"""What the lifecycle checks of the Claude engine before, at and after a launch (issue 32 item 1), as
functions of what they compare; the lifecycle runs them in order.

1. The seal. The argv and the environment are claude-rpc's `seal_launch`, nothing else: the pinned binary
   alone (L7 checked first: `engine-pin-mismatch`, nothing made) or a test's fake command, the sealed flags
   (stream-json in and out, `--verbose`, the permission prompt on stdio, no setting sources, the empty MCP
   set), then the session flag with the claimed id, then only `--model` and `--include-partial-messages`;
   exactly the sealed environment (`CLAUDE_CODE_TMPDIR` a private 0700 directory inside the execution's
   scratch directory); anything else refuses `unsealed-engine`. The session flag is the transcript's state:
   `--resume <id>` when the claimed session's transcript exists, `--session-id <id>` when it does not yet
   (`session_flag`).
2. The pins: the engine version, the binary (the pinned binary's sha256, L7 checked again; a fake
   command's command line) and the argv digest. The argv digest is taken with
   the session flag written as `--resume` (`pinned_argv`): whether the transcript existed at a launch is the
   session's state, not the engine's, so a recover of a session a first launch created is the same engine.
3. At bind, right before the spawn marker, the launch is checked whole again (`check_launch`: L7 on the
   binary's bytes, the argv, the environment, the host): a binary swapped since construction, a scratch
   directory opened up, a managed policy that appeared, refuses before anything is spawned.
4. Claude must load the session without writing to it: a torn last line refuses `session-drift`.
5. K8 after spawn, before admission opens: the binary gives no session evidence before a turn (its `init`
   comes at the start of every turn; its `initialize` answer names no session, only `session_state`: FACTS §3,
   and recordings sealed-resume and sealed-resume-after-interrupt, where the binary answered `idle` after
   `--resume`). What it does offer is checked: the
   `initialize` answer within the bound, `success`, `session_state` `idle` (a `--resume` the binary cannot
   load, or a `--session-id` already in use, exits instead: no answer); and the transcript the engine
   continues is the one read at the claim: the same session id, the same leaf (`--resume`), or still absent
   (`--session-id`). Anything else is `preflight`. The link is told the claimed session
   (`expected_session_id`), so every later `init` is compared with it by claude-rpc, and the first prompt's
   transcript entry is checked to hang on the recorded leaf by the first drift check after it
   (`engines/claude/_drift` rule 5).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from mosaic.claude_rpc import SealedLaunch, check_binary, check_launch, seal_launch
from mosaic.claude_rpc.install import BINARY_SHA256, CLAUDE_VERSION
from mosaic.claude_rpc.seal import SEALED_FLAGS
from mosaic.controller_client import ControlRefusal
from mosaic.pi_rpc import EngineLink
from mosaic.safe_open import Refusal, canonical_json, sha256_digest
from mosaic.writer_claim import Pins

from ._link import ClaudeWire
from ._session import ClaudePlace, ClaudeSessionRead, read_transcript

__all__ = ["ClaudeDescription", "bind_check", "current_pins", "load_check", "loadable", "pinned_argv", "sealed_launch"]


class ClaudeDescription(Protocol):
    """What the checks read of a `ClaudeSpec`."""

    @property
    def claude_dir(self) -> str | None: ...
    @property
    def command(self) -> tuple[str, ...] | None: ...
    @property
    def project(self) -> str: ...
    @property
    def scratch(self) -> str: ...
    @property
    def config_dir(self) -> str | None: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def partial_messages(self) -> bool: ...
    @property
    def engine_uid(self) -> int | None: ...


def sealed_launch(spec: ClaudeDescription, place: ClaudePlace, identity: ClaudeSessionRead, *,
                  owner: int | range | None = None) -> SealedLaunch:
    """The sealed launch for the claimed session (rule 1): `--resume` when its transcript exists, else
    `--session-id`; its private directories `owner`'s (claude-rpc `seal_launch(owner=)`; None: the spec's
    `engine_uid`). Raises `configuration` (neither an install nor a command), claude-rpc's refusals
    (`engine-pin-mismatch`, `unsealed-engine`)."""
    if spec.command is None and spec.claude_dir is None:
        raise ControlRefusal("configuration", "a Claude engine needs the pinned install's directory or a command")
    try:
        return seal_launch(spec.claude_dir if spec.command is None else None, session_id=place.session_id,
                           resume=identity.exists, scratch=spec.scratch, cwd=spec.project,
                           config_dir=spec.config_dir, base_url=spec.base_url, api_key=spec.api_key,
                           model=spec.model, partial_messages=spec.partial_messages, command=spec.command,
                           owner=spec.engine_uid if owner is None else owner)
    except OSError as exc:  # the scratch directories cannot be made
        raise ControlRefusal("configuration", f"the Claude engine's scratch directory: {exc}") from None


def pinned_argv(launch: SealedLaunch) -> list[str]:
    """The argv the digest is taken over (rule 2): the session flag written as `--resume`."""
    argv = launch.argv
    at = len(launch.command) + len(SEALED_FLAGS)
    if argv[at: at + 1] == ["--session-id"]:
        argv[at] = "--resume"
    return argv


def current_pins(spec: ClaudeDescription, launch: SealedLaunch) -> Pins:
    """The pins as they are now (rule 2). A pinned launch's binary is checked again (L7:
    `engine-pin-mismatch`)."""
    if launch.pinned:
        refusal = check_binary(launch.command[0])
        if refusal is not None:
            raise refusal
        binary = BINARY_SHA256
    else:
        binary = sha256_digest(canonical_json(list(launch.command)))
    return Pins(CLAUDE_VERSION, binary, sha256_digest(canonical_json(pinned_argv(launch))))


def bind_check(launch: SealedLaunch) -> None:
    """Rule 3: the whole launch checked again at bind; raises the refusal."""
    refusal = check_launch(launch)
    if refusal is not None:
        raise refusal


def loadable(identity: ClaudeSessionRead) -> None:
    """Rule 4: refuses `session-drift` for a torn last line."""
    torn = identity.torn_tail()
    if torn is not None:
        raise ControlRefusal("session-drift", torn)


async def load_check(link: EngineLink, *, bound: float, place: ClaudePlace, identity: ClaudeSessionRead,
                     step: Callable[[str], None]) -> str | None:
    """K8 for Claude (rule 5): what differs, or None. `step` is called after the `initialize` answer (the
    lifecycle's crash point `first-get-state`)."""
    wire = link.core
    if not isinstance(wire, ClaudeWire):
        return f"the engine's link is not Claude's wire: {type(wire).__name__}"
    wire.claude.expected_session_id = identity.header_id
    try:
        command = wire.initialize(now=time.time(), bound=None)
        link.flush()
        answer = await asyncio.wait_for(link.outcome(command), bound)
    except Exception as exc:  # noqa: BLE001 - no answer is no evidence: the check fails
        return f"the engine did not answer initialize: {exc!r}"
    step("first-get-state")
    body = (answer.response or {}).get("response")
    if not isinstance(body, Mapping) or body.get("subtype") != "success":
        return f"the engine refused initialize: {str(body)[:200]}"
    state = body.get("response")
    if not isinstance(state, Mapping) or state.get("session_state") != "idle":
        found = state.get("session_state") if isinstance(state, Mapping) else None
        return f"the engine's session_state after spawn is {found!r}, not 'idle'"
    try:
        now = await asyncio.to_thread(read_transcript, place)
    except Refusal as refusal:
        return f"the transcript cannot be read after spawn: {refusal}"
    if now.exists != identity.exists:
        return (f"the transcript {'appeared' if now.exists else 'disappeared'} between the claim and the launch "
                f"(launched {'--resume' if identity.exists else '--session-id'})")
    if (now.header_id, now.leaf) != (identity.header_id, identity.leaf):
        return (f"the engine continues session {now.header_id} at leaf {now.leaf!r}, not the claimed "
                f"{identity.header_id} at {identity.leaf!r} (K8)")
    return None
