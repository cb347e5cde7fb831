"""The core's dialogs room: a native dialog the engine asks, shown to clients and, when the deployment opts
in (`CoreConfig.answer_dialogs`, off by default: issue 33, the brief's I2 after C-2) or the engine's dialogs
are permission requests (`EngineRules.permission_requests`: Claude's `can_use_tool`, P7, which C-2 does not
gate), answered ("answering" below).

The rules it keeps (brief §7, P1-P6; §5 H5-H8; seed README "Approval"):

1. Not answering: every dialog is shown disabled with a reason and never answered (P3), byte for byte as
   before issue 33; once one was seen every stop's approval disposition is uncertain.
2. Answering: a dialog the engine offers choices for (Pi: confirm and select) is a decision shown `open` with its
   choices' exact labels, answered only with one of them by the controller (`approval`, with the decision's
   projection id and the label): one native answer with the exact native id (P1). A label not offered (a
   generic "yes", a cancel the engine does not offer) is refused. A dialog with no choices (input, editor)
   is shown disabled with the engine's reason (P3).
3. The same answer again gives the same reply and writes nothing (H6); another answer to an answered
   decision is refused (H7).
4. Each takeover reprojects every open decision: a new projection id for the same native dialog, the old
   one `superseded` and refused from then on (P5, H5); the old controller's generation is refused first.
5. The engine's own timeout (`DialogAsk.timeout`) less `ANSWER_MARGIN` (the engine started its timer
   before the core read the ask, and the answer takes time to reach it): past it the decision is
   `uncertain` and an answer is refused (P4, H8). An interrupt or force stop begun while a decision is
   open makes it `uncertain` too, never denied (P6), and refuses answers from then on (H8).
6. Native evidence settles a decision (P4): every tool call open when it was asked ended, or the run
   settled, or the run was reset. It is then `settled` (`how`: `answered` when the controller's answer was
   written, else `engine`: the engine's default or its own timeout) and refused. An engine that withdraws
   its question (`Reading.dialog_withdrawn`: Claude's `control_cancel_request`) settles it at once, `how`
   `cancelled`, whatever was answered: the engine said it takes no answer (H8).
7. A stop's approval disposition follows the dialogs (`doubt`): uncertain while a dialog is shown disabled
   (ever, this execution) or a decision is open, answered but not settled, or uncertain; resolved once every
   decision is settled (`core/_chain` reads it at a stop's start; each new doubt marks every stop).
8. Cost: `CoreState.decisions` holds only the decisions not settled (native id -> decision), so a tool's end,
   a run's end, a stop, a takeover and a stop's approval walk the open ones only; a settled decision leaves it
   and stays reachable by each projection id it was given (`CoreState.projections`, one lookup per answer),
   so an answer to it is still told apart (H6, H7, H8) and nothing walks the settled ones.
"""

from __future__ import annotations

from typing import Any

from ..engines._seam import DialogAsk
from . import _chain
from ._io import Call, FlushEngine, Reply, SetTimer
from ._state import CoreState
from ._values import Decision, dialog_doubt

__all__ = ["ANSWER_MARGIN", "DIALOG_TIMER", "answer", "asked", "doubt", "interrupted", "reproject",
           "run_over", "timed_out", "tool_ended", "withdrawn"]

ANSWER_MARGIN = 0.5  # seconds before the engine's timeout from which an answer is refused (rule 5)
DIALOG_TIMER = "dialog-timeout:"  # a timer key's prefix; the decision's native id follows

_REASONS: dict[str, str] = {
    "open": "answer with one of the choices, exactly; {name} waits for it (or its own timeout)",
    "answered": "answered by the controller; waiting for {name} to go on",
    "uncertain": "{name} may have decided on its own (its timeout, an interrupt or a stop): no answer is taken",
    "settled": "{name} went on: the decision is over",
}


def asked(s: CoreState, ask: DialogAsk) -> None:
    """A dialog the engine asks (rules 1, 2)."""
    s.dialogs += 1
    made = s.new_id("d")  # made whether or not the ask has its own id (the ids that follow stay as they were)
    name = s.config.engine.name
    answering = s.config.answers_decisions
    if not answering or ask.choices is None or ask.id is None:
        s.doubt_disabled += 1
        _chain.approval_uncertain(s)  # seed "Approval": once a dialog was seen, every stop says so
        reason = (f"{name} asks a question here; this controller shows it but never answers it, so {name} "
                  f"decides on its own (its default or timeout)")
        if answering:
            reason = ask.unanswerable or f"{name} gave this dialog no id to answer"
        decision: dict[str, Any] = {"type": "nativeDecision", "nativeDecision": made if ask.id is None else ask.id,
                                    "method": ask.method, "title": ask.fields.get("title"),
                                    "options": ask.fields.get("options"), "state": "disabled",
                                    # Plain words for the person; the rule is P3 (CHAT-03D not adopted).
                                    "reason": reason}
        for key, value in ask.fields.items():  # the rest of the ask, as the engine's reading gave it
            if key not in decision:
                decision[key] = value
        s.record(decision)
        return
    deadline = None if ask.timeout is None else s.now + ask.timeout - ANSWER_MARGIN
    dec = Decision(ask.id, made, ask, set(s.run.open_tools), deadline)
    s.decisions[ask.id] = dec
    s.projections[made] = dec
    _chain.approval_uncertain(s)  # open: what the engine will decide is not known yet (rule 7)
    _show(s, dec)
    if deadline is not None:
        s.emit(SetTimer(DIALOG_TIMER + ask.id, deadline))


