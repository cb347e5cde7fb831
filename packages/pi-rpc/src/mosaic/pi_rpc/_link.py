"""The engine link, sans-io: the controller's side of Pi's stdin and stdout, as a state machine.

No I/O happens here. The shell (:mod:`mosaic.pi_rpc._shell`) or any other owner moves bytes and reports
what happened; this core decides. Every time input is an explicit ``now=`` (one clock: the caller's).
The rules it keeps:

1. **Three write outcomes** (brief §1 "Write outcomes"). Every command written gets one:

   * ``written``: the whole line was accepted by the pipe (the shell reported every byte accepted);
   * ``acknowledged``: the engine's response with this command's id was read (success or error);
   * ``unknown``: the write was partial, failed (EPIPE or any OSError), did not finish within the bound,
     the line was written but no response came within the bound, the engine's output ended before the
     response, or the output stopped being readable (rule 7). A write accepted by the pipe is not
     consumption, so ``written`` is never upgraded by time, only by a response.

   A command still queued behind the write that failed was never written at all: it ends
   ``not-written``, the only outcome that says so, and only for commands of which no byte left.

2. **Poison** (brief §1, mutant 16). After the first ``unknown`` the pipe is poisoned: a partial line
   would join the next write. Nothing is written again: :meth:`LinkCore.send` raises
   :class:`LinkPoisoned`, the outbox is dropped, :meth:`LinkCore.next_write` returns ``None``. A late
   response to an ``unknown`` command is reported (:class:`LateResponse`) and never changes the outcome.

3. **Correlation by id** (FACTS.md (b) "Framing": commands are not serialized, responses can arrive out
   of command order, empirical F). Each command gets a fresh id ``<prefix><seq>``, ``seq`` counting up
   from 1; a response is matched to its command by id alone, never by order. A response that matches
   nothing (no id, an id the link never wrote: Pi's ``parse`` error answers carry no id, rpc-mode.js
   610), or a second response for an acknowledged command, means a line the engine read was not a line
   the link wrote whole: it poisons the link.

4. **The two prompt rules are the API** (FACTS.md a5 and Part 2 F):

   4a. :meth:`LinkCore.send_prompt` raises :class:`PromptNotAcknowledged` while an earlier prompt has no
       response yet: a prompt pipelined behind an un-acked prompt can be acked and never run (the
       preflight window).
   4b. A ``get_state`` reply is evidence about a prompt only through :meth:`LinkCore.prompt_state`, which
       raises :class:`NotEvidence` unless that ``get_state`` was written after the prompt's ack was read:
       a ``get_state`` read during the preflight window says ``isStreaming: false`` while the run starts.

5. **Bounds.** A command's bound runs from the moment it was queued; when it passes without a response
   (whether the write finished or not) the outcome is ``unknown`` (reason ``no-response`` or
   ``write-stalled``) and the link is poisoned. A queued command whose bound passes was not taken by the
   pipe in time either: the write in progress ahead of it is ``write-stalled``, and it is ``not-written``.
   ``bound=None`` means no bound (``abort`` waits for the run to end, which can take as long as a queued
   follow-up runs).

6. **Only what is in flight is kept.** The core holds the commands that are queued, being written or
   written and awaiting their response, and forgets a command once it is acknowledged (its caller holds
   the :class:`Command`). Ids are ``<prefix><seq>`` with ``seq`` monotonic, so a response whose ``seq`` is
   at most the highest issued and that is neither in flight nor kept is a second response for an
   acknowledged command. ``unknown`` and ``not-written`` commands are kept (a late response must find its
   command), but they exist only from the poison on, after which nothing new is sent: the link's memory
   does not grow with the number of commands. Deadlines live in a heap with lazy deletion.

7. **Unreadable output stops the link at once** (issue 27). Every record is decoded strictly
   (:func:`mosaic.pi_rpc.framing.decode_record`): a record over the cap, bytes that are not UTF-8, text that is
   not JSON, nesting deeper than :data:`mosaic.pi_rpc.framing.MAX_RECORD_DEPTH` (or a ``RecursionError``), a
   number out of range, or JSON that is not an object. The first such record ends the reading: a
   :class:`ProtocolViolation`, every command in flight ``unknown`` (``output-unreadable``), the poison, with
   its kind in the reason (``engine output unreadable (<kind>): ...``) and in :attr:`LinkCore.unreadable`.
   Never an exception out of :meth:`LinkCore.feed`, so never one out of a shell's read callback, and never
   a wait for a bound: a caller awaiting a response learns at once.

8. **A dialog answer is a line Pi never answers** (rpc-mode.js 614-626; issue 33).
   :meth:`LinkCore.send_ui_response` writes ``{"type": "extension_ui_response", "id": <the dialog's id>,
   ...}`` in turn with the commands, under the same write rules (``unknown`` poisons, a bound runs while it
   waits for the pipe), but ``written`` is its last outcome: it leaves flight then, and no response, bound
   or end of output changes it. Whether Pi took it is the engine's later evidence (the handler's result),
   the owner's to read; :meth:`LinkCore.send` still refuses the type.

The outcome changes are one table, :data:`OUTCOME_TABLE` below: ``(outcome, input) -> (new outcome,
unknown reason)``. The inputs (:class:`OutcomeInput`) are what the owner reports or the clock says: the
write started, accepted whole, partial, failed; a response with the command's id; the bound passed; the
output ended; the output became unreadable; the poison dropped the outbox. A pair the table does not
list leaves the outcome unchanged, and these are the only effects of such a pair:

* ``(unknown, response)``: a :class:`LateResponse` (rule 2);
* ``(acknowledged, response)``, ``(not-written, response)``: a :class:`ProtocolViolation` that poisons
  (rule 3);
* a write input (accepted whole, partial, failed) for a command that is not the write in progress: a
  :class:`LinkUsageError`, a bug in the owner; for the write in progress whose outcome was already
  decided (acknowledged, or ``write-stalled``), nothing: the shell may still be blocked in the write;
* anything else: nothing.

Every method that can change an outcome returns the :class:`LinkEvent` values it produced, in order.
"""

