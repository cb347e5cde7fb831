"""The core's interrupt room: the R3-1 stop chain (brief §3), as a step and a transition table.

The rules it keeps (the core's rule 4, with H10 and K9):

1. An interrupt closes admission (fence `interrupt`), sends clear_queue, then abort.
2. A clear that fails or times out sends no abort (it would run what is queued): the stop ends uncertain.
3. A non-empty clear leaves the stop uncertain until C-1 (reason external-items-removed), its removed
   items in evidence as digests and byte counts, never attributed, never resent.
4. A slot in preflight is awaited (bounded by the prompt's own bound); its ack means a run, so clear then
   abort again; at most `Bounds.max_cycles` cycles in all (N4), then uncertain, nativeQueue unknown.
5. Reconciled only when the slot is settled, the run settled after the last abort, a clear sent after that
   came back empty and every clear was empty; then admission reopens under current control.
6. H10: the abort is decided at the end of the `receive` call that read its clear's answer (step
   `abort-due`, event `receive-ended`), so an overlap signal read in the same chunk has already ended the
   stop uncertain and no abort goes out. A force stop supersedes a running interrupt (its `superseded` row:
   the interrupt's record keeps the step it stood in, its state `superseded`).
7. K9: an abort that does not settle within `Bounds.settle` ends the stop uncertain (never-settled);
   force stop stays available.
8. The transitions are data: `CHAIN_TRANSITIONS` maps (step, event) to a row, the handler that decides and
   the steps it may lead to (h11's form); `feed` refuses a handler that left its stop anywhere else
   (`IllegalTransition`, a bug). An event with no row for the current step changes nothing. Every way a
   chain ends is an event of the table: its answers, the settle bound, an overlap signal, a poisoned pipe,
   a force stop superseding it, a force stop's result. The table is checked when this module is imported
   (`_check_transitions`). One name, "step" (`_values.StopStep`), throughout; the stop record's wire field
   keeps the schema's name, `phase`.
9. Only this room writes a stop (`_state.FIELD_OWNERS`: `stop`, `stops`): it makes each (`new_stop`, its
   approval disposition from the execution's dialog evidence, seed "Approval"), starts and ends them, and
   marks every stop's approval uncertain once a dialog is seen (`approval_uncertain`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, get_args

from mosaic.pi_rpc import Command
from mosaic.pi_rpc.link import CommandOutcome

from . import _binding
from ._io import Call, CancelTimer, ConnId, FlushEngine, Reply, SetTimer
from ._state import CoreState, text_digest
from ._values import Clear, Confirmation, IllegalTransition, Stop, StopKind, StopStep, dialog_doubt

__all__ = [
    "CHAIN_TRANSITIONS",
    "SETTLE_TIMER",
]

SETTLE_TIMER = "stop-settle"

# What moves a chain on: its clear_queue or abort answered; the end of the receive call (H10); the slot's
# ack read during a preflight wait (N4); the slot released by reconciliation; the settle bound passed (K9);
# an overlap signal read (`_answers.overlap`, O1-O6); the engine pipe poisoned; a force stop superseding the
# interrupt (H10); a force stop's result (its effect done).
ChainEvent = Literal["clear-answered", "abort-answered", "receive-ended", "slot-acked", "slot-released",
                     "settle-timeout", "overlap", "poisoned", "superseded", "stop-done"]
# A row's handler: the state, the stop in its step, and what the event carries (the answered command, the
# poison's reason, the superseding stop, the force stop's result; None for the others).
Handler = Callable[[CoreState, Stop, Any], None]


@dataclass(frozen=True)
class ChainRow:
    """One row of `CHAIN_TRANSITIONS`: the handler that decides, and the steps it may leave its stop in."""

    handler: Handler
    leads_to: frozenset[StopStep]


def new_stop(s: CoreState, kind: StopKind, conn: ConnId, **fields: Any) -> Stop:
    """A stop chain, its approval disposition from the execution's dialog evidence (rule 9)."""
    stop = Stop(s.new_id("s"), kind, s.execution, conn, s.now, **fields)
    stop.actor = s.connections[conn].ids
    if dialog_doubt(s.doubt_disabled, s.decisions):  # `_dialogs` rule 7 (off: any dialog seen)
        stop.approval = "uncertain"
    return stop


def approval_uncertain(s: CoreState) -> None:
    """A native dialog was seen: every stop's approval disposition is uncertain (rule 9; seed "Approval")."""
    for stop in s.stops:
        stop.approval = "uncertain"


