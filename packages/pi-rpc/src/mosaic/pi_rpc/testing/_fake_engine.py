"""The fake engine: pinned Pi 0.85.1's RPC mode, in Python, with named hold points.

It models the behaviour FACTS.md lists under "What a Python fake engine must mimic" (numbers below) by
following the structure of the pinned code, read from the installed package, so that the same inputs give
the same records in the same order (the conformance suite holds it to the real binary):

1. Framing: writes ``JSON.stringify(value) + "\\n"`` (:func:`~mosaic.pi_rpc._framing.js_json_dumps`), reads
   LF-split lines with one CR stripped, UTF-8 with replacement; bad JSON gets V8's message
   (:mod:`._jsjson`) in a ``parse`` response with no id.
2. Concurrent dispatch: every input line starts its own task at once (rpc-mode.js 646-648); a ``get_state``
   read in the same chunk as a prompt answers before the prompt's ack.
3. The ack is written from ``preflightResult(true)``; ``isStreaming`` is set in the same step, and the ack
   bytes go out later through the stdout writer (output-guard.js 67-75).
4. The preflight window: preflight awaits (the ``preflight`` hold point, then ticks), so a second prompt
   read meanwhile passes the streaming check, is acked, and its run throws "Agent is already processing a
   prompt..." (agent.js 226-229), which the RPC swallows; its ``finally`` emits a spurious
   ``agent_settled`` and clears ``isStreaming`` while the first run continues.
5. Refusal while streaming with the exact text; a registered ``/cmd`` (``/llama``) runs first, even mid-run.
6. The run event grammar of agent-loop.js, ``message_update`` without ``message``/``partial``.
7. ``agent_end`` before ``agent_settled``; several ``agent_end`` per settle (auto-retry, queued input).
8. Abort: ``stopReason: "aborted"``, ``errorMessage: "Request was aborted"``, persisted; the response
   after ``agent_settled``; queued steer/follow-up run after an abort unless cleared first.
9. Queues: ``queue_update`` before the steer/follow_up/clear_queue response; removal by text on the user
   ``message_start``; ``pendingMessageCount``.
10. Extension UI: ``notify`` from ``/llama``; dialogs only through the control channel's ``dialog`` op;
    unknown ``extension_ui_response`` ids are ignored without output.
11-12. get_state / get_entries / get_tree / get_messages shapes (:mod:`._fake_session` for the tree).
13. Persistence timing: entries are written synchronously when Pi writes them, before the event's stdout
    bytes (hold ``stdout`` to see the file ahead of stdout).
14-15. The startup append and the load side effects (:mod:`._fake_session`).
16. Lifecycle: stdin EOF flushes and exits 0; SIGTERM exits 143 without flushing; SIGHUP 129 after a
    flush; a missing header cwd or a file that is not a session exits 1 before any output.
17. Prefixes: only an index-0 ``/`` naming a registered command is special.
18. No entry ids on the stream.

The scripted "model" is the scenario table of :mod:`mosaic.pi_rpc.testing.model_server` (the same
``Scenario`` values, routed on the last user text), run in-process instead of over HTTP.

Known differences from the real binary are listed in the package README ("Fake engine: known limits").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mosaic.pi_rpc._framing import RecordDecoder, encode_record, js_json_dumps
from mosaic.pi_rpc.testing._fake_session import InvalidSession, SessionFile, ms_now
from mosaic.pi_rpc.testing._jsjson import JsonParseError, js_json_parse
from mosaic.pi_rpc.testing.model_server import (
    DEFAULT_SCENARIOS,
    HttpError,
    RecordedRequest,
    Scenario,
    StreamText,
    StreamToolCall,
)

__all__ = ["FakeOptions", "run_fake_engine"]

Json = dict[str, Any]

ALREADY_PROCESSING = ("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue "
                      "the message.")
AGENT_BUSY_PROMPT = ("Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait "
                     "for completion.")
REQUEST_ABORTED = "Request was aborted"

# get_commands under the seal (FACTS.md (b): the built-in inline llama.cpp extension).
LLAMA_COMMAND: Json = {
    "name": "llama",
    "description": "Manage llama.cpp router models",
    "source": "extension",
    "sourceInfo": {"path": "<inline:llama.cpp>", "source": "inline", "scope": "temporary", "origin": "top-level"},
}

# pi-agent-core agent.js 14-25: the model when none is configured.
DEFAULT_MODEL: Json = {
    "id": "unknown", "name": "unknown", "api": "unknown", "provider": "unknown", "baseUrl": "", "reasoning": False,
    "input": [], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}, "contextWindow": 0,
    "maxTokens": 0,
}


def _empty_usage() -> Json:
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


# ---------------------------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------------------------


@dataclass
class FakeOptions:
    """What the fake was started with: Pi's sealed arguments and the fake's own ``--fake-*`` options."""

    session: str
    model: str | None = None
    provider: str | None = None
    thinking: str | None = None
    control: str | None = None
    scenarios: tuple[Scenario, ...] = DEFAULT_SCENARIOS
    flags: set[str] = field(default_factory=set)
    argv: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------------
# Hold points and the control connection
# ---------------------------------------------------------------------------------------------------------


class Control:
    """The fake's end of the control channel (see :mod:`._fake_control`)."""

    def __init__(self, engine: FakePi) -> None:
        self.engine = engine
        self.armed: dict[str, int] = {}
        self.hits: dict[str, int] = {}
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self, path: str) -> None:
        reader, writer = await asyncio.open_unix_connection(path)
        self.writer = writer
        self.send({"event": "hello", "pid": os.getpid(), "argv": self.engine.options.argv})
        asyncio.get_running_loop().create_task(self._serve(reader))

    def send(self, obj: Json) -> None:
        if self.writer is not None:
            self.writer.write(json.dumps(obj).encode() + b"\n")

    async def hit(self, point: str, abort: asyncio.Event | None = None, **detail: Any) -> None:
        """Stop here if ``point`` is armed, until the test releases it (or ``abort`` is set)."""
        count = self.armed.get(point, 0)
        if count == 0:
            return
        if count > 0:
            self.armed[point] = count - 1
        self.hits[point] = self.hits.get(point, 0) + 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(point, deque()).append(fut)
        self.send({"event": "held", "point": point, "hit": self.hits[point], "detail": detail})
        if abort is None:
            await fut
            return
        aborter: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())
        waits: set[asyncio.Future[Any]] = {fut, aborter}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborter.cancel()
        if not fut.done():
            self.waiting[point].remove(fut)
            fut.cancel()
            self.send({"event": "unheld", "point": point, "reason": "aborted"})

    async def _serve(self, reader: asyncio.StreamReader) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            msg = json.loads(line)
            try:
                reply = await self.engine.control_op(msg)
                self.send({"req": msg.get("req"), "ok": True, **reply})
            except Exception as exc:  # a bad op is the test's bug: report it, keep serving
                self.send({"req": msg.get("req"), "error": f"{type(exc).__name__}: {exc}"})


