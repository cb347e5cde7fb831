"""The engine link, sans-io: the controller's side of Pi's stdin and stdout, as a state machine.

No I/O happens here. The shell (:mod:`mosaic.pi_rpc._shell`) moves bytes and reports what happened; this
core decides. The rules it keeps:

1. **Three write outcomes** (brief §1 "Write outcomes"). Every command written gets one:

   * ``written``: the whole line was accepted by the pipe (the shell reported every byte accepted);
   * ``acknowledged``: the engine's response with this command's id was read (success or error);
   * ``unknown``: the write was partial, failed (EPIPE or any OSError), did not finish within the bound,
     the line was written but no response came within the bound, the engine's output ended before the
     response, or the output stopped being readable (framing error). A write accepted by the pipe is not
     consumption, so ``written`` is never upgraded by time, only by a response.

   A command still queued behind the write that failed was never written at all: it ends
   ``not-written``, the only outcome that says so, and only for commands of which no byte left.

2. **Poison** (brief §1, mutant 16). After the first ``unknown`` the pipe is poisoned: a partial line
   would join the next write. Nothing is written again: :meth:`LinkCore.send` raises
   :class:`LinkPoisoned`, the outbox is dropped, :meth:`LinkCore.next_write` returns ``None``. A late
   response to an ``unknown`` command is reported (:class:`LateResponse`) and never changes the outcome.

3. **Correlation by id** (FACTS.md (b) "Framing": commands are not serialized, responses can arrive out
   of command order, empirical F). Each command gets a fresh id; a response is matched to its command by
   id alone, never by order. A response that matches nothing (no id, an unknown id: Pi's ``parse`` error
   answers carry no id, rpc-mode.js 610) means a line the engine read was not a line the link wrote
   whole: it poisons the link.

4. **The two prompt rules are the API** (FACTS.md a5 and Part 2 F). (a) :meth:`LinkCore.send_prompt`
   raises :class:`PromptNotAcknowledged` while an earlier prompt has no response yet: a prompt pipelined
   behind an un-acked prompt can be acked and never run (the preflight window). (b) A ``get_state`` reply
   is evidence about a prompt only through :meth:`LinkCore.prompt_state`, which raises
   :class:`NotEvidence` unless that ``get_state`` was written after the prompt's ack was read: a
   ``get_state`` read during the preflight window says ``isStreaming: false`` while the run starts.

5. **Bounds.** A command's bound runs from the moment it was queued; when it passes without a response
   (whether the write finished or not) the outcome is ``unknown`` (reason ``no-response`` or
   ``write-stalled``) and the link is poisoned. ``bound=None`` means no bound (``abort`` waits for the
   run to end, which can take as long as a queued follow-up runs).

Every method that can change an outcome returns the :class:`LinkEvent` values it produced, in order.
"""

from __future__ import annotations

import bisect
import enum
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mosaic.pi_rpc._framing import DEFAULT_MAX_RECORD_BYTES, FramingError, RecordDecoder, encode_record

__all__ = [
    "DEFAULT_BOUND",
    "Command",
    "CommandOutcome",
    "EngineEvent",
    "LateResponse",
    "LinkCore",
    "LinkEvent",
    "LinkPoisoned",
    "LinkUsageError",
    "NotEvidence",
    "OutcomeKnown",
    "OutcomeUnknown",
    "Poisoned",
    "PromptNotAcknowledged",
    "PromptStateEvidence",
    "ProtocolViolation",
    "TruncatedOutput",
    "UnknownReason",
]

# Seconds. Pi answers every command except prompt (ack at preflight) and abort (after the run) at once;
# a bound this long only trips when the engine is stuck or the pipe lost a line.
DEFAULT_BOUND = 30.0

UnknownReason = Literal[
    "partial-write",  # fewer bytes than the line were accepted, then the write stopped
    "write-error",  # the write raised (EPIPE, EBADF, ...), with or without bytes accepted before
    "write-stalled",  # the bound passed before the pipe accepted the whole line
    "no-response",  # the whole line was accepted, no response within the bound
    "engine-output-ended",  # the engine's stdout reached EOF before the response
    "output-unreadable",  # the engine's stdout broke framing (over the cap, not UTF-8, not JSON)
]