from __future__ import annotations

import enum
import heapq
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from mosaic.pi_rpc._framing import (
    DEFAULT_MAX_RECORD_BYTES,
    FramingError,
    RecordDecoder,
    UnreadableKind,
    decode_record,
    encode_record,
)

__all__ = [
    "DEFAULT_BOUND",
    "OUTCOME_TABLE",
    "Command",
    "CommandWritten",
    "CommandOutcome",
    "EngineEvent",
    "LateResponse",
    "LinkCore",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "NotEvidence",
    "OutcomeInput",
    "OutcomeKnown",
    "OutcomeUnknown",
    "Poisoned",
    "PromptNotAcknowledged",
    "PromptStateEvidence",
    "ProtocolViolation",
    "TruncatedOutput",
    "UnknownReason",
    "UI_RESPONSE",
]

UI_RESPONSE = "extension_ui_response"  # the type of a dialog answer (rule 8)
_UI_ANSWER_KEYS = frozenset({"value", "confirmed", "cancelled"})

# Seconds. Pi answers every command except prompt (ack at preflight) and abort (after the run) at once;
# a bound this long only trips when the engine is stuck or the pipe lost a line.
DEFAULT_BOUND = 30.0

UnknownReason = Literal[
    "partial-write",  # fewer bytes than the line were accepted, then the write stopped
    "write-error",  # the write raised (EPIPE, EBADF, ...), with or without bytes accepted before
    "write-stalled",  # the bound passed before the pipe accepted the whole line
    "no-response",  # the whole line was accepted, no response within the bound
    "engine-output-ended",  # the engine's stdout reached EOF before the response
    "output-unreadable",  # a record the link cannot read (`LinkCore.unreadable` names the kind: framing.UNREADABLE_OUTPUT)
]


class CommandOutcome(enum.Enum):
    """Where a command stands (brief §1 "Write outcomes", plus the two states before any outcome)."""

    QUEUED = "queued"  # in the outbox, no byte written yet
    WRITING = "writing"  # handed to the shell, result not reported yet
    WRITTEN = "written"
    ACKNOWLEDGED = "acknowledged"
    UNKNOWN = "unknown"
    NOT_WRITTEN = "not-written"  # dropped from the outbox by the poison: no byte of it left


class OutcomeInput(enum.Enum):
    """What can happen to one command (the inputs of :data:`OUTCOME_TABLE`)."""

    WRITE_STARTED = "write-started"  # next_write() handed its bytes to the shell
    WRITE_WHOLE = "write-accepted-whole"  # write_done(): every byte accepted, no error
    WRITE_PARTIAL = "write-partial"  # write_done(): fewer bytes accepted, no error
    WRITE_ERROR = "write-error"  # write_done(): the write raised
    RESPONSE = "response"  # a response record with the command's id was read
    # tick(): its bound passed; for the write in progress, also a passed bound of a command queued behind it
    BOUND_PASSED = "bound-passed"
    OUTPUT_ENDED = "output-ended"  # output_ended(): EOF on the engine's stdout
    OUTPUT_UNREADABLE = "output-unreadable"  # a record the link cannot read (framing.UNREADABLE_OUTPUT)
    POISON_DROPS_OUTBOX = "poison-drops-outbox"  # the link was poisoned (by another command or the output)


