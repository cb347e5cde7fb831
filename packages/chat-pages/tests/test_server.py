"""The server of the two GET routes holds a burst, bounds its threads, times out idle and slow
clients, answers every method but GET with 405 in JSON, stays quiet when a client goes away; and the
routes as an ASGI application under a real ASGI server (uvicorn) give the same status table."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest
from helpers import World, entry, header, write_session
from http_client import get, raw, request, uvicorn_serving

from mosaic.chat_pages import ReaderServer, asgi_app, serve
from mosaic.chat_pages.parts import dump_bytes
from mosaic.chat_pages.server import WORKERS, route
from mosaic.chat_pages.testing import header_timeout


def _session(world: World) -> str:
    root = world.top / "proj"
    write_session(root, "s.jsonl", [header(root)] + [entry(f"e{i}", f"e{i-1}" if i else None, f"t{i}")
                                                     for i in range(150)])
    world.approve(root)
    return world.cid(root, "s.jsonl")




@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE", "CONNECT", "get", "POST", "PUT", "DELETE", "PATCH"])
def test_every_method_but_get_is_405_with_the_json_body(world: World, server: ReaderServer, method: str) -> None:
    cid = _session(world)
    target = "example.org:443" if method == "CONNECT" else f"/conversations/{cid}"  # CONNECT's authority form
    status, headers, body = raw(server.url, request(server.url, target, method=method, token=server.token,
                                                    close=False), head_only=method == "HEAD")
    assert status == 405 and headers["allow"] == "GET"
    assert headers["content-type"] == "application/json; charset=utf-8"
    refusal = dump_bytes({"ok": False, "error": "method-not-allowed", "message": "only GET"})
    if method == "HEAD":  # the headers of the JSON refusal, no content (HTTP: a HEAD response has none)
        assert body == b"" and int(headers["content-length"]) == len(refusal)
    else:
        assert json.loads(body) == json.loads(refusal)


def test_a_burst_of_1000_connections_is_answered_with_bounded_threads(world: World, server: ReaderServer) -> None:
    cid = _session(world)
    threads_before = threading.active_count()
    host, port = server.server_address[:2]
    socks = [socket.create_connection((host, port), timeout=60) for _ in range(1000)]
    try:
        for s in socks:
            s.sendall(request(server.url, f"/conversations/{cid}", token=server.token))
        peak_threads = threading.active_count()
        answered = 0
        for s in socks:
            data = b""
            while chunk := s.recv(65536):
                data += chunk
            assert data.startswith(b"HTTP/1.1 200 "), data[:80]
            answered += 1
            peak_threads = max(peak_threads, threading.active_count())
    finally:
        for s in socks:
            s.close()
    assert answered == 1000
    assert peak_threads <= threads_before + WORKERS + 1


def test_idle_and_slow_clients_are_timed_out(world: World) -> None:
    with header_timeout(0.5):
        srv = serve(world.reader)
        try:
            host, port = srv.server_address[:2]
            idle = socket.create_connection((host, port), timeout=10)
            slow = socket.create_connection((host, port), timeout=10)
            t0 = time.monotonic()
            for byte in b"GET /conversations HTTP/1.1\r\n":  # a slowloris: one byte every 0.1 s
                try:
                    slow.send(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.1)
            assert slow.recv(100) == b""  # closed without an answer: the whole head must come within the timeout
            assert idle.recv(100) == b""
            assert time.monotonic() - t0 < 8
            deadline = time.monotonic() + 5
            while srv.connections and time.monotonic() < deadline:
                time.sleep(0.05)
            assert srv.connections == 0
            idle.close()
            slow.close()
        finally:
            srv.close()


def test_a_client_that_goes_away_prints_nothing(world: World, server: ReaderServer,
                                                capfd: pytest.CaptureFixture[str]) -> None:
    cid = _session(world)
    host, port = server.server_address[:2]
    for _ in range(20):
        s = socket.create_connection((host, port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
        s.sendall(request(server.url, f"/conversations/{cid}", token=server.token, close=False))
        s.close()
    half = socket.create_connection((host, port), timeout=10)
    half.sendall(b"GET /conversations HTTP/1.1\r\nHo")
    half.close()
    time.sleep(0.5)
    status, _, _ = get(server.url, "/conversations", token=server.token)
    assert status == 200
    out, err = capfd.readouterr()
    assert err == "" and "Traceback" not in out


TARGETS = ["/conversations", "/conversations?x=1", "/elsewhere", "/conversations/a/b", "/conversations/pi-" + "0" * 40,
           "/conversations/{cid}", "/conversations/{cid}?branch=nope", "/conversations/{cid}?cursor=c-x&branch=main",
           "/conversations/{cid}?actor=someone", "/conversations/{cid}?purpose=export"]


def test_asgi_app_under_uvicorn_gives_the_same_status_table(world: World, server: ReaderServer) -> None:
    cid = _session(world)
    app = asgi_app(world.reader, token=server.token)
    with uvicorn_serving(app) as url:
        for target in [t.format(cid=cid) for t in TARGETS]:
            expected, _ = route(world.reader, target)
            for base in (server.url, url):
                status, headers, body = get(base, target, token=server.token)
                assert status == expected, (base, target)
                assert headers["content-type"] == "application/json; charset=utf-8"
                assert headers["x-content-type-options"] == "nosniff"
                assert json.loads(body)["ok"] is (status == 200)
        for method in ("POST", "HEAD", "OPTIONS", "DELETE"):
            status, headers, body = raw(url, request(url, "/conversations", method=method, token=server.token,
                                                     headers=[("Content-Length", "0")]), head_only=method == "HEAD")
            assert status == 405 and headers["allow"] == "GET"
            if method != "HEAD":
                assert json.loads(body)["error"] == "method-not-allowed"
        # A page and its next page through the ASGI app: cursors live in the one reader.
        status, _, body = get(url, f"/conversations/{cid}", token=server.token)
        first = json.loads(body)
        assert status == 200 and len(first["page"]["parts"]) == 100
        nxt = f"/conversations/{cid}?cursor={first['cursor']['id']}&branch=main"
        status, _, body = get(url, nxt, token=server.token)
        assert status == 200 and len(json.loads(body)["page"]["parts"]) == 50


def test_a_fault_of_the_reader_is_500_in_json_and_the_server_goes_on(world: World, server: ReaderServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cid = _session(world)

    def broken(**kw: Any) -> dict[str, Any]:
        raise RuntimeError("a bug in the reader")

    monkeypatch.setattr(world.reader, "open", broken)
    status, _, body = get(server.url, f"/conversations/{cid}", token=server.token)
    assert status == 500 and json.loads(body) == {"ok": False, "error": "internal", "message": "the reader failed"}
    monkeypatch.undo()
    status, _, _ = get(server.url, f"/conversations/{cid}", token=server.token)
    assert status == 200
