"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, standard library only.

It stands in for a real model when the real Pi 0.85.1 (or the fake engine) runs a turn. Pi's
`openai-completions` api sends ``POST <baseUrl>/chat/completions`` with ``stream: true`` and
``stream_options: {include_usage: true}`` and reads Server-Sent Events: ``data: {chunk}`` lines whose
``choices[0].delta`` holds ``content``, ``reasoning_content`` or ``tool_calls``, one chunk with a
``finish_reason`` (``stop``/``tool_calls``; a stream without one is an error to Pi), an optional usage
chunk, then ``data: [DONE]`` (FACTS.md Part 2 "Minimum models.json"; pi-ai/dist/api/openai-completions.js
369-501).

What the model answers is decided by a *scenario table* (:data:`DEFAULT_SCENARIOS`): an ordered tuple of
:class:`Scenario` values, each with a keyword looked up in the text of the last ``user`` message of the
request and a function from the request to a :class:`Reply`. The first scenario whose keyword occurs wins;
the keyword ``""`` matches every request and ends the table. Tests add scenarios by passing their own
tuple, e.g. ``ModelServer(scenarios=(my_scenario, *DEFAULT_SCENARIOS))``.

The default table (FACTS.md Part 2 B, C, D, R):

=============  ==============================================================================================
keyword        reply
=============  ==============================================================================================
``TOOLCALL``   a ``bash`` tool call ``printf tool-ran-ok``; once the request ends with the tool result, the
               text ``Tool result was: <result>.``
``SLOW``       ``tick00 `` ... ``tick59 ``, one every 0.25 s, then ``stop``: long enough for a driver to abort
               it, bounded so that it always ends by itself