def doubt(s: CoreState) -> bool:
    """Rule 7: True while a stop's approval disposition is uncertain."""
    return dialog_doubt(s.doubt_disabled, s.decisions)


def _show(s: CoreState, dec: Decision) -> None:
    s.record(dec.record(_REASONS[dec.state].format(name=s.config.engine.name)))


def _uncertain(s: CoreState, dec: Decision, why: str) -> None:
    if dec.state == "open":
        dec.state = "uncertain"
        dec.how = why
        _chain.approval_uncertain(s)
        _show(s, dec)


def timed_out(s: CoreState, key: str) -> None:
    """Rule 5: the engine's timeout (less the margin) passed with no answer."""
    dec = s.decisions.get(key[len(DIALOG_TIMER):])
    if dec is not None and dec.state == "open":
        _uncertain(s, dec, "timeout")


def interrupted(s: CoreState) -> None:
    """Rule 5: a stop runs while decisions are open: each is uncertain, never denied (P6). Called at the end
    of every `receive` (a stop begun in it, or a dialog asked while one runs)."""
    if not s.decisions or s.stop is None or s.stop.state != "stopping":
        return
    for dec in list(s.decisions.values()):
        if dec.state == "open":
            _uncertain(s, dec, "stop")


def tool_ended(s: CoreState, tool_id: str) -> None:
    """Rule 6: a tool call ended; a decision asked inside it (and no other open one) is settled."""
    for dec in list(s.decisions.values()):
        if tool_id in dec.tools:
            dec.tools.discard(tool_id)
            if not dec.tools:
                _settle(s, dec)


def run_over(s: CoreState) -> None:
    """Rule 6: the run settled or was reset: no dialog of it is pending any more."""
    for dec in list(s.decisions.values()):
        _settle(s, dec)


def withdrawn(s: CoreState, native: str) -> None:
    """Rule 6: the engine withdrew the dialog `native` (it takes no answer to it from now on)."""
    dec = s.decisions.get(native)
    if dec is not None and dec.state != "settled":
        dec.state = "settled"
        dec.how = "cancelled"
        del s.decisions[native]  # rule 8: only `projections` keeps it
        _show(s, dec)


def _settle(s: CoreState, dec: Decision) -> None:
    if dec.state == "settled":
        return
    dec.how = "answered" if dec.state == "answered" else "engine"
    dec.state = "settled"
    if s.decisions.get(dec.native) is dec:
        del s.decisions[dec.native]  # rule 8: only `projections` keeps it
    _show(s, dec)


def reproject(s: CoreState) -> None:
    """Rule 4: control changed hands; every open decision gets a new projection id, the old one superseded."""
    for dec in list(s.decisions.values()):
        if dec.state != "open":
            continue
        old = dec.projection
        dec.superseded.append(old)
        dec.projection = s.new_id("d")
        s.projections[dec.projection] = dec
        s.record({**dec.record(f"superseded by {dec.projection} after a takeover"), "nativeDecision": old,
                  "state": "superseded", "supersededBy": dec.projection})
        _show(s, dec)


def _find(s: CoreState, projection: str) -> tuple[Decision | None, bool]:
    """The decision `projection` names and whether that id was superseded (rule 8: one lookup)."""
    dec = s.projections.get(projection)
    return (None, False) if dec is None else (dec, dec.projection != projection)


def answer(s: CoreState, call: Call) -> None:
    """The controller answers a decision (rules 2-6): `decision` (its projection id) and `choice` (a label)."""
    if not s.check_control(call, call.params["generation"]):
        return  # H5: the old controller's generation, or not the controller
    projection, choice = call.params["decision"], call.params["choice"]
    dec, superseded = _find(s, projection)
    if dec is None:
        s.refuse(call, "decision", f"no decision {projection!r} is open to answer (a disabled dialog takes none)")
        return
    if superseded:
        s.refuse(call, "decision", f"decision {projection!r} was superseded by {dec.projection} after a "
                                   "takeover (H5)")
        return
    if dec.state == "answered" or (dec.state == "settled" and dec.how == "answered"):
        if dec.answer == choice:  # H6: the same answer again: the same reply, nothing written
            s.emit(Reply(call.conn, call.rpc_id, {"decision": dec.record(_REASONS[dec.state].format(
                name=s.config.engine.name))}))
        else:
            s.refuse(call, "decision", f"decision {projection!r} was answered {dec.answer!r} already (H7)")
        return
    if dec.state != "open":
        s.refuse(call, "decision", f"decision {projection!r} is {dec.state} ({dec.how}): the engine may have "
                                   "decided on its own; no answer is taken (H8)")
        return
    if dec.deadline is not None and s.now >= dec.deadline:
        _uncertain(s, dec, "timeout")
        s.refuse(call, "decision", f"decision {projection!r} reached the engine's timeout (H8)")
        return
    native = dict(dec.ask.choices or ()).get(choice)
    if native is None:
        s.refuse(call, "decision", f"{choice!r} is not one of the choices of decision {projection!r}: answer with "
                                   "one of its labels exactly (P1)")
        return
    if s.config.engine.answer(s.link, dec.native, native, now=s.now) is None:
        s.refuse(call, "decision", f"{s.config.engine.name} takes no answer to this dialog")
        return
    dec.state = "answered"
    dec.answer = choice
    s.emit(Reply(call.conn, call.rpc_id, {"decision": dec.record(_REASONS["answered"].format(
        name=s.config.engine.name))}))
    _show(s, dec)
    s.emit(FlushEngine())
