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

import json
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from mosaic.pi_rpc import (
    CommandWritten,
    EngineEvent,
    LateResponse,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    ProtocolViolation,
    TruncatedOutput,
)

from . import _core_admission, _core_chain, _core_drift, _core_engine, _core_force
from ._core_chain import SETTLE_TIMER
from ._core_drift import DRIFT_READ_TIMER, DRIFT_START
from ._core_state import (
    ENGINE_RECORD_CAP,
    Bounds,
    CoreConfig,
    CoreState,
    engine_link_core,
)
from ._effects import READ_SESSION
from ._io import (
    Action,
    Call,
    CloseConnection,
    Connected,
    Disconnected,
    Effect,
    EffectDone,
    EngineEvents,
    Input,
    Notify,
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    TimerFired,
)
from ._refusal import ControlRefusal
from ._state import Conn, Run
from ._tables import DIALOG, INTERNAL, classify_native

__all__ = ["DRIFT_READ_TIMER", "DRIFT_START", "ENGINE_RECORD_CAP", "READ_SESSION", "SETTLE_TIMER", "Bounds",
           "ControllerCore", "CoreConfig", "engine_link_core", "new_incarnation"]



class ControllerCore(CoreState):
    """One execution's controller, without I/O. Feed `Input`s with `receive`; carry out the returned
    `Action`s in order. Not thread-safe (one event loop owns it)."""

    # ----------------------------------------------------------------------------------------- entry

    def receive(self, event: Input, *, now: float) -> list[Action]:
        """Decide on one input; return the actions to carry out, in order. Never raises for bad client
        input or engine output (those are refusals, evidence or state); an exception is a bug."""
        self.now = now
        self.out = []
        if isinstance(event, Call):
            self._call(event)
        elif isinstance(event, EngineEvents):
            self._engine(event)
        elif isinstance(event, Connected):
            self._connect(event)
        elif isinstance(event, Disconnected):
            # H11: control stays with the disconnected connection until someone takes over explicitly.
            if self.connections.pop(event.conn, None) is not None:
                self.subs = None
                self.broadcast_binding()
        elif isinstance(event, PageRead):
            self._page_read(event)
        elif isinstance(event, TimerFired):
            self._timer(event.key)
        elif isinstance(event, EffectDone):
            self._effect_done(event)
        _core_chain.feed(self, "receive-ended")
        if self.config.drift is not None:
            _core_drift.step(self)
        out, self.out = self.out, []
        return out

    # ------------------------------------------------------------------------------------------ calls

    def _connect(self, event: Connected) -> None:
        """Rule 7b: admit the peer with what its grant allows, or close the connection `channel` at once."""
        peer = event.peer
        operations = self.config.access.operations(peer)
        if operations is None or peer is None:
            # Not held by a drift check (rule 8): nothing was ever sent to this connection to keep in order,
            # and it must not stay open meanwhile, its requests read.
            self.out.append(CloseConnection(event.conn, "channel"))
            self.evidence("channel-refused", connection=event.conn,
                           peer=None if peer is None else {"uid": peer.uid, "gid": peer.gid, "pid": peer.pid})
            return
        self.connections[event.conn] = Conn(operations, peer.ids)

    def _call(self, call: Call) -> None:
        handler = _HANDLERS.get(call.method)
        if handler is None:  # the server validated the method; a bug if it did not
            self.refuse(call, "controller", f"no handler for {call.method!r}")
            return
        if _core_admission.gate(self, call):
            handler(self, call)

    # -- observe

    def _observe(self, call: Call) -> None:
        incarnation = call.params.get("incarnation")
        if incarnation is not None and incarnation != self.config.incarnation:
            self.refuse(call, "stale-incarnation", "another controller incarnation")
            return
        conn = self.connections[call.conn]
        if conn.subscribed_from is None:
            conn.subscribed_from = self.sequence + 1
            conn.seq_at_subscribe = self.sequence
            conn.quiet_at_subscribe = self._quiet()
            self.subs = None
        cursor = call.params.get("cursor")
        # Each read has its own cut: a re-observe on a subscribed connection (a client reconciling at a
        # seam, E4) reports the seam of this read, not of the first one.
        conn.reads[call.rpc_id] = (cursor, self.sequence, self._quiet())
        self.emit(ReadPage(call.conn, call.rpc_id, cursor))

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
            self.emit(Refuse(event.conn, event.rpc_id, ControlRefusal(
                "cursor", f"the reader refused the cursor: {code}").to_dict()))
            return
        # Unavailable is not empty: a first page the reader refused is passed on as the reader's refusal.
        # Quiet: nothing ran or waited when the call came, no event was emitted before the page was read,
        # nothing runs or waits now, and the page shows the file the last drift check verified. The page is
        # read off the loop and Pi appends an entry before its event reaches stdout (FACTS a6): a prompt
        # dispatched meanwhile, or a run the core has not seen start (an extension's), may be on the page
        # before the core read one event of it; then the page holds bytes no check verified.
        quiet = quiet_at_call and self.sequence == cut and self._quiet() and self._page_verified(result)
        self.emit(Reply(event.conn, event.rpc_id, {
            "incarnation": self.config.incarnation, "connection": self.connection_record(event.conn),
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
        checkpoint = self.checkpoint
        if digest is None:
            return checkpoint is None
        return checkpoint is not None and checkpoint.sha256 == digest

    def _receipts_for_observe(self) -> list[dict[str, Any]]:
        """Every receipt not yet settled, and the last settled ones: what a client that lost records (a
        lagging marker, a reconnect) needs to bring its pending requests up to date, bounded: `requests`
        holds no more than these (`retire`), so this costs the same after 10,000 prompts as after one."""
        return [r.receipt_record() for r in sorted(self.requests.values(), key=lambda r: r.admitted_at)]

    # -- takeover and recovery control

    def _takeover(self, call: Call) -> None:
        expected = call.params["expectedGeneration"]
        if self.is_controller(call):
            self.refuse(call, "already-controller", "this connection is already the controller (H4)")
            return
        if expected != self.generation:
            self.refuse(call, "generation", f"expected generation {expected}, current {self.generation} (H1)")
            return
        if not self.admission_open:
            self.refuse(call, "fenced", "an ordinary takeover is refused while admission is closed (K9); "
                                         "force stop needs recovery control")
            return
        self._take_control(call, "takeover")

    def _acquire_recovery(self, call: Call) -> None:
        if self.is_controller(call):
            self.refuse(call, "already-controller", "this connection is already the controller")
            return
        if self.controller is not None and self.controller in self.connections:
            self.refuse(call, "controller-present", "the controller is connected; ask it, or take over")
            return
        self._take_control(call, "recovery")

    def _take_control(self, call: Call, how: str) -> None:
        previous = self.controller
        self.generation += 1
        self.controller = call.conn
        self.controller_ids = self.connections[call.conn].ids
        self.context += 1
        self.emit(Effect(self.new_id("e"), "claim-generation", {"generation": self.generation}))
        self.emit(Reply(call.conn, call.rpc_id, {"generation": self.generation, "how": how, "previous": previous,
                                                  "connection": self.connection_record(call.conn)}))
        self.broadcast_binding()

    # ---------------------------------------------------------------------------------- the engine side

    def _engine(self, batch: EngineEvents) -> None:
        if batch.execution != self.execution:
            # H14: late stdout of an old engine: dropped by execution incarnation, counted, never rendered.
            self.late_events += len(batch.events)
            self.evidence("late-events", execution=batch.execution, count=len(batch.events))
            return
        for event in batch.events:
            if isinstance(event, EngineEvent):
                self._native(event)
            elif isinstance(event, OutcomeKnown):
                _core_engine.known(self, event.command)
            elif isinstance(event, CommandWritten):
                _core_engine.written(self, event.command)
            elif isinstance(event, OutcomeUnknown):
                _core_engine.unknown_outcome(self, event.command)
            elif isinstance(event, Poisoned):
                _core_engine.poisoned(self, event.reason)
            elif isinstance(event, LateResponse):
                self.evidence("late-response", command=event.command.id, type=event.command.type)
            elif isinstance(event, ProtocolViolation):
                self.evidence("protocol-violation", detail=event.detail)
            elif isinstance(event, TruncatedOutput):
                self.evidence("truncated-output", bytes=len(event.tail.encode("utf-8", "surrogatepass")))

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
            self.evidence("unknown-native-event", type=kind, bytes=size)
            self.broadcast_binding()
            return
        if kind in _RUN_EVENTS and not self.run.active and kind != "agent_settled":
            _core_engine.overlap(self, "O6", f"{kind} with no run active")
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
                _core_engine.overlap(self, "O1", "an agent_start inside a run's turn")
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
        self.broadcast_binding()

    def _message_start(self, record: Mapping[str, Any]) -> None:
        message = record.get("message")
        role = message.get("role") if isinstance(message, Mapping) else None
        slot = self.slot
        if role == "user" and self.run.ours and slot is not None and not slot.user_started:
            slot.user_started = True
            if slot.request.receipt == "acknowledged":
                slot.request.move("working", self.now)
                self.record(slot.request.receipt_record())

    def _agent_settled(self) -> None:
        run = self.run
        slot = self.slot
        if run.active and run.in_turn:
            # O3: a settle inside a turn is not this run's: the losing prompt's finally (FACTS Part 2 F).
            _core_engine.overlap(self, "O3", "an agent_settled inside a run's turn")
            return
        self.drift_due = True  # rule 8: check at the next idle moment (brief §2 "after agent_settled")
        if not run.active:
            if slot is not None and slot.prompt.succeeded and not slot.run_started:
                # N11 as Pi writes it: the ack, then agent_settled and no agent_start: the run threw before
                # it began (its finally settles, agent-session.js 780-785); no user message can be on disk.
                slot.request.move("failed", self.now, reason="ack-without-start")
                _core_engine.release_slot(self)
            else:
                _core_engine.overlap(self, "O6", "an agent_settled with no run active")
            return
        self.run = Run(message_seq=run.message_seq)
        if run.ours and slot is not None:
            request = slot.request
            if slot.user_started:
                if request.receipt == "working":
                    request.move("finished", self.now, turn_state="interrupted" if run.aborted else "completed")
            elif request.receipt == "acknowledged":
                # A run that started and settled with no user message_start: it threw before the message.
                request.move("failed", self.now, reason="ack-without-start")
            _core_engine.release_slot(self)  # reconciliation, never agent_start (mutant 15)
        else:
            self.broadcast_binding()

    def _message_end(self, record: Mapping[str, Any]) -> None:
        message = record.get("message")
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            return
        if message.get("stopReason") != "aborted":
            return
        stop = self.stop
        if stop is not None and stop.state == "stopping" and _core_chain.abort_written(self, stop):
            return  # the abort of this stop's chain (or of the interrupt it superseded)
        # O4: an aborted run with no abort of ours outstanding is never a stop link (lead decision 34, N9).
        _core_engine.overlap(self, "O4", "an aborted assistant message with no abort of the controller's outstanding")

    def _queue_update(self, record: Mapping[str, Any]) -> None:
        queued = [q for q in (record.get("steering"), record.get("followUp")) if isinstance(q, list) and q]
        if not queued:
            return
        stop = _core_chain.running(self)
        if stop is not None and stop.step == "abort-due":
            _core_engine.overlap(self, "O5", "external input was queued between the interrupt's clear and its abort")

    # ------------------------------------------------------------------------------ overlap signals

    def _client_event(self, event_type: str, record: Mapping[str, Any]) -> None:
        payload = self._payload(event_type, record)
        self.sequence += 1
        subs = self.subscribers()  # each subscribed at or before this sequence (fromSequence <= it)
        # The request whose run this is, inferred from order as `working` is (brief §3); null for a run no
        # Mosaic request started (an extension's, or one after an overlap signal: E3's null correlation).
        slot = self.slot
        request = slot.request.request_id if (self.run.ours and slot is not None and "overlap" not in self.fences) \
            else None
        event = {"type": "event", "event": f"{self.execution}.{self.sequence}", "execution": self.execution,
                 "sequence": self.sequence, "eventType": event_type, "visibility": "visible",
                 "at": self.now, "request": request, "payload": payload}
        if subs:
            self.emit(Notify(subs, "event", event))

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
        decision: dict[str, Any] = {"type": "nativeDecision", "nativeDecision": str(record.get("id", self.new_id("d"))),
                                    "method": record.get("method"), "title": record.get("title"),
                                    "options": record.get("options"), "state": "disabled",
                                    # Plain words for the person; the rule is P3 (CHAT-03D not adopted).
                                    "reason": "Pi asks a question here; this controller shows it but never "
                                              "answers it, so Pi decides on its own (its default or timeout)"}
        for key in ("message", "placeholder", "prefill", "timeout"):  # rpc-mode.js 47-192: the rest of the ask
            if key in record:
                decision[key] = record[key]
        self.record(decision)

    # ------------------------------------------------------------------------------- timers and effects

    def _timer(self, key: str) -> None:
        fired = _TIMERS.get(key)
        if fired is not None:
            fired(self)

    def _effect_done(self, done: EffectDone) -> None:
        if done.kind == READ_SESSION:
            _core_drift.read_done(self, done)
            return
        _core_force.effect_done(self, done)


# The run grammar's events (FACTS "What a Python fake engine must mimic" 6): read while no run is active
# they are O6. agent_settled is judged in `_agent_settled` (an ack without a start explains it: N11).
_RUN_EVENTS = frozenset({"turn_start", "turn_end", "message_start", "message_update", "message_end",
                         "tool_execution_start", "tool_execution_update", "tool_execution_end", "agent_end",
                         "agent_settled"})

_HANDLERS: dict[str, Callable[[ControllerCore, Call], None]] = {
    "observe": ControllerCore._observe,
    "prompt": _core_admission.prompt,
    "takeover": ControllerCore._takeover,
    "interrupt": _core_chain.interrupt,
    "issue-confirmation": _core_force.issue_confirmation,
    "answer-confirmation": _core_force.answer_confirmation,
    "force-stop": _core_force.force_stop,
    "acquire-recovery-control": ControllerCore._acquire_recovery,
    "recover": _core_force.recover,
}


def new_incarnation() -> str:
    """A fresh controller incarnation token (§1: "Each controller start mints a random incarnation token")."""
    return "inc-" + secrets.token_hex(16)


# The core's timers: each one's room decides (the shell fires a key the core set, or DRIFT_START once).
_TIMERS: dict[str, Callable[[CoreState], None]] = {
    DRIFT_START: _core_drift.start,
    DRIFT_READ_TIMER: _core_drift.read_timed_out,
    SETTLE_TIMER: _core_chain.settle_timed_out,
}
