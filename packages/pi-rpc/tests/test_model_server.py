"""The scripted model server over real loopback HTTP, driven with urllib.

What it promises (mosaic.pi_rpc.testing.model_server docstring; FACTS.md Part 2): OpenAI chat-completions
SSE with ``choices[0].delta`` content / tool_calls, one finish_reason, a usage chunk only when asked,
``data: [DONE]``; the default scenario table; a request log; quiet handling of a client that goes away;
a clean stop. Every wait is bounded and waits on the server's log, never on a sleep.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest

from mosaic.pi_rpc.testing import (
    DEFAULT_SCENARIOS,
    ModelServer,
    RecordedRequest,
    Scenario,
    StreamText,
    models_json,
)

WAIT = 10.0


def _post(server: ModelServer, body: dict[str, Any], path: str = "/chat/completions",
          headers: dict[str, str] | None = None) -> Any:
    req = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer dummy", **(headers or {})},
        method="POST",
    )
    return urllib.request.urlopen(req, timeout=WAIT)


def _chat(text: str, *, usage: bool = True, extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "fake-model-1",
        "stream": True,
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}, *(extra or [])],
    }
    if usage:
        body["stream_options"] = {"include_usage": True}
    return body


def _events(raw: bytes) -> list[Any]:
    """The SSE data payloads: every event is `data: <payload>` followed by a blank line."""
    assert raw.endswith(b"\n\n"), raw[-40:]
    out: list[Any] = []
    for block in raw.split(b"\n\n")[:-1]:
        assert block.startswith(b"data: "), block
        payload = block[len(b"data: "):].decode()
        out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def _content(events: list[Any], key: str = "content") -> str:
    return "".join(e["choices"][0]["delta"].get(key, "") for e in events
                   if isinstance(e, dict) and e["choices"])


@pytest.fixture
def server() -> Any:
    with ModelServer() as srv:
        yield srv
    assert srv.errors == ()


def test_plain_text_stream_parses(server: ModelServer) -> None:
    resp = _post(server, _chat("Say hello"))
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/event-stream"
    events = _events(resp.read())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert _content(chunks) == "Hello from the fake model."
    # One finish_reason, in the last choice chunk; every earlier one is null (Pi treats a stream without a
    # finish_reason as an error: openai-completions.js 500-501).
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop" and all(f is None for f in finishes[:-1])
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    usage = chunks[-1]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == (
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"])
    assert {c["id"] for c in chunks} == {"chatcmpl-fake-1"}
    assert {c["model"] for c in chunks} == {"fake-model-1"}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}


def test_no_usage_chunk_unless_asked(server: ModelServer) -> None:
    events = _events(_post(server, _chat("Say hello", usage=False)).read())
    assert all("usage" not in e for e in events[:-1])
    assert events[-1] == "[DONE]"


def test_tool_call_stream_then_text_quoting_the_result(server: ModelServer) -> None:
    events = _events(_post(server, _chat("TOOLCALL please run it")).read())[:-1]
    calls = [tc for e in events if e["choices"] for tc in e["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0]["id"] == "call_fake_1" and calls[0]["type"] == "function"
    assert calls[0]["function"]["name"] == "bash"
    arguments = "".join(c["function"].get("arguments", "") for c in calls)
    assert json.loads(arguments) == {"command": "printf tool-ran-ok"}
    assert len(calls) >= 3, "the arguments arrive in pieces, as Pi's toolcall_delta events show"
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "tool_calls"

    follow = _chat("TOOLCALL please run it", extra=[
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_fake_1", "type": "function",
             "function": {"name": "bash", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_fake_1", "content": "tool-ran-ok"},
    ])
    events = _events(_post(server, follow).read())[:-1]
    assert _content(events) == "Tool result was: tool-ran-ok."
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1] == "stop"
    log = server.requests
    assert [r.scenario for r in log] == ["toolcall", "toolcall"]
    assert log[1].last_role == "tool" and log[1].last_tool_text == "tool-ran-ok"


def test_failonce_500_then_success_on_retry(server: ModelServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:
        _post(server, _chat("FAILONCE please"))
    assert info.value.code == 500
    assert json.loads(info.value.read()) == {"error": {"message": "scripted failure", "type": "server_error"}}
    info.value.close()
    events = _events(_post(server, _chat("FAILONCE please")).read())
    assert _content(events[:-1]) == "Hello from the fake model."
    # "Once" is per distinct user text: another FAILONCE text fails once too.
    with pytest.raises(urllib.error.HTTPError) as again:
        _post(server, _chat("FAILONCE other"))
    again.value.close()
    log = server.requests
    assert [(r.scenario, r.occurrence, r.outcome, r.status) for r in log] == [
        ("failonce", 0, "http-error", 500), ("failonce", 1, "completed", 200), ("failonce", 0, "http-error", 500)]


def test_slow_stream_cut_by_the_client(server: ModelServer) -> None:
    resp = _post(server, _chat("SLOW stream please"))
    first = resp.readline()
    assert first.startswith(b"data: ") and b"tick00 " in first
    resp.close()
    record = server.wait_for_outcome(1, WAIT)
    assert record.scenario == "slow"
    assert record.outcome == "disconnected"
    assert 1 <= record.chunks < 60, "the stream ended early, not by running out of ticks"
    # The server keeps serving after the disconnect.
    assert _content(_events(_post(server, _chat("Say hello")).read())[:-1]) == "Hello from the fake model."


def test_stop_ends_a_running_stream_and_joins(server: ModelServer) -> None:
    resp = _post(server, _chat("SLOW"))
    assert b"tick00" in resp.readline()
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    stopper.join(WAIT)
    assert not stopper.is_alive(), "stop() must end a running stream and return"
    assert server.requests[0].outcome == "stopped"
    rest = resp.read()
    resp.close()
    assert b"[DONE]" not in rest
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = server.base_url


def test_request_log_records_method_path_headers_body(server: ModelServer) -> None:
    body = _chat("Say hello")
    _post(server, body, headers={"X-Probe": "1"}).read()
    with pytest.raises(urllib.error.HTTPError) as nf:
        _post(server, body, path="/nope")
    assert nf.value.code == 404
    nf.value.close()
    bad = urllib.request.Request(server.base_url + "/chat/completions", data=b"not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as br:
        urllib.request.urlopen(bad, timeout=WAIT)
    assert br.value.code == 400
    br.value.close()
    with pytest.raises(urllib.error.HTTPError) as get:
        urllib.request.urlopen(server.base_url + "/models", timeout=WAIT)
    get.value.close()
    log = server.wait_for(lambda rs: len(rs) == 4 and all(r.outcome != "pending" for r in rs), WAIT)
    first = log[0]
    assert isinstance(first, RecordedRequest)
    assert (first.index, first.method, first.path) == (1, "POST", "/v1/chat/completions")
    assert first.body == body
    assert first.headers["Authorization"] == "Bearer dummy" and first.headers["X-Probe"] == "1"
    assert first.roles == ["system", "user"] and first.last_user_text == "Say hello"
    assert first.include_usage and (first.outcome, first.status, first.scenario) == ("completed", 200, "text")
    assert [(r.method, r.path, r.outcome, r.status) for r in log[1:]] == [
        ("POST", "/v1/nope", "not-found", 404),
        ("POST", "/v1/chat/completions", "bad-request", 400),
        ("GET", "/v1/models", "not-found", 404),
    ]
    assert log[2].body is None


def test_text_parts_count_as_user_text(server: ModelServer) -> None:
    body = _chat("")
    body["messages"][1]["content"] = [{"type": "text", "text": "TOOL"}, {"type": "text", "text": "CALL"}]
    events = _events(_post(server, body).read())
    assert server.requests[0].scenario == "toolcall"
    assert events[-1] == "[DONE]"


def test_think_streams_reasoning_before_text(server: ModelServer) -> None:
    events = _events(_post(server, _chat("THINK about it")).read())[:-1]
    assert _content(events, "reasoning_content") == "Let me think about this."
    assert _content(events) == "Thought about it. Hello from the fake model."
    kinds = [next(k for k in ("reasoning_content", "content") if k in e["choices"][0]["delta"])
             for e in events if e["choices"] and e["choices"][0]["finish_reason"] is None]
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning_content")


def test_scenarios_can_be_added_and_a_broken_table_is_reported() -> None:
    custom = Scenario("custom", "CUSTOM", lambda req: StreamText(("custom:", str(req.index))))
    with ModelServer(scenarios=(custom, *DEFAULT_SCENARIOS)) as srv:
        assert _content(_events(_post(srv, _chat("a CUSTOM one")).read())[:-1]) == "custom:1"
        assert _content(_events(_post(srv, _chat("plain")).read())[:-1]) == "Hello from the fake model."
        assert [r.scenario for r in srv.requests] == ["custom", "text"]
    with ModelServer(scenarios=(custom,)) as srv:
        with pytest.raises(urllib.error.HTTPError) as info:
            _post(srv, _chat("no keyword here"))
        assert info.value.code == 500
        info.value.close()
        rec = srv.wait_for_outcome(1, WAIT)
        assert rec.outcome == "http-error"
        assert len(srv.errors) == 1 and isinstance(srv.errors[0], LookupError)
    with pytest.raises(ValueError):
        ModelServer(scenarios=())


def test_wait_for_is_bounded(server: ModelServer) -> None:
    with pytest.raises(TimeoutError):
        server.wait_for(lambda rs: len(rs) > 0, 0.05)


def test_models_json_is_the_minimum_pi_accepts(server: ModelServer) -> None:
    doc = models_json(server.base_url)
    assert doc == {"providers": {"fakeprov": {
        "baseUrl": f"http://127.0.0.1:{server.port}/v1", "api": "openai-completions", "apiKey": "dummy",
        "models": [{"id": "fake-model-1"}]}}}


def test_context_manager_binds_loopback_and_stops() -> None:
    with ModelServer() as srv:
        url = srv.base_url
        assert url.startswith("http://127.0.0.1:")
        _post(srv, _chat("hi")).read()
    assert not any(t.name == "mosaic-model-server" for t in threading.enumerate())
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/chat/completions", data=b"{}", timeout=WAIT)
