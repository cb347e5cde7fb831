"""The core's force-stop room: confirmations, force stop, recover, and the results of the effects they ask
for (the cohort itself is the lifecycle layer's, `_effects.EFFECTS`).

The rules it keeps (the core's rule 5, with H10, H17 and K5):

1. A confirmation is issued to the controller only, bound to its connection, its operation and the stop
   context it was issued under (H17); it is answered once (confirm or cancel), expires after
   `Bounds.confirmation_ttl`, is void once the context changed, and is consumed by the one call it
   confirms (single use). With `CoreConfig.census` a force-stop confirmation first counts the cohort (the
   `census` effect) so its summary says how many processes the stop would kill now.
2. Force stop needs such a confirmation, answered; it supersedes a running interrupt (H10: no further
   abort, the interrupt's settle timer cancelled), closes admission (fence `force-stop`), moves the
   binding to stopping and asks the lifecycle for the stop (the `force-stop` effect, under the stop's id).
3. Its result ends the binding stopped (with the cohortProof) or uncertain (with the reason and detail
   the lifecycle gave); the slot's receipt settles (finished turnState unknown, or delivery-unknown);
   every tool call open when the stop began or still open at its end is an uncertain effect (K5), and
   killing is never rollback.
4. Recover needs a verified stop (`stop-proof` otherwise) and its own confirmation; its reply waits for
   the lifecycle's `recover` effect. A claim publication that fails makes the binding uncertain
   (claim-publication).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _binding, _chain, _events, _slot
from ._io import CENSUS, FORCE_STOP, RECOVER, Call, EffectDone, Refuse, Reply
from ._state import CoreState
from ._values import Confirmation

# -------------------------------------------------------------------------------------- confirmations


def issue_confirmation(s: CoreState, call: Call) -> None:
    operation = call.params["operation"]
    if not s.is_controller(call):
        s.refuse(call, "controller", "only the controller can ask for a confirmation")
        return
    if operation == "force-stop" and s.config.census:
        # Count the cohort first (off the core); the confirmation is issued when the count is back.
        effect = s.new_id("n")
        s.pending_census[effect] = call
        s.ask(CENSUS, {"unit": s.config.unit}, effect_id=effect)
        return
    _confirm(s, call, None)


def census_done(s: CoreState, done: EffectDone) -> None:
    """A census is back: the confirmation it waited for is issued with its count (rule 1)."""
    call = s.pending_census.pop(done.effect_id, None)
    if call is None:
        return
    if not s.is_controller(call):  # control moved while the cohort was counted
        s.refuse(call, "controller", "only the controller can ask for a confirmation")
        return
    _confirm(s, call, done.result)


def _confirm(s: CoreState, call: Call, census: Mapping[str, Any] | None) -> None:
    operation = call.params["operation"]
    members = census.get("members") if census is not None else None
    summary: dict[str, Any] = {"operation": operation, "execution": s.execution,
                               "unit": s.config.unit,
                               "members": members if isinstance(members, int) else None,
                               "binding": s.binding_state, "openTools": len(s.run.open_tools)}
    if operation == "force-stop":
        summary["kills"] = "every process of the execution's engine cgroup (the cohort), frozen then killed"
        summary["membersComplete"] = bool(census.get("complete")) if census is not None else False
        summary["census"] = (str(census.get("detail", "")) if census is not None
                             else "no cohort is counted by this controller")
    conf = Confirmation(s.new_id("k"), operation, call.conn, s.context, s.now,
                        s.now + s.bounds.confirmation_ttl, summary)
    s.confirmations[conf.confirmation_id] = conf
    s.emit(Reply(call.conn, call.rpc_id, {"confirmation": conf.record()}))


def answer_confirmation(s: CoreState, call: Call) -> None:
    conf = s.confirmations.get(call.params["confirmation"])
    problem = _confirmation_problem(s, call, conf, answering=True)
    if problem is not None or conf is None:
        s.refuse(call, "confirmation", problem or "no such confirmation")
        return
    conf.state = "answered" if call.params["answer"] == "confirm" else "cancelled"
    s.emit(Reply(call.conn, call.rpc_id, {"confirmation": conf.record()}))


def _confirmation_problem(s: CoreState, call: Call, conf: Confirmation | None, *, answering: bool,
                          operation: str | None = None) -> str | None:
    if conf is None:
        return "no such confirmation"
    if conf.conn != call.conn:
        return "the confirmation belongs to another connection"
    if operation is not None and conf.operation != operation:
        return f"the confirmation is for {conf.operation}, not {operation}"
    if s.now > conf.expires_at and conf.state in ("issued", "answered"):
        conf.state = "expired"
    wanted = "issued" if answering else "answered"
    if conf.state != wanted:
        return f"the confirmation is {conf.state}" + (" (single use)" if conf.state == "consumed" else "")
    if conf.context != s.context:
        conf.state = "void"
        return "the stop context changed since the confirmation was issued"
    return None


def _use_confirmation(s: CoreState, call: Call, operation: str) -> Confirmation | None:
    conf = s.confirmations.get(call.params["confirmation"])
    problem = _confirmation_problem(s, call, conf, answering=False, operation=operation)
    if problem is not None or conf is None:
        s.refuse(call, "confirmation", problem or "no such confirmation")
        return None
    conf.state = "consumed"  # single use (mutant 8 leaves it answered)
    return conf


# ------------------------------------------------------------------------------ force stop and recover

def force_stop(s: CoreState, call: Call) -> None:
    if not s.is_controller(call):
        s.refuse(call, "controller", "only the controller (or recovery control) can force stop")
        return
    if s.stop is not None and s.stop.kind == "force-stop" and s.stop.state == "stopping":
        s.refuse(call, "fenced", f"force stop {s.stop.stop_id} is running (one escalation at a time)")
        return
    if s.binding_state == "stopped":
        s.refuse(call, "fenced", "the execution is stopped")
        return
    conf = _use_confirmation(s, call, "force-stop")
    if conf is None:
        return
    stop = _chain.start_force_stop(s, call, conf)  # H10: a running interrupt ends superseded
    _binding.stopping(s)
    _binding.bump_context(s)
    _binding.fence(s, "force-stop", stop.stop_id)
    s.ask(FORCE_STOP, {"stop": stop.stop_id, "confirmation": conf.confirmation_id, "execution": s.execution,
                       "conversation": s.config.conversation, "openTools": dict(s.run.open_tools)},
          effect_id=stop.stop_id)
    s.emit(Reply(call.conn, call.rpc_id, {"stop": stop.record()}))
    s.record(stop.record())
    s.broadcast_binding()


def recover(s: CoreState, call: Call) -> None:
    if not s.is_controller(call):
        s.refuse(call, "controller", "only the controller (or recovery control) can recover")
        return
    if s.binding_state != "stopped":
        s.refuse(call, "stop-proof", f"recovery needs a verified stop; the execution is {s.binding_state}")
        return
    conf = _use_confirmation(s, call, "recover")
    if conf is None:
        return
    effect = s.new_id("e")
    s.pending_effects[effect] = (call.conn, call.rpc_id)
    stop = s.stops[-1] if s.stops else None
    s.ask(RECOVER, {"confirmation": conf.confirmation_id, "stop": None if stop is None else stop.stop_id,
                    "incarnation": s.config.incarnation}, effect_id=effect)


# ---------------------------------------------------------------------------------- effect results

def recover_done(s: CoreState, done: EffectDone) -> None:
    """A recover is back: its reply, waiting since the call, is the result, or the refusal it holds (rule 4)."""
    waiting = s.pending_effects.pop(done.effect_id, None)
    if waiting is not None:
        conn, rpc_id = waiting
        refusal = done.result.get("refusal")
        if isinstance(refusal, Mapping):
            s.emit(Refuse(conn, rpc_id, dict(refusal)))
        else:
            s.emit(Reply(conn, rpc_id, dict(done.result)))


def claim_published(s: CoreState, done: EffectDone) -> None:
    """A claim publication is back (a generation, or uncertain): one that failed makes the binding
    uncertain (rule 4, claim-publication)."""
    if done.result.get("ok") is False:
        _binding.uncertain(s, "claim-publication", str(done.result.get("error", "the claim could not be written")))
        s.broadcast_binding()


def force_stop_done(s: CoreState, done: EffectDone) -> None:
    """A force stop is back: the binding stopped with its proof, or uncertain (rule 3)."""
    stop = s.stop
    if stop is None or stop.kind != "force-stop" or stop.stop_id != done.effect_id:
        return
    state = done.result.get("state")
    _chain.feed(s, "stop-done", done.result)  # the stop ends, stopped or uncertain (its row)
    _binding.bump_context(s)
    open_tools = {**stop.open_tools, **s.run.open_tools}  # open when the stop began, or at its end (K5)
    slot = s.slot
    if slot is not None and not slot.request.settled:
        _slot.release(s, _slot.at_stop(slot.request))
    _events.reset_run(s)
    _binding.stop_ended(s, stop.state == "stopped", stop.reason or "")
    # K5: a tool call open at the stop is an uncertain effect; killing is never rollback.
    s.record({"type": "effectReport", "stop": stop.stop_id, "execution": s.execution,
              "effects": [{"toolCallId": k, "toolName": v, "state": "uncertain"} for k, v in open_tools.items()],
              "network": "uncertain", "rollback": False})
    proof = done.result.get("proof")
    if state == "stopped" and isinstance(proof, Mapping):
        # The cohortProof the stop produced (cgroup-cohort builds it; its digest is what the claim stores).
        s.record({"type": "cohortProof", "stop": stop.stop_id, "proof": dict(proof)})
    s.record(stop.record())
    s.broadcast_binding()
