#!/usr/bin/env python3
"""Load checks of the two GET routes' server (not a test, nothing is asserted).

1. A burst. A normal client pages a conversation over HTTP (open, then every next page, one
connection per request, as a simple client does) while the server holds, at the same time:

- 2,000 idle connections (connected, sending nothing; reconnected when the server times them out);
- 300 slowloris clients (a request head trickled one byte a second; reconnected when cut off);
- a burst of 1,000 connections, each asking for the catalogue, repeated every 2 s.

The normal client's p50/p99 latency under that load is compared with the same client's unloaded figures,
measured in the same run just before. Goal: p99 within 3x of the unloaded p99. The server runs in its own
process (`ReaderServer`, as `serve` starts it), the load in another (asyncio), the normal client here.

2. A slow conversation. A file of 3.8 MiB of malformed lines is opened by 8 clients at
once (each round appends a line, so every round parses it afresh) while another client asks, one request
after another, for the catalogue and for another conversation. Their latencies while the 8 opens are in
flight are compared with the same requests on the idle server, measured just before and just after (the floor). Goal:
within 2x. Two servers, each in its own process: `mosaic-read serve` (the command a user runs) and
`serve()` from the library with the interpreter's defaults (see the README, "Lanes").

    python packages/chat-pages/bench/bench_load.py [--requests 300] [--seconds 20] [--slow-seconds 4] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SERVER = r"""
import sys
from mosaic.chat_pages import RepositorySpec, create_reader, roots_from_specs, serve
specs = [RepositorySpec(sys.argv[1], "alpha", "/l")]
srv = serve(create_reader(lambda: roots_from_specs(specs)))
print(srv.url, srv.token, flush=True)
sys.stdin.read()  # until the parent closes stdin
srv.close()
"""

LOAD = r"""
import asyncio, sys
host, port, idle_n, slow_n, burst_n = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:6])
auth = f"Host: {host}:{port}\r\nAuthorization: Bearer {sys.argv[6]}\r\n".encode()
stats = {"idle_reconnects": 0, "slow_reconnects": 0, "burst_answered": 0, "burst_failed": 0}

async def idle() -> None:
    while True:
        try:
            r, w = await asyncio.open_connection(host, port)
            await r.read()  # returns when the server closes it
            w.close()
        except OSError:
            await asyncio.sleep(0.5)
        stats["idle_reconnects"] += 1

async def slow() -> None:
    head = b"GET /conversations HTTP/1.1\r\n" + auth + b"X-Slow: " + b"a" * 200
    while True:
        try:
            r, w = await asyncio.open_connection(host, port)
            for byte in head:
                w.write(bytes([byte]))
                await w.drain()
                await asyncio.sleep(1.0)
            w.close()
        except OSError:
            pass
        stats["slow_reconnects"] += 1

async def one() -> None:
    try:
        r, w = await asyncio.open_connection(host, port)
        w.write(b"GET /conversations HTTP/1.1\r\n" + auth + b"Connection: close\r\n\r\n")
        data = await asyncio.wait_for(r.read(), 120)
        w.close()
        stats["burst_answered" if data.startswith(b"HTTP/1.1 200") else "burst_failed"] += 1
    except (OSError, asyncio.TimeoutError):
        stats["burst_failed"] += 1

async def bursts() -> None:
    while True:
        await asyncio.gather(*(one() for _ in range(burst_n)))
        await asyncio.sleep(2.0)

async def main() -> None:
    tasks = [asyncio.create_task(idle()) for _ in range(idle_n)]
    tasks += [asyncio.create_task(slow()) for _ in range(slow_n)]
    tasks.append(asyncio.create_task(bursts()))
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes stdin
    import json
    print(json.dumps(stats), flush=True)
    for t in tasks:
        t.cancel()

