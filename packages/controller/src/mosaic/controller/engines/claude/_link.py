"""The core's wire to Claude (`ClaudeWire`): claude-rpc's `ClaudeLinkCore` (user messages acknowledged by their
`command_lifecycle` frame, control requests by their `control_response`, write outcomes, poison, bounds, the
interrupt's receipt and its R3-1 evidence) presented as the seam's `Wire` (pi-rpc's `LinkCore` surface), so the
core and pi-rpc's `EngineLink` shell drive it unchanged. Pi's wire is not touched.

1. Each line the Claude link queues is a `ClaudeCommand` (a pi-rpc `Command` carrying its `Outgoing`): its
   outcome, unknown reason, written time and answer (`response`: the lifecycle frame or the control
   response) follow the Claude link's. Its `type` is `user` or the control request's subtype.
2. Every record Claude writes but a `control_response` reaches the core as an `EngineEvent` (its read index
   and the record as decoded), in read order, before the outcome events the Claude link derived from it:
   the core reads it through `ClaudeRules.read`. Acknowledgements, write outcomes, poison, protocol
   violations and a truncated tail become pi-rpc's events of the same names.
3. The chain's abort (`abort_interrupt`) is an `interrupt` whose answer the wire holds while a turn runs
   (from a `system/init` to its `result`) and hands to the core right after that `result`: answered once
   Claude is idle, as the seam's `send_abort` asks. An interrupt read while no turn runs is answered at once
   (recordings/sealed-controls.jsonl: an idle interrupt is answered with empty lists).
4. A prompt is a user message with a fresh uuid from the wire's `uuids` (the link refuses one in use); one
   un-acknowledged prompt at a time (`can_send_prompt`), as on Pi's wire. `send`, `send_ui_response` and
   `prompt_state` refuse (Claude has no probe).
5. A permission answer (`answer`) is one `control_response` with the `can_use_tool`'s exact request id,
   written by the Claude link (`allow`/`deny`), which takes it only while the request is pending: answered
   once, never after Claude cancelled it (`control_cancel_request`) or settled it (its tool result), never
   for an id Claude did not ask. The body is exactly one of the dialog's two choices: allow with the
   request's own input as `updatedInput`, or deny with a message; anything else (a widening
   `updatedPermissions`, another input) is not written. Its answer is the tool use's result (claude-rpc).
6. When the link expects a session (`claude.expected_session_id`: the lifecycle's load check sets the claimed
   one), an `init` naming another is claude-rpc's `SessionMismatch`: the wire reports it to the core as its
   poison (`Poisoned`: the transport fenced, the binding uncertain) and writes no prompt or answer again (K8's
   first-turn half: the binary names its session only in the `init` at each turn's start).
7. The drift check's list (`engines/claude/_drift`): the wire notes, in read order, each entry the engine says
   it wrote to the transcript: the message a `command_lifecycle` `started` frame names (its `command_uuid`: the
   binary writes it as a `user` entry with that uuid) and each `assistant` and `user` record of the main
   thread (`parent_tool_use_id` null; a subagent's go to its own file) by its `uuid`, with the session the
   record names. `entries` asks for them with a second `initialize` (a barrier: its answer is read after every
   record the engine wrote before it; `session_state` says whether a turn runs) and, when it is answered,
   attaches to the command what was noted after `since` (everything when `since` is not one of them: the
   baseline's leaf).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mosaic.claude_rpc import ClaudeLinkCore, ClaudeRpcRefusal
from mosaic.claude_rpc import link as claude
from mosaic.claude_rpc.framing import LineDecoder, Undecodable
from mosaic.pi_rpc import Command, LinkCore
from mosaic.pi_rpc.link import (
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LinkEvent,
    LinkPoisoned,
    NotEvidence,
    OutcomeKnown,
    OutcomeUnknown,
    Poisoned,
    PromptNotAcknowledged,
    PromptStateEvidence,
    ProtocolViolation,
    TruncatedOutput,
)

__all__ = ["ClaudeCommand", "ClaudeWire"]


@dataclass(eq=False)
class ClaudeCommand(Command):
    """A line of the Claude link's, as the core's `Command` (rule 1)."""

    out: claude.Outgoing | None = None
    # An `entries` request (rule 7): the uuid it asks after, and the entries noted after it once answered.
    since: str | None = None
    entries: tuple[Mapping[str, Any], ...] | None = None

    @property
    def succeeded(self) -> bool:
        """Acknowledged and accepted: a user message `queued` or `started` by its first lifecycle frame, a
        control request answered `success` (what `Command.succeeded` means on Pi's wire)."""
        response = self.response
        if response is None:
            return False
        if response.get("type") == "command_lifecycle":
            return response.get("state") in ("queued", "started")
        body = response.get("response")
        return isinstance(body, Mapping) and body.get("subtype") == "success"


class ClaudeWire(LinkCore):
    """The seam's `Wire` over a `ClaudeLinkCore` (rules 1-4); `claude` is that core."""

    def __init__(self, *, default_bound: float | None, max_record_bytes: int, uuids: Callable[[], str]) -> None:
        super().__init__(default_bound=default_bound, max_record_bytes=max_record_bytes)  # its state stays unused
        self.claude = ClaudeLinkCore(default_bound=default_bound, max_line_bytes=max_record_bytes)
        self._uuids = uuids
        self._lines = LineDecoder(max_line_bytes=max_record_bytes)
        self._index = 0
        self._commands: dict[int, ClaudeCommand] = {}
        self._prompt: ClaudeCommand | None = None
        self._aborts: set[int] = set()  # seqs of abort interrupts (rule 3)
        self._held: list[ClaudeCommand] = []
        self._turn = False
        self._mismatch: str | None = None  # an init named another session than the expected one (rule 6)
        self._told: list[Mapping[str, Any]] = []  # rule 7, in read order
        self._told_at: dict[str, int] = {}
        self._asks: dict[int, str | None] = {}  # seqs of `entries` requests and their `since`

    # -- state ------------------------------------------------------------------------------------------

    @property
    def poisoned(self) -> str | None:
        return self.claude.poisoned or self._mismatch

    @property
    def unreadable(self) -> None:
        return None  # a line Claude's decoder cannot take is a protocol violation that poisons (claude-rpc)

    @property
    def in_flight(self) -> tuple[Command, ...]:
        return tuple(self._command(out) for out in self.claude.in_flight)

    @property
    def output_closed(self) -> bool:
        return self.claude.output_closed

    @property
    def records_read(self) -> int:
        return self.claude.records_read

    @property
    def open_prompt(self) -> Command | None:
        prompt = self._prompt
        return prompt if prompt is not None and prompt.outcome in _IN_FLIGHT else None

    def can_send_prompt(self) -> bool:
        return self.poisoned is None and self.open_prompt is None

    # -- sending (rule 4) -------------------------------------------------------------------------------

    def send(self, command: Any, *, now: float, bound: Any = None) -> Command:
        raise ValueError("Claude's wire sends only user messages and interrupts (send_prompt, interrupt)")

    def send_ui_response(self, dialog_id: str, answer: Any, *, now: float, bound: Any = None) -> Command:
        raise ValueError("Claude has no extension dialogs: its permission requests are answered by id")

    def send_prompt(self, message: str, *, now: float, bound: Any = None) -> Command:
        if self.poisoned is not None:
            raise LinkPoisoned(self.poisoned)
        if self.open_prompt is not None:
            raise PromptNotAcknowledged(f"user message {self.open_prompt.id} has no lifecycle frame yet")
        out = self.claude.send_user(message, uuid=self._uuids(), now=now,
                                    **({} if bound is None else {"bound": bound}))
        self._prompt = self._command(out)
        return self._prompt

    def initialize(self, *, now: float, bound: float | None) -> Command:
        """The `initialize` control request (the first line a client writes; its answer lists the commands
        and the session state). The core never sends it; the lifecycle does, before admission opens."""
        return self._command(self.claude.send_initialize(now=now, bound=bound))

    def entries(self, since: str | None, *, now: float, bound: float | None) -> Command:
        """Rule 7: a second `initialize`; once answered, the command carries the entries noted after `since`."""
        out = self.claude.send_initialize(now=now, bound=bound)
        self._asks[out.seq] = since
        command = self._command(out)
        command.since = since
        return command

    def told(self, since: str | None) -> tuple[Mapping[str, Any], ...]:
        """The entries noted after `since` (all of them when it is None or not one of them)."""
        at = self._told_at.get(since) if since is not None else None
        return tuple(self._told[0 if at is None else at + 1:])

    def _note(self, record: Mapping[str, Any]) -> None:
        kind = record.get("type")
        uuid: Any = None
        if kind == "command_lifecycle" and record.get("state") == "started":
            uuid, kind = record.get("command_uuid"), "user"
        elif kind in ("assistant", "user") and record.get("parent_tool_use_id") is None:
            uuid = record.get("uuid")
        if isinstance(uuid, str) and uuid not in self._told_at:
            self._told_at[uuid] = len(self._told)
            self._told.append({"uuid": uuid, "type": kind, "sessionId": record.get("session_id")})

    def interrupt(self, *, now: float, bound: float | None, abort: bool) -> Command:
        """An `interrupt` with `cancel_queued` (the R3-1 receipt); `abort`: its answer is held while a turn
        runs (rule 3)."""
        out = self.claude.send_interrupt(cancel_queued=True, now=now, bound=bound)
        if abort:
            self._aborts.add(out.seq)
        return self._command(out)

    def answer(self, request_id: str, body: Mapping[str, Any], *, now: float) -> Command | None:
        """The answer `body` to the permission request `request_id` (rule 5); None when it is not written: the
        request is not pending (the link's refusal), the body is not allow-once or deny, or the pipe is
        poisoned."""
        if self.poisoned is not None:
            return None
        behavior = body.get("behavior")
        out: claude.Outgoing | ClaudeRpcRefusal
        if behavior == "allow" and set(body) == {"behavior", "updatedInput"}:
            request = self.claude.permission(request_id)
            if request is None or body["updatedInput"] != request.input:
                return None  # only the request's own input is allowed (the link sends it back unchanged)
            out = self.claude.allow(request_id, now=now)
        elif behavior == "deny" and set(body) == {"behavior", "message"} and isinstance(body["message"], str) \
                and body["message"]:
            out = self.claude.deny(request_id, body["message"], now=now)
        else:
            return None
        return None if isinstance(out, ClaudeRpcRefusal) else self._command(out)

    def prompt_state(self, prompt: Command, state: Command) -> PromptStateEvidence:
        raise NotEvidence("Claude has no probe: its run's events are the evidence")

    # -- bytes and time (the shell's side) --------------------------------------------------------------

    def next_write(self) -> Command | None:
        out = self.claude.next_write()
        return None if out is None else self._command(out)

    def write_done(self, command: Command, *, accepted: int, error: BaseException | None,
                   now: float) -> list[LinkEvent]:
        assert isinstance(command, ClaudeCommand) and command.out is not None, command
        return self._translate(self.claude.write_done(command.out, accepted=accepted, error=error, now=now), [])

    def feed(self, data: bytes, *, now: float) -> list[LinkEvent]:
        records = [r for r in self._lines.feed(data) if not isinstance(r, Undecodable)] \
            if not self.claude.output_closed else []
        return self._translate(self.claude.feed(data, now=now), records)

    def output_ended(self, *, now: float) -> list[LinkEvent]:
        return self._translate(self.claude.output_ended(now=now), [])

    def next_deadline(self) -> float | None:
        return self.claude.next_deadline()

    def tick(self, *, now: float) -> list[LinkEvent]:
        return self._translate(self.claude.tick(now=now), [])

    # -- translation (rules 1-3) ------------------------------------------------------------------------

    def _command(self, out: claude.Outgoing) -> ClaudeCommand:
        cmd = self._commands.get(out.seq)
        if cmd is None:
            cmd = ClaudeCommand(seq=out.seq, id=out.key, type=out.subtype, record=out.record, data=out.data,
                                queued_at=out.queued_at, bound=out.bound, read_count_at_send=out.read_count_at_send,
                                out=out)
            self._commands[out.seq] = cmd
        cmd.outcome = CommandOutcome(out.outcome.value)
        cmd.unknown_reason = out.unknown_reason
        cmd.accepted = out.accepted
        cmd.written_at = out.written_at
        if out.ack is not None and cmd.response is None:
            cmd.response, cmd.response_index = out.ack, out.ack_index
        if cmd.outcome not in _IN_FLIGHT:
            del self._commands[out.seq]  # settled: the event carrying it is the last the core hears of it
        return cmd

    def _translate(self, events: Sequence[claude.LinkEvent], records: list[dict[str, Any]]) -> list[LinkEvent]:
        first = self._index
        self._index += len(records)
        done = first
        result: list[LinkEvent] = []

        def records_to(index: int) -> None:
            nonlocal done
            while done <= index and done < first + len(records):
                record = records[done - first]
                kind = record.get("type")
                self._note(record)
                if kind != "control_response":
                    result.append(EngineEvent(done, record))
                if kind == "system" and record.get("subtype") == "init":
                    self._turn = True
                elif kind == "result":
                    self._turn = False
                    result.extend(OutcomeKnown(held) for held in self._held)
                    self._held.clear()
                done += 1

        for event in events:
            index = getattr(event, "index", None)
            if isinstance(index, int):
                records_to(index)
            if isinstance(event, claude.Written):
                result.append(CommandWritten(self._command(event.out)))
            elif isinstance(event, claude.Acknowledged):
                cmd = self._command(event.out)
                if event.out.seq in self._asks:
                    cmd.entries = self.told(self._asks.pop(event.out.seq))
                if event.out.seq in self._aborts and self._turn:
                    self._held.append(cmd)
                else:
                    result.append(OutcomeKnown(cmd))
            elif isinstance(event, claude.OutcomeUnknown):
                result.append(OutcomeUnknown(self._command(event.out)))
            elif isinstance(event, claude.Poisoned):
                result.append(Poisoned(event.reason))
            elif isinstance(event, claude.ProtocolViolation):
                result.append(ProtocolViolation(event.index, f"{event.reason}: {event.detail}", event.record, None))
            elif isinstance(event, claude.SessionMismatch):
                # K8's first-turn half (rule 6): the engine runs another session than the claimed one. Nothing
                # is written to it again; the binding goes uncertain, force stop is the way on.
                self._mismatch = (f"K8: the engine's init names session {event.found!r}, not the claimed "
                                  f"{event.expected} (the load check's first-turn half)")
                result.append(Poisoned(self._mismatch))
            elif isinstance(event, claude.TruncatedOutput):
                result.append(TruncatedOutput("?" * event.size))  # one byte a byte: its size is what the core counts
        records_to(first + len(records))
        return result


_IN_FLIGHT = frozenset({CommandOutcome.QUEUED, CommandOutcome.WRITING, CommandOutcome.WRITTEN})
