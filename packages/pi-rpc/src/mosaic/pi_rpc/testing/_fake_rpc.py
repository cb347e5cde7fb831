"""The fake's RPC mode (rpc-mode.js): one task per stdin line, the command table, the responses.

:meth:`RpcMode.handle_line` is ``handleInputLine`` (rpc-mode.js 600-640): V8's ``JSON.parse`` message in a
``parse`` response with no id, a ``null`` line kills the process (exit 1), an ``extension_ui_response``
resolves a pending dialog or is ignored, anything else goes to the command table :data:`COMMANDS` (the
``switch`` of 293-575) and its response is written after at least one event-loop turn. A prompt answers
from its preflight (the ack) or with the error that stopped it before; a thrown error becomes an error
response with the command's id and type.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, NoReturn

from mosaic.pi_rpc._framing import js_json_dumps
from mosaic.pi_rpc.testing._fake_agent_loop import run_bash
from mosaic.pi_rpc.testing._fake_agent_session import AgentSession
from mosaic.pi_rpc.testing._fake_dialogs import DialogUI
from mosaic.pi_rpc.testing._fake_runtime import Json, tick
from mosaic.pi_rpc.testing._fake_session import ms_now
from mosaic.pi_rpc.testing._jsjson import JsonParseError, js_json_parse

__all__ = ["COMMANDS", "GET_TREE_MAX_PATH", "LLAMA_COMMAND", "RpcMode", "die", "longest_path"]

# get_commands under the seal (FACTS.md (b): the built-in inline llama.cpp extension).
LLAMA_COMMAND: Json = {
    "name": "llama",
    "description": "Manage llama.cpp router models",
    "source": "extension",
    "sourceInfo": {"path": "<inline:llama.cpp>", "source": "inline", "scope": "temporary", "origin": "top-level"},
}

# get_tree's answer nests two levels per node of a path (the node, its children). Pi's output() writes it
# with JSON.stringify, which recurses and throws V8's "Maximum call stack size exceeded" past its stack limit;
# the handler's catch answers that as an error (rpc-mode.js 517-520, 627-639). Measured on the pinned binary
# (docs/pi-0.85.1.md "get_entries and get_tree"): a chain of 2,047 thinking-level nodes answers, 2,048
# fail; of user messages 2,048 answer, 2,049 fail. The fake fails past 2,047 nodes on one path.
GET_TREE_MAX_PATH = 2047
STACK_OVERFLOW = "Maximum call stack size exceeded"

# Pi commands the fake does not model (README "Known limits"): each answers an error naming itself.
_PI_COMMANDS = frozenset({
    "new_session", "set_model", "cycle_model", "get_available_models", "set_thinking_level",
    "cycle_thinking_level", "get_available_thinking_levels", "compact", "get_session_stats", "export_html",
    "switch_session", "fork", "clone", "get_fork_messages",
})


def die(message: str, code: int = 1) -> NoReturn:
    """Print Pi's ``Error: <message>`` to stderr and exit at once (no flush: Node's process.exit)."""
    os.write(2, f"Error: {message}\n".encode())
    os._exit(code)


def js_str(value: Any) -> str:
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
        return "[object Object]" if isinstance(value, dict) else ",".join(js_str(v) for v in value)
    return js_json_dumps(value)


def longest_path(tree: list[Json]) -> int:
    """The most nodes on one root-to-leaf path of a ``getTree()`` answer (iterative: a chain is deep)."""
    longest = 0
    stack = [(node, 1) for node in tree]
    while stack:
        node, depth = stack.pop()
        longest = max(longest, depth)
        stack.extend((child, depth + 1) for child in node["children"])
    return longest


def success(cid: Any, command: str, data: Any = ...) -> Json:
    """``{"id", "type": "response", "command", "success": true[, "data"]}``; no ``id`` key when ``cid`` is None."""
    rec: Json = {"id": cid, "type": "response", "command": command, "success": True}
    if data is not ...:
        rec["data"] = data
    if cid is None:
        del rec["id"]
    return rec


def error(cid: Any, command: Any, message: str) -> Json:
    """An error response; no ``id`` / ``command`` key when they are None (JSON.stringify drops undefined)."""
    rec: Json = {"id": cid, "type": "response", "command": command, "success": False, "error": message}
    if cid is None:
        del rec["id"]
    if command is None:
        del rec["command"]
    return rec


class RpcMode:
    """runRpcMode over one session: the line handler and the command table. ``ui`` is the extension UI
    context's dialog half (the fixture extension's tool and the control op ``dialog`` raise dialogs there;
    ``extension_ui_response`` lines settle them)."""

    def __init__(self, session: AgentSession) -> None:
        self.session = session
        self.ui = DialogUI(self.output, session.control)
        self.tasks: set[asyncio.Task[None]] = set()

    def output(self, obj: Json) -> None:
        self.session.output(obj)

    def state(self) -> Json:
        """get_state's data (rpc-mode.js 363-383)."""
        session, agent, sm = self.session, self.session.agent, self.session.sm
        data: Json = {
            "model": agent.model, "thinkingLevel": agent.thinking, "isStreaming": session.run_active,
            "isCompacting": False, "steeringMode": "one-at-a-time", "followUpMode": "one-at-a-time",
            "sessionFile": sm.path, "sessionId": sm.session_id,
        }
        name = sm.session_name()
        if name is not None:
            data["sessionName"] = name
        data.update({"autoCompactionEnabled": True, "messageCount": len(agent.messages),
                     "pendingMessageCount": len(session.steering) + len(session.follow_up)})
        return data

    async def handle_line(self, line: str) -> None:
        """One stdin line, as its own task (rpc-mode.js 646-648: every line starts at once)."""
        out = self.session.out
        assert out is not None
        try:
            parsed = js_json_parse(line)
        except JsonParseError as exc:
            self.output(error(None, "parse", f"Failed to parse command: {exc.message}"))
            await out.drain()
            return
        if parsed is None:
            # `command.id` on null throws inside the handler, and again inside its catch (rpc-mode.js
            # 627-639): an unhandled rejection, and Node exits 1 (checked on the pinned binary).
            out.flush_now()
            die("TypeError: Cannot read properties of null (reading 'id')")
        if isinstance(parsed, dict) and parsed.get("type") == "extension_ui_response":
            self.ui.respond(parsed)  # rpc-mode.js 615-626: settles a pending dialog or is ignored; no output
            return
        try:
            response = await self.handle_command(parsed)
            await tick()  # `await handleCommand(...)`: at least one microtask before the output
            if response is not None:
                self.output(response)
                await out.drain()
        except Exception as exc:
            cid = parsed.get("id") if isinstance(parsed, dict) else None
            ctype = parsed.get("type") if isinstance(parsed, dict) else None
            self.output(error(cid, ctype, str(exc)))

    async def handle_command(self, cmd: Any) -> Json | None:
        """The response to ``cmd`` (``None`` for a prompt, which answers itself). Raises what Pi's handler
        would throw; :meth:`handle_line` turns it into an error response."""
        cid = cmd.get("id") if isinstance(cmd, dict) else None
        ctype = cmd.get("type") if isinstance(cmd, dict) else None
        handler = COMMANDS.get(ctype) if isinstance(ctype, str) else None
        if handler is not None:
            return await handler(self, cid, cmd)
        # An unhashable type raises here as it always did (TypeError: an error response).
        if ctype in _PI_COMMANDS:
            return error(cid, ctype, f"fake engine: {ctype} is not modelled")
        return error(cid, ctype, f"Unknown command: {js_str(ctype)}")

    # -- the command table (rpc-mode.js 293-575) -------------------------------------------------------

    async def _prompt(self, cid: Any, cmd: Json) -> Json | None:
        # `void session.prompt(...)` (rpc-mode.js 298-320): the ack is written from preflightResult; an
        # error only before it; the case itself answers nothing. The prompt runs inside this line's task,
        # so its synchronous part (the streaming check) runs as soon as the line is read.
        acked = False

        def preflight(ok: bool) -> None:
            nonlocal acked
            if ok:
                acked = True
                self.output(success(cid, "prompt"))

        try:
            await self.session.prompt(cmd.get("message"), streaming_behavior=cmd.get("streamingBehavior"),
                                      preflight=preflight)
        except Exception as exc:
            if not acked:
                self.output(error(cid, "prompt", str(exc)))
        return None

    async def _queue(self, cid: Any, cmd: Json) -> Json | None:
        ctype = cmd["type"]
        text = cmd.get("message")
        if isinstance(text, str) and text.startswith("/") and self.session.is_extension_command(text):
            name = text[1:].split(" ", 1)[0]
            raise RuntimeError(f'Extension command "/{name}" cannot be queued. Use prompt() or execute the '
                               "command when not streaming.")
        if ctype == "steer":
            self.session.queue_steer(str(text))
        else:
            self.session.queue_follow_up(str(text))
        return success(cid, ctype)

    async def _abort(self, cid: Any, cmd: Json) -> Json | None:
        session = self.session
        await session.control.hit("abort")
        if session.retry_abort is not None:
            session.retry_abort.set()
        if session.agent.active is not None:
            session.agent.active.abort.set()
        await session.wait_for_idle()
        return success(cid, "abort")

    async def _clear_queue(self, cid: Any, cmd: Json) -> Json | None:
        await self.session.control.hit("clear-queue")
        return success(cid, "clear_queue", self.session.clear_queue())

    async def _get_state(self, cid: Any, cmd: Json) -> Json | None:
        return success(cid, "get_state", self.state())

    async def _get_entries(self, cid: Any, cmd: Json) -> Json | None:
        sm = self.session.sm
        entries = sm.entries()
        since = cmd.get("since", ...)
        if since is not ...:
            idx = next((i for i, e in enumerate(entries) if isinstance(e, dict) and e.get("id") == since), -1)
            if idx == -1:
                return error(cid, "get_entries", f"Entry not found: {js_str(since)}")
            entries = entries[idx + 1:]
        return success(cid, "get_entries", {"entries": entries, "leafId": sm.leaf_id})

    async def _get_tree(self, cid: Any, cmd: Json) -> Json | None:
        sm = self.session.sm
        tree = sm.tree()
        if longest_path(tree) > GET_TREE_MAX_PATH:
            raise RecursionError(STACK_OVERFLOW)  # handle_line answers it as Pi's catch does
        return success(cid, "get_tree", {"tree": tree, "leafId": sm.leaf_id})

    async def _get_messages(self, cid: Any, cmd: Json) -> Json | None:
        return success(cid, "get_messages", {"messages": self.session.agent.messages})

    async def _get_commands(self, cid: Any, cmd: Json) -> Json | None:
        return success(cid, "get_commands", {"commands": [LLAMA_COMMAND]})

    async def _get_last_assistant_text(self, cid: Any, cmd: Json) -> Json | None:
        return success(cid, "get_last_assistant_text", {"text": self.session.last_assistant_text()})

    async def _set_session_name(self, cid: Any, cmd: Json) -> Json | None:
        name = cmd.get("name")
        if not isinstance(name, str):
            raise TypeError("Cannot read properties of undefined (reading 'trim')")
        if not name.strip():
            return error(cid, "set_session_name", "Session name cannot be empty")
        sm = self.session.sm
        sm.append_session_info(name.strip())
        self.session.emit({"type": "session_info_changed", "name": sm.session_name()})
        return success(cid, "set_session_name")

    async def _bash(self, cid: Any, cmd: Json) -> Json | None:
        session = self.session
        command = cmd.get("command")
        output, code = await run_bash(str(command), session.sm.cwd)
        if output:
            ev: Json = {"type": "bash_execution_update", "id": cid, "delta": output}
            if cid is None:
                del ev["id"]
            session.emit(ev)
        result = {"output": output, "exitCode": code, "cancelled": False, "truncated": False}
        bash_msg = {"role": "bashExecution", "command": command, "output": output, "exitCode": code,
                    "cancelled": False, "truncated": False, "timestamp": ms_now()}
        if session.run_active:
            session.pending_bash.append(bash_msg)  # recorded when the run settles (agent-session.js)
        else:
            session.agent.messages.append(bash_msg)
            session.sm.append_message(bash_msg)
        return success(cid, "bash", result)

    async def _no_op(self, cid: Any, cmd: Json) -> Json | None:
        return success(cid, cmd["type"])

    async def _abort_retry(self, cid: Any, cmd: Json) -> Json | None:
        if self.session.retry_abort is not None:
            self.session.retry_abort.set()
        return success(cid, "abort_retry")

    async def _set_auto_retry(self, cid: Any, cmd: Json) -> Json | None:
        self.session.retry["enabled"] = bool(cmd.get("enabled"))
        return success(cid, "set_auto_retry")


Handler = Callable[[RpcMode, Any, Json], Awaitable[Json | None]]

COMMANDS: Mapping[str, Handler] = {
    "prompt": RpcMode._prompt,
    "steer": RpcMode._queue,
    "follow_up": RpcMode._queue,
    "abort": RpcMode._abort,
    "clear_queue": RpcMode._clear_queue,
    "get_state": RpcMode._get_state,
    "get_entries": RpcMode._get_entries,
    "get_tree": RpcMode._get_tree,
    "get_messages": RpcMode._get_messages,
    "get_commands": RpcMode._get_commands,
    "get_last_assistant_text": RpcMode._get_last_assistant_text,
    "set_session_name": RpcMode._set_session_name,
    "bash": RpcMode._bash,
    "abort_bash": RpcMode._no_op,
    "set_auto_compaction": RpcMode._no_op,
    "set_steering_mode": RpcMode._no_op,
    "set_follow_up_mode": RpcMode._no_op,
    "abort_retry": RpcMode._abort_retry,
    "set_auto_retry": RpcMode._set_auto_retry,
}
"""The command types the fake answers (rpc-mode.js's switch), type -> handler."""
