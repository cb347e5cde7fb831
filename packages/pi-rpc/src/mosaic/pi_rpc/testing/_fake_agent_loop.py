"""The fake's agent: pi-agent-core's ``Agent`` (agent.js) and its loop (agent-loop.js), with the bash tool.

:class:`Agent` holds the conversation (``messages``), the model, the thinking level, the two agent queues
(steering and follow-up messages, one at a time) and the active run. A run (``prompt`` / ``continue_``)
goes through :meth:`Agent.run_with_lifecycle`: the ``run-start`` hold point, then the loop's events
``agent_start``, ``turn_start``, the prompts' ``message_start``/``message_end``, the ``user-message`` hold
point, one assistant stream per turn (:mod:`._fake_stream`), the tool calls, ``turn_end``, and
``agent_end``; a body that throws becomes a failure message (handleRunFailure, agent.js 300-316). Every
event goes through :meth:`Agent.process` (agent.js processEvents) to the session's listener, awaited.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Awaitable, Callable

from mosaic.pi_rpc._framing import js_json_dumps
from mosaic.pi_rpc.testing._fake_dialogs import UNDEFINED, DialogUI, fixture_fields, fixture_tool_result
from mosaic.pi_rpc.testing._fake_runtime import Control, Json, text_of
from mosaic.pi_rpc.testing._fake_session import ms_now
from mosaic.pi_rpc.testing._fake_stream import ActiveRun, ScriptedModel, empty_usage, stream_assistant
from mosaic.pi_rpc.testing.model_server import DIALOG_TOOL, Scenario

__all__ = ["AGENT_BUSY_PROMPT", "DEFAULT_MODEL", "Agent", "run_bash"]

AGENT_BUSY_PROMPT = ("Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait "
                     "for completion.")

# pi-agent-core agent.js 14-25: the model when none is configured.
DEFAULT_MODEL: Json = {
    "id": "unknown", "name": "unknown", "api": "unknown", "provider": "unknown", "baseUrl": "", "reasoning": False,
    "input": [], "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}, "contextWindow": 0,
    "maxTokens": 0,
}


async def run_bash(command: str, cwd: str) -> tuple[str, int]:
    """Run ``command`` with bash in ``cwd`` (when it exists), stdout and stderr merged; (output, exit code)."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/bash", "-c", command, cwd=cwd if os.path.isdir(cwd) else None,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    data, _ = await proc.communicate()
    return data.decode("utf-8", "replace"), proc.returncode or 0