def interrupt(s: CoreState, call: Call) -> None:
    """The interrupt call: control checked, then one chain at a time on an active binding with a turn to
    stop; admission closes before anything is written (rule 1)."""
    if not s.check_control(call, call.params["generation"]):
        return
    if s.stop is not None and s.stop.state == "stopping":
        s.refuse(call, "fenced", f"stop {s.stop.stop_id} is running")
        return
    if s.binding_state != "active":
        s.refuse(call, "fenced", f"the binding is {s.binding_state}")
        return
    if s.slot is None and not s.run.active:
        s.refuse(call, "no-turn", "no prompt holds the slot and no run is streaming")
        return
    stop = new_stop(s, "interrupt", call.conn)
    stop.slot_case = s.slot.case() if s.slot is not None else "none"
    s.stop = stop
    s.stops.append(stop)
    _binding.bump_context(s)
    _binding.fence(s, "interrupt", stop.stop_id)  # rule 1: admission closes first
    s.emit(Reply(call.conn, call.rpc_id, {"stop": stop.record()}))
    s.record(stop.record())
    s.broadcast_binding()
    _send_clear(s, stop, "clear")


def running(s: CoreState) -> Stop | None:
    """The interrupt chain that is running, if one is."""
    stop = s.stop
    return stop if stop is not None and stop.kind == "interrupt" and stop.state == "stopping" else None


def feed(s: CoreState, event: ChainEvent, arg: Any = None) -> None:
    """Move the running chain (an interrupt, or a force stop) on `event` (rule 8); nothing when none runs
    or no row matches. The handler must leave the stop in one of the steps its row names."""
    stop = s.stop
    if stop is None or stop.state != "stopping":
        return
    row = CHAIN_TRANSITIONS.get((stop.step, event))
    if row is None:
        return
    before = stop.step
    row.handler(s, stop, arg)
    if stop.step not in row.leads_to:
        raise IllegalTransition(f"stop {stop.stop_id}: {before} on {event} led to {stop.step}, "
                                f"not one of {sorted(row.leads_to)}")


def start_force_stop(s: CoreState, call: Call, conf: Confirmation) -> Stop:
    """A force stop with its consumed confirmation (`_force`): a running interrupt ends superseded (H10: no
    further abort, its settle timer cancelled), and the force stop is the running chain, in step
    `requested` until its effect is done (`stop-done`)."""
    stop = new_stop(s, "force-stop", call.conn, confirmation=conf.confirmation_id, step="requested")
    # K5: a tool call open when the stop began is an uncertain effect, whatever the engine reports
    # before it exits (Pi's RPC mode handles SIGTERM and may end the tool first).
    stop.open_tools = dict(s.run.open_tools)
    feed(s, "superseded", stop)
    s.stop = stop
    s.stops.append(stop)
    return stop


def settle_timed_out(s: CoreState) -> None:
    """`SETTLE_TIMER`: the abort did not settle within `Bounds.settle` (rule 7)."""
    feed(s, "settle-timeout")


def answered(s: CoreState, command: Command) -> None:
    """The chain's command in flight (`stop.pending`) has its answer."""
    stop = running(s)
    if stop is None:
        return
    stop.pending = None
    # The chain's one command in flight is the one its step wrote (`_send_clear`, `_send_abort`).
    feed(s, "abort-answered" if stop.step == "abort" else "clear-answered", command)


def abort_written(s: CoreState, stop: Stop) -> bool:
    """An abort of this stop's chain (or of the interrupt it superseded) was written: an aborted message
    is then the chain's doing, not an overlap (O4). For an engine whose clear also aborts
    (`EngineRules.clear_aborts`), a clear written is an abort written."""
    def wrote(x: Stop) -> bool:
        return x.aborts > 0 or (s.config.engine.clear_aborts and (bool(x.clears) or x.pending is not None))
    if wrote(stop):
        return True
    superseded = next((x for x in s.stops if x.stop_id == stop.supersedes), None)
    return superseded is not None and wrote(superseded)


def end_uncertain(s: CoreState, stop: Stop, reason: str, detail: str, *, native_queue: str = "unknown") -> None:
    """The chain ends uncertain: admission stays closed (the binding goes uncertain); force stop is the way
    on. Its turnProof and stop record go out."""
    stop.state = "uncertain"
    stop.reason = reason
    stop.detail = detail
    stop.native_queue = "cleared" if native_queue == "cleared" else "unknown"
    stop.ended_at = s.now
    stop.step = "done"
    s.stop = None
    s.emit(CancelTimer(SETTLE_TIMER))
    _binding.uncertain(s, reason, detail)  # admission stays closed; force stop is the way on
    s.record(stop.turn_proof())
    s.record(stop.record())
    s.broadcast_binding()


