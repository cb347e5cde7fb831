"""The stream-json recordings of the pinned binary (brief §8 B1 part 3), made against the scripted server.

Each recording is one process started as ``claude -p --input-format stream-json --output-format stream-json
--verbose --permission-prompt-tool stdio`` (:data:`mosaic.claude_rpc.testing.drive.STREAM_JSON_ARGS`) in a
scratch directory (:func:`mosaic.claude_rpc.testing.drive.claude_env`), driven by one function of
:data:`RECORDINGS` and written as one line per message, ``{"dir": "in"|"out", "msg": ...}``, in the order
the driver wrote and read them. :func:`redact` replaces the scratch directory (as a path and as a slug) by
``<scratch>`` and ``<scratch-slug>``. The interrupts wait on the scripted server's log (the slow stream has
sent its first deltas; the permission request is out), never on a sleep.

Each maker checks what it relies on and raises :class:`mosaic.claude_rpc.testing.drive.DriveError` when the
binary does something else, and returns the facts its recording shows (:class:`Made`), which the
generator writes into ``fixtures/MANIFEST.json``.
"""

from __future__ import annotations

import base64
import json
import os
import struct
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.claude_rpc.testing.drive import (
    FAKE_KEY,
    STREAM_JSON_ARGS,
    WAIT,
    DriveError,
    StreamSession,
    claude_env,
)
from mosaic.claude_rpc.testing.model_server import (
    DEFAULT_SCENARIOS,
    SLOW_DELTAS,
    ModelServer,
    RecordedRequest,
    Scenario,
    TextReply,
    directive,
)

__all__ = [
    "OTHER_SESSION_UUID",
    "QUEUED_UUID",
    "RECORDINGS",
    "SESSION_UUID",
    "U1",
    "U2",
    "U3",
    "Made",
    "Recording",
    "answer_line",
    "control_line",
    "engine_start",
    "fast_slow_scenarios",
    "lifecycle",
    "make_recording",
    "reduced_transcript",
    "user_line",
    "png_square",
    "redact",
    "shape",
    "slug",
]

JsonObject = dict[str, Any]
QUEUED_UUID = "00000000-0000-4000-8000-00000000c0de"


def slug(path: str) -> str:
    """The project directory name Claude Code 2.1.283 gives ``path`` (docs/claude-2.1.283.md "Slug"): every
    UTF-16 code unit outside ``[a-zA-Z0-9]`` becomes ``-``. Paths whose slug would exceed 200 characters get
    a hash suffix this function cannot compute (``Bun.hash``): it raises ``ValueError`` for them."""
    units = len(path.encode("utf-16-le")) // 2
    out = "".join(c if c.isascii() and c.isalnum() else "-" * (2 if ord(c) > 0xFFFF else 1) for c in path)
    if units > 200:
        raise ValueError(f"the slug of a {units}-unit path carries a hash this function does not compute")
    return out


