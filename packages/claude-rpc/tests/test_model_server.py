"""The scripted Anthropic Messages server over real loopback HTTP, driven with urllib.

What it promises (mosaic.claude_rpc.testing.model_server docstring): the Messages API's SSE grammar
(message_start, content_block_start / delta / stop, message_delta, message_stop, each as `event:` + `data:`),
the default scenario table read from the last user text (reminders skipped), tool_use blocks for Bash, Write
and Agent, a slow stream, an image-aware answer, count_tokens, the non-streaming form, 404s in the API's
error shape, a request log, quiet handling of a client that goes away, a clean stop. Every wait is bounded
and waits on the server's log.
"""

from __future__ import annotations

import json
import socket
import socketserver
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import REPO

from mosaic.claude_rpc.testing import DEFAULT_SCENARIOS, ModelServer, Scenario, TextReply
from mosaic.claude_rpc.testing.model_server import SLOW_DELTAS, count_tokens

WAIT = 10.0


@pytest.fixture
def server() -> Iterator[ModelServer]:
    with ModelServer() as srv:
        yield srv
    assert srv.errors == ()


def _post(server: ModelServer, body: Any, path: str = "/v1/messages?beta=true") -> Any:
    req = urllib.request.Request(server.base_url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "x-api-key": "sk-ant-fake",
                                          "anthropic-version": "2023-06-01"})
    return urllib.request.urlopen(req, timeout=WAIT)


def _request(content: Any, *, stream: bool = True, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"model": "claude-opus-5-5", "max_tokens": 1000, "stream": stream, "system": [{"type": "text", "text": "sys"}],
            "messages": [*(history or []), {"role": "user", "content": content}]}