class Agent:
    """pi-agent-core's Agent. ``listener`` is the session's ``_handleAgentEvent`` (awaited per event);
    ``cwd`` is where tools run; ``scenarios`` answer the model calls."""

    def __init__(self, control: Control, cwd: str, scenarios: tuple[Scenario, ...]) -> None:
        self.control = control
        self.cwd = cwd
        self.listener: Callable[[Json], Awaitable[None]] | None = None
        self.messages: list[Json] = []
        self.active: ActiveRun | None = None
        self.steer_queue: list[Json] = []
        self.follow_queue: list[Json] = []
        self.model: Json = dict(DEFAULT_MODEL)
        self.has_model = False
        self.api_key: str | None = None
        self.thinking = "off"
        self.llm = ScriptedModel(scenarios)
        # the fixture extension's dialogs, when the seal's fixture option loaded it (its tool exists then)
        self.fixture_dialogs: DialogUI | None = None
        # control-channel scripting: the next run throws at its start (N11)
        self.throw_at_run_start: list[str] = []

    # -- the event pipe (agent.js processEvents) -------------------------------------------------------

    async def process(self, event: Json) -> None:
        """Record a ``message_end``'s message, then hand the event to the listener and wait for it. Raises
        when no run is active (agent.js: "Agent listener invoked outside active run")."""
        if event["type"] == "message_end":
            self.messages.append(event["message"])
        if self.active is None:
            raise RuntimeError("Agent listener invoked outside active run")
        assert self.listener is not None
        await self.listener(event)

    # -- runs (agent.js prompt / continue / runWithLifecycle) -------------------------------------------

    async def prompt(self, messages: list[Json]) -> None:
        """A run for ``messages``. Raises ``AGENT_BUSY_PROMPT`` while a run is active (agent.js 226-229)."""
        if self.active is not None:
            raise RuntimeError(AGENT_BUSY_PROMPT)
        if self.throw_at_run_start:
            raise RuntimeError(self.throw_at_run_start.pop(0))
        await self.run_with_lifecycle(lambda run: self.run_agent_loop(messages, run))

    async def continue_(self) -> None:
        """Continue after a run: the next queued steering, else follow-up message, else from the last message."""
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
                           "provider": self.model["provider"], "model": self.model["id"], "usage": empty_usage(),
                           "stopReason": "aborted" if run.abort.is_set() else "error", "errorMessage": str(exc),
                           "timestamp": ms_now()}
                await self.process({"type": "message_start", "message": failure})
                await self.process({"type": "message_end", "message": failure})
                await self.process({"type": "turn_end", "message": failure, "toolResults": []})
                await self.process({"type": "agent_end", "messages": [failure]})
        finally:
            self.active = None
            run.done.set()

    # -- the loop (agent-loop.js) -----------------------------------------------------------------------

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
            await self.control.hit("user-message", text=text_of(prompts[-1].get("content")))
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
                message = await stream_assistant(self.process, self.control, self.llm, self.model, context, run)
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

    # -- tools (agent-loop.js executeToolCalls; the bash tool) ------------------------------------------

    async def execute_tools(self, calls: list[Json], run: ActiveRun) -> list[Json]:
        finished: list[tuple[Json, Json, bool]] = []
        for call in calls:
            finished.append((call, *await self._execute(call, run)))
        results: list[Json] = []
        for call, result, is_error in finished:
            msg: Json = {"role": "toolResult", "toolCallId": call["id"], "toolName": call["name"],
                         "content": result["content"]}
            if "details" in result:
                msg["details"] = result["details"]
            msg.update({"isError": is_error, "timestamp": ms_now()})
            await self.process({"type": "message_start", "message": msg})
            await self.process({"type": "message_end", "message": msg})
            results.append(msg)
        return results

    async def _execute(self, call: Json, run: ActiveRun) -> tuple[Json, bool]:
        """One tool call's execution events; (result, is error). ``bash`` exists (the seal), and the fixture
        extension's dialog tool when the fixture is loaded; any other name is not found (agent-loop.js
        prepareToolCall: an immediate error result, no update events)."""
        args = call.get("arguments", {})
        base = {"toolCallId": call["id"], "toolName": call["name"]}
        await self.process({"type": "tool_execution_start", **base, "args": args})
        await self.control.hit("tool", name=call["name"])
        if call["name"] == DIALOG_TOOL and self.fixture_dialogs is not None:
            result, is_error = await self._fixture_dialog(args, run)
        elif call["name"] == "bash" and isinstance(args.get("command"), str):
            await self.process({"type": "tool_execution_update", **base, "args": args,
                                "partialResult": {"content": []}})
            output, code = await run_bash(args["command"], self.cwd)
            is_error = code != 0
            text = output if not is_error else f"{output}\n\nCommand exited with code {code}".lstrip("\n")
            if not is_error:
                await self.process({"type": "tool_execution_update", **base, "args": args,
                                    "partialResult": {"content": [{"type": "text", "text": text}], "details": {}}})
            result = {"content": [{"type": "text", "text": text}]}
        else:
            result, is_error = {"content": [{"type": "text", "text": f"Tool {call['name']} not found"}],
                                "details": {}}, True
        await self.process({"type": "tool_execution_end", **base, "result": result, "isError": is_error})
        return result, is_error

    async def _fixture_dialog(self, args: Json, run: ActiveRun) -> tuple[Json, bool]:
        """The fixture extension's tool (dialogs.js ``execute``): one dialog, its value as the result text. The
        arguments are the scripted model's (``kind``, an integer ``timeout``, ``abortable``); Pi's schema
        errors for other shapes are not modelled (README "Known limits")."""
        assert self.fixture_dialogs is not None
        kind = args.get("kind")
        fields = fixture_fields(kind) if isinstance(kind, str) else None
        if fields is None or not isinstance(kind, str):
            text = f"unknown dialog kind {js_json_dumps(kind) if kind is not None else 'undefined'}"
            return {"content": [{"type": "text", "text": text}], "details": {}}, True
        settled = await self.fixture_dialogs.dialog(
            kind, fields, timeout=args.get("timeout", UNDEFINED),
            signal=run.abort if args.get("abortable") else None)
        return {"content": [{"type": "text", "text": fixture_tool_result(kind, settled)}], "details": {}}, False
