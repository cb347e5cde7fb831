"""The controller core's one record, `CoreState`, and the helpers every room uses (`_receive` lists the rooms).

`CoreState` is one execution's state: control (generation, controller), connections, the binding, the
fences, the slot, the run, the stop chains, requests and receipts, confirmations, the event sequence,
evidence counters and the drift check's state. The rooms (`_admission`, `_chain`, ...) are functions that
take it; none holds state of its own. It keeps these rules:

1. Admission is open only while the binding is active and no fence stands (`admission_open`; `_binding`
   rule 1 says who changes them).
2. Control is checked generation first, then the controlling connection (seed "Refusals" order).
3. Client actions (replies, refusals, notifications, page reads, closes: `CLIENT_ACTIONS`) go out through
   `emit`, which holds them, in order, while a drift check is in flight (`held`, `core/_drift` rule 2).
4. The effects it asks for are rows of `_effects.EFFECTS` (`ask` refuses any other kind: a bug).
5. Each field has one owner, the room that writes it (`FIELD_OWNERS`); `CoreState` stays the one record.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from mosaic.controller_client import ControlRefusal
from mosaic.pi_rpc import LinkCore

from ..engines._seam import EngineRules
from ..engines._verdict import Checkpoint, DriftConfig, FileIdentity, Verdict
from ._access import AccessPolicy, actor_record
from ._io import (
    EFFECT_NAMES,
    Action,
    Call,
    CloseConnection,
    ConnId,
    Effect,
    EffectName,
    Evidence,
    Notify,
    ReadPage,
    Refuse,
    Reply,
    RpcId,
)
from ._values import BindingState, Confirmation, Conn, Decision, DriftCheck, Request, Run, Slot, Stop

__all__ = [
    "Bounds",
    "CoreConfig",
    "FIELD_OWNERS",
]

CLIENT_ACTIONS = (Reply, Refuse, Notify, ReadPage, CloseConnection)  # held during a drift check (rule 3)
RECENT_RECEIPTS = 32  # settled receipts an observe reply repeats (and the settled requests kept in memory)


@dataclass(frozen=True)
class Bounds:
    """Seconds. Every wait the core makes on the engine is bounded (brief §1, §3)."""

    command: float = 30.0  # default response bound of an engine command (LinkCore)
    prompt_ack: float = 60.0  # a prompt's preflight (extension handlers run before the ack)
    clear: float = 10.0  # clear_queue: past it the outcome is unknown (`_chain` rule 2: no abort)
    probe: float = 10.0  # the get_state written after an ack
    settle: float = 30.0  # abort -> the run settled; past it the stop is uncertain (K9)
    confirmation_ttl: float = 300.0
    max_cycles: int = 3  # `_chain` rules 4 and 5: clear/abort cycles
    drift: float = 10.0  # the drift check's get_entries, and then its file read (`core/_drift` rule 5; W19)


@dataclass(frozen=True)
class CoreConfig:
    """What one controller incarnation is about. No defaults for identities (DESIGN principle 3)."""

    conversation: str
    execution: str  # the execution incarnation: every event carries it (§3 "Events")
    binding: str
    incarnation: str  # the controller incarnation token (§1), minted at each controller start
    # The engine's rules (the seam's `EngineRules`: Pi's are `engines.pi.PI_RULES`): every command the core
    # writes to its engine and every record it reads goes through them; the core names no engine's wire.
    engine: EngineRules = field(kw_only=True)
    actor: str = "local-operator"
    generation: int = 1
    unit: str | None = None  # the cohort's unit name, for the force-stop confirmation's summary
    # A cohort to count: a force-stop confirmation first asks for a census (the `census` effect) so its
    # summary says how many processes the stop would kill now (a count, not a proof). False: members is null.
    census: bool = False
    bounds: Bounds = field(default_factory=Bounds)
    # How the lifecycle hands the execution over: a failed load check (K8: "preflight", admission never
    # opens), an orphan found at restart (W6: uncertain, no engine to write to), a stop to continue.
    state: BindingState = "active"
    fences: Mapping[str, str] = field(default_factory=dict)
    # The idle drift check (`core/_drift`): None turns it off (a core with no session file to compare).
    drift: DriftConfig | None = None
    # What the lifecycle's restart found of earlier executions on this pair (W7: the effectReport of tool
    # calls a reboot or a crash left open, uncertain): every observe reports them.
    inherited: tuple[Mapping[str, Any], ...] = ()
    # Who may connect and what they may do (the core's rule 7b, `_access`): the owner (this process's
    # effective uid by default) may do everything, others what the grants say.
    access: AccessPolicy = field(default_factory=AccessPolicy)
    # Where the engine's limits hold (limit -> {via: cgroup | rlimit | none, value, where, liftable,
    # why}, cgroup-cohort's held_to_dict), as the launch reported them; None when this incarnation did not
    # launch the engine (unknown, never "no limits"). The binding record carries it.
    limits: Mapping[str, Mapping[str, Any]] | None = None
    # The uid this execution's engine runs as, when the lifecycle allocated one for it (`EngineUids`; the
    # claim records it too); None for the launcher's one account. The binding record carries it.
    engine_uid: int | None = None
    # Answer the engine's dialogs (issue 33, the brief's I2 after C-2: `core/_dialogs`): off by default, so every
    # dialog is shown disabled and never answered (P3); a deployment that adopts C-2 turns it on.
    answer_dialogs: bool = False

    @property
    def answers_decisions(self) -> bool:
        """Whether the engine's decisions are answered here: its dialogs with the dialogs option (issue 33), or
        its permission requests, which an engine whose rules say so asks whatever the option (issue 32, P7)."""
        return self.answer_dialogs or self.engine.permission_requests


def text_digest(text: str) -> str:
    """The text's SHA-256 as CHAT-01 writes digests (`sha256:<hex>`)."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# Who writes each field of `CoreState` (rule 5): the room that owns it assigns it, mutates its container and
