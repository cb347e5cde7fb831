"""The controller core, sans-io: `receive(input, *, now) -> actions` (DESIGN.md "The controller's intended
shape"; h11 is the model). It owns pi-rpc's `LinkCore`, so "under one dispatch lock" (brief §1) means
"inside one `receive` call": admission and dispatch check the same state with nothing in between.

The rules it keeps, with where they come from:

1. Admission (§1, seed README "Refusals"), in this order: the controller incarnation token
   (stale-incarnation, H21, deviation V-1); dedup by (actor, conversation, client request id) for this
   incarnation (an exact retry returns the same receipt, H12; other text is conflicting-request, H13);
   the request's generation (H1, H2); the controlling connection (S5, H15); open admission (fenced);
   the one pending slot and no run streaming (busy, H18, N13); the text policy (text-policy, draft;
   `_tables.TEXT_PREFIXES`). Refused requests send zero engine bytes.
2. Dispatch: the prompt goes to the engine through `LinkCore.send_prompt` in the same call, reserving
   the slot first. The slot is released only by reconciliation (`_tables.SLOT_TABLE`): an error
   response; an ack then agent_settled (finished, or failed ack-without-start, N11); an ack then a
   get_state written after the ack showing no run and no agent_start between (delivery-unknown
   handled-without-run, N5); an unknown write outcome (delivery-unknown transport-unknown: the pipe is
   poisoned, admission closes, the binding is uncertain; §1, H19).
3. Receipts move only along `_tables.RECEIPT_TRANSITIONS`; never to "unsent".
4. R3-1 (§3): interrupt closes admission, sends clear_queue, then abort (rule 1). A clear that fails or
   times out sends no abort (rule 2). A non-empty clear leaves the stop uncertain until C-1 (rule 3),
   its items in evidence as digests and byte counts. A slot in preflight is awaited (bounded); its ack
   means a run, so clear then abort again, at most three cycles (rule 4, N4). Reconciled only when the
   slot is settled, the run settled after the last abort, a clear sent after that came back empty and
   every clear was empty (rule 5); then admission reopens under current control.
5. Force stop needs an answered, single-use confirmation bound to its connection and stop context
   (H17); it supersedes a running interrupt (H10), closes admission and asks the lifecycle layer to
   stop the cohort (an `Effect`); its result ends the binding stopped or uncertain.
6. Events (§3, §9): native events map through `_tables.EVENT_MAP` to CHAT-01 events carrying the
   execution and a per-execution sequence; agent_settled is run-settled, never termination; an unknown
   native event is counted in evidence (C-4 interim); events of another execution are dropped and
   counted (H14). Replay is unavailable: observe returns the seam (fromSequence, quiet) and the client
   reconciles at it (E4).
7. Disconnect never releases control or a claim (H11).
7a. Attribution by order and the overlap signals (seed README "Overlap", "Run order"; brief §3 "Seal and
   attribution"): the slot's run is the one whose agent_start follows the slot's ack with no overlap
   signal between; a run that starts before the ack is another's. Each signal of `_tables.OVERLAP_SIGNALS`
   (O1-O6) closes admission (fence `overlap`), makes the binding uncertain and settles the slot's receipt
   delivery-unknown, reason run-overlap; a running interrupt ends uncertain (run-overlap) and writes no
   further abort. The interrupt's abort is decided at the end of the `receive` call that read its clear's
   answer, so an overlap read in the same chunk means no abort (H10: it would run what was queued).
   N11 on the wire Pi writes: an ack, then agent_settled with no agent_start (the run threw before it
   began: the fake's throw_at_run_start, agent-session.js 780-785) is failed, reason ack-without-start.
7b. Who may connect, and what they may do (issue 19; `_access`, its rules there): a connection whose peer
   no grant names is closed at connect with reason `channel`, unheld (nothing else was ever sent to it), and
   never becomes a connection of the core; every call is checked against the caller's grant
   (`required_operations`) before anything else (`capability`). Requests, stops and the binding name
   their actor: local-operator, and who it was (uid, gid, pid, connection).
8. Session drift (§2 "Session drift, not foreign-writer attribution"; on when `CoreConfig.drift` is set):
   when the engine is idle (admission open, no slot, no run, no stop chain, nothing of the core's in
   flight on the link) after an agent_settled or a slot's release, and once when the shell starts serving
   (`TimerFired(DRIFT_START)`: the takeover check, a baseline inode and size), the core sends get_entries
   (bounded), then asks the shell to read the session file (`Effect("read-session")`, bounded), then
   compares them (`_drift.check_drift`). While a check is in flight a prompt refuses busy (an engine
   append during it would make a false drift), and every client action (replies, refusals,
   notifications, page reads) is held, in order, until the check ends: a turn's last records (run-settled,
   the finished receipt, a reconciled stop, the binding) reach clients only once the file was checked, so
   a client that waits for them never meets the check. An engine event during a check abandons it; it
   runs again at the next idle moment. Drift closes admission (prompts refuse
   session-drift), the binding goes uncertain (reason session-drift), every subscriber gets a `marker`
   {"reason": "session-drift", ...} and evidence records the verdict; nothing is written to the engine or
   the file. Where the drift says the file does not hold the engine's own entries whole and in order
   (`_drift.PERSISTENCE_DRIFT`: partial-line, invalid-line, not-prefix, disk-behind: what a full disk
   leaves), the turn whose finished receipt the check held reads turnState `unpersisted`, never
   `completed`: no client has seen it before the check ends. A check that cannot finish (get_entries fails, times out or is malformed; the read fails or
   times out) leaves the binding uncertain with admission closed (W19).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mosaic.pi_rpc import Command, LinkCore
from mosaic.pi_rpc.link import (
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LateResponse,
    LinkPoisoned,
    NotEvidence,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    ProtocolViolation,
    TruncatedOutput,
)
from mosaic.safe_open import MAX_SESSION_FILE_BYTES

from ._access import AccessPolicy, actor_record, required_operations
from ._drift import (
    PERSISTENCE_DRIFT,
    Checkpoint,
    DriftConfig,
    EngineList,
    FileIdentity,
    SessionBytes,
    Verdict,
    check_appended,
    check_drift,
    engine_list,
)
from ._io import (
    Action,
    Call,
    CancelTimer,
    CloseConnection,
    Connected,
    ConnId,
    Disconnected,
    Effect,
    EffectDone,
    EngineEvents,
    Evidence,
    FlushEngine,
    Input,
    Notify,
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    RpcId,
    SetTimer,
    TimerFired,
)
from ._refusal import ControlRefusal
from ._state import BindingState, Clear, Confirmation, Request, Run, Slot, Stop
from ._tables import DIALOG, INTERNAL, OVERLAP_SIGNALS, check_text, classify_native

_CLIENT_ACTIONS = (Reply, Refuse, Notify, ReadPage, CloseConnection)  # held during a drift check (rule 8)
SETTLE_TIMER = "stop-settle"
DRIFT_START = "drift-start"  # fed once by the shell when it starts serving: the takeover drift check (rule 8)
DRIFT_READ_TIMER = "drift-read"  # the bound on the session file read of a drift check
CENSUS = "census"  # the effect: count the cohort now (EffectDone result {"members", "complete", "detail"})
READ_SESSION = "read-session"  # the effect: read the session file (EffectDone result {"ok", "file"|"error"})
RECENT_RECEIPTS = 32  # settled receipts an observe reply repeats (and the settled requests kept in memory)
# The engine link's record cap, derived from the reader's (no answer on the control path may be cut for its
# size while the reader still accepts the session): get_entries holds every entry of the file, each the
# bytes of its line (JSON.stringify both ways); get_tree (the load check) wraps each entry in
# {"entry":...,"children":[...]}, 27 bytes more than a line of at least ~70 (type, id, parentId, timestamp);
# agent_end holds one run's messages, all of them in the file. So twice the reader's cap, plus an envelope.
ENGINE_RECORD_CAP = 2 * MAX_SESSION_FILE_BYTES + (4 << 20)
CHAT01_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


@dataclass(frozen=True)
class Bounds:
    """Seconds. Every wait the core makes on the engine is bounded (brief §1, §3)."""

    command: float = 30.0  # default response bound of an engine command (LinkCore)
    prompt_ack: float = 60.0  # a prompt's preflight (extension handlers run before the ack)
    clear: float = 10.0  # clear_queue: past it the outcome is unknown (rule 2: no abort)
    probe: float = 10.0  # the get_state written after an ack
    settle: float = 30.0  # abort -> the run settled; past it the stop is uncertain (K9)
    confirmation_ttl: float = 300.0
    max_cycles: int = 3  # rule 4 and rule 5: clear/abort cycles
    drift: float = 10.0  # the drift check's get_entries, and then its file read (rule 8; W19)


@dataclass(frozen=True)
class CoreConfig:
    """What one controller incarnation is about. No defaults for identities (DESIGN principle 3)."""

    conversation: str
    execution: str  # the execution incarnation: every event carries it (§3 "Events")
    binding: str
    incarnation: str  # the controller incarnation token (§1), minted at each controller start
    actor: str = "local-operator"
    generation: int = 1
    unit: str | None = None  # the cohort's unit name, for the force-stop confirmation's summary
    # A cohort to count: a force-stop confirmation first asks for a census (the `census` effect) so its
    # summary says how many processes the stop would kill now (issue 12). False: members is null.
    census: bool = False
    bounds: Bounds = field(default_factory=Bounds)
    # How the lifecycle hands the execution over: a failed load check (K8: "preflight", admission never
    # opens), an orphan found at restart (W6: uncertain, no engine to write to), a stop to continue.
    state: BindingState = "active"
    fences: Mapping[str, str] = field(default_factory=dict)
    # The idle drift check (rule 8): None turns it off (a core with no session file to compare).
    drift: DriftConfig | None = None
    # What the lifecycle's restart found of earlier executions on this pair (W7: the effectReport of tool
    # calls a reboot or a crash left open, uncertain): every observe reports them.
    inherited: tuple[Mapping[str, Any], ...] = ()
    # Who may connect and what they may do (rule 7b): the owner (this process's effective uid by default)
    # may do everything, others what the grants say.
    access: AccessPolicy = field(default_factory=AccessPolicy)
    # Where the engine's limits hold (issue 19: limit -> {via: cgroup | rlimit | none, value, where, liftable,
    # why}, cgroup-cohort's held_to_dict), as the launch reported them; None when this incarnation did not
    # launch the engine (unknown, never "no limits"). The binding record carries it.
    limits: Mapping[str, Mapping[str, Any]] | None = None


@dataclass
class _Conn:
    operations: frozenset[str]  # what its peer's grant allows (rule 7b)
    ids: tuple[int, int, int]  # its peer's (uid, gid, pid): one tuple every record of this actor shares
    role: str = "observer"
    subscribed_from: int | None = None  # first sequence this connection receives
    seq_at_subscribe: int = 0
    quiet_at_subscribe: bool = False
    reads: dict[RpcId, tuple[str | None, int, bool]] = field(default_factory=dict)
    # observe calls awaiting their page: (cursor, the sequence at the call, quiet at the call)


@dataclass(eq=False)
class _DriftCheck:
    """One drift check in flight: its get_entries, then its file read (rule 8)."""

    check_id: str
    started_at: float
    command: Command | None
    engine: EngineList | None = None
    read_effect: str | None = None
    dirty: bool = False  # an engine event arrived meanwhile: the engine was not idle, the check is void
    since: Checkpoint | None = None  # the incremental check's starting point (None: the full check)


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ControllerCore:
    """One execution's controller, without I/O. Feed `Input`s with `receive`; carry out the returned
    `Action`s in order. Not thread-safe (one event loop owns it)."""

    def __init__(self, config: CoreConfig, *, now: float, link: LinkCore | None = None) -> None:
        self.config = config
        self.bounds = config.bounds
        self.link = link if link is not None else engine_link_core(config.bounds)
        self.execution = config.execution
        self.generation = config.generation
        self.controller: ConnId | None = None  # the controlling connection, connected or not (H11)
        self.controller_ids: tuple[int, int, int] | None = None  # its peer's (uid, gid, pid): the binding's actor
        self.connections: dict[ConnId, _Conn] = {}
        self.binding_state: BindingState = config.state
        self.fences: dict[str, str] = dict(config.fences)  # reason -> detail; admission is open only when empty
        self.slot: Slot | None = None
        self.run = Run()
        self.stop: Stop | None = None
        self.stops: list[Stop] = []
        # client request id -> request: the unsettled one (the slot's) and the last RECENT_RECEIPTS settled,
        # in admission order; older settled ones leave memory for `_retired`, which keeps only what an exact
        # retry needs for the rest of the incarnation (H12: the same receipt; H13: other text refused).
        self.requests: dict[str, Request] = {}
        self._settled: deque[str] = deque()
        # settled, beyond the last RECENT_RECEIPTS: for exact retries (`_retire`)
        self._retired: dict[str, tuple[Any, ...]] = {}
        self.confirmations: dict[str, Confirmation] = {}
        self.context = 0  # the stop context: bumped whenever a stop starts or ends or control changes
        self.sequence = 0
        self.unknown_native: dict[str, int] = {}
        self.late_events = 0
        self.dialogs = 0
        self.overlaps: list[tuple[str, str]] = []  # (signal, detail) of every overlap signal read
        self._ids = 0
        self._pending_effects: dict[str, tuple[ConnId, RpcId]] = {}
        self._pending_census: dict[str, Call] = {}  # census effect id -> the issue-confirmation call waiting
        self._out: list[Action] = []
        self._subs: tuple[ConnId, ...] | None = ()
        self._now = now
        # Rule 8: the drift check in flight, whether one is due, what the last clean check saw of the file,
        # and the client actions held while it runs (None: not holding).
        self.drift_check: _DriftCheck | None = None
        self._held: list[Action] | None = None
        self.drift_verdict: Verdict | None = None  # the last check's verdict (None: it could not finish)
        self._drift_due = False
        self._drift_seen: FileIdentity | None = None
        self._checkpoint: Checkpoint | None = None  # the last clean check's (rule 8: the next one goes on from it)

    # ----------------------------------------------------------------------------------------- entry

    def receive(self, event: Input, *, now: float) -> list[Action]:
        """Decide on one input; return the actions to carry out, in order. Never raises for bad client
        input or engine output (those are refusals, evidence or state); an exception is a bug."""
        self._now = now
        self._out = []
        if isinstance(event, Call):
            self._call(event)
        elif isinstance(event, EngineEvents):
            self._engine(event)
        elif isinstance(event, Connected):
            self._connect(event)
        elif isinstance(event, Disconnected):
            # H11: control stays with the disconnected connection until someone takes over explicitly.
            if self.connections.pop(event.conn, None) is not None:
                self._subs = None
                self._broadcast_binding()
        elif isinstance(event, PageRead):
            self._page_read(event)
        elif isinstance(event, TimerFired):
            self._timer(event.key)
        elif isinstance(event, EffectDone):
            self._effect_done(event)
        self._abort_if_due()
        if self.config.drift is not None:
            self._drift_step()
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------------------------ small helpers

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}{self._ids}"

    def _emit(self, action: Action) -> None:
        if self._held is not None and isinstance(action, _CLIENT_ACTIONS):
            self._held.append(action)  # rule 8: a drift check is in flight
            return
        self._out.append(action)

    def _refuse(self, call: Call, code: str, message: str) -> None:
        self._emit(Refuse(call.conn, call.rpc_id, ControlRefusal(code, message).to_dict()))

    def _subscribers(self) -> tuple[ConnId, ...]:
        """The subscribed connections, in subscription order (kept, not recomputed per record: a
        controller holding many idle or slow connections pays per subscriber, not per connection)."""
        if self._subs is None:
            self._subs = tuple(c for c, s in self.connections.items() if s.subscribed_from is not None)
        return self._subs

    def _record(self, record: Mapping[str, Any]) -> None:
        subs = self._subscribers()
        if subs:
            self._emit(Notify(subs, "record", record))

    def _evidence(self, kind: str, **detail: Any) -> None:
        self._emit(Evidence(kind, detail))

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
        }

    def _engine_state(self) -> str:
        if self.binding_state != "active":
            return self.binding_state
        if self.stop is not None and self.stop.state == "stopping":
            return "stopping"
        return "streaming" if (self.run.active or self.slot is not None) else "idle"

    def _connection_record(self, conn: ConnId) -> dict[str, Any]:
        return {"type": "connection", "connection": conn,
                "role": "controller" if self.controller == conn else "observer", "generation": self.generation}

    def _broadcast_binding(self) -> None:
        self._record(self.binding_record())

    def _new_stop(self, kind: str, conn: ConnId, **fields: Any) -> Stop:
        """A stop chain, its approval disposition from the execution's dialog evidence (seed "Approval")."""
        stop = Stop(self._id("s"), kind, self.execution, conn, self._now, **fields)  # type: ignore[arg-type]
        stop.actor = self.connections[conn].ids
        if self.dialogs:
            stop.approval = "uncertain"
        return stop

    def _fence(self, reason: str, detail: str) -> None:
        self.fences[reason] = detail

    def _uncertain(self, reason: str, detail: str) -> None:
        """The binding goes uncertain and admission stays closed; only force stop moves it on (§1, §3)."""
        if self.binding_state in ("stopped",):
            return
        if self.binding_state != "uncertain":
            self.binding_state = "uncertain"
            self.context += 1
            self._emit(Effect(self._id("e"), "claim-uncertain", {"reason": reason, "detail": detail}))
        self._fence("uncertain", reason)

    # ------------------------------------------------------------------------------------------ calls

    def _connect(self, event: Connected) -> None:
        """Rule 7b: admit the peer with what its grant allows, or close the connection `channel` at once."""
        peer = event.peer
        operations = self.config.access.operations(peer)
        if operations is None or peer is None:
            # Not held by a drift check (rule 8): nothing was ever sent to this connection to keep in order,
            # and it must not stay open meanwhile, its requests read.
            self._out.append(CloseConnection(event.conn, "channel"))
            self._evidence("channel-refused", connection=event.conn,
                           peer=None if peer is None else {"uid": peer.uid, "gid": peer.gid, "pid": peer.pid})
            return
        self.connections[event.conn] = _Conn(operations, peer.ids)

    def _call(self, call: Call) -> None:
        handler = _HANDLERS.get(call.method)
        if handler is None:  # the server validated the method; a bug if it did not
            self._refuse(call, "controller", f"no handler for {call.method!r}")
            return
        conn = self.connections.get(call.conn)
        if conn is None:  # never admitted (rule 7b: closed at connect); a shell that fed it anyway is wrong
            self._refuse(call, "channel", "this connection was not admitted: no grant names its peer")
            return
        needed = required_operations(call.method, call.params, self._served(call))
        if needed and conn.operations.isdisjoint(needed):
            self._refuse(call, "capability", f"uid {conn.ids[0]}'s grant lacks {' or '.join(needed)}, which "
                                             f"{call.method} needs")
            return
        if call.method != "observe" and call.params.get("incarnation") != self.config.incarnation:
            # Mutant 20 removes this check: H21 must then write a second prompt.
            self._refuse(call, "stale-incarnation", "the request carries another controller incarnation; "
                                                    "observe again (outcomes under the old one are unknown)")
            return
        handler(self, call)

    def _served(self, call: Call) -> str | None:
        """The operation an answer-confirmation serves: its confirmation's, when that is this connection's."""
        if call.method != "answer-confirmation":
            return None
        conf = self.confirmations.get(call.params.get("confirmation", ""))
        return conf.operation if conf is not None and conf.conn == call.conn else None

    def _is_controller(self, call: Call) -> bool:
        return self.controller is not None and call.conn == self.controller

    def _check_control(self, call: Call, generation: int) -> bool:
        """Generation, then controlling connection (seed "Refusals" order). False when refused."""
        if generation != self.generation:
            # Mutant 1 removes this recheck: a stale generation from the controlling connection slips by.
            self._refuse(call, "generation", f"generation {generation} is not the current {self.generation}")
            return False
        if not self._is_controller(call):
            self._refuse(call, "controller", "this connection is not the controller")
            return False
        return True

    # -- observe

    def _observe(self, call: Call) -> None:
        incarnation = call.params.get("incarnation")
        if incarnation is not None and incarnation != self.config.incarnation:
            self._refuse(call, "stale-incarnation", "another controller incarnation")
            return
        conn = self.connections[call.conn]
        if conn.subscribed_from is None:
            conn.subscribed_from = self.sequence + 1
            conn.seq_at_subscribe = self.sequence
            conn.quiet_at_subscribe = self._quiet()
            self._subs = None
        cursor = call.params.get("cursor")
        # Each read has its own cut: a re-observe on a subscribed connection (a client reconciling at a
        # seam, E4) reports the seam of this read, not of the first one.
        conn.reads[call.rpc_id] = (cursor, self.sequence, self._quiet())
        self._emit(ReadPage(call.conn, call.rpc_id, cursor))

    def _quiet(self) -> bool:
        """No run visible and no prompt holding the slot: Pi persisted every message of the last run
        before its agent_settled (agent-session.js 386-398), so a page read now misses nothing."""
        return not self.run.active and self.slot is None and (self.stop is None or self.stop.state != "stopping")

    def _page_read(self, event: PageRead) -> None:
        conn = self.connections.get(event.conn)
        if conn is None or event.rpc_id not in conn.reads:
            return  # it hung up meanwhile
        cursor, cut, quiet_at_call = conn.reads.pop(event.rpc_id)
        result = dict(event.result)
        if not result.get("ok", False) and cursor is not None:
            refusal = result.get("refusal")
            code = refusal.get("code") if isinstance(refusal, Mapping) else None
            self._emit(Refuse(event.conn, event.rpc_id, ControlRefusal(
                "cursor", f"the reader refused the cursor: {code}").to_dict()))
            return
        # Unavailable is not empty: a first page the reader refused is passed on as the reader's refusal.
        # Quiet: nothing ran or waited when the call came, no event was emitted before the page was read,
        # nothing runs or waits now, and the page shows the file the last drift check verified. The page is
        # read off the loop and Pi appends an entry before its event reaches stdout (FACTS a6): a prompt
        # dispatched meanwhile, or a run the core has not seen start (an extension's), may be on the page
        # before the core read one event of it; then the page holds bytes no check verified.
        quiet = quiet_at_call and self.sequence == cut and self._quiet() and self._page_verified(result)
        self._emit(Reply(event.conn, event.rpc_id, {
            "incarnation": self.config.incarnation, "connection": self._connection_record(event.conn),
            "generation": self.generation, "binding": self.binding_record(),
            "seam": {"replay": "unavailable", "streamEpoch": self.execution,
                     "fromSequence": cut + 1, "reconcile": True, "quiet": quiet},
            "receipts": self._receipts_for_observe(),
            "inherited": [dict(r) for r in self.config.inherited],
            "history": result,
        }))

    def _page_verified(self, result: Mapping[str, Any]) -> bool:
        """The page is a snapshot of the bytes the last clean drift check verified (its snapshotDigest is their
        SHA-256), or shows no file where none was verified. Without the drift check (a core with no session
        file to compare) there is nothing to compare: True, the seed's weaker rule (README "The seam")."""
        if self.config.drift is None:
            return True
        page = result.get("page") if result.get("ok") else None
        digest = page.get("snapshotDigest") if isinstance(page, Mapping) else None
        checkpoint = self._checkpoint
        if digest is None:
            return checkpoint is None
        return checkpoint is not None and checkpoint.sha256 == digest

    def _receipts_for_observe(self) -> list[dict[str, Any]]:
        """Every receipt not yet settled, and the last settled ones: what a client that lost records (a
        lagging marker, a reconnect) needs to bring its pending requests up to date, bounded: `requests`
        holds no more than these (`_retire`), so this costs the same after 10,000 prompts as after one."""
        return [r.receipt_record() for r in sorted(self.requests.values(), key=lambda r: r.admitted_at)]

    def _retire(self, request: Request) -> None:
        """`request` settled: it stays among the last RECENT_RECEIPTS settled (what observe repeats); the
        oldest beyond them moves to the exact-retry index, where nothing scans it (an exact retry gets its
        receipt for the rest of the incarnation, H12) as a tuple of its fields: a few hundred bytes, and
        atoms only, so the cyclic collector stops tracking it and a full collection never walks the index."""
        self._settled.append(request.client_request_id)
        while len(self._settled) > RECENT_RECEIPTS:
            crid = self._settled.popleft()
            old = self.requests.pop(crid, None)
            if old is not None:
                self._retired[crid] = old.fields()

    # -- prompt

    def _prompt(self, call: Call) -> None:
        params = call.params
        text = params["text"]
        crid = params["clientRequestId"]
        digest = _digest(text)
        if not CHAT01_ID.fullmatch(crid):
            self._refuse(call, "malformed", "clientRequestId is not a CHAT-01 id ([A-Za-z0-9][A-Za-z0-9._:-]{0,127})")
            return
        known = self.requests.get(crid)
        if known is None and crid in self._retired:
            known = Request(*self._retired[crid])
        if known is not None:
            if known.text_digest == digest:  # H12: the same receipt, no second dispatch
                self._emit(Reply(call.conn, call.rpc_id, {"outcome": "duplicate", "request": known.request_record(),
                                                          "receipt": known.receipt_record()}))
            else:
                self._refuse(call, "conflicting-request", f"client request {crid!r} was used for other text")
            return
        if not self._check_control(call, params["generation"]):
            return
        if "preflight" in self.fences:
            self._refuse(call, "preflight", f"the load check did not pass: {self.fences['preflight']}; admission "
                                            "never opened (K8)")
            return
        if "session-drift" in self.fences:
            self._refuse(call, "session-drift", f"the idle drift check found the session file moved under the engine "
                                                f"({self.fences['session-drift']}); admission stays closed (W10)")
            return
        if not self.admission_open:
            self._refuse(call, "fenced", f"admission is closed ({', '.join(sorted(self.fences)) or self.binding_state})")
            return
        if self.slot is not None or self.run.active or self.drift_check is not None or not self.link.can_send_prompt():
            what = ("a prompt holds the dispatch slot" if self.slot is not None else "a run is streaming"
                    if self.run.active or self.drift_check is None else "the idle drift check is in flight")
            self._refuse(call, "busy", f"{what}; CHAT-03 has no broker queue, the text stays with the client")
            return
        problem = check_text(text)
        if problem is not None:
            self._refuse(call, *problem)
            return
        self._dispatch(call, crid, text, digest)

    def _dispatch(self, call: Call, crid: str, text: str, digest: str) -> None:
        """Reserve the slot, then write (§1 "Pending dispatch slot"), inside this one receive call."""
        request = Request(self._id("r"), crid, self.config.actor, self.config.conversation, self.execution,
                          self.config.incarnation, self.generation, call.conn, digest,
                          len(text.encode("utf-8", "surrogatepass")), self._now, updated_at=self._now,
                          peer=self.connections[call.conn].ids)
        try:
            command = self.link.send_prompt(text, now=self._now, bound=self.bounds.prompt_ack)
        except LinkPoisoned as exc:  # admission checked it; a bug if this happens
            self._refuse(call, "fenced", f"the engine pipe is poisoned: {exc.reason}")
            return
        self.requests[crid] = request
        self.slot = Slot(request, command)
        self._emit(Reply(call.conn, call.rpc_id, {"outcome": "admitted", "clientRequest": {
            "type": "clientRequest", "clientRequest": crid, "actor": request.actor, "conversation": request.conversation,
            "operation": "prompt", "textDigest": digest, "textBytes": request.text_bytes},
            "request": request.request_record(), "receipt": request.receipt_record()}))
        self._record(request.request_record())
        self._record(request.receipt_record())
        self._broadcast_binding()
        self._emit(FlushEngine())  # last: what the write makes known (dispatched) follows these records

    # -- takeover and recovery control

    def _takeover(self, call: Call) -> None:
        expected = call.params["expectedGeneration"]
        if self._is_controller(call):
            self._refuse(call, "already-controller", "this connection is already the controller (H4)")
            return
        if expected != self.generation:
            self._refuse(call, "generation", f"expected generation {expected}, current {self.generation} (H1)")
            return
        if not self.admission_open:
            self._refuse(call, "fenced", "an ordinary takeover is refused while admission is closed (K9); "
                                         "force stop needs recovery control")
            return
        self._take_control(call, "takeover")

    def _acquire_recovery(self, call: Call) -> None:
        if self._is_controller(call):
            self._refuse(call, "already-controller", "this connection is already the controller")
            return
        if self.controller is not None and self.controller in self.connections:
            self._refuse(call, "controller-present", "the controller is connected; ask it, or take over")
            return
        self._take_control(call, "recovery")

    def _take_control(self, call: Call, how: str) -> None:
        previous = self.controller
        self.generation += 1
        self.controller = call.conn
        self.controller_ids = self.connections[call.conn].ids
        self.context += 1
        self._emit(Effect(self._id("e"), "claim-generation", {"generation": self.generation}))
        self._emit(Reply(call.conn, call.rpc_id, {"generation": self.generation, "how": how, "previous": previous,
                                                  "connection": self._connection_record(call.conn)}))
        self._broadcast_binding()

    # -- interrupt (R3-1)

    def _interrupt(self, call: Call) -> None:
        if not self._check_control(call, call.params["generation"]):
            return
        if self.stop is not None and self.stop.state == "stopping":
            self._refuse(call, "fenced", f"stop {self.stop.stop_id} is running")
            return
        if self.binding_state != "active":
            self._refuse(call, "fenced", f"the binding is {self.binding_state}")
            return
        if self.slot is None and not self.run.active:
            self._refuse(call, "no-turn", "no prompt holds the slot and no run is streaming")
            return
        stop = self._new_stop("interrupt", call.conn)
        stop.slot_case = self.slot.case() if self.slot is not None else "none"
        if self.slot is not None:
            self.slot.fenced_at = stop.slot_case
        self.stop = stop
        self.stops.append(stop)
        self.context += 1
        self._fence("interrupt", stop.stop_id)  # rule 1: admission closes first
        self._emit(Reply(call.conn, call.rpc_id, {"stop": stop.record()}))
        self._record(stop.record())
        self._broadcast_binding()
        self._chain_send_clear("clear")

    # -- confirmations (H17)

    def _issue_confirmation(self, call: Call) -> None:
        operation = call.params["operation"]
        if not self._is_controller(call):
            self._refuse(call, "controller", "only the controller can ask for a confirmation")
            return
        if operation == "force-stop" and self.config.census:
            # Count the cohort first (off the core); the confirmation is issued when the count is back.
            effect = self._id("n")
            self._pending_census[effect] = call
            self._emit(Effect(effect, CENSUS, {"unit": self.config.unit}))
            return
        self._confirm(call, None)

    def _census_done(self, done: EffectDone) -> None:
        call = self._pending_census.pop(done.effect_id, None)
        if call is None:
            return
        if not self._is_controller(call):  # control moved while the cohort was counted
            self._refuse(call, "controller", "only the controller can ask for a confirmation")
            return
        self._confirm(call, done.result)

    def _confirm(self, call: Call, census: Mapping[str, Any] | None) -> None:
        operation = call.params["operation"]
        members = census.get("members") if census is not None else None
        summary: dict[str, Any] = {"operation": operation, "execution": self.execution,
                                   "unit": self.config.unit,
                                   "members": members if isinstance(members, int) else None,
                                   "binding": self.binding_state, "openTools": len(self.run.open_tools)}
        if operation == "force-stop":
            summary["kills"] = "every process of the execution's engine cgroup (the cohort), frozen then killed"
            summary["membersComplete"] = bool(census.get("complete")) if census is not None else False
            summary["census"] = (str(census.get("detail", "")) if census is not None
                                 else "no cohort is counted by this controller")
        conf = Confirmation(self._id("k"), operation, call.conn, self.context, self._now,
                            self._now + self.bounds.confirmation_ttl, summary)
        self.confirmations[conf.confirmation_id] = conf
        self._emit(Reply(call.conn, call.rpc_id, {"confirmation": conf.record()}))

    def _answer_confirmation(self, call: Call) -> None:
        conf = self.confirmations.get(call.params["confirmation"])
        problem = self._confirmation_problem(call, conf, answering=True)
        if problem is not None or conf is None:
            self._refuse(call, "confirmation", problem or "no such confirmation")
            return
        conf.state = "answered" if call.params["answer"] == "confirm" else "cancelled"
        self._emit(Reply(call.conn, call.rpc_id, {"confirmation": conf.record()}))

    def _confirmation_problem(self, call: Call, conf: Confirmation | None, *, answering: bool,
                              operation: str | None = None) -> str | None:
        if conf is None:
            return "no such confirmation"
        if conf.conn != call.conn:
            return "the confirmation belongs to another connection"
        if operation is not None and conf.operation != operation:
            return f"the confirmation is for {conf.operation}, not {operation}"
        if self._now > conf.expires_at and conf.state in ("issued", "answered"):
            conf.state = "expired"
        wanted = "issued" if answering else "answered"
        if conf.state != wanted:
            return f"the confirmation is {conf.state}" + (" (single use)" if conf.state == "consumed" else "")
        if conf.context != self.context:
            conf.state = "void"
            return "the stop context changed since the confirmation was issued"
        return None

    def _use_confirmation(self, call: Call, operation: str) -> Confirmation | None:
        conf = self.confirmations.get(call.params["confirmation"])
        problem = self._confirmation_problem(call, conf, answering=False, operation=operation)
        if problem is not None or conf is None:
            self._refuse(call, "confirmation", problem or "no such confirmation")
            return None
        conf.state = "consumed"  # single use (mutant 8 leaves it answered)
        return conf

    # -- force stop (§6; the cohort part is the lifecycle layer's Effect)

    def _force_stop(self, call: Call) -> None:
        if not self._is_controller(call):
            self._refuse(call, "controller", "only the controller (or recovery control) can force stop")
            return
        if self.stop is not None and self.stop.kind == "force-stop" and self.stop.state == "stopping":
            self._refuse(call, "fenced", f"force stop {self.stop.stop_id} is running (one escalation at a time)")
            return
        if self.binding_state == "stopped":
            self._refuse(call, "fenced", "the execution is stopped")
            return
        conf = self._use_confirmation(call, "force-stop")
        if conf is None:
            return
        stop = self._new_stop("force-stop", call.conn, confirmation=conf.confirmation_id, step="requested")
        # K5: a tool call open when the stop began is an uncertain effect, whatever the engine reports
        # before it exits (Pi's RPC mode handles SIGTERM and may end the tool first).
        stop.open_tools = dict(self.run.open_tools)
        running = self.stop
        if running is not None and running.state == "stopping":  # H10: force stop supersedes the interrupt
            running.state = "superseded"
            running.superseded_by = stop.stop_id
            running.ended_at = self._now
            stop.supersedes = running.stop_id
            self._emit(CancelTimer(SETTLE_TIMER))
            self._record(running.record())
        self.stop = stop
        self.stops.append(stop)
        self.binding_state = "stopping"
        self.context += 1
        self._fence("force-stop", stop.stop_id)
        self._emit(Effect(stop.stop_id, "force-stop", {
            "stop": stop.stop_id, "confirmation": conf.confirmation_id, "execution": self.execution,
            "conversation": self.config.conversation, "openTools": dict(self.run.open_tools)}))
        self._emit(Reply(call.conn, call.rpc_id, {"stop": stop.record()}))
        self._record(stop.record())
        self._broadcast_binding()

    def _recover(self, call: Call) -> None:
        if not self._is_controller(call):
            self._refuse(call, "controller", "only the controller (or recovery control) can recover")
            return
        if self.binding_state != "stopped":
            self._refuse(call, "stop-proof", f"recovery needs a verified stop; the execution is {self.binding_state}")
            return
        conf = self._use_confirmation(call, "recover")
        if conf is None:
            return
        effect = self._id("e")
        self._pending_effects[effect] = (call.conn, call.rpc_id)
        stop = self.stops[-1] if self.stops else None
        self._emit(Effect(effect, "recover", {"confirmation": conf.confirmation_id,
                                              "stop": None if stop is None else stop.stop_id,
                                              "incarnation": self.config.incarnation}))

    # ---------------------------------------------------------------------------------- the engine side

    def _engine(self, batch: EngineEvents) -> None:
        if batch.execution != self.execution:
            # H14: late stdout of an old engine: dropped by execution incarnation, counted, never rendered.
            self.late_events += len(batch.events)
            self._evidence("late-events", execution=batch.execution, count=len(batch.events))
            return
        for event in batch.events:
            if isinstance(event, EngineEvent):
                self._native(event)
            elif isinstance(event, OutcomeKnown):
                self._known(event.command)
            elif isinstance(event, CommandWritten):
                self._written(event.command)
            elif isinstance(event, OutcomeUnknown):
                self._unknown_outcome(event.command)
            elif isinstance(event, Poisoned):
                self._poisoned(event.reason)
            elif isinstance(event, LateResponse):
                self._evidence("late-response", command=event.command.id, type=event.command.type)
            elif isinstance(event, ProtocolViolation):
                self._evidence("protocol-violation", detail=event.detail)
            elif isinstance(event, TruncatedOutput):
                self._evidence("truncated-output", bytes=len(event.tail.encode("utf-8", "surrogatepass")))

    def _written(self, command: Command) -> None:
        slot = self.slot
        if slot is not None and command is slot.prompt and slot.request.receipt == "admitted":
            slot.request.move("dispatched", self._now)
            self._record(slot.request.receipt_record())

    def _known(self, command: Command) -> None:
        slot = self.slot
        if slot is not None and command is slot.prompt:
            self._prompt_answered(slot)
        elif slot is not None and command is slot.probe:
            self._probe_answered(slot)
        elif self.stop is not None and command is self.stop.pending:
            self._chain_answered(self.stop, command)
        elif self.drift_check is not None and command is self.drift_check.command:
            self._drift_answered(self.drift_check, command)

    def _prompt_answered(self, slot: Slot) -> None:
        response = slot.prompt.response or {}
        request = slot.request
        if response.get("success") is not True:
            # An error before preflight passed (rpc-mode.js 314-318): failed, native error kept (N3, N8).
            request.move("failed", self._now, native_error=str(response.get("error", "error response")))
            self._release_slot()
            return
        request.move("acknowledged", self._now)
        self._record(request.receipt_record())
        if self.run.active and not slot.run_started:
            # O2: acked while a run it did not start is active (that run began before the ack): Pi acked it
            # in the other prompt's preflight window, and it can never run (FACTS a5, Part 2 F).
            self._overlap("O2", "the prompt was acknowledged while another run was active")
            return
        if self.link.poisoned is not None:
            # The pipe was poisoned before this ack was read (H19: a command stuck in the outbox past its
            # bound): nothing is written again, so whether a run starts can never be asked. The receipt
            # ends outcome unknown, never "unsent" (found by the random-interleavings test).
            request.move("delivery-unknown", self._now, reason="transport-unknown")
            self._release_slot()
            return
        # Is there a run? Ask with a get_state written after the ack was read (FACTS a5: only such a
        # get_state is evidence; the link enforces it in prompt_state).
        slot.probe = self.link.send({"type": "get_state"}, now=self._now, bound=self.bounds.probe)
        self._emit(FlushEngine())
        stop = self.stop
        if stop is not None and stop.state == "stopping" and stop.kind == "interrupt" and stop.step == "preflight-wait":
            # N4: the ack came after the chain's abort: a run starts now, so clear then abort again.
            self._chain_next_cycle(stop, "the slot's ack arrived after the abort (N4)")

    def _probe_answered(self, slot: Slot) -> None:
        probe = slot.probe
        assert probe is not None
        if slot.run_started:
            return
        try:
            evidence = self.link.prompt_state(slot.prompt, probe)
        except NotEvidence as exc:
            self._evidence("probe-not-evidence", detail=str(exc))
            return
        if evidence.is_streaming or evidence.agent_start_between:
            return
        # N5: acked, no run, none started: extension-handled input. Never "unsent", never resent.
        slot.request.move("delivery-unknown", self._now, reason="handled-without-run")
        self._release_slot()

    def _release_slot(self) -> None:
        """Reconciliation settled the slot's item (SLOT_TABLE): free the slot, and let a stop chain that
        was waiting on it go on (rule 5: the slot must be settled before reconciled)."""
        slot = self.slot
        assert slot is not None
        self.slot = None
        self._record(slot.request.receipt_record())
        self._retire(slot.request)
        self._drift_due = True  # rule 8: the item is settled; an extension-handled input may have appended
        stop = self.stop
        if stop is not None and stop.kind == "interrupt" and stop.state == "stopping":
            if stop.step in ("preflight-wait", "probe-wait"):
                self._chain_send_clear("post-clear")
            elif stop.step == "slot-wait":
                self._chain_finish(stop)
        self._broadcast_binding()

    def _unknown_outcome(self, command: Command) -> None:
        slot = self.slot
        if slot is not None and command is slot.prompt:
            slot.request.move("delivery-unknown", self._now, reason="transport-unknown")
            self._release_slot()
        check = self.drift_check
        if check is not None and command is check.command:
            self._drift_failed(check, f"get_entries: outcome unknown ({command.unknown_reason})")
        # The link poisons itself; `Poisoned` follows and closes admission.

    def _poisoned(self, reason: str) -> None:
        self._fence("transport", reason)
        if self.drift_check is not None:  # its get_entries may have been dropped from the outbox unwritten
            self._drift_failed(self.drift_check, f"the engine pipe is poisoned: {reason}")
        stop = self.stop
        if stop is not None and stop.state == "stopping" and stop.kind == "interrupt":
            self._chain_uncertain(stop, "transport-unknown", reason)
        if self.binding_state == "stopping":
            return  # a force stop is running: its result decides
        self._uncertain("transport-unknown", reason)
        self._broadcast_binding()

    # -- native events

    def _native(self, event: EngineEvent) -> None:
        if self.drift_check is not None:
            self.drift_check.dirty = True  # rule 8: the engine is not idle; this check can prove nothing
        record = event.record
        mapped = classify_native(record)
        kind = event.type
        if mapped is None:
            # C-4 interim: counted in evidence with its type and byte count; no client event.
            # Its size as Pi wrote it: JSON.stringify is compact, non-ASCII raw (FACTS (b) "Framing").
            size = len(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
            self.unknown_native[kind or "?"] = self.unknown_native.get(kind or "?", 0) + 1
            self._evidence("unknown-native-event", type=kind, bytes=size)
            self._broadcast_binding()
            return
        if kind in _RUN_EVENTS and not self.run.active and kind != "agent_settled":
            self._overlap("O6", f"{kind} with no run active")
        if kind == "agent_start":
            self._agent_start()
        elif kind == "agent_end":
            self.run.in_turn = False
        elif kind == "message_start":
            self._message_start(record)
        elif kind == "message_end":
            self._message_end(record)
        elif kind == "queue_update":
            self._queue_update(record)
        elif kind == "tool_execution_start":
            self.run.open_tools[str(record.get("toolCallId"))] = str(record.get("toolName"))
        elif kind == "tool_execution_end":
            self.run.open_tools.pop(str(record.get("toolCallId")), None)
        if mapped == DIALOG:
            self._dialog(record)
        elif mapped != INTERNAL:
            self._client_event(mapped, record)
        if kind == "agent_settled":
            self._agent_settled()

    def _agent_start(self) -> None:
        if self.run.active:
            if self.run.in_turn:
                self._overlap("O1", "an agent_start inside a run's turn")
            # Otherwise a continuation inside the same run (retry, queued follow-up: FACTS conformance 7).
            self.run.in_turn = True
            return
        # The slot's run is the one that starts after its ack: Pi writes the ack before the run's events
        # (the ack is queued on the output chain first, FACTS a5), so a run starting while the prompt is
        # in preflight is another's.
        slot = self.slot
        ours = slot is not None and slot.prompt.succeeded and not slot.run_started
        self.run = Run(active=True, ours=ours, in_turn=True, message_seq=self.run.message_seq)
        if ours and slot is not None:
            slot.run_started = True
        self._broadcast_binding()

    def _message_start(self, record: Mapping[str, Any]) -> None:
        message = record.get("message")
        role = message.get("role") if isinstance(message, Mapping) else None
        slot = self.slot
        if role == "user" and self.run.ours and slot is not None and not slot.user_started:
            slot.user_started = True
            if slot.request.receipt == "acknowledged":
                slot.request.move("working", self._now)
                self._record(slot.request.receipt_record())

    def _agent_settled(self) -> None:
        run = self.run
        slot = self.slot
        if run.active and run.in_turn:
            # O3: a settle inside a turn is not this run's: the losing prompt's finally (FACTS Part 2 F).
            self._overlap("O3", "an agent_settled inside a run's turn")
            return
        self._drift_due = True  # rule 8: check at the next idle moment (brief §2 "after agent_settled")
        if not run.active:
            if slot is not None and slot.prompt.succeeded and not slot.run_started:
                # N11 as Pi writes it: the ack, then agent_settled and no agent_start: the run threw before
                # it began (its finally settles, agent-session.js 780-785); no user message can be on disk.
                slot.request.move("failed", self._now, reason="ack-without-start")
                self._release_slot()
            else:
                self._overlap("O6", "an agent_settled with no run active")
            return
        self.run = Run(message_seq=run.message_seq)
        if run.ours and slot is not None:
            request = slot.request
            if slot.user_started:
                if request.receipt == "working":
                    request.move("finished", self._now, turn_state="interrupted" if run.aborted else "completed")
            elif request.receipt == "acknowledged":
                # A run that started and settled with no user message_start: it threw before the message.
                request.move("failed", self._now, reason="ack-without-start")
            self._release_slot()  # reconciliation, never agent_start (mutant 15)
        else:
            self._broadcast_binding()

    def _message_end(self, record: Mapping[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            return
        if message.get("stopReason") != "aborted":
            return
        stop = self.stop
        if stop is not None and stop.state == "stopping" and self._abort_written(stop):
            return  # the abort of this stop's chain (or of the interrupt it superseded)
        # O4: an aborted run with no abort of ours outstanding is never a stop link (lead decision 34, N9).
        self._overlap("O4", "an aborted assistant message with no abort of the controller's outstanding")

    def _abort_written(self, stop: Stop) -> bool:
        if stop.aborts:
            return True
        superseded = next((s for s in self.stops if s.stop_id == stop.supersedes), None)
        return superseded is not None and superseded.aborts > 0

    def _queue_update(self, record: Mapping[str, Any]) -> None:
        queued = [q for q in (record.get("steering"), record.get("followUp")) if isinstance(q, list) and q]
        if not queued:
            return
        stop = self.stop
        if stop is not None and stop.kind == "interrupt" and stop.state == "stopping" and stop.step == "abort-due":
            self._overlap("O5", "external input was queued between the interrupt's clear and its abort")

    # ------------------------------------------------------------------------------ overlap signals

    def _overlap(self, signal: str, detail: str) -> None:
        """One of OVERLAP_SIGNALS: admission closes, the binding goes uncertain (a running force stop
        decides the binding itself), the slot's receipt settles delivery-unknown (run-overlap), a running
        interrupt ends uncertain with no further abort. Nothing is written to the engine."""
        assert signal in OVERLAP_SIGNALS
        self.overlaps.append((signal, detail))
        self._evidence("run-overlap", signal=signal, detail=detail)
        if self.binding_state == "stopped":
            return  # the execution ended with a proof: late output of the stopped engine changes nothing
        self._fence("overlap", signal)
        slot = self.slot
        if slot is not None and not slot.request.settled:
            slot.request.move("delivery-unknown", self._now, reason="run-overlap")
            self.slot = None
            self._record(slot.request.receipt_record())
            self._retire(slot.request)
        stop = self.stop
        if stop is not None and stop.kind == "interrupt" and stop.state == "stopping":
            self._chain_uncertain(stop, "run-overlap", f"{signal}: {detail}")
        elif self.binding_state != "stopping":
            self._uncertain("run-overlap", f"{signal}: {detail}")
        self._broadcast_binding()

    def _client_event(self, event_type: str, record: Mapping[str, Any]) -> None:
        payload = self._payload(event_type, record)
        self.sequence += 1
        subs = self._subscribers()  # each subscribed at or before this sequence (fromSequence <= it)
        # The request whose run this is, inferred from order as `working` is (brief §3); null for a run no
        # Mosaic request started (an extension's, or one after an overlap signal: E3's null correlation).
        slot = self.slot
        request = slot.request.request_id if (self.run.ours and slot is not None and "overlap" not in self.fences) \
            else None
        event = {"type": "event", "event": f"{self.execution}.{self.sequence}", "execution": self.execution,
                 "sequence": self.sequence, "eventType": event_type, "visibility": "visible",
                 "at": self._now, "request": request, "payload": payload}
        if subs:
            self._emit(Notify(subs, "event", event))

    def _payload(self, event_type: str, record: Mapping[str, Any]) -> dict[str, Any]:
        if event_type == "message-start":
            self.run.message_seq += 1
            self.run.current_message = f"m{self.run.message_seq}"
            message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
            assert isinstance(message, Mapping)
            return {"message": self.run.current_message, "role": message.get("role"),
                    "content": message.get("content", [])}
        if event_type in ("text-delta", "thinking-delta"):
            sub = record.get("assistantMessageEvent")
            assert isinstance(sub, Mapping)
            return {"message": self.run.current_message, "contentIndex": sub.get("contentIndex"),
                    "delta": sub.get("delta", "")}
        if event_type == "message-end":
            message = record.get("message") if isinstance(record.get("message"), Mapping) else {}
            assert isinstance(message, Mapping)
            payload: dict[str, Any] = {"message": self.run.current_message, "role": message.get("role"),
                                       "content": message.get("content", []), "updateMode": "replace"}
            for key in ("stopReason", "errorMessage", "toolCallId", "toolName", "isError"):
                if key in message:
                    payload[key] = message[key]
            return payload
        if event_type in ("tool-start", "tool-update", "tool-end"):
            keys = {"tool-start": ("toolCallId", "toolName", "args"),
                    "tool-update": ("toolCallId", "toolName", "partialResult"),
                    "tool-end": ("toolCallId", "toolName", "result", "isError")}[event_type]
            return {k: record.get(k) for k in keys if k in record}
        return {}

    def _dialog(self, record: Mapping[str, Any]) -> None:
        # P3 (and I2 not built): a native dialog is shown disabled with a reason, never answered.
        self.dialogs += 1
        for stop in self.stops:  # seed "Approval": once a dialog was seen, every stop says so
            stop.approval = "uncertain"
        decision: dict[str, Any] = {"type": "nativeDecision", "nativeDecision": str(record.get("id", self._id("d"))),
                                    "method": record.get("method"), "title": record.get("title"),
                                    "options": record.get("options"), "state": "disabled",
                                    # Plain words for the person; the rule is P3 (CHAT-03D not adopted).
                                    "reason": "Pi asks a question here; this controller shows it but never "
                                              "answers it, so Pi decides on its own (its default or timeout)"}
        for key in ("message", "placeholder", "prefill", "timeout"):  # rpc-mode.js 47-192: the rest of the ask
            if key in record:
                decision[key] = record[key]
        self._record(decision)

    # ----------------------------------------------------------------------------- the R3-1 stop chain

    def _chain_send_clear(self, step: str) -> None:
        stop = self.stop
        assert stop is not None
        if self.link.poisoned is not None:
            self._chain_uncertain(stop, "transport-unknown", self.link.poisoned)
            return
        stop.step = step
        stop.pending = self.link.send({"type": "clear_queue"}, now=self._now, bound=self.bounds.clear)
        self._emit(FlushEngine())

    def _chain_send_abort(self, stop: Stop) -> None:
        if self.link.poisoned is not None:
            self._chain_uncertain(stop, "transport-unknown", self.link.poisoned)
            return
        stop.step = "abort"
        stop.aborts += 1
        if self.run.active:
            self.run.aborted = True
        # Pi answers abort after the run settles (rpc.md 124-135): no link bound, our own settle timer (K9).
        stop.pending = self.link.send({"type": "abort"}, now=self._now, bound=None)
        self._emit(FlushEngine())
        self._emit(SetTimer(SETTLE_TIMER, self._now + self.bounds.settle))

    def _chain_answered(self, stop: Stop, command: Command) -> None:
        if stop.kind != "interrupt" or stop.state != "stopping":
            return
        stop.pending = None
        if command.type == "clear_queue":
            self._chain_cleared(stop, command)
        elif command.type == "abort":
            self._chain_aborted(stop, command)

    def _chain_cleared(self, stop: Stop, command: Command) -> None:
        response = command.response or {}
        data = response.get("data") if isinstance(response.get("data"), Mapping) else None
        queues = self._queues(data)
        if response.get("success") is not True or queues is None:
            # Rule 2: a clear that fails sends no abort (it would run what is queued).
            stop.clears.append(Clear(False, self._now))
            self._chain_uncertain(stop, "clear-failed", str(response.get("error", "malformed clear_queue answer")))
            return
        steering, follow_up = queues
        removed = tuple({"queue": q, "digest": _digest(t), "bytes": len(t.encode("utf-8", "surrogatepass"))}
                        for q, items in (("steering", steering), ("followUp", follow_up)) for t in items)
        clear = Clear(True, self._now, len(steering), len(follow_up), removed)
        stop.clears.append(clear)
        if removed:
            # Rule 3 / C-1 interim: external input removed; never attributed, never resent; evidence only.
            self._evidence("removed-external-items", stop=stop.stop_id, items=list(removed))
        if stop.step == "clear":
            # The abort goes out at the end of this receive call, unless an overlap read meanwhile (in the
            # same chunk as this answer) makes it run what was queued (H10; `_abort_if_due`).
            stop.step = "abort-due"
        elif stop.step == "post-clear":
            self._chain_post_clear(stop, clear)

    @staticmethod
    def _queues(data: Mapping[str, Any] | None) -> tuple[list[str], list[str]] | None:
        if data is None:
            return None
        steering, follow_up = data.get("steering"), data.get("followUp")
        if not isinstance(steering, list) or not isinstance(follow_up, list):
            return None
        if not all(isinstance(t, str) for t in [*steering, *follow_up]):
            return None
        return steering, follow_up

    def _abort_if_due(self) -> None:
        """The interrupt's abort, decided once everything read with its clear's answer was seen: an
        overlap signal among it has already ended the stop uncertain (H10)."""
        stop = self.stop
        if stop is not None and stop.kind == "interrupt" and stop.state == "stopping" and stop.step == "abort-due":
            self._chain_send_abort(stop)

    def _chain_aborted(self, stop: Stop, command: Command) -> None:
        response = command.response or {}
        if response.get("success") is not True:
            self._chain_uncertain(stop, "abort-failed", str(response.get("error", "error response")))
            return
        if self.run.active:
            # Pi answers abort once idle (waitForIdle, rpc.md 124-135), so it comes after the aborted run's
            # agent_settled. An abort answered while a run is active was answered before that run began
            # (the slot's late ack, N4): it did not end it. Clear then abort again (rule 4), bounded.
            self._chain_next_cycle(stop, "a run began after the abort was answered")
            return
        # The run settled after the abort, or none was running (the stream mirrors isStreaming: every
        # agent_start and agent_settled was read in order before this response).
        self._chain_after_settle(stop)

    def _chain_after_settle(self, stop: Stop) -> None:
        self._emit(CancelTimer(SETTLE_TIMER))
        slot = self.slot
        if slot is not None and slot.prompt.response is None and slot.prompt.outcome is not CommandOutcome.UNKNOWN:
            # Rule 4, preflight in flight: wait for its response (bounded by the prompt's own bound).
            # Mutant 27 skips this wait: a late ack's run would never be aborted (N4).
            stop.step = "preflight-wait"
            return
        if slot is not None and slot.probe is not None and slot.probe.response is None and not slot.run_started:
            stop.step = "probe-wait"
            return
        self._chain_send_clear("post-clear")

    def _chain_post_clear(self, stop: Stop, clear: Clear) -> None:
        if not clear.empty:
            self._chain_next_cycle(stop, "the post-settle clear was not empty (N6)", clear_first=False)
            return
        if self.slot is not None:
            stop.step = "slot-wait"  # settles by the slot table; the chain finishes when it does
            return
        self._chain_finish(stop)

    def _chain_finish(self, stop: Stop) -> None:
        """The slot is settled and the last clear, sent after the run settled, was empty (rule 5)."""
        if not all(c.empty for c in stop.clears):
            # Rule 3: a clear removed external items; until C-1 the stop stays uncertain (mutant 26).
            stop.native_queue = "cleared"
            self._chain_uncertain(stop, "external-items-removed",
                                  "clear_queue removed input from outside Mosaic (C-1 not adopted)", native_queue="cleared")
            return
        self._chain_reconciled(stop)

    def _chain_next_cycle(self, stop: Stop, why: str, *, clear_first: bool = True) -> None:
        """Another cycle, at most `max_cycles` in all (rules 4 and 5), then uncertain with nativeQueue
        unknown. Rule 4 (a run began after the abort): clear, then abort. Rule 5 (the post-settle clear was
        not empty: it just emptied the queue): abort, settle and clear again."""
        if stop.cycle >= self.bounds.max_cycles:
            self._chain_uncertain(stop, "cycles-exhausted", f"{why}; {stop.cycle} cycles")
            return
        stop.cycle += 1
        self._emit(CancelTimer(SETTLE_TIMER))
        if clear_first:
            self._chain_send_clear("clear")
        else:
            stop.step = "abort-due"  # as after the first clear: decided at the end of this receive (H10)

    def _chain_reconciled(self, stop: Stop) -> None:
        stop.state = "reconciled"
        stop.native_queue = "cleared"
        stop.ended_at = self._now
        stop.step = "done"
        self.stop = None
        self.context += 1
        self.fences.pop("interrupt", None)  # admission reopens under current control (rule 5)
        self._emit(CancelTimer(SETTLE_TIMER))
        self._record(stop.turn_proof())
        self._record(stop.record())
        self._broadcast_binding()

    def _chain_uncertain(self, stop: Stop, reason: str, detail: str, *, native_queue: str = "unknown") -> None:
        stop.state = "uncertain"
        stop.reason = reason
        stop.detail = detail
        stop.native_queue = "cleared" if native_queue == "cleared" else "unknown"
        stop.ended_at = self._now
        stop.step = "done"
        self.stop = None
        self._emit(CancelTimer(SETTLE_TIMER))
        self._uncertain(reason, detail)  # admission stays closed; force stop is the way on
        self._record(stop.turn_proof())
        self._record(stop.record())
        self._broadcast_binding()

    # ------------------------------------------------------------------------------- timers and effects

    def _timer(self, key: str) -> None:
        if key == DRIFT_START:
            self._drift_due = True  # the takeover check; it starts at the end of this call if idle
            return
        if key == DRIFT_READ_TIMER:
            check = self.drift_check
            if check is not None and check.read_effect is not None:
                self._drift_failed(check, f"the session file read did not finish within {self.bounds.drift} s")
            return
        stop = self.stop
        if key == SETTLE_TIMER and stop is not None and stop.kind == "interrupt" and stop.state == "stopping":
            # K9: the interrupt never settled. Uncertain; force stop stays available.
            self._chain_uncertain(stop, "never-settled", f"no settle within {self.bounds.settle} s of the abort")

    def _effect_done(self, done: EffectDone) -> None:
        if done.kind == READ_SESSION:
            self._drift_read(done)
            return
        if done.kind == "force-stop":
            self._force_stop_done(done)
            return
        if done.kind == CENSUS:
            self._census_done(done)
            return
        waiting = self._pending_effects.pop(done.effect_id, None)
        if waiting is not None:
            conn, rpc_id = waiting
            refusal = done.result.get("refusal")
            if isinstance(refusal, Mapping):
                self._emit(Refuse(conn, rpc_id, dict(refusal)))
            else:
                self._emit(Reply(conn, rpc_id, dict(done.result)))
        if done.result.get("ok") is False and done.kind.startswith("claim-"):
            self._uncertain("claim-publication", str(done.result.get("error", "the claim could not be written")))
            self._broadcast_binding()

    def _force_stop_done(self, done: EffectDone) -> None:
        stop = next((s for s in self.stops if s.stop_id == done.effect_id), None)
        if stop is None or stop.kind != "force-stop":
            return
        state = done.result.get("state")
        stop.outcome = dict(done.result)
        stop.ended_at = self._now
        stop.step = "done"
        if self.stop is stop:
            self.stop = None
        self.context += 1
        open_tools = {**stop.open_tools, **self.run.open_tools}  # open when the stop began, or at its end (K5)
        slot = self.slot
        if slot is not None and not slot.request.settled:
            self._settle_at_stop(slot)
        self.run = Run(message_seq=self.run.message_seq)
        if state == "stopped":
            stop.state = "stopped"
            self.binding_state = "stopped"
        else:
            stop.state = "uncertain"
            stop.reason = str(done.result.get("reason", "uncertain"))
            if isinstance(done.result.get("detail"), str):
                stop.detail = done.result["detail"]  # what could not be done, and why (a key not written: ENOSPC)
            self.binding_state = "uncertain"
            self._fence("uncertain", stop.reason)
        # K5: a tool call open at the stop is an uncertain effect; killing is never rollback.
        self._record({"type": "effectReport", "stop": stop.stop_id, "execution": self.execution,
                      "effects": [{"toolCallId": k, "toolName": v, "state": "uncertain"} for k, v in open_tools.items()],
                      "network": "uncertain", "rollback": False})
        proof = done.result.get("proof")
        if state == "stopped" and isinstance(proof, Mapping):
            # The cohortProof the stop produced (cgroup-cohort builds it; its digest is what the claim stores).
            self._record({"type": "cohortProof", "stop": stop.stop_id, "proof": dict(proof)})
        self._record(stop.record())
        self._broadcast_binding()

    def _settle_at_stop(self, slot: Slot) -> None:
        request = slot.request
        if request.receipt == "working":
            request.move("finished", self._now, turn_state="unknown")
        elif request.receipt in ("admitted", "dispatched", "acknowledged"):
            request.move("delivery-unknown", self._now, reason="transport-unknown")
        self.slot = None
        self._record(request.receipt_record())
        self._retire(request)


    # ------------------------------------------------------------------------- the drift check (rule 8)

    def _drift_idle(self) -> bool:
        """The engine is idle: admission open, no slot, no run, no stop chain, the pipe usable (brief §2:
        "after agent_settled, with no command in flight"; the core's own commands in flight are waited
        for in `_drift_step`)."""
        link = self.link
        return (self.admission_open and self.slot is None and not self.run.active and self.stop is None
                and link.poisoned is None and not link.output_closed)

    def _drift_step(self) -> None:
        """At the end of every `receive` (rule 8): a due check starts once the engine is idle and nothing of
        the core's is in flight. From the moment it is due and the engine idle (it may still wait for the
        slot's get_state probe, answered within its bound) until it ends, client actions are held; when a
        due check cannot run (admission closed, a stop, a poisoned pipe) they are released."""
        if self.drift_check is not None:
            return  # held; `_drift_release` lets them go when it ends
        if not (self._drift_due and self._drift_idle()):
            self._drift_unhold()
            return
        # Hold what this call has for clients (the turn's last records) and everything until the check ends.
        held = [a for a in self._out if isinstance(a, _CLIENT_ACTIONS)]
        self._out = [a for a in self._out if not isinstance(a, _CLIENT_ACTIONS)]
        self._held = [*(self._held or []), *held]
        if self.link.in_flight:
            return  # the core's own command (the slot's probe): the check starts when it is answered
        self._drift_due = False
        self.drift_check = _DriftCheck(self._id("d"), self._now, None)
        self._drift_ask(self.drift_check, self._checkpoint)

    def _drift_ask(self, check: _DriftCheck, since: Checkpoint | None) -> None:
        """The check's get_entries: only what follows the checkpoint's last entry (the incremental check),
        or every entry (the full check: at the start, with no checkpoint, or when the incremental one could
        not decide)."""
        config = self.config.drift
        assert config is not None
        check.since = since if config.incremental else None
        request: dict[str, Any] = {"type": "get_entries"}
        if check.since is not None and check.since.last_id is not None:
            request["since"] = check.since.last_id
        check.command = self.link.send(request, now=self._now, bound=self.bounds.drift)
        check.engine = None
        check.read_effect = None
        self._emit(FlushEngine())

    def _drift_unhold(self) -> None:
        held, self._held = self._held, None
        if held:
            self._out.extend(held)

    def _drift_release(self) -> None:
        """The check ended: the held client actions go out, in their order, before anything it adds."""
        self.drift_check = None
        self._drift_unhold()

    def _drift_answered(self, check: _DriftCheck, command: Command) -> None:
        response = command.response or {}
        if response.get("success") is not True:
            if check.since is not None:  # the checkpoint's last entry is not the engine's: decide in full
                self._evidence("drift-check-full", check=check.check_id, why=str(response.get("error")))
                self._drift_ask(check, None)
                return
            self._drift_failed(check, f"get_entries failed: {response.get('error', 'error response')}")
            return
        try:
            check.engine = engine_list(response.get("data"))
        except ValueError as exc:
            self._drift_failed(check, f"get_entries answer: {exc}")
            return
        if check.dirty:
            self._drift_abandon(check)
            return
        check.command = None
        check.read_effect = self._id("e")
        offset = check.since.identity.size if check.since is not None else 0
        self._emit(Effect(check.read_effect, READ_SESSION, {"check": check.check_id, "from": offset}))
        self._emit(SetTimer(DRIFT_READ_TIMER, self._now + self.bounds.drift))

    def _drift_read(self, done: EffectDone) -> None:
        check = self.drift_check
        if check is None or done.effect_id != check.read_effect or check.engine is None:
            return  # a read that finished after its check ended (failed, timed out, abandoned)
        self._emit(CancelTimer(DRIFT_READ_TIMER))
        if check.dirty:
            self._drift_abandon(check)
            return
        result = done.result
        file = result.get("file")
        if result.get("ok") is not True or not (file is None or isinstance(file, SessionBytes)):
            self._drift_failed(check, f"the session file could not be read: {result.get('error', 'no bytes')}")
            return
        config = self.config.drift
        assert config is not None
        if check.since is not None:
            verdict: Verdict | None = check_appended(check.engine, file, checkpoint=check.since)
            if verdict is None:  # rule D: the ids that follow are not the engine's answer; decide in full
                self._evidence("drift-check-full", check=check.check_id, why="the appended ids differ")
                self._drift_ask(check, None)
                return
        else:
            verdict = check_drift(check.engine, file, session_id=config.session_id, previous=self._drift_seen)
        if verdict.drift and verdict.reason in PERSISTENCE_DRIFT:
            self._unpersisted()  # before the held records go out
        self._drift_release()
        self.drift_verdict = verdict
        if verdict.drift:
            self._checkpoint = None
            self._drift_found(check, verdict)
            return
        self._drift_seen = verdict.seen
        self._checkpoint = verdict.checkpoint

    def _unpersisted(self) -> None:
        """The check after a turn found the engine's own writes torn or missing: every finished receipt the
        check holds (its turn ended just before; no client has it yet) reads turnState `unpersisted`, and
        every held action that carries it (its record, an observe's receipts, an exact retry's reply) is
        rebuilt before it goes out, so no client is told a turn completed that the file does not show."""
        held = self._held or []
        ids = {a.params.get("request") for a in held if isinstance(a, Notify) and a.method == "record"
               and a.params.get("type") == "receipt" and a.params.get("state") == "finished"}
        fresh: dict[str, dict[str, Any]] = {}
        for request in self.requests.values():
            if request.request_id in ids and request.receipt == "finished":
                request.turn_state = "unpersisted"
                fresh[request.request_id] = request.receipt_record()
        if fresh:
            self._held = [_with_receipts(action, fresh) for action in held]

    def _drift_found(self, check: _DriftCheck, verdict: Verdict) -> None:
        """Drift: admission closes, the binding goes uncertain (session-drift), views reconcile (a marker to
        every subscriber), evidence keeps the verdict. Nothing is written to the engine or the file."""
        detail = f"{verdict.reason}: {verdict.detail}"
        self._evidence("session-drift", check=check.check_id, **verdict.to_evidence())
        self._fence("session-drift", detail)
        if self.binding_state != "stopping":  # a force stop running decides the binding (as for a poison)
            self._uncertain("session-drift", detail)
        self._broadcast_binding()
        subs = self._subscribers()
        if subs:
            self._emit(Notify(subs, "marker", {"reason": "session-drift", "drift": verdict.reason,
                                               "detail": verdict.detail, "execution": self.execution}))

    def _drift_failed(self, check: _DriftCheck, detail: str) -> None:
        """The check could not finish: its answer is unknown, never "no drift" (W19). Uncertain, admission
        closed."""
        self._drift_release()
        self.drift_verdict = None
        if check.read_effect is not None:
            self._emit(CancelTimer(DRIFT_READ_TIMER))
        self._evidence("drift-check-failed", check=check.check_id, detail=detail)
        self._fence("drift-check", detail)
        if self.binding_state != "stopping":
            self._uncertain("drift-check-failed", detail)
        self._broadcast_binding()

    def _drift_abandon(self, check: _DriftCheck) -> None:
        """An engine event arrived during the check: the engine was not idle, so the comparison could show
        a false drift or miss none. Void; it runs again at the next idle moment."""
        self._drift_release()
        self._drift_due = True
        self._evidence("drift-check-abandoned", check=check.check_id)


# The run grammar's events (FACTS "What a Python fake engine must mimic" 6): read while no run is active
# they are O6. agent_settled is judged in `_agent_settled` (an ack without a start explains it: N11).
_RUN_EVENTS = frozenset({"turn_start", "turn_end", "message_start", "message_update", "message_end",
                         "tool_execution_start", "tool_execution_update", "tool_execution_end", "agent_end",
                         "agent_settled"})

_HANDLERS = {
    "observe": ControllerCore._observe,
    "prompt": ControllerCore._prompt,
    "takeover": ControllerCore._takeover,
    "interrupt": ControllerCore._interrupt,
    "issue-confirmation": ControllerCore._issue_confirmation,
    "answer-confirmation": ControllerCore._answer_confirmation,
    "force-stop": ControllerCore._force_stop,
    "acquire-recovery-control": ControllerCore._acquire_recovery,
    "recover": ControllerCore._recover,
}


def _with_receipts(action: Action, fresh: Mapping[str, dict[str, Any]]) -> Action:
    """`action` with each receipt record of a request in `fresh` replaced by the fresh one: a record
    notification, and a reply's `receipt` (prompt) or `receipts` (observe)."""
    def swap(value: Any) -> Any:
        if isinstance(value, Mapping) and value.get("type") == "receipt" and value.get("request") in fresh:
            return fresh[value["request"]]
        return value

    if isinstance(action, Notify) and action.method == "record":
        return replace(action, params=swap(action.params))
    if isinstance(action, Reply) and isinstance(action.result, Mapping):
        result = dict(action.result)
        if "receipt" in result:
            result["receipt"] = swap(result["receipt"])
        if isinstance(result.get("receipts"), list):
            result["receipts"] = [swap(r) for r in result["receipts"]]
        return replace(action, result=result)
    return action


def engine_link_core(bounds: Bounds) -> LinkCore:
    """The LinkCore a controller drives its engine through: the command bound of `bounds`, the record cap
    derived from the reader's (`ENGINE_RECORD_CAP`)."""
    return LinkCore(default_bound=bounds.command, max_record_bytes=ENGINE_RECORD_CAP)


def new_incarnation() -> str:
    """A fresh controller incarnation token (§1: "Each controller start mints a random incarnation token")."""
    return "inc-" + secrets.token_hex(16)
