"""The core's drift room: when the idle session drift check runs, what it holds back meanwhile, and what
its verdict does (the comparison itself is the engine's: Pi's is `engines/pi/_drift`, pure).

The rules it keeps (the core's rule 8; brief §2 "Session drift, not foreign-writer attribution"; on when
`CoreConfig.drift` is set):

1. When the engine is idle (admission open, no slot, no run, no stop chain, nothing of the core's in
   flight on the link) after an agent_settled or a slot's release, and once when the shell starts serving
   (`TimerFired(DRIFT_START)`: the takeover check, a baseline inode and size), the core sends get_entries
   (bounded), then asks the shell to read the session file (the `read-session` effect, bounded by
   `DRIFT_READ_TIMER`), then compares them (`engines/pi/_drift.check_drift`, or `check_appended` from the
   last clean check's checkpoint; where that cannot decide, the full check).
2. While a check is in flight a prompt refuses busy (an engine append during it would make a false
   drift), and every client action (replies, refusals, notifications, page reads) is held, in order,
   until the check ends: a turn's last records (run-settled, the finished receipt, a reconciled stop, the
   binding) reach clients only once the file was checked, so a client that waits for them never meets the
   check. An engine event during a check abandons it; it runs again at the next idle moment.
3. Drift closes admission (prompts refuse session-drift), the binding goes uncertain (reason
   session-drift), every subscriber gets a `marker` {"reason": "session-drift", ...} and evidence records
   the verdict; nothing is written to the engine or the file.
4. Where the drift says the file does not hold the engine's own entries whole and in order
   (`engines/pi/_drift.PERSISTENCE_DRIFT`: partial-line, invalid-line, not-prefix, disk-behind: what a full disk
   leaves), the turn whose finished receipt the check held reads turnState `unpersisted`, never
   `completed`: no client has seen it before the check ends.
5. A check that cannot finish (get_entries fails, times out or is malformed; the read fails or times out)
   leaves the binding uncertain with admission closed (W19): unknown is never "no drift".
6. A second writer is seen before the next prompt runs (issue 27; `prompt_check`, the last row of
   admission). The shell looks at the file (one stat, `Call.session`) before it feeds a prompt; the core
   compares it with the last clean check's verified point (`engines/_verdict.stat_verdict`). The same: the prompt
   runs in this call, as before. Removed, replaced or shrunk: drift, as rule 3, and the prompt is refused
   `session-drift` with zero engine bytes. Grown, appeared, or not looked at: the prompt waits (`deferred`;
   another prompt is busy) and the check runs now (incremental from the checkpoint); when it ends the
   prompt goes through admission again, in full (`resume`): clean, it runs; drift, it is refused
   `session-drift`; a check that could not finish, `fenced`; a check an engine event abandoned, admission
   again with no look (busy while a run streams, else the check once more).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mosaic.pi_rpc import Command

from ..engines._seam import Answer
from ..engines._verdict import Checkpoint, SessionBytes, Verdict, stat_verdict
from . import _binding
from ._io import (
    READ_SESSION,
    Action,
    Call,
    CancelTimer,
    EffectDone,
    FlushEngine,
    Notify,
    Reply,
    SessionStat,
    SetTimer,
)
from ._state import CoreState
from ._values import DriftCheck

__all__ = [
    "DRIFT_READ_TIMER",
    "DRIFT_START",
]

DRIFT_START = "drift-start"  # fed once by the shell when it starts serving: the takeover drift check (rule 1)
DRIFT_READ_TIMER = "drift-read"  # the bound on the session file read of a drift check


def start(s: CoreState) -> None:
    """`DRIFT_START`: the takeover check is due; it starts at the end of this call if the engine is idle."""
    s.drift_due = True


def due(s: CoreState) -> None:
    """A check is due at the next idle moment (rule 1): an agent_settled, or the slot released (its item
    settled; an extension-handled input may have appended)."""
    s.drift_due = True


def engine_busy(s: CoreState) -> None:
    """An engine event arrived: the engine is not idle, so a check in flight can prove nothing (rule 2)."""
    if s.drift_check is not None:
        s.drift_check.dirty = True


def take_resume(s: CoreState) -> Call | None:
    """The prompt a check that just ended held (rule 6), to go through admission again; None when none."""
    call, s.resume = s.resume, None
    return call


def read_timed_out(s: CoreState) -> None:
    """`DRIFT_READ_TIMER`: the session file read did not finish within its bound (rule 5)."""
    check = s.drift_check
    if check is not None and check.read_effect is not None:
        failed(s, check, f"the session file read did not finish within {s.bounds.drift} s")


def _idle(s: CoreState) -> bool:
    """The engine is idle: admission open, no slot, no run, no stop chain, the pipe usable (brief §2:
    "after agent_settled, with no command in flight"; the core's own commands in flight are waited
    for in `step`)."""
    link = s.link
    return (s.admission_open and s.slot is None and not s.run.active and s.stop is None
            and link.poisoned is None and not link.output_closed)


def step(s: CoreState) -> None:
    """At the end of every `receive` (rules 1, 2): a due check starts once the engine is idle and nothing of
    the core's is in flight. From the moment it is due and the engine idle (it may still wait for the
    slot's get_state probe, answered within its bound) until it ends, client actions are held; when a
    due check cannot run (admission closed, a stop, a poisoned pipe) they are released."""
    if s.drift_check is not None:
        return  # held; `_release` lets them go when it ends
    if not (s.drift_due and _idle(s)):
        s.unhold()
        return
    # Hold what this call has for clients (the turn's last records) and everything until the check ends.
    s.hold()
    if s.link.in_flight:
        return  # the core's own command (the slot's probe): the check starts when it is answered
    s.drift_due = False
    s.drift_check = DriftCheck(s.new_id("d"), s.now, None)
    _ask(s, s.drift_check, s.checkpoint)


def _ask(s: CoreState, check: DriftCheck, since: Checkpoint | None) -> None:
    """The check's get_entries: only what follows the checkpoint's last entry (the incremental check),
    or every entry (the full check: at the start, with no checkpoint, or when the incremental one could
    not decide)."""
    config = s.config.drift
    assert config is not None
    check.since = since if config.incremental else None
    since_id = check.since.last_id if check.since is not None else None
    check.command = s.config.engine.send_entries(s.link, since_id, now=s.now, bound=s.bounds.drift)
    check.engine = None
    check.read_effect = None
    s.emit(FlushEngine())


def prompt_check(s: CoreState, call: Call) -> bool:
    """Rule 6, for a prompt every other admission check passed: False when the file is the verified point
    (the prompt runs now); True when this answered it (refused: drift) or holds it for a check."""
    if s.config.drift is None:
        return False
    stat = call.session
    if stat is not None and stat.error is None:
        decided = stat_verdict(stat.identity, verified=s.drift_seen, checkpoint=s.checkpoint)
        if decided is True:
            return False
        if isinstance(decided, Verdict):
            s.refuse(call, "session-drift", f"the session file moved under the engine before the prompt ran "
                                            f"({decided.reason}: {decided.detail}); admission stays closed (W10)")
            s.drift_verdict = decided
            s.checkpoint = None
            _found(s, DriftCheck(s.new_id("d"), s.now, None), decided)
            return True
    why = "no look at the file" if stat is None else stat.error or "the file grew or appeared"
    s.evidence("drift-check-before-prompt", request=call.params.get("clientRequestId"), why=why)
    s.deferred = call
    s.drift_due = True  # starts at the end of this call: the engine is idle (admission just passed)
    return True


def _resume(s: CoreState, look: bool) -> None:
    """The check a deferred prompt waited for ended: the prompt goes through admission again (`_receive`
    feeds `resume`), with the verified point as its look (`look`), or with none (an abandoned check)."""
    call, s.deferred = s.deferred, None
    if call is not None:
        s.resume = replace(call, session=SessionStat(s.drift_seen) if look else None)


def _release(s: CoreState) -> None:
    """The check ended: the held client actions go out, in their order, before anything it adds."""
    s.drift_check = None
    s.unhold()


def answered(s: CoreState, check: DriftCheck, command: Command) -> None:
    try:
        entries = s.config.engine.entries_answer(command)
    except ValueError as exc:
        failed(s, check, f"{command.type} answer: {exc}")
        return
    if isinstance(entries, Answer):
        if check.since is not None:  # the checkpoint's last entry is not the engine's: decide in full
            s.evidence("drift-check-full", check=check.check_id, why=entries.error)
            _ask(s, check, None)
            return
        failed(s, check, f"{command.type} failed: {entries.error}")
        return
    check.engine = entries
    if check.dirty:
        _abandon(s, check)
        return
    check.command = None
    offset = check.since.identity.size if check.since is not None else 0
    check.read_effect = s.ask(READ_SESSION, {"check": check.check_id, "from": offset})
    s.emit(SetTimer(DRIFT_READ_TIMER, s.now + s.bounds.drift))


def read_done(s: CoreState, done: EffectDone) -> None:
    check = s.drift_check
    if check is None or done.effect_id != check.read_effect or check.engine is None:
        return  # a read that finished after its check ended (failed, timed out, abandoned)
    s.emit(CancelTimer(DRIFT_READ_TIMER))
    if check.dirty:
        _abandon(s, check)
        return
    result = done.result
    file = result.get("file")
    if result.get("ok") is not True or not (file is None or isinstance(file, SessionBytes)):
        failed(s, check, f"the session file could not be read: {result.get('error', 'no bytes')}")
        return
    config = s.config.drift
    assert config is not None
    if check.since is not None:
        verdict: Verdict | None = s.config.engine.check_appended(check.engine, file, checkpoint=check.since)
        if verdict is None:  # rule D: the ids that follow are not the engine's answer; decide in full
            s.evidence("drift-check-full", check=check.check_id, why="the appended ids differ")
            _ask(s, check, None)
            return
    else:
        verdict = s.config.engine.check(check.engine, file, session_id=config.session_id, previous=s.drift_seen)
    if verdict.drift and verdict.reason in s.config.engine.persistence_drift:
        _unpersisted(s)  # before the held records go out
    _release(s)
    s.drift_verdict = verdict
    if verdict.drift:
        s.checkpoint = None
        _found(s, check, verdict)
    else:
        s.drift_seen = verdict.seen
        s.checkpoint = verdict.checkpoint
    _resume(s, look=True)


def _unpersisted(s: CoreState) -> None:
    """The check after a turn found the engine's own writes torn or missing: every finished receipt the
    check holds (its turn ended just before; no client has it yet) reads turnState `unpersisted`, and
    every held action that carries it (its record, an observe's receipts, an exact retry's reply) is
    rebuilt before it goes out, so no client is told a turn completed that the file does not show."""
    held = s.held or []
    ids = {a.params.get("request") for a in held if isinstance(a, Notify) and a.method == "record"
           and a.params.get("type") == "receipt" and a.params.get("state") == "finished"}
    fresh: dict[str, dict[str, Any]] = {}
    for request in s.requests.values():
        if request.request_id in ids and request.receipt == "finished":
            request.mark_unpersisted()
            fresh[request.request_id] = request.receipt_record()
    if fresh:
        s.rewrite_held(lambda action: with_receipts(action, fresh))


def _found(s: CoreState, check: DriftCheck, verdict: Verdict) -> None:
    """Drift: admission closes, the binding goes uncertain (session-drift), views reconcile (a marker to
    every subscriber), evidence keeps the verdict. Nothing is written to the engine or the file."""
    detail = f"{verdict.reason}: {verdict.detail}"
    s.evidence("session-drift", check=check.check_id, **verdict.to_evidence())
    _binding.fence(s, "session-drift", detail)
    if s.binding_state != "stopping":  # a force stop running decides the binding (as for a poison)
        _binding.uncertain(s, "session-drift", detail)
    s.broadcast_binding()
    subs = s.subscribers()
    if subs:
        s.emit(Notify(subs, "marker", {"reason": "session-drift", "drift": verdict.reason,
                                           "detail": verdict.detail, "execution": s.execution}))


def failed(s: CoreState, check: DriftCheck, detail: str) -> None:
    """The check could not finish: its answer is unknown, never "no drift" (W19). Uncertain, admission
    closed."""
    _release(s)
    s.drift_verdict = None
    if check.read_effect is not None:
        s.emit(CancelTimer(DRIFT_READ_TIMER))
    s.evidence("drift-check-failed", check=check.check_id, detail=detail)
    _binding.fence(s, "drift-check", detail)
    if s.binding_state != "stopping":
        _binding.uncertain(s, "drift-check-failed", detail)
    s.broadcast_binding()
    _resume(s, look=True)


def _abandon(s: CoreState, check: DriftCheck) -> None:
    """An engine event arrived during the check: the engine was not idle, so the comparison could show
    a false drift or miss none. Void; it runs again at the next idle moment."""
    _release(s)
    s.drift_due = True
    s.evidence("drift-check-abandoned", check=check.check_id)
    _resume(s, look=False)


def with_receipts(action: Action, fresh: Mapping[str, dict[str, Any]]) -> Action:
    """`action` with each receipt record of a request in `fresh` replaced by the fresh one: a record
    notification, and a reply's `receipt` (prompt) or `receipts` (observe)."""
    def swap(value: Any) -> Any:
        if isinstance(value, Mapping) and value.get("type") == "receipt" and value.get("request") in fresh:
            return fresh[value["request"]]
        return value

    if isinstance(action, Notify) and action.method == "record":
        return replace(action, params=swap(action.params))
    if isinstance(action, Reply) and isinstance(action.result, Mapping):
        result = dict(action.result)
        if "receipt" in result:
            result["receipt"] = swap(result["receipt"])
        if isinstance(result.get("receipts"), list):
            result["receipts"] = [swap(r) for r in result["receipts"]]
        return replace(action, result=result)
    return action