def _events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events: each block is `event: <name>` then `data: <json>`, blocks end with a blank line."""
    assert raw.endswith(b"\n\n"), raw[-40:]
    out = []
    for block in raw.decode().split("\n\n")[:-1]:
        event, data = block.split("\n")
        assert event.startswith("event: ") and data.startswith("data: "), block
        payload = json.loads(data[len("data: "):])
        assert payload["type"] == event[len("event: "):]
        out.append((payload["type"], payload))
    return out


def _text(events: list[tuple[str, dict[str, Any]]]) -> str:
    return "".join(p["delta"]["text"] for name, p in events if name == "content_block_delta"
                   and p["delta"]["type"] == "text_delta")


def test_a_text_turn_streams_the_messages_grammar_in_order(server: ModelServer) -> None:
    resp = _post(server, _request("hello there"))
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
    events = _events(resp.read())
    assert [name for name, _ in events] == ["message_start", "content_block_start", "content_block_delta",
                                            "content_block_delta", "content_block_stop", "message_delta",
                                            "message_stop"]
    start = events[0][1]["message"]
    assert (start["id"], start["role"], start["content"], start["model"]) == ("msg_0001", "assistant", [],
                                                                              "claude-opus-5-5")
    assert _text(events) == "Reply to: hello there"
    assert events[-2][1]["delta"]["stop_reason"] == "end_turn"
    rec = server.requests[0]
    assert (rec.route, rec.scenario, rec.outcome, rec.events) == ("/v1/messages", "text", "completed", 7)
    assert rec.headers["x-api-key"] == "sk-ant-fake"


def test_the_directive_is_the_last_typed_text_not_a_system_reminder(server: ModelServer) -> None:
    content = [{"type": "text", "text": "BASH: echo hi"}, {"type": "text", "text": "<system-reminder>x</system-reminder>"}]
    events = _events(_post(server, _request(content)).read())
    block = events[1][1]["content_block"]
    assert (block["type"], block["name"], block["id"]) == ("tool_use", "Bash", "toolu_0001")
    assert json.loads(events[2][1]["delta"]["partial_json"]) == {"command": "echo hi", "description": "scripted bash"}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


@pytest.mark.parametrize(("text", "name", "expected"), [
    ("WRITE: /abs/file.txt", "Write", {"file_path": "/abs/file.txt", "content": "written by the scripted model\n"}),
    ("AGENT please", "Agent", {"description": "scripted sub", "prompt": "SUBTASK reply please",
                               "subagent_type": "general-purpose"}),
])
def test_write_and_agent_directives_give_their_tool_use(server: ModelServer, text: str, name: str,
                                                        expected: dict[str, Any]) -> None:
    events = _events(_post(server, _request(text)).read())
    assert events[1][1]["content_block"]["name"] == name
    assert json.loads(events[2][1]["delta"]["partial_json"]) == expected


def test_a_tool_result_is_quoted_with_its_error_flag(server: ModelServer) -> None:
    history = [{"role": "user", "content": "BASH: false"},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]}]
    content = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "Exit code 1", "is_error": True}]
    events = _events(_post(server, _request(content, history=history)).read())
    assert _text(events) == "tool result seen (is_error=true): Exit code 1"
    assert server.requests[0].scenario == "tool-result"


def test_an_image_block_gets_an_image_aware_answer(server: ModelServer) -> None:
    content = [{"type": "text", "text": "what is this"},
               {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD" * 10}}]
    assert _text(_events(_post(server, _request(content)).read())) == "IMAGE seen: base64 image/png 40 b64 chars"


def test_a_reply_with_no_pause_is_written_in_one_piece_so_the_client_has_its_end_with_its_tool_use(
        server: ModelServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The binary asks for a tool's permission as the tool_use block ends; a reply written event by event
    could still be open then (an interrupt on that request ended a CI run's turn as `aborted_streaming`).
    Each stretch of events between two pauses is one write: a tool_use reply whole, a slow one a delta at a
    time."""
    writes: list[bytes] = []
    real = socketserver._SocketWriter.write

    def write(self: Any, data: Any) -> int:
        writes.append(bytes(data))
        return real(self, data)

    monkeypatch.setattr(socketserver._SocketWriter, "write", write)
    raw = _post(server, _request("BASH: touch x")).read()
    bodies = [w for w in writes if b"event: " in w]
    assert bodies == [raw] and [n for n, _ in _events(raw)][-1] == "message_stop"
    writes.clear()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
    body = json.dumps(_request("SLOW please")).encode()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    server.wait_for(lambda rs: len(rs) == 2 and rs[1].events >= 4, WAIT)
    sock.close()
    server.wait_for(lambda rs: rs[1].outcome != "pending", WAIT)
    slow = [w for w in writes if b"event: " in w]
    assert slow[0].count(b"event: ") == 3 and all(w.count(b"event: ") == 1 for w in slow[1:]), slow


