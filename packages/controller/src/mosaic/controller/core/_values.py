"""The controller core's state values: requests and their receipts, the pending slot, the run, stops,
confirmations, connections and the drift check in flight. Plain mutable dataclasses owned by one
`ControllerCore` (through its `_state.CoreState`); no I/O.

Each value knows its CHAT-01 record (`to_record`), so what a client sees is built in one place per
record type (schemas/chat-01-control.schema.json validates every one of them in the tests).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mosaic.pi_rpc import Command
from mosaic.pi_rpc.link import CommandOutcome

from ..engines._seam import DialogAsk
from ..engines._verdict import Checkpoint, EngineList
from ._access import actor_record
from ._io import ConnId, RpcId
from ._tables import RECEIPT_TRANSITIONS, ReceiptState, SlotCase

__all__ = [
    "IllegalTransition",
    "Request",
    "StopStep",
]

# unpersisted: the run ended, but the drift check after it found the engine's own entries torn or missing
# in the session file (a full disk): the turn is not shown completed (the core's rule 8).
TurnState = Literal["completed", "interrupted", "unknown", "unpersisted"]
BindingState = Literal["active", "stopping", "uncertain", "stopped"]
StopKind = Literal["interrupt", "force-stop"]
StopState = Literal["stopping", "reconciled", "uncertain", "stopped", "superseded"]
# Where a stop chain stands: one name, "step", in the code (the stop record's wire field keeps the schema's
# name, "phase"). An interrupt starts at "start" and moves along `_chain.CHAIN_TRANSITIONS`; a force
# stop is "requested" until its effect is done. A chain that ends ends at "done", but for an interrupt a
# force stop superseded: its record keeps the step it stood in (its state "superseded", `_chain` rule 6).
StopStep = Literal["start", "clear", "abort-due", "abort", "preflight-wait", "probe-wait", "post-clear",
                   "slot-wait", "requested", "done"]


class IllegalTransition(AssertionError):
    """A receipt move outside RECEIPT_TRANSITIONS: a bug in the core, never a client's doing."""


@dataclass(eq=False, slots=True)
class Request:
    """One admitted prompt and its receipt (CHAT-01 request + receipt records). Slotted: the core keeps a
    settled one for the rest of its incarnation (an exact retry gets its receipt: H12), so it is small."""

    request_id: str
    client_request_id: str
    actor: str
    conversation: str
    execution: str
    incarnation: str
    generation: int
    conn: ConnId
    text_digest: str
    text_bytes: int
    admitted_at: float
    receipt: ReceiptState = "admitted"
    reason: str | None = None
    native_error: str | None = None
    turn_state: TurnState | None = None
    updated_at: float = 0.0
    # The admitting connection's peer (uid, gid, pid): the tuple its connection holds, shared, so
    # a settled request kept for exact retries stays atoms only.
    peer: tuple[int, int, int] | None = None
    # The client-local draft the prompt came from (seed "Observe"; issue 26): carried into the record.
    draft_id: str | None = None
    draft_revision: int | None = None

    def move(self, new: ReceiptState, now: float, *, reason: str | None = None,
             native_error: str | None = None, turn_state: TurnState | None = None) -> None:
        """Move the receipt along RECEIPT_TRANSITIONS; anything else raises IllegalTransition."""
        if (self.receipt, new) not in RECEIPT_TRANSITIONS:
            raise IllegalTransition(f"receipt {self.request_id}: {self.receipt} -> {new} is not a CHAT-01 move")
        self.receipt = new
        self.updated_at = now
        if reason is not None:
            self.reason = reason
        if native_error is not None:
            self.native_error = native_error
        if turn_state is not None:
            self.turn_state = turn_state

    def mark_unpersisted(self) -> None:
        """The drift check after its turn found the engine's own entries torn or missing (the core's rule 8):
        a finished receipt's turn reads `unpersisted`, never `completed`. Only a finished receipt has a turn."""
        if self.receipt == "finished":
            self.turn_state = "unpersisted"

    @property
    def settled(self) -> bool:
        return self.receipt in ("finished", "failed", "delivery-unknown")

    def fields(self) -> tuple[Any, ...]:
        """Every field, in order (`Request(*fields)` makes it again): atoms only."""
        return tuple(getattr(self, f) for f in self.__slots__)

    def request_record(self) -> dict[str, Any]:
        return {
            "type": "request", "request": self.request_id, "clientRequest": self.client_request_id,
            # The dedup key's actor (`self.actor`, local-operator, H12) and who it was (`actor_record`).
            "actor": {**actor_record(self.peer or (-1, -1, -1), self.conn), "name": self.actor},
            "conversation": self.conversation, "execution": self.execution,
            "incarnation": self.incarnation, "generation": self.generation, "connection": self.conn,
            "operation": "prompt", "textDigest": self.text_digest, "textBytes": self.text_bytes,
            "admittedAt": self.admitted_at,
            **({"draftId": self.draft_id} if self.draft_id is not None else {}),
            **({"draftRevision": self.draft_revision} if self.draft_revision is not None else {}),
        }

    def receipt_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": "receipt", "receipt": f"{self.request_id}.receipt", "request": self.request_id,
            "clientRequest": self.client_request_id, "incarnation": self.incarnation,
            "execution": self.execution, "state": self.receipt, "updatedAt": self.updated_at,
        }
        if self.reason is not None:
            record["reason"] = self.reason
        if self.native_error is not None:
            record["nativeError"] = self.native_error
        if self.turn_state is not None:
            record["turnState"] = self.turn_state
        return record


