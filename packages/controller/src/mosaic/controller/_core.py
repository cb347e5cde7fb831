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
from collections.abc import Callable

from . import _core_admission, _core_chain, _core_clients, _core_drift, _core_events, _core_force
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
    Connected,
    Disconnected,
    EffectDone,
    EngineEvents,
    Input,
    PageRead,
    TimerFired,
)

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
            _core_clients.connect(self, event)
        elif isinstance(event, Disconnected):
            _core_clients.disconnected(self, event)
        elif isinstance(event, PageRead):
            _core_clients.page_read(self, event)
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

    def _call(self, call: Call) -> None:
        handler = _HANDLERS.get(call.method)
        if handler is None:  # the server validated the method; a bug if it did not
            self.refuse(call, "controller", f"no handler for {call.method!r}")
            return
        if _core_admission.gate(self, call):
            handler(self, call)

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
    "observe": _core_clients.observe,
    "prompt": _core_admission.prompt,
    "takeover": _core_clients.takeover,
    "interrupt": _core_chain.interrupt,
    "issue-confirmation": _core_force.issue_confirmation,
    "answer-confirmation": _core_force.answer_confirmation,
    "force-stop": _core_force.force_stop,
    "acquire-recovery-control": _core_clients.acquire_recovery,
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
