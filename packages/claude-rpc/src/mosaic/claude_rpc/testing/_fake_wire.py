"""The fake engine's messages: every line it writes, built in the shapes the committed recordings of the
pinned binary show (``fixtures/claude-2.1.283/recordings/sealed-*.jsonl``), plus the fixed texts the binary
writes. Values the binary computes (costs, durations, the tool list's contents) are small stand-ins; the keys
and the fields the link and the conformance facts read are the binary's.
"""

from __future__ import annotations

import datetime
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

JsonObject = dict[str, Any]

VERSION = "2.1.283"
MODEL_SHOWN = "claude-opus-5-5[1m]"
CAPABILITIES = ["interrupt_receipt_v1", "interrupt_cancel_queued_v1", "msg_lifecycle_v1", "mcp_read_resource_v1",
                "mcp_tool_ui_meta_v1"]
TOOLS = ["Task", "AskUserQuestion", "Bash", "Edit", "Read", "Write"]
PERMISSION_MODES = ("acceptEdits", "auto", "bypassPermissions", "default", "dontAsk", "plan")
INTERRUPTED = "[Request interrupted by user]"
INTERRUPTED_FOR_TOOL = "[Request interrupted by user for tool use]"
REJECTED = ("The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
            "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
            "tell you how to proceed.")
STREAM_CLOSED = "Tool permission request failed: AbortError: Tool permission stream closed before response received"
NO_OUTPUT = "(Bash completed with no output)"
FOLD_NOTE = ("The user sent a new message while you were working:\n{text}\n\nThis is how Claude Code surfaces "
             "messages sent while a turn is running.")
# Commands the fake allows without asking (the binary's read-only classification, for what the scripts use).
READ_ONLY = ("echo", "pwd", "ls", "true", "printf")


def new_uuid() -> str:
    return str(uuid.uuid4())


def now_stamp() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def control_success(request_id: str, response: Mapping[str, Any]) -> JsonObject:
    return {"type": "control_response", "response": {"subtype": "success", "request_id": request_id,
                                                      "response": dict(response)}}


def control_error(request_id: str, error: str) -> JsonObject:
    return {"type": "control_response", "response": {"subtype": "error", "request_id": request_id, "error": error}}


def initialize_answer(*, mode: str, session_state: str, tmpdir: str) -> JsonObject:
    """The 18 keys of the binary's initialize answer (``pending_permission_requests`` absent, as on the pin)."""
    return {"commands": [], "agents": [], "output_style": "default", "available_output_styles": ["default"],
            "models": [{"value": "default", "displayName": "Default"}], "account": {"apiKeySource": "ANTHROPIC_API_KEY"},
            "pid": os.getpid(), "fast_mode_state": "off", "fast_mode_disabled_reason": "sdk_opt_in_required",
            "current_permission_mode": mode, "analytics_disabled": True, "session_state": session_state,
            "remote_control_available": False, "remote_control_auto_enable": False,
            "remote_control_auto_on_by_default": False, "remote_control_auto_connect_default": False,
            "ide_rc_auto_enable_gate": False, "user_output_styles_dir": os.path.join(tmpdir, "output-styles")}


def lifecycle(command_uuid: str, state: str, session: str) -> JsonObject:
    return {"type": "command_lifecycle", "command_uuid": command_uuid, "state": state, "uuid": new_uuid(),
            "session_id": session}


def init_message(*, session: str, cwd: str, mode: str, config_dir: str, tmpdir: str, slug: str) -> JsonObject:
    return {"type": "system", "subtype": "init", "cwd": cwd, "session_id": session, "tools": TOOLS, "mcp_servers": [],
            "model": MODEL_SHOWN, "permissionMode": mode, "slash_commands": [], "terminal_slash_commands": [],
            "apiKeySource": "ANTHROPIC_API_KEY", "claude_code_version": VERSION, "output_style": "default",
            "agents": [], "skills": [], "plugins": [], "capabilities": CAPABILITIES, "analytics_disabled": True,
            "product_feedback_disabled": True, "uuid": new_uuid(),
            "memory_paths": {"auto": os.path.join(config_dir, "projects", slug, "memory") + "/"},
            "messaging_socket_path": os.path.join(tmpdir, "cc-socks", f"{os.getpid()}.sock"),
            "fast_mode_state": "off", "fast_mode_disabled_reason": "sdk_opt_in_required",
            "per_turn_effort_active": True, "view_mode": "default"}


