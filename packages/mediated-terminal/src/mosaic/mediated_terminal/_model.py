"""The terminal's state over the client library, testable without a terminal.

`TerminalModel` holds one `ControllerClient` (for the whole session, across reconnects), one `Transcript`
(the view it renders) and a `Composer` (the terminal's local text buffer, owned by the UI). The rules it
keeps (brief §4 S4, S5; §9 E7; the seed README "Mediated control"):

1. The composer is enabled only while this terminal's connection is the controller (`controls`). An
   observer's Enter (or paste) sends nothing: the note says this terminal does not control the
   conversation, and zero bytes leave for the controller, so zero reach the engine (S5, E7).
2. The composer is empty at start, cleared on submit, and cleared on every control transfer (S4, mutant
   10): whenever the connected (incarnation, generation, role) changes. Text cleared by a transfer is shown
   in a note as set aside, and never sent. While disconnected nothing is cleared: the text stays (the
   controller went away; that is not a transfer). A refused prompt's text goes back into the composer
   (the library says the text stays with the caller) unless control moved meanwhile.
3. Every prompt keeps its receipt in words (`receipt_words`): sent, working, done, failed, outcome
   unknown, not admitted. Nothing is resent by the terminal; there is no resend key.
4. Force stop goes through a confirmation the controller issues: its summary (execution, scope, member
   count) is shown before anything is answered; "n" cancels it. The stop's end shows the proof or the
   reason it is uncertain.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping
from typing import Any, Protocol

from mosaic.controller.client import (
    ClientRefusal,
    ClientStateError,
    ConnectionLost,
    ControllerClient,
    ControllerRefusal,
    Notification,
    OutcomeUnknown,
    PromptOutcome,
    ProtocolError,
    Refused,
    SentRequest,
    Subscription,
    Transcript,
)

from ._render import INCARNATION_SHOWN, confirmation_lines, stop_words

__all__ = ["NOT_CONTROLLER", "Composer", "TerminalModel"]

NOT_CONTROLLER = ("not admitted: controller - you do not control this conversation; nothing was sent "
                  "(Ctrl-T takes control)")
NOTES_KEPT = 4
_FAILURES = (ControllerRefusal, ClientRefusal, ProtocolError, ConnectionLost, ClientStateError, OSError)


class Composer(Protocol):
    """The terminal's local text buffer (a prompt_toolkit Buffer in the app, a plain holder in tests)."""

    @property
    def text(self) -> str: ...

    def clear(self) -> None: ...

    def restore(self, text: str) -> None: ...


def _why(exc: BaseException) -> str:
    if isinstance(exc, (ControllerRefusal, ClientRefusal)):
        return f"{exc.code}: {exc.message}"
    if isinstance(exc, ConnectionLost):
        return f"the connection was lost ({exc.reason}); the outcome is unknown"
    return f"{type(exc).__name__}: {exc}"


