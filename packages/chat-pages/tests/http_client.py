"""Raw HTTP for the server tests: requests written byte for byte (so a test controls every header a browser
would send, Host included), and uvicorn serving an ASGI app in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

Response = tuple[int, dict[str, str], bytes]


def netloc(url: str) -> str:
    """host:port of an http:// base URL (what a browser puts in Host)."""
    return url.removeprefix("http://").split("/", 1)[0]


def request(url: str, target: str, *, method: str = "GET", token: str | None = None,
            headers: Sequence[tuple[str, str]] = (), host: str | None = None, close: bool = True) -> bytes:
    """The bytes of one HTTP/1.1 request to the server at `url`: Host is the URL's host:port unless `host`
    is given ("" leaves it out); `token` goes in `Authorization: Bearer`; `headers` are added in order."""
    lines = [f"{method} {target} HTTP/1.1"]
    host = netloc(url) if host is None else host
    if host:
        lines.append(f"Host: {host}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k}: {v}" for k, v in headers]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def raw(url: str, data: bytes, timeout: float = 30, head_only: bool = False) -> Response:
    """Send `data` on a fresh connection and read one response: (status, lower-cased headers, body).
    `head_only`: the response to a HEAD request, which has headers but no content. A timeout raises
    (a test's bound, never a pass)."""
    with socket.create_connection(socket_address(url), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            top, sep, body = got.partition(b"\r\n\r\n")
            if sep:
                fields = {k.lower(): v for k, v in (x.split(": ", 1) for x in top.decode("latin-1").split("\r\n")[1:])}
                length = 0 if head_only else int(fields.get("content-length", "0"))
                if len(body) >= length:
                    break
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    return int(lines[0].split(" ")[1]), {k.lower(): v for k, v in (x.split(": ", 1) for x in lines[1:])}, body


def get(url: str, target: str, *, token: str | None = None, headers: Sequence[tuple[str, str]] = (),
        host: str | None = None, timeout: float = 30) -> Response:
    """One GET of `target` on a fresh connection (see `request` and `raw`)."""
    return raw(url, request(url, target, token=token, headers=headers, host=host), timeout)


def socket_address(url: str) -> tuple[str, int]:
    host, _, port = netloc(url).rpartition(":")
    return host.strip("[]"), int(port)


@contextmanager
def uvicorn_serving(app: Any) -> Iterator[str]:
    """uvicorn serving `app` on 127.0.0.1 (an ephemeral port) in a thread; yields its base URL and stops
    it afterwards. uvicorn is in the test extra: its absence is a broken venv, said loudly."""
    uvicorn = pytest.importorskip("uvicorn", reason="uvicorn is in the test extra; its absence is a broken venv")
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=5)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    started = threading.Event()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline and thread.is_alive():
        started.wait(0.02)  # uvicorn offers no start event; a bounded poll of its flag
    assert srv.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        srv.should_exit = True
        thread.join(20)
        sock.close()
