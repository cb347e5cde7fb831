"""A second engine for the core: the seam's `EngineRules` for a toy wire with other command and event names than
Pi's (issue 31 S12). It proves the core runs an engine it was not written for: a Claude adapter (issue 32) is a
new folder, not edits across the core.

The toy speaks JSON lines over pi-rpc's `LinkCore` (the seam's `Wire`: a command carries an id, its answer is a
`response` record with that id and `success`), and differs from Pi where a second engine can:

- its commands: `say` (a prompt), `hush` (the interrupt: it empties the queue **and** aborts the run, in one
  request; `clear_aborts`), `wait-idle` (answered once no run goes: the chain's abort), `list-ids` (the ids
  it holds, after `after`: the drift check). It has **no probe** (`send_probe` returns None): an ack means the
  input was taken for a run, whose events follow;
- its events: `went` (a run begins), `heard` (the person's words: the slot's working), `bit` (a piece of the
  answer), `spoke` (the answer's end; `cut` when the hush ended it), `paused` (the turn ends), `idle` (the run
  settles), `held` (input waits in its queue), `ask` (a question, P3: shown, never answered), anything else
  unknown;
- its session file: one JSON object a line, each with an `id`; the file is the engine's when its ids are the
  engine's, in order (`unknown-id` for one it never wrote, `disk-behind` for one it holds and the file lacks).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from mosaic.controller.drift import Checkpoint, EngineList, FileIdentity, SessionBytes, Verdict
from mosaic.controller.engines import Answer, Cleared, DialogAsk, OverlapSignal, Reading
from mosaic.pi_rpc import Command, LinkCore

TOY_COMMANDS = ("say", "hush", "wait-idle", "list-ids")
TOY_EVENTS = ("went", "heard", "bit", "spoke", "paused", "idle", "held", "ask")
_RUN_EVENTS = frozenset({"heard", "bit", "spoke", "paused"})


def _answer(command: Command) -> Answer:
    response = command.response or {}
    return Answer(True) if response.get("success") is True else Answer(False, str(response.get("why", "refused")))


class ToyRules:
    """The toy engine's rules (see the module docstring)."""

    name = "Toy"
    overlap_signals: Mapping[str, OverlapSignal] = MappingProxyType({
        "O1": OverlapSignal("O1", "a `went` inside a run's turn", "two runs at once"),
        "O2": OverlapSignal("O2", "`say` acknowledged while a run it did not start goes", "it can never run"),
        "O3": OverlapSignal("O3", "an `idle` inside a run's turn", "a settle that is not this run's"),
        "O4": OverlapSignal("O4", "a `spoke` cut with no hush of the controller's", "someone else aborted"),
        "O5": OverlapSignal("O5", "input `held` between the clear's answer and the abort", "it would run"),
        "O6": OverlapSignal("O6", "a run's event with no run going", "a run the stream never started"),
    })
    persistence_drift: frozenset[str] = frozenset({"disk-behind"})
    clear_aborts = True
    permission_requests = False

    def new_wire(self, *, command_bound: float) -> LinkCore:
        return LinkCore(default_bound=command_bound, max_record_bytes=1 << 20)

    def text_problem(self, text: str) -> tuple[str, str] | None:
        if text.startswith("#"):
            return ("text-policy", "text starting with '#' is a toy directive, so it is not sent")
        return None

    def send_prompt(self, wire: LinkCore, text: str, *, now: float, bound: float) -> Command:
        return wire.send({"type": "say", "words": text}, now=now, bound=bound)

    def prompt_answer(self, command: Command) -> Answer:
        return _answer(command)

    def send_probe(self, wire: LinkCore, *, now: float, bound: float) -> Command | None:
        return None

    def probe_answer(self, wire: LinkCore, prompt: Command, probe: Command) -> bool | str:
        return "the toy has no probe"

    def send_clear(self, wire: LinkCore, *, now: float, bound: float) -> Command:
        return wire.send({"type": "hush"}, now=now, bound=bound)

    def clear_answer(self, command: Command) -> Cleared:
        response = command.response or {}
        dropped = response.get("dropped")
        if response.get("success") is not True or not isinstance(dropped, list) \
                or not all(isinstance(t, str) for t in dropped):
            return Cleared(False, error=str(response.get("why", "malformed hush answer")))
        return Cleared(True, follow_up=tuple(dropped))

    def send_abort(self, wire: LinkCore, *, now: float) -> Command:
        return wire.send({"type": "wait-idle"}, now=now, bound=None)

    def abort_answer(self, command: Command) -> Answer:
        return _answer(command)

    def send_entries(self, wire: LinkCore, since: str | None, *, now: float, bound: float) -> Command:
        return wire.send({"type": "list-ids", "after": since}, now=now, bound=bound)

    def entries_answer(self, command: Command) -> EngineList | Answer:
        response = command.response or {}
        if response.get("success") is not True:
            return Answer(False, str(response.get("why", "refused")))
        ids = response.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"not a list of ids: {str(ids)[:80]}")
        return EngineList(tuple({"id": i} for i in ids), ids[-1] if ids else None)

    def check(self, engine: EngineList, file: SessionBytes | None, *, session_id: str,
              previous: FileIdentity | None) -> Verdict:
        held = [e["id"] for e in engine.entries]
        lines = [] if file is None else [json.loads(line) for line in file.data.splitlines() if line]
        disk = [line["id"] for line in lines]

        def verdict(reason: str | None, detail: str) -> Verdict:
            seen = None if file is None else file.identity
            checkpoint = None
            if reason is None and file is not None:
                checkpoint = Checkpoint(file.identity, hashlib.sha256(file.data).hexdigest(), len(disk), len(disk),
                                        disk[-1] if disk else None)
            return Verdict(reason is not None, reason, detail, None, seen, len(disk), len(held), checkpoint)

        stray = [i for i in disk if i not in held]
        if stray:
            return verdict("unknown-id", f"the file holds {stray[0]!r}, which the toy never wrote")
        if disk != held[:len(disk)] or len(disk) < len(held):
            return verdict("disk-behind", f"the file holds {len(disk)} of the toy's {len(held)} ids")
        return verdict(None, "the file is the toy's")

    def check_appended(self, engine: EngineList, file: SessionBytes | None, *,
                       checkpoint: Checkpoint) -> Verdict | None:
        return None  # the toy always decides in full

    def answer(self, wire: LinkCore, dialog_id: str, choice: Mapping[str, Any], *, now: float) -> Command | None:
        return None  # the toy offers no choices (its asks stay disabled), so nothing is ever answered

    def read(self, record: Mapping[str, Any]) -> Reading:
        kind = record.get("type")
        name = kind if isinstance(kind, str) else ""
        if name not in TOY_EVENTS:
            return Reading(name, unknown=(name or "?", len(json.dumps(record).encode())))
        event: tuple[str, Mapping[str, Any]] | None = None
        dialog = None
        if name == "heard":
            event = ("message-start", {"role": "user", "content": [{"type": "text", "text": record.get("words")}]})
        elif name == "bit":
            event = ("text-delta", {"contentIndex": 0, "delta": record.get("words", "")})
        elif name == "spoke":
            event = ("message-end", {"role": "assistant", "content": [{"type": "text", "text": record.get("words")}],
                                     "updateMode": "replace"})
        elif name == "idle":
            event = ("run-settled", {})
        elif name == "ask":
            dialog = DialogAsk(str(record["qid"]), "confirm", {"title": record.get("title"), "options": None})
        return Reading(
            name,
            run_event=name in _RUN_EVENTS,
            run_start=name == "went",
            turn_end=name == "paused",
            user_message_start=name == "heard",
            aborted_message=name == "spoke" and record.get("cut") is True,
            queued_input=name == "held" and bool(record.get("lines")),
            run_settled=name == "idle",
            event=event,
            dialog=dialog,
        )


TOY_RULES = ToyRules()


def toy_turn(words: str, reply: str) -> list[dict[str, Any]]:
    """A whole run as the toy writes it after it acknowledged `say`."""
    return [{"type": "went"}, {"type": "heard", "words": words},
            *({"type": "bit", "words": w} for w in reply.split(" ")),
            {"type": "spoke", "words": reply}, {"type": "paused"}, {"type": "idle"}]


def toy_file(ids: list[str], *, ino: int = 9) -> SessionBytes:
    """The toy's session file holding `ids`, one JSON line each."""
    data = b"".join(json.dumps({"id": i}).encode() + b"\n" for i in ids)
    return SessionBytes(data, FileIdentity(1, ino, len(data)))
