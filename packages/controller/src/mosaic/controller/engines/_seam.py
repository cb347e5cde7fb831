"""The engine seam: what the controller's core and its lifecycle ask of an engine, written from what the Pi
adapter (`engines/pi`) does. Two halves, and each side sees only its own:

1. `EngineRules` is the core's half: pure, every member called inside `ControllerCore.receive`. It writes the
   engine's commands on the core's wire (pi-rpc's `LinkCore`: JSON lines, one command and its response
   correlated by id), reads their answers into neutral values (`Answer`, `Cleared`, `EngineList`, a run's
   evidence), reads one native record into a `Reading` (neutral facts, the CHAT-01 event it shows, a dialog,
   an unknown record's size), and compares the engine's entries with its session file (`Verdict`). The core
   never names an engine's command or event: a test walks `core/` for their literals.
2. `Engine` is the lifecycle's half (blocking calls, run on the pool): where the session file is and what it
   holds, the sealed argv and its pins, whether a session is loadable, the load check after spawn, the
   drift configuration, the session reader and history pages the server serves, the tool calls a crash left
   open. `EngineFactory` makes one (`PiSpec.engine()`); the lifecycle takes the factory and never imports an
   adapter.

A second engine (issue 32: Claude Code) is a new folder `engines/<name>/` providing both; `docs/design.md`
"The controller's four parts and the engine seam" says what each member must do.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mosaic.pi_rpc import Command, EngineLink, LinkCore
from mosaic.safe_open import MAX_SESSION_FILE_BYTES

from ._verdict import Checkpoint, DriftConfig, EngineList, FileIdentity, SessionBytes, Verdict

if TYPE_CHECKING:  # the lifecycle's types: named in `Engine`'s signatures only
    from mosaic.cgroup_cohort import EngineLimits
    from mosaic.writer_claim import Pins

__all__ = ["ENGINE_RECORD_CAP", "Answer", "Cleared", "DialogAsk", "Engine", "EngineFactory", "EngineRules", "OverlapSignal", "PageReader",
           "Place", "Reading", "SessionRead", "Wire"]

PageReader = Callable[[str | None], Mapping[str, Any]]  # a cursor (None: the first page) -> one history page

# The largest record an engine's wire takes, derived from the session reader's cap (no answer on the control
# path may be cut for its size while the reader still accepts the session): an entries answer holds every
# entry of the file, each the bytes of its line; a run's end may hold all of its messages, all in the file.
# Twice the reader's cap, plus an envelope: room for both (Pi: get_entries, agent_end; its load check asks
# get_entries since the recorded leaf, never get_tree, whose nesting grows with a chain:
# `engines/pi/_launch` rule 3).
ENGINE_RECORD_CAP = 2 * MAX_SESSION_FILE_BYTES + (4 << 20)

# The core's engine link: pi-rpc's LinkCore (commands correlated by id, outcomes, poison, bounds). A second
# engine speaking JSON lines with id-correlated responses uses it as it is (the toy engine of the tests
# does); one that correlates otherwise presents its own link core through this surface (issue 32: Claude's
# `engines/claude/_link.ClaudeWire` over claude-rpc's `ClaudeLinkCore`), so the core and the shell stay as they are.
Wire = LinkCore


@dataclass(frozen=True)
class OverlapSignal:
    """One overlap signal: the wire order that shows it and why it breaks attribution by order. Every
    engine's overlap table (`EngineRules.overlap_signals`) has this row shape."""

    signal: str
    when: str
    why: str


@dataclass(frozen=True)
class Answer:
    """A command's answer: accepted (`ok`) or refused with the engine's error."""

    ok: bool
    error: str = ""