def test_bash_late_ends_its_message_late_after_its_tool_use_block(server: ModelServer) -> None:
    """`BASH-LATE: <command>`: the same tool_use as `BASH: `, its block whole in the first write and the
    message's end 5 s later (the reply still streams while the binary, which asks for the tool
    as the block ends, waits for the answer). Read up to the block's end, then the client leaves."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
    body = json.dumps(_request("BASH-LATE: touch late")).encode()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while b"event: content_block_stop" not in got:
        got += sock.recv(65536)
    got = got.split(b"\r\n\r\n", 1)[1]
    rec = server.wait_for(lambda rs: rs[0].events >= 4, WAIT)[0]  # counted once the write returned
    assert (rec.scenario, rec.outcome, rec.events) == ("bash-late", "pending", 4)
    assert b"message_delta" not in got
    delta = [e for n, e in _events(got.split(b"event: content_block_stop")[0]) if n == "content_block_delta"]
    assert json.loads(delta[0]["delta"]["partial_json"]) == {"command": "touch late", "description": "scripted bash"}
    sock.close()


def test_slow_streams_sixty_deltas_and_a_client_that_leaves_is_recorded_quietly(server: ModelServer) -> None:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=WAIT)
    body = json.dumps(_request("SLOW please")).encode()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    server.wait_for(lambda rs: bool(rs) and rs[0].events >= 4, WAIT)
    sock.close()  # an interrupt closes the connection mid-stream
    rec = server.wait_for(lambda rs: rs[0].outcome != "pending", WAIT)[0]
    assert (rec.scenario, rec.outcome) == ("slow", "disconnected")
    assert 4 <= rec.events < 2 + len(SLOW_DELTAS)
    assert SLOW_DELTAS[0] == "slow00 " and SLOW_DELTAS[-1] == "slow59 " and len(SLOW_DELTAS) == 60


def test_count_tokens_answers_a_count_and_is_logged_as_such(server: ModelServer) -> None:
    body = _request("count me")
    answer = json.loads(_post(server, body, "/v1/messages/count_tokens?beta=true").read())
    assert answer == {"input_tokens": count_tokens(body)} and answer["input_tokens"] == 10
    assert server.requests[0].scenario == "count-tokens"


def test_a_request_without_stream_gets_the_whole_message_as_json(server: ModelServer) -> None:
    message = json.loads(_post(server, _request("plain", stream=False)).read())
    assert message["content"] == [{"type": "text", "text": "Reply to: plain"}]
    assert (message["stop_reason"], message["usage"]) == ("end_turn", {"input_tokens": 10, "output_tokens": 2})


def test_other_routes_and_bodies_are_refused_in_the_apis_error_shape(server: ModelServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as got:
        urllib.request.urlopen(server.base_url + "/api/hello", timeout=WAIT)
    assert got.value.code == 404 and json.loads(got.value.read())["error"]["type"] == "not_found_error"
    req = urllib.request.Request(server.base_url + "/v1/messages", data=b"[1]", method="POST")
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(req, timeout=WAIT)
    assert bad.value.code == 400
    head = urllib.request.Request(server.base_url + "/api/hello", method="HEAD")
    with pytest.raises(urllib.error.HTTPError) as probe:
        urllib.request.urlopen(head, timeout=WAIT)
    assert probe.value.code == 404
    assert [r.outcome for r in server.requests] == ["not-found", "bad-request", "not-found"]


def test_a_custom_table_is_consulted_first_and_the_default_table_ends_with_a_catch_all() -> None:
    assert [s.name for s in DEFAULT_SCENARIOS] == ["tool-result", "image", "bash", "bash-late", "write", "agent", "slow",
                                                   "text"]
    mine = Scenario("mine", lambda r: "MINE" in r.last_user_text, lambda r: TextReply(("mine",)))
    with ModelServer((mine, *DEFAULT_SCENARIOS)) as srv:
        assert _text(_events(_post(srv, _request("MINE now")).read())) == "mine"
        assert _text(_events(_post(srv, _request("other")).read())) == "Reply to: other"
    with pytest.raises(ValueError):
        ModelServer(())


def test_stop_cuts_a_running_stream_and_is_idempotent() -> None:
    srv = ModelServer().start()
    sock = socket.create_connection(("127.0.0.1", srv.port), timeout=WAIT)
    body = json.dumps(_request("SLOW")).encode()
    sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\n" + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    srv.wait_for(lambda rs: bool(rs) and rs[0].events >= 3, WAIT)
    srv.stop()
    srv.stop()
    sock.close()
    assert srv.requests[0].outcome == "stopped" and srv.errors == ()
    with pytest.raises(RuntimeError):
        _ = srv.port


def test_the_readme_scenario_table_is_the_default_table_in_order() -> None:
    readme = (REPO / "packages" / "claude-rpc" / "README.md").read_text()
    section = readme.split("### The scripted Anthropic Messages server", 1)[1].split("\n### ", 1)[0]
    rows = [line.split("|")[1].strip().strip("`") for line in section.splitlines()
            if line.startswith("| `")]
    assert rows == [s.name for s in DEFAULT_SCENARIOS]