asyncio.run(main())
"""


def _session(root: Path, entries: int) -> str:
    d = root / ".pi/state/alpha/sessions"
    d.mkdir(parents=True)
    lines = [json.dumps({"type": "session", "id": "s1", "version": 3, "timestamp": "2026-01-01T00:00:00Z",
                         "cwd": str(root)})]
    parent = None
    for i in range(entries):
        lines.append(json.dumps({"type": "message", "id": f"e{i}", "parentId": parent,
                                 "timestamp": "2026-01-01T00:00:01Z",
                                 "message": {"role": "user", "content": f"message {i} " + "word " * 40}}))
        parent = f"e{i}"
    (d / "s.jsonl").write_text("\n".join(lines) + "\n")
    return "s.jsonl"


TOKEN: dict[tuple[str, int], str] = {}  # the token of each server this run started


def _get(host: str, port: int, target: str, timeout: float = 60) -> tuple[float, dict[str, Any]]:
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN[host, port]}\r\n"
                  f"Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    elapsed = time.perf_counter() - t0
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:100]
    return elapsed, json.loads(body)


def _page_through(host: str, port: int, cid: str, requests: int, seconds: float = 0.0,
                  pid: int | None = None) -> tuple[list[float], int]:
    """The normal client: open the conversation and page to its end, again and again, for at least
    `requests` requests and `seconds` seconds. Also returns the most threads the server process had."""
    times: list[float] = []
    threads = 0
    end = time.monotonic() + seconds
    while len(times) < requests or time.monotonic() < end:
        if pid is not None:
            threads = max(threads, _threads(pid))
        t, res = _get(host, port, f"/conversations/{cid}")
        times.append(t)
        while res["cursor"] is not None and (len(times) < requests or time.monotonic() < end):
            t, res = _get(host, port, f"/conversations/{cid}?cursor={res['cursor']['id']}&branch=main")
            times.append(t)
    return times, threads


def _threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p / 100 * (len(xs) - 1)))]


SLOW_LIBRARY = r"""
import json, sys
from mosaic.chat_pages import RepositorySpec, create_reader, roots_from_specs, serve
srv = serve(create_reader(lambda: roots_from_specs([RepositorySpec(sys.argv[1], "alpha", "/l")])))
print(json.dumps({"serving": srv.url, "browserUrl": srv.token_url}), flush=True)
sys.stdin.read()  # until the parent closes stdin
srv.close()
"""

#: The hostile file: 3.8 MiB of malformed lines, two bytes each.
HOSTILE_BYTES = int(3.8 * 2**20)
SLOW_OPENS = 8


def _slow_tree(root: Path) -> tuple[Path, str, str]:
    """The hostile file, another conversation of 200 entries and 20 more files for the catalogue to list.
    Returns (hostile path, its id, the other's id)."""
    from mosaic.chat_pages import conversation_id

    d = root / ".pi/state/alpha/sessions"
    d.mkdir(parents=True)
    head = json.dumps({"type": "session", "id": "s1", "version": 3, "timestamp": "2026-01-01T00:00:00Z",
                       "cwd": str(root)}).encode() + b"\n"
    hostile = d / "hostile.jsonl"
    hostile.write_bytes(head + b"x\n" * ((HOSTILE_BYTES - len(head)) // 2))
    lines, parent = [head], None
    for i in range(200):
        lines.append(json.dumps({"type": "message", "id": f"e{i}", "parentId": parent,
                                 "timestamp": "2026-01-01T00:00:01Z",
                                 "message": {"role": "user", "content": f"message {i} " + "word " * 40}}).encode()
                     + b"\n")
        parent = f"e{i}"
    (d / "other.jsonl").write_bytes(b"".join(lines))
    for i in range(20):
        (d / f"c{i:02}.jsonl").write_bytes(head)
    return hostile, conversation_id(str(root), "alpha", "hostile.jsonl"), conversation_id(str(root), "alpha",
                                                                                          "other.jsonl")


def _slow_phase(label: str, argv: list[str], root: Path, hostile: Path, slow: str, other: str,
                seconds: float) -> dict[str, Any]:
    """One server (`argv` prints {"serving", "browserUrl"} on its first line): the floor, then rounds of 8 opens
    of the hostile file (each after an appended line, so each parses afresh) with the catalogue and the
    other conversation asked for, one after the other, until the 8 are answered."""
    import threading
    import urllib.parse

    server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stderr is not None
        line = server.stdout.readline()
        if not line:
            raise SystemExit(f"{label} did not start: {server.stderr.read()}")
        started = json.loads(line)
        host, port_s = started["serving"].removeprefix("http://").rsplit(":", 1)
        port = int(port_s)
        TOKEN[host, port] = urllib.parse.parse_qs(urllib.parse.urlsplit(started["browserUrl"]).query)["token"][0]
        for _ in range(5):  # warm: imports, the other conversation's parse
            _get(host, port, "/conversations")
            _get(host, port, f"/conversations/{other}")
        idle_cat = [_get(host, port, "/conversations")[0] for _ in range(60)]
        idle_other = [_get(host, port, f"/conversations/{other}")[0] for _ in range(60)]
        loaded_cat: list[float] = []
        loaded_other: list[float] = []
        opens: list[float] = []
        rounds = 0
        began = time.monotonic()
        while rounds < 1 or time.monotonic() - began < seconds:
            with open(hostile, "ab") as f:
                f.write(b"x\n")  # a new snapshot: this round parses the file again
            done: list[float] = []

            def one(done: list[float] = done) -> None:
                done.append(_get(host, port, f"/conversations/{slow}", timeout=600)[0])

            threads = [threading.Thread(target=one) for _ in range(SLOW_OPENS)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            while len(done) < SLOW_OPENS:
                loaded_cat.append(_get(host, port, "/conversations")[0])
                if len(done) < SLOW_OPENS:
                    loaded_other.append(_get(host, port, f"/conversations/{other}")[0])
            for t in threads:
                t.join()
            opens.append(time.perf_counter() - t0)
            rounds += 1
        # The floor again, after: on a shared machine the background load moves; both halves count.
        idle_cat += [_get(host, port, "/conversations")[0] for _ in range(60)]
        idle_other += [_get(host, port, f"/conversations/{other}")[0] for _ in range(60)]
    finally:
        server.terminate()  # mosaic-read serve stops on SIGTERM (and removes its token file)
        try:
            server.communicate(timeout=30)  # its one line on stopping is not this report's
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()
    out: dict[str, Any] = {"server": label, "rounds": rounds, "eight_opens_s": statistics.median(opens)}
    for name, idle, loaded in (("catalogue", idle_cat, loaded_cat), ("other", idle_other, loaded_other)):
        out[name] = {"idle_p50_ms": _pct(idle, 50) * 1e3, "loaded_p50_ms": _pct(loaded, 50) * 1e3,
                     "loaded_p90_ms": _pct(loaded, 90) * 1e3, "loaded_max_ms": max(loaded) * 1e3,
                     "loaded_requests": len(loaded)}
        out[name]["ratio_p50"] = out[name]["loaded_p50_ms"] / out[name]["idle_p50_ms"]
    return out


def _slow(args: argparse.Namespace) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="chat-pages-slow-") as tmp:
        root = Path(tmp) / "proj"
        hostile, slow, other = _slow_tree(root)
        servers = [("mosaic-read serve", [sys.executable, "-m", "mosaic.chat_pages", "serve", "--spec", str(root),
                                          "alpha", "--port", "0"]),
                   ("serve() (library, interpreter defaults)", [sys.executable, "-c", SLOW_LIBRARY, str(root)])]
        return [_slow_phase(label, argv, root, hostile, slow, other, args.slow_seconds) for label, argv in servers]


def _burst(args: argparse.Namespace) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.idle + args.slow + args.burst + 1024
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    from mosaic.chat_pages import conversation_id

    with tempfile.TemporaryDirectory(prefix="chat-pages-load-") as tmp:
        root = Path(tmp) / "proj"
        name = _session(root, args.entries)
        cid = conversation_id(str(root), "alpha", name)
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(root)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        load: subprocess.Popen[str] | None = None
        try:
            assert server.stdout is not None
            url, token = server.stdout.readline().split()
            host, port_s = url.removeprefix("http://").rsplit(":", 1)
            port = int(port_s)
            TOKEN[host, port] = token
            _page_through(host, port, cid, 20)  # warm the parse cache
            unloaded, unloaded_threads = _page_through(host, port, cid, args.requests, args.seconds, server.pid)
            load = subprocess.Popen([sys.executable, "-c", LOAD, host, str(port), str(args.idle), str(args.slow),
                                     str(args.burst), token], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            time.sleep(3.0)  # let the idle and slow connections build up and the first burst land
            t0 = time.perf_counter()
            loaded, loaded_threads = _page_through(host, port, cid, args.requests, args.seconds, server.pid)
            loaded_s = time.perf_counter() - t0
            assert load.stdin is not None and load.stdout is not None
            load.stdin.close()
            stats = json.loads(load.stdout.readline() or "{}")
        finally:
            for proc in (load, server):
                if proc is not None:
                    if proc.stdin is not None and not proc.stdin.closed:
                        proc.stdin.close()
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait()
    out = {
        "requests": args.requests, "entries": args.entries,
        "load": {"idle": args.idle, "slowloris": args.slow, "burst": args.burst, **stats},
        "unloaded_p50_ms": _pct(unloaded, 50) * 1e3, "unloaded_p99_ms": _pct(unloaded, 99) * 1e3,
        "loaded_p50_ms": _pct(loaded, 50) * 1e3, "loaded_p99_ms": _pct(loaded, 99) * 1e3,
        "loaded_seconds": loaded_s, "unloaded_mean_ms": statistics.mean(unloaded) * 1e3,
        "unloaded_requests": len(unloaded), "loaded_requests": len(loaded),
        "server_threads_unloaded": unloaded_threads, "server_threads_loaded": loaded_threads,
    }
    out["p99_ratio"] = out["loaded_p99_ms"] / out["unloaded_p99_ms"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=20.0, help="each phase lasts at least this long")
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--burst", type=int, default=1000)
    ap.add_argument("--slow-seconds", type=float, default=4.0,
                    help="the slow-conversation check runs rounds of 8 opens for at least this long per server")
    ap.add_argument("--only", choices=["burst", "slow"], help="run one check only")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a short run that proves the benchmark still runs (CI); its figures are not the README's")
    args = ap.parse_args()
    if args.quick:  # a tenth of the hostile file: the phase runs, its figures are not the README's
        global HOSTILE_BYTES
        HOSTILE_BYTES //= 10
        args.requests = 40
        args.seconds = 1.5
        args.entries = 200
        args.idle = 100
        args.slow = 20
        args.burst = 100
        args.slow_seconds = 1.0
    out: dict[str, Any] = {}
    if args.only != "slow":
        out["burst"] = _burst(args)
    if args.only != "burst":
        out["slow"] = _slow(args)
    if args.json:
        print(json.dumps(out))
        return 0
    if "burst" in out:
        b = out["burst"]
        print(f"1. burst: a normal client paging a {args.entries}-entry conversation, one connection per request, "
              f"{b['unloaded_requests']} requests unloaded and {b['loaded_requests']} loaded (at least "
              f"{args.seconds:.0f} s each)")
        print(f"load: {args.idle} idle connections, {args.slow} slowloris clients, bursts of {args.burst} every 2 s; "
              f"{b['load']}")
        print(f"server threads: {b['server_threads_unloaded']} unloaded, at most {b['server_threads_loaded']} under load")
        print(f"unloaded: p50 {b['unloaded_p50_ms']:.1f} ms, p99 {b['unloaded_p99_ms']:.1f} ms")
        print(f"loaded:   p50 {b['loaded_p50_ms']:.1f} ms, p99 {b['loaded_p99_ms']:.1f} ms "
              f"(p99 {b['p99_ratio']:.2f}x the unloaded p99; goal <= 3x)")
    for r in out.get("slow", []):
        print(f"2. slow conversation, {r['server']}: {SLOW_OPENS} opens of 3.8 MiB of malformed lines at once, "
              f"{r['rounds']} round(s), median {r['eight_opens_s']:.2f} s for the 8")
        for name in ("catalogue", "other"):
            x = r[name]
            print(f"   {name:9}: idle p50 {x['idle_p50_ms']:.2f} ms (the floor); during the opens p50 "
                  f"{x['loaded_p50_ms']:.2f} ms = {x['ratio_p50']:.2f}x the floor (goal <= 2x), p90 "
                  f"{x['loaded_p90_ms']:.2f} ms, max {x['loaded_max_ms']:.1f} ms, {x['loaded_requests']} requests")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