def redact(value: Any, scratch: str) -> Any:
    """``value`` with every occurrence of the scratch directory replaced: as a path by ``<scratch>``, as a
    slug by ``<scratch-slug>`` (strings anywhere in nested lists and objects, keys included)."""
    pairs = ((scratch, "<scratch>"), (slug(scratch), "<scratch-slug>"))

    def one(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    if isinstance(value, str):
        return one(value)
    if isinstance(value, list):
        return [redact(v, scratch) for v in value]
    if isinstance(value, dict):
        return {one(k): redact(v, scratch) for k, v in value.items()}
    return value


def shape(records: Sequence[JsonObject]) -> list[tuple[str, str, str]]:
    """A recording as the kinds of its lines, values left out: ``(dir, type, subtype)`` where the subtype
    is the message's ``subtype``, or for control messages the request's or response's subtype."""
    out: list[tuple[str, str, str]] = []
    for record in records:
        msg = record.get("msg") or {}
        kind = str(msg.get("type"))
        sub = msg.get("subtype")
        if kind == "control_request":
            sub = (msg.get("request") or {}).get("subtype")
        elif kind == "control_response":
            sub = (msg.get("response") or {}).get("subtype")
        out.append((str(record.get("dir")), kind, "" if sub is None else str(sub)))
    return out


def png_square(size: int = 16, rgb: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    """A valid ``size`` x ``size`` RGB PNG of one colour, made here (no image library)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * size
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(row * size, 9))
            + chunk(b"IEND", b""))


@dataclass
class Made:
    """What one recording run produced: its records (not yet redacted), exit code and observed facts."""

    records: list[JsonObject]
    exit_code: int
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recording:
    """One recording: its file name, what it does, and its maker.

    A ``sealed`` recording runs the engine as the seal launches it (``build_sealed_args`` for the session
    :data:`SESSION_UUID`, ``sealed_env``); it can be made by the fake engine too (the conformance suite).
    ``prepare`` runs before the recorded process with a starter of more sessions; ``resume`` makes the
    recorded process ``--resume`` the session; ``scenarios`` gives the scripted server's table."""

    name: str
    scenario: str
    make: Callable[[StreamSession, ModelServer, Path], dict[str, Any]]
    sealed: bool = False
    partial_messages: bool = False
    resume: bool = False
    prepare: Callable[[Callable[[Sequence[str]], StreamSession], ModelServer, Path], dict[str, Any]] | None = None
    scenarios: Callable[[], tuple[Scenario, ...]] | None = None


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise DriveError(f"the binary did not do what the recording relies on: {what}")


def _initialize(s: StreamSession, request_id: str = "req_1") -> JsonObject:
    since = s.mark()
    s.control(request_id, {"subtype": "initialize", "hooks": None})
    reply = s.response_to(request_id, since=since)["response"]
    _expect(reply.get("subtype") == "success", f"initialize {request_id} answered success")
    return dict(reply.get("response") or {})


def _turn(s: StreamSession, content: str | list[JsonObject]) -> tuple[JsonObject, JsonObject]:
    """Send one prompt; return its system/init and its result."""
    since = s.mark()
    s.user(content)
    result = s.result(since=since)
    init = s.wait(lambda o: o.get("type") == "system" and o.get("subtype") == "init", since=since)
    return init, result


def _initialize_only(s: StreamSession, _srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    reply = _initialize(s)
    return {"initialize_keys": sorted(reply),
            "pending_permission_requests_present": "pending_permission_requests" in reply,
            "session_state": reply.get("session_state")}


def _text(s: StreamSession, _srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s)
    init, result = _turn(s, "hello text")
    _expect(result.get("subtype") == "success" and result.get("result") == "Reply to: hello text", "a text reply")
    caps = list(init.get("capabilities") or [])
    return {"capabilities": caps, "interrupt_cancel_queued_v1_present": "interrupt_cancel_queued_v1" in caps,
            "claude_code_version": init.get("claude_code_version"), "init_keys": sorted(init)}


def _image(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s)
    data = base64.b64encode(png_square()).decode()
    _, result = _turn(s, [{"type": "text", "text": "what is in this image"},
                          {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}])
    seen = [r for r in srv.requests if r.scenario == "image"]
    _expect(len(seen) == 1 and result.get("subtype") == "success", "the image block reached the model")
    return {"result": result.get("result"), "b64_chars_sent": len(data)}


def _permission(s: StreamSession, cwd: Path, name: str, allow: bool) -> JsonObject:
    _initialize(s)
    since = s.mark()
    s.user(f"BASH: touch {name}")
    request = s.wait(lambda o: o.get("type") == "control_request", since=since)
    _expect((request.get("request") or {}).get("subtype") == "can_use_tool", "a can_use_tool request")
    body = request["request"]
    if allow:
        s.answer(request["request_id"], {"behavior": "allow", "updatedInput": body["input"]})
    else:
        s.answer(request["request_id"], {"behavior": "deny", "message": "denied by the test client"})
    result = s.result(since=since)
    _expect(result.get("subtype") == "success", "the turn ends normally after the answer")
    _expect((cwd / name).exists() == allow, f"{name} exists only when allowed")
    results = [b for o in s.out[since:] if o.get("type") == "user"
               for b in (o.get("message") or {}).get("content") or [] if isinstance(b, dict)
               and b.get("type") == "tool_result"]
    _expect(len(results) == 1 and results[0].get("is_error") is (not allow), "one tool_result, is_error = denied")
    return {"suggestions": [x.get("type") for x in body.get("permission_suggestions") or []],
            "request_keys": sorted(body), "tool_result_is_error": results[0].get("is_error")}


def _allow(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    return _permission(s, cwd, "made-by-allow", True)


def _deny(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    return _permission(s, cwd, "made-by-deny", False)


def _slow_started(srv: ModelServer) -> Callable[[tuple[RecordedRequest, ...]], bool]:
    # message_start, content_block_start and two deltas are out: the model is mid-stream.
    return lambda rs: any(r.scenario == "slow" and r.events >= 4 for r in rs)


def _interrupt_mid_stream(s: StreamSession, srv: ModelServer, _cwd: Path, *, cancel_queued: bool) -> dict[str, Any]:
    _initialize(s)
    since = s.mark()
    s.user("SLOW please")
    srv.wait_for(_slow_started(srv), WAIT)
    if cancel_queued:  # only uuid-stamped messages are listed as cancelled (sdk.d.ts: cancel_queued)
        s.send({"type": "user", "message": {"role": "user", "content": "queued while busy"},
                "parent_tool_use_id": None, "session_id": "default", "uuid": QUEUED_UUID})
    else:
        s.user("queued while busy")
    request: JsonObject = {"subtype": "interrupt"}
    if cancel_queued:
        request["cancel_queued"] = True
    s.control("req_int", request)
    reply = s.response_to("req_int", since=since)["response"]
    first = s.result(since=since)
    _expect(first.get("subtype") == "error_during_execution", "the interrupted turn ends error_during_execution")
    facts: dict[str, Any] = {"interrupt_response": reply.get("response"), "interrupted_result": first.get("subtype")}
    if not cancel_queued:
        second = s.result(since=s.out.index(first) + 1)
        _expect(second.get("result") == "Reply to: queued while busy", "the queued message runs after the interrupt")
        facts["queued_result"] = second.get("result")
    return facts


def _interrupt(s: StreamSession, srv: ModelServer, cwd: Path) -> dict[str, Any]:
    return _interrupt_mid_stream(s, srv, cwd, cancel_queued=False)


def _interrupt_cancel_queued(s: StreamSession, srv: ModelServer, cwd: Path) -> dict[str, Any]:
    facts = _interrupt_mid_stream(s, srv, cwd, cancel_queued=True)
    ran = [r for r in srv.requests if r.last_user_text == "queued while busy"]
    facts["queued_message_reached_model"] = bool(ran)
    return facts


def _interrupt_pending(s: StreamSession, srv: ModelServer, cwd: Path) -> dict[str, Any]:
    _initialize(s)
    since = s.mark()
    s.user("BASH: touch pending-one")
    request = s.wait(lambda o: o.get("type") == "control_request", since=since)
    again = _initialize(s, "req_2")
    s.control("req_int", {"subtype": "interrupt"})
    reply = s.response_to("req_int", since=since)["response"]
    cancel = s.wait(lambda o: o.get("type") == "control_cancel_request", since=since)
    result = s.result(since=since)
    late_from = s.mark()
    s.answer(request["request_id"], {"behavior": "allow", "updatedInput": request["request"]["input"]})
    _expect(cancel.get("request_id") == request["request_id"], "the cancel names the pending request")
    return {"reinitialize_keys": sorted(again), "reinitialize_session_state": again.get("session_state"),
            "pending_permission_requests_present": "pending_permission_requests" in again,
            "interrupt_response": reply.get("response"), "result_subtype": result.get("subtype"),
            "result_stop_reason": result.get("stop_reason"), "late_allow_output_from": late_from,
            "pending_file_created": (cwd / "pending-one").exists()}


# ---------------------------------------------------------------------------------------------------------
# The sealed recordings (issue 32): the engine as the seal launches it, driven the way the link drives it.
# Control request ids are `r<n>` in the order the link's core mints them; every user message carries one of
# the fixed uuids below (the link always stamps one: only uuid-stamped messages get lifecycle frames and
# appear in an interrupt's receipt).
# ---------------------------------------------------------------------------------------------------------

SESSION_UUID = "00000000-0000-4000-8000-00000000005e"
OTHER_SESSION_UUID = "00000000-0000-4000-8000-0000000000ff"
U1 = "00000000-0000-4000-8000-000000000001"
U2 = "00000000-0000-4000-8000-000000000002"
U3 = "00000000-0000-4000-8000-000000000003"
FAST_SLOW_INTERVAL = 0.02


def fast_slow_scenarios() -> tuple[Scenario, ...]:
    """The default script with the `SLOW` stream 0.02 s per delta (about 1.2 s in all): a stream that is
    still running when stdin closes, without the 15 s of the default."""
    fast = Scenario("slow", directive("SLOW"), lambda _r: TextReply(SLOW_DELTAS, interval=FAST_SLOW_INTERVAL),
                    "60 deltas 0.02 s apart")
    return tuple(fast if sc.name == "slow" else sc for sc in DEFAULT_SCENARIOS)


def user_line(content: str | list[JsonObject], uid: str | None) -> JsonObject:
    """A user message as the link writes it (the SDK's shape plus the link's uuid)."""
    msg: JsonObject = {"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                       "session_id": "default"}
    if uid is not None:
        msg["uuid"] = uid
    return msg


def control_line(request_id: str, request: JsonObject) -> JsonObject:
    return {"type": "control_request", "request_id": request_id, "request": request}


def answer_line(request_id: str, response: JsonObject) -> JsonObject:
    return {"type": "control_response", "response": {"subtype": "success", "request_id": request_id,
                                                     "response": response}}


def lifecycle(s: StreamSession, since: int = 0) -> list[list[str]]:
    """The ``command_lifecycle`` frames read so far, as ``[command_uuid, state]``."""
    return [[str(o.get("command_uuid")), str(o.get("state"))] for o in s.out[since:]
            if o.get("type") == "command_lifecycle"]


def _is_lifecycle(uid: str, state: str) -> Callable[[JsonObject], bool]:
    return lambda o: o.get("type") == "command_lifecycle" and o.get("command_uuid") == uid and o.get("state") == state


def _ask(s: StreamSession, text: str, uid: str) -> JsonObject:
    """Send a uuid-stamped `BASH: ...` prompt; return the can_use_tool request it raises."""
    since = s.mark()
    s.send(user_line(text, uid))
    request = s.wait(lambda o: o.get("type") == "control_request", since=since)
    _expect((request.get("request") or {}).get("subtype") == "can_use_tool", "a can_use_tool request")
    return request


def _tool_results(s: StreamSession, since: int = 0) -> list[JsonObject]:
    return [b for o in s.out[since:] if o.get("type") == "user"
            for b in (o.get("message") or {}).get("content") or [] if isinstance(b, dict) and b.get("type") == "tool_result"]


def _results(s: StreamSession, since: int = 0) -> list[list[Any]]:
    return [[o.get("subtype"), o.get("is_error"), o.get("stop_reason"), o.get("num_turns")]
            for o in s.out[since:] if o.get("type") == "result"]


def _init_sessions(s: StreamSession) -> list[str]:
    return [str(o.get("session_id")) for o in s.out if o.get("type") == "system" and o.get("subtype") == "init"]


def _s_text(s: StreamSession, _srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    s.send(user_line("hello text", U1))
    s.wait(_is_lifecycle(U1, "completed"))
    return {"lifecycle": lifecycle(s), "results": _results(s), "init_sessions": _init_sessions(s)}


def _s_permission(s: StreamSession, cwd: Path, allow: bool) -> dict[str, Any]:
    _initialize(s, "r1")
    name = "made-by-allow" if allow else "made-by-deny"
    request = _ask(s, f"BASH: touch {name}", U1)
    body = request["request"]
    if allow:
        s.send(answer_line(request["request_id"], {"behavior": "allow", "updatedInput": body["input"]}))
    else:
        s.send(answer_line(request["request_id"], {"behavior": "deny", "message": "denied by the test client"}))
    s.wait(_is_lifecycle(U1, "completed"))
    _expect((cwd / name).exists() == allow, f"{name} exists only when allowed")
    return {"lifecycle": lifecycle(s), "results": _results(s), "request_keys": sorted(body),
            "suggestions": [x.get("type") for x in body.get("permission_suggestions") or []],
            "tool_results": [[r.get("is_error"), str(r.get("content"))[:60]] for r in _tool_results(s)]}


def _s_allow(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    return _s_permission(s, cwd, True)


def _s_deny(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    return _s_permission(s, cwd, False)


def _s_queued_mid_turn(s: StreamSession, srv: ModelServer, cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    request = _ask(s, "BASH: touch mid-turn", U1)
    s.send(user_line("queued mid turn", U2))
    s.wait(_is_lifecycle(U2, "queued"))
    s.send(answer_line(request["request_id"], {"behavior": "allow", "updatedInput": request["request"]["input"]}))
    s.wait(_is_lifecycle(U1, "completed"))
    carried = [r.scenario for r in srv.requests if r.route == "/v1/messages" and "queued mid turn" in
               json.dumps(r.body)]
    return {"lifecycle": lifecycle(s), "results": _results(s), "init_sessions": len(_init_sessions(s)),
            "requests_carrying_the_queued_text": carried, "file_created": (cwd / "mid-turn").exists()}


def _slow_then(s: StreamSession, srv: ModelServer, lines: Sequence[JsonObject]) -> JsonObject:
    """Start a uuid-stamped slow stream, wait until it is streaming, then write ``lines`` in one write;
    return the interrupt's answer (its request id is r2)."""
    _initialize(s, "r1")
    s.send(user_line("SLOW please", U1))
    srv.wait_for(_slow_started(srv), WAIT)
    since = s.mark()
    s.send_together(lines)
    return dict(s.response_to("r2", since=since)["response"])


def _s_interrupt_still_queued(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    answer = _slow_then(s, srv, [user_line("queued while busy", U2), control_line("r2", {"subtype": "interrupt"})])
    s.wait(_is_lifecycle(U2, "completed"))
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s)}


def _s_interrupt_cancel_queued(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    answer = _slow_then(s, srv, [user_line("queued while busy", U2),
                                 control_line("r2", {"subtype": "interrupt", "cancel_queued": True})])
    s.wait(_is_lifecycle(U1, "cancelled"))
    ran = [r for r in srv.requests if r.last_user_text == "queued while busy"]
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s),
            "queued_message_reached_model": bool(ran)}


def _s_interrupt_no_uuid(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    answer = _slow_then(s, srv, [user_line("queued without uuid", None),
                                 control_line("r2", {"subtype": "interrupt", "cancel_queued": True})])
    s.wait(_is_lifecycle(U1, "cancelled"))
    ran = [r for r in srv.requests if r.last_user_text == "queued without uuid"]
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s),
            "queued_message_reached_model": bool(ran)}


def _s_interrupt_then_message(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    answer = _slow_then(s, srv, [control_line("r2", {"subtype": "interrupt", "cancel_queued": True}),
                                 user_line("after the interrupt", U2)])
    s.wait(_is_lifecycle(U2, "completed"))
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s)}


def _s_interrupt_pending(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    request = _ask(s, "BASH: touch pending-one", U1)
    since = s.mark()
    s.send(control_line("r2", {"subtype": "interrupt", "cancel_queued": True}))
    answer = s.response_to("r2", since=since)["response"]
    cancel = s.wait(lambda o: o.get("type") == "control_cancel_request", since=since)
    s.wait(_is_lifecycle(U1, "cancelled"))
    late_from = s.mark()
    s.send(answer_line(request["request_id"], {"behavior": "allow", "updatedInput": request["request"]["input"]}))
    code = s.close()
    _expect(cancel.get("request_id") == request["request_id"], "the cancel names the pending request")
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s),
            "late_allow_output": [o.get("type") for o in s.out[late_from:]], "exit_after_late_allow": code,
            "pending_file_created": (cwd / "pending-one").exists(),
            "tool_results": [[r.get("is_error"), str(r.get("content"))[:60]] for r in _tool_results(s)]}


def _s_allow_then_interrupt(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    request = _ask(s, "BASH: touch allowed-then-interrupted", U1)
    since = s.mark()
    s.send_together([answer_line(request["request_id"], {"behavior": "allow",
                                                         "updatedInput": request["request"]["input"]}),
                     control_line("r2", {"subtype": "interrupt", "cancel_queued": True})])
    answer = s.response_to("r2", since=since)["response"]
    s.wait(_is_lifecycle(U1, "cancelled"))
    return {"interrupt_response": answer.get("response"), "lifecycle": lifecycle(s), "results": _results(s),
            "cancel_requests": [o.get("request_id") == request["request_id"] for o in s.out
                                if o.get("type") == "control_cancel_request"],
            "file_created": (cwd / "allowed-then-interrupted").exists(),
            "tool_results": [[r.get("is_error"), str(r.get("content"))[:60]] for r in _tool_results(s)]}


def _s_eof_mid_stream(s: StreamSession, srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    s.send(user_line("SLOW please", U1))
    srv.wait_for(_slow_started(srv), WAIT)
    code = s.close()
    streamed = [r for r in srv.requests if r.scenario == "slow"]
    return {"exit": code, "lifecycle": lifecycle(s), "results": _results(s),
            "stream_outcome": [r.outcome for r in streamed],
            "reply_complete": [o.get("result") for o in s.out if o.get("type") == "result"] == ["".join(SLOW_DELTAS)]}


def _s_eof_pending(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    _ask(s, "BASH: touch eof-pending", U1)
    code = s.close()
    return {"exit": code, "lifecycle": lifecycle(s), "results": _results(s),
            "file_created": (cwd / "eof-pending").exists(),
            "tool_results": [[r.get("is_error"), str(r.get("content"))[:60]] for r in _tool_results(s)]}


def _s_controls(s: StreamSession, _srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    bodies = []
    for rid, request in (("r2", {"subtype": "interrupt", "cancel_queued": True}),
                         ("r3", {"subtype": "set_permission_mode", "mode": "plan"}),
                         ("r4", {"subtype": "set_permission_mode", "mode": "default"}),
                         ("x1", {"subtype": "no_such_thing"})):
        since = s.mark()
        s.send(control_line(rid, request))
        reply = s.response_to(rid, since=since)["response"]
        bodies.append([rid, reply.get("subtype"), reply.get("response"), reply.get("error")])
    since = s.mark()
    s.send(answer_line(OTHER_SESSION_UUID, {"behavior": "allow", "updatedInput": {}}))
    code = s.close()
    statuses = [o.get("permissionMode") for o in s.out if o.get("type") == "system" and o.get("subtype") == "status"]
    return {"responses": bodies, "statuses": statuses, "answer_for_unknown_id_output": len(s.out) - since,
            "exit": code}


def _s_partial(s: StreamSession, _srv: ModelServer, _cwd: Path) -> dict[str, Any]:
    _initialize(s, "r1")
    s.send(user_line("hello partial", U1))
    s.wait(_is_lifecycle(U1, "completed"))
    return {"stream_events": [(o.get("event") or {}).get("type") for o in s.out if o.get("type") == "stream_event"],
            "statuses": [o.get("status") for o in s.out if o.get("type") == "system" and o.get("subtype") == "status"],
            "lifecycle": lifecycle(s), "results": _results(s)}


def _first_session(start: Callable[[Sequence[str]], StreamSession], srv: ModelServer, cwd: Path) -> dict[str, Any]:
    """Before the recorded --resume: make the session (one turn), then try the two launches that must fail."""
    from mosaic.claude_rpc._seal import build_sealed_args  # the seal, not a copy of its argv

    with start(build_sealed_args(session_id=SESSION_UUID, resume=False)) as first:
        _initialize(first, "r1")
        first.send(user_line("first turn", U1))
        first.wait(_is_lifecycle(U1, "completed"))
        made = first.close()
    facts: dict[str, Any] = {"first_exit": made}
    for key, args in (("session_id_in_use", build_sealed_args(session_id=SESSION_UUID, resume=False)),
                      ("resume_unknown", build_sealed_args(session_id=OTHER_SESSION_UUID, resume=True))):
        with start(args) as again:
            code = again.close()
            facts[key] = {"exit": code, "out": [[o.get("type"), o.get("subtype")] for o in again.out],
                          "stderr": bytes(again.stderr).decode(errors="replace")}
    return facts


def reduced_transcript(before: Sequence[JsonObject], after: Sequence[JsonObject]) -> dict[str, Any]:
    """The two reads of a transcript as the load check sees them: each line cut to ``type``, ``uuid``,
    ``parentUuid``, ``sessionId``, ``leafUuid`` and (for assistant entries) the message's ``model`` and
    ``content``, every uuid the binary made renamed ``<uuid:N>`` by first appearance (the link's own U1..U3 and
    the session id kept), so the same run gives the same facts each time."""
    names: dict[str, str] = {}
    keep = {SESSION_UUID, U1, U2, U3}

    def name(value: Any) -> Any:
        if not isinstance(value, str) or value in keep:
            return value
        return names.setdefault(value, f"<uuid:{len(names)}>")

    def cut(line: JsonObject) -> JsonObject:
        out: JsonObject = {"type": line.get("type")}
        for key in ("uuid", "parentUuid", "sessionId", "leafUuid"):
            if key in line:
                out[key] = name(line[key])
        message = line.get("message")
        if line.get("type") == "assistant" and isinstance(message, dict):
            out["message"] = {"model": message.get("model"), "content": message.get("content")}
        return out

    return {"before": [cut(x) for x in before], "added": [cut(x) for x in after[len(before):]]}


def _transcript(cwd: Path, config_dir: Path) -> list[JsonObject]:
    path = config_dir / "projects" / slug(str(cwd.resolve())) / f"{SESSION_UUID}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _s_resume(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    from mosaic.claude_rpc._resume import leaf_by_rule

    config_dir = cwd.parent / "claude"
    before = _transcript(cwd, config_dir)
    _rule, leaf = leaf_by_rule(before)
    _initialize(s, "r1")
    s.send(user_line("second turn", U2))
    s.wait(_is_lifecycle(U2, "completed"))
    after = _transcript(cwd, config_dir)
    added = [e for e in after[len(before):] if e.get("type") == "user"]
    _expect(after[: len(before)] == before, "--resume appends to the claimed session's file")
    return {"init_sessions_are_the_claimed_id": _init_sessions(s) == [SESSION_UUID],
            "new_user_entry_uuid_is_ours": [e.get("uuid") == U2 for e in added],
            "new_user_entry_parent_is_the_leaf_by_rule": [e.get("parentUuid") == leaf for e in added],
            "transcript": reduced_transcript(before, after), "lifecycle": lifecycle(s), "results": _results(s)}


def _first_interrupted(start: Callable[[Sequence[str]], StreamSession], _srv: ModelServer,
                       cwd: Path) -> dict[str, Any]:
    """Before the recorded --resume: make the session with one turn that ends interrupted at a pending
    permission (its leaf is then a user entry)."""
    from mosaic.claude_rpc._seal import build_sealed_args

    with start(build_sealed_args(session_id=SESSION_UUID, resume=False)) as first:
        _initialize(first, "r1")
        _ask(first, "BASH: touch pending-one", U1)
        first.send(control_line("r2", {"subtype": "interrupt", "cancel_queued": True}))
        first.wait(_is_lifecycle(U1, "cancelled"))
        made = first.close()
    return {"first_exit": made}


def _s_resume_after_interrupt(s: StreamSession, _srv: ModelServer, cwd: Path) -> dict[str, Any]:
    from mosaic.claude_rpc._resume import check_resumed

    config_dir = cwd.parent / "claude"
    before = _transcript(cwd, config_dir)
    _initialize(s, "r1")
    s.send(user_line("second turn", U2))
    s.wait(_is_lifecycle(U2, "completed"))
    after = _transcript(cwd, config_dir)
    check = check_resumed(before, after, session_id=SESSION_UUID, message_uuid=U2)
    closing = [e for e in after[len(before):] if e.get("uuid") in check.synthetic]
    return {"init_sessions_are_the_claimed_id": _init_sessions(s) == [SESSION_UUID],
            "resume_check": [check.ok, check.reason, len(check.synthetic)],
            "synthetic_entries": [[e.get("type"), (e.get("message") or {}).get("model"),
                                   (e.get("message") or {}).get("content")] for e in closing],
            "synthetic_hangs_on_the_leaf": [e.get("parentUuid") == check.leaf for e in closing],
            "transcript": reduced_transcript(before, after), "lifecycle": lifecycle(s), "results": _results(s)}


RECORDINGS: tuple[Recording, ...] = (
    Recording("initialize", "initialize on a fresh process, then stdin EOF", _initialize_only),
    Recording("text", "initialize; the prompt `hello text`; EOF", _text),
    Recording("image", "initialize; a text block and a 16x16 PNG image block; EOF", _image),
    Recording("permission-allow", "initialize; `BASH: touch made-by-allow`; can_use_tool answered allow; EOF",
              _allow),
    Recording("permission-deny", "initialize; `BASH: touch made-by-deny`; can_use_tool answered deny; EOF", _deny),
    Recording("interrupt-mid-stream", "initialize; `SLOW please`; once the stream has begun, `queued while busy` "
              "then interrupt; the queued turn; EOF", _interrupt),
    Recording("interrupt-cancel-queued", "as interrupt-mid-stream with `cancel_queued: true` on the interrupt; EOF",
              _interrupt_cancel_queued),
    Recording("interrupt-pending-permission", "initialize; `BASH: touch pending-one`; can_use_tool left "
              "unanswered; a second initialize; interrupt; then a late allow for the cancelled request; EOF",
              _interrupt_pending),
    Recording("sealed-text", "sealed; initialize; `hello text` (uuid U1); EOF", _s_text, sealed=True),
    Recording("sealed-permission-allow", "sealed; `BASH: touch made-by-allow` (U1); can_use_tool answered allow; EOF",
              _s_allow, sealed=True),
    Recording("sealed-permission-deny", "sealed; `BASH: touch made-by-deny` (U1); can_use_tool answered deny; EOF",
              _s_deny, sealed=True),
    Recording("sealed-queued-mid-turn", "sealed; `BASH: touch mid-turn` (U1) asks; `queued mid turn` (U2) is "
              "queued; allow: U2 is folded into the running turn; EOF", _s_queued_mid_turn, sealed=True),
    Recording("sealed-interrupt-still-queued", "sealed; `SLOW please` (U1) streaming; `queued while busy` (U2) "
              "and a plain interrupt in one write; U2 runs after; EOF", _s_interrupt_still_queued, sealed=True),
    Recording("sealed-interrupt-cancel-queued", "sealed; as still-queued with `cancel_queued: true`: U2 cancelled; "
              "EOF", _s_interrupt_cancel_queued, sealed=True),
    Recording("sealed-interrupt-no-uuid", "sealed; as cancel-queued, the queued message without a uuid: dropped, "
              "not listed; EOF", _s_interrupt_no_uuid, sealed=True),
    Recording("sealed-interrupt-then-message", "sealed; `SLOW please` (U1) streaming; interrupt (cancel_queued) "
              "then `after the interrupt` (U2) in one write; U2 runs; EOF", _s_interrupt_then_message, sealed=True),
    Recording("sealed-interrupt-pending-permission", "sealed; `BASH: touch pending-one` (U1) asks; interrupt "
              "(cancel_queued): control_cancel_request; then a late allow; EOF", _s_interrupt_pending, sealed=True),
    Recording("sealed-allow-then-interrupt", "sealed; `BASH: touch allowed-then-interrupted` (U1) asks; allow and "
              "interrupt (cancel_queued) in one write; EOF", _s_allow_then_interrupt, sealed=True),
    Recording("sealed-eof-mid-stream", "sealed; `SLOW please` (U1, 0.02 s per delta); stdin EOF while it streams",
              _s_eof_mid_stream, sealed=True, scenarios=fast_slow_scenarios),
    Recording("sealed-eof-pending-permission", "sealed; `BASH: touch eof-pending` (U1) asks; stdin EOF unanswered",
              _s_eof_pending, sealed=True),
    Recording("sealed-controls", "sealed; initialize; interrupt at idle; set_permission_mode plan then default; "
              "an unsupported subtype; an answer for an id never asked; EOF", _s_controls, sealed=True),
    Recording("sealed-partial-messages", "sealed with --include-partial-messages; `hello partial` (U1); EOF",
              _s_partial, sealed=True, partial_messages=True),
    Recording("sealed-resume", "sealed; after a first launch (--session-id, one turn) and two that must fail, "
              "--resume of it; `second turn` (U2); EOF", _s_resume, sealed=True, resume=True, prepare=_first_session),
    Recording("sealed-resume-after-interrupt", "sealed; after a first launch whose one turn ended interrupted at a "
              "pending permission, --resume of it; `second turn` (U2); EOF", _s_resume_after_interrupt, sealed=True,
              resume=True, prepare=_first_interrupted),
)


def engine_start(engine: Sequence[str], env: Mapping[str, str], cwd: Path, *,
                 bound: float = WAIT) -> Callable[[Sequence[str]], StreamSession]:
    """A starter of stream-json sessions of ``engine`` (the binary, or a fake engine's command) with the
    given sealed arguments, in ``cwd`` under ``env``; ``bound`` is each session's wait bound."""
    return lambda args: StreamSession(engine[0], [*engine[1:], *args], env=env, cwd=cwd, bound=bound)


def make_recording(recording: Recording, binary: str | os.PathLike[str], scratch: Path, *,
                   command: Sequence[str] | None = None, bound: float = WAIT) -> Made:
    """Run one recording in ``scratch`` (its project is ``scratch/proj``) against a fresh scripted server.

    ``command`` replaces the binary (a fake engine's command; sealed recordings only); ``bound`` is every
    wait's bound on the engine (a fake's runs take a shorter one than the binary's). The returned records
    are not redacted (see :func:`redact`). Raises ``DriveError`` when the engine does something the recording
    relies on differently.
    """
    from mosaic.claude_rpc._seal import build_sealed_args, sealed_env

    cwd = scratch / "proj"
    cwd.mkdir(parents=True, exist_ok=True)
    engine = list(command) if command is not None else [os.fspath(binary)]
    if command is not None and not recording.sealed:
        raise ValueError(f"{recording.name} runs unsealed: only the pinned binary can make it")
    with ModelServer(recording.scenarios() if recording.scenarios else DEFAULT_SCENARIOS) as srv:
        facts: dict[str, Any] = {}
        if recording.sealed:
            env = sealed_env(scratch.resolve(), base_url=srv.base_url, api_key=FAKE_KEY)
            args: Sequence[str] = build_sealed_args(session_id=SESSION_UUID, resume=recording.resume,
                                                    partial_messages=recording.partial_messages)
            if recording.prepare is not None:
                facts.update(recording.prepare(engine_start(engine, env, cwd, bound=bound), srv, cwd))
        else:
            env = claude_env(scratch, srv.base_url)
            args = STREAM_JSON_ARGS
        with engine_start(engine, env, cwd, bound=bound)(args) as session:
            facts.update(recording.make(session, srv, cwd))
            code = session.close()
        facts["model_requests"] = [r.scenario for r in srv.requests if r.route.startswith("/v1/messages")]
        facts["other_requests"] = sorted({f"{r.method} {r.route}" for r in srv.requests
                                          if not r.route.startswith("/v1/messages")})
        if "late_allow_output_from" in facts:
            late = session.out[facts.pop("late_allow_output_from"):]
            facts["late_allow_output"] = [o.get("type") for o in late]
        facts["stderr_tail"] = bytes(session.stderr)[-300:].decode(errors="replace")
        if srv.errors:
            raise DriveError(f"the scripted server failed: {srv.errors!r}")
    return Made(list(session.records), code, facts)


def __dir__() -> list[str]:
    return sorted(__all__)
