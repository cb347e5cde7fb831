"""Claude's rules on the core's wire (`ClaudeRules`, the seam's `EngineRules`; `CLAUDE_RULES` is the instance the
lifecycle uses): the lines the core writes to Claude Code 2.1.283 and what their answers mean, its text policy
and overlap table (`engines/claude/_tables`), its record reading (`engines/claude/_read`). The wire is
`ClaudeWire` (`engines/claude/_link`) over claude-rpc's link core.

1. A prompt is a stream-json user message with a fresh uuid; its answer is its first `command_lifecycle`
   frame: `queued` (or `started`) accepts it, any other state refuses it.
2. No probe: Claude's run events follow the acknowledgement (`started`, `system/init`, ...), so the core waits
   for them, bounded by the stop's settle and the next check.
3. The interrupt's clear is an `interrupt` with `cancel_queued` (one request that also aborts the turn:
   `clear_aborts`). It is a clear only with the R3-1 proof from its receipt (claude-rpc's
   `InterruptEvidence.nothing_queued_runs`: nothing still queued, every message written before it accounted
   for); otherwise it is a failed clear, so the stop ends uncertain with no abort written (`core/_chain` rule
   2): a message the interrupt left queued would run after it as a new turn (recordings
   sealed-interrupt-still-queued). The uuids it cancelled that the controller never sent are what it removed
   (input from outside Mosaic); the controller's own prompt, cancelled before its turn started (the interrupt
   read right after the prompt: H9), is not: its `cancelled` frame settles the slot (`_read` rule 2).
4. The chain's abort is a second `interrupt` answered once Claude is idle (`ClaudeWire` rule 3); an
   answer that is not `success` is refused.
5. The drift check (`engines/claude/_drift`): `send_entries` is `ClaudeWire.entries` (a second `initialize`,
   its rule 7); its answer is the entries the stream named since the checkpoint, given only when Claude
   answered `success` with `session_state` `idle` (anything else refuses: a turn or a permission request
   is open, so nothing can be proven). `check` is the full check (a session new at the claim),
   `check_appended` the incremental one from the claim's baseline or the last clean check; it always
   decides.
6. Permission requests (P7): every `can_use_tool` is a dialog the controller answers (`permission_requests`:
   the brief's §7 gates only non-permission forms on C-2, so no `answer_dialogs` option is needed; Pi's
   default stays P3). `answer` writes the chosen body, allow once or deny, as one `control_response` with
   the request's exact id (`ClaudeWire` rule 5); None when the wire does not write it (the core refuses the
   answer). Claude's initialize does not list pending requests on this pin (no
   `pending_permission_requests`, only `session_state: requires_action`): a restarted controller cannot
   re-read which request is pending, so none is re-shown and the stop that ended it says uncertain.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from mosaic.pi_rpc import Command, LinkCore

from .._seam import ENGINE_RECORD_CAP, Answer, Cleared, OverlapSignal, Reading
from .._verdict import Checkpoint, EngineList, FileIdentity, SessionBytes, Verdict
from . import _read
from ._drift import CLAUDE_PERSISTENCE_DRIFT, check_appended, check_transcript
from ._link import ClaudeCommand, ClaudeWire
from ._tables import CLAUDE_OVERLAP_SIGNALS, text_problem

__all__ = ["CLAUDE_RULES", "ClaudeRules"]

_ACCEPTED = frozenset({"queued", "started"})


def _new_uuid() -> str:
    return str(uuid.uuid4())


def _wire(wire: LinkCore) -> ClaudeWire:
    assert isinstance(wire, ClaudeWire), wire  # the wire this adapter made (`new_wire`)
    return wire


def _control(command: Command) -> Answer:
    """A control request's answer: `success`, or the `error` Claude wrote."""
    body = (command.response or {}).get("response")
    if isinstance(body, Mapping) and body.get("subtype") == "success":
        return Answer(True)
    error = body.get("error") if isinstance(body, Mapping) else None
    return Answer(False, str(error or "error response"))