class TerminalModel:
    """The terminal's state and actions (module rules). Make it on the event loop; `start` attaches."""

    def __init__(self, socket_path: str, composer: Composer, *, ping_interval: float | None = 60.0) -> None:
        self.client = ControllerClient(socket_path, ping_interval=ping_interval)
        self.transcript = Transcript(self.client)
        self.composer = composer
        self.notes: deque[str] = deque(maxlen=NOTES_KEPT)
        self.confirmation: Mapping[str, Any] | None = None  # a force-stop confirmation awaiting y/n
        self.disconnected: str | None = "not connected yet"
        self.last_stop: str | None = None
        self._proofs: dict[str, Mapping[str, Any]] = {}
        self._control: tuple[str | None, int | None, str | None] | None = None
        self._sub: Subscription = self.client.subscribe()
        self._pump: asyncio.Task[None] | None = None
        self._listeners: list[Any] = []

    # -- what the UI reads ----------------------------------------------------------------------------

    @property
    def controls(self) -> bool:
        """True while this terminal's connection is the controller: the composer is enabled."""
        return self.client.connected and self.client.role == "controller"

    @property
    def requests(self) -> list[SentRequest]:
        """Every prompt this terminal sent, oldest first."""
        return list(self.client.requests.values())

    def confirmation_text(self) -> list[str]:
        return confirmation_lines(self.confirmation) if self.confirmation is not None else []

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.changed()

    def on_change(self, listener: Any) -> None:
        """Call `listener()` after every change the model or its transcript makes."""
        self._listeners.append(listener)
        self.transcript.add_listener(lambda _view: listener())

    def changed(self) -> None:
        for listener in list(self._listeners):
            listener()

    # -- rule 2: control transfers clear the composer ------------------------------------------------

    def check_transfer(self) -> bool:
        """Clear the composer if control moved since the last check (rule 2). True when it did."""
        client = self.client
        if not client.connected or client.role is None:
            return False  # disconnected: the text stays
        key = (client.incarnation, client.generation, client.role)
        before, self._control = self._control, key
        if before is None or before == key:
            return False
        kept = self.composer.text
        self.composer.clear()
        if kept:
            self.note(f'composer cleared at a control transfer; set aside, never sent: "{kept}"')
        self.changed()
        return True

    # -- driving it -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the transcript and the record pump, then attach as an observer."""
        self.transcript.start()
        self._pump = asyncio.get_running_loop().create_task(self._run(), name="mosaic-terminal-model")
        await self.reconnect(first=True)

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
            self.note(f"the controller connection is gone ({self.disconnected}); the composer text is kept; "
                      "Ctrl-R reconnects")
        elif note.origin == "client" and note.method == "observed":
            self.disconnected = None
        elif note.method == "record":
            record = note.params
            if record.get("type") == "cohortProof" and isinstance(record.get("proof"), Mapping):
                self._proofs[str(record.get("stop"))] = record["proof"]
                self._update_stop(self.client.stops.get(str(record.get("stop"))))
            elif record.get("type") == "stop":
                self._update_stop(record)

    def _update_stop(self, stop: Mapping[str, Any] | None) -> None:
        if stop is not None:
            self.last_stop = stop_words(stop, self._proofs.get(str(stop.get("stop"))))

    # -- actions --------------------------------------------------------------------------------------

    async def submit(self) -> PromptOutcome | None:
        """Send the composer's text as a prompt, only as the controller (rules 1-3)."""
        if not self.controls:
            self.note(NOT_CONTROLLER)
            return None
        text = self.composer.text
        if not text.strip():
            return None
        self.composer.clear()
        control = self._control
        self.changed()
        try:
            outcome = await self.client.prompt(text)
        except _FAILURES as exc:  # a protocol error: the library kept the request's state; show it
            self.note(f"prompt failed: {_why(exc)}")
            self.changed()
            return None
        if isinstance(outcome, Refused):
            self.note(f"not admitted: {_why(outcome.refusal)}")
            if self._control == control and not self.composer.text:
                self.composer.restore(text)
        elif isinstance(outcome, OutcomeUnknown):
            self.note("outcome unknown: the connection was lost before the reply; the prompt is never resent")
        self.changed()
        return outcome

    async def takeover(self) -> None:
        if self.controls:
            self.note("this terminal already controls the conversation")
            return
        try:
            took = await self.client.takeover()
        except _FAILURES as exc:
            self.note(f"take control refused: {_why(exc)}")
            return
        self.check_transfer()
        self.note(f"this terminal controls the conversation now (generation {took.get('generation')})")

    async def interrupt(self) -> None:
        try:
            stop = await self.client.interrupt()
        except _FAILURES as exc:
            self.note(f"interrupt refused: {_why(exc)}")
            return
        self._update_stop(stop)
        self.note("interrupt sent: clear the queue, then abort (R3-1)")

    async def request_force_stop(self) -> None:
        """Ask the controller for a force-stop confirmation and show what it will kill (rule 4)."""
        try:
            self.confirmation = await self.client.issue_confirmation("force-stop")
        except _FAILURES as exc:
            self.note(f"force stop refused: {_why(exc)}")
            return
        self.changed()

    async def answer_force_stop(self, confirm: bool) -> None:
        confirmation, self.confirmation = self.confirmation, None
        self.changed()
        if confirmation is None:
            return
        cid = str(confirmation.get("confirmation"))
        try:
            if not confirm:
                await self.client.answer_confirmation(cid, "cancel")
                self.note("force stop cancelled: nothing was stopped")
                return
            await self.client.answer_confirmation(cid, "confirm")
            stop = await self.client.force_stop(cid)
        except _FAILURES as exc:
            self.note(f"force stop refused: {_why(exc)}")
            return
        self._update_stop(stop)
        self.note("force stop confirmed: the controller is stopping the execution")

    async def reconnect(self, *, first: bool = False) -> None:
        """Open a new connection and observe (Ctrl-R). Requests pending under an older incarnation turn
        outcome unknown (the library's H21/H22); nothing is resent."""
        try:
            again = await self.client.reconnect()
        except _FAILURES as exc:
            self.disconnected = self.disconnected or "reconnect failed"
            self.note(f"{'attach' if first else 'reconnect'} failed: {_why(exc)}; Ctrl-R tries again")
            return
        self.disconnected = None
        token = again.observed.incarnation[:INCARNATION_SHOWN]
        if first:
            self.note(f"attached as {self.client.role} (incarnation {token})")
        elif again.incarnation_changed:
            self.note(f"reconnected to a new controller (incarnation {token}); {len(again.outcome_unknown)} "
                      "request(s) under the old one: outcome unknown")
        else:
            self.note(f"reconnected to the same controller (incarnation {token})")
        self.check_transfer()
        self.changed()
