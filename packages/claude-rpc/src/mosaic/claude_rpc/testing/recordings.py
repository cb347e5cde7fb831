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
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.claude_rpc.testing.drive import STREAM_JSON_ARGS, WAIT, DriveError, StreamSession, claude_env
from mosaic.claude_rpc.testing.model_server import ModelServer, RecordedRequest

__all__ = [
    "QUEUED_UUID",
    "RECORDINGS",
    "Made",
    "Recording",
    "make_recording",
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
    """One recording: its file name, what it does, and its maker."""

    name: str
    scenario: str
    make: Callable[[StreamSession, ModelServer, Path], dict[str, Any]]


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
)


def make_recording(recording: Recording, binary: str | os.PathLike[str], scratch: Path) -> Made:
    """Run one recording in ``scratch`` (its project is ``scratch/proj``) against a fresh scripted server.

    The returned records are not redacted (see :func:`redact`). Raises ``DriveError`` when the binary does
    something the recording relies on differently.
    """
    cwd = scratch / "proj"
    cwd.mkdir(parents=True, exist_ok=True)
    with ModelServer() as srv:
        env = claude_env(scratch, srv.base_url)
        with StreamSession(binary, STREAM_JSON_ARGS, env=env, cwd=cwd) as session:
            facts = recording.make(session, srv, cwd)
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
