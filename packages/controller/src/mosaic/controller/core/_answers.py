"""The core's engine room: what the engine's answers make of the dispatch slot, the poisoned pipe, and
the overlap signals.

The rules it keeps (the core's rules 2, 3 and 7a; `core/_tables.SLOT_TABLE`, `RECEIPT_TRANSITIONS`,
`OVERLAP_SIGNALS`):

1. The slot is released only by reconciliation (`_slot.reconcile`, the one release path): an error response (failed, the native
   error kept: N3, N8); an ack then agent_settled (finished, or failed ack-without-start, N11:
   `_events`); an ack then a get_state written after the ack showing no run and no agent_start between
   (delivery-unknown handled-without-run, N5; FACTS a5: only such a get_state is evidence); an unknown write
   outcome (delivery-unknown transport-unknown: the pipe is poisoned, admission closes, the binding is
   uncertain; §1, H19). A released slot lets a stop chain waiting on it go on, and makes a drift check due.
2. Receipts move only along `core/_tables.RECEIPT_TRANSITIONS` (`Request.move` raises otherwise); never to
   "unsent". An ack read after the pipe was poisoned ends delivery-unknown: nothing is written again.
3. A poisoned pipe fences admission (`transport`), fails a drift check in flight, ends a running interrupt
   uncertain and makes the binding uncertain, unless a force stop is running (its result decides).
4. Each of the engine's overlap signals (Pi's: `engines/pi/_tables.OVERLAP_SIGNALS`, O1-O6; `overlap`) closes admission (fence `overlap`), makes the
   binding uncertain and settles the slot's receipt delivery-unknown, reason run-overlap; a running
   interrupt ends uncertain (run-overlap) and writes no further abort. Nothing is written to the engine. A
   stopped execution's late output changes nothing. O2 is read here (an ack while another run is active);
   the others in `_events`.
"""

from __future__ import annotations

from mosaic.pi_rpc import Command

from . import _binding, _chain, _drift, _slot
from ._io import FlushEngine
from ._slot import Settle
from ._state import CoreState
from ._values import Slot


def written(s: CoreState, command: Command) -> None:
    """The prompt's line was written whole: its receipt reads dispatched."""
    slot = s.slot
    if slot is not None and command is slot.prompt and slot.request.receipt == "admitted":
        _slot.advance(s, "dispatched")


def known(s: CoreState, command: Command) -> None:
    """A command of the core's has its answer: the slot's prompt or probe, the chain's, the drift check's."""
    slot = s.slot
    if slot is not None and command is slot.prompt:
        _prompt_answered(s, slot)
    elif slot is not None and command is slot.probe:
        _probe_answered(s, slot)
    elif s.stop is not None and command is s.stop.pending:
        _chain.answered(s, command)
    elif s.drift_check is not None and command is s.drift_check.command:
        _drift.answered(s, s.drift_check, command)


def _prompt_answered(s: CoreState, slot: Slot) -> None:
    answer = s.config.engine.prompt_answer(slot.prompt)
    if not answer.ok:
        # An error before preflight passed (Pi: rpc-mode.js 314-318): failed, native error kept (N3, N8).
        _slot.reconcile(s, Settle("error-response", "failed", native_error=answer.error))
        return
    _slot.advance(s, "acknowledged")
    if s.run.active and not slot.run_started:
        # O2: acked while a run it did not start is active (that run began before the ack): Pi acked it
        # in the other prompt's preflight window, and it can never run (FACTS a5, Part 2 F).
        overlap(s, "O2", "the prompt was acknowledged while another run was active")
        return
    if s.link.poisoned is not None:
        # The pipe was poisoned before this ack was read (H19: a command stuck in the outbox past its
        # bound): nothing is written again, so whether a run starts can never be asked. The receipt
        # ends outcome unknown, never "unsent" (found by the random-interleavings test).
        _slot.reconcile(s, Settle("ack-after-poison", "delivery-unknown", reason="transport-unknown"))
        return
    # Is there a run? Ask with the engine's probe written after the ack was read (Pi: a get_state, FACTS
    # a5: only such a one is evidence; the link enforces it in prompt_state). An engine with no probe: the
    # run's own events decide (agent attribution by order), or the next stop or check.
    probe = s.config.engine.send_probe(s.link, now=s.now, bound=s.bounds.probe)
    if probe is not None:
        _slot.probe_sent(s, probe)
        s.emit(FlushEngine())
    _chain.feed(s, "slot-acked")  # N4: an ack after the chain's abort means a run


def _probe_answered(s: CoreState, slot: Slot) -> None:
    probe = slot.probe
    assert probe is not None
    if slot.run_started:
        return
    ran = s.config.engine.probe_answer(s.link, slot.prompt, probe)
    if isinstance(ran, str):
        s.evidence("probe-not-evidence", detail=ran)
        return
    if ran:
        return
    # N5: acked, no run, none started: extension-handled input. Never "unsent", never resent.
    _slot.reconcile(s, Settle("handled-without-run", "delivery-unknown", reason="handled-without-run"))


def unknown_outcome(s: CoreState, command: Command) -> None:
    """A command's write outcome is unknown (rule 1: the slot settles; the drift check fails)."""
    slot = s.slot
    if slot is not None and command is slot.prompt:
        _slot.reconcile(s, Settle("write-unknown", "delivery-unknown", reason="transport-unknown"))
    check = s.drift_check
    if check is not None and command is check.command:
        _drift.failed(s, check, f"{command.type}: outcome unknown ({command.unknown_reason})")
    # The link poisons itself; `Poisoned` follows and closes admission.


def poisoned(s: CoreState, reason: str) -> None:
    """The link poisoned itself: nothing is written to the engine again (rule 3)."""
    _binding.fence(s, "transport", reason)
    if s.drift_check is not None:  # its get_entries may have been dropped from the outbox unwritten
        _drift.failed(s, s.drift_check, f"the engine pipe is poisoned: {reason}")
    _chain.feed(s, "poisoned", reason)  # a running interrupt ends uncertain (its row)
    if s.binding_state == "stopping":
        return  # a force stop is running: its result decides
    _binding.uncertain(s, "transport-unknown", reason)
    s.broadcast_binding()


def overlap(s: CoreState, signal: str, detail: str) -> None:
    """One of the engine's overlap signals (`EngineRules.overlap_signals`): admission closes, the binding goes uncertain (a running force stop
    decides the binding itself), the slot's receipt settles delivery-unknown (run-overlap), a running
    interrupt ends uncertain with no further abort. Nothing is written to the engine."""
    assert signal in s.config.engine.overlap_signals
    s.overlaps.append((signal, detail))
    s.evidence("run-overlap", signal=signal, detail=detail)
    if s.binding_state == "stopped":
        return  # the execution ended with a proof: late output of the stopped engine changes nothing
    _binding.fence(s, "overlap", signal)
    interrupted = _chain.running(s) is not None
    slot = s.slot
    if slot is not None and not slot.request.settled:
        # Released, then a running interrupt ends uncertain (run-overlap) by its row.
        _slot.release(s, Settle("overlap", "delivery-unknown", reason="run-overlap"), then="overlap")
    else:
        _chain.feed(s, "overlap")
    if not interrupted and s.binding_state != "stopping":
        _binding.uncertain(s, "run-overlap", f"{signal}: {detail}")
    s.broadcast_binding()