# ---------------------------------------------------------------------------------------------------------
# stdout: Pi's writeRawStdout chain (output-guard.js 67-75)
# ---------------------------------------------------------------------------------------------------------


class Output:
    """Records are queued by ``write`` and written by a writer task, in order; ``drain`` waits for the
    queue to empty (``waitForRawStdoutBackpressure``). The hold point ``stdout`` stops the writer before
    each record (its detail names the record's type, and the message role for message events)."""

    def __init__(self, fd: int, control: Control) -> None:
        self.fd = fd
        self.control = control
        self.queue: deque[tuple[Json, bytes]] = deque()
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def write(self, obj: Json) -> None:
        self.queue.append((obj, encode_record(obj)))
        self.idle.clear()
        self.wake.set()

    async def drain(self) -> None:
        await self.idle.wait()

    def flush_now(self) -> None:
        """Write everything queued, synchronously (shutdown)."""
        while self.queue:
            self._write(self.queue.popleft()[1])

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BrokenPipeError:
                self.queue.clear()
                return
            view = view[n:]

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.queue:
                obj = self.queue[0][0]
                msg = obj.get("message")
                await self.control.hit("stdout", type=obj.get("type"), id=obj.get("id"),
                                       role=msg.get("role") if isinstance(msg, dict) else None)
                if not self.queue:
                    break
                self._write(self.queue.popleft()[1])
                await asyncio.sleep(0)
            self.idle.set()


# ---------------------------------------------------------------------------------------------------------
# The run machinery (pi-agent-core Agent + agent-loop, AgentSession)
# ---------------------------------------------------------------------------------------------------------


