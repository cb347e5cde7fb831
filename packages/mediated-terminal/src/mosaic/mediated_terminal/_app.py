"""The full-screen prompt_toolkit application: a transcript window, a status line, notes, the prompts with
their receipts, the composer, and a force-stop confirmation dialog. Everything it shows comes from
`_render` (inert text) over `TerminalModel`; it decides nothing itself.

Keys (the package README lists them): Enter submits (as an observer: nothing is sent, a note says why),
Alt-Enter inserts a newline, Ctrl-T takes control, Ctrl-C interrupts, Ctrl-K asks to force stop (then y
confirms, n cancels), Ctrl-R reconnects, PageUp/PageDown scroll the transcript, Ctrl-Q quits.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    ConditionalContainer,
    Float,
    FloatContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.output import Output
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import Frame

from ._inert import inert
from ._model import NOT_CONTROLLER, TerminalModel
from ._render import binding_line, request_line, status_line, transcript_lines

__all__ = ["KEYS_LINE", "BufferComposer", "TerminalApp"]

KEYS_LINE = "Enter send  Alt-Enter newline  ^T take control  ^C interrupt  ^K force stop  ^R reconnect  PgUp/PgDn  ^Q quit"
REQUESTS_SHOWN = 3
NOTES_SHOWN = 3


def _wrap(line: str, width: int) -> list[str]:
    """`line` cut into rows of at most `width` cells."""
    rows, row, cells = [], "", 0
    for ch in line:
        w = get_cwidth(ch)
        if cells + w > width and row:
            rows.append(row)
            row, cells = "", 0
        row += ch
        cells += w
    return [*rows, row]


class BufferComposer:
    """The composer as the model sees it: a prompt_toolkit Buffer, read-only unless this terminal controls.
    The model's clears and restores bypass the read-only flag (they are not typing)."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer

    @property
    def text(self) -> str:
        return self.buffer.text

    def clear(self) -> None:
        self.buffer.set_document(Document(""), bypass_readonly=True)

    def restore(self, text: str) -> None:
        self.buffer.set_document(Document(text, len(text)), bypass_readonly=True)


