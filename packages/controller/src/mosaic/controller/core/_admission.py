"""The core's admission room: the gate every call passes, then a prompt's admission and its dispatch.

The rules it keeps (the core's rules 1, 2 and 7b; `_receive.py` lists the rooms):

1. Admission is an ordered table, walked top to bottom, and the first check that answers ends it; a test
   walks the same tables. Every call first passes `CALL_GATE`: an admitted connection (`channel`, rule 7b:
   a peer no grant names was closed at connect), a hello only as the connection's first request
   (`malformed`), a CHAT-01 command this increment does not verify (`unsupported-capability`), the scope
   of the connection's grant (`scope`, `_access` rule 6), the caller's grant (`capability`,
   `_access.required_operations`, before anything else about the request), the controller incarnation token
   (`stale-incarnation`, H21, deviation V-1; observe carries none, or checks its own). A prompt then
   passes `PROMPT_ADMISSION` (§1, seed README "Refusals", in this order): a CHAT-01 client request id;
   dedup by (actor, conversation, client request id) for this incarnation (an exact retry returns the same
   receipt, H12; other text is conflicting-request, H13); the request's generation (H1, H2), then the
   controlling connection (S5, H15); open admission (preflight K8, session-drift W10, fenced); the one
   pending slot, no run streaming and no drift check in flight (busy, H18, N13, the core's rule 8); the
   text policy (draft, text-policy: `engines/pi/_tables.TEXT_PREFIXES`); last, the session file is still the one the
   last drift check verified (session-drift, or held for a check: `core/_drift` rule 6, issue 27).
   Refused requests send zero engine bytes.
2. Dispatch: the prompt goes to the engine through `LinkCore.send_prompt` in the same `receive` call,
   reserving the slot first (§1 "Pending dispatch slot"); nothing stands between the last check and the
   write. The slot is released only by reconciliation (`_answers`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from mosaic.controller_client import UNVERIFIED_METHODS
from mosaic.pi_rpc.link import LinkPoisoned

from . import _drift, _slot
from ._access import required_operations
from ._io import Call, FlushEngine, Reply
from ._state import CoreState, text_digest
from ._tables import draft_problem
from ._values import Request

__all__ = [
    "AdmissionCheck",
    "CALL_GATE",
    "PROMPT_ADMISSION",
]

CHAT01_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


class Asked:
    """One call under admission, and what admission works out once for it (a prompt's text digest)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    @cached_property
    def digest(self) -> str:
        return text_digest(self.call.params["text"])


@dataclass(frozen=True)
class AdmissionCheck:
    """One row of an admission table: its name, the refusal codes it answers with, where the rule comes
    from, and the check itself: True when it answered the call (refused it, or replied to an exact retry),
    which ends admission."""

    name: str
    codes: tuple[str, ...]
    source: str
    answers: Callable[[CoreState, Asked], bool]


# ------------------------------------------------------------------------------------- every call (gate)

def _not_admitted(s: CoreState, asked: Asked) -> bool:
    if asked.call.conn in s.connections:
        return False
    # Never admitted (the core's rule 7b: closed at connect); a shell that fed it anyway is wrong.
    s.refuse(asked.call, "channel", "this connection was not admitted: no grant names its peer")
    return True


def served(s: CoreState, call: Call) -> str | None:
    """The operation an answer-confirmation serves: its confirmation's, when that is this connection's."""
    if call.method != "answer-confirmation":
        return None
    conf = s.confirmations.get(call.params.get("confirmation", ""))
    return conf.operation if conf is not None and conf.conn == call.conn else None


def _hello_not_first(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    started = s.connections[call.conn].begin()
    if call.method == "hello" and started:
        s.refuse(call, "malformed", "hello must be the connection's first request (seed README \"Refusals\": "
                                    "a message other than hello first); this connection went on without one")
        return True
    return False


def _unverified(s: CoreState, asked: Asked) -> bool:
    if asked.call.method not in UNVERIFIED_METHODS:
        return False
    if asked.call.method == "approval" and s.config.answers_decisions:
        return False  # issue 33: the deployment answers dialogs; issue 32: the engine's permission requests (P7)
    s.refuse(asked.call, "unsupported-capability", f"{asked.call.method} is a CHAT-01 command this increment does "
                                                   "not verify (approval is I2's; draft, upload, queue-edit CHAT-04's)")
    return True


def _out_of_scope(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    conn = s.connections[call.conn]
    if conn.in_scope or call.method == "hello":
        return False
    which = f"grant {conn.grant!r}" if conn.grant is not None else f"no grant of uid {conn.ids[0]}"
    s.refuse(call, "scope", f"{which} covers conversation {s.config.conversation!r}")
    return True


def _lacks_grant(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    conn = s.connections[call.conn]
    needed = required_operations(call.method, call.params, served(s, call))
    if needed and conn.operations.isdisjoint(needed):
        s.refuse(call, "capability", f"uid {conn.ids[0]}'s grant lacks {' or '.join(needed)}, which "
                                     f"{call.method} needs")
        return True
    return False


def _stale_incarnation(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    if call.method not in ("observe", "hello") and call.params.get("incarnation") != s.config.incarnation:
        # Mutant 20 removes this check: H21 must then write a second prompt.
        s.refuse(call, "stale-incarnation", "the request carries another controller incarnation; "
                                            "observe again (outcomes under the old one are unknown)")
        return True
    return False


# ------------------------------------------------------------------------------------------- a prompt

def _malformed_request_id(s: CoreState, asked: Asked) -> bool:
    params = asked.call.params
    for name in ("clientRequestId", "draftId"):
        if name in params and not CHAT01_ID.fullmatch(params[name]):
            s.refuse(asked.call, "malformed", f"{name} is not a CHAT-01 id ([A-Za-z0-9][A-Za-z0-9._:-]{{0,127}})")
            return True
    return False


def _seen_before(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    crid = call.params["clientRequestId"]
    known = s.requests.get(crid)
    if known is None and crid in s.retired:
        known = Request(*s.retired[crid])
    if known is None:
        return False
    if known.text_digest == asked.digest:  # H12: the same receipt, no second dispatch
        s.emit(Reply(call.conn, call.rpc_id, {"outcome": "duplicate", "request": known.request_record(),
                                              "receipt": known.receipt_record()}))
    else:
        s.refuse(call, "conflicting-request", f"client request {crid!r} was used for other text")
    return True


def _not_in_control(s: CoreState, asked: Asked) -> bool:
    return not s.check_control(asked.call, asked.call.params["generation"])


def _admission_closed(s: CoreState, asked: Asked) -> bool:
    call = asked.call
    if "preflight" in s.fences:
        s.refuse(call, "preflight", f"the load check did not pass: {s.fences['preflight']}; admission "
                                    "never opened (K8)")
    elif "session-drift" in s.fences:
        s.refuse(call, "session-drift", f"the idle drift check found the session file moved under the engine "
                                        f"({s.fences['session-drift']}); admission stays closed (W10)")
    elif not s.admission_open:
        s.refuse(call, "fenced", f"admission is closed ({', '.join(sorted(s.fences)) or s.binding_state})")
    else:
        return False
    return True


def _busy(s: CoreState, asked: Asked) -> bool:
    if s.slot is None and not s.run.active and s.drift_check is None and s.deferred is None \
            and s.link.can_send_prompt():
        return False
    what = ("a prompt holds the dispatch slot" if s.slot is not None else "a run is streaming"
            if s.run.active or s.drift_check is None and s.deferred is None else "the idle drift check is in flight")
    s.refuse(asked.call, "busy", f"{what}; CHAT-03 has no broker queue, the text stays with the client")
    return True


def _text_refused(s: CoreState, asked: Asked) -> bool:
    text = asked.call.params["text"]
    problem = draft_problem(text) or s.config.engine.text_problem(text)
    if problem is None:
        return False
    s.refuse(asked.call, *problem)
    return True


def _session_moved(s: CoreState, asked: Asked) -> bool:
    return _drift.prompt_check(s, asked.call)


CALL_GATE: tuple[AdmissionCheck, ...] = (
    AdmissionCheck("admitted-connection", ("channel",), "rule 7b: closed at connect", _not_admitted),
    AdmissionCheck("hello-first", ("malformed",), "seed \"Refusals\": a message other than hello first",
                   _hello_not_first),
    AdmissionCheck("verified", ("unsupported-capability",), "seed \"Refusals\": an operation I1 doesn't verify",
                   _unverified),
    AdmissionCheck("scope", ("scope",), "_access rule 6: the grant's scope", _out_of_scope),
    AdmissionCheck("grant", ("capability",), "rule 7b: _access.required_operations", _lacks_grant),
    AdmissionCheck("incarnation", ("stale-incarnation",), "§1, H21, deviation V-1", _stale_incarnation),
)

PROMPT_ADMISSION: tuple[AdmissionCheck, ...] = (
    AdmissionCheck("client-request-id", ("malformed",), "CHAT-01 ids", _malformed_request_id),
    AdmissionCheck("dedup", ("conflicting-request",), "§1 dedup; H12 (exact retry: its receipt), H13",
                   _seen_before),
    AdmissionCheck("control", ("generation", "controller"), "H1, H2; S5, H15 (seed \"Refusals\" order)",
                   _not_in_control),
    AdmissionCheck("open-admission", ("preflight", "session-drift", "fenced"), "K8, W10, §1 fences",
                   _admission_closed),
    AdmissionCheck("slot", ("busy",), "§1 pending slot; H18, N13; core/_drift (a check in flight)", _busy),
    AdmissionCheck("text", ("draft", "text-policy"), "§4: core/_tables.draft_problem, EngineRules.text_problem", _text_refused),
    AdmissionCheck("session-file", ("session-drift",), "issue 27: a second writer seen before the next prompt; "
                   "core/_drift rule 6 (held for a check when the file grew)", _session_moved),
)


def gate(s: CoreState, call: Call) -> bool:
    """Walk `CALL_GATE` for any call; True when it passed (nothing was answered)."""
    asked = Asked(call)
    return not any(check.answers(s, asked) for check in CALL_GATE)


def prompt(s: CoreState, call: Call) -> None:
    """Walk `PROMPT_ADMISSION`; a prompt every check passed is dispatched in this same call (rule 2)."""
    asked = Asked(call)
    for check in PROMPT_ADMISSION:
        if check.answers(s, asked):
            return
    _dispatch(s, asked)


def _dispatch(s: CoreState, asked: Asked) -> None:
    """Reserve the slot, then write (§1 "Pending dispatch slot"), inside this one receive call."""
    call = asked.call
    text = call.params["text"]
    crid = call.params["clientRequestId"]
    digest = asked.digest
    request = Request(s.new_id("r"), crid, s.config.actor, s.config.conversation, s.execution,
                      s.config.incarnation, s.generation, call.conn, digest,
                      len(text.encode("utf-8", "surrogatepass")), s.now, updated_at=s.now,
                      peer=s.connections[call.conn].ids, draft_id=call.params.get("draftId"),
                      draft_revision=call.params.get("draftRevision"))
    try:
        command = s.config.engine.send_prompt(s.link, text, now=s.now, bound=s.bounds.prompt_ack)
    except LinkPoisoned as exc:  # admission checked it; a bug if this happens
        s.refuse(call, "fenced", f"the engine pipe is poisoned: {exc.reason}")
        return
    _slot.reserve(s, request, command)
    # The write first (issue 34: the records below are encoded after it, off the prompt path). What the write
    # makes known (dispatched) still follows these records: the link reports it as a queued event, fed to the
    # core after this call, and the reply and records reach the clients at the end of this loop turn.
    s.emit(FlushEngine())
    request_record, receipt_record = request.request_record(), request.receipt_record()  # built once, sent twice
    s.emit(Reply(call.conn, call.rpc_id, {"outcome": "admitted", "clientRequest": {
        "type": "clientRequest", "clientRequest": crid, "actor": request.actor, "conversation": request.conversation,
        "operation": "prompt", "textDigest": digest, "textBytes": request.text_bytes},
        "request": request_record, "receipt": receipt_record}))
    s.record(request_record)
    s.record(receipt_record)
    s.broadcast_binding()