@dataclass
class ActiveRun:
    abort: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class FakePi:
    """The engine: session manager, agent state, the RPC command table and the control ops."""

    def __init__(self, options: FakeOptions, sm: SessionFile, agent_dir: str) -> None:
        self.options = options
        self.sm = sm
        self.agent_dir = agent_dir
        self.control = Control(self)
        self.out: Output | None = None
        # AgentSession
        self.run_active = False  # _isAgentRunActive: what get_state calls isStreaming
        self.steering: list[str] = []  # the tracked texts (queue_update, clear_queue)
        self.follow_up: list[str] = []
        self.idle_waiters: list[asyncio.Future[None]] = []
        self.last_assistant: Json | None = None
        self.retry_attempt = 0
        self.retry_abort: asyncio.Event | None = None
        self.pending_bash: list[Json] = []
        # Agent (pi-agent-core)
        self.messages: list[Json] = []
        self.active: ActiveRun | None = None
        self.steer_queue: list[Json] = []
        self.follow_queue: list[Json] = []
        self.model: Json = dict(DEFAULT_MODEL)
        self.has_model = False
        self.api_key: str | None = None
        self.thinking = "off"
        self.retry = {"enabled": True, "maxRetries": 3, "baseDelayMs": 2000}
        # scripted model
        self.request_index = 0
        self.seen: dict[tuple[str, str], int] = {}
        # control-channel scripting
        self.fail_preflight: list[str] = []
        self.throw_at_run_start: list[str] = []
        self.input_handlers: list[Json] = []
        self.pending_dialogs: dict[str, asyncio.Future[Json]] = {}

    # -- startup (sdk.js 80-83, 239-252) --------------------------------------------------------------

    def load_models(self) -> list[Json]:
        try:
            with open(os.path.join(self.agent_dir, "models.json"), "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            return []
        models: list[Json] = []
        for provider, spec in (doc.get("providers") or {}).items():
            if not isinstance(spec, dict):
                continue
            for m in spec.get("models") or []:
                if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                    continue
                models.append({
                    "id": m["id"], "name": m.get("name", m["id"]), "api": m.get("api", spec.get("api")),
                    "provider": provider, "baseUrl": m.get("baseUrl", spec.get("baseUrl")),
                    "reasoning": bool(m.get("reasoning", False)), "input": m.get("input", ["text"]),
                    "cost": m.get("cost", {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}),
                    "contextWindow": m.get("contextWindow", 128000), "maxTokens": m.get("maxTokens", 16384),
                    "_apiKey": spec.get("apiKey"),
                })
        return models

    def load_settings(self) -> None:
        try:
            with open(os.path.join(self.agent_dir, "settings.json"), "rb") as f:
                doc = json.loads(f.read())
        except (OSError, ValueError):
            return
        retry = doc.get("retry") if isinstance(doc, dict) else None
        if isinstance(retry, dict):
            for k in ("enabled", "maxRetries", "baseDelayMs"):
                if k in retry:
                    self.retry[k] = retry[k]

    def startup(self) -> None:
        models = self.load_models()
        self.load_settings()
        ctx_messages = self.sm.context_messages()
        has_existing = len(ctx_messages) > 0
        has_thinking = any(isinstance(e, dict) and e.get("type") == "thinking_level_change"
                           for e in (self.sm.branch() if self.sm.leaf_id is not None else []))
        chosen: Json | None = None
        if self.options.model is not None:
            for m in models:
                if m["id"] == self.options.model and self.options.provider in (None, m["provider"]):
                    chosen = m
                    break
        if chosen is None and has_existing:
            _, ctx_model = self.sm.context_settings()
            if ctx_model is not None:
                chosen = next((m for m in models if m["provider"] == ctx_model["provider"] and
                               m["id"] == ctx_model["modelId"] and m.get("_apiKey")), None)
        if chosen is None:
            chosen = next((m for m in models if m.get("_apiKey")), None)
        if chosen is not None:
            self.api_key = chosen.pop("_apiKey", None)
            self.model = chosen
            self.has_model = True
        level = self.options.thinking
        if level is None and has_existing:
            level = self.sm.context_settings()[0] if has_thinking else "medium"
        if level is None:
            level = "medium"
        # clampThinkingLevel: a model without reasoning supports only "off"; no model: "off".
        self.thinking = level if (self.has_model and self.model.get("reasoning")) else "off"
        if has_existing:
            self.messages = list(ctx_messages)
            if not has_thinking:
                self.sm.append_thinking_level_change(self.thinking)
        else:
            if self.has_model:
                self.sm.append_model_change(self.model["provider"], self.model["id"])
            self.sm.append_thinking_level_change(self.thinking)
        # Pi writes these into the agent dir at start (seed README "Findings against pinned Pi").
        for name in ("auth.json", "models-store.json"):
            path = os.path.join(self.agent_dir, name)
            if not os.path.exists(path):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write("{}")

    # -- output ---------------------------------------------------------------------------------------

    def output(self, obj: Json) -> None:
        assert self.out is not None
        self.out.write(obj)

    @staticmethod
    def success(cid: Any, command: str, data: Any = ..., ) -> Json:
        rec: Json = {"id": cid, "type": "response", "command": command, "success": True}
        if data is not ...:
            rec["data"] = data
        if cid is None:
            del rec["id"]
        return rec

    @staticmethod
    def error(cid: Any, command: Any, message: str) -> Json:
        rec: Json = {"id": cid, "type": "response", "command": command, "success": False, "error": message}
        if cid is None:
            del rec["id"]
        if command is None:
            del rec["command"]
        return rec

    def emit(self, event: Json) -> None:
        """``AgentSession._emit`` to the RPC listener (``toJsonEvent``)."""
        if event.get("type") == "message_update":
            ame = {k: v for k, v in event["assistantMessageEvent"].items() if k != "partial"}
            self.output({"type": "message_update", "usage": event["message"]["usage"], "assistantMessageEvent": ame})
        else:
            self.output(event)

    def emit_queue_update(self) -> None:
        self.emit({"type": "queue_update", "steering": list(self.steering), "followUp": list(self.follow_up)})

    @staticmethod
    async def tick(n: int = 1) -> None:
        for _ in range(n):
            await asyncio.sleep(0)

    # -- the agent event pipe (agent.js processEvents + AgentSession._handleAgentEvent) ---------------

    async def process(self, event: Json) -> None:
        t = event["type"]
        if t == "message_end":
            self.messages.append(event["message"])
        if self.active is None:
            raise RuntimeError("Agent listener invoked outside active run")
        await self.handle_agent_event(event)
        assert self.out is not None
        await self.out.drain()  # the backpressure listener (rpc-mode.js 271-273)

    async def handle_agent_event(self, event: Json) -> None:
        t = event["type"]
        if t == "message_start" and event["message"].get("role") == "user":
            text = _text_of(event["message"].get("content"))
            if text:
                if text in self.steering:
                    self.steering.remove(text)
                    self.emit_queue_update()
                elif text in self.follow_up:
                    self.follow_up.remove(text)
                    self.emit_queue_update()
        await self.tick()  # extension dispatch (agent-session.js 384)
        if t == "agent_end":
            self.emit({**event, "willRetry": self.will_retry(event)})
        else:
            self.emit(event)
        if t == "message_end":
            msg = event["message"]
            if msg.get("role") in ("user", "assistant", "toolResult"):
                self.sm.append_message(msg)
            if msg.get("role") == "assistant":
                self.last_assistant = msg
                if msg.get("stopReason") != "error" and self.retry_attempt > 0:
                    self.emit({"type": "auto_retry_end", "success": True, "attempt": self.retry_attempt})
                    self.retry_attempt = 0

    def retryable(self, msg: Json | None) -> bool:
        if msg is None or msg.get("stopReason") != "error":
            return False
        err = msg.get("errorMessage") or ""
        return err.startswith(("500", "502", "503", "504", "429")) or "overloaded" in err.lower()

    def will_retry(self, event: Json) -> bool:
        if not self.retry["enabled"] or self.retry_attempt >= self.retry["maxRetries"]:
            return False
        for msg in reversed(event.get("messages", [])):
            if msg.get("role") == "assistant":
                return self.retryable(msg)
        return False

    # -- AgentSession.prompt (agent-session.js 816-950) -------------------------------------------------

    async def prompt(self, text: Any, *, streaming_behavior: Any = None, source: str = "rpc",
                     preflight: Callable[[bool], None] | None = None) -> None:
        def result(ok: bool) -> None:
            if preflight is not None:
                preflight(ok)

        messages: list[Json] | None = None
        try:
            if not isinstance(text, str):
                what = "undefined" if text is None else type(text).__name__
                raise TypeError(f"Cannot read properties of {what} (reading 'startsWith')" if text is None
                                else "text.startsWith is not a function")
            if text.startswith("/") and source != "extension":
                if await self.try_extension_command(text):
                    result(True)
                    return
            current = text
            if self.input_handlers:
                await self.tick()  # emitInput is async
                action = self.input_action(current)
                if action is not None and action.get("action") == "handled":
                    result(True)
                    return
                if action is not None and action.get("action") == "transform":
                    current = str(action.get("text", current))
            if self.run_active:
                if not streaming_behavior:
                    raise RuntimeError(ALREADY_PROCESSING)
                if streaming_behavior == "followUp":
                    self.queue_follow_up(current)
                else:
                    self.queue_steer(current)
                result(True)
                return
            self.flush_pending_bash()
            if not self.has_model or not self.api_key:
                who = "the selected model" if self.model.get("provider") == "unknown" else self.model["provider"]
                raise RuntimeError(f"No API key found for {who}.\n\n{self.login_help()}")
            if any(m.get("role") == "assistant" for m in self.messages):
                # `await this._checkCompaction(lastAssistant, false)` (agent-session.js 893-896): with an
                # earlier reply the preflight takes more turns of the event loop, so a get_state read with
                # the prompt answers before the ack (FACTS.md Part 2 F); on a fresh session after it.
                await self.tick(2)
            messages = [{"role": "user", "content": [{"type": "text", "text": current}], "timestamp": ms_now()}]
            # emitBeforeAgentStart (agent-session.js 915): the preflight await. Hold it to keep the window open.
            await self.control.hit("preflight", text=current)
            await self.tick()
            if self.fail_preflight:
                raise RuntimeError(self.fail_preflight.pop(0))
        except Exception:
            result(False)
            raise
        result(True)
        await self.run_agent_prompt(messages)

    def login_help(self) -> str:
        docs = os.environ.get("MOSAIC_FAKE_PI_DOCS", "<pi>/docs")
        return (f"Use /login to log into a provider via OAuth or API key. See:\n  {docs}/providers.md\n"
                f"  {docs}/models.md")

    def input_action(self, text: str) -> Json | None:
        for h in self.input_handlers:
            match = h.get("match")
            if match is None or match in text:
                return h
        return None

    async def try_extension_command(self, text: str) -> bool:
        space = text.find(" ")
        name = text[1:] if space == -1 else text[1:space]
        if name != "llama":
            return False
        # llama/index.js 163-168: in RPC mode the command only notifies.
        self.output({"type": "extension_ui_request", "id": str(uuid.uuid4()), "method": "notify",
                     "message": "/llama is available in interactive mode", "notifyType": "warning"})
        await self.tick()
        return True

    def queue_steer(self, text: str) -> None:
        self.steering.append(text)
        self.emit_queue_update()
        self.steer_queue.append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms_now()})

    def queue_follow_up(self, text: str) -> None:
        self.follow_up.append(text)
        self.emit_queue_update()
        self.follow_queue.append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms_now()})

    def clear_queue(self) -> Json:
        data = {"steering": list(self.steering), "followUp": list(self.follow_up)}
        self.steering.clear()
        self.follow_up.clear()
        self.steer_queue.clear()
        self.follow_queue.clear()
        self.emit_queue_update()
        return data

    # -- _runAgentPrompt and the settle ---------------------------------------------------------------

    async def run_agent_prompt(self, messages: list[Json]) -> None:
        self.run_active = True
        try:
            await self.agent_prompt(messages)
            while await self.handle_post_agent_run():
                await self.agent_continue()
        finally:
            self.flush_pending_bash()
            await self.emit_agent_settled()

    async def emit_agent_settled(self) -> None:
        self.run_active = False
        try:
            await self.control.hit("settle")
            await self.tick()  # extension agent_settled handlers (agent-session.js 350)
            self.emit({"type": "agent_settled"})
        finally:
            if self.is_idle:
                waiters, self.idle_waiters = self.idle_waiters, []
                for w in waiters:
                    if not w.done():
                        w.set_result(None)

    @property
    def is_idle(self) -> bool:
        return not self.run_active

    async def wait_for_idle(self) -> None:
        if self.is_idle:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.idle_waiters.append(fut)
        await fut

    async def handle_post_agent_run(self) -> bool:
        msg, self.last_assistant = self.last_assistant, None
        if msg is None:
            return False
        if self.retryable(msg) and await self.prepare_retry(msg):
            return True
        if msg.get("stopReason") == "error" and self.retry_attempt > 0:
            self.emit({"type": "auto_retry_end", "success": False, "attempt": self.retry_attempt,
                       "finalError": msg.get("errorMessage")})
            self.retry_attempt = 0
        return bool(self.steer_queue or self.follow_queue)

    async def prepare_retry(self, msg: Json) -> bool:
        if not self.retry["enabled"]:
            return False
        self.retry_attempt += 1
        if self.retry_attempt > self.retry["maxRetries"]:
            self.retry_attempt -= 1
            return False
        delay = self.retry["baseDelayMs"] * 2 ** (self.retry_attempt - 1)
        self.emit({"type": "auto_retry_start", "attempt": self.retry_attempt, "maxAttempts": self.retry["maxRetries"],
                   "delayMs": delay, "errorMessage": msg.get("errorMessage") or "Unknown error"})
        if self.messages and self.messages[-1].get("role") == "assistant":
            self.messages = self.messages[:-1]
        self.retry_abort = asyncio.Event()
        try:
            await asyncio.wait_for(self.retry_abort.wait(), delay / 1000)
            attempt, self.retry_attempt = self.retry_attempt, 0
            self.emit({"type": "auto_retry_end", "success": False, "attempt": attempt, "finalError": "Retry cancelled"})
            return False
        except TimeoutError:
            return True
        finally:
            self.retry_abort = None

    def flush_pending_bash(self) -> None:
        pending, self.pending_bash = self.pending_bash, []
        for m in pending:
            self.messages.append(m)
            self.sm.append_message(m)

    # -- pi-agent-core Agent --------------------------------------------------------------------------

    async def agent_prompt(self, messages: list[Json]) -> None:
        if self.active is not None:
            raise RuntimeError(AGENT_BUSY_PROMPT)
        if self.throw_at_run_start:
            raise RuntimeError(self.throw_at_run_start.pop(0))
        await self.run_with_lifecycle(lambda run: self.run_agent_loop(messages, run))

    async def agent_continue(self) -> None:
        if self.active is not None:
            raise RuntimeError("Agent is already processing. Wait for completion before continuing.")
        if not self.messages:
            raise RuntimeError("No messages to continue from")
        if self.messages[-1].get("role") == "assistant":
            if self.steer_queue:
                first = [self.steer_queue.pop(0)]
                await self.run_with_lifecycle(lambda run: self.run_agent_loop(first, run, skip_steer_poll=True))
                return
            if self.follow_queue:
                first = [self.follow_queue.pop(0)]
                await self.run_with_lifecycle(lambda run: self.run_agent_loop(first, run))
                return
            raise RuntimeError("Cannot continue from message role: assistant")
        await self.run_with_lifecycle(lambda run: self.run_agent_loop([], run, continuation=True))

    async def run_with_lifecycle(self, body: Callable[[ActiveRun], Awaitable[None]]) -> None:
        if self.active is not None:
            raise RuntimeError("Agent is already processing.")
        run = ActiveRun()
        self.active = run
        try:
            try:
                await self.control.hit("run-start")
                await body(run)
            except Exception as exc:  # handleRunFailure (agent.js 300-316)
                failure = {"role": "assistant", "content": [{"type": "text", "text": ""}], "api": self.model["api"],
                           "provider": self.model["provider"], "model": self.model["id"], "usage": _empty_usage(),
                           "stopReason": "aborted" if run.abort.is_set() else "error", "errorMessage": str(exc),
                           "timestamp": ms_now()}
                await self.process({"type": "message_start", "message": failure})
                await self.process({"type": "message_end", "message": failure})
                await self.process({"type": "turn_end", "message": failure, "toolResults": []})
                await self.process({"type": "agent_end", "messages": [failure]})
        finally:
            self.active = None
            run.done.set()

    async def run_agent_loop(self, prompts: list[Json], run: ActiveRun, *, skip_steer_poll: bool = False,
                             continuation: bool = False) -> None:
        new_messages: list[Json] = list(prompts)
        context = list(self.messages) + list(prompts)
        await self.process({"type": "agent_start"})
        await self.process({"type": "turn_start"})
        for p in prompts:
            await self.process({"type": "message_start", "message": p})
            await self.process({"type": "message_end", "message": p})
        if prompts:
            await self.control.hit("user-message", text=_text_of(prompts[-1].get("content")))
        await self.run_loop(context, new_messages, run, skip_steer_poll=skip_steer_poll)

    def drain_steering(self) -> list[Json]:
        return [self.steer_queue.pop(0)] if self.steer_queue else []

    async def run_loop(self, context: list[Json], new_messages: list[Json], run: ActiveRun, *,
                       skip_steer_poll: bool) -> None:
        last_turn = False
        pending = [] if skip_steer_poll else self.drain_steering()
        while True:
            more_tools = True
            while more_tools or pending:
                if last_turn:
                    if not pending:
                        pending = self.drain_steering()
                    await self.process({"type": "turn_start"})
                for m in pending:
                    await self.process({"type": "message_start", "message": m})
                    await self.process({"type": "message_end", "message": m})
                    context.append(m)
                    new_messages.append(m)
                pending = []
                message = await self.stream_assistant(context, run)
                new_messages.append(message)
                if message["stopReason"] in ("error", "aborted"):
                    await self.process({"type": "turn_end", "message": message, "toolResults": []})
                    await self.process({"type": "agent_end", "messages": new_messages})
                    return
                calls = [c for c in message["content"] if c.get("type") == "toolCall"]
                results: list[Json] = []
                more_tools = False
                if calls:
                    results = await self.execute_tools(calls, run)
                    more_tools = True
                    for r in results:
                        context.append(r)
                        new_messages.append(r)
                await self.process({"type": "turn_end", "message": message, "toolResults": results})
                last_turn = True
                pending = self.drain_steering()
            follow = [self.follow_queue.pop(0)] if self.follow_queue else []
            if follow:
                pending = follow
                continue
            break
        await self.process({"type": "agent_end", "messages": new_messages})

    # -- the scripted model (one OpenAI-completions stream, openai-completions.js 168-530) ------------

    def _request(self, context: list[Json]) -> RecordedRequest:
        msgs: list[Json] = [{"role": "system", "content": "<system prompt>"}]
        for m in context:
            role = m.get("role")
            if role == "assistant" and m.get("stopReason") in ("error", "aborted"):
                continue  # transform-messages.js 153-160: dropped from later requests
            if role == "toolResult":
                msgs.append({"role": "tool", "content": _text_of(m.get("content"))})
            elif role in ("user", "assistant"):
                msgs.append({"role": role, "content": _text_of(m.get("content"))})
        self.request_index += 1
        return RecordedRequest(self.request_index, "POST", "/v1/chat/completions", {},
                               {"model": self.model["id"], "messages": msgs, "stream": True,
                                "stream_options": {"include_usage": True}})

    def _route(self, req: RecordedRequest) -> tuple[RecordedRequest, Scenario]:
        text = req.last_user_text
        scenario = next(s for s in self.options.scenarios if s.keyword in text)
        key = (scenario.name, text)
        occ = self.seen.get(key, 0)
        self.seen[key] = occ + 1
        return dataclasses.replace(req, scenario=scenario.name, occurrence=occ), scenario

    def _assistant(self) -> Json:
        return {"role": "assistant", "content": [], "api": self.model["api"], "provider": self.model["provider"],
                "model": self.model["id"], "usage": _empty_usage(), "stopReason": "pending", "timestamp": ms_now()}

    async def stream_assistant(self, context: list[Json], run: ActiveRun) -> Json:
        req, scenario = self._route(self._request(context))
        reply = scenario.respond(req)
        out = self._assistant()
        if isinstance(reply, HttpError):
            await self.tick()
            err = reply.body.get("error", reply.body) if isinstance(reply.body, dict) else reply.body
            out["stopReason"] = "error"
            out["errorMessage"] = f"{reply.status}: {js_json_dumps(err)}"
            context.append(out)
            await self.process({"type": "message_start", "message": dict(out)})
            await self.process({"type": "message_end", "message": out})
            return out
        if run.abort.is_set():
            out["stopReason"] = "aborted"
            out["errorMessage"] = REQUEST_ABORTED
            context.append(out)
            await self.process({"type": "message_start", "message": dict(out)})
            await self.process({"type": "message_end", "message": out})
            return out
        out["responseId"] = f"chatcmpl-fake-{req.index}"
        context.append(out)
        await self.process({"type": "message_start", "message": dict(out)})
        blocks: list[Json] = out["content"]
        text_block: Json | None = None
        think_block: Json | None = None
        n_out = 0
        finish: str | None = None

        async def update(ame: Json) -> None:
            await self.process({"type": "message_update", "assistantMessageEvent": ame, "message": dict(out)})

        pieces: list[tuple[str, str]]
        if isinstance(reply, StreamText):
            pieces = [("thinking", r) for r in reply.reasoning] + [("text", d) for d in reply.deltas]
            interval = reply.interval
        else:
            assert isinstance(reply, StreamToolCall)
            pieces = [("toolcall-open", "")] + [("toolcall", d) for d in reply.argument_deltas]
            interval = 0.0
        tool_block: Json | None = None
        partial_args = ""
        aborted = False
        for i, (kind, piece) in enumerate(pieces):
            if i > 0 and interval > 0:
                try:
                    await asyncio.wait_for(run.abort.wait(), interval)
                except TimeoutError:
                    pass
            await self.control.hit("model-chunk", run.abort, index=i, kind=kind)
            if run.abort.is_set():
                aborted = True
                break
            n_out += kind != "toolcall-open"
            if kind == "thinking":
                if think_block is None:
                    think_block = {"type": "thinking", "thinking": "", "thinkingSignature": "reasoning_content"}
                    blocks.append(think_block)
                    await update({"type": "thinking_start", "contentIndex": blocks.index(think_block)})
                think_block["thinking"] += piece
                await update({"type": "thinking_delta", "contentIndex": blocks.index(think_block), "delta": piece})
            elif kind == "text":
                if text_block is None:
                    text_block = {"type": "text", "text": ""}
                    blocks.append(text_block)
                    await update({"type": "text_start", "contentIndex": blocks.index(text_block)})
                text_block["text"] += piece
                await update({"type": "text_delta", "contentIndex": blocks.index(text_block), "delta": piece})
            elif kind == "toolcall-open":
                assert isinstance(reply, StreamToolCall)
                tool_block = {"type": "toolCall", "id": reply.call_id, "name": reply.name, "arguments": {}}
                blocks.append(tool_block)
                await update({"type": "toolcall_start", "contentIndex": blocks.index(tool_block),
                              "id": reply.call_id, "toolName": reply.name})
                await update({"type": "toolcall_delta", "contentIndex": blocks.index(tool_block), "delta": ""})
            else:
                assert tool_block is not None
                partial_args += piece
                await update({"type": "toolcall_delta", "contentIndex": blocks.index(tool_block), "delta": piece})
        else:
            finish = reply.finish_reason
        if finish is not None:
            out["usage"] = {"input": 10 * len(req.messages), "output": n_out, "cacheRead": 0, "cacheWrite": 0,
                            "reasoning": 0, "totalTokens": 10 * len(req.messages) + n_out,
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
        for block in list(blocks):
            idx = blocks.index(block)
            if block["type"] == "text":
                await update({"type": "text_end", "contentIndex": idx, "content": block["text"]})
            elif block["type"] == "thinking":
                await update({"type": "thinking_end", "contentIndex": idx, "content": block["thinking"]})
            else:
                try:
                    block["arguments"] = json.loads(partial_args) if partial_args else {}
                except ValueError:
                    block["arguments"] = {}
                await update({"type": "toolcall_end", "contentIndex": idx, "toolCall": dict(block)})
        if aborted or finish is None:
            out["stopReason"] = "aborted"
            out["errorMessage"] = REQUEST_ABORTED
        else:
            # Key order as the real object ends up: the finish chunk adds rawStopReason after responseId.
            out["rawStopReason"] = finish
            out["stopReason"] = {"stop": "stop", "tool_calls": "toolUse", "length": "length"}.get(finish, "stop")
        await self.process({"type": "message_end", "message": out})
        return out

    # -- tools (agent-loop.js executeToolCalls, the bash tool) ----------------------------------------

    async def execute_tools(self, calls: list[Json], run: ActiveRun) -> list[Json]:
        results: list[Json] = []
        finished: list[tuple[Json, str, bool]] = []
        for call in calls:
            args = call.get("arguments", {})
            await self.process({"type": "tool_execution_start", "toolCallId": call["id"], "toolName": call["name"],
                                "args": args})
            await self.control.hit("tool", name=call["name"])
            await self.process({"type": "tool_execution_update", "toolCallId": call["id"], "toolName": call["name"],
                                "args": args, "partialResult": {"content": []}})
            if call["name"] == "bash" and isinstance(args.get("command"), str):
                output, code = await self.run_bash(args["command"])
                is_error = code != 0
                text = output if not is_error else f"{output}\n\nCommand exited with code {code}".lstrip("\n")
            else:
                text, is_error = f"Tool {call['name']} not found", True
            if not is_error:
                await self.process({"type": "tool_execution_update", "toolCallId": call["id"],
                                    "toolName": call["name"], "args": args,
                                    "partialResult": {"content": [{"type": "text", "text": text}], "details": {}}})
            await self.process({"type": "tool_execution_end", "toolCallId": call["id"], "toolName": call["name"],
                                "result": {"content": [{"type": "text", "text": text}]}, "isError": is_error})
            finished.append((call, text, is_error))
        for call, text, is_error in finished:
            msg = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                   "content": [{"type": "text", "text": text}], "isError": is_error, "timestamp": ms_now()}
            await self.process({"type": "message_start", "message": msg})
            await self.process({"type": "message_end", "message": msg})
            results.append(msg)
        return results

    async def run_bash(self, command: str) -> tuple[str, int]:
        proc = await asyncio.create_subprocess_exec(
            "/bin/bash", "-c", command, cwd=self.sm.cwd if os.path.isdir(self.sm.cwd) else None,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        data, _ = await proc.communicate()
        return data.decode("utf-8", "replace"), proc.returncode or 0

    # -- the RPC command table (rpc-mode.js 293-575) ---------------------------------------------------

    def state(self) -> Json:
        data: Json = {
            "model": self.model, "thinkingLevel": self.thinking, "isStreaming": self.run_active,
            "isCompacting": False, "steeringMode": "one-at-a-time", "followUpMode": "one-at-a-time",
            "sessionFile": self.sm.path, "sessionId": self.sm.session_id,
        }
        name = self.sm.session_name()
        if name is not None:
            data["sessionName"] = name
        data.update({"autoCompactionEnabled": True, "messageCount": len(self.messages),
                     "pendingMessageCount": len(self.steering) + len(self.follow_up)})
        return data

    async def handle_command(self, cmd: Any) -> Json | None:
        cid = cmd.get("id") if isinstance(cmd, dict) else None
        ctype = cmd.get("type") if isinstance(cmd, dict) else None
        if ctype == "prompt":
            # `void session.prompt(...)` (rpc-mode.js 298-320): the ack is written from preflightResult;
            # an error only before it; the case itself answers nothing. The prompt runs inside this line's
            # task, so its synchronous part (the streaming check) runs as soon as the line is read.
            acked = False

            def preflight(ok: bool) -> None:
                nonlocal acked
                if ok:
                    acked = True
                    self.output(self.success(cid, "prompt"))

            try:
                await self.prompt(cmd.get("message"), streaming_behavior=cmd.get("streamingBehavior"),
                                  preflight=preflight)
            except Exception as exc:
                if not acked:
                    self.output(self.error(cid, "prompt", str(exc)))
            return None
        if ctype == "steer" or ctype == "follow_up":
            text = cmd.get("message")
            if isinstance(text, str) and text.startswith("/") and self._is_command(text):
                name = text[1:].split(" ", 1)[0]
                raise RuntimeError(f'Extension command "/{name}" cannot be queued. Use prompt() or execute the '
                                   "command when not streaming.")
            if ctype == "steer":
                self.queue_steer(str(text))
            else:
                self.queue_follow_up(str(text))
            return self.success(cid, ctype)
        if ctype == "abort":
            await self.control.hit("abort")
            if self.retry_abort is not None:
                self.retry_abort.set()
            if self.active is not None:
                self.active.abort.set()
            await self.wait_for_idle()
            return self.success(cid, "abort")
        if ctype == "clear_queue":
            await self.control.hit("clear-queue")
            return self.success(cid, "clear_queue", self.clear_queue())
        if ctype == "get_state":
            return self.success(cid, "get_state", self.state())
        if ctype == "get_entries":
            entries = self.sm.entries()
            since = cmd.get("since", ...)
            if since is not ...:
                idx = next((i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("id") == since), -1)
                if idx == -1:
                    return self.error(cid, "get_entries", f"Entry not found: {_js_str(since)}")
                entries = entries[idx + 1:]
            return self.success(cid, "get_entries", {"entries": entries, "leafId": self.sm.leaf_id})
        if ctype == "get_tree":
            return self.success(cid, "get_tree", {"tree": self.sm.tree(), "leafId": self.sm.leaf_id})
        if ctype == "get_messages":
            return self.success(cid, "get_messages", {"messages": self.messages})
        if ctype == "get_commands":
            return self.success(cid, "get_commands", {"commands": [LLAMA_COMMAND]})
        if ctype == "get_last_assistant_text":
            return self.success(cid, "get_last_assistant_text", {"text": self.last_assistant_text()})
        if ctype == "set_session_name":
            name = cmd.get("name")
            if not isinstance(name, str):
                raise TypeError("Cannot read properties of undefined (reading 'trim')")
            if not name.strip():
                return self.error(cid, "set_session_name", "Session name cannot be empty")
            self.sm.append_session_info(name.strip())
            self.emit({"type": "session_info_changed", "name": self.sm.session_name()})
            return self.success(cid, "set_session_name")
        if ctype == "bash":
            command = cmd.get("command")
            output, code = await self.run_bash(str(command))
            if output:
                ev: Json = {"type": "bash_execution_update", "id": cid, "delta": output}
                if cid is None:
                    del ev["id"]
                self.emit(ev)
            result = {"output": output, "exitCode": code, "cancelled": False, "truncated": False}
            bash_msg = {"role": "bashExecution", "command": command, "output": output, "exitCode": code,
                        "cancelled": False, "truncated": False, "timestamp": ms_now()}
            if self.run_active:
                self.pending_bash.append(bash_msg)
            else:
                self.messages.append(bash_msg)
                self.sm.append_message(bash_msg)
            return self.success(cid, "bash", result)
        if ctype in ("abort_bash", "set_auto_compaction", "set_steering_mode", "set_follow_up_mode"):
            return self.success(cid, ctype)
        if ctype == "abort_retry":
            if self.retry_abort is not None:
                self.retry_abort.set()
            return self.success(cid, "abort_retry")
        if ctype == "set_auto_retry":
            self.retry["enabled"] = bool(cmd.get("enabled"))
            return self.success(cid, "set_auto_retry")
        if ctype in _PI_COMMANDS:
            return self.error(cid, ctype, f"fake engine: {ctype} is not modelled")
        return self.error(cid, ctype, f"Unknown command: {_js_str(ctype)}")

    def _is_command(self, text: str) -> bool:
        space = text.find(" ")
        return (text[1:] if space == -1 else text[1:space]) == "llama"

    def last_assistant_text(self) -> str | None:
        for m in reversed(self.messages):
            if m.get("role") != "assistant":
                continue
            if m.get("stopReason") == "aborted" and not m.get("content"):
                continue
            text = "".join(c.get("text", "") for c in m.get("content", []) if c.get("type") == "text")
            return text.strip() or None
        return None

    async def handle_line(self, line: str) -> None:
        try:
            parsed = js_json_parse(line)
        except JsonParseError as exc:
            self.output(self.error(None, "parse", f"Failed to parse command: {exc.message}"))
            assert self.out is not None
            await self.out.drain()
            return
        if parsed is None:
            # `command.id` on null throws inside the handler, and again inside its catch (rpc-mode.js
            # 627-639): an unhandled rejection, and Node exits 1 (checked on the pinned binary).
            assert self.out is not None
            self.out.flush_now()
            _die("TypeError: Cannot read properties of null (reading 'id')")
            return
        if isinstance(parsed, dict) and parsed.get("type") == "extension_ui_response":
            fut = self.pending_dialogs.pop(str(parsed.get("id")), None)
            if fut is not None and not fut.done():
                fut.set_result(parsed)
            return
        try:
            response = await self.handle_command(parsed)
            await self.tick()  # `await handleCommand(...)`: at least one microtask before the output
            if response is not None:
                self.output(response)
                assert self.out is not None
                await self.out.drain()
        except Exception as exc:
            cid = parsed.get("id") if isinstance(parsed, dict) else None
            ctype = parsed.get("type") if isinstance(parsed, dict) else None
            self.output(self.error(cid, ctype, str(exc)))

    # -- control ops ----------------------------------------------------------------------------------

    async def control_op(self, msg: Json) -> Json:
        op = msg.get("op")
        point = msg.get("point")
        if op == "hold":
            self.control.armed[str(point)] = int(msg.get("count", 1))
            return {}
        if op == "unhold":
            self.control.armed.pop(str(point), None)
            return {}
        if op == "release":
            q = self.control.waiting.get(str(point), deque())
            n = 0
            while q and (n == 0 or msg.get("all")):
                held = q.popleft()
                if not held.done():
                    held.set_result(None)
                    n += 1
            return {"released": n}
        if op == "state":
            return {"state": {"isStreaming": self.run_active, "activeRun": self.active is not None,
                              "steering": self.steering, "followUp": self.follow_up,
                              "agentQueues": [len(self.steer_queue), len(self.follow_queue)],
                              "held": {p: len(q) for p, q in self.control.waiting.items() if q},
                              "messageCount": len(self.messages), "pendingBash": len(self.pending_bash)}}
        if op == "inject_prompt":
            # An extension's sendUserMessage(text) (agent-session.js 1135-1160): a prompt from outside RPC.
            text = str(msg.get("text"))
            async def run() -> None:
                try:
                    await self.prompt(text, streaming_behavior=msg.get("deliverAs"), source="extension")
                except Exception as exc:
                    self.control.send({"event": "inject-failed", "text": text, "error": str(exc)})

            asyncio.get_running_loop().create_task(run())
            await self.tick()
            return {}
        if op == "queue":
            kind = msg.get("kind")
            text = str(msg.get("text"))
            if kind == "steer":
                self.queue_steer(text)
            elif kind == "followUp":
                self.queue_follow_up(text)
            else:
                raise ValueError("kind must be steer or followUp")
            return {}
        if op == "input_handler":
            self.input_handlers.append({k: msg[k] for k in ("action", "match", "text") if k in msg})
            return {}
        if op == "fail_preflight":
            self.fail_preflight.append(str(msg.get("message", "scripted preflight failure")))
            return {}
        if op == "throw_at_run_start":
            self.throw_at_run_start.append(str(msg.get("message", AGENT_BUSY_PROMPT)))
            return {}
        if op == "dialog":
            method = str(msg.get("method"))
            did = str(uuid.uuid4())
            req: Json = {"type": "extension_ui_request", "id": did, "method": method, "title": msg.get("title")}
            if method == "select":
                req["options"] = msg.get("options", [])
            elif method == "confirm":
                req["message"] = msg.get("message")
            elif method == "input":
                req["placeholder"] = msg.get("placeholder")
            elif method == "editor":
                req["prefill"] = msg.get("prefill")
            if method != "editor" and msg.get("timeout") is not None:
                req["timeout"] = msg.get("timeout")
            answered: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
            self.pending_dialogs[did] = answered

            async def answer() -> None:
                timeout = msg.get("timeout")
                try:
                    resp = await asyncio.wait_for(answered, timeout / 1000 if timeout else None)
                except TimeoutError:
                    resp = {"timedOut": True}
                    self.pending_dialogs.pop(did, None)
                self.control.send({"event": "dialog-answered", "id": did, "response": resp})

            self.output(req)
            asyncio.get_running_loop().create_task(answer())
            return {"id": did}
        raise ValueError(f"unknown op {op!r}")


_PI_COMMANDS = frozenset({
    "new_session", "set_model", "cycle_model", "get_available_models", "set_thinking_level",
    "cycle_thinking_level", "get_available_thinking_levels", "compact", "get_session_stats", "export_html",
    "switch_session", "fork", "clone", "get_fork_messages",
})


def _js_str(value: Any) -> str:
    """``String(value)`` / template-literal conversion for a JSON value."""
    if value is None:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, dict)):
        return "[object Object]" if isinstance(value, dict) else ",".join(_js_str(v) for v in value)
    return js_json_dumps(value)


