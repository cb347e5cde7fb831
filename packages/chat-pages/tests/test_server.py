"""Issue 14: the server of the two GET routes holds a burst, bounds its threads, times out idle and slow
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

import mosaic.chat_pages._server as server_module
from mosaic.chat_pages import ReaderServer, asgi_app, dump_bytes, route, serve


def _raw(url: str, request: bytes, timeout: float = 30, head_only: bool = False) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh connection; (status, lower-cased headers, body). `head_only`: the response
    to a HEAD request, which has headers but no content."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            top, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                headers = dict(x.split(": ", 1) for x in top.decode("latin-1").split("\r\n")[1:])
                length = 0 if head_only else int(headers.get("Content-Length", headers.get("content-length", "0")))
                if len(body) >= length:
                    break
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in (x.split(": ", 1) for x in lines[1:])}, body


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
    status, headers, body = _raw(server.url, f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode(),
                                 head_only=method == "HEAD")
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
            s.sendall(f"GET /conversations/{cid} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
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
    assert peak_threads <= threads_before + server_module.WORKERS + 1


def test_idle_and_slow_clients_are_timed_out(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "HEADER_TIMEOUT", 0.5)
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
        s.sendall(f"GET /conversations/{cid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.close()
    half = socket.create_connection((host, port), timeout=10)
    half.sendall(b"GET /conversations HTTP/1.1\r\nHo")
    half.close()
    time.sleep(0.5)
    status, _, _ = _raw(server.url, b"GET /conversations HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    out, err = capfd.readouterr()
    assert err == "" and "Traceback" not in out


TARGETS = ["/conversations", "/conversations?x=1", "/elsewhere", "/conversations/a/b", "/conversations/pi-" + "0" * 40,
           "/conversations/{cid}", "/conversations/{cid}?branch=nope", "/conversations/{cid}?cursor=c-x&branch=main",
           "/conversations/{cid}?actor=someone", "/conversations/{cid}?purpose=export"]


def _uvicorn(app: Any) -> tuple[Any, threading.Thread, str]:
    uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is in the test extra; its absence is a broken venv")
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=5)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.started, "uvicorn did not start"
    return srv, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_asgi_app_under_uvicorn_gives_the_same_status_table(world: World, server: ReaderServer) -> None:
    cid = _session(world)
    srv, thread, url = _uvicorn(asgi_app(world.reader))
    try:
        for target in [t.format(cid=cid) for t in TARGETS]:
            expected, _ = route(world.reader, target)
            for base in (server.url, url):
                status, headers, body = _raw(base, f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                                             .encode())
                assert status == expected, (base, target)
                assert headers["content-type"] == "application/json; charset=utf-8"
                assert json.loads(body)["ok"] is (status == 200)
        for method in ("POST", "HEAD", "OPTIONS", "DELETE"):
            status, headers, body = _raw(url, f"{method} /conversations HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                         f"Content-Length: 0\r\n\r\n".encode(), head_only=method == "HEAD")
            assert status == 405 and headers["allow"] == "GET"
            if method != "HEAD":
                assert json.loads(body)["error"] == "method-not-allowed"
        # A page and its next page through the ASGI app: cursors live in the one reader.
        status, _, body = _raw(url, f"GET /conversations/{cid} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                               .encode())
        first = json.loads(body)
        assert status == 200 and len(first["page"]["parts"]) == 100
        nxt = f"/conversations/{cid}?cursor={first['cursor']['id']}&branch=main"
        status, _, body = _raw(url, f"GET {nxt} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        assert status == 200 and len(json.loads(body)["page"]["parts"]) == 50
    finally:
        srv.should_exit = True
        thread.join(20)


def test_a_fault_of_the_reader_is_500_in_json_and_the_server_goes_on(world: World, server: ReaderServer,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cid = _session(world)

    def broken(**kw: Any) -> dict[str, Any]:
        raise RuntimeError("a bug in the reader")

    monkeypatch.setattr(world.reader, "open", broken)
    status, _, body = _raw(server.url, f"GET /conversations/{cid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 500 and json.loads(body) == {"ok": False, "error": "internal", "message": "the reader failed"}
    monkeypatch.undo()
    status, _, _ = _raw(server.url, f"GET /conversations/{cid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status == 200