``FAILONCE``   HTTP 500 ``{"error": {"message": "scripted failure", "type": "server_error"}}`` the first time a
               given user text is seen, the plain reply on every later request with that text (Pi's retry)
``DIALOG``     ``DIALOG <kind> [timeout=<ms>] [abortable]``: a call of the fixture extension's tool
               ``mosaic_fixture_dialog`` with ``{"kind", "timeout"?, "abortable"?}`` (it raises one dialog);
               once the request ends with the tool result, ``Tool result was: <result>.``
``THINK``      reasoning deltas (``reasoning_content``, which Pi stores as a ``thinking`` block), then text
``""``         the plain text ``Hello from the fake model.`` in three deltas
=============  ==============================================================================================

Every request is recorded (:class:`RecordedRequest`: method, path, headers, parsed body, the scenario
chosen, and how the response ended). :meth:`ModelServer.wait_for` waits on that log under a condition
variable with a bound, so tests never sleep to synchronise.

A client that goes away mid-stream (Pi's abort closes the connection) ends that response quietly: the
request is recorded with outcome ``"disconnected"`` and nothing is printed. Any other exception inside a
handler is kept in :attr:`ModelServer.errors` rather than printed, so a test can assert there were none.
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "DEFAULT_SCENARIOS",
    "DIALOG_TOOL",
    "HttpError",
    "ModelServer",
    "RecordedRequest",
    "Reply",
    "Scenario",
    "StreamText",
    "StreamToolCall",
    "dialog_arguments",
    "models_json",
]

JsonObject = dict[str, Any]

Outcome = Literal["pending", "completed", "disconnected", "http-error", "stopped", "bad-request", "not-found"]


# --------------------------------------------------------------------------------------------------------
# Requests as the scenarios see them
# --------------------------------------------------------------------------------------------------------


def _message_text(message: Mapping[str, Any]) -> str:
    """The text of one chat message: a string content, or its text parts joined (OpenAI allows both)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "".join(str(p) for p in parts)
    return ""


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received, and how its response ended.

    ``body`` is the parsed JSON body, or ``None`` when the body was not a JSON object. ``occurrence`` counts
    earlier requests routed to the same scenario with the same last user text (0 for the first): it is how
    ``FAILONCE`` tells Pi's retry from the first attempt. ``outcome`` stays ``"pending"`` while the
    response is being written; ``chunks`` counts the SSE ``data:`` events written so far.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    body: JsonObject | None
    scenario: str | None = None
    occurrence: int = 0
    outcome: Outcome = "pending"
    chunks: int = 0
    status: int | None = None

    @property
    def messages(self) -> list[JsonObject]:
        """The request's ``messages`` list ([] when absent or malformed)."""
        msgs = (self.body or {}).get("messages")
        return [m for m in msgs if isinstance(m, dict)] if isinstance(msgs, list) else []

    @property
    def roles(self) -> list[str]:
        """The ``role`` of every message, in order."""
        return [str(m.get("role")) for m in self.messages]

    @property
    def last_role(self) -> str | None:
        """The role of the last message, or ``None`` with no messages."""
        roles = self.roles
        return roles[-1] if roles else None

    @property
    def last_user_text(self) -> str:
        """The text of the last ``user`` message ("" when there is none)."""
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _message_text(m)
        return ""

    @property
    def last_tool_text(self) -> str | None:
        """The text of the last message when it is a ``tool`` result, else ``None``."""
        msgs = self.messages
        if msgs and msgs[-1].get("role") == "tool":
            return _message_text(msgs[-1])
        return None

    @property
    def model(self) -> str:
        """The requested model id ("fake-model-1" when absent), echoed in every chunk."""
        value = (self.body or {}).get("model")
        return value if isinstance(value, str) else "fake-model-1"

    @property
    def include_usage(self) -> bool:
        """True when the client asked for a usage chunk (``stream_options.include_usage``)."""
        opts = (self.body or {}).get("stream_options")
        return isinstance(opts, dict) and opts.get("include_usage") is True


# --------------------------------------------------------------------------------------------------------
# Replies and the scenario table
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamText:
    """Stream ``reasoning`` deltas (as ``reasoning_content``) then ``deltas`` as ``content``.

    ``interval`` seconds pass between two deltas (0 for none); the wait ends early when the server stops.
    ``finish_reason`` goes in the last chunk.
    """

    deltas: tuple[str, ...]
    reasoning: tuple[str, ...] = ()
    interval: float = 0.0
    finish_reason: str = "stop"


@dataclass(frozen=True)
class StreamToolCall:
    """Stream one function tool call: the header chunk (id, name, ``""`` arguments), then ``argument_deltas``.

    The arguments are sent as pieces of their JSON text, as real providers do (FACTS.md Part 2 C shows
    Pi's ``toolcall_delta`` events ``""``, ``{"command": "pri``, ``ntf tool-ran-ok"}``).
    """

    call_id: str
    name: str
    argument_deltas: tuple[str, ...]
    finish_reason: str = "tool_calls"


@dataclass(frozen=True)
class HttpError:
    """Answer with a plain JSON error response instead of a stream."""

    status: int
    body: JsonObject


Reply = StreamText | StreamToolCall | HttpError


@dataclass(frozen=True)
class Scenario:
    """One row of the script: requests whose last user text contains ``keyword`` get ``respond(request)``.

    ``keyword == ""`` matches every request. ``respond`` receives the :class:`RecordedRequest` (with
    ``scenario`` and ``occurrence`` filled in) and returns the :class:`Reply`. It runs on a handler thread
    and must not block.
    """

    name: str
    keyword: str
    respond: Callable[[RecordedRequest], Reply]
    doc: str = ""


PLAIN_TEXT = "Hello from the fake model."
_PLAIN_DELTAS = ("Hello ", "from the ", "fake model.")
TOOL_COMMAND = "printf tool-ran-ok"


def _plain(_req: RecordedRequest) -> Reply:
    return StreamText(_PLAIN_DELTAS)


def _toolcall(req: RecordedRequest) -> Reply:
    tool_text = req.last_tool_text
    if tool_text is not None:
        # The follow-up request after Pi ran the tool ends with the `tool` message (FACTS Part 2 C,
        # server.log REQ 3: roles ... assistant, tool).
        return StreamText(("Tool result was: ", tool_text, "."))
    arguments = json.dumps({"command": TOOL_COMMAND})
    cut = len('{"command": "pri')
    return StreamToolCall(f"call_fake_{req.index}", "bash", (arguments[:cut], arguments[cut:]))


DIALOG_TOOL = "mosaic_fixture_dialog"
"""The tool the fixture extension registers (``testing/fixture_extension/dialogs.js``)."""


def dialog_arguments(text: str) -> dict[str, Any]:
    """The fixture tool's arguments a ``DIALOG`` text asks for: the word after ``DIALOG`` is ``kind`` ("" when
    none), ``timeout=<ms>`` (an integer) adds ``timeout``, the word ``abortable`` adds ``abortable: true``; in
    that key order."""
    words = text.split("DIALOG", 1)[-1].split()
    args: dict[str, Any] = {"kind": words[0] if words else ""}
    for word in words[1:]:
        if word.startswith("timeout=") and word[8:].isdigit():
            args["timeout"] = int(word[8:])
    if "abortable" in words[1:]:
        args["abortable"] = True
    return args


def _dialog(req: RecordedRequest) -> Reply:
    tool_text = req.last_tool_text
    if tool_text is not None:
        return StreamText(("Tool result was: ", tool_text, "."))
    arguments = json.dumps(dialog_arguments(req.last_user_text))
    cut = len('{"kind": "')
    return StreamToolCall(f"call_fake_{req.index}", DIALOG_TOOL, (arguments[:cut], arguments[cut:]))


def _slow(_req: RecordedRequest) -> Reply:
    return StreamText(tuple(f"tick{i:02d} " for i in range(60)), interval=0.25)


def _failonce(req: RecordedRequest) -> Reply:
    if req.occurrence == 0:
        return HttpError(500, {"error": {"message": "scripted failure", "type": "server_error"}})
    return StreamText(_PLAIN_DELTAS)


def _think(_req: RecordedRequest) -> Reply:
    return StreamText(("Thought about it. ", PLAIN_TEXT), reasoning=("Let me think ", "about this."))


DEFAULT_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("toolcall", "TOOLCALL", _toolcall, "bash `printf tool-ran-ok`, then quote the tool result"),
    Scenario("slow", "SLOW", _slow, "60 ticks 0.25 s apart, then stop (a driver aborts it)"),
    Scenario("failonce", "FAILONCE", _failonce, "HTTP 500 on the first request with this text, then text"),
    Scenario("think", "THINK", _think, "reasoning_content deltas, then text"),
    Scenario("dialog", "DIALOG", _dialog, "the fixture extension's dialog tool, then quote its result"),
    Scenario("text", "", _plain, "the plain reply 'Hello from the fake model.'"),
)
"""The default script, first match wins (see the module docstring for the table)."""


