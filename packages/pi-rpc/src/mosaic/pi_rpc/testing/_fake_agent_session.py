"""The fake's AgentSession (agent-session.js), with the startup of sdk.js: prompt, queues, retry, settle.

:meth:`AgentSession.prompt` follows agent-session.js 816-950 step by step: extension commands (only
``/llama``, the seal), the input handlers (control ops), the refusal while streaming with the exact text
(860-863), the preflight awaits (the ``preflight`` hold point) and the ack from ``preflightResult(true)``,
then ``_runAgentPrompt``, whose ``finally`` settles (``isStreaming`` false before the ``settle`` hold point
and ``agent_settled``, 347-355 and 780-785). The steering and follow-up texts are tracked for
``queue_update``/``clear_queue``; auto-retry re-runs a retryable error after its delay. Agent events come
back through :meth:`AgentSession.on_agent_event` (``_handleAgentEvent``, 360-428): queue removal on the
user ``message_start``, the event to the RPC output, then persistence (the entry reaches the file before
the event's bytes reach stdout, FACTS.md a6).
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Callable
from typing import Any

from mosaic.pi_rpc.testing._fake_agent_loop import Agent
from mosaic.pi_rpc.testing._fake_runtime import Control, Json, Stdout, text_of, tick
from mosaic.pi_rpc.testing._fake_session import SessionFile, ms_now

__all__ = ["ALREADY_PROCESSING", "AgentSession"]

ALREADY_PROCESSING = ("Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue "
                      "the message.")


class AgentSession:
    """Pi's AgentSession over one :class:`Agent`. ``out`` is the RPC output (set once stdout is taken over);
    ``model``, ``provider`` and ``thinking`` are the sealed arguments (``None`` when not given)."""

    def __init__(self, sm: SessionFile, agent_dir: str, agent: Agent, control: Control, *,
                 model: str | None = None, provider: str | None = None, thinking: str | None = None) -> None:
        self.sm = sm
        self.agent_dir = agent_dir
        self.agent = agent
        self.control = control
        self.args = (model, provider, thinking)
        self.out: Stdout | None = None
        agent.listener = self.on_agent_event
        self.run_active = False  # _isAgentRunActive: what get_state calls isStreaming
        self.steering: list[str] = []  # the tracked texts (queue_update, clear_queue)
        self.follow_up: list[str] = []
        self.idle_waiters: list[asyncio.Future[None]] = []
        self.last_assistant: Json | None = None
        self.retry_attempt = 0
        self.retry_abort: asyncio.Event | None = None
        self.retry = {"enabled": True, "maxRetries": 3, "baseDelayMs": 2000}
        self.pending_bash: list[Json] = []
        # control-channel scripting
        self.fail_preflight: list[str] = []
        self.input_handlers: list[Json] = []

    # -- startup (sdk.js 80-83, 239-252) ---------------------------------------------------------------

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

    def _choose_model(self, models: list[Json], has_existing: bool) -> Json | None:
        model, provider, _ = self.args
        if model is not None:
            for m in models:
                if m["id"] == model and provider in (None, m["provider"]):
                    return m
        if has_existing:
            _, ctx_model = self.sm.context_settings()
            if ctx_model is not None:
                found = next((m for m in models if m["provider"] == ctx_model["provider"] and
                              m["id"] == ctx_model["modelId"] and m.get("_apiKey")), None)
                if found is not None:
                    return found
        return next((m for m in models if m.get("_apiKey")), None)

    def startup(self) -> None:
        """createAgentSession: the model and thinking level, the startup append, the agent-dir files."""
        agent = self.agent
        models = self.load_models()
        self.load_settings()
        ctx_messages = self.sm.context_messages()
        has_existing = len(ctx_messages) > 0
        has_thinking = any(isinstance(e, dict) and e.get("type") == "thinking_level_change"
                           for e in (self.sm.branch() if self.sm.leaf_id is not None else []))
        chosen = self._choose_model(models, has_existing)
        if chosen is not None:
            agent.api_key = chosen.pop("_apiKey", None)
            agent.model = chosen
            agent.has_model = True
        level = self.args[2]
        if level is None and has_existing:
            level = self.sm.context_settings()[0] if has_thinking else "medium"
        if level is None:
            level = "medium"
        # clampThinkingLevel: a model without reasoning supports only "off"; no model: "off".
        agent.thinking = level if (agent.has_model and agent.model.get("reasoning")) else "off"
        if has_existing:
            agent.messages = list(ctx_messages)
            if not has_thinking:
                self.sm.append_thinking_level_change(agent.thinking)
        else:
            if agent.has_model:
                self.sm.append_model_change(agent.model["provider"], agent.model["id"])
            self.sm.append_thinking_level_change(agent.thinking)
        # Pi writes these into the agent dir at start (seed README "Findings against pinned Pi").
        for name in ("auth.json", "models-store.json"):
            path = os.path.join(self.agent_dir, name)
            if not os.path.exists(path):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as f:
                    f.write("{}")

    # -- output (the RPC listener, json-event.js toJsonEvent) -----------------------------------------

    def output(self, obj: Json) -> None:
        assert self.out is not None
        self.out.write(obj)

    def emit(self, event: Json) -> None:
        """``AgentSession._emit`` to the RPC listener (``toJsonEvent``)."""
        if event.get("type") == "message_update":
            ame = {k: v for k, v in event["assistantMessageEvent"].items() if k != "partial"}
            self.output({"type": "message_update", "usage": event["message"]["usage"], "assistantMessageEvent": ame})
        else:
            self.output(event)

    def emit_queue_update(self) -> None:
        self.emit({"type": "queue_update", "steering": list(self.steering), "followUp": list(self.follow_up)})

    # -- the agent event pipe (AgentSession._handleAgentEvent, 360-428) -------------------------------

    async def on_agent_event(self, event: Json) -> None:
        await self.handle_agent_event(event)
        assert self.out is not None
        await self.out.drain()  # the backpressure listener (rpc-mode.js 271-273)

    async def handle_agent_event(self, event: Json) -> None:
        t = event["type"]
        if t == "message_start" and event["message"].get("role") == "user":
            text = text_of(event["message"].get("content"))
            if text:
                if text in self.steering:
                    self.steering.remove(text)
                    self.emit_queue_update()
                elif text in self.follow_up:
                    self.follow_up.remove(text)
                    self.emit_queue_update()
        await tick()  # extension dispatch (agent-session.js 384)
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
                await tick()  # emitInput is async
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
            messages = await self._preflight(current)
        except Exception:
            result(False)
            raise
        result(True)
        await self.run_agent_prompt(messages)

    async def _preflight(self, current: str) -> list[Json]:
        """The rest of preflight (agent-session.js 880-946): the model check, the awaits of the preflight
        window, a scripted preflight failure; the messages of the run."""
        agent = self.agent
        self.flush_pending_bash()
        if not agent.has_model or not agent.api_key:
            who = "the selected model" if agent.model.get("provider") == "unknown" else agent.model["provider"]
            raise RuntimeError(f"No API key found for {who}.\n\n{self.login_help()}")
        if any(m.get("role") == "assistant" for m in agent.messages):
            # `await this._checkCompaction(lastAssistant, false)` (agent-session.js 893-896): with an
            # earlier reply the preflight takes more turns of the event loop, so a get_state read with
            # the prompt answers before the ack (FACTS.md Part 2 F); on a fresh session after it.
            await tick(2)
        messages = [{"role": "user", "content": [{"type": "text", "text": current}], "timestamp": ms_now()}]
        # emitBeforeAgentStart (agent-session.js 915): the preflight await. Hold it to keep the window open.
        await self.control.hit("preflight", text=current)
        await tick()
        if self.fail_preflight:
            raise RuntimeError(self.fail_preflight.pop(0))
        return messages

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

    @staticmethod
    def is_extension_command(text: str) -> bool:
        """True when ``text`` (starting with ``/``) names a registered extension command: only ``/llama``."""
        space = text.find(" ")
        return (text[1:] if space == -1 else text[1:space]) == "llama"

    async def try_extension_command(self, text: str) -> bool:
        if not self.is_extension_command(text):
            return False
        # llama/index.js 163-168: in RPC mode the command only notifies.
        self.output({"type": "extension_ui_request", "id": str(uuid.uuid4()), "method": "notify",
                     "message": "/llama is available in interactive mode", "notifyType": "warning"})
        await tick()
        return True

    def queue_steer(self, text: str) -> None:
        self.steering.append(text)
        self.emit_queue_update()
        self.agent.steer_queue.append({"role": "user", "content": [{"type": "text", "text": text}],
                                       "timestamp": ms_now()})

    def queue_follow_up(self, text: str) -> None:
        self.follow_up.append(text)
        self.emit_queue_update()
        self.agent.follow_queue.append({"role": "user", "content": [{"type": "text", "text": text}],
                                        "timestamp": ms_now()})

    def clear_queue(self) -> Json:
        data = {"steering": list(self.steering), "followUp": list(self.follow_up)}
        self.steering.clear()
        self.follow_up.clear()
        self.agent.steer_queue.clear()
        self.agent.follow_queue.clear()
        self.emit_queue_update()
        return data

    # -- _runAgentPrompt and the settle ---------------------------------------------------------------

    async def run_agent_prompt(self, messages: list[Json]) -> None:
        self.run_active = True
        try:
            await self.agent.prompt(messages)
            while await self.handle_post_agent_run():
                await self.agent.continue_()
        finally:
            self.flush_pending_bash()
            await self.emit_agent_settled()

    async def emit_agent_settled(self) -> None:
        self.run_active = False
        try:
            await self.control.hit("settle")
            await tick()  # extension agent_settled handlers (agent-session.js 350)
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
        return bool(self.agent.steer_queue or self.agent.follow_queue)

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
        agent = self.agent
        if agent.messages and agent.messages[-1].get("role") == "assistant":
            agent.messages = agent.messages[:-1]
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
            self.agent.messages.append(m)
            self.sm.append_message(m)

    def last_assistant_text(self) -> str | None:
        for m in reversed(self.agent.messages):
            if m.get("role") != "assistant":
                continue
            if m.get("stopReason") == "aborted" and not m.get("content"):
                continue
            text = "".join(c.get("text", "") for c in m.get("content", []) if c.get("type") == "text")
            return text.strip() or None
        return None