# changes its values' attributes; every other room reads it, or asks the owner (a function of the owner's
# room, or a method of the value). `_state` is the record's own helpers: the outbox and its hold, ids, the
# subscriber cache, the clock of one `receive`, and what construction sets once.
FIELD_OWNERS: Mapping[str, str] = MappingProxyType({
    **dict.fromkeys(("config", "bounds", "link", "execution", "ids", "out", "held", "subs", "now"), "_state"),
    **dict.fromkeys(("generation", "controller", "controller_ids", "connections"), "_clients"),
    **dict.fromkeys(("binding_state", "fences", "context"), "_binding"),
    **dict.fromkeys(("slot", "requests", "settled", "retired"), "_slot"),
    **dict.fromkeys(("run", "sequence", "unknown_native", "late_events"), "_events"),
    **dict.fromkeys(("dialogs", "decisions", "projections", "doubt_disabled"), "_dialogs"),
    **dict.fromkeys(("stop", "stops"), "_chain"),
    **dict.fromkeys(("confirmations", "pending_effects", "pending_census"), "_force"),
    "overlaps": "_answers",
    **dict.fromkeys(("drift_check", "drift_verdict", "drift_due", "drift_seen", "checkpoint", "deferred", "resume"),
                    "_drift"),
})


class CoreState:
    """One execution's controller state and the helpers the rooms share. Not thread-safe (one event loop
    owns the core that owns it)."""

    def __init__(self, config: CoreConfig, *, now: float, link: LinkCore | None = None) -> None:
        self.config = config
        self.bounds = config.bounds
        self.link = link if link is not None else config.engine.new_wire(command_bound=config.bounds.command)
        self.execution = config.execution
        self.generation = config.generation
        self.controller: ConnId | None = None  # the controlling connection, connected or not (H11)
        self.controller_ids: tuple[int, int, int] | None = None  # its peer's (uid, gid, pid): the binding's actor
        self.connections: dict[ConnId, Conn] = {}
        self.binding_state: BindingState = config.state
        self.fences: dict[str, str] = dict(config.fences)  # reason -> detail; admission is open only when empty
        self.slot: Slot | None = None
        self.run = Run()
        self.stop: Stop | None = None
        self.stops: list[Stop] = []
        # client request id -> request: the unsettled one (the slot's) and the last RECENT_RECEIPTS settled,
        # in admission order; older settled ones leave memory for `retired`, which keeps only what an exact
        # retry needs for the rest of the incarnation (H12: the same receipt; H13: other text refused).
        self.requests: dict[str, Request] = {}
        self.settled: deque[str] = deque()
        # settled, beyond the last RECENT_RECEIPTS: for exact retries (`retire`)
        self.retired: dict[str, tuple[Any, ...]] = {}
        self.confirmations: dict[str, Confirmation] = {}
        self.context = 0  # the stop context: bumped whenever a stop starts or ends or control changes
        self.sequence = 0
        self.unknown_native: dict[str, int] = {}
        self.late_events = 0
        self.dialogs = 0
        self.decisions: dict[str, Decision] = {}  # native id -> a decision not settled yet (`_dialogs` rule 8)
        self.projections: dict[str, Decision] = {}  # every projection id given -> its decision (`_dialogs` rule 8)
        self.doubt_disabled = 0  # dialogs shown disabled (`_dialogs` rule 7)
        self.overlaps: list[tuple[str, str]] = []  # (signal, detail) of every overlap signal read
        self.ids = 0
        self.pending_effects: dict[str, tuple[ConnId, RpcId]] = {}
        self.pending_census: dict[str, Call] = {}  # census effect id -> the issue-confirmation call waiting
        self.out: list[Action] = []
        self.subs: tuple[ConnId, ...] | None = ()
        self.now = now
        # `core/_drift`: the drift check in flight, whether one is due, what the last clean check saw of the
        # file, and the client actions held while it runs (None: not holding).
        self.drift_check: DriftCheck | None = None
        self.held: list[Action] | None = None
        self.drift_verdict: Verdict | None = None  # the last check's verdict (None: it could not finish)
        self.drift_due = False
        # The last clean check's (`core/_drift` rule 1: the next one goes on from it); at the start, the engine's
        # baseline (`DriftConfig.baseline`: the file as the claim read it), if it gives one.
        base = config.drift.baseline if config.drift is not None else None
        self.drift_seen: FileIdentity | None = base.identity if base is not None else None
        self.checkpoint: Checkpoint | None = base
        # A prompt held until the check it started ends, then fed through admission again (`core/_drift` rule 6).
        self.deferred: Call | None = None
        self.resume: Call | None = None

    # ------------------------------------------------------------------------------------------ actions

    def begin(self, now: float) -> None:
        """A `receive` call begins at `now`, with nothing to carry out yet."""
        self.now = now
        self.out = []

    def take_out(self) -> list[Action]:
        """What this `receive` call has for the shells, in order; the outbox is empty after."""
        out, self.out = self.out, []
        return out

    def new_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}{self.ids}"

    def emit(self, action: Action) -> None:
        if self.held is not None and isinstance(action, CLIENT_ACTIONS):
            self.held.append(action)  # rule 3: a drift check is in flight
            return
        self.out.append(action)

    def emit_unheld(self, action: Action) -> None:
        """Emit `action` past a drift check's hold: only for a connection nothing was ever sent to (a peer
        closed at connect), which must not stay open meanwhile."""
        self.out.append(action)

    def hold(self) -> None:
        """Rule 3: from now until `unhold`, client actions are held, in order, those this call already has
        included (a drift check is about to run)."""
        held = [a for a in self.out if isinstance(a, CLIENT_ACTIONS)]
        self.out = [a for a in self.out if not isinstance(a, CLIENT_ACTIONS)]
        self.held = [*(self.held or []), *held]

    def unhold(self) -> None:
        """The held client actions go out, in their order, before anything emitted after this."""
        held, self.held = self.held, None
        if held:
            self.out.extend(held)

    def rewrite_held(self, rewrite: Callable[[Action], Action]) -> None:
        """Rebuild each held action (a drift check rewriting the receipts it holds back)."""
        if self.held is not None:
            self.held = [rewrite(action) for action in self.held]

    def ask(self, kind: EffectName, payload: Mapping[str, Any], *, effect_id: str | None = None) -> str:
        """Emit the effect `kind` (a row of `EFFECTS`, rule 4) under `effect_id` (a fresh `e` id by
        default); return its id."""
        assert kind in EFFECT_NAMES, kind
        effect = effect_id if effect_id is not None else self.new_id("e")
        self.emit(Effect(effect, kind, payload))
        return effect

    def refuse(self, call: Call, code: str, message: str) -> None:
        self.emit(Refuse(call.conn, call.rpc_id, ControlRefusal(code, message).to_dict()))

    def subscriptions_changed(self) -> None:
        """A connection subscribed, or one that was is gone: `subscribers` counts them again."""
        self.subs = None

    def subscribers(self) -> tuple[ConnId, ...]:
        """The subscribed connections, in subscription order (kept, not recomputed per record: a
        controller holding many idle or slow connections pays per subscriber, not per connection)."""
        if self.subs is None:
            self.subs = tuple(c for c, s in self.connections.items() if s.subscribed_from is not None)
        return self.subs

    def record(self, record: Mapping[str, Any]) -> None:
        subs = self.subscribers()
        if subs:
            self.emit(Notify(subs, "record", record))

    def evidence(self, kind: str, **detail: Any) -> None:
        self.emit(Evidence(kind, detail))

    # ------------------------------------------------------------------------------------ the binding

    @property
    def admission_open(self) -> bool:
        return self.binding_state == "active" and not self.fences

    def binding_record(self) -> dict[str, Any]:
        """The CHAT-01 binding record as it stands now."""
        return {
            "type": "binding", "binding": self.config.binding, "conversation": self.config.conversation,
            "execution": self.execution, "incarnation": self.config.incarnation, "generation": self.generation,
            "controllerConnection": self.controller,
            "controllerConnected": self.controller is not None and self.controller in self.connections,
            "state": self.binding_state, "admission": "open" if self.admission_open else "closed",
            "fences": sorted(self.fences), "replay": "unavailable",
            "actor": (None if self.controller is None or self.controller_ids is None
                      else actor_record(self.controller_ids, self.controller)),
            "engineState": self._engine_state(),
            "evidence": {"unknownNativeEvents": sum(self.unknown_native.values()),
                         "lateEvents": self.late_events, "dialogs": self.dialogs},
            "limits": None if self.config.limits is None else {k: dict(v) for k, v in self.config.limits.items()},
            "engineUid": self.config.engine_uid,
        }

    def _engine_state(self) -> str:
        if self.binding_state != "active":
            return self.binding_state
        if self.stop is not None and self.stop.state == "stopping":
            return "stopping"
        return "streaming" if (self.run.active or self.slot is not None) else "idle"

    def connection_record(self, conn: ConnId) -> dict[str, Any]:
        return {"type": "connection", "connection": conn,
                "role": "controller" if self.controller == conn else "observer", "generation": self.generation}

    def broadcast_binding(self) -> None:
        self.record(self.binding_record())

    # --------------------------------------------------------------------- control, stops and receipts

    def is_controller(self, call: Call) -> bool:
        return self.controller is not None and call.conn == self.controller

    def check_control(self, call: Call, generation: int) -> bool:
        """Generation, then controlling connection (rule 2). False when refused."""
        if generation != self.generation:
            # Mutant 1 removes this recheck: a stale generation from the controlling connection slips by.
            self.refuse(call, "generation", f"generation {generation} is not the current {self.generation}")
            return False
        if not self.is_controller(call):
            self.refuse(call, "controller", "this connection is not the controller")
            return False
        return True