# ---------------------------------------------------------------------------------------------------------
# The process
# ---------------------------------------------------------------------------------------------------------


def _die(message: str, code: int = 1) -> None:
    os.write(2, f"Error: {message}\n".encode())
    os._exit(code)


async def _main(options: FakeOptions) -> None:
    loop = asyncio.get_running_loop()
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR")
    if not agent_dir:
        # No default paths (DESIGN.md principle 3): the real binary would fall back to ~/.pi/agent.
        _die("the fake engine needs PI_CODING_AGENT_DIR (it never uses ~/.pi)")
        return
    session_path = os.path.abspath(options.session)
    try:
        sm = SessionFile.open(session_path, os.getcwd())
    except InvalidSession as exc:
        _die(str(exc))
        return
    if not os.path.isdir(sm.cwd):
        _die(f"Stored session working directory does not exist: {sm.cwd}\nSession file: {sm.path}\n"
             f"Current working directory: {os.getcwd()}")
        return
    engine = FakePi(options, sm, agent_dir)
    if options.control:
        await engine.control.connect(options.control)
    engine.startup()
    engine.out = Output(1, engine.control)

    def on_signal(code: int, flush: bool) -> None:
        if flush and engine.out is not None:
            engine.out.flush_now()
        engine.control.send({"event": "bye", "code": code})
        os._exit(code)

    loop.add_signal_handler(signal.SIGTERM, on_signal, 143, False)
    loop.add_signal_handler(signal.SIGHUP, on_signal, 129, True)

    decoder = RecordDecoder(errors="replace", max_record_bytes=1 << 30)
    eof = asyncio.Event()

    def on_stdin() -> None:
        try:
            data = os.read(0, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            loop.remove_reader(0)
            eof.set()
            return
        for line in decoder.feed(data):
            loop.create_task(engine.handle_line(line))

    os.set_blocking(0, False)
    loop.add_reader(0, on_stdin)
    await eof.wait()
    # stdin EOF: shutdown() flushes stdout and exits 0 (rpc-mode.js 581-598, 641-644). Lines still being
    # handled are cut off: the run's remaining events never come (FACTS.md Part 2 L).
    await asyncio.sleep(0)
    engine.out.flush_now()
    engine.control.send({"event": "bye", "code": 0})
    if engine.control.writer is not None:
        try:
            await asyncio.wait_for(engine.control.writer.drain(), 5)
        except (TimeoutError, ConnectionError):
            pass
    os._exit(0)


def parse_args(argv: Sequence[str]) -> FakeOptions:
    """Pi's sealed arguments plus ``--fake-control PATH`` and ``--fake-scenarios MODULE:ATTR``. Anything
    Pi would reject or the seal does not allow exits 2 (the fake is never started unsealed by tests)."""
    args = list(argv)
    opts: dict[str, Any] = {"flags": set(), "argv": list(argv)}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--mode",):
            if i + 1 >= len(args) or args[i + 1] != "rpc":
                _die("the fake engine speaks only --mode rpc", 2)
            i += 2
            continue
        if a in ("--no-extensions", "--no-prompt-templates", "--no-themes", "--no-context-files", "--no-skills"):
            opts["flags"].add(a)
            i += 1
            continue
        if a in ("--session", "--model", "--provider", "--thinking", "--fake-control", "--fake-scenarios"):
            if i + 1 >= len(args):
                _die(f"{a} needs a value", 2)
            opts[a.lstrip("-").replace("fake-", "")] = args[i + 1]
            i += 2
            continue
        _die(f"unsupported argument {a!r}", 2)
    if "session" not in opts:
        _die("the fake engine needs --session", 2)
    scenarios = DEFAULT_SCENARIOS
    if "scenarios" in opts:
        import importlib

        mod, _, attr = str(opts.pop("scenarios")).partition(":")
        scenarios = tuple(getattr(importlib.import_module(mod), attr))
    control = opts.pop("control", None) or os.environ.get("MOSAIC_FAKE_PI_CONTROL")
    return FakeOptions(session=opts.pop("session"), model=opts.get("model"), provider=opts.get("provider"),
                       thinking=opts.get("thinking"), control=control, scenarios=scenarios,
                       flags=opts["flags"], argv=opts["argv"])


def run_fake_engine(argv: Sequence[str] | None = None) -> None:
    """Run the fake engine process (``python -m mosaic.pi_rpc.testing.fake_engine <Pi args>``)."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    asyncio.run(_main(options))

