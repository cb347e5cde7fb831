"""The model call of the fake engine: one OpenAI-completions stream (pi-ai openai-completions.js 168-530) as
agent-loop.js's ``streamAssistantResponse`` sees it, answered by the scripted model server's scenario table
in-process (no HTTP).

:class:`ScriptedModel` builds the request Pi would send (transform-messages.js: failed and aborted
assistant messages are dropped from later requests) and routes it to a :class:`Scenario` on the last user
text; :func:`stream_assistant` turns the scenario's reply into the agent events Pi emits for it
(``message_start``, the ``message_update`` grammar of text / thinking / tool-call blocks, ``message_end``),
stopping at the ``model-chunk`` hold point before each delta and when the run is aborted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from mosaic.pi_rpc._framing import js_json_dumps
from mosaic.pi_rpc.testing._fake_runtime import Control, Json, text_of, tick
from mosaic.pi_rpc.testing._fake_session import ms_now
from mosaic.pi_rpc.testing.model_server import (
    HttpError,
    RecordedRequest,
    Scenario,
    StreamText,
    StreamToolCall,
)

__all__ = ["ABORTED_BEFORE_CALL", "REQUEST_ABORTED", "ActiveRun", "ScriptedModel", "empty_usage", "stream_assistant"]

REQUEST_ABORTED = "Request was aborted"
ABORTED_BEFORE_CALL = "This operation was aborted"

Process = Callable[[Json], Awaitable[None]]


@dataclass
class ActiveRun:
    """pi-agent-core's active run: its abort signal, and ``done`` once it has finished."""

    abort: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)


def empty_usage() -> Json:
    """The usage of a message that made no model call."""
    return {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}


class ScriptedModel:
    """The scenario table as a model: numbered requests, routed on the last user text; each (scenario, text)
    pair counts its occurrences (FAILONCE fails the first)."""

    def __init__(self, scenarios: tuple[Scenario, ...]) -> None:
        self.scenarios = scenarios
        self.request_index = 0
        self.seen: dict[tuple[str, str], int] = {}

    def request(self, model: Json, context: list[Json]) -> RecordedRequest:
        """The request Pi would send for ``context``."""
        msgs: list[Json] = [{"role": "system", "content": "<system prompt>"}]
        for m in context:
            role = m.get("role")
            if role == "assistant" and m.get("stopReason") in ("error", "aborted"):
                continue  # transform-messages.js 153-160: dropped from later requests
            if role == "toolResult":
                msgs.append({"role": "tool", "content": text_of(m.get("content"))})
            elif role in ("user", "assistant"):
                msgs.append({"role": role, "content": text_of(m.get("content"))})
        self.request_index += 1
        return RecordedRequest(self.request_index, "POST", "/v1/chat/completions", {},
                               {"model": model["id"], "messages": msgs, "stream": True,
                                "stream_options": {"include_usage": True}})

    def route(self, req: RecordedRequest) -> tuple[RecordedRequest, Scenario]:
        """The scenario that answers ``req`` (first keyword in the last user text), and ``req`` with its
        scenario name and occurrence filled in."""
        text = req.last_user_text
        scenario = next(s for s in self.scenarios if s.keyword in text)
        key = (scenario.name, text)
        occ = self.seen.get(key, 0)
        self.seen[key] = occ + 1
        return dataclasses.replace(req, scenario=scenario.name, occurrence=occ), scenario


def _assistant(model: Json) -> Json:
    return {"role": "assistant", "content": [], "api": model["api"], "provider": model["provider"],
            "model": model["id"], "usage": empty_usage(), "stopReason": "pending", "timestamp": ms_now()}


async def _unstreamed(process: Process, context: list[Json], out: Json) -> Json:
    """An assistant message that ends before any delta (an HTTP error, or an abort before the call)."""
    context.append(out)
    await process({"type": "message_start", "message": dict(out)})
    await process({"type": "message_end", "message": out})
    return out