def models_json(base_url: str, *, provider: str = "fakeprov", model: str = "fake-model-1") -> JsonObject:
    """The minimum ``models.json`` that makes Pi 0.85.1 use this server (FACTS.md Part 2).

    Without ``api`` or ``baseUrl`` Pi exits with ``Unknown provider``; without ``apiKey`` every prompt
    fails at preflight; so all three are present (the key is a dummy the server ignores).
    """
    return {
        "providers": {
            provider: {
                "baseUrl": base_url,
                "api": "openai-completions",
                "apiKey": "dummy",
                "models": [{"id": model}],
            }
        }
    }


# --------------------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------------------

_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class _Disconnected(Exception):
    """The client closed the connection while the response was being written."""


class _Stopped(Exception):
    """The server is stopping: the response is cut short on purpose."""


class _HTTPServer(http.server.ThreadingHTTPServer):
    # Handler threads are joined by server_close() (ThreadingMixIn.block_on_close with non-daemon threads),
    # so stop() returns only once every response has ended.
    daemon_threads = False
    block_on_close = True
    owner: ModelServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints a traceback by default; a client that vanished is normal here (Pi's abort),
        # anything else is kept for the test to assert on.
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, _CLIENT_GONE):
            self.owner._record_error(exc)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        # The request log replaces the stderr access log.
        return

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._not_found()

    def do_POST(self) -> None:  # noqa: N802
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        body = parsed if isinstance(parsed, dict) else None
        record = owner._open_request("POST", self.path, dict(self.headers.items()), body)
        if self.path.rstrip("/") != owner.path_prefix + "/chat/completions":
            owner._finish(record.index, "not-found", status=404)
            self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
            return
        if body is None:
            owner._finish(record.index, "bad-request", status=400)
            self._send_json(400, {"error": {"message": "body is not a JSON object", "type": "bad_request"}})
            return
        try:
            record, scenario = owner._route(record.index)
            reply = scenario.respond(record)
        except Exception as exc:  # a broken scenario must not leave the request pending
            owner._record_error(exc)
            owner._finish(record.index, "http-error", status=500)
            self._send_json(500, {"error": {"message": f"scenario failed: {exc!r}", "type": "server_error"}})
            return
        if isinstance(reply, HttpError):
            owner._finish(record.index, "http-error", status=reply.status)
            self._send_json(reply.status, reply.body)
            return
        try:
            self._stream(record, reply)
        except _Disconnected:
            owner._finish(record.index, "disconnected", status=200)
        except _Stopped:
            owner._finish(record.index, "stopped", status=200)
        else:
            owner._finish(record.index, "completed", status=200)

    def _not_found(self) -> None:
        owner = self.server.owner
        record = owner._open_request(self.command, self.path, dict(self.headers.items()), None)
        owner._finish(record.index, "not-found", status=404)
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

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

    def _write_event(self, record: RecordedRequest, payload: str) -> None:
        owner = self.server.owner
        if owner._stopping.is_set():
            raise _Stopped
        try:
            self.wfile.write(f"data: {payload}\n\n".encode())
            self.wfile.flush()
        except _CLIENT_GONE as exc:
            raise _Disconnected from exc
        owner._count_chunk(record.index)

    def _stream(self, record: RecordedRequest, reply: StreamText | StreamToolCall) -> None:
        # The body is delimited by closing the connection (HTTP/1.1 with "Connection: close" and no
        # length), which every fetch client accepts and which makes a client abort visible as a failed
        # write on the next chunk.
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
        except _CLIENT_GONE as exc:
            raise _Disconnected from exc
        for chunk in _chunks(record, reply):
            if isinstance(chunk, float):
                if self.server.owner._stopping.wait(chunk):
                    raise _Stopped
                continue
            self._write_event(record, json.dumps(chunk))
        self._write_event(record, "[DONE]")