class TerminalApp:
    """The terminal over one controller socket. `run` until Ctrl-Q."""

    def __init__(self, socket_path: str, *, input: Input | None = None, output: Output | None = None) -> None:
        controls = Condition(lambda: self.model.controls)
        self.buffer = Buffer(multiline=True, read_only=~controls)
        self.model = TerminalModel(socket_path, BufferComposer(self.buffer))
        self.scroll = 0  # transcript lines scrolled up from the bottom
        self._lines: list[str] = []
        self._version = -1
        self._transcript_window = Window(FormattedTextControl(self._transcript_text), wrap_lines=False,
                                         always_hide_cursor=True)
        confirming = Condition(lambda: self.model.confirmation is not None)
        dialog = Frame(Window(FormattedTextControl(lambda: "\n".join(self.model.confirmation_text())),
                              wrap_lines=True), title="force stop: confirm")
        body = HSplit([
            self._transcript_window,
            Window(FormattedTextControl(self._status_text), height=2, style="reverse"),
            Window(FormattedTextControl(self._notes_text), height=NOTES_SHOWN, wrap_lines=False),
            Window(FormattedTextControl(self._requests_text), height=REQUESTS_SHOWN, wrap_lines=False),
            Window(FormattedTextControl(self._composer_label), height=1, style="reverse"),
            Window(BufferControl(self.buffer), height=3, wrap_lines=True),
            Window(FormattedTextControl(self._keys_text), height=1),
        ])
        root = FloatContainer(body, floats=[Float(ConditionalContainer(dialog, confirming), width=100)])
        self.app: Application[None] = Application(layout=Layout(root, focused_element=self.buffer),
                                                  key_bindings=self._bindings(controls, confirming),
                                                  full_screen=True, mouse_support=False, input=input,
                                                  output=output)
        self.model.on_change(self.app.invalidate)

    # -- what is drawn --------------------------------------------------------------------------------

    def _transcript_text(self) -> StyleAndTextTuples:
        view = self.model.transcript
        if view.version != self._version:
            self._version = view.version
            self._lines = transcript_lines(view.items)
        info = self._transcript_window.render_info
        height = info.window_height if info is not None else 24
        self.scroll = max(0, min(self.scroll, len(self._lines) - height))
        start = max(0, len(self._lines) - height - self.scroll)
        return [("", "\n".join(self._lines[start:start + height]))]

    def _status_text(self) -> str:
        status = self.model.transcript.status
        second = binding_line(status)
        if self.scroll:
            second += (" | " if second else "") + f"scrolled up {self.scroll}"
        return status_line(status, disconnected=self.model.disconnected) + "\n" + second

    def _notes_text(self) -> str:
        """The latest notes and the last stop's outcome, each wrapped to the width, the newest rows last."""
        notes = [inert(n) for n in self.model.notes]
        if self.model.last_stop is not None:
            notes.append(self.model.last_stop)
        rows: list[str] = []
        for note in notes:
            rows += _wrap(note, self._width())
        return "\n".join(rows[-NOTES_SHOWN:])

    def _width(self) -> int:
        info = self._transcript_window.render_info
        return info.window_width if info is not None else 80

    def _requests_text(self) -> str:
        return "\n".join(request_line(r) for r in self.model.requests[-REQUESTS_SHOWN:])

    def _composer_label(self) -> str:
        if self.model.controls:
            return "composer: you control this conversation; Enter sends"
        if not self.model.client.connected:
            return "composer disabled: not connected (the text is kept; Ctrl-R reconnects)"
        return "composer disabled: observer (Ctrl-T takes control)"

    def _keys_text(self) -> str:
        return KEYS_LINE

    # -- keys -----------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.app.create_background_task(coro)

    def _bindings(self, controls: Condition, confirming: Condition) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("c-q", eager=True)
        def _quit(event: KeyPressEvent) -> None:
            event.app.exit()

        @kb.add("c-t", eager=True)
        def _take(event: KeyPressEvent) -> None:
            self._spawn(self.model.takeover())

        @kb.add("c-c", eager=True)
        def _interrupt(event: KeyPressEvent) -> None:
            self._spawn(self.model.interrupt())

        @kb.add("c-k", eager=True, filter=~confirming)
        def _force(event: KeyPressEvent) -> None:
            self._spawn(self.model.request_force_stop())

        @kb.add("y", eager=True, filter=confirming)
        @kb.add("Y", eager=True, filter=confirming)
        def _yes(event: KeyPressEvent) -> None:
            self._spawn(self.model.answer_force_stop(True))

        @kb.add("n", eager=True, filter=confirming)
        @kb.add("N", eager=True, filter=confirming)
        @kb.add("escape", eager=True, filter=confirming)
        def _no(event: KeyPressEvent) -> None:
            self._spawn(self.model.answer_force_stop(False))

        @kb.add("c-r", eager=True)
        def _reconnect(event: KeyPressEvent) -> None:
            self._spawn(self.model.reconnect())

        @kb.add("enter", eager=True, filter=~confirming)
        def _submit(event: KeyPressEvent) -> None:
            self._spawn(self._submit())

        @kb.add("escape", "enter", filter=controls & ~confirming)
        def _newline(event: KeyPressEvent) -> None:
            self.buffer.insert_text("\n")

        @kb.add(Keys.BracketedPaste, eager=True, filter=~controls)
        def _paste_refused(event: KeyPressEvent) -> None:
            self.model.note("paste ignored: " + NOT_CONTROLLER)

        @kb.add("pageup")
        def _up(event: KeyPressEvent) -> None:
            self.scroll += self._page()

        @kb.add("pagedown")
        def _down(event: KeyPressEvent) -> None:
            self.scroll = max(0, self.scroll - self._page())

        return kb

    def _page(self) -> int:
        info = self._transcript_window.render_info
        return max(1, (info.window_height if info is not None else 24) - 2)

    async def _submit(self) -> None:
        await self.model.submit()

    # -- running --------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Attach as an observer and run until Ctrl-Q; then close the connection."""
        try:
            await self.app.run_async(pre_run=lambda: self._spawn(self.model.start()))
        finally:
            await self.model.aclose()


async def run_terminal(socket_path: str) -> None:
    await TerminalApp(socket_path).run()


