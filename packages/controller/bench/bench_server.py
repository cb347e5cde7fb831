"""Benchmark: the socket server's round trip for a normal client, idle and under hostile load, against the
floor of the same request/response over a raw Unix socket to a trivial echo server, all in one run.

Three processes besides this one: the controller's `SocketServer` on a stub core that answers ``prompt``
at once (and ``observe`` with a 256 KiB page, so hang-ups land mid-reply); a trivial asyncio echo server
(each line written straight back: the floor, what any asyncio Unix-socket server costs); and, for the
loaded phase, a load generator that makes the server hold, all at once:

- 2,000 idle connections (connected, silent: within ``idle_timeout``);
- a burst of 1,000 connections opened concurrently, each answered a ``ping``, then held open;
- 300 slowloris clients dripping one byte a second into a long line (each is closed with
  "slow-request" after ``request_timeout``, 10 s, and reconnects);
- clients hanging up mid-reply: ``observe`` (a 256 KiB page), read 1 KiB, close or reset, 50 a second.

The measuring client (this process) sends ``prompt`` requests one at a time and times each round trip.
The accept path is timed on its own, idle: a new connection, one ``ping``, its reply, close (the server
reads the peer's credentials at accept and the core is told ``Connected``), against the same on
the echo server. Phases alternate floor and server in rounds so drift in the machine's load hits both. Reported: p50/p99
per phase, the loaded/idle p99 ratio of the server (goal: within 2x) and of the floor (how much of the
load is the machine's, on few cores), the server/floor ratios, and the server's RSS before, under and
after the load. No assertions: numbers only.

    python packages/controller/bench/bench_server.py [--requests N] [--rounds R] [--idle-seconds S]
        [--loaded-seconds S]
        [--idle 2000] [--burst 1000] [--slowloris 300] [--hangups-per-second 50] [--json]

File descriptors: the server holds about idle + burst + slowloris + a few connections and the generator
the other ends. Each process raises RLIMIT_NOFILE to its hard limit; if that is too low the idle count is
reduced to fit, and the table says so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

PROMPT = {"incarnation": "bench", "generation": 1, "clientRequestId": "r", "text": "hello, engine"}

# --------------------------------------------------------------------------------------------- roles


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def rss_kib(pid: int) -> int:
    """The process's resident set in KiB; -1 when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def role_server(path: str) -> None:
    """The controller's SocketServer on a stub core; stops when stdin closes."""
    from mosaic.controller.core import Call, Connected, Disconnected, Reply
    from mosaic.controller.server import ServerLimits, SocketServer

    raise_nofile()
    page = "p" * (256 * 1024)
    counts = {"connected": 0, "disconnected": 0, "calls": 0}

    async def main() -> None:
        def on_input(event: Any) -> None:
            if isinstance(event, Connected):
                counts["connected"] += 1
            elif isinstance(event, Disconnected):
                counts["disconnected"] += 1
            elif isinstance(event, Call):
                counts["calls"] += 1
                if event.method == "prompt":
                    server.deliver(Reply(event.conn, event.rpc_id, {
                        "outcome": "admitted",
                        "receipt": {"requestId": f"q{counts['calls']}", "state": "admitted"}}))
                elif event.method == "observe":
                    server.deliver(Reply(event.conn, event.rpc_id, {"page": page}))
                else:
                    server.deliver(Reply(event.conn, event.rpc_id, {}))

        # Every bound at its default except the connection bound, which must hold the whole load.
        server = SocketServer(path, on_input, limits=ServerLimits(max_connections=8192))
        await server.start()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await server.aclose()
        counts["internal_errors"] = server.internal_errors
        print(json.dumps(counts), flush=True)

    asyncio.run(main())