def _chunks(record: RecordedRequest, reply: StreamText | StreamToolCall) -> Iterator[JsonObject | float]:
    """The SSE payloads of one reply, with the pauses between them as floats (seconds)."""
    base: JsonObject = {
        "id": f"chatcmpl-fake-{record.index}",
        "object": "chat.completion.chunk",
        # A constant, so that nothing in a regenerated fixture depends on the clock through the server.
        "created": 1_700_000_000,
        "model": record.model,
    }

    def chunk(delta: JsonObject, finish: str | None = None) -> JsonObject:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    n_out = 0
    if isinstance(reply, StreamText):
        first = True
        pieces = [("reasoning_content", r) for r in reply.reasoning] + [("content", d) for d in reply.deltas]
        for i, (key, text) in enumerate(pieces):
            if i > 0 and reply.interval > 0:
                yield reply.interval
            delta: JsonObject = {key: text}
            if first:
                delta = {"role": "assistant", **delta}
                first = False
            n_out += 1
            yield chunk(delta)
        yield chunk({}, reply.finish_reason)
    else:
        yield chunk(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        "id": reply.call_id,
                        "type": "function",
                        "function": {"name": reply.name, "arguments": ""},
                    }
                ],
            }
        )
        for piece in reply.argument_deltas:
            n_out += 1
            yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
        yield chunk({}, reply.finish_reason)
    if record.include_usage:
        # Deterministic token counts (no tokenizer): 10 per input message, 1 per streamed delta.
        prompt = 10 * len(record.messages)
        yield {**base, "choices": [], "usage": {
            "prompt_tokens": prompt, "completion_tokens": n_out, "total_tokens": prompt + n_out}}