@dataclass
class Slot:
    """The one pending dispatch slot (brief §1): reserved before the prompt is written, released only by
    reconciliation (an error response; an ack then agent_settled; an ack then a get_state showing no run;
    an unknown write outcome settles the receipt but poisons the pipe)."""

    request: Request
    prompt: Command
    probe: Command | None = None  # get_state written after the ack was read (handled-without-run check)
    run_started: bool = False  # an agent_start read after the ack, while this slot was held
    user_started: bool = False  # the first user message_start of that run

    def case(self) -> SlotCase:
        """Where the slot stands now, as a row of SLOT_TABLE (the row a fence landing now would use). The
        last two rows' outcomes are decided by what follows (a get_state reply, or agent_settled with no
        user message_start), so a slot whose run started is "run-started" until then."""
        if self.prompt.outcome is CommandOutcome.UNKNOWN:
            return "write-unknown"
        if self.prompt.response is None:
            return "preflight"
        return "run-started" if self.run_started else "ack-no-run"


@dataclass
class Run:
    """The engine's run as the stream shows it: from the first agent_start to agent_settled. `ours` when
    it began after the slot's ack (Pi runs a Mosaic prompt at once or not at all: the run is the slot's by
    order, brief §3 "working is inferred from order"); otherwise an external run (N13)."""

    active: bool = False
    ours: bool = False
    in_turn: bool = False  # an agent_start with no agent_end since (continuations come after an agent_end)
    aborted: bool = False  # an abort of a stop chain was written during this run
    open_tools: dict[str, str] = field(default_factory=dict)  # toolCallId -> toolName
    message_seq: int = 0  # numbers the messages of this execution for the client's delta correlation
    current_message: str | None = None

    def mark_aborted(self) -> None:
        """An abort of a stop chain was written while this run was active: its turn ends interrupted."""
        self.aborted = True


@dataclass
class Clear:
    """One clear_queue answer in a stop chain (brief §3 rules 2, 3, 5)."""

    ok: bool
    observed_at: float
    steering: int = 0
    follow_up: int = 0
    removed: tuple[dict[str, Any], ...] = ()  # digests and byte counts of removed external items

    @property
    def empty(self) -> bool:
        return self.ok and self.steering == 0 and self.follow_up == 0


@dataclass
class Stop:
    """One stop chain: an interrupt (R3-1) or a force stop (§6). One chain at a time; force stop
    supersedes an interrupt (H10)."""

    stop_id: str
    kind: StopKind
    execution: str
    conn: ConnId
    started_at: float
    state: StopState = "stopping"
    step: StopStep = "start"
    cycle: int = 1
    aborts: int = 0
    clears: list[Clear] = field(default_factory=list)
    pending: Command | None = None  # the chain's command in flight
    slot_case: SlotCase = "none"
    native_queue: Literal["cleared", "unknown"] | None = None
    reason: str | None = None
    detail: str = ""
    superseded_by: str | None = None
    supersedes: str | None = None
    confirmation: str | None = None
    ended_at: float | None = None
    outcome: dict[str, Any] | None = None  # a force stop's result from the lifecycle layer
    open_tools: dict[str, str] = field(default_factory=dict)  # tool calls open when the stop began (K5)
    approval: Literal["resolved", "uncertain"] = "resolved"  # set by the core from its dialog evidence
    actor: tuple[int, int, int] = (-1, -1, -1)  # the (uid, gid, pid) of the connection that started it

    def record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "type": "stop", "stop": self.stop_id, "kind": self.kind, "execution": self.execution,
            # The schema's field name for the step (one name, "step", everywhere else).
            "state": self.state, "phase": self.step, "startedAt": self.started_at,
            "connection": self.conn, "approvalDisposition": self.approval,
            "actor": actor_record(self.actor, self.conn),
        }
        for key, value in (("reason", self.reason), ("supersededBy", self.superseded_by),
                           ("supersedes", self.supersedes), ("confirmation", self.confirmation),
                           ("endedAt", self.ended_at)):
            if value is not None:
                record[key] = value
        if self.detail:
            record["detail"] = self.detail
        return record

    def turn_proof(self) -> dict[str, Any]:
        """CHAT-01 turnProof for an interrupt (rule 6: the proof covers the queue as of the last clear)."""
        last = self.clears[-1].observed_at if self.clears else None
        return {
            "type": "turnProof", "stop": self.stop_id, "execution": self.execution,
            "nativeQueue": self.native_queue or "unknown", "observedAt": last,
            "nativePending": [],
            "clears": [{"ok": c.ok, "observedAt": c.observed_at, "steering": c.steering,
                        "followUp": c.follow_up} for c in self.clears],
            "aborts": self.aborts, "cycles": self.cycle, "slot": self.slot_case,
            # C-1 interim: removed external items are never attributed; their digests are evidence only.
            "removedExternal": sum(len(c.removed) for c in self.clears),
        }