# ------------------------------------------------------------------------------------- what it writes

def _send_clear(s: CoreState, stop: Stop, step: StopStep) -> None:
    if s.link.poisoned is not None:
        end_uncertain(s, stop, "transport-unknown", s.link.poisoned)
        return
    stop.step = step
    if s.config.engine.clear_aborts and s.run.active:
        s.run.mark_aborted()  # the clear ends the run too: its turn is interrupted
    stop.pending = s.config.engine.send_clear(s.link, now=s.now, bound=s.bounds.clear)
    s.emit(FlushEngine())


def _send_abort(s: CoreState, stop: Stop, command: Command | None = None) -> None:
    if s.link.poisoned is not None:
        end_uncertain(s, stop, "transport-unknown", s.link.poisoned)
        return
    stop.step = "abort"
    stop.aborts += 1
    if s.run.active:
        s.run.mark_aborted()
    # Pi answers abort after the run settles (rpc.md 124-135): no link bound, our own settle timer (K9).
    stop.pending = s.config.engine.send_abort(s.link, now=s.now)
    s.emit(FlushEngine())
    s.emit(SetTimer(SETTLE_TIMER, s.now + s.bounds.settle))


# ------------------------------------------------------------------------------------------- handlers

def _cleared(s: CoreState, stop: Stop, command: Command | None) -> None:
    assert command is not None
    cleared = s.config.engine.clear_answer(command)
    if not cleared.ok:
        # Rule 2: a clear that fails sends no abort (it would run what is queued).
        stop.clears.append(Clear(False, s.now))
        end_uncertain(s, stop, "clear-failed", cleared.error)
        return
    steering, follow_up = cleared.steering, cleared.follow_up
    removed = tuple({"queue": q, "digest": text_digest(t), "bytes": len(t.encode("utf-8", "surrogatepass"))}
                    for q, items in (("steering", steering), ("followUp", follow_up)) for t in items)
    clear = Clear(True, s.now, len(steering), len(follow_up), removed)
    stop.clears.append(clear)
    if removed:
        # Rule 3 / C-1 interim: external input removed; never attributed, never resent; evidence only.
        s.evidence("removed-external-items", stop=stop.stop_id, items=list(removed))
    if stop.step == "clear":
        # The abort goes out at the end of this receive call, unless an overlap read meanwhile (in the
        # same chunk as this answer) makes it run what was queued (rule 6: `receive-ended`).
        stop.step = "abort-due"
    elif stop.step == "post-clear":
        _post_clear(s, stop, clear)


def _aborted(s: CoreState, stop: Stop, command: Command | None) -> None:
    assert command is not None
    answer = s.config.engine.abort_answer(command)
    if not answer.ok:
        end_uncertain(s, stop, "abort-failed", answer.error)
        return
    if s.run.active:
        # Pi answers abort once idle (waitForIdle, rpc.md 124-135), so it comes after the aborted run's
        # agent_settled. An abort answered while a run is active was answered before that run began
        # (the slot's late ack, N4): it did not end it. Clear then abort again (rule 4), bounded.
        _next_cycle(s, stop, "a run began after the abort was answered")
        return
    # The run settled after the abort, or none was running (the stream mirrors isStreaming: every
    # agent_start and agent_settled was read in order before this response).
    _after_settle(s, stop)


def _after_settle(s: CoreState, stop: Stop) -> None:
    s.emit(CancelTimer(SETTLE_TIMER))
    slot = s.slot
    if slot is not None and slot.prompt.response is None and slot.prompt.outcome is not CommandOutcome.UNKNOWN:
        # Rule 4, preflight in flight: wait for its response (bounded by the prompt's own bound).
        # Mutant 27 skips this wait: a late ack's run would never be aborted (N4).
        stop.step = "preflight-wait"
        return
    if slot is not None and slot.probe is not None and slot.probe.response is None and not slot.run_started:
        stop.step = "probe-wait"
        return
    _send_clear(s, stop, "post-clear")


def _post_clear(s: CoreState, stop: Stop, clear: Clear) -> None:
    if not clear.empty:
        _next_cycle(s, stop, "the post-settle clear was not empty (N6)", clear_first=False)
        return
    if s.slot is not None:
        stop.step = "slot-wait"  # settles by the slot table; the chain finishes when it does
        return
    _finish(s, stop)