@dataclass
class _State:
    requests: list[RecordedRequest] = field(default_factory=list)
    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    errors: list[BaseException] = field(default_factory=list)


class ModelServer:
    """A scripted chat-completions server bound to ``127.0.0.1`` on a free port.

    Use it as a context manager (``with ModelServer() as srv: ...``) or call :meth:`start` and
    :meth:`stop`. :attr:`base_url` (``http://127.0.0.1:<port>/v1``) goes into Pi's ``models.json``
    (:func:`models_json`). :meth:`stop` cuts running streams short (outcome ``"stopped"``), closes the
    socket and joins every thread; it is idempotent.
    """

    def __init__(self, scenarios: Sequence[Scenario] = DEFAULT_SCENARIOS, *, path_prefix: str = "/v1") -> None:
        if not scenarios:
            raise ValueError("the scenario table is empty")
        self.scenarios: tuple[Scenario, ...] = tuple(scenarios)
        self.path_prefix = path_prefix.rstrip("/")
        self._cond = threading.Condition()
        self._state = _State()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------

    def start(self) -> ModelServer:
        """Bind 127.0.0.1:0 and serve on a background thread. Raises ``RuntimeError`` if already started."""
        if self._httpd is not None:
            raise RuntimeError("ModelServer already started")
        httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="mosaic-model-server", daemon=True)
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
        """``http://127.0.0.1:<port>/v1``: the ``baseUrl`` for Pi's models.json."""
        return f"http://127.0.0.1:{self.port}{self.path_prefix}"

    # -- the log -----------------------------------------------------------------------------------------

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
        """Block until ``predicate(requests)`` is true; return that snapshot.

        Raises ``TimeoutError`` when it is still false after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                snap = tuple(self._state.requests)
                if predicate(snap):
                    return snap
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"model server: condition not met within {timeout} s; log: "
                                       f"{[(r.index, r.scenario, r.outcome, r.chunks) for r in snap]}")
                self._cond.wait(left)

    def wait_for_outcome(self, index: int, timeout: float) -> RecordedRequest:
        """Wait until request ``index`` (1-based) has ended; return its record. ``TimeoutError`` otherwise."""
        snap = self.wait_for(lambda rs: len(rs) >= index and rs[index - 1].outcome != "pending", timeout)
        return snap[index - 1]

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
            text = rec.last_user_text
            scenario = next((s for s in self.scenarios if s.keyword in text), None)
            if scenario is None:
                raise LookupError(f"no scenario matches {text!r} and the table has no catch-all")
            key = (scenario.name, text)
            occurrence = self._state.seen.get(key, 0)
            self._state.seen[key] = occurrence + 1
            rec = replace(rec, scenario=scenario.name, occurrence=occurrence)
            self._state.requests[index - 1] = rec
            self._cond.notify_all()
            return rec, scenario

    def _count_chunk(self, index: int) -> None:
        with self._cond:
            rec = self._state.requests[index - 1]
            self._state.requests[index - 1] = replace(rec, chunks=rec.chunks + 1)
            self._cond.notify_all()

    def _finish(self, index: int, outcome: Outcome, *, status: int) -> None:
        with self._cond:
            rec = self._state.requests[index - 1]
            self._state.requests[index - 1] = replace(rec, outcome=outcome, status=status)
            self._cond.notify_all()

    def _record_error(self, exc: BaseException) -> None:
        with self._cond:
            self._state.errors.append(exc)
            self._cond.notify_all()


def __dir__() -> list[str]:
    return sorted(__all__)
