"""The fake Claude engine's behaviour (asyncio): what the pinned binary does with stream-json, for the flows
the controller needs, each modelled on a committed recording (``fixtures/claude-2.1.283/recordings/sealed-*``):

* **stdin** is read line by line in order; a line that is not JSON ends the input with exit 1 (the binary:
  "Error parsing streaming input line"). ``initialize`` answers the 18 keys; ``set_permission_mode`` answers
  ``{"mode"}`` then a ``system``/``status``; any other subtype an error; an answer for an id never asked is
  ignored; a user message with a uuid gets ``command_lifecycle`` ``queued`` and joins the command queue.
* **turns**: each queued command runs as a turn: ``started``, ``system``/``init``, the model request to the
  scripted server (HTTP, so the server's log is the real one's), one ``assistant`` per content block (with
  ``stream_event`` lines and a ``requesting`` status under ``--include-partial-messages``), a Bash tool use
  asks ``can_use_tool`` unless read-only, the answer runs the command for real or denies it, the tool result
  goes back to the model; the ``result``; then ``completed`` (or ``cancelled`` for an interrupted turn).
  A command queued while a tool call is in flight is folded into the turn's next model request
  (``started`` with no init of its own, ``completed`` before the result).
* **interrupt**: with ``cancel_queued`` every uuid-stamped queued command is cancelled (``cancelled``
  frames, listed) and uuid-less ones dropped unlisted; without it they stay and are listed ``still_queued``.
  A pending permission gets ``control_cancel_request`` before the receipt; the running stream is cut; the
  turn ends ``error_during_execution`` (the partial text ``aborted``, ``[Request interrupted by user]``; or
  for a tool the rejection and ``[Request interrupted by user for tool use]``). An allow read in the same
  chunk as the interrupt is overtaken: the tool does not run.
* **EOF**: pending permissions fail ("Tool permission stream closed"), the running turn and the queue run
  to their end, and the exit status is 1 when the last result was an error, else 0.
* **launch**: ``--session-id`` of a session with a transcript exits 1 ("Session ID ... is already in use");
  ``--resume`` of one without writes one error result and exits 1 ("No conversation found ...").

Hold points (:mod:`mosaic.claude_rpc.testing.fake_control`) stop it at an exact step.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mosaic.claude_rpc.testing import _fake_wire as wire
from mosaic.claude_rpc.testing._fake_model import ModelError, Stream, probe, request_body
from mosaic.claude_rpc.testing._fake_transcript import Transcript, find
from mosaic.claude_rpc.testing.recordings import slug

JsonObject = dict[str, Any]


class Control:
    """The fake's end of the control channel: armed hold points and their releases."""

    def __init__(self) -> None:
        self._counts: collections.Counter[str] = collections.Counter()
        self._released: dict[str, asyncio.Event] = {}
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None  # referenced: the loop keeps tasks only weakly

    async def connect(self, path: str) -> None:
        reader, self._writer = await asyncio.open_unix_connection(path)
        self._task = asyncio.get_running_loop().create_task(self._read(reader))

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            msg = json.loads(line)
            if "hold" in msg:
                self._counts[msg["hold"]] += int(msg.get("count", 1))
                self._send({"ok": msg["hold"]})
            elif "release" in msg:
                self._released.setdefault(msg["release"], asyncio.Event()).set()

    def _send(self, obj: JsonObject) -> None:
        if self._writer is not None:
            self._writer.write(json.dumps(obj).encode() + b"\n")

    async def point(self, name: str, detail: str = "") -> None:
        if self._counts[name] <= 0:
            return
        self._counts[name] -= 1
        event = self._released.setdefault(name, asyncio.Event())
        event.clear()
        self._send({"held": name, "detail": detail})
        await event.wait()


@dataclass
class Command:
    content: Any
    uuid: str | None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        texts = [b.get("text", "") for b in self.content if isinstance(b, dict) and b.get("type") == "text"]
        return texts[-1] if texts else ""


@dataclass
class Turn:
    command: Command
    folded: list[Command] = field(default_factory=list)
    aborted: bool = False
    stream: Stream | None = None
    pending: str | None = None  # the request id of the permission it waits on
    requests: int = 0


@dataclass
class Options:
    session: str
    resume: bool
    partial: bool
    cwd: str
    config_dir: str
    tmpdir: str
    base_url: str | None
    api_key: str | None