@dataclass(frozen=True)
class Cleared:
    """A clear's answer: `ok` with the two queues' texts it removed (each may be empty), or refused/malformed
    with `error` (rule 2 of `core/_chain`: no abort follows)."""

    ok: bool
    steering: tuple[str, ...] = ()
    follow_up: tuple[str, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class DialogAsk:
    """A native question the engine asks: its id (None: the core makes one), its method, and the fields
    shown to the person (title, options, message, ...). Off (`CoreConfig.answer_dialogs` False, and not an
    engine whose dialogs are permission requests: `EngineRules.permission_requests`) the core shows it
    disabled and never answers it (P3). On, it offers `choices`, each a label shown exactly and the native
    answer the engine writes for it (`EngineRules.answer`): only answers that are the person's own choice
    (None: the engine cannot take one from the controller: shown disabled, `unanswerable` says why);
    `refused` lists the native answers the engine has that are not offered, each with why (a cancel that may
    mean allow); `timeout` is the engine's own timeout in seconds (None: none)."""

    id: str | None
    method: Any
    fields: Mapping[str, Any] = field(default_factory=dict)
    choices: tuple[tuple[str, Mapping[str, Any]], ...] | None = None
    refused: tuple[tuple[str, str], ...] = ()
    unanswerable: str = ""
    timeout: float | None = None


@dataclass(frozen=True)
class Reading:
    """One native record in neutral terms (`EngineRules.read`). The core acts on the facts in this order: an
    unknown record is only counted (`unknown`: its type and byte count, C-4); `run_event` needs an active run
    (O6 otherwise); `run_start`; `turn_end`; `user_message_start`; `aborted_message`; `queued_input`;
    `input_cancelled` (the id of an input the engine dropped unrun: the slot's prompt, if it never started);
    `tool_start` (id, name) / `tool_end` (id); `dialog_withdrawn` (the native id of a dialog the engine takes
    no answer to any more: Claude's `control_cancel_request`; Pi never withdraws one); then the dialog or the
    CHAT-01 event and `events` after it (one native record may show several: Claude's whole `assistant`
    message is Pi's start, deltas and end); `run_settled` last."""

    kind: str
    unknown: tuple[str, int] | None = None
    run_event: bool = False
    run_start: bool = False
    turn_end: bool = False
    user_message_start: bool = False
    aborted_message: bool = False
    queued_input: bool = False
    input_cancelled: str | None = None
    tool_start: tuple[str, str] | None = None
    tool_end: str | None = None
    dialog_withdrawn: str | None = None
    run_settled: bool = False
    # The CHAT-01 event type and its payload without the message number (the core numbers messages).
    event: tuple[str, Mapping[str, Any]] | None = None
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()  # more CHAT-01 events, after `event`, in order
    dialog: DialogAsk | None = None


class EngineRules(Protocol):
    """The core's half of an engine (sans-io; called inside `receive`). `name` is the engine's name in words
    shown to a person ("Pi")."""

    @property
    def name(self) -> str: ...
    @property
    def overlap_signals(self) -> Mapping[str, OverlapSignal]: ...
    @property
    def persistence_drift(self) -> frozenset[str]: ...  # drift reasons that mean "the engine's own writes are torn"
    @property
    def permission_requests(self) -> bool:
        """True when the engine's dialogs are permission requests (Claude's `can_use_tool`): the brief's §7
        lets the controller answer those without C-2 (P7; C-2 gates the non-permission forms), so the core
        offers their choices whatever `CoreConfig.answer_dialogs` says. False (Pi): its dialogs are extension
        forms, answered only with the option on (P3 otherwise)."""
    @property
    def clear_aborts(self) -> bool:
        """True when the clear also aborts the run (one interrupt request: Claude's `interrupt`); Pi's
        `clear_queue` does not (False): its abort is a second command. The run is then aborted from the
        clear on, and its aborted message is the chain's, never O4."""

    def new_wire(self, *, command_bound: float) -> Wire:
        """The link core one execution's engine is driven through (`command_bound`: a command's default
        response bound); the core's, and the shell's `EngineLink` over it."""
    def text_problem(self, text: str) -> tuple[str, str] | None:
        """None when the engine would take `text` as plain text; else (`text-policy`, message)."""
    def send_prompt(self, wire: Wire, text: str, *, now: float, bound: float) -> Command: ...
    def prompt_answer(self, command: Command) -> Answer: ...
    def send_probe(self, wire: Wire, *, now: float, bound: float) -> Command | None:
        """The question "is a run going?" written after an ack; None: the engine has none (the core then waits
        for the run's events, bounded by the stop's settle and the next check)."""
    def probe_answer(self, wire: Wire, prompt: Command, probe: Command) -> bool | str:
        """True: a run is going or started since the ack; False: none (N5); a str: not evidence, why."""
    def send_clear(self, wire: Wire, *, now: float, bound: float) -> Command: ...
    def clear_answer(self, command: Command) -> Cleared: ...
    def send_abort(self, wire: Wire, *, now: float) -> Command:
        """The abort, answered once the engine is idle (the core bounds the wait with its settle timer)."""
    def abort_answer(self, command: Command) -> Answer: ...
    def send_entries(self, wire: Wire, since: str | None, *, now: float, bound: float) -> Command: ...
    def entries_answer(self, command: Command) -> EngineList | Answer:
        """The entries the engine holds; an `Answer` (not ok) when it refused; ValueError when malformed."""
    def check(self, engine: EngineList, file: SessionBytes | None, *, session_id: str,
              previous: FileIdentity | None) -> Verdict: ...
    def check_appended(self, engine: EngineList, file: SessionBytes | None, *,
                       checkpoint: Checkpoint) -> Verdict | None: ...
    def read(self, record: Mapping[str, Any]) -> Reading: ...
    def answer(self, wire: Wire, dialog_id: str, choice: Mapping[str, Any], *, now: float) -> Command | None:
        """Write the answer `choice` (one of a `DialogAsk`'s native answers, exactly as the reading gave it) to
        the dialog `dialog_id` (its native id); None when the engine takes no answer from the controller. The
        engine may never acknowledge it: its outcome ends at written (Pi's `extension_ui_response`)."""


class Place(Protocol):
    """Where an engine's session file is (Pi: `<project>/.pi/state/<seat>/sessions/<name>`): the project, the
    seat, the file's name and its directory relative to the project, its path."""

    @property
    def project(self) -> str: ...
    @property
    def seat(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def sessions_rel(self) -> str: ...
    @property
    def path(self) -> str: ...


class SessionRead(Protocol):
    """One read of an engine's session file: its header id (the claim's session key), the branch and the leaf
    the engine will load, the tool calls it left open, and a torn tail (`torn_tail()`: None, or why a launch
    on it would write to it)."""

    @property
    def header_id(self) -> str: ...
    @property
    def branch(self) -> str: ...
    @property
    def leaf(self) -> str | None: ...
    @property
    def open_tools(self) -> tuple[tuple[str, str], ...]: ...
    def torn_tail(self) -> str | None: ...


class Engine(Protocol):
    """The lifecycle's half of an engine (its blocking calls run on the lifecycle's pool)."""

    @property
    def name(self) -> str: ...  # the claim's session key and the binding record say it ("pi")
    @property
    def rules(self) -> EngineRules: ...  # the core's half (`CoreConfig.engine`)
    @property
    def env(self) -> Mapping[str, str]: ...  # exactly the engine's environment
    @property
    def limits(self) -> EngineLimits | None: ...
    @property
    def state_dirs(self) -> tuple[str, ...]:
        """What the engine keeps and writes besides its session file (Pi: its agent dir and HOME, as configured;
        Claude: those and the seal's HOME, config and private temp directories): every one checked by the
        live-session guard at construction and at bind, and handed to each execution's uid before its launch."""

    def place(self, session_path: str) -> Place:
        """Where the session file (its real path) is; refuses `configuration` for a path the engine cannot use."""
    def read(self, place: Place) -> SessionRead:
        """Read the session file (blocking); refuses `configuration` for one with no header."""
    def conversation(self, place: Place) -> str: ...  # the conversation id clients see
    def argv(self, session_path: str, *, uids: range | None = None) -> list[str]:
        """The sealed argv (refuses an unpinned or unsealed engine: `engine-pin-mismatch`, `unsealed-engine`).
        `uids`: each execution runs as a uid of this range, allocated at its launch (`bind` names it); what
        the seal makes for the engine's uid is made as this process's until then (Claude's private
        directories; Pi's seal names no uid)."""
    def pins(self, argv: Sequence[str]) -> Pins: ...  # the binary and argv pins as they are now
    def bind(self, argv: Sequence[str], *, uid: int | None = None) -> None:
        """At bind, right before the spawn marker (after the execution's uid, if any, is allocated and the
        state dirs handed to it): the engine's launch made `uid`'s and checked again (Claude: its private
        directories given to `uid`, L7 on the binary's bytes, the seal as `uid`'s; Pi: nothing more than at
        construction). Raises the refusal."""
    def loadable(self, identity: SessionRead) -> None:
        """Refuses `session-drift` when the engine would write to the file at load (a torn tail)."""
    async def load_check(self, link: EngineLink, *, bound: float, session_file: str, identity: SessionRead,
                         step: Callable[[str], None]) -> str | None:
        """K8, after spawn and before admission opens: the engine shows this file, its header and the recorded
        leaf; what differs, or None."""
    def drift(self, identity: SessionRead) -> DriftConfig | None:
        """The core's drift check for this session; None: the engine has none (the core runs no check and the
        lifecycle reads no session file for it)."""
    def history(self, place: Place) -> tuple[str, PageReader]: ...  # observe's history pages


class EngineFactory(Protocol):
    """What the lifecycle is given: it makes the engine once (`PiSpec.engine()`)."""

    def engine(self) -> Engine: ...