class ClaudeRules:
    """Claude Code 2.1.283's rules on the core's wire (rules 1-6). `uuids` makes each user message's uuid (a
    test passes the recording's)."""

    name = "Claude"
    overlap_signals: Mapping[str, OverlapSignal] = CLAUDE_OVERLAP_SIGNALS
    persistence_drift: frozenset[str] = CLAUDE_PERSISTENCE_DRIFT
    clear_aborts = True  # rule 3: the interrupt clears and aborts in one request
    permission_requests = True  # rule 6: `can_use_tool` is answered allow once or deny (P7), not gated on C-2

    def __init__(self, *, uuids: Callable[[], str] = _new_uuid) -> None:
        self._uuids = uuids

    def new_wire(self, *, command_bound: float) -> ClaudeWire:
        return ClaudeWire(default_bound=command_bound, max_record_bytes=ENGINE_RECORD_CAP, uuids=self._uuids)

    def text_problem(self, text: str) -> tuple[str, str] | None:
        return text_problem(text)

    def send_prompt(self, wire: LinkCore, text: str, *, now: float, bound: float) -> Command:
        return _wire(wire).send_prompt(text, now=now, bound=bound)

    def prompt_answer(self, command: Command) -> Answer:
        state = (command.response or {}).get("state")
        if state in _ACCEPTED:
            return Answer(True)
        return Answer(False, f"Claude's lifecycle frame for the message says {state!r}")

    def send_probe(self, wire: LinkCore, *, now: float, bound: float) -> Command | None:
        return None  # rule 2

    def probe_answer(self, wire: LinkCore, prompt: Command, probe: Command) -> bool | str:
        return "Claude has no probe"

    def send_clear(self, wire: LinkCore, *, now: float, bound: float) -> Command:
        return _wire(wire).interrupt(now=now, bound=bound, abort=False)

    def clear_answer(self, command: Command) -> Cleared:
        answer = _control(command)
        if not answer.ok:
            return Cleared(False, error=answer.error)
        assert isinstance(command, ClaudeCommand) and command.out is not None, command
        evidence = command.out.evidence
        if evidence is None:
            return Cleared(False, error="the interrupt's answer carries no receipt")
        if not evidence.nothing_queued_runs:
            return Cleared(False, error=(
                f"the interrupt's receipt does not prove that nothing queued runs: still queued "
                f"{list(evidence.still_queued)}, unacknowledged {[o.key for o in evidence.unacknowledged]}, "
                f"unaccounted {[o.key for o in evidence.unaccounted]}"))
        return Cleared(True, follow_up=tuple(u for u in evidence.cancelled if u in evidence.foreign))

    def send_abort(self, wire: LinkCore, *, now: float) -> Command:
        return _wire(wire).interrupt(now=now, bound=None, abort=True)

    def abort_answer(self, command: Command) -> Answer:
        return _control(command)

    def answer(self, wire: LinkCore, dialog_id: str, choice: Mapping[str, Any], *, now: float) -> Command | None:
        """Rule 6: one `control_response` to the request `dialog_id`, the choice's body exactly."""
        return _wire(wire).answer(dialog_id, choice, now=now)

    def send_entries(self, wire: LinkCore, since: str | None, *, now: float, bound: float) -> Command:
        return _wire(wire).entries(since, now=now, bound=bound)

    def entries_answer(self, command: Command) -> EngineList | Answer:
        """Rule 5: the entries noted since the checkpoint, once Claude answered the barrier idle."""
        answer = _control(command)
        if not answer.ok:
            return answer
        body = ((command.response or {}).get("response") or {}).get("response")
        state = body.get("session_state") if isinstance(body, Mapping) else None
        if state != "idle":
            return Answer(False, f"Claude's session_state is {state!r}, not 'idle'")
        assert isinstance(command, ClaudeCommand), command
        if command.entries is None:
            raise ValueError("the initialize answer carries no entries")
        return EngineList(command.entries, None)

    def check(self, engine: EngineList, file: SessionBytes | None, *, session_id: str,
              previous: FileIdentity | None) -> Verdict:
        return check_transcript(engine, file, session_id=session_id, previous=previous)

    def check_appended(self, engine: EngineList, file: SessionBytes | None, *,
                       checkpoint: Checkpoint) -> Verdict | None:
        return check_appended(engine, file, checkpoint=checkpoint)

    def read(self, record: Mapping[str, Any]) -> Reading:
        return _read.read(record)


CLAUDE_RULES = ClaudeRules()
