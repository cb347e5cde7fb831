"""The socket server over a real Unix socket with a stub core: what reaches the core and what the client
reads, for well-formed and malformed requests, placeholders, refusals, core bugs, closes and EOF; and the
socket directory checks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import stat
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from server_harness import (  # noqa: E402
    BOUND,
    Client,
    StubCore,
    closing_reason,
    gather_bounded,
    run,
    serving,
    socket_dir,
)

from mosaic.controller.core import Call, CloseConnection, Connected, Disconnected, Notify, Refuse, Reply
from mosaic.controller.protocol import (  # noqa: E402
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LINE_TOO_LONG,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REFUSED,
)
from mosaic.controller.server import (  # noqa: E402
    Placeholder,
    ServerLimits,
    SocketPathError,
    SocketServer,
    socket_state,
)

PROMPT = {"incarnation": "inc", "generation": 1, "clientRequestId": "r1", "text": "hi"}


def only_connects(core: StubCore) -> bool:
    return all(isinstance(e, (Connected, Disconnected)) for e in core.inputs)


# ------------------------------------------------------------------------------------------- requests


def test_a_call_reaches_the_core_in_order_and_its_reply_comes_back() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (server, core):
                client = await Client.connect(d.sock)
                for i in range(5):
                    await client.send({"jsonrpc": "2.0", "id": i, "method": "prompt",
                                       "params": dict(PROMPT, clientRequestId=f"r{i}")})
                replies = [await client.recv() for _ in range(5)]
                assert [r["id"] for r in replies] == list(range(5))
                assert [r["result"]["params"]["clientRequestId"] for r in replies] == [f"r{i}" for i in range(5)]
                conn = core.connected()[0]
                assert server.connections == (conn,)
                assert [(c.conn, c.rpc_id, c.method) for c in core.calls()] == [(conn, i, "prompt") for i in range(5)]
                await client.aclose()

    run(main())


def test_ping_is_answered_by_the_server_and_never_reaches_the_core() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (_server, core):
                client = await Client.connect(d.sock)
                assert await client.request("ping") == {"jsonrpc": "2.0", "id": 1, "result": {}}
                assert (await client.request("ping", {}))["result"] == {}
                bad = await client.request("ping", {"x": 1})
                assert bad["error"]["code"] == INVALID_PARAMS
                assert core.calls() == []
                await client.aclose()

    run(main())


MALFORMED: list[tuple[str, bytes, int]] = [
    ("not-json", b"hello there", PARSE_ERROR),
    ("invalid-utf8", b'{"jsonrpc":"2.0","id":1,"method":"p\xffing"}', PARSE_ERROR),
    ("duplicate-keys", b'{"jsonrpc":"2.0","id":1,"method":"ping","method":"observe"}', PARSE_ERROR),
    ("nan", b'{"jsonrpc":"2.0","id":1,"method":"prompt","params":{"generation":NaN}}', PARSE_ERROR),
    ("lone-surrogate", b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{"cursor":"\\udfff"}}', PARSE_ERROR),
    ("not-json-rpc", b'{"jsonrpc":"1.0","id":1,"method":"observe"}', INVALID_REQUEST),
    ("no-id", b'{"jsonrpc":"2.0","method":"observe"}', INVALID_REQUEST),
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"observe"}]', INVALID_REQUEST),
    ("params-array", b'{"jsonrpc":"2.0","id":1,"method":"observe","params":["c"]}', INVALID_REQUEST),
    ("unknown-method", b'{"jsonrpc":"2.0","id":1,"method":"rm-rf"}', METHOD_NOT_FOUND),
    ("wrong-type", b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{"cursor":5}}', INVALID_PARAMS),
    ("bool-as-int", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompt",
                                "params": dict(PROMPT, generation=True)}).encode(), INVALID_PARAMS),
    ("unknown-param", json.dumps({"jsonrpc": "2.0", "id": 1, "method": "prompt",
                                  "params": dict(PROMPT, steer=True)}).encode(), INVALID_PARAMS),
]


@pytest.mark.parametrize(("raw", "code"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_request_gets_its_error_and_never_reaches_the_core(raw: bytes, code: int) -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (_server, core):
                client = await Client.connect(d.sock)
                await client.send(raw + b"\n")
                reply = await client.recv()
                assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == code
                assert "result" not in reply
                # the connection is still served afterwards, and the core saw only the good request
                assert "result" in await client.request("observe")
                assert [c.method for c in core.calls()] == ["observe"]
                await client.aclose()

    run(main())


def test_a_line_over_the_cap_is_answered_and_closed_without_buffering_it_whole() -> None:
    limits = ServerLimits(max_line_bytes=64 * 1024)
    one_read = 256 * 1024  # asyncio's largest recv

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (server, core):
                client = await Client.connect(d.sock)
                conn = (await _connected(core))[0]
                # 16 MiB without an LF, written while the server reads; it must cut the line off early.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    await client.send(b"x" * (16 * 1024 * 1024))
                messages = await client.read_to_eof()
                assert messages[0]["error"]["code"] == LINE_TOO_LONG and messages[0]["id"] is None
                assert closing_reason(messages) == "line-too-long"
                await core.wait_for(lambda: conn in core.disconnected())
                assert core.calls() == []
                stats = core.final_stats[conn]
                assert stats is not None
                assert stats.peak_read_buffer_bytes <= limits.max_line_bytes + 1 + one_read
                await client.aclose()

    run(main())


def test_a_line_exactly_at_the_cap_is_read_and_one_byte_more_is_not() -> None:
    limits = ServerLimits(max_line_bytes=4096)

    def with_len(n: int) -> bytes:
        base = {"jsonrpc": "2.0", "id": 1, "method": "observe", "params": {"cursor": ""}}
        pad = n - len(json.dumps(base, separators=(",", ":")))
        base["params"]["cursor"] = "c" * pad  # type: ignore[index]
        raw = json.dumps(base, separators=(",", ":")).encode()
        assert len(raw) == n
        return raw

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (_server, core):
                client = await Client.connect(d.sock)
                await client.send(with_len(4096) + b"\r\n")  # the CR does not count
                assert "result" in await client.recv()
                await client.send(with_len(4097) + b"\n")
                messages = await client.read_to_eof()
                assert messages[0]["error"]["code"] == LINE_TOO_LONG
                assert closing_reason(messages) == "line-too-long"
                assert len(core.calls()) == 1
                await client.aclose()

    run(main())


def test_a_client_that_keeps_sending_garbage_is_closed_with_garbage() -> None:
    limits = ServerLimits(max_consecutive_errors=4)

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (_server, core):
                # a good request resets the count: 3 bad, 1 good, 3 bad stays open
                patient = await Client.connect(d.sock)
                for _ in range(3):
                    await patient.send(b"nope\n")
                    assert (await patient.recv())["error"]["code"] == PARSE_ERROR
                assert "result" in await patient.request("ping")
                for _ in range(3):
                    await patient.send(b"[]\n")
                    assert (await patient.recv())["error"]["code"] == INVALID_REQUEST
                assert "result" in await patient.request("ping")

                noisy = await Client.connect(d.sock)
                await noisy.send(b"a\nb\nc\nd\ne\nf\n")
                messages = await noisy.read_to_eof()
                assert [m["error"]["code"] for m in messages[:-1]] == [PARSE_ERROR] * 4
                assert closing_reason(messages) == "garbage"
                assert only_connects(core)
                for c in (patient, noisy):
                    await c.aclose()

    run(main())


def test_split_reads_crlf_and_u2028_inside_a_line_are_one_request() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (_server, core):
                client = await Client.connect(d.sock)
                raw = json.dumps({"jsonrpc": "2.0", "id": "a", "method": "prompt",
                                  "params": dict(PROMPT, text="one\u2028two\u2029three \u00e9")},
                                 ensure_ascii=False).encode() + b"\r\n"
                for i in range(len(raw)):  # one byte per write, a multi-byte character split too
                    await client.send(raw[i:i + 1])
                reply = await client.recv()
                assert reply["id"] == "a"
                assert reply["result"]["params"]["text"] == "one\u2028two\u2029three \u00e9"
                assert len(core.calls()) == 1
                await client.aclose()

    run(main())


# ------------------------------------------------------------------------------------- refusals, bugs


def test_a_refuse_is_an_error_with_the_refusal_as_data() -> None:
    refusal = {"code": "busy", "reconcile": False, "message": "the engine is busy"}

    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()
            core.handlers["prompt"] = lambda call: Refuse(call.conn, call.rpc_id, refusal)
            async with serving(d.sock, core=core):
                client = await Client.connect(d.sock)
                reply = await client.request("prompt", PROMPT)
                assert reply["error"] == {"code": REFUSED, "message": "the engine is busy",
                                          "data": {"refusal": refusal}}
                await client.aclose()

    run(main())


def test_an_exception_in_the_core_is_answered_internal_error_logged_once_and_serving_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    def boom(call: Call) -> None:
        raise ZeroDivisionError("core bug")

    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()
            core.handlers["interrupt"] = boom
            async with serving(d.sock, core=core) as (server, _core):
                client = await Client.connect(d.sock)
                for _ in range(3):
                    reply = await client.request("interrupt", {"incarnation": "i", "generation": 1})
                    assert reply["error"]["code"] == INTERNAL_ERROR
                assert "result" in await client.request("observe")
                assert server.internal_errors == 3
                await client.aclose()

    with caplog.at_level(logging.DEBUG, logger="mosaic.controller.server"):
        run(main())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert "ZeroDivisionError" in errors[0].getMessage()


def test_a_reply_that_is_not_json_becomes_internal_error() -> None:
    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()
            core.handlers["observe"] = lambda call: Reply(call.conn, call.rpc_id, {"bad": {1, 2}})
            async with serving(d.sock, core=core):
                client = await Client.connect(d.sock)
                assert (await client.request("observe"))["error"]["code"] == INTERNAL_ERROR
                assert "result" in await client.request("ping")
                await client.aclose()

    run(main())


def test_deliver_refuses_actions_it_does_not_carry_out() -> None:
    from mosaic.controller.core import ReadPage

    server = SocketServer("/tmp/unused.sock", lambda e: None)
    with pytest.raises(TypeError):
        server.deliver(ReadPage("c1", 1, None))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        server.deliver(CloseConnection("c1", "because"))


# ------------------------------------------------------------------------------------------ placeholders


def test_a_placeholder_keeps_its_place_ahead_of_later_replies_and_notifications() -> None:
    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()
            held: list[Placeholder] = []

            def observe(call: Call) -> None:
                assert core.server is not None
                held.append(core.server.reserve(call.conn, call.rpc_id))

            core.handlers["observe"] = observe
            async with serving(d.sock, core=core) as (server, _core):
                client = await Client.connect(d.sock)
                await client.send({"jsonrpc": "2.0", "id": "page", "method": "observe"})
                await client.send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
                await client.send({"jsonrpc": "2.0", "id": "q", "method": "prompt", "params": PROMPT})
                await core.wait_for(lambda: len(core.calls()) == 2)
                conn = core.calls()[0].conn
                # the ping (before the prompt) was answered and a notification queued, all behind the page
                server.deliver(Notify((conn,), "event", {"n": 1}))
                stats = server.stats(conn)
                assert stats is not None and stats.outbox_bytes > 0
                held[0].fill(Reply(conn, "page", {"page": "first"}))
                got = [await client.recv() for _ in range(4)]
                assert [m.get("id", m.get("method")) for m in got] == ["page", "p1", "q", "event"]
                assert got[0]["result"] == {"page": "first"}
                with pytest.raises(RuntimeError):
                    held[0].fill(Reply(conn, "page", {}))
                await client.aclose()

    run(main())


def test_delivering_a_reply_fills_the_placeholder_reserved_for_it() -> None:
    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()

            def observe(call: Call) -> None:
                assert core.server is not None
                core.server.reserve(call.conn, call.rpc_id)

            core.handlers["observe"] = observe
            async with serving(d.sock, core=core) as (server, _core):
                client = await Client.connect(d.sock)
                await client.send({"jsonrpc": "2.0", "id": 1, "method": "observe"})
                await client.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
                await core.wait_for(lambda: len(core.calls()) == 1)
                conn = core.calls()[0].conn
                server.deliver(Refuse(conn, 1, {"code": "target", "reconcile": True, "message": "moved"}))
                first, second = await client.recv(), await client.recv()
                assert (first["id"], first["error"]["code"], second["id"]) == (1, REFUSED, 2)
                await client.aclose()

    run(main())


def test_a_placeholder_checks_what_fills_it() -> None:
    placeholder = Placeholder(None, "c1", 5)
    with pytest.raises(ValueError):
        placeholder.fill(Reply("c2", 5, {}))
    with pytest.raises(ValueError):
        placeholder.fill(Reply("c1", 6, {}))
    with pytest.raises(TypeError):
        placeholder.fill(CloseConnection("c1", "revoked"))  # type: ignore[arg-type]
    placeholder.fill(Reply("c1", 5, {}))  # inert: the connection is not served
    assert placeholder.filled


# ------------------------------------------------------------------------------------ ends of connections


async def read_then_close(client: Client) -> str | None:
    """Read to the end, close, and return the closing reason the server gave (None: none)."""
    messages = await client.read_to_eof()
    await client.aclose()
    return closing_reason(messages)


async def _connected(core: StubCore, n: int = 1) -> list[str]:
    await core.wait_for(lambda: len(core.connected()) >= n)
    return core.connected()


def test_close_connection_sends_closing_after_what_is_queued() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (server, core):
                client = await Client.connect(d.sock)
                conn = (await _connected(core))[0]
                server.deliver(Notify((conn,), "event", {"n": 1}))
                server.deliver(CloseConnection(conn, "revoked"))
                server.deliver(Notify((conn,), "event", {"n": 2}))  # after the close: dropped
                messages = await client.read_to_eof()
                assert [m["method"] for m in messages] == ["event", "closing"]
                assert messages[1]["params"]["reason"] == "revoked"
                await core.wait_for(lambda: core.disconnected() == [conn])
                assert server.connections == ()
                await client.aclose()

    run(main())


def test_disconnected_comes_exactly_once_whatever_ends_the_connection() -> None:
    limits = ServerLimits(max_consecutive_errors=1)

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits) as (server, core):
                clients = [await Client.connect(d.sock) for _ in range(6)]
                conns = await _connected(core, 6)
                assert all(await gather_bounded(*(c.request("ping") for c in clients)))
                # 0: hangs up; 1: resets; 2: half-closes (EOF); 3: garbage; 4: closed by the core;
                # 5: still open when the server shuts down
                await clients[0].aclose()
                clients[1].reset()
                clients[2].write_eof()
                await clients[3].send(b"junk\n")
                server.deliver(CloseConnection(conns[4], "revoked"))
                reasons = await gather_bounded(*(read_then_close(c) for c in clients[2:5]))
                assert reasons == [None, "garbage", "revoked"]
                await core.wait_for(lambda: set(core.disconnected()) == set(conns[:5]))
                assert server.connections == (conns[5],)
                await gather_bounded(server.aclose(), read_then_close(clients[5]))
                await core.wait_for(lambda: len(server._conns) == 0)
            assert sorted(core.disconnected()) == sorted(conns)
            assert len(core.disconnected()) == len(conns)
            assert isinstance(core.inputs[-1], Disconnected)

    run(main())


def test_eof_after_requests_still_gets_every_reply_then_the_close() -> None:
    async def main() -> None:
        with socket_dir() as d:
            core = StubCore()
            held: list[Placeholder] = []

            def observe(call: Call) -> None:
                assert core.server is not None
                held.append(core.server.reserve(call.conn, call.rpc_id))

            core.handlers["observe"] = observe
            async with serving(d.sock, core=core) as (_server, _core):
                client = await Client.connect(d.sock)
                await client.send(b'{"jsonrpc":"2.0","id":1,"method":"observe"}\n'
                                  b'{"jsonrpc":"2.0","id":2,"method":"ping"}\n{"jsonrpc":"2.0","id":3')
                client.write_eof()
                await core.wait_for(lambda: len(held) == 1)
                conn = core.calls()[0].conn
                assert conn not in core.disconnected()
                held[0].fill(Reply(conn, 1, {"late": True}))
                messages = await client.read_to_eof()
                assert [m["id"] for m in messages] == [1, 2]  # the unterminated tail is not a request
                await core.wait_for(lambda: core.disconnected() == [conn])
                await client.aclose()

    run(main())


def test_shutdown_tells_every_client_and_removes_the_socket_file() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (server, core):
                clients = [await Client.connect(d.sock) for _ in range(3)]
                await _connected(core, 3)
                assert stat.S_ISSOCK(os.lstat(d.sock).st_mode)
                # Clients close once they read the end, as the client library does.
                _, *reasons = await gather_bounded(server.aclose(), *(read_then_close(c) for c in clients))
                assert reasons == ["shutdown"] * 3
                assert not os.path.exists(d.sock)
                assert len(core.disconnected()) == 3
                await server.aclose()  # idempotent

    run(main())


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_closing_client_that_never_hangs_up_is_aborted_after_the_linger() -> None:
    clock = FakeClock()
    limits = ServerLimits(close_linger=5.0, request_timeout=3600, idle_timeout=3600)

    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock, limits=limits, clock=clock) as (server, core):
                client = await Client.connect(d.sock)
                conn = (await _connected(core))[0]
                server.deliver(CloseConnection(conn, "revoked"))
                assert (await client.recv())["params"]["reason"] == "revoked"
                assert await client.readline() is None  # our EOF; the client does not close
                gone = server._conns[conn].gone  # resolved when the transport is really gone
                clock.now += 4.9
                server.sweep()
                assert server.stats(conn) is not None and not gone.done()
                clock.now += 0.2
                server.sweep()
                await asyncio.wait_for(gone, 20)
                assert server.stats(conn) is None
                assert core.disconnected() == [conn]
                await client.aclose()

    run(main())


def test_shutdown_leaves_a_file_that_replaced_the_socket() -> None:
    async def main() -> None:
        with socket_dir() as d:
            async with serving(d.sock) as (server, _core):
                os.unlink(d.sock)
                Path(d.sock).write_text("someone else's")
                await server.aclose()
                assert Path(d.sock).read_text() == "someone else's"

    run(main())


# ------------------------------------------------------------------------------------ the socket directory


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701, 0o1700, 0o500])
def test_a_directory_that_is_not_private_is_refused(mode: int) -> None:
    async def main() -> None:
        with socket_dir() as d:
            os.chmod(d.path, mode)
            try:
                with pytest.raises(SocketPathError) as info:
                    await SocketServer(d.sock, lambda e: None).start()
                assert info.value.reason == "not-private"
                assert "0700" in str(info.value)
                assert not os.path.lexists(d.sock)
            finally:
                os.chmod(d.path, 0o700)

    run(main())


def test_a_symlinked_directory_is_refused() -> None:
    async def main() -> None:
        with socket_dir() as d:
            real = os.path.join(d.path, "real")
            link = os.path.join(d.path, "link")
            os.mkdir(real, 0o700)
            os.symlink(real, link)
            try:
                with pytest.raises(SocketPathError) as info:
                    await SocketServer(os.path.join(link, "ctl.sock"), lambda e: None).start()
                assert info.value.reason == "symlink"
                assert os.listdir(real) == []
            finally:
                os.unlink(link)
                os.rmdir(real)

    run(main())


@pytest.mark.skipif(os.getuid() != 0, reason="making a directory owned by another uid needs root")
def test_a_directory_owned_by_another_uid_is_refused() -> None:
    async def main() -> None:
        with socket_dir() as d:
            os.chown(d.path, 65534, -1)
            try:
                with pytest.raises(SocketPathError) as info:
                    await SocketServer(d.sock, lambda e: None).start()
                assert info.value.reason == "not-owned"
            finally:
                os.chown(d.path, os.getuid(), -1)

    run(main())


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink"])
def test_an_existing_path_that_is_not_a_socket_is_refused_and_never_unlinked(kind: str) -> None:
    async def main() -> None:
        with socket_dir() as d:
            if kind == "file":
                Path(d.sock).write_text("keep me")
            elif kind == "fifo":
                os.mkfifo(d.sock)
            else:
                os.symlink("/nonexistent-mosaic-target", d.sock)
            await refused_untouched(d.sock, "other", "exists")

    run(main())


async def refused_untouched(path: str, state: str, reason: str) -> None:
    """What is at `path` probes as `state`, a server's start there is refused `reason`, and the path is the
    same file afterwards (never unlinked, never replaced)."""
    before = os.lstat(path)
    assert socket_state(path) == state
    with pytest.raises(SocketPathError) as info:
        await SocketServer(path, lambda e: None).start()
    assert info.value.reason == reason
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_crashed_controller_socket_nobody_accepts_on_is_removed_and_rebound() -> None:
    """A crashed controller's socket, at the bind: a socket file whose server is gone (bound, never unlinked:
    a SIGKILL before `aclose`) answers connect with ECONNREFUSED; it is removed and the server binds and
    serves."""
    async def main() -> None:
        with socket_dir() as d:
            dead = socket.socket(socket.AF_UNIX)
            dead.bind(d.sock)
            dead.listen(1)
            dead.close()  # what the kernel does for a killed process: the file stays, nobody accepts
            assert socket_state(d.sock) == "stale"
            async with serving(d.sock) as (_server, _core):
                assert socket_state(d.sock) == "live"
                reader, writer = await asyncio.open_unix_connection(d.sock)
                writer.write(b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
                assert json.loads(await asyncio.wait_for(reader.readline(), BOUND))["result"] == {}
                writer.close()
            assert not os.path.lexists(d.sock)  # aclose removed the socket it bound

    run(main())


@pytest.mark.parametrize("backlog_full", [False, True])
def test_crashed_controller_socket_check_a_live_socket_is_refused_live_and_never_unlinked(backlog_full: bool) -> None:
    """A socket something accepts on is another server's, also while its backlog is full
    (connect: EAGAIN): refused "live", its file untouched, its server still serving."""
    async def main() -> None:
        with socket_dir() as d:
            live = socket.socket(socket.AF_UNIX)
            live.bind(d.sock)
            live.listen(0 if backlog_full else 8)
            clients: list[socket.socket] = []
            try:
                if backlog_full:
                    while True:  # fill the listener's backlog until a non-blocking connect would wait
                        c = socket.socket(socket.AF_UNIX)
                        c.setblocking(False)
                        clients.append(c)
                        try:
                            c.connect(d.sock)
                        except BlockingIOError:
                            break
                await refused_untouched(d.sock, "live", "live")
                if not backlog_full:
                    c = socket.socket(socket.AF_UNIX)
                    clients.append(c)
                    c.connect(d.sock)  # the first server still takes connections
            finally:
                for c in clients:
                    c.close()
                live.close()

    run(main())


@pytest.mark.parametrize(("path", "reason"), [
    ("relative/ctl.sock", "not-absolute"),
    ("/tmp/" + "x" * 120, "too-long"),
    ("/tmp/no-such-dir-for-mosaic-tests/ctl.sock", "missing"),
    ("/tmp/", "bad-name"),
])
def test_unusable_paths_are_refused(path: str, reason: str) -> None:
    async def main() -> None:
        with pytest.raises(SocketPathError) as info:
            await SocketServer(path, lambda e: None).start()
        assert info.value.reason == reason

    run(main())


def test_a_file_as_the_directory_is_refused() -> None:
    async def main() -> None:
        with socket_dir() as d:
            f = os.path.join(d.path, "file")
            d.extra.append(f)
            Path(f).write_text("")
            with pytest.raises(SocketPathError) as info:
                await SocketServer(os.path.join(f, "ctl.sock"), lambda e: None).start()
            assert info.value.reason == "not-a-directory"

    run(main())


def test_limits_are_checked() -> None:
    for bad in ({"max_connections": 0}, {"idle_timeout": 0}, {"backlog": True}, {"request_timeout": -1.0}):
        with pytest.raises(ValueError):
            ServerLimits(**bad)
    assert ServerLimits().backlog >= 1024
