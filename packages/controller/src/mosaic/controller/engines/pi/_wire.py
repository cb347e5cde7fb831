"""Pi's rules on the core's wire (`PiRules`, the seam's `EngineRules`; `PI_RULES` is the one instance): the
commands the core writes to Pi and what their answers mean, Pi's text policy, its event reading
(`engines/pi/_read`), its overlap table and its drift comparison (`engines/pi/_drift`).

1. A prompt is pi-rpc's `send_prompt` (the prompt-order rule: one un-acked prompt at a time, FACTS a5); its
   answer is `success` or the native `error` (rpc-mode.js 314-318).
2. The probe is a `get_state` written after the ack; only such a get_state is evidence (FACTS a5, Part 2 F:
   pi-rpc's `prompt_state` enforces it): `isStreaming`, or an agent_start read between the ack and its reply,
   means a run.
3. The interrupt's clear is `clear_queue`, answered with the two queues' texts (`steering`, `followUp`), each
   a list of strings; anything else is a malformed answer (no abort follows). Its abort is `abort`, answered
   once Pi is idle (rpc.md 124-135: no link bound; the core's settle timer bounds it, K9).
4. The drift check asks `get_entries` (with `since` the checkpoint's last id: the incremental check) and
   reads its `data` with `engine_list`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mosaic.pi_rpc import Command, LinkCore
from mosaic.pi_rpc.link import NotEvidence

from .._seam import ENGINE_RECORD_CAP, Answer, Cleared, OverlapSignal, Reading
from .._verdict import Checkpoint, EngineList, FileIdentity, SessionBytes, Verdict
from . import _read
from ._drift import PERSISTENCE_DRIFT, check_appended, check_drift, engine_list
from ._tables import OVERLAP_SIGNALS, prefix_problem

__all__ = ["PI_RULES", "PiRules"]


def _answer(command: Command) -> Answer:
    response = command.response or {}
    if response.get("success") is True:
        return Answer(True)
    return Answer(False, str(response.get("error", "error response")))


class PiRules:
    """The pinned Pi's rules on the core's wire (rules 1-4)."""

    name = "Pi"
    overlap_signals: Mapping[str, OverlapSignal] = OVERLAP_SIGNALS
    persistence_drift: frozenset[str] = PERSISTENCE_DRIFT
    clear_aborts = False  # clear_queue leaves the run going; `abort` is its own command (rule 3)
    permission_requests = False  # its dialogs are extension forms: answered only with `answer_dialogs` (issue 33)

    def new_wire(self, *, command_bound: float) -> LinkCore:
        return LinkCore(default_bound=command_bound, max_record_bytes=ENGINE_RECORD_CAP)

    def text_problem(self, text: str) -> tuple[str, str] | None:
        return prefix_problem(text)

    def send_prompt(self, wire: LinkCore, text: str, *, now: float, bound: float) -> Command:
        return wire.send_prompt(text, now=now, bound=bound)

    def prompt_answer(self, command: Command) -> Answer:
        return _answer(command)

    def send_probe(self, wire: LinkCore, *, now: float, bound: float) -> Command | None:
        return wire.send({"type": "get_state"}, now=now, bound=bound)

    def probe_answer(self, wire: LinkCore, prompt: Command, probe: Command) -> bool | str:
        try:
            evidence = wire.prompt_state(prompt, probe)
        except NotEvidence as exc:
            return str(exc)
        return evidence.is_streaming or evidence.agent_start_between

    def send_clear(self, wire: LinkCore, *, now: float, bound: float) -> Command:
        return wire.send({"type": "clear_queue"}, now=now, bound=bound)

    def clear_answer(self, command: Command) -> Cleared:
        response = command.response or {}
        data = response.get("data") if isinstance(response.get("data"), Mapping) else None
        queues = _queues(data)
        if response.get("success") is not True or queues is None:
            return Cleared(False, error=str(response.get("error", "malformed clear_queue answer")))
        return Cleared(True, *queues)

    def send_abort(self, wire: LinkCore, *, now: float) -> Command:
        return wire.send({"type": "abort"}, now=now, bound=None)

    def abort_answer(self, command: Command) -> Answer:
        return _answer(command)

    def send_entries(self, wire: LinkCore, since: str | None, *, now: float, bound: float) -> Command:
        request: dict[str, Any] = {"type": "get_entries"}
        if since is not None:
            request["since"] = since
        return wire.send(request, now=now, bound=bound)

    def entries_answer(self, command: Command) -> EngineList | Answer:
        response = command.response or {}
        if response.get("success") is not True:
            return Answer(False, str(response.get("error", "error response")))
        return engine_list(response.get("data"))

    def check(self, engine: EngineList, file: SessionBytes | None, *, session_id: str,
              previous: FileIdentity | None) -> Verdict:
        return check_drift(engine, file, session_id=session_id, previous=previous)

    def check_appended(self, engine: EngineList, file: SessionBytes | None, *,
                       checkpoint: Checkpoint) -> Verdict | None:
        return check_appended(engine, file, checkpoint=checkpoint)

    def read(self, record: Mapping[str, Any]) -> Reading:
        return _read.read(record)

    def answer(self, wire: LinkCore, dialog_id: str, choice: Mapping[str, Any], *, now: float) -> Command | None:
        # One extension_ui_response with the dialog's exact id and the choice's native answer, as `_read` made
        # it (P1); Pi never acknowledges it (rpc-mode.js 614-626), so its outcome ends at written.
        return wire.send_ui_response(dialog_id, choice, now=now)


def _queues(data: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    if data is None:
        return None
    steering, follow_up = data.get("steering"), data.get("followUp")
    if not isinstance(steering, list) or not isinstance(follow_up, list):
        return None
    if not all(isinstance(t, str) for t in [*steering, *follow_up]):
        return None
    return tuple(steering), tuple(follow_up)


PI_RULES = PiRules()