class CommandOutcome(enum.Enum):
    """Where a command stands (brief §1 "Write outcomes", plus the two states before any outcome)."""

    QUEUED = "queued"  # in the outbox, no byte written yet
    WRITING = "writing"  # handed to the shell, result not reported yet
    WRITTEN = "written"
    ACKNOWLEDGED = "acknowledged"
    UNKNOWN = "unknown"
    NOT_WRITTEN = "not-written"  # dropped from the outbox by the poison: no byte of it left


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
    ``response_index`` is the read index of its response; ``acked_prompts_at_send`` lists the ``seq`` of
    every prompt whose ack had been read by then (a get_state's ``written_after_ack_of``).
    """

    seq: int
    id: str
    type: str
    record: Mapping[str, Any]
    data: bytes
    queued_at: float
    bound: float | None
    read_count_at_send: int
    acked_prompts_at_send: frozenset[int]
    outcome: CommandOutcome = CommandOutcome.QUEUED
    unknown_reason: UnknownReason | None = None
    accepted: int = 0
    written_at: float | None = None
    response: Mapping[str, Any] | None = None
    response_index: int | None = None
    late_responses: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def deadline(self) -> float | None:
        return None if self.bound is None else self.queued_at + self.bound

    @property
    def succeeded(self) -> bool:
        """True when acknowledged with ``success: true``."""
        return self.response is not None and self.response.get("success") is True

    @property
    def written_after_ack_of(self) -> frozenset[int]:
        """The prompts (by ``seq``) whose ack had been read when this command was queued."""
        return self.acked_prompts_at_send


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
    """A record that breaks the protocol: a response matching no command (``record`` set), or a record
    that is not a JSON object (``record`` None, ``text`` set). It poisons the link."""

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


LinkEvent = EngineEvent | OutcomeKnown | OutcomeUnknown | LateResponse | ProtocolViolation | TruncatedOutput | \
    Poisoned


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


class LinkCore:
    """The sans-io engine link. See the module docstring for the rules.

    ``default_bound`` applies to commands sent without an explicit ``bound``; ``max_record_bytes`` is the
    framing cap (:data:`mosaic.pi_rpc._framing.DEFAULT_MAX_RECORD_BYTES`).
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
        self._by_id: dict[str, Command] = {}
        self._commands: list[Command] = []
        self._outbox: deque[Command] = deque()
        self._writing: Command | None = None
        self._read_count = 0
        self._agent_start_indices: list[int] = []
        self._acked_prompts: set[int] = set()
        self._open_prompt: Command | None = None
        self._poison: str | None = None
        self._output_ended = False

    # -- state ------------------------------------------------------------------------------------------

    @property
    def poisoned(self) -> str | None:
        """Why the link is poisoned, or ``None``."""
        return self._poison

    @property
    def commands(self) -> tuple[Command, ...]:
        """Every command sent so far, in send order."""
        return tuple(self._commands)

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

    def _queue(self, command: Mapping[str, Any], *, now: float, bound: float | None) -> Command:
        if self._poison is not None:
            raise LinkPoisoned(self._poison)
        ctype = command.get("type")
        if not isinstance(ctype, str) or not ctype:
            raise ValueError("a command needs a string 'type'")
        if ctype == "extension_ui_response":
            raise ValueError("extension_ui_response gets no response from Pi; the link never sends it")
        if "id" in command:
            raise ValueError("the link assigns command ids")
        self._seq += 1
        cid = f"{self._prefix}{self._seq}"
        record = {"id": cid, **command}
        cmd = Command(
            seq=self._seq,
            id=cid,
            type=ctype,
            record=record,
            data=encode_record(record),
            queued_at=now,
            bound=self.default_bound if bound is _DEFAULT else bound,
            read_count_at_send=self._read_count,
            acked_prompts_at_send=frozenset(self._acked_prompts),
        )
        self._by_id[cid] = cmd
        self._commands.append(cmd)
        self._outbox.append(cmd)
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
        cmd.outcome = CommandOutcome.WRITING
        self._writing = cmd
        return cmd

    def write_done(self, command: Command, *, accepted: int, error: BaseException | None,
                   now: float) -> list[LinkEvent]:
        """Report the end of ``command``'s write: ``accepted`` bytes taken by the pipe, and the error that
        stopped it (``None`` if it was not stopped by one). Whole and no error: ``written``. Otherwise
        ``unknown`` (``write-error`` / ``partial-write``) and the link is poisoned."""
        if command is not self._writing:
            raise LinkUsageError(f"write_done for {command.id}, which is not the write in progress")
        self._writing = None
        command.accepted = accepted
        if command.outcome is not CommandOutcome.WRITING:
            # Already decided while the shell was writing: the bound passed (unknown, stays so), or the
            # engine answered the id, which it can only do after reading the whole line (acknowledged).
            return []
        if error is None and accepted == len(command.data):
            command.outcome = CommandOutcome.WRITTEN
            command.written_at = now
            return []
        reason: UnknownReason = "write-error" if error is not None else "partial-write"
        return self._unknown(command, reason, poison=f"{reason} on {command.id}")

    # -- the read side ----------------------------------------------------------------------------------

    def feed(self, data: bytes, *, now: float) -> list[LinkEvent]:
        """Bytes read from the engine's stdout; returns what they mean, in order."""
        if self._output_ended:
            raise LinkUsageError("feed() after the engine's output ended")
        try:
            texts = self._decoder.feed(data)
        except FramingError as exc:
            return self._output_broken(f"framing: {exc}")
        events: list[LinkEvent] = []
        for text in texts:
            events += self._record(text)
            if self._output_ended:
                break
        return events

    def output_ended(self, *, now: float) -> list[LinkEvent]:
        """The engine's stdout reached EOF (the engine exited or closed it)."""
        if self._output_ended:
            return []
        events: list[LinkEvent] = []
        try:
            tail = self._decoder.close()
        except FramingError:
            tail = None
        if tail is not None:
            events.append(TruncatedOutput(tail))
        self._output_ended = True
        for cmd in self._commands:
            if cmd.outcome in (CommandOutcome.WRITING, CommandOutcome.WRITTEN):
                events += self._unknown(cmd, "engine-output-ended", poison="the engine's output ended")
        if self._poison is None:
            self._poison = "the engine's output ended"
            events.append(Poisoned(self._poison))
        events += self._drop_outbox()
        return events

    def _record(self, text: str) -> list[LinkEvent]:
        index = self._read_count
        self._read_count += 1
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            # Pi's stdout is taken over (output-guard.js 38-56): every line is a JSON object. One that is
            # not means the stream is not Pi's protocol any more.
            return [ProtocolViolation(index, "engine output record is not a JSON object", None, text),
                    *self._output_broken("a record that is not a JSON object")]
        if record.get("type") != "response":
            if record.get("type") == "agent_start":
                self._agent_start_indices.append(index)
            return [EngineEvent(index, record)]
        rid = record.get("id")
        cmd = self._by_id.get(rid) if isinstance(rid, str) else None
        if cmd is None or cmd.outcome in (CommandOutcome.QUEUED, CommandOutcome.NOT_WRITTEN):
            detail = ("a response with no id (Pi could not parse a line it read)" if rid is None
                      else f"a response for id {rid!r}, which the link never wrote")
            return [ProtocolViolation(index, detail, record, None),
                    *self._poison_now(f"protocol: {detail}")]
        if cmd.outcome is CommandOutcome.UNKNOWN:
            cmd.late_responses.append(record)
            return [LateResponse(cmd, index, record)]
        if cmd.outcome is CommandOutcome.ACKNOWLEDGED:
            return [ProtocolViolation(index, f"a second response for {cmd.id}", record, None),
                    *self._poison_now(f"protocol: a second response for {cmd.id}")]
        # WRITING or WRITTEN: Pi can answer before the shell has reported the end of the write.
        cmd.outcome = CommandOutcome.ACKNOWLEDGED
        cmd.response = record
        cmd.response_index = index
        if cmd.type == "prompt":
            self._acked_prompts.add(cmd.seq)
            if self._open_prompt is cmd:
                self._open_prompt = None
        return [OutcomeKnown(cmd)]

    # -- the clock --------------------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """The earliest bound still running, or ``None``."""
        deadlines = [c.deadline for c in self._commands
                     if c.deadline is not None and c.outcome in (CommandOutcome.QUEUED, CommandOutcome.WRITING,
                                                                  CommandOutcome.WRITTEN)]
        return min(deadlines) if deadlines else None

    def tick(self, *, now: float) -> list[LinkEvent]:
        """The clock reads ``now``: every command past its bound without a response becomes ``unknown``."""
        events: list[LinkEvent] = []
        for cmd in self._commands:
            deadline = cmd.deadline
            if deadline is None or now < deadline:
                continue
            if cmd.outcome is CommandOutcome.WRITTEN:
                events += self._unknown(cmd, "no-response", poison=f"no response to {cmd.id} within {cmd.bound} s")
            elif cmd.outcome in (CommandOutcome.WRITING, CommandOutcome.QUEUED) and self._poison is None:
                # The pipe has not taken the line (or the lines ahead of it) within the bound: the engine
                # stopped reading. The write in progress may have left bytes in the pipe: unknown. The
                # commands queued behind it never left the outbox: not written.
                head = self._writing
                if head is not None:
                    events += self._unknown(head, "write-stalled",
                                            poison=f"{head.id} not accepted by the pipe in time")
                else:
                    events += self._poison_now(f"{cmd.id} was not taken from the outbox within {cmd.bound} s")
        return events

    # -- evidence (rule 4b) -----------------------------------------------------------------------------

    def prompt_state(self, prompt: Command, state: Command) -> PromptStateEvidence:
        """What ``state`` (an acknowledged get_state) says about ``prompt`` (an acknowledged prompt).

        Raises :class:`NotEvidence` when ``state`` was queued before ``prompt``'s ack was read (its
        ``written_after_ack_of`` lacks the prompt), when either has no successful response, or when the
        types are wrong. FACTS.md Part 2 F: a get_state answered during the preflight window says
        ``isStreaming: false`` while the prompt's run is starting.
        """
        if prompt.type != "prompt" or state.type != "get_state":
            raise NotEvidence("prompt_state() takes a prompt and a get_state")
        if prompt.outcome is not CommandOutcome.ACKNOWLEDGED or not prompt.succeeded:
            raise NotEvidence(f"prompt {prompt.id} has no successful ack; nothing to take evidence about")
        if prompt.seq not in state.acked_prompts_at_send:
            raise NotEvidence(
                f"get_state {state.id} was written before the ack of {prompt.id} was read: it is not "
                "evidence about that prompt (FACTS.md a5, Part 2 F)")
        if state.outcome is not CommandOutcome.ACKNOWLEDGED or not state.succeeded:
            raise NotEvidence(f"get_state {state.id} has no successful response")
        assert prompt.response_index is not None and state.response_index is not None
        data = state.response.get("data") if state.response is not None else None
        if not isinstance(data, Mapping) or not isinstance(data.get("isStreaming"), bool):
            raise NotEvidence(f"get_state {state.id} has no boolean isStreaming")
        lo = bisect.bisect_right(self._agent_start_indices, prompt.response_index)
        hi = bisect.bisect_left(self._agent_start_indices, state.response_index)
        return PromptStateEvidence(prompt, state, bool(data["isStreaming"]), hi > lo, data)

    # -- internals --------------------------------------------------------------------------------------

    def _unknown(self, cmd: Command, reason: UnknownReason, *, poison: str) -> list[LinkEvent]:
        cmd.outcome = CommandOutcome.UNKNOWN
        cmd.unknown_reason = reason
        # _writing stays set until the shell's write_done (it may still be blocked in the write); the open
        # prompt is not released: the link is poisoned, so no prompt can follow anyway.
        events: list[LinkEvent] = [OutcomeUnknown(cmd)]
        events += self._poison_now(poison)
        return events

    def _poison_now(self, reason: str) -> list[LinkEvent]:
        if self._poison is not None:
            return []
        self._poison = reason
        events: list[LinkEvent] = [Poisoned(reason)]
        # A command already written whole keeps waiting for its response: the engine read its line before
        # anything broke, and its own bound still decides. Commands still in the outbox are never written.
        events += self._drop_outbox()
        return events

    def _drop_outbox(self) -> list[LinkEvent]:
        while self._outbox:
            cmd = self._outbox.popleft()
            cmd.outcome = CommandOutcome.NOT_WRITTEN
        return []

    def _output_broken(self, why: str) -> list[LinkEvent]:
        events: list[LinkEvent] = []
        self._output_ended = True
        for cmd in self._commands:
            if cmd.outcome in (CommandOutcome.WRITING, CommandOutcome.WRITTEN):
                events += self._unknown(cmd, "output-unreadable", poison=f"engine output unreadable: {why}")
        events += self._poison_now(f"engine output unreadable: {why}")
        return events
