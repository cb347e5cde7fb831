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

import secrets
from collections.abc import Callable, Mapping
from typing import Any

from . import _core_admission, _core_chain, _core_drift, _core_events, _core_force
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
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    TimerFired,
)
from ._refusal import ControlRefusal
from ._state import Conn

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
            _core_events.engine_events(self, event)
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

    # -- native events

    # ------------------------------------------------------------------------------ overlap signals

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