def status(session: str, **fields: Any) -> JsonObject:
    return {"type": "system", "subtype": "status", **fields, "session_id": session, "uuid": new_uuid()}


def assistant(message: Mapping[str, Any], block: Mapping[str, Any], *, session: str, prompt: str | None,
              aborted: bool = False, uuid: str | None = None) -> JsonObject:
    """An ``assistant`` record; ``uuid`` the transcript entry's (the binary's stream names the entry it wrote)."""
    body = {"id": message.get("id"), "type": "message", "role": "assistant", "model": message.get("model"),
            "content": [dict(block)], "stop_reason": None, "stop_sequence": None,
            "usage": message.get("usage"), "context_management": None}
    out: JsonObject = {"type": "assistant", "message": body, "parent_tool_use_id": None, "session_id": session,
                       "uuid": uuid or new_uuid(), "timestamp": now_stamp()}
    if aborted:
        out["aborted"] = True
    if prompt is not None:
        out["user_message_uuid"] = prompt
        out["user_message_uuids"] = [prompt]
    return out


def user_text(text: str, *, session: str) -> JsonObject:
    return {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": text}]},
            "parent_tool_use_id": None, "session_id": session, "uuid": new_uuid(), "timestamp": now_stamp()}


def tool_result(tool_use_id: str, content: str, *, is_error: bool, session: str, result: Any,
                meta: str | None = None) -> JsonObject:
    block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": content, "is_error": is_error}
    out: JsonObject = {"type": "user", "message": {"role": "user", "content": [block]}, "parent_tool_use_id": None,
                       "session_id": session, "uuid": new_uuid(), "timestamp": now_stamp(), "tool_use_result": result}
    if meta is not None:
        out["tool_result_meta"] = [{"id": tool_use_id, "non_execution_kind": meta}]
    return out


def can_use_tool(request_id: str, tool_use: Mapping[str, Any], *, cwd: str) -> JsonObject:
    tool_input = dict(tool_use.get("input") or {})
    command = str(tool_input.get("command", ""))
    words = command.split()
    blocked = os.path.join(cwd, words[-1]) if len(words) > 1 else cwd
    return {"type": "control_request", "request_id": request_id, "request": {
        "subtype": "can_use_tool", "tool_name": tool_use.get("name"), "display_name": tool_use.get("name"),
        "input": tool_input, "description": tool_input.get("description"),
        "permission_suggestions": [
            {"type": "addRules", "rules": [{"toolName": tool_use.get("name"), "ruleContent": f"{command} *"}],
             "behavior": "allow", "destination": "localSettings"},
            {"type": "addDirectories", "directories": [cwd], "destination": "session"},
            {"type": "setMode", "mode": "acceptEdits", "destination": "session"}],
        "blocked_path": blocked, "tool_use_id": tool_use.get("id")}}


def result(*, subtype: str, is_error: bool, stop_reason: str | None, num_turns: int, terminal: str | None,
           session: str, text: str | None, prompt: str | None, denials: Sequence[Mapping[str, Any]]) -> JsonObject:
    out: JsonObject = {"type": "result", "subtype": subtype, "is_error": is_error, "duration_ms": 1,
                       "duration_api_ms": 1, "num_turns": num_turns, "stop_reason": stop_reason, "session_id": session,
                       "total_cost_usd": 0, "usage": {}, "modelUsage": {}, "permission_denials": list(denials),
                       "terminal_reason": terminal, "uuid": new_uuid()}
    if not is_error:
        out["result"] = text or ""
    if prompt is not None:
        out["user_message_uuid"] = prompt
    return out


def resume_failure() -> JsonObject:
    """The one line ``--resume`` of an unknown session writes before it exits 1."""
    return {"type": "result", "subtype": "error_during_execution", "is_error": True, "duration_ms": 0,
            "duration_api_ms": 0, "num_turns": 0, "stop_reason": None, "session_id": new_uuid(), "total_cost_usd": 0,
            "usage": {}, "modelUsage": {}, "permission_denials": [], "uuid": new_uuid()}