_Q, _W, _WR = CommandOutcome.QUEUED, CommandOutcome.WRITING, CommandOutcome.WRITTEN
_ACK, _UNK, _NW = CommandOutcome.ACKNOWLEDGED, CommandOutcome.UNKNOWN, CommandOutcome.NOT_WRITTEN
_I = OutcomeInput

OUTCOME_TABLE: Mapping[tuple[CommandOutcome, OutcomeInput], tuple[CommandOutcome, UnknownReason | None]] = \
    MappingProxyType({
        # Queued: no byte left. Anything that ends the link ends it not-written (rule 1, last paragraph).
        (_Q, _I.WRITE_STARTED): (_W, None),
        (_Q, _I.RESPONSE): (_NW, None),  # a response for a line never written: violation, poison (rule 3)
        (_Q, _I.BOUND_PASSED): (_NW, None),  # not taken from the outbox in time (rule 5)
        (_Q, _I.OUTPUT_ENDED): (_NW, None),
        (_Q, _I.OUTPUT_UNREADABLE): (_NW, None),
        (_Q, _I.POISON_DROPS_OUTBOX): (_NW, None),
        # Writing: some bytes may be in the pipe.
        (_W, _I.WRITE_WHOLE): (_WR, None),
        (_W, _I.WRITE_PARTIAL): (_UNK, "partial-write"),
        (_W, _I.WRITE_ERROR): (_UNK, "write-error"),
        (_W, _I.RESPONSE): (_ACK, None),  # Pi answers after reading the whole line, maybe before write_done
        (_W, _I.BOUND_PASSED): (_UNK, "write-stalled"),
        (_W, _I.OUTPUT_ENDED): (_UNK, "engine-output-ended"),
        (_W, _I.OUTPUT_UNREADABLE): (_UNK, "output-unreadable"),
        # Written: only a response or the end of the engine's output decides (rule 1: never upgraded by time).
        (_WR, _I.RESPONSE): (_ACK, None),
        (_WR, _I.BOUND_PASSED): (_UNK, "no-response"),
        (_WR, _I.OUTPUT_ENDED): (_UNK, "engine-output-ended"),
        (_WR, _I.OUTPUT_UNREADABLE): (_UNK, "output-unreadable"),
        # Acknowledged, unknown and not-written are final: no row.
    })
"""``(outcome, input) -> (new outcome, unknown reason or None)``; a pair not listed changes nothing (module
docstring). The code consults this table for every outcome change."""

_IN_FLIGHT = frozenset({_Q, _W, _WR})


class LinkUsageError(RuntimeError):
    """A programming error in the caller (a rule of the link broken); never a refusal."""


