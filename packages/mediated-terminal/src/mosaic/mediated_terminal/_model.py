"""The terminal's state over the client library, testable without a terminal.

`TerminalModel` holds one `ControllerClient` (for the whole session, across reconnects), one `Transcript`
(the view it renders) and a `Composer` (the terminal's local text buffer, owned by the UI). The rules it
keeps (brief §4 S4, S5; §9 E7; the seed README "The terminal" and "Approval"):

1. The composer is enabled only while this terminal's connection is the controller (`controls`). An
   observer's Enter (or paste) sends nothing: the note says this terminal does not control the
   conversation, and zero bytes leave for the controller, so zero reach the engine (S5, E7).
2. Enter takes the composer at that key (`take_composer`, synchronous, in the key's handler): the text is
   read and the composer cleared before the next key of the same input chunk is handled, so text after
   the Enter starts the next message; the send runs afterwards with the text taken (`send`).
3. The composer is empty at start, cleared on submit, and cleared on every control transfer (S4, mutant
   10): whenever the connected (incarnation, generation, role) changes. Text cleared by a transfer is shown
   in a note as set aside, and never sent; the note says who took control (the controller's name for the
   connection) and the generation. While disconnected nothing is cleared: the text stays (the controller
   went away; that is not a transfer). A refused prompt's text goes back into the composer (the library
   says the text stays with the caller) unless control moved meanwhile or the composer holds new text.
4. Every prompt keeps its receipt in words (`receipt_words`): sent, working, done, failed, outcome
   unknown, not admitted. Nothing is resent by the terminal; there is no resend key.
5. Force stop and recover go through a confirmation the controller issues: its summary is shown before
   anything is answered; "n" cancels it. A stop's end shows the proof or the reason it is uncertain, and
   "approval uncertain" when a Pi dialog was seen during the execution; after a force stop the next step
   is offered (recover, or quit), never a dead end.
6. A Pi dialog (a ``nativeDecision`` record) is shown with the controller's words. One the controller
   shows disabled (P3: its default; input and editor always) is never answered and nothing is sent for it.
   When the controller answers dialogs (issue 33), a decision it shows ``open`` is answered only by this
   terminal while it controls (`answer_key`): key N (1 to `CHOICE_KEYS`) takes the N-th of the record's
   ``choices`` at that key, exactly as the record gave it, and `send_answer` calls ``approve`` with the
   projection id the record gave (``nativeDecision``). One answer at a time; a choice the controller refuses
   (``refusedChoices``) has no key. An observer's key sends nothing (a note says why). The decision leaves
   the answer mode when a record says it is no longer open (answered, uncertain, settled, or superseded
   and re-shown under a new projection id, which the next key uses), when the controller refuses an answer
   to it (``decision``: the refusal in one note), or when the connection goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mosaic.controller_client import (
    AdmissionUnknown,
    ClientRefusal,
    ClientStateError,
    ConnectionLost,
    ControllerClient,
    Notification,
    PromptOutcome,
    Refused,
    RemoteProtocolError,
    RemoteRefusal,
    SentRequest,
    Subscription,
    Transcript,
)

from ._render import INCARNATION_SHOWN, confirmation_lines, dialog_line, stop_words

__all__ = ["NOT_CONTROLLER", "CannotAttach", "Composer", "Note", "TerminalModel"]

NOT_CONTROLLER = ("not admitted: controller - you do not control this conversation; nothing was sent "
                  "(Ctrl-T takes control)")
NOT_ANSWERED = ("not answered: you do not control this conversation, so this terminal does not answer the "
                "engine's question (Ctrl-T takes control)")
CHOICE_KEYS = 9  # keys 1..9 answer the first nine choices of a decision (rule 6)
NOTES_KEPT = 6
DIALOGS_KEPT = 3
_FAILURES = (RemoteRefusal, ClientRefusal, RemoteProtocolError, ConnectionLost, ClientStateError, OSError)

NoteKind = Literal["info", "refusal", "transfer", "stop", "dialog", "next"]


@dataclass(frozen=True)
class Note:
    """One line in the notes area: `kind` picks its style (a refusal is red). A note with a `key` replaces
    the earlier note with the same key (a stop's outcome, updated as the stop goes on)."""

    text: str
    kind: NoteKind = "info"
    key: str | None = None


class CannotAttach(Exception):
    """The first attach failed (no socket, nothing listening, refused): `str(exc)` is the one line a
    person reads."""


def _attach_words(exc: BaseException, path: str) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"no controller socket at {path} (no such file; is the controller running?)"
    if isinstance(exc, ConnectionRefusedError):
        return f"nothing is listening on {path} (the controller is gone, or the path is not its socket)"
    if isinstance(exc, PermissionError):
        return f"permission denied opening {path}"
    if isinstance(exc, OSError):
        return f"cannot connect to {path}: {exc.strerror or type(exc).__name__}"
    return f"the controller at {path} did not let this terminal attach: {_why(exc)}"


class Composer(Protocol):
    """The terminal's local text buffer (a prompt_toolkit Buffer in the app, a plain holder in tests)."""

    @property
    def text(self) -> str: ...

    def clear(self) -> None: ...

    def restore(self, text: str) -> None: ...


def _why(exc: BaseException) -> str:
    if isinstance(exc, (RemoteRefusal, ClientRefusal)):
        return f"{exc.code}: {exc.message}"
    if isinstance(exc, ConnectionLost):
        return f"the connection was lost ({exc.reason}); the outcome is unknown"
    return f"{type(exc).__name__}: {exc}"


class TerminalModel:
    """The terminal's state and actions (module rules). Make it on the event loop; `start` attaches."""

    def __init__(self, socket_path: str, composer: Composer, *, ping_interval: float | None = 60.0,
                 clock: Callable[[], float] = time.monotonic, grant: str | None = None) -> None:
        # With a grant, every connection starts with the seed's hello naming it (`mosaic-terminal --grant`).
        self.client = ControllerClient(socket_path, ping_interval=ping_interval, grant=grant)
        self.transcript = Transcript(self.client)
        self.composer = composer
        self.notes: deque[Note] = deque(maxlen=NOTES_KEPT)
        self.dialogs: deque[str] = deque(maxlen=DIALOGS_KEPT)  # the latest Pi dialogs, as lines
        self.confirmation: Mapping[str, Any] | None = None  # a confirmation awaiting y/n
        # Rule 6: the decisions the controller shows open, by Pi's id (their latest record), oldest first;
        # the projection id of the answer on its way, if one is.
        self.open_decisions: dict[str, Mapping[str, Any]] = {}
        self.answer_sent: str | None = None
        self.disconnected: str | None = "not connected yet"
        # The engine's name in words as the controller's observe reply gives it ("Pi", "Claude"; issue 32);
        # None until attached, or from a controller that does not say (one from before: Pi).
        self.engine: str | None = None
        self.last_stop: str | None = None
        self.streaming_since: float | None = None  # when this terminal saw the engine start streaming
        self._clock = clock
        self._proofs: dict[str, Mapping[str, Any]] = {}
        self._control: tuple[str | None, int | None, str | None] | None = None
        self._sub: Subscription = self.client.subscribe()
        self._pump: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[], None]] = []

    # -- what the UI reads ----------------------------------------------------------------------------

    @property
    def controls(self) -> bool:
        """True while this terminal's connection is the controller: the composer is enabled."""
        return self.client.connected and self.client.role == "controller"

    @property
    def requests(self) -> list[SentRequest]:
        """Every prompt this terminal sent, oldest first."""
        return list(self.client.requests.values())

    @property
    def execution(self) -> str | None:
        execution = (self.client.binding or {}).get("execution")
        return execution if isinstance(execution, str) else None

    @property
    def answering(self) -> bool:
        """True while Pi answers a prompt (the binding's engine state is streaming): Esc interrupts it, and
        Ctrl-C asks once before leaving it running."""
        return (self.client.binding or {}).get("engineState") == "streaming"

    @property
    def decision(self) -> Mapping[str, Any] | None:
        """The decision this terminal's keys answer now (rule 6): the oldest the controller shows open, while
        this terminal controls; None otherwise (the answer mode is off)."""
        if not self.controls or not self.open_decisions:
            return None
        return next(iter(self.open_decisions.values()))

    @property
    def decision_waiting(self) -> bool:
        """True while the controller shows a decision open (to whoever watches, this terminal or not)."""
        return bool(self.open_decisions)

    def running_for(self) -> float | None:
        """Seconds since this terminal saw the engine start streaming, None while it is not."""
        return None if self.streaming_since is None else self._clock() - self.streaming_since

    def confirmation_text(self) -> list[str]:
        return confirmation_lines(self.confirmation) if self.confirmation is not None else []

    def note(self, text: str, kind: NoteKind = "info", *, key: str | None = None) -> None:
        """Add a note, the newest last; one with `key` replaces the note with that key."""
        if key is not None:
            for old in [n for n in self.notes if n.key == key]:
                self.notes.remove(old)
        self.notes.append(Note(text, kind, key))
        self.changed()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener()` after every change the model or its transcript makes."""
        self._listeners.append(listener)
        self.transcript.add_listener(lambda _view: listener())

    def changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    # -- rule 3: control transfers clear the composer ------------------------------------------------

    def check_transfer(self) -> bool:
        """Clear the composer if control moved since the last check (rule 3). True when it did."""
        client = self.client
        if not client.connected or client.role is None:
            return False  # disconnected: the text stays
        key = (client.incarnation, client.generation, client.role)
        before, self._control = self._control, key
        if before is None or before == key:
            return False
        kept = self.composer.text
        self.composer.clear()
        if before[0] == key[0] and key[2] == "observer":
            who = (client.binding or {}).get("controllerConnection")
            self.note(f"connection {who or '(none)'} took control (generation {key[1]})"
                      + ("; you are watching now" if before[2] == "controller" else ""), "transfer")
        if kept:
            self.note(f'composer cleared at a control transfer; set aside, never sent: "{kept}"', "transfer")
        self.changed()
        return True

    # -- driving it -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the transcript and the record pump, then attach as an observer. Raises `CannotAttach`
        (its message is one line a person reads) when the socket cannot be reached or the attach is
        refused."""
        self.transcript.start()
        self._pump = asyncio.get_running_loop().create_task(self._run(), name="mosaic-terminal-model")
        try:
            again = await self.client.reconnect()
        except _FAILURES as exc:
            raise CannotAttach(_attach_words(exc, self.client.socket_path)) from exc
        self.disconnected = None
        self.engine = again.observed.engine
        granted = self.client.granted
        under = "" if granted is None else f", grant {granted.get('grant')}: {' '.join(granted.get('operations', ()))}"
        self.note(f"attached as {self.client.role} (incarnation {again.observed.incarnation[:INCARNATION_SHOWN]}"
                  f"{under})")
        self.check_transfer()
        self._engine(self.client.binding)
        self.changed()

    async def aclose(self) -> None:
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        await self.transcript.aclose()
        await self.client.aclose()

    async def _run(self) -> None:
        async for note in self._sub:
            self._on_note(note)
            self.check_transfer()
            self.changed()

    def _on_note(self, note: Notification) -> None:
        if note.origin == "client" and note.method == "disconnected":
            self.disconnected = str(note.params.get("reason", "lost"))
            self.confirmation = None
            self.open_decisions.clear()  # rule 6: a takeover after the reconnect shows them open again
            self.streaming_since = None
            self.note(f"the controller connection is gone ({self.disconnected}); the composer text is kept; "
                      "Ctrl-O reconnects", "refusal")
        elif note.origin == "client" and note.method == "observed":
            self.disconnected = None
        elif note.method == "record":
            record = note.params
            kind = record.get("type")
            if kind == "binding":
                self._engine(record)
            elif kind == "cohortProof" and isinstance(record.get("proof"), Mapping):
                self._proofs[str(record.get("stop"))] = record["proof"]
                self._update_stop(self.client.stops.get(str(record.get("stop"))))
            elif kind == "stop":
                self._update_stop(record)
            elif kind == "nativeDecision":
                self._dialog(record)

    def _engine(self, binding: Mapping[str, Any] | None) -> None:
        streaming = (binding or {}).get("engineState") == "streaming"
        if streaming and self.streaming_since is None:
            self.streaming_since = self._clock()
        elif not streaming:
            self.streaming_since = None

    def _dialog(self, record: Mapping[str, Any]) -> None:
        """Rule 6: shown; an open decision kept for the keys until a record says it is not open any more (a
        superseded record is followed by the same decision open under its new projection id)."""
        line = dialog_line(record, self.engine or "Pi")
        self.dialogs.append(line)
        self.note(line, "dialog")
        native, state = record.get("native"), record.get("state")
        if not isinstance(native, str) or state == "superseded":
            return
        if state == "open" and isinstance(record.get("nativeDecision"), str) and isinstance(record.get("choices"), list):
            self.open_decisions[native] = record
        else:
            self.open_decisions.pop(native, None)

    def _update_stop(self, stop: Mapping[str, Any] | None) -> None:
        if stop is None:
            return
        # The stop record's approvalDisposition is the controller's word (it saw every dialog of the
        # execution, this terminal only those since it connected).
        self.last_stop = stop_words(stop, self._proofs.get(str(stop.get("stop"))), self.engine or "Pi")
        self.note(self.last_stop, "refusal" if stop.get("state") == "uncertain" else "stop",
                  key=f"stop:{stop.get('stop')}")
        if stop.get("kind") == "force-stop" and stop.get("state") in ("stopped", "uncertain"):
            # One "next:" note, whichever of the stop's record, its proof or the reply is seen last (key "next").
            if stop.get("state") == "stopped":
                self.note("next: Ctrl-R recovers this conversation (asks to confirm first), or Ctrl-C quits",
                          "next", key="next")
            else:
                self.note("next: the stop is not proven, so recover is refused; Ctrl-K tries the force stop "
                          "again, Ctrl-C quits", "next", key="next")

    # -- actions --------------------------------------------------------------------------------------

    def take_composer(self) -> str | None:
        """Enter (rule 2): the composer's text, taken and cleared now, or None when nothing is to be sent
        (an observer: the note says why and the buffer is kept; or blank text)."""
        if not self.controls:
            self.note(NOT_CONTROLLER, "refusal")
            return None
        text = self.composer.text
        if not text.strip():
            return None
        self.composer.clear()
        self.changed()
        return text

    async def send(self, text: str) -> PromptOutcome | None:
        """Send `text` (taken by `take_composer`) as a prompt; show a refusal or an unknown outcome
        (rules 3, 4)."""
        control = self._control
        try:
            outcome = await self.client.prompt(text)
        except _FAILURES as exc:  # a protocol error: the library kept the request's state; show it
            self.note(f"prompt failed: {_why(exc)}", "refusal")
            return None
        if isinstance(outcome, Refused):
            self.note(f"not admitted: {_why(outcome.refusal)}", "refusal")
            if self._control == control and not self.composer.text:
                self.composer.restore(text)
        elif isinstance(outcome, AdmissionUnknown):
            self.note("outcome unknown, check the transcript: the connection was lost before the reply; the prompt "
                      "is never resent", "refusal")
        self.changed()
        return outcome

    async def submit(self) -> PromptOutcome | None:
        """`take_composer`, then `send` what it took."""
        text = self.take_composer()
        return None if text is None else await self.send(text)

    def answer_key(self, key: int) -> tuple[str, str] | None:
        """Key `key` (1-based) pressed while a decision is open (rule 6): the (projection id, choice) to send,
        taken now, so a second key of the same chunk finds the answer on its way; None when nothing is to be
        sent (an observer, an answer already on its way, no choice with that key: a note says which)."""
        if not self.controls:
            self.note(NOT_ANSWERED, "refusal")
            return None
        decision = self.decision
        if decision is None or self.answer_sent is not None:
            return None
        choices = [c for c in decision.get("choices", ()) if isinstance(c, str)][:CHOICE_KEYS]
        if not 1 <= key <= len(choices):
            self.note(f"no choice has the key {key} here: the keys are 1 to {len(choices)}; nothing was sent",
                      "refusal")
            return None
        projection = str(decision.get("nativeDecision"))
        self.answer_sent = projection
        self.changed()
        return projection, choices[key - 1]

    async def send_answer(self, projection: str, choice: str) -> None:
        """Answer decision `projection` with `choice` (taken by `answer_key`); a refusal in one note (a
        `decision` refusal also ends the answer mode for it: the controller takes no answer to it)."""
        try:
            record = await self.client.approve(projection, choice)
        except _FAILURES as exc:
            self.note(f'answer "{choice}" refused: {_why(exc)}', "refusal")
            if isinstance(exc, RemoteRefusal) and exc.code == "decision":
                for native, shown in list(self.open_decisions.items()):
                    if shown.get("nativeDecision") == projection:
                        del self.open_decisions[native]
            return
        finally:
            self.answer_sent = None
            self.changed()
        if record.get("state") != "open":
            self.open_decisions.pop(str(record.get("native")), None)  # its record follows the reply
        self.note(f'answered "{choice}" ({record.get("state")}): {self.engine or "Pi"} goes on with it', "dialog")

    async def takeover(self) -> None:
        if self.controls:
            self.note("this terminal already controls the conversation")
            return
        try:
            took = await self.client.takeover()
        except _FAILURES as exc:
            self.note(f"take control refused: {_why(exc)}", "refusal")
            return
        self.check_transfer()
        self.note(f"you control the conversation now (generation {took.get('generation')})", "transfer")

    async def interrupt(self) -> None:
        try:
            stop = await self.client.interrupt()
        except _FAILURES as exc:
            self.note(f"interrupt refused: {_why(exc)}", "refusal")
            return
        self._update_stop(stop)
        self.note(f"interrupt sent: the controller clears {self.engine or 'Pi'}'s queue, then aborts the turn")

    async def request_confirmation(self, operation: Literal["force-stop", "recover"]) -> None:
        """Ask the controller for a confirmation of `operation` and show its summary (rule 5)."""
        words = operation.replace("-", " ")
        try:
            self.confirmation = await self.client.issue_confirmation(operation)
        except _FAILURES as exc:
            self.note(f"{words} refused: {_why(exc)}", "refusal")
            return
        self.changed()

    async def request_force_stop(self) -> None:
        await self.request_confirmation("force-stop")

    async def request_recover(self) -> None:
        await self.request_confirmation("recover")

    async def answer(self, confirm: bool) -> None:
        """Answer the confirmation on screen: "n" cancels it; "y" confirms and uses it."""
        confirmation, self.confirmation = self.confirmation, None
        self.changed()
        if confirmation is None:
            return
        cid = str(confirmation.get("confirmation"))
        operation = str(confirmation.get("operation"))
        words = operation.replace("-", " ")
        try:
            if not confirm:
                await self.client.answer_confirmation(cid, "cancel")
                self.note(f"{words} cancelled: nothing was done")
                return
            await self.client.answer_confirmation(cid, "confirm")
            if operation == "recover":
                self._recovered(await self.client.recover(cid))
                return
            stop = await self.client.force_stop(cid)
        except _FAILURES as exc:
            self.note(f"{words} refused: {_why(exc)}", "refusal")
            return
        self._update_stop(stop)
        self.note("force stop confirmed: the controller is stopping the execution")

    def _recovered(self, result: Mapping[str, Any]) -> None:
        """The recover's reply: the eligibility record it issued, and the next step: the controller's own
        words (`next`: `mosaic-controller serve` gives the exact command that launches from the record), or
        that command's shape."""
        record = result.get("eligibility")
        record = record if isinstance(record, Mapping) else {}
        eligibility = record.get("id")
        self.note(f"recovered: eligibility {eligibility} (new claim {record.get('claim_id')}, generation "
                  f"{record.get('generation')}); nothing is launched yet", "stop")
        launch = result.get("next")
        if not isinstance(launch, str) or not launch:
            launch = (f"start a controller from it (mosaic-controller serve with this controller's options and "
                      f"--eligibility {eligibility})")
        self.note(f"next: {launch}; then Ctrl-O here connects to the new controller", "next", key="next")

    async def refresh(self) -> None:
        """Ctrl-O: reconnect if the connection is gone, else re-read the page (the transcript's read)."""
        if not self.client.connected:
            await self.reconnect()
            return
        self.transcript.read_now()
        self.note("re-reading the history page")

    async def reconnect(self) -> None:
        """Open a new connection and observe. Requests pending under an older incarnation turn outcome
        unknown (the library's H21/H22); nothing is resent."""
        try:
            again = await self.client.reconnect()
        except _FAILURES as exc:
            self.disconnected = self.disconnected or "reconnect failed"
            self.note(f"reconnect failed: {_why(exc)}; Ctrl-O tries again", "refusal")
            return
        self.disconnected = None
        self.engine = again.observed.engine
        token = again.observed.incarnation[:INCARNATION_SHOWN]
        if again.incarnation_changed:
            self.note(f"reconnected to a new controller (incarnation {token}); {len(again.outcome_unknown)} "
                      "request(s) under the old one: outcome unknown", "transfer")
        else:
            self.note(f"reconnected to the same controller (incarnation {token})")
        self.check_transfer()
        self._engine(self.client.binding)
        self.changed()
