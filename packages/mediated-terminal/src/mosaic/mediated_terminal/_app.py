"""The full-screen prompt_toolkit application: a header, the transcript (wrapped at the window's width,
its reading position kept by `ReadingView`), Pi's dialogs, a status line in plain words (the developer
fields behind F2), notes, the prompts with their receipts, the composer and the keys. Everything it shows
comes from `_render` (inert text) over `TerminalModel`; it decides nothing itself.

The keys are the seed's (README "The terminal"): Enter submits (as an observer nothing is sent and a note
says why), Ctrl-J or Alt-Enter adds a newline, Ctrl-T takes control, Ctrl-G interrupts, Ctrl-O reconnects
if needed and re-reads the page, PageUp/PageDown scroll, Ctrl-C or Ctrl-D quits. The extra keys take none
of those: Ctrl-K asks to force stop and Ctrl-R to recover (each then y confirms, n cancels), F2 shows the
developer fields, and, as in Claude Code, Esc interrupts a running answer. While Pi answers, Ctrl-C or
Ctrl-D asks once before quitting (the answer keeps running in the engine; a second press leaves). While
the controller shows a Pi dialog open and this terminal controls (the answer mode, `_model` rule 6), a frame
shows its choices and 1-9 answer it; the composer is held (Enter and the newline keys do nothing, typing
does not reach it) until the mode ends.

The composer grows with its text (a multi-line paste) up to `COMPOSER_ROWS`; past that its label counts
the lines and shows the first. The notes grow to show the newest note whole (a recover's next step names
a command) up to `NOTES_ROWS`.

Input, as the seed says it is read: Enter takes the composer at that key (the handler reads and clears it
before the next key of the same input chunk is handled: `TerminalModel.take_composer`); a bracketed paste
is inserted literally, newlines included, and never submits by itself; a paste marker split across input
chunks, even right after its ESC, is still a paste marker, and a lone trailing ESC waits for the next
chunk. prompt_toolkit's VT100 parser already keeps a partial escape sequence across reads and a paste
across reads until its end marker; what it would do otherwise is flush a pending ESC as the Escape key
after ``ttimeoutlen`` (0.5 s) with no further input, so a split marker arriving later would be typed as
text. The application therefore never flushes on a timer (`ESC_WAIT`): the ESC waits for the next chunk,
which decides what it was. One exception (`LoneEscape`): a read that holds exactly one ESC byte is the Esc
key. A keyboard's Esc arrives so, alone; a terminal writes a paste marker with its paste, a function key's
sequence whole, and Alt+key as ESC and the key in one write, so an ESC alone in its read starts none of
them. An ESC at the end of a longer read still waits for the next chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Coroutine
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.data_structures import Point
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.key_binding import KeyBindings, KeyPress, KeyPressEvent
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import (
    ConditionalContainer,
    Dimension,
    Float,
    FloatContainer,
    FormattedTextControl,
    HSplit,
    Layout,
    UIContent,
    UIControl,
    Window,
)
from prompt_toolkit.layout.controls import BufferControl
from prompt_toolkit.output import Output
from prompt_toolkit.styles import Style
from prompt_toolkit.utils import get_cwidth
from prompt_toolkit.widgets import Frame

from mosaic.controller_client import HistoryItem, LiveMessage, ToolRun, TranscriptItem

from ._inert import inert
from ._model import CHOICE_KEYS, Note, TerminalModel
from ._render import (
    Fragments,
    decision_lines,
    details_line,
    header_line,
    item_fragments,
    item_key,
    request_line,
    status_line,
    styled,
    wrap,
)
from ._view import ReadingView, Row

__all__ = ["KEYS", "STYLE", "TerminalApp", "run_terminal"]

logger = logging.getLogger("mosaic.mediated_terminal")

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter", "send"), ("^J", "newline"), ("^T", "control"), ("^G", "interrupt"), ("^O", "re-read"),
    ("PgUp/PgDn", ""), ("^C", "quit"), ("^K", "force stop"), ("^R", "recover"), ("F2", "details"),
    ("Esc", "interrupt"),
)
"""The keys line, in the order kept when the window is too narrow for all (the seed's keys first)."""

ESC_WAIT = 365 * 24 * 3600.0
"""prompt_toolkit's ``ttimeoutlen``: how long a pending ESC waits for the next input chunk (module
docstring). Not a timeout in practice; a lone ESC is decided by the chunk after it."""

REQUESTS_SHOWN = 3
NOTES_SHOWN = 3
NOTES_ROWS = 6
"""The most rows the notes take: the newest note is shown whole up to this (NOTES_SHOWN at least)."""
COMPOSER_SHOWN = 3
COMPOSER_ROWS = 10
"""The most rows the composer grows to (COMPOSER_SHOWN at least); past it the label counts the lines."""
FIRST_SHOWN = 40  # characters of the first line the composer's label shows when the text is taller than it
DIALOGS_SHOWN = 2
DETAILS_ROWS = 2
CONFIRM_WIDTH = 100
SPIN_EVERY = 0.125  # seconds between spinner frames while a run streams

STYLE = Style.from_dict({
    "header": "reverse bold",
    "status": "reverse",
    "details": "italic",
    "label.user": "bold ansicyan",
    "label.assistant": "bold ansigreen",
    "label.tool": "bold ansiyellow",
    "label.notice": "bold ansimagenta",
    "label.other": "bold",
    "thinking": "dim italic",
    "tool": "ansiyellow",
    "marker": "bold ansimagenta",
    "meta": "italic",
    "error": "bold ansired",
    "escape": "reverse",
    "empty": "italic",
    "dialog": "bold ansimagenta",
    "dialog.key": "reverse bold",
    "note.info": "",
    "note.refusal": "bold ansired",
    "note.transfer": "bold ansiblue",
    "note.stop": "bold",
    "note.dialog": "bold ansimagenta",
    "note.next": "bold ansigreen",
    "composer.label": "reverse",
    "keys": "",
})
"""Roles in colour (the label), thinking dim, tool runs yellow, refusals red and bold (so they stay
distinct under NO_COLOR, which prompt_toolkit honours by drawing in one colour)."""


class LoneEscape:
    """The Esc key told apart from the start of an escape sequence by how it arrives (module docstring):
    `pressed` is true while the keys of a read that held exactly one ESC byte are handled, and that ESC is
    flushed as the Escape key at once. Wraps a VT100 input's reader; another input is left as it is."""

    def __init__(self, source: Input) -> None:
        self.pressed = False
        reader = getattr(source, "stdin_reader", None)
        if reader is None:
            return
        last = [""]
        read = reader.read
        read_keys = source.read_keys

        def read_chunk(count: int = 1024) -> str:
            data: str = read(count)
            last[0] = data
            return data

        def read_keys_lone() -> list[KeyPress]:
            last[0] = ""
            keys = read_keys()
            self.pressed = last[0] == "\x1b"
            return [*keys, *source.flush_keys()] if self.pressed else keys

        setattr(reader, "read", read_chunk)  # noqa: B010 - the instance's method, wrapped
        setattr(source, "read_keys", read_keys_lone)  # noqa: B010


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


def _item_token(item: TranscriptItem) -> object:
    """What changes when an item's rows change (live items are re-made at every event)."""
    if isinstance(item, LiveMessage):
        return ("m", item.last_sequence, item.ended)
    if isinstance(item, ToolRun):
        return ("t", item.last_sequence, item.running)
    return item


class TranscriptControl(UIControl):
    """The transcript's rows at the window's width, from the reading position (`ReadingView`)."""

    def __init__(self, terminal: TerminalApp) -> None:
        self.terminal = terminal
        self.view = ReadingView()
        self.width, self.height = 80, 24
        self._cache: dict[str, tuple[object, int, list[Row]]] = {}
        self._rows: list[Row] = []
        self._rows_for: tuple[int, int, bool] | None = None

    def rows(self, width: int) -> list[Row]:
        """Every row of the transcript at `width`: each item's lines wrapped; an empty-state line when
        there are no messages yet."""
        model = self.terminal.model
        key = (model.transcript.version, width, model.controls)
        if self._rows_for == key:
            return self._rows
        cache: dict[str, tuple[object, int, list[Row]]] = {}
        rows: list[Row] = []
        messages = False
        for item in model.transcript.items:
            name = item_key(item)
            token = _item_token(item)
            kept = self._cache.get(name)
            if kept is not None and kept[1] == width and (kept[0] is token or kept[0] == token):
                item_rows = kept[2]
            else:
                item_rows = [Row(name, i, r) for i, r in
                             enumerate(r for line in item_fragments(item) for r in wrap(line, width))]
            cache[name] = (token, width, item_rows)
            rows += item_rows
            messages = messages or isinstance(item, (HistoryItem, LiveMessage, ToolRun))
        if not messages:
            words = ("No messages yet: type a message and press Enter." if model.controls else
                     "No messages yet: Ctrl-T takes control, then type a message and press Enter.")
            rows += [Row("empty", i, r) for i, r in enumerate(wrap(styled(words, "class:empty"), width))]
        self._cache, self._rows, self._rows_for = cache, rows, key
        return rows

    def create_content(self, width: int, height: int | None) -> UIContent:
        self.width, self.height = width, max(1, height or 1)
        rows = self.rows(width)
        start, _ = self.view.window(rows, self.height)
        visible = [row.fragments for row in rows[start:start + self.height]]

        def line(i: int) -> StyleAndTextTuples:
            return [*visible[i]]

        return UIContent(get_line=line, line_count=len(visible), show_cursor=False, cursor_position=Point(0, 0))

    def is_focusable(self) -> bool:
        return False

    def below(self) -> int | None:
        """The new rows below the window now (None while following). Computed afresh, not from the last
        drawing: the status is measured before the transcript is drawn."""
        return self.view.window(self.rows(self.width), self.height)[1]

    def page_up(self) -> None:
        self.view.page_up(self.rows(self.width), self.height)

    def page_down(self) -> None:
        self.view.page_down(self.rows(self.width), self.height)


def _join(rows: list[Fragments]) -> StyleAndTextTuples:
    out: StyleAndTextTuples = []
    for i, row in enumerate(rows):
        out += ([("", "\n")] if i else []) + row
    return out


class TerminalApp:
    """The terminal over one controller socket. `run` attaches, then runs until Ctrl-C or Ctrl-D."""

    def __init__(self, socket_path: str, *, input: Input | None = None, output: Output | None = None,
                 grant: str | None = None) -> None:
        self.socket_path = socket_path
        controls = Condition(lambda: self.model.controls)
        deciding = Condition(lambda: self.model.decision is not None)  # the answer mode (`_model` rule 6)
        self.buffer = Buffer(multiline=True, read_only=~controls | deciding)
        self.model = TerminalModel(socket_path, BufferComposer(self.buffer), grant=grant)
        self.details = False
        self.exit_code = 0
        self._quit_asked: float | None = None  # the answer (its start) for which Ctrl-C asked once
        self.transcript = TranscriptControl(self)
        input = input if input is not None else create_input()
        self.escape = LoneEscape(input)
        confirming = Condition(lambda: self.model.confirmation is not None)
        dialogs = Condition(lambda: bool(self.model.dialogs))
        detailed = Condition(lambda: self.details)
        confirm = Frame(Window(FormattedTextControl(self._confirm_text)), title=self._confirm_title)
        decide = Frame(Window(FormattedTextControl(self._decision_text)),
                       title=lambda: f"{self.model.engine or 'Pi'} asks: answer with a key")
        body = HSplit([
            Window(FormattedTextControl(self._header_text), height=1, style="class:header"),
            Window(self.transcript, wrap_lines=False, always_hide_cursor=True),
            ConditionalContainer(Window(FormattedTextControl(self._dialogs_text), wrap_lines=False,
                                        height=Dimension(max=3 * DIALOGS_SHOWN), dont_extend_height=True),
                                 dialogs),
            Window(FormattedTextControl(self._status_text), height=Dimension(min=1, max=2), dont_extend_height=True,
                   style="class:status"),
            ConditionalContainer(Window(FormattedTextControl(self._details_text), height=DETAILS_ROWS,
                                        style="class:details"), detailed),
            Window(FormattedTextControl(self._notes_text), height=lambda: Dimension.exact(self._notes_height())),
            Window(FormattedTextControl(self._requests_text), height=REQUESTS_SHOWN),
            Window(FormattedTextControl(self._composer_label), height=1, style="class:composer.label"),
            Window(BufferControl(self.buffer), height=lambda: Dimension.exact(self._composer_height()),
                   wrap_lines=True),
            Window(FormattedTextControl(self._keys_text), height=1, style="class:keys"),
        ])
        root = FloatContainer(body, floats=[Float(ConditionalContainer(confirm, confirming),
                                                  width=self._confirm_width),
                                            Float(ConditionalContainer(decide, deciding & ~confirming),
                                                  width=self._confirm_width)])
        self.app: Application[int] = Application(layout=Layout(root, focused_element=self.buffer),
                                                 key_bindings=self._bindings(controls, confirming, deciding),
                                                 style=STYLE, full_screen=True, mouse_support=False,
                                                 input=input, output=output)
        self.app.ttimeoutlen = ESC_WAIT
        self.model.on_change(self.app.invalidate)

    # -- what is drawn --------------------------------------------------------------------------------

    def _width(self) -> int:
        """The screen's width now (every region spans it), read from the output at render time."""
        try:
            return max(20, self.app.output.get_size().columns)
        except OSError:
            return self.transcript.width

    def _header_text(self) -> StyleAndTextTuples:
        return [("", " " + header_line(self.model.client.binding, self._width() - 1, self.model.engine))]

    def _confirm_width(self) -> int:
        return min(CONFIRM_WIDTH, self._width() - 2)

    def _confirm_text(self) -> StyleAndTextTuples:
        """The confirmation's summary, each line wrapped inside the frame (its borders take two columns)."""
        rows = [row for line in self.model.confirmation_text() for row in wrap(styled(line), self._confirm_width() - 2)]
        return _join(rows)

    def _decision_text(self) -> StyleAndTextTuples:
        """The decision the keys answer (`_model` rule 6), each line wrapped inside the frame."""
        decision = self.model.decision
        if decision is None:
            return []
        lines = decision_lines(decision, CHOICE_KEYS, sending=self.model.answer_sent is not None,
                               engine=self.model.engine or "Pi")
        return _join([row for line in lines for row in wrap(line, self._confirm_width() - 2)])

    def _confirm_title(self) -> str:
        operation = (self.model.confirmation or {}).get("operation")
        return "recover: confirm" if operation == "recover" else "force stop: confirm"

    def _dialogs_text(self) -> StyleAndTextTuples:
        """The latest Pi dialogs, each wrapped to the width (as long as they are: a dialog is never cut)."""
        rows = [row for line in list(self.model.dialogs)[-DIALOGS_SHOWN:]
                for row in wrap(styled(line, "class:dialog"), self._width())]
        return _join(rows)

    def _status_text(self) -> StyleAndTextTuples:
        """The status in plain words, wrapped to a second row when the width is too small for it."""
        model = self.model
        frame = int(time.monotonic() / SPIN_EVERY)
        line = status_line(model.transcript.status, disconnected=model.disconnected, running_for=model.running_for(),
                           engine_name=model.engine or "Pi",
                           frame=frame, below=self.transcript.below())
        return _join(wrap(styled(" " + line), self._width()))

    def _details_text(self) -> StyleAndTextTuples:
        conversation = (self.model.client.binding or {}).get("conversation")
        line = details_line(self.model.transcript.status, reads=self.model.transcript.reads,
                            conversation=conversation if isinstance(conversation, str) else None)
        return _join(wrap(styled(" " + line), self._width())[:DETAILS_ROWS])

    def _notes_height(self) -> int:
        """The notes' rows: NOTES_SHOWN, or as many as the two newest notes need to be read whole (a
        recover's outcome, then its next step, which names a command line), up to NOTES_ROWS."""
        width = self._width()
        needed = sum(len(wrap(styled(note.text), width)) for note in list(self.model.notes)[-2:])
        return max(NOTES_SHOWN, min(NOTES_ROWS, needed))

    def _notes_text(self) -> StyleAndTextTuples:
        """The newest notes, each wrapped to the width, the newest last (a stop's outcome is the note of its
        latest change). The oldest one shown may be only its first rows, then " …" says that more of it
        did not fit."""
        notes: list[Note] = list(self.model.notes)
        rows: list[Fragments] = []
        width = self._width()
        shown = self._notes_height()
        for note in reversed(notes):
            free = shown - len(rows)
            if free <= 0:
                break
            line = styled(note.text, f"class:note.{note.kind}")
            wrapped = wrap(line, width)
            if len(wrapped) > free:
                wrapped = wrap(line, width - 2)[:free]
                wrapped[-1] = [*wrapped[-1], ("class:meta", " …")]
            rows = wrapped + rows
        return _join(rows)

    def _requests_text(self) -> StyleAndTextTuples:
        """The last prompts with their receipts; one refused, failed or of unknown outcome in the refusal
        style."""
        rows: list[Fragments] = []
        for request in self.model.requests[-REQUESTS_SHOWN:]:
            bad = request.state in ("refused", "outcome-unknown") or request.receipt_state in ("failed",
                                                                                            "delivery-unknown")
            rows.append([("class:note.refusal" if bad else "", request_line(request))])
        return _join(rows)

    def _composer_rows(self) -> int:
        """The rows the composer's text takes at the screen's width (wrapped lines counted)."""
        width = max(1, self._width())
        return sum(max(1, -(-get_cwidth(line) // width)) for line in self.buffer.text.split("\n"))

    def _composer_height(self) -> int:
        """The composer grows with its text (a multi-line paste), COMPOSER_SHOWN to COMPOSER_ROWS rows."""
        return max(COMPOSER_SHOWN, min(COMPOSER_ROWS, self._composer_rows()))

    def _composer_label(self) -> str:
        if self.model.decision is not None:
            return " composer waits: a question is asked above (its keys answer it); the text is kept"
        if self.model.controls:
            text = self.buffer.text
            lines = text.count("\n") + 1
            if lines > 1 and self._composer_rows() > COMPOSER_ROWS:
                first = inert(text.split("\n", 1)[0])
                first = first if len(first) <= FIRST_SHOWN else first[:FIRST_SHOWN - 3] + "..."
                return (f' composer: {lines} lines, the last shown; the first: "{first}"; Enter sends them all, '
                        "Ctrl-J adds a line")
            if lines > 1:
                return f" composer: {lines} lines; Enter sends them, Ctrl-J adds a line"
            return " composer: you control this conversation; Enter sends, Ctrl-J adds a line"
        if not self.model.client.connected:
            return " composer disabled: not connected (the text is kept; Ctrl-O reconnects)"
        return " composer disabled: observer (Ctrl-T takes control)"

    def _keys_text(self) -> str:
        width, out = self._width(), ""
        for key, words in KEYS:
            part = f"{key} {words}".strip()
            if get_cwidth(out + "  " + part) > width:
                break
            out = f"{out}  {part}" if out else part
        return out

    # -- keys -----------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self.app.create_background_task(coro)

    async def _send(self, text: str) -> None:
        await self.model.send(text)

    def _bindings(self, controls: Condition, confirming: Condition, deciding: Condition) -> KeyBindings:
        kb = KeyBindings()

        @kb.add("c-c", eager=True)
        @kb.add("c-d", eager=True)
        def _quit(event: KeyPressEvent) -> None:
            """Quit; while Pi answers, ask once first (the seed's Ctrl-C quits, and the answer goes on running
            in the engine, which a person used to Ctrl-C interrupting may not expect)."""
            started = self.model.streaming_since
            if self.model.answering and self._quit_asked != (started or 0.0):
                self._quit_asked = started or 0.0
                key = "Ctrl-D" if event.key_sequence[0].key == Keys.ControlD else "Ctrl-C"
                self.model.note(f"the answer keeps running in the engine; {key} again to leave (Esc or Ctrl-G "
                                "interrupts it)", "next", key="quit")
                return
            event.app.exit(result=0)

        @kb.add("<sigint>", eager=True)
        def _sigint(event: KeyPressEvent) -> None:
            event.app.exit(result=0)  # a signal, not a key: no question

        @kb.add("enter", eager=True, filter=~confirming & ~deciding)
        def _submit(event: KeyPressEvent) -> None:
            text = self.model.take_composer()  # now: text after this key in the chunk is the next message
            if text is not None:
                self._spawn(self._send(text))

        @kb.add("c-j", eager=True, filter=controls & ~confirming & ~deciding)
        @kb.add("escape", "enter", filter=controls & ~confirming & ~deciding)
        def _newline(event: KeyPressEvent) -> None:
            self.buffer.insert_text("\n")

        @kb.add("c-j", eager=True, filter=~controls | deciding)
        def _no_newline(event: KeyPressEvent) -> None:
            pass  # read-only composer; never the default (which would press Enter)

        @kb.add("c-t", eager=True)
        def _take(event: KeyPressEvent) -> None:
            self._spawn(self.model.takeover())

        @kb.add("c-g", eager=True)
        def _interrupt(event: KeyPressEvent) -> None:
            self._spawn(self.model.interrupt())

        @kb.add("escape", eager=True, filter=Condition(lambda: self.escape.pressed))
        def _escape(event: KeyPressEvent) -> None:
            """The Esc key (an ESC read alone): it interrupts a running answer, as in Claude Code (Ctrl-G
            stays); otherwise it does nothing, and never joins the next key as Alt+key."""
            if self.model.answering and self.model.confirmation is None:
                self._spawn(self.model.interrupt())

        @kb.add("c-o", eager=True)
        def _refresh(event: KeyPressEvent) -> None:
            self._spawn(self.model.refresh())

        @kb.add("pageup")
        def _up(event: KeyPressEvent) -> None:
            self.transcript.page_up()

        @kb.add("pagedown")
        def _down(event: KeyPressEvent) -> None:
            self.transcript.page_down()

        @kb.add("c-k", eager=True, filter=~confirming)
        def _force(event: KeyPressEvent) -> None:
            self._spawn(self.model.request_force_stop())

        @kb.add("c-r", eager=True, filter=~confirming)
        def _recover(event: KeyPressEvent) -> None:
            self._spawn(self.model.request_recover())

        @kb.add("y", eager=True, filter=confirming)
        @kb.add("Y", eager=True, filter=confirming)
        def _yes(event: KeyPressEvent) -> None:
            self._spawn(self.model.answer(True))

        @kb.add("n", eager=True, filter=confirming)
        @kb.add("N", eager=True, filter=confirming)
        def _no(event: KeyPressEvent) -> None:
            self._spawn(self.model.answer(False))

        waiting = Condition(lambda: self.model.decision_waiting) & ~confirming
        for digit in range(1, CHOICE_KEYS + 1):
            @kb.add(str(digit), eager=True, filter=waiting)
            def _choose(event: KeyPressEvent, digit: int = digit) -> None:
                """Key N answers the open decision with its N-th choice, taken at this key (`_model` rule
                6); as an observer it sends nothing and says why."""
                taken = self.model.answer_key(digit)
                if taken is not None:
                    self._spawn(self.model.send_answer(*taken))

        @kb.add("f2", eager=True)
        def _details(event: KeyPressEvent) -> None:
            self.details = not self.details

        @kb.add(Keys.BracketedPaste, eager=True, filter=~controls)
        def _paste_refused(event: KeyPressEvent) -> None:
            self.model.note("paste ignored: not admitted: controller - you do not control this conversation; "
                            "nothing was sent (Ctrl-T takes control)", "refusal")

        return kb

    # -- running --------------------------------------------------------------------------------------

    async def _spin(self) -> None:
        """Redraw while a run streams, so the spinner turns and the seconds count."""
        while True:
            await asyncio.sleep(SPIN_EVERY)  # a redraw period, not a synchronisation
            if self.model.streaming_since is not None:
                self.app.invalidate()

    def _signalled(self, signum: int) -> None:
        """SIGTERM, or SIGHUP (the terminal closed): leave the screen as Ctrl-C does; exit 128 + signum."""
        logger.info("ended by signal %d", signum)
        self.exit_code = 128 + signum
        if self.app.is_running and not self.app.is_done:
            self.app.exit(result=self.exit_code)

    async def run(self) -> int:
        """Attach as an observer (raising what attaching raises, before the screen is taken), then run the
        screen until Ctrl-C or Ctrl-D (0) or SIGTERM/SIGHUP (128 + the signal); close the connection."""
        try:
            await self.model.start()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGTERM, signal.SIGHUP):
                loop.add_signal_handler(signum, self._signalled, signum)
            try:
                result = await self.app.run_async(pre_run=lambda: self._spawn(self._spin()))
            except EOFError:
                logger.info("the terminal's input ended")  # a closed terminal: nobody can type any more
                result = self.exit_code
            except OSError:
                if self.exit_code == 0:
                    raise
                result = self.exit_code  # the terminal went away under the screen (SIGHUP)
            finally:
                for signum in (signal.SIGTERM, signal.SIGHUP):
                    loop.remove_signal_handler(signum)
            return self.exit_code or result or 0
        finally:
            with contextlib.suppress(Exception):
                await self.model.aclose()


async def run_terminal(socket_path: str, grant: str | None = None) -> int:
    """Run the terminal on `socket_path` (saying hello naming `grant` on each connection, when given); the
    exit code (see `TerminalApp.run`)."""
    return await TerminalApp(socket_path, grant=grant).run()