class FakeClaude:
    def __init__(self, options: Options, control: Control) -> None:
        self.o = options
        self.ctl = control
        self.session = options.session
        self.mode = "default"
        self.queue: collections.deque[Command] = collections.deque()
        self.wake = asyncio.Event()
        self.turn: Turn | None = None
        self.answers: dict[str, asyncio.Future[Any]] = {}
        self.history: list[JsonObject] = []
        self.eof = False
        self.bad_input = False
        self.last_error = False
        self.transcript = Transcript(options.config_dir, options.cwd, options.session)

    # -- output ------------------------------------------------------------------------------------------

    async def say(self, record: JsonObject) -> None:
        """Emit a user message of the conversation and write it to the transcript."""
        self.transcript.entry("user", record["message"], entry_uuid=str(record["uuid"]))
        await self.emit(record)

    async def emit(self, record: Mapping[str, Any]) -> None:
        kind = str(record.get("type"))
        sub = record.get("subtype")
        await self.ctl.point("stdout", f"{kind}/{sub}" if sub else kind)
        data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]

    # -- stdin -------------------------------------------------------------------------------------------

    async def read_stdin(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if not line:
                break
            text = line.decode("utf-8", "replace").strip()
            if not text:
                continue
            try:
                msg = json.loads(text)
            except ValueError:
                kind = text.split('"type":"', 1)[1].split('"', 1)[0] if '"type":"' in text else "unknown"
                sys.stderr.write(f"Error parsing streaming input line (type={kind}, {len(text)} chars): SyntaxError\n")
                self.bad_input = True
                break
            await self.on_line(msg)
        self.eof = True
        for rid, future in list(self.answers.items()):
            if not future.done():
                future.set_result({"eof": True})
            del self.answers[rid]
        self.wake.set()

    async def on_line(self, msg: JsonObject) -> None:
        kind = msg.get("type")
        if kind == "user":
            cmd = Command(msg.get("message", {}).get("content"), msg.get("uuid") if isinstance(msg.get("uuid"), str) else None)
            if cmd.uuid is not None:
                await self.emit(wire.lifecycle(cmd.uuid, "queued", self.session))
            self.queue.append(cmd)
            self.wake.set()
        elif kind == "control_request":
            await self.on_control(str(msg.get("request_id")), msg.get("request") or {})
        elif kind == "control_response":
            response = msg.get("response") or {}
            future = self.answers.pop(str(response.get("request_id")), None)
            if future is not None and not future.done():
                future.set_result(response.get("response") or {})

    async def on_control(self, rid: str, request: Mapping[str, Any]) -> None:
        subtype = request.get("subtype")
        if subtype == "initialize":
            state = "requires_action" if self.answers else ("running" if self.turn else "idle")
            await self.emit(wire.control_success(rid, wire.initialize_answer(mode=self.mode, session_state=state,
                                                                             tmpdir=self.o.tmpdir)))
        elif subtype == "interrupt":
            await self.on_interrupt(rid, request.get("cancel_queued") is True)
        elif subtype == "set_permission_mode":
            mode = request.get("mode")
            if mode not in wire.PERMISSION_MODES:
                await self.emit(wire.control_error(rid, "Cannot set permission mode: must be one of "
                                                   + ", ".join(wire.PERMISSION_MODES)))
                return
            self.mode = str(mode)
            await self.emit(wire.control_success(rid, {"mode": mode}))
            await self.emit(wire.status(self.session, status=None, permissionMode=mode))
        else:
            await self.emit(wire.control_error(rid, f"Unsupported control request subtype: {subtype}"))

    async def on_interrupt(self, rid: str, cancel_queued: bool) -> None:
        cancelled: list[str] = []
        if cancel_queued:
            for cmd in list(self.queue):
                if cmd.uuid is not None:
                    await self.emit(wire.lifecycle(cmd.uuid, "cancelled", self.session))
                    cancelled.append(cmd.uuid)
            self.queue.clear()
        still = [] if cancel_queued else [c.uuid for c in self.queue if c.uuid is not None]
        turn = self.turn
        if turn is not None:
            turn.aborted = True
            if turn.pending is not None and turn.pending in self.answers:
                await self.emit({"type": "control_cancel_request", "request_id": turn.pending})
                future = self.answers.pop(turn.pending)
                if not future.done():
                    future.set_result({"cancelled": True})
            if turn.stream is not None:
                turn.stream.close()
        receipt: JsonObject = {"still_queued": still}
        if cancel_queued:
            receipt["cancelled"] = cancelled
        await self.emit(wire.control_success(rid, receipt))

    # -- turns -------------------------------------------------------------------------------------------

    async def run(self) -> int:
        while True:
            if not self.queue:
                if self.eof:
                    break
                self.wake.clear()
                await self.wake.wait()
                continue
            cmd = self.queue.popleft()
            if cmd.uuid is not None:
                await self.emit(wire.lifecycle(cmd.uuid, "started", self.session))
            await self.ctl.point("turn-start", cmd.uuid or "")
            await self.emit(wire.init_message(session=self.session, cwd=self.o.cwd, mode=self.mode,
                                              config_dir=self.o.config_dir, tmpdir=self.o.tmpdir,
                                              slug=slug(os.path.realpath(self.o.cwd))))
            turn = Turn(cmd)
            self.turn = turn
            final = await self.run_turn(turn)
            await self.ctl.point("result", str(final["subtype"]))
            await self.emit(final)
            self.turn = None
            self.last_error = bool(final["is_error"])
            self.transcript.last_prompt(cmd.text)
            if cmd.uuid is not None:
                state = "cancelled" if turn.aborted else "completed"
                await self.emit(wire.lifecycle(cmd.uuid, state, self.session))
        return 1 if self.last_error or self.bad_input else 0

    def _result(self, turn: Turn, *, ok: bool, stop: str | None, extra: int, terminal: str, text: str | None = None,
                denials: list[JsonObject] | None = None) -> JsonObject:
        return wire.result(subtype="success" if ok else "error_during_execution", is_error=not ok, stop_reason=stop,
                           num_turns=turn.requests + extra, terminal=terminal, session=self.session, text=text,
                           prompt=turn.command.uuid, denials=denials or [])

    async def run_turn(self, turn: Turn) -> JsonObject:
        cmd = turn.command
        self.history.append({"role": "user", "content": cmd.content})
        self.transcript.close_interrupted()
        self.transcript.entry("user", {"role": "user", "content": cmd.content}, entry_uuid=cmd.uuid)
        system: list[str] = []
        denials: list[JsonObject] = []
        while True:
            turn.requests += 1
            message, blocks, partial = await self.ask_model(turn, system)
            if turn.aborted:
                if partial is not None:  # the binary writes the cut reply too, then the interruption note
                    entry = self.transcript.entry("assistant", {"role": "assistant", "content": [partial]})
                    await self.emit(wire.assistant(message, partial, session=self.session, prompt=cmd.uuid,
                                                   aborted=True, uuid=entry))
                await self.say(wire.user_text(wire.INTERRUPTED, session=self.session))
                return self._result(turn, ok=False, stop=None, extra=1, terminal="aborted_streaming")
            self.history.append({"role": "assistant", "content": blocks})
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            if not uses:
                for folded in turn.folded:
                    if folded.uuid is not None:
                        await self.emit(wire.lifecycle(folded.uuid, "completed", self.session))
                texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
                return self._result(turn, ok=True, stop="end_turn", extra=0, terminal="completed",
                                    text=texts[-1] if texts else "", denials=denials)
            results: list[JsonObject] = []
            for use in uses:
                outcome = await self.use_tool(turn, use, denials)
                if outcome is None:  # interrupted: the tool use is rejected
                    await self.say(wire.tool_result(str(use.get("id")), wire.REJECTED, is_error=True,
                                                     session=self.session, result="User rejected tool use",
                                                     meta="user-rejected"))
                    await self.say(wire.user_text(wire.INTERRUPTED_FOR_TOOL, session=self.session))
                    return self._result(turn, ok=False, stop="tool_use", extra=2, terminal="aborted_tools",
                                        denials=denials)
                results.append(outcome)
            self.history.append({"role": "user", "content": results})
            system = await self.fold(turn)

    async def fold(self, turn: Turn) -> list[str]:
        """Commands queued during the tool call join the next request (the binary's mid-turn fold)."""
        notes: list[str] = []
        while self.queue:
            cmd = self.queue.popleft()
            if cmd.uuid is not None:
                await self.emit(wire.lifecycle(cmd.uuid, "started", self.session))
            turn.folded.append(cmd)
            notes.append(wire.FOLD_NOTE.format(text=cmd.text))
        return notes

    async def ask_model(self, turn: Turn, system: list[str]) -> tuple[JsonObject, list[JsonObject], JsonObject | None]:
        """One streamed model request: its message, its complete blocks, and the block cut short by an
        interrupt (``None`` when none was)."""
        if self.o.base_url is None:
            raise ModelError("ANTHROPIC_BASE_URL is not set: the fake engine has no model")
        stream = Stream(self.o.base_url, self.o.api_key, request_body(system, self.history))
        turn.stream = stream
        if self.o.partial:
            await self.emit(wire.status(self.session, status="requesting"))
        message: JsonObject = {}
        blocks: list[JsonObject] = []
        current: JsonObject | None = None
        raw_json = ""
        prompt = turn.command.uuid if turn.requests == 1 else None
        try:
            async for event, data in stream.events():
                await self.ctl.point("model-chunk", event)
                if turn.aborted:
                    break
                if event == "message_start":
                    message = dict(data.get("message") or {})
                elif event == "content_block_start":
                    current, raw_json = dict(data.get("content_block") or {}), ""
                elif event == "content_block_delta" and current is not None:
                    delta = data.get("delta") or {}
                    if delta.get("type") == "text_delta":
                        current["text"] = str(current.get("text", "")) + str(delta.get("text", ""))
                    elif delta.get("type") == "input_json_delta":
                        raw_json += str(delta.get("partial_json", ""))
                elif event == "content_block_stop" and current is not None:
                    if current.get("type") == "tool_use":
                        current["input"] = json.loads(raw_json or "{}")
                    blocks.append(current)
                    entry = self.transcript.entry("assistant", {"role": "assistant", "content": [current]})
                    await self.emit(wire.assistant(message, current, session=self.session, prompt=prompt, uuid=entry))
                    current = None
                if self.o.partial:
                    await self.emit({"type": "stream_event", "event": data, "session_id": self.session,
                                     "parent_tool_use_id": None, "uuid": wire.new_uuid()})
        except (OSError, asyncio.IncompleteReadError, ModelError):
            if not turn.aborted:
                raise
        finally:
            stream.close()
            turn.stream = None
        return message, blocks, current

    async def use_tool(self, turn: Turn, use: Mapping[str, Any], denials: list[JsonObject]) -> JsonObject | None:
        """Ask, then run or deny one Bash tool use; ``None`` when the turn was interrupted."""
        tool_id = str(use.get("id"))
        command = str((use.get("input") or {}).get("command", ""))
        if not (command.split() and command.split()[0] in wire.READ_ONLY):
            rid = wire.new_uuid()
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            await self.ctl.point("permission", tool_id)
            if turn.aborted:  # an interrupt landed before the request was written (a hold point's race only)
                return None
            if self.eof:
                future.set_result({"eof": True})
            else:
                self.answers[rid] = future
                turn.pending = rid
                await self.emit(wire.can_use_tool(rid, use, cwd=self.o.cwd))
            answer = await future
            turn.pending = None
            await asyncio.sleep(0)  # an interrupt read in the same chunk as the answer overtakes it
            if answer.get("cancelled") or turn.aborted:
                denials.append({"tool_name": use.get("name"), "tool_use_id": tool_id, "tool_input": use.get("input")})
                return None
            if answer.get("eof"):
                denials.append({"tool_name": use.get("name"), "tool_use_id": tool_id, "tool_input": use.get("input")})
                return await self.tool_error(tool_id, wire.STREAM_CLOSED, f"Error: {wire.STREAM_CLOSED}", "permission-rule")
            if answer.get("behavior") != "allow":
                denials.append({"tool_name": use.get("name"), "tool_use_id": tool_id, "tool_input": use.get("input")})
                message = str(answer.get("message", ""))
                return await self.tool_error(tool_id, message, f"Error: {message}", None)
            command = str((answer.get("updatedInput") or use.get("input") or {}).get("command", command))
        await self.ctl.point("tool", command)
        if turn.aborted:
            return None
        proc = await asyncio.create_subprocess_exec("/bin/bash", "-c", command, cwd=self.o.cwd,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL)
        out, err = await proc.communicate()
        text = out.decode(errors="replace").rstrip("\n")
        record = wire.tool_result(tool_id, text or wire.NO_OUTPUT, is_error=proc.returncode != 0, session=self.session,
                                  result={"stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace"),
                                          "interrupted": False, "isImage": False, "noOutputExpected": not text})
        await self.say(record)
        return dict(record["message"]["content"][0])

    async def tool_error(self, tool_id: str, content: str, result: str, meta: str | None) -> JsonObject:
        """A tool result the engine makes without running the tool (a deny, a failed permission request); the
        binary puts ``type`` first in these blocks."""
        record = wire.tool_result(tool_id, content, is_error=True, session=self.session, result=result, meta=meta)
        record["message"]["content"][0] = {"type": "tool_result", "content": content, "is_error": True,
                                           "tool_use_id": tool_id}
        await self.say(record)
        return dict(record["message"]["content"][0])


async def serve(options: Options, control_path: str | None) -> int:
    """Run the fake engine until its input ends and its queue is done; the exit status."""
    control = Control()
    if control_path is not None:
        await control.connect(control_path)
    if options.resume and find(options.config_dir, options.session) is None:
        await FakeClaude(options, control).emit(wire.resume_failure())
        sys.stderr.write(f"No conversation found with session ID: {options.session}\n")
        return 1
    if not options.resume and find(options.config_dir, options.session) is not None:
        sys.stderr.write(f"Error: Session ID {options.session} is already in use.\n")
        return 1
    engine = FakeClaude(options, control)
    loop = asyncio.get_running_loop()
    # Every task is referenced until it is awaited: the loop holds tasks only weakly.
    hello = loop.create_task(probe(options.base_url)) if options.base_url is not None else None
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    stdin = loop.create_task(engine.read_stdin(reader))
    code = await engine.run()
    stdin.cancel()
    for task in (stdin, hello):
        if task is not None:
            try:
                await asyncio.wait_for(task, 5.0)
            except (asyncio.CancelledError, TimeoutError, OSError):
                pass
    return code