@dataclass
class Confirmation:
    """A single-use confirmation (CHAT-01 lines 264-268; CHAT-01C 92-100; H17): bound to its connection,
    its operation and the stop context it was issued under."""

    confirmation_id: str
    operation: Literal["force-stop", "recover"]
    conn: ConnId
    context: int
    issued_at: float
    expires_at: float
    summary: dict[str, Any]
    state: Literal["issued", "answered", "cancelled", "consumed", "expired", "void"] = "issued"

    def record(self) -> dict[str, Any]:
        return {
            "type": "confirmation", "confirmation": self.confirmation_id, "operation": self.operation,
            "connection": self.conn, "state": self.state, "stopContext": self.context,
            "issuedAt": self.issued_at, "expiresAt": self.expires_at, "summary": dict(self.summary),
        }


@dataclass
class Conn:
    """One admitted connection (the core's rule 7b: its peer's grant named it)."""

    operations: frozenset[str]  # what its peer's grant allows (the core's rule 7b), or its hello's grant
    ids: tuple[int, int, int]  # its peer's (uid, gid, pid): one tuple every record of this actor shares
    in_scope: bool = True  # its grant covers this conversation (else every request is refused `scope`)
    grant: str | None = None  # the grant its hello named (issue 26); None: no hello
    started: bool = False  # it made a request (a hello after one is refused `malformed`)
    groups: tuple[int, ...] | None = ()  # its peer's supplementary groups, as read at connect (a gid grant)
    role: str = "observer"
    subscribed_from: int | None = None  # first sequence this connection receives
    seq_at_subscribe: int = 0
    quiet_at_subscribe: bool = False
    reads: dict[RpcId, tuple[str | None, int, bool, bool]] = field(default_factory=dict)
    # observe calls awaiting their page: (cursor, the sequence at the call, quiet at the call, a limit given)

    def begin(self) -> bool:
        """The connection makes a request: whether it had made one before (a hello after one is refused)."""
        started, self.started = self.started, True
        return started


@dataclass(eq=False)
class DriftCheck:
    """One drift check in flight: its get_entries, then its file read (the core's rule 8)."""

    check_id: str
    started_at: float
    command: Command | None
    engine: EngineList | None = None
    read_effect: str | None = None
    dirty: bool = False  # an engine event arrived meanwhile: the engine was not idle, the check is void
    since: Checkpoint | None = None  # the incremental check's starting point (None: the full check)


DecisionState = Literal["open", "answered", "uncertain", "settled"]


@dataclass
class Decision:
    """One native dialog the controller may answer (rule 2), under its current projection id."""

    native: str
    projection: str
    ask: DialogAsk
    tools: set[str]  # the tool calls open when it was asked (rule 6)
    deadline: float | None
    state: DecisionState = "open"
    answer: str | None = None
    how: str | None = None
    superseded: list[str] = field(default_factory=list)  # earlier projection ids (rule 4)

    def record(self, reason: str) -> dict[str, Any]:
        ask = self.ask
        out: dict[str, Any] = {"type": "nativeDecision", "nativeDecision": self.projection, "native": self.native,
                               "method": ask.method, "title": ask.fields.get("title"),
                               "options": ask.fields.get("options"), "state": self.state, "reason": reason,
                               "choices": [label for label, _ in ask.choices or ()],
                               "refusedChoices": [{"choice": c, "reason": why} for c, why in ask.refused]}
        if self.answer is not None:
            out["answer"] = self.answer
        if self.how is not None:
            out["how"] = self.how
        for key, value in ask.fields.items():
            if key not in out:
                out[key] = value
        return out


def dialog_doubt(disabled: int, decisions: Mapping[str, Decision]) -> bool:
    """`_dialogs` rule 7: a stop's approval is uncertain while a dialog was shown disabled (ever, this
    execution) or a decision is not settled."""
    return disabled > 0 or any(d.state != "settled" for d in decisions.values())
