"""The controller core, sans-io: `receive(input, *, now) -> actions` (DESIGN.md "The controller's intended
shape"; h11 is the model). It owns pi-rpc's `LinkCore`, so "under one dispatch lock" (brief §1) means
"inside one `receive` call": admission and dispatch check the same state with nothing in between.

`ControllerCore` is the one entry. It holds a `CoreState` and hands each input to the room that decides;
the rooms are modules of functions that take that state, each opening with the rules it keeps. The
rules, numbered as the tests and the package README cite them, and where each one lives:

1. Admission, in order (§1, seed README "Refusals"): `_admission`, two tables walked by the core
   and by a test: the gate every call passes (channel, capability, stale-incarnation), then a prompt's
   (malformed id, dedup H12/H13, generation, controller, preflight/session-drift/fenced, busy, the text
   policy). Refused requests send zero engine bytes.
2. Dispatch: the slot is reserved and the prompt written in the same call (`_admission`, `_slot.reserve`);
   the slot is released in one place, by reconciliation (`_slot.release`; `_answers`, `_events` and
   `_force` say how it settled; `core/_tables.SLOT_TABLE`).
3. Receipts move only along `core/_tables.RECEIPT_TRANSITIONS`; never to "unsent" (`_values.Request.move`).
4. R3-1 (§3), the interrupt's stop chain: `_chain`, a step and a transition table checked at import; every
   stop is written there, and every way a chain ends is a row of its table.
5. Force stop, confirmations (H17), recover and the effects' results: `_force` (the effect kinds:
   `_effects.EFFECTS`, one table every dispatch site reads).
6. Events (§3, §9): the native map, attribution by order, the run's settle, dialogs: `_events`.
7. Disconnect never releases control or a claim (H11); observe and its seam (E4), takeover and
   recovery control: `_clients`.
7a. Attribution by order and the overlap signals (seed README "Overlap", "Run order"): read in
   `_events`, acted on in `_answers.overlap`; the abort decided at the end of the call that read
   its clear's answer (H10: `_chain`'s `receive-ended`).
7b. Who may connect, and what they may do (seed README "Refusals"; `_access`): closed `channel` at connect
   (`_clients`), every call checked against the caller's grant first (`_admission`).
8. Session drift (§2; on when `CoreConfig.drift` is set): `core/_drift` schedules the idle check, holds
   client actions while it runs and acts on its verdict (the engine's compare decides, pure: Pi's is
   `engines/pi/_drift`); before a prompt runs it compares the shell's look at the file with the last
   verified point, and holds the prompt for a check when the file grew (issue 27; admission's last row,
   fed again through `_call` when the check ends).
9. The binding's state, its fences and the stop context change only in `_binding` (uncertain is one-way).

The shared state is one record, `_state.CoreState`, with its own helpers (the outbox and its hold, refuse,
record, evidence, the binding record, control checks, `ask` for an effect); each of its fields is written
only by its owner room (`_state.FIELD_OWNERS`, checked by a test). The values it holds are `_values`. The
rooms import downward only, in this order (a room calls one above it only through the core's dispatch,
never by import):

    _io, _values, _tables  <  _state  <  _binding  <  _drift  <  _chain  <  _slot  <  _answers  <  _events
      <  _admission, _clients, _force  <  _effects  <  _receive
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mosaic.controller_client import UNVERIFIED_METHODS
from mosaic.pi_rpc import LinkCore

from ..engines._seam import ENGINE_RECORD_CAP
from ..engines._verdict import Verdict
from . import _admission, _chain, _clients, _dialogs, _drift, _events, _force
from ._chain import SETTLE_TIMER
from ._drift import DRIFT_READ_TIMER, DRIFT_START
from ._effects import EFFECTS
from ._io import (
    Action,
    Call,
    Connected,
    ConnId,
    Disconnected,
    EffectDone,
    EngineEvents,
    Input,
    PageRead,
    TimerFired,
)
from ._state import Bounds, CoreConfig, CoreState
from ._values import BindingState, Confirmation, Conn, DriftCheck, Request, Run, Slot, Stop

# The timer and effect names the shells and tests use, and the configuration, are importable from here too.
__all__ = ["DRIFT_READ_TIMER", "DRIFT_START", "ENGINE_RECORD_CAP", "SETTLE_TIMER", "Bounds",
           "ControllerCore", "CoreConfig", "new_incarnation"]


class ControllerCore:
    """One execution's controller, without I/O. Feed `Input`s with `receive`; carry out the returned
    `Action`s in order. Not thread-safe (one event loop owns it).

    Its state is a `CoreState` the rooms share; the core shows it read-only (the properties below, for the
    shells, rigs and tests), and only `receive` changes it."""

    def __init__(self, config: CoreConfig, *, now: float, link: LinkCore | None = None) -> None:
        self._s = CoreState(config, now=now, link=link)

    def receive(self, event: Input, *, now: float) -> list[Action]:
        """Decide on one input; return the actions to carry out, in order. Never raises for bad client
        input or engine output (those are refusals, evidence or state); an exception is a bug."""
        s = self._s
        s.begin(now)
        if isinstance(event, Call):
            _call(s, event)
        elif isinstance(event, EngineEvents):
            _events.engine_events(s, event)
        elif isinstance(event, Connected):
            _clients.connect(s, event)
        elif isinstance(event, Disconnected):
            _clients.disconnected(s, event)
        elif isinstance(event, PageRead):
            _clients.page_read(s, event)
        elif isinstance(event, TimerFired):
            fired = _TIMERS.get(event.key)
            if fired is not None:
                fired(s)
            elif event.key.startswith(_dialogs.DIALOG_TIMER):
                _dialogs.timed_out(s, event.key)
        elif isinstance(event, EffectDone):
            row = EFFECTS.get(event.kind)
            if row is None:  # no shell sends one: evidence, nothing changes (`_effects` rule 1)
                s.evidence("unknown-effect", effect=event.effect_id, effectKind=str(event.kind))
            else:
                row.done(s, event)
        _chain.feed(s, "receive-ended")  # the interrupt's abort, decided now (H10)
        _dialogs.interrupted(s)  # `_dialogs` rule 5: a decision open while a stop runs is uncertain (P6)
        if s.config.drift is not None:
            _drift.step(s)
            call = _drift.take_resume(s)
            if call is not None:  # a prompt held for the check that just ended (rule 8; `core/_drift` rule 6)
                _call(s, call)
                _drift.step(s)
        return s.take_out()

    def wants_session_stat(self, call: Call) -> bool:
        """True when the shell should look at the session file (`Call.session`, one stat) before it feeds
        `call`: a prompt, with the drift check on (`core/_drift` rule 6). Without a look, the core reads the
        file before the prompt runs."""
        return call.method == "prompt" and self._s.config.drift is not None

    @property
    def admission_open(self) -> bool:
        return self._s.admission_open

    def binding_record(self) -> dict[str, Any]:
        """The CHAT-01 binding record as it stands now."""
        return self._s.binding_record()

    # -- the state, read-only

    @property
    def config(self) -> CoreConfig:
        return self._s.config

    @property
    def bounds(self) -> Bounds:
        return self._s.bounds

    @property
    def link(self) -> LinkCore:
        return self._s.link

    @property
    def execution(self) -> str:
        return self._s.execution

    @property
    def generation(self) -> int:
        return self._s.generation

    @property
    def controller(self) -> ConnId | None:
        return self._s.controller

    @property
    def connections(self) -> Mapping[ConnId, Conn]:
        return self._s.connections

    @property
    def binding_state(self) -> BindingState:
        return self._s.binding_state

    @property
    def fences(self) -> Mapping[str, str]:
        return self._s.fences

    @property
    def slot(self) -> Slot | None:
        return self._s.slot

    @property
    def run(self) -> Run:
        return self._s.run

    @property
    def stop(self) -> Stop | None:
        return self._s.stop

    @property
    def stops(self) -> Sequence[Stop]:
        return self._s.stops

    @property
    def requests(self) -> Mapping[str, Request]:
        return self._s.requests

    @property
    def confirmations(self) -> Mapping[str, Confirmation]:
        return self._s.confirmations

    @property
    def context(self) -> int:
        return self._s.context

    @property
    def sequence(self) -> int:
        return self._s.sequence

    @property
    def unknown_native(self) -> Mapping[str, int]:
        return self._s.unknown_native

    @property
    def late_events(self) -> int:
        return self._s.late_events

    @property
    def dialogs(self) -> int:
        return self._s.dialogs

    @property
    def overlaps(self) -> Sequence[tuple[str, str]]:
        return self._s.overlaps

    @property
    def drift_check(self) -> DriftCheck | None:
        return self._s.drift_check

    @property
    def drift_verdict(self) -> Verdict | None:
        return self._s.drift_verdict


def _call(s: CoreState, call: Call) -> None:
    handler = _HANDLERS.get(call.method)
    if handler is None and call.method not in UNVERIFIED_METHODS:  # the server validated it: a bug if not
        s.refuse(call, "controller", f"no handler for {call.method!r}")
        return
    if _admission.gate(s, call) and handler is not None:  # the gate refuses every unverified method
        handler(s, call)


# Each method's room (the server validated the method and its params).
_HANDLERS: dict[str, Callable[[CoreState, Call], None]] = {
    "hello": _clients.hello,
    "observe": _clients.observe,
    "prompt": _admission.prompt,
    "takeover": _clients.takeover,
    "interrupt": _chain.interrupt,
    "issue-confirmation": _force.issue_confirmation,
    "answer-confirmation": _force.answer_confirmation,
    "force-stop": _force.force_stop,
    "acquire-recovery-control": _clients.acquire_recovery,
    "recover": _force.recover,
    "approval": _dialogs.answer,  # refused `unsupported-capability` by the gate unless the dialogs are answered
}


def new_incarnation() -> str:
    """A fresh controller incarnation token (§1: "Each controller start mints a random incarnation token")."""
    return "inc-" + secrets.token_hex(16)


# The core's timers: each one's room decides (the shell fires a key the core set, or DRIFT_START once).
_TIMERS: dict[str, Callable[[CoreState], None]] = {
    DRIFT_START: _drift.start,
    DRIFT_READ_TIMER: _drift.read_timed_out,
    SETTLE_TIMER: _chain.settle_timed_out,
}