async def stream_assistant(process: Process, control: Control, model: ScriptedModel, model_info: Json,
                           context: list[Json], run: ActiveRun) -> Json:
    """One assistant message for ``context``: its events through ``process``; the message is returned
    (also appended to ``context``). ``stopReason`` is ``error`` for an HTTP error reply and for a call that
    starts after ``run`` was aborted (no request is made), ``aborted`` when it is aborted during the stream,
    else the scenario's finish reason."""
    out = _assistant(model_info)
    if run.abort.is_set():
        # A model call that starts after the run's abort (the turn after a tool that returned late): no
        # request reaches the server, and Pi ends the message as an error with the abort signal's reason
        # (recorded: the conformance goldens dialog-interrupt-*).
        # That message is built whole, errorMessage before timestamp (the key order recorded).
        await tick()
        timestamp = out.pop("timestamp")
        out.update({"stopReason": "error", "errorMessage": ABORTED_BEFORE_CALL, "timestamp": timestamp})
        return await _unstreamed(process, context, out)
    req, scenario = model.route(model.request(model_info, context))
    reply = scenario.respond(req)
    if isinstance(reply, HttpError):
        await tick()
        err = reply.body.get("error", reply.body) if isinstance(reply.body, dict) else reply.body
        out["stopReason"] = "error"
        out["errorMessage"] = f"{reply.status}: {js_json_dumps(err)}"
        return await _unstreamed(process, context, out)
    out["responseId"] = f"chatcmpl-fake-{req.index}"
    context.append(out)
    await process({"type": "message_start", "message": dict(out)})
    stream = _Stream(process, control, out, reply)
    finish = await stream.deltas(run)
    if finish is not None:
        n = len(req.messages)
        out["usage"] = {"input": 10 * n, "output": stream.n_out, "cacheRead": 0, "cacheWrite": 0,
                        "reasoning": 0, "totalTokens": 10 * n + stream.n_out,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    await stream.end_blocks()
    if finish is None:
        out["stopReason"] = "aborted"
        out["errorMessage"] = REQUEST_ABORTED
    else:
        # Key order as the real object ends up: the finish chunk adds rawStopReason after responseId.
        out["rawStopReason"] = finish
        out["stopReason"] = {"stop": "stop", "tool_calls": "toolUse", "length": "length"}.get(finish, "stop")
    await process({"type": "message_end", "message": out})
    return out


class _Stream:
    """The content blocks of one streamed assistant message and the ``message_update`` events that build
    them (openai-completions.js: a block starts at its first delta, ends when the stream ends)."""

    def __init__(self, process: Process, control: Control, out: Json, reply: StreamText | StreamToolCall) -> None:
        self.process = process
        self.control = control
        self.out = out
        self.reply = reply
        self.blocks: list[Json] = out["content"]
        self.text_block: Json | None = None
        self.think_block: Json | None = None
        self.tool_block: Json | None = None
        self.partial_args = ""
        self.n_out = 0

    async def update(self, ame: Json) -> None:
        await self.process({"type": "message_update", "assistantMessageEvent": ame, "message": dict(self.out)})

    async def deltas(self, run: ActiveRun) -> str | None:
        """Stream every delta of the reply; the finish reason, or ``None`` when the run was aborted."""
        reply = self.reply
        pieces: list[tuple[str, str]]
        if isinstance(reply, StreamText):
            pieces = [("thinking", r) for r in reply.reasoning] + [("text", d) for d in reply.deltas]
            interval = reply.interval
        else:
            pieces = [("toolcall-open", "")] + [("toolcall", d) for d in reply.argument_deltas]
            interval = 0.0
        for i, (kind, piece) in enumerate(pieces):
            if i > 0 and interval > 0:
                try:
                    await asyncio.wait_for(run.abort.wait(), interval)
                except TimeoutError:
                    pass
            await self.control.hit("model-chunk", run.abort, index=i, kind=kind)
            if run.abort.is_set():
                return None
            self.n_out += kind != "toolcall-open"
            await self.piece(kind, piece)
        return reply.finish_reason

    async def piece(self, kind: str, piece: str) -> None:
        blocks = self.blocks
        if kind == "thinking":
            if self.think_block is None:
                self.think_block = {"type": "thinking", "thinking": "", "thinkingSignature": "reasoning_content"}
                blocks.append(self.think_block)
                await self.update({"type": "thinking_start", "contentIndex": blocks.index(self.think_block)})
            self.think_block["thinking"] += piece
            await self.update({"type": "thinking_delta", "contentIndex": blocks.index(self.think_block),
                               "delta": piece})
        elif kind == "text":
            if self.text_block is None:
                self.text_block = {"type": "text", "text": ""}
                blocks.append(self.text_block)
                await self.update({"type": "text_start", "contentIndex": blocks.index(self.text_block)})
            self.text_block["text"] += piece
            await self.update({"type": "text_delta", "contentIndex": blocks.index(self.text_block), "delta": piece})
        elif kind == "toolcall-open":
            reply = self.reply
            assert isinstance(reply, StreamToolCall)
            self.tool_block = {"type": "toolCall", "id": reply.call_id, "name": reply.name, "arguments": {}}
            blocks.append(self.tool_block)
            await self.update({"type": "toolcall_start", "contentIndex": blocks.index(self.tool_block),
                               "id": reply.call_id, "toolName": reply.name})
            await self.update({"type": "toolcall_delta", "contentIndex": blocks.index(self.tool_block), "delta": ""})
        else:
            assert self.tool_block is not None
            self.partial_args += piece
            await self.update({"type": "toolcall_delta", "contentIndex": blocks.index(self.tool_block),
                               "delta": piece})

    async def end_blocks(self) -> None:
        """The ``*_end`` event of every block, in content order (a tool call's arguments parsed here)."""
        blocks = self.blocks
        for block in list(blocks):
            idx = blocks.index(block)
            if block["type"] == "text":
                await self.update({"type": "text_end", "contentIndex": idx, "content": block["text"]})
            elif block["type"] == "thinking":
                await self.update({"type": "thinking_end", "contentIndex": idx, "content": block["thinking"]})
            else:
                try:
                    block["arguments"] = json.loads(self.partial_args) if self.partial_args else {}
                except ValueError:
                    block["arguments"] = {}
                await self.update({"type": "toolcall_end", "contentIndex": idx, "toolCall": dict(block)})