def _finish(s: CoreState, stop: Stop, command: Command | None = None) -> None:
    """The slot is settled and the last clear, sent after the run settled, was empty (rule 5)."""
    if not all(c.empty for c in stop.clears):
        # Rule 3: a clear removed external items; until C-1 the stop stays uncertain (mutant 26).
        stop.native_queue = "cleared"
        end_uncertain(s, stop, "external-items-removed",
                  "clear_queue removed input from outside Mosaic (C-1 not adopted)", native_queue="cleared")
        return
    _reconciled(s, stop)


def _next_cycle(s: CoreState, stop: Stop, why: str, *, clear_first: bool = True) -> None:
    """Another cycle, at most `max_cycles` in all (rules 4 and 5), then uncertain with nativeQueue
    unknown. Rule 4 (a run began after the abort): clear, then abort. Rule 5 (the post-settle clear was
    not empty: it just emptied the queue): abort, settle and clear again."""
    if stop.cycle >= s.bounds.max_cycles:
        end_uncertain(s, stop, "cycles-exhausted", f"{why}; {stop.cycle} cycles")
        return
    stop.cycle += 1
    s.emit(CancelTimer(SETTLE_TIMER))
    if clear_first:
        _send_clear(s, stop, "clear")
    else:
        stop.step = "abort-due"  # as after the first clear: decided at the end of this receive (rule 6)


def _late_ack(s: CoreState, stop: Stop, command: Command | None) -> None:
    # N4: the ack came after the chain's abort: a run starts now, so clear then abort again.
    _next_cycle(s, stop, "the slot's ack arrived after the abort (N4)")


def _slot_settled(s: CoreState, stop: Stop, command: Command | None) -> None:
    # Rule 5: the slot settled while the chain waited on its preflight or its probe: the post-settle clear.
    _send_clear(s, stop, "post-clear")


def _never_settled(s: CoreState, stop: Stop, command: Command | None) -> None:
    # K9: the interrupt never settled. Uncertain; force stop stays available.
    end_uncertain(s, stop, "never-settled", f"no settle within {s.bounds.settle} s of the abort")


def _reconciled(s: CoreState, stop: Stop) -> None:
    stop.state = "reconciled"
    stop.native_queue = "cleared"
    stop.ended_at = s.now
    stop.step = "done"
    s.stop = None
    _binding.bump_context(s)
    _binding.lift(s, "interrupt")  # admission reopens under current control (rule 5)
    s.emit(CancelTimer(SETTLE_TIMER))
    s.record(stop.turn_proof())
    s.record(stop.record())
    s.broadcast_binding()


# --------------------------------------------------------------------- how a chain ends from outside

def _overlapped(s: CoreState, stop: Stop, arg: Any) -> None:
    # O1-O6 (`_answers.overlap`): the interrupt ends uncertain and writes no further abort.
    signal, detail = s.overlaps[-1]
    end_uncertain(s, stop, "run-overlap", f"{signal}: {detail}")


def _poisoned(s: CoreState, stop: Stop, reason: str) -> None:
    # The engine pipe is poisoned: nothing is written again, so the interrupt cannot go on.
    end_uncertain(s, stop, "transport-unknown", reason)


def _superseded(s: CoreState, stop: Stop, by: Stop) -> None:
    # H10: a force stop supersedes the running interrupt: no further abort, its settle timer cancelled. The
    # record keeps the step it stood in (its phase) with the state `superseded`.
    stop.state = "superseded"
    stop.superseded_by = by.stop_id
    stop.ended_at = s.now
    by.supersedes = stop.stop_id
    s.emit(CancelTimer(SETTLE_TIMER))
    s.record(stop.record())


def _force_stop_ended(s: CoreState, stop: Stop, result: Mapping[str, Any]) -> None:
    # The force stop's result (`_force.force_stop_done` carries out the rest: the binding, the slot, the run,
    # the effect report, the proof and the records).
    stop.outcome = dict(result)
    stop.ended_at = s.now
    stop.step = "done"
    s.stop = None
    if result.get("state") == "stopped":
        stop.state = "stopped"
    else:
        stop.state = "uncertain"
        stop.reason = str(result.get("reason", "uncertain"))
        if isinstance(result.get("detail"), str):
            stop.detail = result["detail"]  # what could not be done, and why (a key not written: ENOSPC)


# ---------------------------------------------------------------------------------- the transitions

# The steps an interrupt waits in (it passes "start" inside the interrupt call; "requested" is a force
# stop's; "done" waits for nothing).
WAITING: tuple[StopStep, ...] = ("clear", "abort-due", "abort", "preflight-wait", "probe-wait", "post-clear",
                                 "slot-wait")
# The events that end a chain from any step it waits in, and where each leaves it: done, or (superseded) the
# step it stood in.
ENDINGS: tuple[ChainEvent, ...] = ("settle-timeout", "overlap", "poisoned")


