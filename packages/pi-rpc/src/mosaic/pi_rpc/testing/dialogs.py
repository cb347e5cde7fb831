"""Pi's dialogs on a test seat: the fixture extension, how a model turn cues it, and the conformance scripts
that recorded what Pi 0.85.1 does with its dialogs (issue 33; docs/pi-0.85.1.md "Extension UI").

**The fixture extension** is package data, ``testing/fixture_extension/dialogs.js`` (its path is
:data:`mosaic.pi_rpc.seal.FIXTURE_EXTENSION_PATH`, its sha256 :data:`mosaic.pi_rpc.seal.FIXTURE_EXTENSION_SHA256`;
only the seal's fixture option lets Pi load it). It registers one tool, :data:`DIALOG_TOOL`.

**How a dialog is cued during a model turn.** A prompt whose text holds ``DIALOG <kind> [timeout=<ms>]
[abortable]`` (:func:`dialog_prompt`) makes the scripted model answer with a call of :data:`DIALOG_TOOL` with
``{"kind", "timeout"?, "abortable"?}`` (:func:`~mosaic.pi_rpc.testing.model_server.dialog_arguments`). Pi emits
``tool_execution_start``; the tool raises one dialog of that kind with the fixed labels of
:data:`FIXTURE_DIALOGS`: Pi writes its ``extension_ui_request`` (the request's other keys, in Pi's order:
``title``, then ``message`` / ``options`` / ``placeholder`` / ``prefill``, then ``timeout`` when given and
the kind takes one) and waits. When the dialog settles (an answer, a cancel, its timeout, or, with
``abortable``, the run's abort) the tool returns ``<kind> answered <value>`` (the value as
``JSON.stringify`` writes it, or ``undefined``) with ``details: {}``; Pi emits ``tool_execution_end`` and the
tool result message, and the model's next reply is ``Tool result was: <that text>.``. So the handler's value
is visible in the tool result, and nothing but the request itself is written for the dialog. The editor
takes neither a timeout nor the abort signal (rpc-mode.js 174-192).

:data:`DIALOG_CONFORMANCE` is the part of the conformance suite that runs on a seat with the fixture: every
kind answered and cancelled, the answers Pi reads as it reads them (``confirmed: "yes"`` passes through, a
``value`` on a confirm is ``false``, a select value outside the options passes through), unknown, missing
and duplicate ids, timeouts followed by a late answer, an interrupt (``clear_queue`` then ``abort``) while a
dialog is pending (plain, abortable, the editor), stdin EOF while pending, and a prompt while pending; and
the cue on a seat without the fixture (the tool is not found, no dialog).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from mosaic.pi_rpc.testing.model_server import DIALOG_TOOL
from mosaic.pi_rpc.testing.script import (
    Script,
    answer,
    ask,
    close,
    cmd,
    exited,
    pause,
    reply,
    send,
    settled,
    snapshot,
    wait,
)

__all__ = [
    "DIALOG_CONFORMANCE",
    "DIALOG_METHODS",
    "DIALOG_TOOL",
    "FIXTURE_DIALOGS",
    "dialog_prompt",
]

DIALOG_METHODS = frozenset({"select", "confirm", "input", "editor"})
"""The extension UI methods that wait for an ``extension_ui_response`` (rpc.md "Extension UI Protocol")."""

# The fixture's labels, as dialogs.js writes them: markup, bidi controls (U+202E/U+202C, U+2066/U+2069), an
# escape sequence and U+2028 arrive verbatim (P2).
FIXTURE_DIALOGS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "confirm": MappingProxyType({"title": "Allow <b>bash</b>: rm -rf \u202eplh.tset\u202c?",
                                 "message": "The tool runs \x1b[31mrm\x1b[0m in \u2066/tmp/<i>x</i>\u2069."}),
    "select": MappingProxyType({"title": "Pick \u202eeno\u202c <i>now</i>",
                                "options": ("Allow once", "<i>Deny</i>", "Always \u202ewolla\u202c", "\x1b[2Jclear")}),
    "input": MappingProxyType({"title": "Your <b>name</b>", "placeholder": "\u202eeman\u202c"}),
    "editor": MappingProxyType({"title": "Edit <i>the plan</i>", "prefill": "line 1\nline \u202e2\u202c\u2028same record"}),
})
"""Per dialog kind, the fields of the fixture's request after ``type``, ``id`` and ``method``, in Pi's order
(``options`` is a list on the wire)."""


def dialog_prompt(kind: str, *, timeout: int | None = None, abortable: bool = False) -> str:
    """The prompt text that cues one ``kind`` dialog on a fixture seat (module doc)."""
    words = ["DIALOG", kind]
    if timeout is not None:
        words.append(f"timeout={timeout}")
    if abortable:
        words.append("abortable")
    return " ".join(words)


def _turn(cid: str, kind: str, **how: Any) -> list[Any]:
    """A prompt that cues a dialog, and the wait for its request."""
    return [cmd(cid, "prompt", message=dialog_prompt(kind, **how)), wait(type="extension_ui_request", method=kind)]


TIMEOUT_MS = 200  # a dialog timeout the scripts let pass; the late answers go out after the tool's end

DIALOG_CONFORMANCE: tuple[Script, ...] = tuple(Script(name, tuple(steps), fixture_extension=True) for name, steps in (
    ("dialog-confirm-answers", [
        *ask("c0", "get_commands"),  # a tool is not a command: the list is the sealed one
        *_turn("p1", "confirm"), answer(confirmed=True), settled(),
        *_turn("p2", "confirm"), answer(confirmed=False), settled(),
        *_turn("p3", "confirm"), answer(confirmed="yes"), settled(),  # passed to the handler as it is
        *_turn("p4", "confirm"), answer(value="yes"), settled(),  # no `confirmed`: false
        *_turn("p5", "confirm"), answer(cancelled=True), settled(),
        *_turn("p6", "confirm"), answer(cancelled=True, confirmed=True), settled(),  # the cancel wins
        *ask("e1", "get_entries"),
    ]),
    ("dialog-select-answers", [
        *_turn("p1", "select"),
        send({"type": "extension_ui_response", "id": "no-such-request", "value": "Allow once"}),
        send({"type": "extension_ui_response", "value": "Allow once"}),  # no id
        answer(value="<i>Deny</i>"), answer(value="Allow once"),  # the first answer wins; the second is ignored
        settled(), answer(value="Allow once"), *ask("s1", "get_state"),  # after the settle: nothing written
        *_turn("p2", "select"), answer(value="Not one of the options"), settled(),  # passed through
        *_turn("p3", "select"), answer(cancelled=True), settled(),
        *_turn("p4", "select"), answer(confirmed=True), settled(),  # no `value`: undefined
    ]),
    ("dialog-input-editor-answers", [
        *_turn("p1", "input"), answer(value="typed \u202eback\u202c"), settled(),
        *_turn("p2", "input"), answer(cancelled=True), settled(),
        # The editor takes no timeout: none in the request, and none fires in the pause.
        *_turn("p3", "editor", timeout=TIMEOUT_MS), pause(3 * TIMEOUT_MS / 1000),
        answer(value="line 1\nedited"), settled(),
        *_turn("p4", "editor"), answer(cancelled=True), settled(),
    ]),
    ("dialog-timeouts", [
        # Nothing is written at a timeout: the next record is the tool's end with the default value.
        *_turn("p1", "confirm", timeout=TIMEOUT_MS), wait(type="tool_execution_end"), answer(confirmed=True),
        settled(),
        *_turn("p2", "select", timeout=TIMEOUT_MS), wait(type="tool_execution_end"), answer(value="Allow once"),
        settled(),
        *_turn("p3", "input", timeout=TIMEOUT_MS), wait(type="tool_execution_end"), answer(value="late"),
        settled(), *ask("s1", "get_state"),
    ]),
    ("dialog-interrupt-pending", [
        # The controller's interrupt while a dialog the extension does not tie to the abort signal is pending:
        # the abort waits for the dialog; the late answer then reaches the tool, and the run ends aborted.
        *_turn("p1", "confirm"), *ask("q1", "clear_queue"), cmd("a1", "abort"), *ask("s1", "get_state"),
        answer(confirmed=True), reply("a1"), *ask("s2", "get_state"), *ask("e1", "get_entries"),
    ]),
    ("dialog-interrupt-abortable", [
        # The same with the abort signal passed to the dialog: the abort settles it with the default at once,
        # writing nothing for the dialog; a later answer is ignored.
        *_turn("p1", "select", abortable=True), *ask("q1", "clear_queue"), *ask("a1", "abort"),
        answer(value="Allow once"), *ask("s1", "get_state"), *ask("e1", "get_entries"),
    ]),
    ("dialog-editor-ignores-abort", [
        *_turn("p1", "editor", abortable=True), cmd("a1", "abort"), *ask("s1", "get_state"),
        answer(value="kept"), reply("a1"), *ask("s2", "get_state"),
    ]),
    ("dialog-eof-pending", [*_turn("p1", "confirm"), close(), exited(), snapshot("after")]),
    ("dialog-prompt-while-pending", [
        *_turn("p1", "confirm"), *ask("p2", "prompt", message="hello while a dialog waits"),
        *ask("f1", "follow_up", message="FOLLOWUP after the dialog"), *ask("s1", "get_state"),
        answer(confirmed=True), settled(), *ask("e1", "get_entries"),
    ]),
)) + (
    # The same cue on a sealed seat without the fixture: the tool does not exist, no dialog is raised.
    Script("dialog-cue-without-the-fixture", (cmd("p1", "prompt", message=dialog_prompt("confirm")), settled(),
                                              *ask("e1", "get_entries"))),
)
"""The dialog scenarios of the conformance suite (module doc), recorded from the real Pi as goldens."""


def __dir__() -> list[str]:
    return sorted(__all__)