class LinkPoisoned(LinkUsageError):
    """The link is poisoned (rule 2): nothing may be written. ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the engine pipe is poisoned ({reason}); it is never written again")
        self.reason = reason


class PromptNotAcknowledged(LinkUsageError):
    """A prompt was sent while an earlier prompt had no response yet (rule 4a)."""


class NotEvidence(LinkUsageError):
    """A get_state reply was offered as evidence about a prompt it cannot speak for (rule 4b)."""


@dataclass(eq=False)
class Command:
    """One command the link wrote or will write. Fields are read-only for callers.

    ``read_count_at_send`` is how many engine records had been read when the command was queued;
    ``response_index`` is the read index of its response; ``agent_starts_at_response`` is how many
    ``agent_start`` records had been read before its response (rule 4b's "agent_start between").
    """

    seq: int
    id: str
    type: str
    record: Mapping[str, Any]
    data: bytes
    queued_at: float
    bound: float | None
    read_count_at_send: int
    outcome: CommandOutcome = CommandOutcome.QUEUED
    unknown_reason: UnknownReason | None = None
    accepted: int = 0
    written_at: float | None = None
    response: Mapping[str, Any] | None = None
    response_index: int | None = None
    agent_starts_at_response: int | None = None
    late_responses: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def deadline(self) -> float | None:
        """``queued_at + bound``, or ``None`` for an unbounded command."""
        return None if self.bound is None else self.queued_at + self.bound

    @property
    def succeeded(self) -> bool:
        """True when acknowledged with ``success: true``."""
        return self.response is not None and self.response.get("success") is True

    def written_after_ack_of(self, prompt: Command) -> bool:
        """True when ``prompt``'s response (its ack, or its error response) had been read when this command
        was queued: only then can this command's reply speak for the prompt (rule 4b)."""
        return prompt.response_index is not None and prompt.response_index < self.read_count_at_send


# ---------------------------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineEvent:
    """A record from the engine that is not a response (an agent event, a queue update, a UI request).
    ``index`` is its position among all records read."""

    index: int
    record: Mapping[str, Any]

    @property
    def type(self) -> str:
        value = self.record.get("type")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class CommandWritten:
    """``command``'s whole line was accepted by the pipe: outcome ``written`` (brief §1). Not consumption:
    only a response makes it ``acknowledged``. A controller shows its receipt as dispatched."""

    command: Command


@dataclass(frozen=True)
class OutcomeKnown:
    """``command`` was acknowledged: its response was read (``command.response``)."""

    command: Command


@dataclass(frozen=True)
class OutcomeUnknown:
    """``command``'s outcome is ``unknown`` (``command.unknown_reason``). The link is poisoned."""

    command: Command


@dataclass(frozen=True)
class LateResponse:
    """A response for a command whose outcome was already ``unknown``. The outcome does not change."""

    command: Command
    index: int
    record: Mapping[str, Any]


@dataclass(frozen=True)
class ProtocolViolation:
    """A record that breaks the protocol: a response matching no command or a second response for one
    (``record`` set), or a record that is not a JSON object (``record`` None, ``text`` set). It poisons
    the link."""

    index: int
    detail: str
    record: Mapping[str, Any] | None
    text: str | None


@dataclass(frozen=True)
class TruncatedOutput:
    """The engine's output ended inside a record (bytes after the last LF)."""

    tail: str


@dataclass(frozen=True)
class Poisoned:
    """The link became poisoned now, for ``reason`` (emitted once)."""

    reason: str


LinkEvent = EngineEvent | CommandWritten | OutcomeKnown | OutcomeUnknown | LateResponse | ProtocolViolation | \
    TruncatedOutput | Poisoned


@dataclass(frozen=True)
class PromptStateEvidence:
    """A get_state reply that may speak for a prompt (rule 4b), and what it says.

    ``agent_start_between`` is True when an ``agent_start`` record was read after the prompt's ack and
    before this reply (brief §3 table: "get_state after the ack says not streaming, and no agent_start
    arrived between the ack and that reply").
    """

    prompt: Command
    state: Command
    is_streaming: bool
    agent_start_between: bool
    data: Mapping[str, Any]


_DEFAULT: Any = object()
# A response id that names a command acknowledged earlier (and forgotten since).
_SETTLED: Any = object()


class LinkCore:
    """The sans-io engine link. See the module docstring for the rules.

    ``default_bound`` applies to commands sent without an explicit ``bound``; ``max_record_bytes`` is the
    framing cap (:data:`mosaic.pi_rpc.framing.DEFAULT_MAX_RECORD_BYTES`); ``id_prefix`` starts every command id.

    Who calls what: the owner of the link (a controller core, or :class:`mosaic.pi_rpc.EngineLink` on its
    own) calls :meth:`send`, :meth:`send_prompt` and :meth:`prompt_state`; whoever moves the bytes calls
    :meth:`next_write` / :meth:`write_done` (the write side), :meth:`feed` / :meth:`output_ended` (the read
    side) and :meth:`tick` (the clock). Each call returns its events to its caller.
    """

    def __init__(
        self,
        *,
        default_bound: float | None = DEFAULT_BOUND,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        id_prefix: str = "m",
    ) -> None:
        self.default_bound = default_bound
        self._decoder = RecordDecoder(max_record_bytes=max_record_bytes, errors="strict")
        self._prefix = id_prefix
        self._seq = 0
        # In flight, by seq, in send order (rule 6). Outcomes QUEUED, WRITING, WRITTEN only.
        self._in_flight: dict[int, Command] = {}
        # unknown / not-written commands, kept for late responses: they exist only from the poison on.
        self._kept: dict[int, Command] = {}
        # (deadline, seq) of bounded commands; entries of commands no longer in flight are skipped lazily.
        self._deadlines: list[tuple[float, int]] = []
        self._outbox: deque[Command] = deque()
        self._writing: Command | None = None
        self._read_count = 0
        self._agent_starts = 0
        self._open_prompt: Command | None = None
        self._poison: str | None = None
        self._unreadable: UnreadableKind | None = None
        self._output_closed = False

    # -- state ------------------------------------------------------------------------------------------

    @property
    def poisoned(self) -> str | None:
        """Why the link is poisoned, or ``None``."""
        return self._poison

    @property
    def unreadable(self) -> UnreadableKind | None:
        """The kind of engine output that stopped the reading (a key of
        :data:`mosaic.pi_rpc.framing.UNREADABLE_OUTPUT`), or ``None``: the output is readable or ended."""
        return self._unreadable

    @property
    def in_flight(self) -> tuple[Command, ...]:
        """The commands in flight (queued, being written, or written and awaiting a response), in send order.
        Acknowledged, unknown and not-written commands are not in it (rule 6)."""
        return tuple(self._in_flight.values())

    @property
    def output_closed(self) -> bool:
        """True once the engine's output ended (:meth:`output_ended`) or became unreadable: nothing more can
        be fed, so a shell stops reading."""
        return self._output_closed

    @property
    def records_read(self) -> int:
        """How many engine records have been read."""
        return self._read_count

    @property
    def open_prompt(self) -> Command | None:
        """The prompt that has no response yet, if any (rule 4a)."""
        return self._open_prompt

    def can_send_prompt(self) -> bool:
        """True when :meth:`send_prompt` would not raise."""
        return self._poison is None and self._open_prompt is None

    # -- sending ----------------------------------------------------------------------------------------

    def send(self, command: Mapping[str, Any], *, now: float, bound: float | None = _DEFAULT) -> Command:
        """Queue ``command`` (a mapping with ``type``; the link adds ``id``); return its :class:`Command`.

        Raises :class:`LinkPoisoned` when poisoned, ``ValueError`` for a prompt (use :meth:`send_prompt`),
        for an ``extension_ui_response`` (Pi never answers it, rpc-mode.js 615-626, so no outcome could
        ever be known) or for a command that carries its own ``id``.
        """
        ctype = command.get("type")
        if ctype == "prompt":
            raise ValueError("prompts go through send_prompt(), which keeps the prompt-order rule")
        return self._queue(command, now=now, bound=bound)

    def send_prompt(self, message: str, *, now: float, bound: float | None = _DEFAULT) -> Command:
        """Queue ``{"type": "prompt", "message": message}``; return its :class:`Command`.

        Raises :class:`PromptNotAcknowledged` while an earlier prompt has no response (FACTS.md a5: a
        prompt pipelined behind an un-acked one is acked and never runs), :class:`LinkPoisoned` when
        poisoned. The controller never sends ``streamingBehavior`` (brief §1), so neither does the link.
        """
        if not isinstance(message, str):
            raise TypeError("a prompt message is a str")
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        if self._open_prompt is not None:
            raise PromptNotAcknowledged(
                f"prompt {self._open_prompt.id} has no response yet; a second prompt now could be acked "
                "and never run (FACTS.md a5, Part 2 F)")
        cmd = self._queue({"type": "prompt", "message": message}, now=now, bound=bound)
        self._open_prompt = cmd
        return cmd

    def send_ui_response(self, dialog_id: str, answer: Mapping[str, Any], *, now: float,
                         bound: float | None = _DEFAULT) -> Command:
        """Queue the answer to the dialog ``dialog_id`` (an ``extension_ui_request``'s id):
        ``{"type": "extension_ui_response", "id": dialog_id, **answer}``, ``answer`` holding only ``value``,
        ``confirmed`` or ``cancelled``, as given (the link never judges it). Its outcome ends at ``written``
        (rule 8). Raises :class:`LinkPoisoned` when poisoned, ``ValueError`` for an empty id or another key."""
        if not isinstance(dialog_id, str) or not dialog_id:
            raise ValueError("a dialog answer needs the dialog's id")
        if not answer or not set(answer) <= _UI_ANSWER_KEYS:
            raise ValueError(f"a dialog answer holds only {sorted(_UI_ANSWER_KEYS)}")
        return self._queue({"type": UI_RESPONSE, **answer}, now=now, bound=bound, ui_id=dialog_id)

    def _queue(self, command: Mapping[str, Any], *, now: float, bound: float | None,
               ui_id: str | None = None) -> Command:
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        ctype = command.get("type")
        if not isinstance(ctype, str) or not ctype:
            raise ValueError("a command needs a string 'type'")
        if (ctype == UI_RESPONSE) != (ui_id is not None):
            raise ValueError("extension_ui_response gets no response from Pi: send it with send_ui_response()")
        if "id" in command:
            raise ValueError("the link assigns command ids")
        self._seq += 1
        cid = f"{self._prefix}{self._seq}" if ui_id is None else ui_id
        record = {"type": ctype, "id": cid, **command} if ui_id is not None else {"id": cid, **command}
        cmd = Command(
            seq=self._seq,
            id=cid,
            type=ctype,
            record=record,
            data=encode_record(record),
            queued_at=now,
            bound=self.default_bound if bound is _DEFAULT else bound,
            read_count_at_send=self._read_count,
        )
        self._in_flight[cmd.seq] = cmd
        self._outbox.append(cmd)
        deadline = cmd.deadline
        if deadline is not None:
            self._push_deadline(deadline, cmd.seq)
        return cmd

    # -- the write side (the shell calls these) ---------------------------------------------------------

    def next_write(self) -> Command | None:
        """The next command whose bytes (``command.data``) the shell must write, or ``None``.

        One write at a time, in send order; ``None`` while a write is in progress or the link is poisoned.
        The shell writes every byte it can and reports with :meth:`write_done`.
        """
        if self._poison is not None or self._writing is not None or not self._outbox:
            return None
        cmd = self._outbox.popleft()
        self._apply(cmd, OutcomeInput.WRITE_STARTED)
        self._writing = cmd
        return cmd

    def write_done(self, command: Command, *, accepted: int, error: BaseException | None,
                   now: float) -> list[LinkEvent]:
        """Report the end of ``command``'s write: ``accepted`` bytes taken by the pipe, and the error that
        stopped it (``None`` if it was not stopped by one). Whole and no error: ``written``. Otherwise
        ``unknown`` (``write-error`` / ``partial-write``) and the link is poisoned. Raises
        :class:`LinkUsageError` when ``command`` is not the write in progress."""
        if command is not self._writing:
            raise LinkUsageError(f"write_done for {command.id}, which is not the write in progress")
        self._writing = None
        command.accepted = accepted
        if error is not None:
            what = OutcomeInput.WRITE_ERROR
        elif accepted == len(command.data):
            what = OutcomeInput.WRITE_WHOLE
        else:
            what = OutcomeInput.WRITE_PARTIAL
        # An outcome decided while the shell was writing (write-stalled, or acknowledged: the engine answers
        # only after reading the whole line) has no row for a write input: it stays.
        if command.outcome is CommandOutcome.WRITING and what is OutcomeInput.WRITE_WHOLE:
            command.written_at = now
        reason = "write-error" if error is not None else "partial-write"
        return self._step(command, what, poison=f"{reason} on {command.id}")

    # -- the read side ----------------------------------------------------------------------------------

    def feed(self, data: bytes, *, now: float) -> list[LinkEvent]:
        """Bytes read from the engine's stdout; returns what they mean, in order. Raises
        :class:`LinkUsageError` once :attr:`output_closed` (the reader must stop)."""
        if self._output_closed:
            raise LinkUsageError("feed() after the engine's output ended or became unreadable")
        try:
            texts = self._decoder.feed(data)
        except FramingError as exc:
            return self._output_broken(exc.kind, f"framing: {exc}")
        events: list[LinkEvent] = []
        for text in texts:
            events += self._record(text)
            if self._output_closed:
                break
        return events

    def output_ended(self, *, now: float) -> list[LinkEvent]:
        """The engine's stdout reached EOF (the engine exited or closed it). Idempotent."""
        if self._output_closed:
            return []
        events: list[LinkEvent] = []
        try:
            tail = self._decoder.close()
        except FramingError:
            tail = None
        if tail is not None:
            events.append(TruncatedOutput(tail))
        self._output_closed = True
        for cmd in list(self._in_flight.values()):
            events += self._step(cmd, OutcomeInput.OUTPUT_ENDED, poison="the engine's output ended")
        events += self._poison_now("the engine's output ended")
        return events

    def _record(self, text: str) -> list[LinkEvent]:
        index = self._read_count
        self._read_count += 1
        try:
            record = decode_record(text)
        except FramingError as exc:
            # Pi's stdout is taken over (output-guard.js 38-56): every line is a JSON object its
            # JSON.stringify wrote. One the decoder cannot take (or that is not an object) means the stream
            # is not Pi's protocol any more: the link stops reading at once, whatever the kind.
            return [ProtocolViolation(index, f"engine output record is unreadable ({exc.kind}): {exc}", None, text),
                    *self._output_broken(exc.kind, str(exc))]
        if record.get("type") != "response":
            if record.get("type") == "agent_start":
                self._agent_starts += 1
            return [EngineEvent(index, record)]
        return self._response(index, record)

    def _response(self, index: int, record: dict[str, Any]) -> list[LinkEvent]:
        rid = record.get("id")
        found = self._lookup(rid)
        if found is _SETTLED:
            detail = f"a second response for {rid}"
            return [ProtocolViolation(index, detail, record, None), *self._poison_now(f"protocol: {detail}")]
        cmd: Command | None = found
        if cmd is None or cmd.outcome in (CommandOutcome.QUEUED, CommandOutcome.NOT_WRITTEN):
            detail = ("a response with no id (Pi could not parse a line it read)" if rid is None
                      else f"a response for id {rid!r}, which the link never wrote")
            violation = ProtocolViolation(index, detail, record, None)
            if cmd is not None:
                return [violation, *self._step(cmd, OutcomeInput.RESPONSE, poison=f"protocol: {detail}")]
            return [violation, *self._poison_now(f"protocol: {detail}")]
        if cmd.outcome is CommandOutcome.UNKNOWN:
            cmd.late_responses.append(record)
            return [LateResponse(cmd, index, record)]
        # WRITING or WRITTEN: Pi can answer before the shell has reported the end of the write.
        cmd.response = record
        cmd.response_index = index
        cmd.agent_starts_at_response = self._agent_starts
        if self._open_prompt is cmd:
            self._open_prompt = None
        return self._step(cmd, OutcomeInput.RESPONSE, poison="")

    def _lookup(self, rid: Any) -> Any:
        """The command a response id names: a :class:`Command` (in flight or kept), ``_SETTLED`` (an id the
        link issued for a command acknowledged and forgotten since), or ``None`` (no such id)."""
        if not isinstance(rid, str) or not rid.startswith(self._prefix):
            return None
        digits = rid[len(self._prefix):]
        # Exactly the form _queue() writes: ASCII digits, no sign, no leading zero.
        if not (digits.isascii() and digits.isdigit()) or digits[0] == "0":
            return None
        seq = int(digits)
        if seq > self._seq:
            return None
        cmd = self._in_flight.get(seq) or self._kept.get(seq)
        if cmd is not None and cmd.type == UI_RESPONSE:
            return None  # that seq is a dialog answer's, whose id is the dialog's: no command of that id
        return cmd if cmd is not None else _SETTLED

    # -- the clock --------------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest bound still running, or ``None``."""
        heap = self._deadlines
        while heap and heap[0][1] not in self._in_flight:
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def tick(self, *, now: float) -> list[LinkEvent]:
        """The clock reads ``now``: every command past its bound without a response becomes ``unknown``
        (or ``not-written`` if it never left the outbox), in send order (rule 5)."""
        heap = self._deadlines
        due: list[int] = []
        while heap and heap[0][0] <= now:
            seq = heapq.heappop(heap)[1]
            if seq in self._in_flight:
                due.append(seq)
        events: list[LinkEvent] = []
        for seq in sorted(due):
            cmd = self._in_flight.get(seq)
            if cmd is None:
                continue  # settled by an earlier one of this tick (the poison dropped it)
            if cmd.outcome is CommandOutcome.QUEUED:
                # The pipe has not taken the lines ahead of it within its bound: the engine stopped reading.
                # The write in progress may have left bytes in the pipe (write-stalled); the outbox was never
                # written (not-written).
                head = self._writing
                if head is not None and head.outcome is CommandOutcome.WRITING:
                    events += self._step(head, OutcomeInput.BOUND_PASSED,
                                         poison=f"{head.id} not accepted by the pipe in time")
                events += self._step(cmd, OutcomeInput.BOUND_PASSED,
                                     poison=f"{cmd.id} was not taken from the outbox within {cmd.bound} s")
            elif cmd.outcome is CommandOutcome.WRITING:
                events += self._step(cmd, OutcomeInput.BOUND_PASSED,
                                     poison=f"{cmd.id} not accepted by the pipe in time")
            else:
                events += self._step(cmd, OutcomeInput.BOUND_PASSED,
                                     poison=f"no response to {cmd.id} within {cmd.bound} s")
        return events

    # -- evidence (rule 4b) -----------------------------------------------------------------------------

    def prompt_state(self, prompt: Command, state: Command) -> PromptStateEvidence:
        """What ``state`` (an acknowledged get_state) says about ``prompt`` (an acknowledged prompt).

        Raises :class:`NotEvidence` when ``state`` was queued before ``prompt``'s ack was read
        (:meth:`Command.written_after_ack_of`), when either has no successful response, or when the types
        are wrong. FACTS.md Part 2 F: a get_state answered during the preflight window says
        ``isStreaming: false`` while the prompt's run is starting.
        """
        if prompt.type != "prompt" or state.type != "get_state":
            raise NotEvidence("prompt_state() takes a prompt and a get_state")
        if prompt.outcome is not CommandOutcome.ACKNOWLEDGED or not prompt.succeeded:
            raise NotEvidence(f"prompt {prompt.id} has no successful ack; nothing to take evidence about")
        if not state.written_after_ack_of(prompt):
            raise NotEvidence(
                f"get_state {state.id} was written before the ack of {prompt.id} was read: it is not "
                "evidence about that prompt (FACTS.md a5, Part 2 F)")
        if state.outcome is not CommandOutcome.ACKNOWLEDGED or not state.succeeded:
            raise NotEvidence(f"get_state {state.id} has no successful response")
        assert prompt.agent_starts_at_response is not None and state.agent_starts_at_response is not None
        data = state.response.get("data") if state.response is not None else None
        if not isinstance(data, Mapping) or not isinstance(data.get("isStreaming"), bool):
            raise NotEvidence(f"get_state {state.id} has no boolean isStreaming")
        # Neither response is an agent_start, so the difference counts exactly the agent_start records read
        # after the ack and before the reply.
        between = state.agent_starts_at_response > prompt.agent_starts_at_response
        return PromptStateEvidence(prompt, state, bool(data["isStreaming"]), between, data)

    # -- internals --------------------------------------------------------------------------------------

    def _apply(self, cmd: Command, what: OutcomeInput) -> CommandOutcome | None:
        """Consult :data:`OUTCOME_TABLE`: move ``cmd`` to its new outcome and return it, or ``None`` (no row:
        unchanged). A command that leaves flight is forgotten, or kept if a late response may name it."""
        row = OUTCOME_TABLE.get((cmd.outcome, what))
        if row is None:
            return None
        new, reason = row
        cmd.outcome = new
        if reason is not None:
            cmd.unknown_reason = reason
        if new not in _IN_FLIGHT:
            del self._in_flight[cmd.seq]
            if new is not CommandOutcome.ACKNOWLEDGED:
                self._kept[cmd.seq] = cmd
        return new

    def _step(self, cmd: Command, what: OutcomeInput, *, poison: str) -> list[LinkEvent]:
        """:meth:`_apply`, and the events of the new outcome: ``CommandWritten``; ``OutcomeKnown``;
        ``OutcomeUnknown`` then the poison (rule 2); for ``not-written`` the poison alone (a command is
        dropped only by one); nothing for an unchanged outcome."""
        new = self._apply(cmd, what)
        if new is CommandOutcome.WRITTEN:
            if cmd.type == UI_RESPONSE:
                del self._in_flight[cmd.seq]  # rule 8: written is a dialog answer's last outcome
            return [CommandWritten(cmd)]
        if new is CommandOutcome.ACKNOWLEDGED:
            return [OutcomeKnown(cmd)]
        if new is CommandOutcome.UNKNOWN:
            # _writing stays set until the shell's write_done (it may still be blocked in the write); the
            # open prompt is not released: the link is poisoned, so no prompt can follow anyway.
            return [OutcomeUnknown(cmd), *self._poison_now(poison)]
        if new is CommandOutcome.NOT_WRITTEN:
            return self._poison_now(poison)
        return []

    def _poison_now(self, reason: str) -> list[LinkEvent]:
        if self._poison is not None:
            return []
        self._poison = reason
        # A command already written whole keeps waiting for its response: the engine read its line before
        # anything broke, and its own bound still decides. Commands still in the outbox are never written.
        while self._outbox:
            self._apply(self._outbox.popleft(), OutcomeInput.POISON_DROPS_OUTBOX)
        return [Poisoned(reason)]

    def _output_broken(self, kind: UnreadableKind, why: str) -> list[LinkEvent]:
        self._output_closed = True
        self._unreadable = kind
        reason = f"engine output unreadable ({kind}): {why}"
        events: list[LinkEvent] = []
        for cmd in list(self._in_flight.values()):
            events += self._step(cmd, OutcomeInput.OUTPUT_UNREADABLE, poison=reason)
        events += self._poison_now(reason)
        return events

    def _push_deadline(self, deadline: float, seq: int) -> None:
        heap = self._deadlines
        heapq.heappush(heap, (deadline, seq))
        # Lazy deletion leaves entries of settled commands until they reach the top; rebuild when they
        # outnumber the live ones, so the heap stays proportional to what is in flight (amortised O(1)).
        if len(heap) > 2 * len(self._in_flight) + 64:
            self._deadlines = [entry for entry in heap if entry[1] in self._in_flight]
            heapq.heapify(self._deadlines)