def _row(handler: Handler, *leads_to: StopStep) -> ChainRow:
    return ChainRow(handler, frozenset(leads_to))


CHAIN_TRANSITIONS: Mapping[tuple[StopStep, ChainEvent], ChainRow] = MappingProxyType({
    ("clear", "clear-answered"): _row(_cleared, "abort-due", "done"),  # rule 2, then abort-due (rule 6)
    # rule 5: empty and the slot settled, or another cycle
    ("post-clear", "clear-answered"): _row(_cleared, "abort-due", "slot-wait", "done"),
    ("abort-due", "receive-ended"): _row(_send_abort, "abort", "done"),  # rule 6: nothing read stopped it
    # the run settled: wait on the slot, or the post-settle clear; a run begun after the answer: again
    ("abort", "abort-answered"): _row(_aborted, "clear", "preflight-wait", "probe-wait", "post-clear", "done"),
    ("preflight-wait", "slot-acked"): _row(_late_ack, "clear", "done"),  # rule 4 (N4)
    ("preflight-wait", "slot-released"): _row(_slot_settled, "post-clear", "done"),
    ("probe-wait", "slot-released"): _row(_slot_settled, "post-clear", "done"),
    ("slot-wait", "slot-released"): _row(_finish, "done"),  # rule 5
    # Rule 7 (K9): the settle bound ends any step uncertain; so do an overlap signal and a poisoned pipe.
    **{(step, "settle-timeout"): _row(_never_settled, "done") for step in WAITING},
    **{(step, "overlap"): _row(_overlapped, "done") for step in WAITING},
    **{(step, "poisoned"): _row(_poisoned, "done") for step in WAITING},
    # H10: a force stop supersedes the interrupt in whatever step it waits.
    **{(step, "superseded"): _row(_superseded, step) for step in WAITING},
    ("requested", "stop-done"): _row(_force_stop_ended, "done"),  # a force stop's result
})


def _check_transitions(table: Mapping[tuple[StopStep, ChainEvent], ChainRow]) -> None:
    """Refuse, as programming errors (rule 8): a row outside the steps a chain waits in or the events that
    exist; a row leading nowhere, or outside the steps; an ending event missing from a waiting step, or one
    that cannot end it (done), or a superseding that moves it; a waiting step whose only way on is an ending;
    a waiting step from which `done` cannot be reached; an event no row takes."""
    steps, events = set(get_args(StopStep)), set(get_args(ChainEvent))
    if not set(WAITING) <= steps:
        raise TypeError(f"WAITING names steps that do not exist: {sorted(set(WAITING) - steps)}")
    stray = sorted(f"{st}/{ev}" for st, ev in table
                   if st not in (*WAITING, "requested") or ev not in events)
    if stray:
        raise TypeError(f"CHAIN_TRANSITIONS rows outside the waiting steps or the events: {stray}")
    wild = sorted(f"{st}/{ev}" for (st, ev), row in table.items() if not row.leads_to or not row.leads_to <= steps)
    if wild:
        raise TypeError(f"CHAIN_TRANSITIONS rows leading nowhere, or to no step: {wild}")
    for ev in (*ENDINGS, "superseded"):
        wrong = sorted(st for st in WAITING if (st, ev) not in table
                       or (set(table[st, ev].leads_to) != {st} if ev == "superseded"
                           else "done" not in table[st, ev].leads_to))
        if wrong:
            raise TypeError(f"{ev} must end every waiting step where its row says: {wrong}")
    if ("requested", "stop-done") not in table or table["requested", "stop-done"].leads_to != {"done"}:
        raise TypeError("a force stop's result must end it: (requested, stop-done) -> done")
    stuck = sorted(st for st in WAITING
                   if not any(s == st and ev not in (*ENDINGS, "superseded") for s, ev in table))
    if stuck:
        raise TypeError(f"steps whose only way on is an ending: {stuck}")
    onward = {st: set().union(*(row.leads_to for (s, ev), row in table.items()
                                if s == st and ev not in (*ENDINGS, "superseded")))
              for st in WAITING}
    for start in WAITING:
        seen, todo = set(), [start]
        while todo:
            st = todo.pop()
            if st in seen:
                continue
            seen.add(st)
            todo.extend(onward.get(st, ()))
        if "done" not in seen:
            raise TypeError(f"done cannot be reached from {start}")
    unused = sorted(events - {ev for _, ev in table})
    if unused:
        raise TypeError(f"events no row takes: {unused}")


_check_transitions(CHAIN_TRANSITIONS)
