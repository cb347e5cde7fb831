"""The core's inputs and actions: the only way anything reaches the controller core or leaves it.

The core (`_receive.ControllerCore`) is sans-io (DESIGN.md principle 1; h11 is the model): the shells turn
bytes, timers and finished effects into the inputs below and call `core.receive(input, now=...)`; the core
returns actions, and the shells carry them out in order. "Under one dispatch lock" (brief §1) is "inside
one `receive` call".

Connections are named by an opaque `ConnId` the server shell assigns (`c1`, `c2`, ...). JSON-RPC request
ids are the client's own and are passed back unchanged. Every time is seconds (`now`, deadlines): the
shell's clock, monotonic or epoch as it chooses, the same one for every input of one core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, get_args

from mosaic.pi_rpc.link import LinkEvent

from ..engines._verdict import FileIdentity

__all__ = [
    "Action",
    "Call",
    "CancelTimer",
    "CENSUS",
    "CLAIM_GENERATION",
    "CLAIM_UNCERTAIN",
    "CloseConnection",
    "Connected",
    "ConnId",
    "Disconnected",
    "Effect",
    "EffectDone",
    "EffectName",
    "EngineEvents",
    "Evidence",
    "FlushEngine",
    "FORCE_STOP",
    "Input",
    "Notify",
    "PageRead",
    "READ_SESSION",
    "ReadPage",
    "RECOVER",
    "Refuse",
    "Reply",
    "RpcId",
    "SessionStat",
    "SetTimer",
    "TimerFired",
]

ConnId = str
RpcId = int | str

# The effects the core asks for, by name (`Effect.kind`): each is one row of `_effects.EFFECTS`, which says
# who asks for it, what its payload and result hold, the core's handler of its result and what runs it.
EffectName = Literal["census", "read-session", "force-stop", "recover", "claim-generation", "claim-uncertain"]
CENSUS: EffectName = "census"
READ_SESSION: EffectName = "read-session"
FORCE_STOP: EffectName = "force-stop"
RECOVER: EffectName = "recover"
CLAIM_GENERATION: EffectName = "claim-generation"
CLAIM_UNCERTAIN: EffectName = "claim-uncertain"
EFFECT_NAMES: frozenset[str] = frozenset(get_args(EffectName))

# ------------------------------------------------------------------------------------------------ inputs


class Peer(NamedTuple):
    """A connection's credentials as the kernel recorded them at connect(2) (`_access` rule 1). `groups` is
    None when the supplementary groups were not read, or not in full (`_access` rule 3). A tuple: made at
    every accept. The payload of `Connected`; `_access` decides on it."""

    uid: int
    gid: int
    pid: int
    groups: tuple[int, ...] | None = ()

    @property
    def ids(self) -> tuple[int, int, int]:
        """(uid, gid, pid): what a record names."""
        return (self.uid, self.gid, self.pid)



@dataclass(frozen=True)
class Connected:
    """A client connected. It starts as an observer (brief §1 "Every connection starts as an observer").
    `peer` is what the kernel recorded at its connect(2) (`Peer`, read once by the server at
    accept); None when it could not be read, which the core refuses `channel` like a peer with no grant."""

    conn: ConnId
    peer: Peer | None = None


@dataclass(frozen=True)
class Disconnected:
    """The server stopped serving a connection (it hung up, timed out, broke a limit or was closed; the
    socket may still be draining). Never releases control (H11). Actions for it afterwards are dropped."""

    conn: ConnId


@dataclass(frozen=True)
class SessionStat:
    """The session file as the shell looked at it just before it fed a prompt (`ControllerCore.wants_session_
    stat`): its (dev, ino, size) (`identity`), None when there is no file; `error` when it could not be
    looked at (the core then reads it before the prompt runs, and a read that fails is no evidence)."""

    identity: FileIdentity | None
    error: str | None = None


@dataclass(frozen=True)
class Call:
    """A well-formed JSON-RPC request: a known method with params of the right types (the protocol layer
    refused everything else before it got here). `params` is the validated params object. `session` is the
    shell's look at the session file for a prompt (None: it took none; the core then checks the file before
    the prompt runs, `core/_drift` rule 6)."""

    conn: ConnId
    rpc_id: RpcId
    method: str
    params: Mapping[str, Any]
    session: SessionStat | None = None


@dataclass(frozen=True)
class EngineEvents:
    """What the engine link produced, in read order, for the execution `execution` (H14: events of an old
    execution are dropped by the core and counted)."""

    execution: str
    events: Sequence[LinkEvent]


@dataclass(frozen=True)
class TimerFired:
    """A timer the core set with `SetTimer` reached its deadline (and was not cancelled)."""

    key: str


@dataclass(frozen=True)
class EffectDone:
    """An effect the core asked for (`Effect`) finished. `result` is effect-specific (`_effects.EFFECTS` says
    what each kind holds). A kind that is no row of `EFFECTS` is evidence (`unknown-effect`) and changes
    nothing."""

    effect_id: str
    kind: str
    result: Mapping[str, Any]


@dataclass(frozen=True)
class PageRead:
    """The reader page an `observe` asked for (`ReadPage`), read off the event loop: the reader's result
    dict (`{"ok": True, "page": ..., ...}` or `{"ok": False, "refusal": ...}`)."""

    conn: ConnId
    rpc_id: RpcId
    result: Mapping[str, Any]


Input = Connected | Disconnected | Call | EngineEvents | TimerFired | EffectDone | PageRead

# ----------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Reply:
    """The JSON-RPC result for (conn, rpc_id)."""

    conn: ConnId
    rpc_id: RpcId
    result: Mapping[str, Any]


@dataclass(frozen=True)
class Refuse:
    """The JSON-RPC error for (conn, rpc_id) carrying a refusal (`error.data.refusal`, CHAT-01 shape)."""

    conn: ConnId
    rpc_id: RpcId
    refusal: Mapping[str, Any]


@dataclass(frozen=True)
class Notify:
    """A JSON-RPC notification (`method`, `params`) to each connection in `to` (in order)."""

    to: tuple[ConnId, ...]
    method: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class ReadPage:
    """Read a history page for an `observe` off the event loop, then feed `PageRead` back. `cursor` is
    None for the first page of the current branch. The shell reserves the reply's place at once
    (`SocketServer.reserve`, in action order) so nothing sent to that connection afterwards overtakes it;
    the core's later `Reply`/`Refuse` for the same (conn, rpc_id) fills it."""

    conn: ConnId
    rpc_id: RpcId
    cursor: str | None


@dataclass(frozen=True)
class FlushEngine:
    """The core queued commands on its `LinkCore`: the engine shell must start writing them."""


@dataclass(frozen=True)
class SetTimer:
    """Fire `TimerFired(key)` at `deadline` (replaces a pending timer with the same key)."""

    key: str
    deadline: float


@dataclass(frozen=True)
class CancelTimer:
    key: str


@dataclass(frozen=True)
class Effect:
    """An effect the shell (or the lifecycle layer) performs off the core: `kind` names it, `payload` says
    what; its end comes back as `EffectDone(effect_id, kind, result)`. Kinds: see `_effects.EFFECTS`."""

    effect_id: str
    kind: EffectName
    payload: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Evidence:
    """A line for the controller's evidence log (never sent to clients): unknown native events (C-4
    interim), removed external queue items (C-1 interim), late stdout of an old execution (H14), ..."""

    kind: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class CloseConnection:
    """Close `conn`: after what is already queued for it, the server sends `closing` {"reason", "message"}
    and then closes."""

    conn: ConnId
    reason: str


Action = Reply | Refuse | Notify | ReadPage | FlushEngine | SetTimer | CancelTimer | Effect | Evidence | CloseConnection

Role = Literal["observer", "controller"]
