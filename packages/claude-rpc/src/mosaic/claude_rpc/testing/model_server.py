"""A scripted Anthropic Messages API server on 127.0.0.1, standard library only.

It stands in for a real model when the pinned Claude Code 2.1.283 runs a turn: the binary is started with
``ANTHROPIC_BASE_URL=<server.base_url>`` and a fake ``ANTHROPIC_API_KEY`` (the key is recorded, never
checked), so no model is called and no credential is read. Claude Code sends ``POST /v1/messages?beta=true``
with ``stream: true`` and reads Server-Sent Events, each ``event: <type>`` then ``data: <json>``:
``message_start`` (the message with empty content), per content block ``content_block_start``,
``content_block_delta`` (``text_delta`` or ``input_json_delta``) and ``content_block_stop``, then
``message_delta`` (``stop_reason``, output usage) and ``message_stop``. ``POST /v1/messages/count_tokens``
answers ``{"input_tokens": n}``; a request with ``stream`` false gets the whole message as JSON. Any other
route is a 404 in the API's error shape.

What the model answers is decided by a *scenario table* (:data:`DEFAULT_SCENARIOS`): an ordered tuple of
:class:`Scenario` values, each a predicate on the request and a function from the request to a
:class:`Reply`; the first whose predicate holds wins and the last matches everything. The directives are
read from the *last user text*: the last ``text`` block of the last ``user`` message that is not a
``<system-reminder>`` (Claude Code puts reminders beside the typed prompt).

=================  =========================================================================================
scenario           reply
=================  =========================================================================================
``tool-result``    the last user message holds a ``tool_result``: the text ``tool result seen
                   (is_error=<true|false>): <its first 80 characters>``
``image``          the last user message holds an ``image``: ``IMAGE seen: <source type> <media type> <n>
                   b64 chars``
``bash``           ``BASH: <command>``: a ``Bash`` tool_use ``{"command": <command>, "description":
                   "scripted bash"}``
``bash-late``      ``BASH-LATE: <command>``: the same tool_use, its message ending 5 seconds
                   after its block (the binary asks ``can_use_tool`` while the reply still streams)
``write``          ``WRITE: <absolute path>``: a ``Write`` tool_use writing ``written by the scripted
                   model\\n`` there
``agent``          ``AGENT``: an ``Agent`` tool_use (``general-purpose``, description ``scripted sub``,
                   prompt ``SUBTASK reply please``), a subagent run
``slow``           ``SLOW``: ``slow00 `` ... ``slow59 ``, one every 0.25 s (a driver interrupts it; bounded,
                   so it always ends by itself)
``text``           anything else: ``Reply to: <the last user text, first 60 characters>``
=================  =========================================================================================

Nothing depends on the clock or a counter other than the request's place in the log: message ids are
``msg_<index>``, tool_use ids ``toolu_<index>`` (4 digits), usage is 10 input tokens per message and 1
output token per delta. Every request is recorded (:class:`RecordedRequest`); :meth:`ModelServer.wait_for`
waits on that log with a bound. A client that goes away mid-stream (an interrupt closes the connection) is
recorded as ``disconnected``, quietly; any other exception in a handler is kept in
:attr:`ModelServer.errors` for a test to assert on.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "DEFAULT_SCENARIOS",
    "SLOW_DELTAS",
    "HttpError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Scenario",
    "TextReply",
    "ToolUseReply",
    "directive",
]

JsonObject = dict[str, Any]
Outcome = Literal["pending", "completed", "disconnected", "http-error", "stopped", "bad-request", "not-found"]

REMINDER = "<system-reminder>"
SLOW_DELTAS = tuple(f"slow{i:02d} " for i in range(60))
SLOW_INTERVAL = 0.25
#: `bash-late`: the seconds between its tool_use block's end and its message's end. The binary asks
#: `can_use_tool` as the block ends, so for this long its request is pending while the reply still streams.
_LATE_END = 5.0


# --------------------------------------------------------------------------------------------------------
# Requests as the scenarios see them
# --------------------------------------------------------------------------------------------------------


def _blocks(content: Any) -> list[JsonObject]:
    """A message's content as blocks: a string is one text block (the API allows both)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and how its response ended.

    ``body`` is the parsed JSON body (``None`` when it was not a JSON object); ``route`` is the path without
    its query (``/v1/messages``, ``/v1/messages/count_tokens``); header names are lower-cased. ``outcome`` stays ``"pending"`` while the
    response is being written; ``events`` counts the SSE events written so far.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: JsonObject | None
    scenario: str | None = None
    outcome: Outcome = "pending"
    events: int = 0
    status: int | None = None

    @property
    def route(self) -> str:
        return urllib.parse.urlsplit(self.path).path

    @property
    def messages(self) -> list[JsonObject]:
        """The request's ``messages`` ([] when absent or malformed)."""
        msgs = (self.body or {}).get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    @property
    def last_user_blocks(self) -> list[JsonObject]:
        """The content blocks of the last ``user`` message ([] when there is none)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _blocks(m.get("content"))
        return []

    @property
    def last_user_text(self) -> str:
        """The last text block of the last user message that is not a ``<system-reminder>`` ("" if none)."""
        texts = [str(b.get("text", "")) for b in self.last_user_blocks if b.get("type") == "text"]
        typed = [t for t in texts if not t.lstrip().startswith(REMINDER)]
        return typed[-1] if typed else ""

    def blocks_of(self, kind: str) -> list[JsonObject]:
        """The blocks of type ``kind`` in the last user message."""
        return [b for b in self.last_user_blocks if b.get("type") == kind]

    @property
    def model(self) -> str:
        value = (self.body or {}).get("model")
        return value if isinstance(value, str) else "claude-scripted"

    @property
    def stream(self) -> bool:
        return (self.body or {}).get("stream") is True

    @property
    def system_text(self) -> str:
        """The system prompt as one string (a string, or the text of its blocks joined by spaces)."""
        system = (self.body or {}).get("system")
        if isinstance(system, str):
            return system
        return " ".join(str(b.get("text", "")) for b in _blocks(system))


# --------------------------------------------------------------------------------------------------------
# Replies and the scenario table
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TextReply:
    """One text block streamed as ``deltas``, ``interval`` seconds apart (the wait ends early when the
    server stops), then ``stop_reason``."""

    deltas: tuple[str, ...]
    interval: float = 0.0
    stop_reason: str = "end_turn"


@dataclass(frozen=True)
class ToolUseReply:
    """One ``tool_use`` block: its start with empty input, the input's JSON as one ``input_json_delta``,
    then ``stop_reason: tool_use``; the block's end and the message's end ``end_after`` seconds apart (0: in
    one write, the whole reply)."""

    name: str
    input: JsonObject
    end_after: float = 0.0


@dataclass(frozen=True)
class HttpError:
    """A plain JSON error response instead of a message."""

    status: int
    body: JsonObject


Reply = TextReply | ToolUseReply | HttpError


@dataclass(frozen=True)
class Scenario:
    """One row of the script: requests for which ``when(request)`` holds get ``respond(request)``.

    Both run on a handler thread and must not block.
    """

    name: str
    when: Callable[[RecordedRequest], bool]
    respond: Callable[[RecordedRequest], Reply]
    doc: str = ""


def directive(prefix: str) -> Callable[[RecordedRequest], bool]:
    """A predicate: the last user text starts with ``prefix``."""
    return lambda req: req.last_user_text.startswith(prefix)


def _tool_result(req: RecordedRequest) -> Reply:
    block = req.blocks_of("tool_result")[0]
    content = block.get("content")
    text = content if isinstance(content, str) else json.dumps(content)
    flag = "true" if block.get("is_error") is True else "false"
    return TextReply((f"tool result seen (is_error={flag}): {text[:80]}",))


def _image(req: RecordedRequest) -> Reply:
    source = req.blocks_of("image")[0].get("source")
    source = source if isinstance(source, dict) else {}
    data = source.get("data")
    size = len(data) if isinstance(data, str) else 0
    return TextReply((f"IMAGE seen: {source.get('type')} {source.get('media_type')} {size} b64 chars",))


def _bash_input(req: RecordedRequest, cue: str) -> JsonObject:
    return {"command": req.last_user_text[len(cue):], "description": "scripted bash"}


def _bash(req: RecordedRequest) -> Reply:
    return ToolUseReply("Bash", _bash_input(req, "BASH: "))


def _bash_late(req: RecordedRequest) -> Reply:
    return ToolUseReply("Bash", _bash_input(req, "BASH-LATE: "), end_after=_LATE_END)


def _write(req: RecordedRequest) -> Reply:
    return ToolUseReply("Write", {"file_path": req.last_user_text[len("WRITE: "):].strip(),
                                  "content": "written by the scripted model\n"})


def _agent(_req: RecordedRequest) -> Reply:
    return ToolUseReply("Agent", {"description": "scripted sub", "prompt": "SUBTASK reply please",
                                  "subagent_type": "general-purpose"})


def _slow(_req: RecordedRequest) -> Reply:
    return TextReply(SLOW_DELTAS, interval=SLOW_INTERVAL)


def _text(req: RecordedRequest) -> Reply:
    return TextReply(("Reply to: ", req.last_user_text[:60]))


DEFAULT_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("tool-result", lambda r: bool(r.blocks_of("tool_result")), _tool_result,
             "quote the tool result and its is_error flag"),
    Scenario("image", lambda r: bool(r.blocks_of("image")), _image, "describe the image block's source"),
    Scenario("bash", directive("BASH: "), _bash, "a Bash tool_use with the command after `BASH: `"),
    Scenario("bash-late", directive("BASH-LATE: "), _bash_late,
             "the same, its message ending 5 s after its block (the binary asks before the end)"),
    Scenario("write", directive("WRITE: "), _write, "a Write tool_use to the path after `WRITE: `"),
    Scenario("agent", directive("AGENT"), _agent, "an Agent tool_use: a general-purpose subagent"),
    Scenario("slow", directive("SLOW"), _slow, "60 deltas 0.25 s apart (a driver interrupts it)"),
    Scenario("text", lambda _r: True, _text, "`Reply to: <the last user text>`"),
)
"""The default script, first match wins (see the module docstring for the table)."""


def _message(req: RecordedRequest, content: list[JsonObject], stop: str | None, out: int) -> JsonObject:
    return {
        "id": f"msg_{req.index:04d}",
        "type": "message",
        "role": "assistant",
        "model": req.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10 * len(req.messages), "output_tokens": out},
    }


def _events(req: RecordedRequest, reply: TextReply | ToolUseReply) -> Iterator[tuple[str, JsonObject] | float]:
    """The SSE events of one reply, with the pauses between them as floats (seconds)."""
    yield "message_start", {"type": "message_start", "message": _message(req, [], None, 1)}
    if isinstance(reply, TextReply):
        yield "content_block_start", {"type": "content_block_start", "index": 0,
                                      "content_block": {"type": "text", "text": ""}}
        for i, text in enumerate(reply.deltas):
            if i > 0 and reply.interval > 0:
                yield reply.interval
            yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": text}}
        stop, out = reply.stop_reason, len(reply.deltas)
    else:
        block = {"type": "tool_use", "id": f"toolu_{req.index:04d}", "name": reply.name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}
        yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                      "delta": {"type": "input_json_delta", "partial_json": json.dumps(reply.input)}}
        stop, out = "tool_use", 1
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    if isinstance(reply, ToolUseReply) and reply.end_after > 0:
        yield reply.end_after
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": out}}
    yield "message_stop", {"type": "message_stop"}


def _whole(req: RecordedRequest, reply: TextReply | ToolUseReply) -> JsonObject:
    """The non-streaming answer: the same message, whole."""
    if isinstance(reply, TextReply):
        return _message(req, [{"type": "text", "text": "".join(reply.deltas)}], reply.stop_reason,
                        len(reply.deltas))
    block = {"type": "tool_use", "id": f"toolu_{req.index:04d}", "name": reply.name, "input": reply.input}
    return _message(req, [block], "tool_use", 1)


def count_tokens(body: Mapping[str, Any] | None) -> int:
    """The scripted ``count_tokens`` answer: 10 per message plus 1 per 4 bytes of the system prompt."""
    req = RecordedRequest(0, "POST", "", {}, dict(body) if body else None)
    return 10 * len(req.messages) + len(req.system_text.encode()) // 4


# --------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------

_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class _Disconnected(Exception):
    """The client closed the connection while the response was being written."""


class _Stopped(Exception):
    """The server is stopping: the response is cut short on purpose."""


class _HTTPServer(http.server.ThreadingHTTPServer):
    # Handler threads are joined by server_close(), so stop() returns only once every response has ended.
    daemon_threads = False
    block_on_close = True
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, _CLIENT_GONE):
            self.owner._record_error(exc)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        return  # the request log replaces the stderr access log

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._refuse(404, "not_found_error", self._open(None))

    def do_HEAD(self) -> None:  # noqa: N802
        owner = self.server.owner
        record = self._open(None)
        owner._finish(record.index, "not-found", status=404)
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        record = self._open(parsed if isinstance(parsed, dict) else None)
        if record.route.rstrip("/") == "/v1/messages/count_tokens":
            owner._finish(record.index, "completed", status=200, scenario="count-tokens")
            self._send_json(200, {"input_tokens": count_tokens(record.body)})
            return
        if record.route.rstrip("/") != "/v1/messages":
            self._refuse(404, "not_found_error", record)
            return
        if record.body is None:
            self._refuse(400, "invalid_request_error", record)
            return
        try:
            record, scenario = owner._route(record.index)
            reply = scenario.respond(record)
        except Exception as exc:  # a broken scenario must not leave the request pending
            owner._record_error(exc)
            owner._finish(record.index, "http-error", status=500)
            self._send_json(500, {"type": "error", "error": {"type": "api_error", "message": repr(exc)}})
            return
        if isinstance(reply, HttpError):
            owner._finish(record.index, "http-error", status=reply.status)
            self._send_json(reply.status, reply.body)
        elif not record.stream:
            owner._finish(record.index, "completed", status=200)
            self._send_json(200, _whole(record, reply))
        else:
            self._answer_stream(record, reply)

    def _open(self, body: JsonObject | None) -> RecordedRequest:
        return self.server.owner._open_request(self.command, self.path,
                                             {k.lower(): v for k, v in self.headers.items()}, body)

    def _refuse(self, status: int, kind: str, record: RecordedRequest) -> None:
        outcome: Outcome = "not-found" if status == 404 else "bad-request"
        self.server.owner._finish(record.index, outcome, status=status)
        self._send_json(status, {"type": "error", "error": {"type": kind, "message": f"no route {self.path}"
                                                            if status == 404 else "body is not a JSON object"}})

    def _send_json(self, status: int, obj: JsonObject) -> None:
        data = json.dumps(obj).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except _CLIENT_GONE:
            pass
        self.close_connection = True

    def _answer_stream(self, record: RecordedRequest, reply: TextReply | ToolUseReply) -> None:
        owner = self.server.owner
        try:
            self._stream(record, reply)
        except _Disconnected:
            owner._finish(record.index, "disconnected", status=200)
        except _Stopped:
            owner._finish(record.index, "stopped", status=200)
        else:
            owner._finish(record.index, "completed", status=200)

    def _stream(self, record: RecordedRequest, reply: TextReply | ToolUseReply) -> None:
        # The body ends when the connection closes ("Connection: close", no length), so a client's abort
        # shows as a failed write on the next event.
        self.close_connection = True
        owner = self.server.owner
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
        except _CLIENT_GONE as exc:
            raise _Disconnected from exc
        # The events between two pauses go out in one write: a reply with no pause (a tool_use) reaches the
        # client whole, as one chunk, so the client has read its end before it acts on the tool_use (the
        # binary asks for a tool's permission as the block ends; an interrupt sent on that request would
        # otherwise find the reply still streaming when this thread was slow to write its last events).
        burst: list[bytes] = []
        for item in [*_events(record, reply), 0.0]:
            if isinstance(item, float):
                if burst:
                    self._write_burst(record, burst)
                    burst = []
                if item and owner._stopping.wait(item):
                    raise _Stopped
                continue
            name, data = item
            burst.append(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

    def _write_burst(self, record: RecordedRequest, burst: list[bytes]) -> None:
        owner = self.server.owner
        if owner._stopping.is_set():
            raise _Stopped
        try:
            self.wfile.write(b"".join(burst))
            self.wfile.flush()
        except _CLIENT_GONE as exc:
            raise _Disconnected from exc
        for _ in burst:
            owner._count_event(record.index)


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)


class ModelServer:
    """A scripted Anthropic Messages server bound to ``127.0.0.1`` on a free port.

    Use it as a context manager (``with ModelServer() as srv: ...``) or call :meth:`start` and :meth:`stop`.
    :attr:`base_url` (``http://127.0.0.1:<port>``, no path: Claude Code appends ``/v1/messages``) is the
    ``ANTHROPIC_BASE_URL``. :meth:`stop` cuts running streams short (outcome ``"stopped"``), closes the
    socket and joins every thread; it is idempotent.
    """

    def __init__(self, scenarios: Sequence[Scenario] = DEFAULT_SCENARIOS) -> None:
        if not scenarios:
            raise ValueError("the scenario table is empty")
        self.scenarios: tuple[Scenario, ...] = tuple(scenarios)
        self._cond = threading.Condition()
        self._state = _State()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ModelServer:
        """Bind 127.0.0.1:0 and serve on a background thread. Raises ``RuntimeError`` if already started."""
        if self._httpd is not None:
            raise RuntimeError("ModelServer already started")
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mosaic-claude-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end running streams, close the socket and join the threads."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port. Raises ``RuntimeError`` before :meth:`start`."""
        if self._httpd is None:
            raise RuntimeError("ModelServer not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the ``ANTHROPIC_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        """A snapshot of every request so far, in arrival order."""
        with self._cond:
            return tuple(self._state.requests)

    @property
    def errors(self) -> tuple[BaseException, ...]:
        """Unexpected exceptions raised inside handlers (client disconnects are not errors)."""
        with self._cond:
            return tuple(self._state.errors)

    def wait_for(self, predicate: Callable[[tuple[RecordedRequest, ...]], bool], timeout: float) -> \
            tuple[RecordedRequest, ...]:
        """Block until ``predicate(requests)`` is true; return that snapshot. ``TimeoutError`` after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                snap = tuple(self._state.requests)
                if predicate(snap):
                    return snap
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"model server: condition not met within {timeout} s; log: "
                                       f"{[(r.index, r.scenario, r.outcome, r.events) for r in snap]}")
                self._cond.wait(left)

    # -- used by the handler -----------------------------------------------------------------------------

    def _open_request(self, method: str, path: str, headers: dict[str, str], body: JsonObject | None) -> \
            RecordedRequest:
        with self._cond:
            rec = RecordedRequest(len(self._state.requests) + 1, method, path, headers, body)
            self._state.requests.append(rec)
            self._cond.notify_all()
            return rec

    def _route(self, index: int) -> tuple[RecordedRequest, Scenario]:
        with self._cond:
            rec = self._state.requests[index - 1]
            scenario = next((s for s in self.scenarios if s.when(rec)), None)
            if scenario is None:
                raise LookupError(f"no scenario matches {rec.last_user_text!r} and the table has no catch-all")
            rec = replace(rec, scenario=scenario.name)
            self._state.requests[index - 1] = rec
            self._cond.notify_all()
            return rec, scenario

    def _count_event(self, index: int) -> None:
        with self._cond:
            rec = self._state.requests[index - 1]
            self._state.requests[index - 1] = replace(rec, events=rec.events + 1)
            self._cond.notify_all()

    def _finish(self, index: int, outcome: Outcome, *, status: int, scenario: str | None = None) -> None:
        with self._cond:
            rec = self._state.requests[index - 1]
            rec = replace(rec, outcome=outcome, status=status)
            if scenario is not None:
                rec = replace(rec, scenario=scenario)
            self._state.requests[index - 1] = rec
            self._cond.notify_all()

    def _record_error(self, exc: BaseException) -> None:
        with self._cond:
            self._state.errors.append(exc)
            self._cond.notify_all()


def __dir__() -> list[str]:
    return sorted(__all__)
