"""The core's slot room: the one pending dispatch slot and the receipts of the requests it holds (`_state.
FIELD_OWNERS`: `slot`, `requests`, `settled`, `retired`).

The rules it keeps (the core's rules 2 and 3; brief §1 "Pending dispatch slot"):

1. The slot is reserved before the prompt is written, in the same `receive` call (`reserve`); it holds one
   request, whose receipt moves only along `core/_tables.RECEIPT_TRANSITIONS` (`advance`, `Request.move`).
2. The slot is released in one place (`release`), however it settles (`Settle`: an error response, an ack
   read after the pipe was poisoned, an ack with no run, an unknown write, an ack then a settle with no
   start, the run's settle, an overlap signal, a force stop): its receipt moves to where that settle
   ends it, the slot is freed, the receipt goes to the subscribers, the request retires, a drift check is
   due (the item settled; an extension-handled input may have appended: `core/_drift` rule 1) and the running
   chain is told (`slot-released`, or the overlap that ended it). Reconciliation (`reconcile`) then
   broadcasts the binding; an overlap and a force stop broadcast it once at their end.
3. A settled request stays among the last RECENT_RECEIPTS settled (what observe repeats); older ones keep
   only what an exact retry needs (H12, H13), as a tuple of atoms (`retire`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mosaic.pi_rpc import Command

from . import _chain, _drift
from ._chain import ChainEvent
from ._state import RECENT_RECEIPTS, CoreState
from ._tables import ReceiptState
from ._values import Request, Slot, TurnState

__all__ = ["Settle", "SettleCause", "advance", "at_stop", "probe_sent", "reconcile", "release", "reserve", "retire",
           "run_started", "user_started"]

SettleCause = Literal["error-response", "ack-after-poison", "handled-without-run", "write-unknown",
                      "ack-without-start", "run-settled", "overlap", "force-stop"]


@dataclass(frozen=True)
class Settle:
    """How the slot's receipt ends (rule 2): its cause, and the state it moves to (None: it stands where it
    ends already), with the reason, the native error or the turn's state that go with it."""

    cause: SettleCause
    state: ReceiptState | None
    reason: str | None = None
    native_error: str | None = None
    turn_state: TurnState | None = None


def reserve(s: CoreState, request: Request, command: Command) -> None:
    """The slot is taken for `request`, whose prompt is `command` (rule 1)."""
    s.requests[request.client_request_id] = request
    s.slot = Slot(request, command)


def advance(s: CoreState, state: ReceiptState) -> None:
    """The slot's receipt moves on (dispatched, acknowledged, working) and its subscribers see it (rule 1)."""
    slot = s.slot
    assert slot is not None
    slot.request.move(state, s.now)
    s.record(slot.request.receipt_record())


def probe_sent(s: CoreState, command: Command) -> None:
    """The get_state written after the slot's ack (the handled-without-run check)."""
    assert s.slot is not None
    s.slot.probe = command


def run_started(s: CoreState) -> None:
    """The run that started after the slot's ack is the slot's (attribution by order)."""
    assert s.slot is not None
    s.slot.run_started = True


def user_started(s: CoreState) -> None:
    """The slot's run showed its first user message: working, inferred from order (brief §3)."""
    slot = s.slot
    assert slot is not None
    slot.user_started = True
    if slot.request.receipt == "acknowledged":
        advance(s, "working")


def at_stop(request: Request) -> Settle:
    """How a force stop's end settles the slot: a working turn finished, its state unknown; a prompt not yet
    known to run, delivery-unknown (transport-unknown)."""
    if request.receipt == "working":
        return Settle("force-stop", "finished", turn_state="unknown")
    if request.receipt in ("admitted", "dispatched", "acknowledged"):
        return Settle("force-stop", "delivery-unknown", reason="transport-unknown")
    return Settle("force-stop", None)


def release(s: CoreState, settle: Settle, *, then: ChainEvent = "slot-released") -> None:
    """The one release path (rule 2): the receipt settles as `settle` says, the slot is free, the receipt is
    recorded, the request retires, a drift check is due, and the running chain hears `then`."""
    slot = s.slot
    assert slot is not None
    if settle.state is not None:
        slot.request.move(settle.state, s.now, reason=settle.reason, native_error=settle.native_error,
                          turn_state=settle.turn_state)
    s.slot = None
    s.record(slot.request.receipt_record())
    retire(s, slot.request)
    _drift.due(s)
    _chain.feed(s, then)


def reconcile(s: CoreState, settle: Settle) -> None:
    """Reconciliation settled the slot's item (`core/_tables.SLOT_TABLE`): released, then the binding goes out."""
    release(s, settle)
    s.broadcast_binding()


def retire(s: CoreState, request: Request) -> None:
    """`request` settled: it stays among the last RECENT_RECEIPTS settled (what observe repeats); the
    oldest beyond them moves to the exact-retry index, where nothing scans it (an exact retry gets its
    receipt for the rest of the incarnation, H12) as a tuple of its fields: a few hundred bytes, and
    atoms only, so the cyclic collector stops tracking it and a full collection never walks the index."""
    s.settled.append(request.client_request_id)
    while len(s.settled) > RECENT_RECEIPTS:
        crid = s.settled.popleft()
        old = s.requests.pop(crid, None)
        if old is not None:
            s.retired[crid] = old.fields()