def role_echo(path: str) -> None:
    """The floor: a trivial asyncio Unix-socket server writing each line straight back."""
    raise_nofile()

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport = transport
            self.buf = b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            end = self.buf.rfind(b"\n")
            if end != -1:
                self.transport.write(self.buf[: end + 1])
                self.buf = self.buf[end + 1:]

    async def main() -> None:
        server = await asyncio.get_running_loop().create_unix_server(Echo, path, backlog=1024)
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(main())


async def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
    except BlockingIOError:
        # The listen backlog is full (AF_UNIX says EAGAIN): a blocking connect waits for room, bounded by
        # SO_SNDTIMEO (a Python timeout would make the socket non-blocking again).
        sock.setblocking(True)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 30, 0))
        await asyncio.to_thread(sock.connect, path)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", 0, 0))
        sock.setblocking(False)
    return sock


async def _readline(loop: asyncio.AbstractEventLoop, sock: socket.socket, buf: bytearray) -> bytes:
    while b"\n" not in buf:
        chunk = await loop.sock_recv(sock, 65536)
        if not chunk:
            return b""
        buf += chunk
    end = buf.index(b"\n")
    line = bytes(buf[: end + 1])
    del buf[: end + 1]
    return line


def role_load(path: str, idle: int, burst: int, slowloris: int, hangups_per_second: float) -> None:
    """The load generator: prints "loaded" once the idle, burst and slowloris connections are held,
    keeps the slowloris and hang-up clients going until stdin closes, then prints its counts."""
    raise_nofile()
    counts = {"idle": 0, "burst": 0, "burst_answered": 0, "slowloris_connects": 0, "slow_request_closes": 0,
              "hangups": 0, "errors": 0}
    held: list[socket.socket] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()

        for _ in range(idle):
            held.append(await _connect(path))
            counts["idle"] += 1

        async def drip() -> None:
            line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "observe",
                               "params": {"cursor": "c" * 200}}).encode()
            while not stop.is_set():
                sock = await _connect(path)
                counts["slowloris_connects"] += 1
                reader = asyncio.ensure_future(_readline(loop, sock, bytearray()))
                try:
                    for i in range(len(line)):
                        await loop.sock_sendall(sock, line[i:i + 1])
                        done, _ = await asyncio.wait({reader}, timeout=1.0)  # one byte a second
                        if done or stop.is_set():
                            break
                    if reader.done() and b"slow-request" in reader.result():
                        counts["slow_request_closes"] += 1
                except OSError:
                    pass
                finally:
                    reader.cancel()
                    sock.close()

        async def burst_one() -> None:
            sock = await _connect(path)
            held.append(sock)
            counts["burst"] += 1
            await loop.sock_sendall(sock, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
            if b'"result"' in await _readline(loop, sock, bytearray()):
                counts["burst_answered"] += 1

        async def hangups() -> None:
            i = 0
            while not stop.is_set():
                try:
                    sock = await _connect(path)
                    await loop.sock_sendall(sock, b'{"jsonrpc":"2.0","id":1,"method":"observe"}\n')
                    await loop.sock_recv(sock, 1024)
                    if i % 2:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.close()
                    counts["hangups"] += 1
                except OSError:
                    counts["errors"] += 1
                i += 1
                await asyncio.sleep(1.0 / hangups_per_second)  # pacing the load, not synchronising

        drippers = [asyncio.ensure_future(drip()) for _ in range(slowloris)]
        await asyncio.gather(*(burst_one() for _ in range(burst)))
        hanger = asyncio.ensure_future(hangups())
        print("loaded", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)
        stop.set()
        await asyncio.gather(hanger, *drippers, return_exceptions=True)
        for sock in held:
            sock.close()
        print(json.dumps(counts), flush=True)

    asyncio.run(main())


# ------------------------------------------------------------------------------------------- measuring


def measure(path: str, n: int) -> list[float]:
    """`n` sequential prompt round trips on one connection; microseconds each."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    out: list[float] = []
    buf = b""
    try:
        for i in range(n):
            line = json.dumps({"jsonrpc": "2.0", "id": i, "method": "prompt", "params": PROMPT}).encode() + b"\n"
            t0 = time.perf_counter_ns()
            sock.sendall(line)
            while b"\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the measuring connection")
                buf += chunk
            end = buf.index(b"\n")
            buf = buf[end + 1:]
            out.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        sock.close()
    return out


PING = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode() + b"\n"


def measure_connects(path: str, n: int) -> list[float]:
    """`n` times: connect, one ping, its reply (the echo floor echoes the line), close; microseconds each."""
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
            sock.sendall(PING)
            buf = b""
            while b"\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed a measuring connection")
                buf += chunk
        finally:
            sock.close()
        out.append((time.perf_counter_ns() - t0) / 1000)
    return out


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


class Proc:
    """A child process speaking lines on stdin/stdout (`role` makes the argv of one of this file's roles)."""

    def __init__(self, argv: list[str]) -> None:
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.p.stdout is not None

    def wait_line(self, expected: str) -> None:
        assert self.p.stdout is not None
        line = self.p.stdout.readline().strip()
        if line != expected:
            raise RuntimeError(f"{expected!r} expected from {self.p.args!r}, got {line!r}")

    def stop(self) -> dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.close()
        rest = self.p.stdout.read().strip().splitlines()
        self.p.wait(timeout=60)
        return json.loads(rest[-1]) if rest and rest[-1].startswith("{") else {}

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def role(*args: str) -> list[str]:
    """The argv that runs one of this file's roles."""
    return [sys.executable, os.path.abspath(__file__), "--role", *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--role", choices=["main", "server", "echo", "load"], default="main",
                        help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--requests", type=int, default=2000, help="round trips per phase and round")
    parser.add_argument("--connects", type=int, default=500, help="new connections per accept phase and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=1000)
    parser.add_argument("--slowloris", type=int, default=300)
    parser.add_argument("--hangups-per-second", type=float, default=50.0)
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="measure idle for at least this long")
    parser.add_argument("--loaded-seconds", type=float, default=15.0,
                        help="measure under load for at least this long (the slowloris bound is 10 s)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = parser.parse_args()
    if args.quick:
        args.requests = 200
        args.rounds = 1
        args.idle = 100
        args.burst = 100
        args.slowloris = 20
        args.idle_seconds = 1.0
        args.loaded_seconds = 2.0
    if args.role == "server":
        return role_server(args.socket)
    if args.role == "echo":
        return role_echo(args.socket)
    if args.role == "load":
        return role_load(args.socket, args.idle, args.burst, args.slowloris, args.hangups_per_second)

    notes: list[str] = []
    limit = raise_nofile()
    needed = args.idle + args.burst + args.slowloris + 200
    if limit < needed:
        fit = max(0, limit - args.burst - args.slowloris - 200)
        notes.append(f"RLIMIT_NOFILE hard limit {limit}: idle connections reduced from {args.idle} to {fit}")
        args.idle = fit
    else:
        notes.append(f"RLIMIT_NOFILE {limit} holds the whole load ({needed} per process)")

    tmp = tempfile.mkdtemp(prefix="mcb-", dir="/tmp")  # 0700, short enough for sun_path
    sock_path = os.path.join(tmp, "ctl.sock")
    echo_path = os.path.join(tmp, "echo.sock")
    procs: list[Proc] = []
    results: dict[str, list[float]] = {"floor idle": [], "server idle": [], "floor accept": [],
                                       "server accept": [], "floor loaded": [], "server loaded": []}
    try:
        server = Proc(role("server", "--socket", sock_path))
        procs.append(server)
        echo = Proc(role("echo", "--socket", echo_path))
        procs.append(echo)
        server.wait_line("ready")
        echo.wait_line("ready")
        measure(sock_path, 300)
        measure(echo_path, 300)  # warm-up
        rss_before = rss_kib(server.p.pid)
        t_idle = time.monotonic()
        rounds = 0
        while rounds < args.rounds or time.monotonic() - t_idle < args.idle_seconds:
            results["floor idle"] += measure(echo_path, args.requests)
            results["server idle"] += measure(sock_path, args.requests)
            results["floor accept"] += measure_connects(echo_path, args.connects)
            results["server accept"] += measure_connects(sock_path, args.connects)
            rounds += 1

        load = Proc(role("load", "--socket", sock_path, "--idle", str(args.idle), "--burst", str(args.burst),
                         "--slowloris", str(args.slowloris), "--hangups-per-second", str(args.hangups_per_second)))
        procs.append(load)
        t_load = time.monotonic()
        load.wait_line("loaded")
        load_ready_s = time.monotonic() - t_load
        rss_peak_loaded = rss_kib(server.p.pid)
        rounds = 0
        # At least --rounds rounds, and on until --loaded-seconds have passed since the load was held, so
        # the window takes in the slowloris clients' closes (request_timeout after they connected).
        while rounds < args.rounds or time.monotonic() - t_load < args.loaded_seconds:
            results["floor loaded"] += measure(echo_path, args.requests)
            results["server loaded"] += measure(sock_path, args.requests)
            rss_peak_loaded = max(rss_peak_loaded, rss_kib(server.p.pid))
            rounds += 1
        load_counts = load.stop()
        procs.remove(load)
        measure(sock_path, 10)
        rss_after = rss_kib(server.p.pid)
        echo.stop()
        procs.remove(echo)
        server_counts = server.stop()
        procs.remove(server)
    finally:
        for p in procs:
            p.kill()
        for name in (sock_path, echo_path):
            if os.path.lexists(name):
                os.unlink(name)
        os.rmdir(tmp)

    rows = {k: {"n": len(v), "p50_us": round(pct(v, 0.50), 1), "p99_us": round(pct(v, 0.99), 1),
                "mean_us": round(statistics.fmean(v), 1)} for k, v in results.items()}
    ratios = {
        "server loaded/idle p99 (goal <= 2.0)": rows["server loaded"]["p99_us"] / rows["server idle"]["p99_us"],
        "floor loaded/idle p99 (the machine)": rows["floor loaded"]["p99_us"] / rows["floor idle"]["p99_us"],
        "server/floor p99, idle": rows["server idle"]["p99_us"] / rows["floor idle"]["p99_us"],
        "server/floor p99, loaded": rows["server loaded"]["p99_us"] / rows["floor loaded"]["p99_us"],
        "server/floor p50, idle": rows["server idle"]["p50_us"] / rows["floor idle"]["p50_us"],
        "server/floor p50, accept (connect, ping, reply)": rows["server accept"]["p50_us"] / rows["floor accept"]["p50_us"],
        "server/floor p99, accept": rows["server accept"]["p99_us"] / rows["floor accept"]["p99_us"],
    }
    rss = {"before": rss_before, "loaded": rss_peak_loaded, "after": rss_after}
    report = {"rows": rows, "ratios": {k: round(v, 2) for k, v in ratios.items()}, "rss_kib": rss,
              "load": load_counts, "server": server_counts, "load_ready_s": round(load_ready_s, 2),
              "cpus": os.cpu_count(), "notes": notes}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{'phase':<16}{'n':>7}{'p50 us':>10}{'p99 us':>10}{'mean us':>10}")
    for name, row in rows.items():
        print(f"{name:<16}{row['n']:>7}{row['p50_us']:>10}{row['p99_us']:>10}{row['mean_us']:>10}")
    print()
    for name, value in ratios.items():
        print(f"{name:<40}{value:>8.2f}")
    print()
    print(f"server RSS KiB: before {rss['before']}, under load {rss['loaded']}, after {rss['after']}")
    print(f"load held ({load_ready_s:.1f} s to set up): {json.dumps(load_counts)}")
    print(f"server saw: {json.dumps(server_counts)}")
    print(f"cpus: {os.cpu_count()}")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
