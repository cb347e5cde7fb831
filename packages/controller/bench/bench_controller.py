"""Benchmark: three goals for the whole controller (core, engine link and socket server in one
process, as it runs), each figure against a floor measured in the same run.

Processes besides this one (the measuring clients and observers live here):

- the controller: `ControllerCore` + `EngineLink` + `ControllerRuntime` in its own process, its engine the
  stub next to this file (stub_engine.py: pinned Pi's RPC framing, answers at once, stamps every record
  with CLOCK_MONOTONIC as it reads it). Default `Bounds`, `ServerLimits` at their defaults except the
  connection bound (8192, to hold the load). History pages come from a stub reader that returns a 256 KiB
  page at once, so a client hanging up after 1 KiB of its observe reply hangs up mid-reply;
- the floor: a trivial asyncio relay over the same stub (its own instance, same stamping). A client line is
  written as it is to the stub's stdin; the stub's lines go back to the client that wrote last, and each
  text_delta (and a run-settled per agent_settled) goes to every connection that sent ``observe`` as the same
  ``event`` notification bytes the controller sends (built with json.dumps), those of one read of the engine
  joined into one write per observer (issue 34's "batched relay"): what any asyncio process costs for the same
  hops;
- for the loaded phase, bench_server.py's load generator (``--role load``; the same shapes): 500 idle
  connections, 300 slowloris clients dripping a byte a second into a partial line (closed "slow-request"
  at 10 s, then reconnecting), and 50 clients a second hanging up mid-reply (``observe``, read 1 KiB,
  close, every other one with a reset).

Section 0, issue 34's rows (each the median of the rounds' paired ratios, min-max beside it): the prompt path
p50 and p99 overhead with `--observers` watchers on each side (a drain thread in this process reads them), the
server CPU per prompt (each role's ``time.process_time()``, all its threads, over a side's round), idle and with
the watchers, the whole idle turn (client write -> the terminal receipt read; the relay: -> agent_settled read)
and the fan-out's CPU against the batched relay. The prompt rows run against a second anchor too, the
required-work relay (required_relay.py: no controller code; per prompt the work the brief requires, the 3 engine
round trips, the look and the drift check's read off the loop, the controller's 14 notifications in 2 writes per
observer): each row is printed as the required-work relay against the plain relay (the floor of the brief's
work) and the controller against the required-work relay (what the controller adds over it), with the CPU the
required-work relay's file reads took (they grow with the session file). ``--prompt-only`` runs these rows alone.

The three goals:

1. Prompt path: from a client writing a ``prompt`` request (its CLOCK_MONOTONIC stamp just before the
   write) to the prompt record arriving on the engine's stdin (the stub's stamp). One prompt at a time:
   the client waits for its receipt to settle (finished, failed or delivery-unknown) before the next, so
   the slot is free. The floor sends the same JSON line through the relay and waits for the stub's
   agent_settled. Rounds alternate floor and controller; each figure is the median of the rounds' p50/p99.
   Run idle, then under load. Goals: controller p99 - floor p99 under 2 ms (idle and loaded); loaded p99
   / idle p99 within 2x.
2. Fan-out: a 10,000-delta reply to 64 observers (the controlling client is one of them). The stub writes
   the deltas as fast as the pipe takes them, each carrying its emit stamp; every observer reads its
   ``event`` notifications and takes receive stamp - emit stamp per delta. Reported: per-event latency
   p50/p99 over all observers, events delivered per second to all observers, and the wall time from the
   first emit to the last delivery, against the relay floor.
3. Isolation: the fan-out run again with one extra observer that connects, observes and never reads.
   Reported: the engine read rate (engine records the controller consumed per second, from the first
   emit), the other observers' p99 relative to the run without it (goal: within 5%, and the read rate too),
   the controller's RSS growth (peak during the run - before it, sampled every 5 ms; the worst run, since
   a later run reuses what an earlier one freed), and that the non-reader got the server's
   ``{"reason": "lagging"}`` marker with its outbox held at the cap (the server's own peak-outbox count),
   rather than unbounded buffering. The delta text is padded to 400 characters so one reply (about 6 MB
   per observer) passes the 4 MiB outbox cap; Pi's own deltas are shorter, its records longer. A fresh
   controller process serves sections 2 and 3 (the loaded phase leaves a high-water mark in the first
   one's RSS).

4. The prompt path's look at the session file (issue 27: a second writer seen before the next prompt runs):
   two controllers on copies of one realistic 18.6 MB session (pi-rpc's session generator, 11,265 entries;
   the stub resumes it), one as deployed (each prompt waits for one look at the file, on the runtime's own
   thread, before the core sees it), one given the verified point as its look for free (the core compares
   the same, the shell's hop left out). Rounds alternate; reported: each one's client write -> engine
   stdin p50/p99 and the p50 the look adds. Goal: under 0.2 ms.

Rounds alternate which side goes first. The machine has few cores and other jobs run: each table row says
how noisy its floor was across rounds (max - min over the median). No assertions: numbers only.

    python packages/controller/bench/bench_controller.py [--quick] [--json] [--rounds R] [--prompts N]
        [--loaded-seconds S] [--deltas N] [--observers N] [--fanout-rounds R] [--prompt-only]
        [--profile-controller PREFIX]

About 45 s by default on 2 cores (``--quick``: about 12 s, one fan-out round, 4 s under load, section 4 on a 2 MB session). Everything
it makes lives in one 0700 directory under /tmp (its sockets and stamp files, the stubs' session trees), removed by name at the
end; its processes (the controllers, the relay, the required-work relay, the load generator, the stubs) are stopped and reaped by
their recorded pids. ``--profile-controller`` runs the controllers under cProfile (to see where the time
goes; the profiler slows every figure).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from typing import Any

import bench_server  # this directory (a script's own): its roles, raise_nofile, rss_kib, pct, Proc
from bench_server import pct, raise_nofile, rss_kib

HERE = os.path.dirname(os.path.abspath(__file__))
STUB_SESSION_ID = "01a22bb8-0000-7000-8000-0000000stub1"  # the stub's session header id (stub_engine.py)
STUB = os.path.join(HERE, "stub_engine.py")
REQUIRED = os.path.join(HERE, "required_relay.py")  # section 0's second anchor, the required-work relay
TERMINAL = ("finished", "failed", "delivery-unknown")
MAX_OUTBOX = 4 * 1024 * 1024  # ServerLimits.max_outbox_bytes default (checked in the controller role)
WAIT = 120.0
DRAIN_WAIT = 30.0  # seconds the non-reader's drain waits for more (--quick: its reply may not reach the cap)

# --------------------------------------------------------------------------------------------- helpers


def stub_argv(stamps: str, session: str | None = None) -> list[str]:
    return [sys.executable, "-I", STUB, "--stamps", stamps, *(["--session", session] if session else [])]


def session_for(path: str, size: int = 0) -> str:
    """A fresh Pi session file beside the socket `path` (`<dir>/proj-<name>/.pi/state/seat/sessions/s.jsonl`),
    which the stub engine writes as Pi does and the controller's drift check reads (as deployed). With
    `size`, a realistic session of about that many bytes is written first (pi-rpc's generator), which the
    stub resumes."""
    project = os.path.join(os.path.dirname(path), "proj-" + os.path.basename(path).replace(".", "-"))
    sessions = os.path.join(project, ".pi", "state", "seat", "sessions")
    os.makedirs(sessions)
    session = os.path.join(sessions, "s.jsonl")
    if size:
        from mosaic.pi_rpc.testing.sessions import write_session

        write_session(session, cwd=project, session_id=STUB_SESSION_ID, size=size)
    return session


def read_stamps(path: str) -> tuple[dict[str, float], list[tuple[int, float, float]]]:
    """The stub's side file: prompt text -> arrival stamp, and each stream's (N, first emit, last write)."""
    prompts: dict[str, float] = {}
    streams: list[tuple[int, float, float]] = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts[0] == "p":
                prompts[parts[2]] = float(parts[1])
            elif parts[0] == "s":
                streams.append((int(parts[2]), float(parts[3]), float(parts[4])))
    return prompts, streams


def control_loop(on_stats: Callable[[], dict[str, Any]]) -> Callable[[], Any]:
    """A role's control channel: each ``stats`` line on stdin is answered with one JSON line on stdout;
    EOF returns. Runs the blocking reads off the loop."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                return
            if line.strip() == "stats":
                print(json.dumps(on_stats()), flush=True)

    return run


class EngineCount:
    """Engine records consumed since the last reset, with the first and last monotonic times."""

    def __init__(self) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0

    def add(self, n: int) -> None:
        now = time.monotonic()
        if not self.count:
            self.first = now
        self.count += n
        self.last = now

    def take(self) -> dict[str, Any]:
        out = {"events": self.count, "first": self.first, "last": self.last}
        self.count, self.first, self.last = 0, 0.0, 0.0
        return out


# ----------------------------------------------------------------------------------------------- roles


def role_controller(path: str, stamps: str, page_bytes: int, profile: str | None, session_bytes: int = 0,
                    look: str = "fresh") -> None:
    """The controller on the stub engine; ``stats`` on stdin, stops when stdin closes. With `profile`,
    the whole run is under cProfile and its stats are dumped there (for finding where the time goes; the
    profiler's own cost slows every figure). `session_bytes`: the stub resumes a realistic session of that
    size; `look` "free": each prompt comes with the verified point as its look (section 4's floor)."""
    from mosaic.controller import Bounds
    from mosaic.controller.core import (
        Call,
        ControllerCore,
        CoreConfig,
        EngineEvents,
        Input,
        SessionStat,
        new_incarnation,
    )
    from mosaic.controller.drift import DriftConfig
    from mosaic.controller.engines.pi import PI_RULES
    from mosaic.controller.runtime import ControllerRuntime, SessionFileReader
    from mosaic.controller.server import ServerLimits
    from mosaic.pi_rpc import EngineLink
    from mosaic.pi_rpc.link import EngineEvent

    raise_nofile()
    limits = ServerLimits(max_connections=8192)
    assert limits.max_outbox_bytes == MAX_OUTBOX, "the isolation run is sized for the default outbox cap"
    page = {"ok": True, "page": {"entries": "p" * page_bytes}}
    engine = EngineCount()

    class CountingRuntime(ControllerRuntime):
        """Counts the engine records each batch hands the core, after the core has taken them."""

        def feed(self, event: Input) -> None:
            if look == "free" and isinstance(event, Call) and event.method == "prompt" and event.session is None:
                verdict = self.core.drift_verdict  # the look a shell would have taken, given for free
                event = dataclasses.replace(event, session=SessionStat(verdict.seen if verdict else None))
            super().feed(event)
            if isinstance(event, EngineEvents):
                n = sum(1 for e in event.events if isinstance(e, EngineEvent))
                if n:
                    engine.add(n)

    async def main() -> None:
        # The drift check on, as deployed: the stub keeps a Pi session file and answers get_entries.
        session = session_for(path, session_bytes)
        core = ControllerCore(CoreConfig(conversation="bench", execution="exec-1", binding="binding-exec-1",
                                         incarnation=new_incarnation(), engine=PI_RULES, bounds=Bounds(),
                                         drift=DriftConfig(STUB_SESSION_ID)), now=time.time())
        link = await EngineLink.spawn(stub_argv(stamps, session), env={"PATH": "/usr/bin:/bin"},
                                      cwd=os.path.dirname(path), core=core.link, clock=time.time)
        reader = SessionFileReader(session.rsplit("/.pi/state/", 1)[0], ".pi/state/seat/sessions", "s.jsonl")
        runtime = CountingRuntime(core, link, path, page_reader=lambda cursor: page, limits=limits,
                                  session_reader=reader)
        server = runtime.server

        def stats() -> dict[str, Any]:
            conns = [s for s in (server.stats(c) for c in server.connections) if s is not None]
            return {**engine.take(), "connections": len(conns), "cpu": time.process_time(),
                    "peak_outbox_max": max((s.peak_outbox_bytes for s in conns), default=0),
                    "dropped_total": sum(s.dropped_notifications for s in conns),
                    "internal_errors": runtime.internal_errors + server.internal_errors,
                    "poisoned": core.link.poisoned, "binding": core.binding_state, "sequence": core.sequence,
                    "drift_verdict": None if core.drift_verdict is None else core.drift_verdict.reason,
                    "drift_incremental": None if core.drift_verdict is None else core.drift_verdict.incremental,
                    "fences": sorted(core.fences)}

        try:
            await runtime.start()
            assert link.process is not None
            print(f"ready {link.process.pid}", flush=True)
            await control_loop(stats)()
            final = stats()
        finally:
            await runtime.aclose()
            await link.aclose()  # kills and reaps the stub it spawned
        print(json.dumps(final), flush=True)

    if profile is None:
        asyncio.run(main())
        return
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.runcall(asyncio.run, main())
    finally:
        profiler.dump_stats(profile)


def role_relay(path: str, stamps: str) -> None:
    """The floor: a trivial asyncio relay between Unix-socket clients and the same stub engine."""
    raise_nofile()
    engine = EngineCount()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        observers: list[asyncio.Transport] = []
        state: dict[str, Any] = {"requester": None, "seq": 0}
        dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

        def note(event_type: str, payload: dict[str, Any]) -> bytes:
            state["seq"] += 1
            seq = state["seq"]
            return dumps({"jsonrpc": "2.0", "method": "event", "params": {
                "type": "event", "event": f"exec-1.{seq}", "execution": "exec-1", "sequence": seq,
                "eventType": event_type, "visibility": "visible", "at": time.time(),
                "payload": payload}}).encode() + b"\n"

        class Engine(asyncio.SubprocessProtocol):
            def __init__(self) -> None:
                self.buf = b""

            def pipe_data_received(self, fd: int, data: bytes) -> None:
                lines = (self.buf + data).split(b"\n")
                self.buf = lines.pop()
                outs: list[bytes] = []  # batched: one write per observer per read of the engine
                for line in lines:
                    if line.startswith(b'{"type":"message_update"'):
                        sub = json.loads(line)["assistantMessageEvent"]
                        outs.append(note("text-delta", {"message": "m2", "contentIndex": sub["contentIndex"],
                                                        "delta": sub["delta"]}))
                        continue
                    requester = state["requester"]
                    if requester is not None and not requester.is_closing():
                        requester.write(line + b"\n")
                    if b'"type":"agent_settled"' in line:
                        outs.append(note("run-settled", {}))
                if outs:
                    out = outs[0] if len(outs) == 1 else b"".join(outs)
                    for t in observers:
                        t.write(out)
                if lines:
                    engine.add(len(lines))

        class Client(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                assert isinstance(transport, asyncio.Transport)
                self.transport = transport
                self.buf = b""

            def data_received(self, data: bytes) -> None:
                lines = (self.buf + data).split(b"\n")
                self.buf = lines.pop()
                for line in lines:
                    message = json.loads(line) if b'"observe"' in line else None
                    if isinstance(message, dict) and message.get("method") == "observe":
                        observers.append(self.transport)
                        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
                        self.transport.write(dumps(reply).encode() + b"\n")
                    else:
                        state["requester"] = self.transport
                        stdin.write(line + b"\n")

            def connection_lost(self, exc: Exception | None) -> None:
                if self.transport in observers:
                    observers.remove(self.transport)
                if state["requester"] is self.transport:
                    state["requester"] = None

        proc, _ = await loop.subprocess_exec(Engine, *stub_argv(stamps, session_for(path)), stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        pipe = proc.get_pipe_transport(0)
        assert isinstance(pipe, asyncio.WriteTransport)
        stdin: asyncio.WriteTransport = pipe
        server = await loop.create_unix_server(Client, path, backlog=1024)
        try:
            print(f"ready {proc.get_pid()}", flush=True)
            await control_loop(lambda: {**engine.take(), "connections": len(observers),
                                          "cpu": time.process_time()})()
        finally:
            server.close()
            stdin.close()  # the stub exits at EOF
            for _ in range(200):
                if proc.get_returncode() is not None:
                    break
                await asyncio.sleep(0.01)  # bounded wait for the stub to exit at EOF
            proc.close()  # kills it if it has not
        print(json.dumps(engine.take()), flush=True)

    asyncio.run(main())


# ------------------------------------------------------------------------------------------- processes


class Proc(bench_server.Proc):
    """A role's process (bench_server's line protocol), with the stub engine it spawned and `stats`;
    killed and reaped by its recorded pid."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.child: int | None = None  # the stub engine a role spawned

    def wait_ready(self) -> None:
        assert self.p.stdout is not None
        line = self.p.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError(f"'ready' expected from {self.p.args!r}, got {line!r}")
        if len(line) > 1:
            self.child = int(line[1])

    def ask(self) -> dict[str, Any]:
        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write("stats\n")
        self.p.stdin.flush()
        result: dict[str, Any] = json.loads(self.p.stdout.readline())
        return result

    def kill(self) -> None:
        super().kill()
        child = self.child
        if child is not None:
            # The stub exits at EOF on stdin once its parent is gone; kill it by its pid if it is still the
            # stub (a reaped pid could have been reused).
            with contextlib.suppress(OSError):
                with open(f"/proc/{child}/cmdline", "rb") as f:
                    if STUB.encode() in f.read():
                        os.kill(child, 9)


def me(role: str, *args: str) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--role", role, *args]


# ---------------------------------------------------------------------------------- 1. the prompt path


class LineClient:
    """A blocking JSON-RPC client on one Unix socket, reading lines."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        self.sock.connect(path)
        self.buf = b""
        self.rid = 0

    def line(self) -> bytes:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(1 << 18)
            if not chunk:
                raise ConnectionError("the server closed the measuring connection")
            self.buf += chunk
        end = self.buf.index(b"\n")
        line, self.buf = self.buf[:end], self.buf[end + 1:]
        return line

    def request(self, method: str, params: dict[str, Any]) -> bytes:
        self.rid += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.rid, "method": method, "params": params},
                          separators=(",", ":")).encode() + b"\n"

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(self.request(method, params))
        prefix = b'{"jsonrpc":"2.0","id":%d,' % self.rid
        while True:
            line = self.line()
            if line.startswith(prefix):
                reply: dict[str, Any] = json.loads(line)
                return reply

    def close(self) -> None:
        self.sock.close()


def controlling_client(path: str) -> tuple[LineClient, dict[str, Any]]:
    client = LineClient(path)
    observed = client.call("observe", {})["result"]
    token = observed["incarnation"]
    took = client.call("takeover", {"incarnation": token, "expectedGeneration": observed["generation"]})
    return client, {"incarnation": token, "generation": took["result"]["generation"]}


def prompt_round(client: LineClient, auth: dict[str, Any], tag: str, n: int, *, controller: bool,
                 ends: dict[str, float] | None = None) -> tuple[dict[str, float], dict[str, int]]:
    """`n` prompts one at a time; client stamps by text, and what the receipts ended as. With `ends`, each
    prompt's whole turn: the stamp when the client read its terminal receipt (the floor: agent_settled)."""
    sent: dict[str, float] = {}
    outcomes: dict[str, int] = {}
    for i in range(n):
        text = f"b:{tag}:{i}"
        line = client.request("prompt", {**auth, "clientRequestId": text, "text": text})
        prefix = b'{"jsonrpc":"2.0","id":%d,' % client.rid
        crid = b'"clientRequest":"%s"' % text.encode()
        t0 = time.monotonic()
        client.sock.sendall(line)
        sent[text] = t0
        while True:
            got = client.line()
            if not controller:
                if b'"type":"agent_settled"' in got:
                    if ends is not None:
                        ends[text] = time.monotonic()
                    outcomes["settled"] = outcomes.get("settled", 0) + 1
                    break
            elif got.startswith(prefix):
                if b'"error"' in got[:40]:
                    outcomes["refused"] = outcomes.get("refused", 0) + 1
                    break
            elif b'"type":"receipt"' in got and crid in got:
                state = json.loads(got)["params"]["state"]
                if state in TERMINAL:
                    if ends is not None:
                        ends[text] = time.monotonic()
                    outcomes[state] = outcomes.get(state, 0) + 1
                    break
    return sent, outcomes


def summarize(rounds: list[list[float]]) -> dict[str, Any]:
    """Per-round p50/p99 and their medians (the reported figures), pooled figures, and the spread."""
    p50s = [pct(r, 0.50) for r in rounds if r]
    p99s = [pct(r, 0.99) for r in rounds if r]
    pooled = [x for r in rounds for x in r]
    med50, med99 = statistics.median(p50s), statistics.median(p99s)
    return {"n": len(pooled), "rounds": len(p99s), "p50": med50, "p99": med99,
            "pooled_p50": pct(pooled, 0.50), "pooled_p99": pct(pooled, 0.99),
            "p99_rounds": [round(x, 1) for x in p99s],
            "p50_spread": (max(p50s) - min(p50s)) / med50 if med50 else float("nan"),
            "p99_spread": (max(p99s) - min(p99s)) / med99 if med99 else float("nan")}


class Drain:
    """`n` observer connections to each of the given sockets (each sent ``observe``), read and discarded on
    a thread of their own until `close`: the watchers a prompt's events and receipts go to."""

    def __init__(self, paths: list[str], n: int) -> None:
        import selectors

        self.sel = selectors.DefaultSelector()
        self.socks: list[socket.socket] = []
        self.bytes_by_path = dict.fromkeys(paths, 0)
        for path in paths:
            for _ in range(n):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(WAIT)
                sock.connect(path)
                sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{}}\n')
                sock.recv(1, socket.MSG_PEEK)  # answered: subscribed from here
                sock.setblocking(False)
                self.socks.append(sock)
                self.sel.register(sock, selectors.EVENT_READ, path)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self.sel.select(0.05):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                with contextlib.suppress(BlockingIOError):
                    self.bytes_by_path[key.data] += len(sock.recv(1 << 18))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.socks:
            self.sel.unregister(sock)
            sock.close()
        self.sel.close()


def measure_prompt_path(args: argparse.Namespace, ctl: Proc, floor: Proc, req: Proc, paths: dict[str, str],
                        notes: list[str]) -> dict[str, Any]:
    ctl_client, auth = controlling_client(paths["ctl"])
    floor_client = LineClient(paths["floor"])
    floor_auth = {"incarnation": auth["incarnation"], "generation": auth["generation"]}  # the same line
    req_client, req_auth = controlling_client(paths["req"])
    sent: dict[str, dict[str, list[dict[str, float]]]] = {}
    ended: dict[str, dict[str, list[dict[str, float]]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}  # phase -> side -> CPU seconds per prompt, per round
    reads: dict[str, list[float]] = {}  # phase -> the required-work relay's file read and hash, CPU s per prompt
    session_bytes: dict[str, int] = {}  # phase -> its session file's size at the phase's end
    outcomes: dict[str, int] = {}

    def run_round(phase: str, r: int, n: int) -> None:
        # The sides in turn, the order rotated every round; the required-work relay (the second anchor) in
        # the idle and observed phases only (the load targets the controller and the plain relay's figures).
        order = [("floor", floor_client, floor_auth, floor), ("ctl", ctl_client, auth, ctl)]
        if phase != "loaded":
            order.append(("req", req_client, req_auth, req))
        order = order[r % len(order):] + order[:r % len(order)]
        for side, client, a, proc in order if r % 2 == 0 else order[::-1]:
            ends: dict[str, float] = {}
            before = proc.ask()
            stamps, got = prompt_round(client, a, f"{side}-{phase}-{r}", n, controller=side != "floor", ends=ends)
            after = proc.ask()
            cpu.setdefault(phase, {}).setdefault(side, []).append((after["cpu"] - before["cpu"]) / n)
            if "read_cpu" in after:  # the required-work relay: its file reads' share, and the file's size
                reads.setdefault(phase, []).append((after["read_cpu"] - before["read_cpu"]) / n)
                session_bytes[phase] = after["session_bytes"]
            sent.setdefault(phase, {}).setdefault(side, []).append(stamps)
            ended.setdefault(phase, {}).setdefault(side, []).append(ends)
            for k, v in got.items():
                key = f"{side}:{k}"
                outcomes[key] = outcomes.get(key, 0) + v

    try:
        run_round("warm", 0, 100)
        rss_idle = rss_kib(ctl.p.pid)
        r = 0
        t_idle = time.monotonic()
        while r < args.rounds:
            run_round("idle", r, args.prompts)
            r += 1
        idle_s = time.monotonic() - t_idle

        # The same with `observers` watchers on each side (the controller's receipts and events, the relay's
        # run-settled, go to every one of them).
        drain = Drain([paths["ctl"], paths["floor"], paths["req"]], args.observers)
        try:
            run_round("warm-observed", 0, 50)
            sent_before = dict(drain.bytes_by_path)  # the observe replies (the controller's: a 256 KiB page) left out
            for r in range(args.rounds):
                run_round("observed", r, args.prompts)
        finally:
            drain.close()
        # Bytes each observer was sent per prompt: the required-work relay's notifications are the
        # controller's shapes (this checks their size), the plain relay's one run-settled.
        observer_bytes = {side: (drain.bytes_by_path[paths[side]] - sent_before[paths[side]])
                          / max(1, args.observers) / (args.rounds * args.prompts) for side in ("ctl", "floor", "req")}

        load_counts: dict[str, Any] = {}
        held = held_after = 0
        load_ready_s = loaded_s = 0.0
        rss_loaded = rss_kib(ctl.p.pid)
        if not args.prompt_only:
            load = Proc(bench_server.role("load", "--socket", paths["ctl"], "--idle", str(args.idle), "--burst", "0",
                                          "--slowloris", str(args.slowloris), "--hangups-per-second",
                                          str(args.hangups_per_second)))  # the server benchmark's load shapes
            try:
                t_load = time.monotonic()
                load.wait_line("loaded")
                held = ctl.ask()["connections"]
                while held < args.idle + args.slowloris and time.monotonic() - t_load < 30:
                    time.sleep(0.05)  # polling the controller's count until the whole load is held
                    held = ctl.ask()["connections"]
                load_ready_s = time.monotonic() - t_load
                rss_loaded = rss_kib(ctl.p.pid)
                t_measure = time.monotonic()
                r = 0
                while r < args.rounds or time.monotonic() - t_measure < args.loaded_seconds:
                    run_round("loaded", r, args.prompts)
                    rss_loaded = max(rss_loaded, rss_kib(ctl.p.pid))
                    r += 1
                held_after = ctl.ask()["connections"]
                loaded_s = time.monotonic() - t_measure
                load_counts = load.stop()
            finally:
                load.kill()  # by its pid, if stop() did not end it
        rss_after = rss_kib(ctl.p.pid)
    finally:
        ctl_client.close()
        floor_client.close()
        req_client.close()

    engine: dict[str, float] = {}
    for name in ("stamps-ctl", "stamps-floor", "stamps-req"):
        engine.update(read_stamps(paths[name])[0])
    results: dict[str, Any] = {}
    missing = 0
    for phase in ("idle", "observed") if args.prompt_only else ("idle", "observed", "loaded"):
        for side in ("floor", "ctl") if phase == "loaded" else ("floor", "ctl", "req"):
            rounds: list[list[float]] = []
            turns: list[list[float]] = []
            for stamps, ends in zip(sent[phase][side], ended[phase][side], strict=True):
                lat = [(engine[t] - t0) * 1e6 for t, t0 in stamps.items() if t in engine]
                missing += len(stamps) - len(lat)
                rounds.append(lat)
                turns.append([(ends[t] - t0) * 1e6 for t, t0 in stamps.items() if t in ends])
            results[f"{side} {phase}"] = {**summarize(rounds), "rounds_p50": [pct(x, 0.5) for x in rounds],
                                          "rounds_p99": [pct(x, 0.99) for x in rounds],
                                          "turn": summarize(turns), "turn_rounds_p50": [pct(x, 0.5) for x in turns],
                                          "cpu_us": [1e6 * c for c in cpu[phase][side]]}
    if missing:
        notes.append(f"{missing} prompts have no engine stamp (left out)")
    return {"phases": results, "outcomes": outcomes, "load": load_counts, "observer_bytes": observer_bytes,
            "req_read_us": {k: [1e6 * x for x in v] for k, v in reads.items()}, "req_session_bytes": session_bytes, "held": held,
            "held_after": held_after, "load_ready_s": round(load_ready_s, 2), "idle_s": round(idle_s, 1),
            "loaded_s": round(loaded_s, 1),
            "rss_kib": {"idle": rss_idle, "loaded_peak": rss_loaded, "after": rss_after}}


# --------------------------------------------------------------- 4. the prompt path's look at the session file


def measure_look(args: argparse.Namespace, procs: dict[str, Proc], paths: dict[str, str],
                 notes: list[str]) -> dict[str, Any]:
    """Section 4: the two controllers (`look`: as deployed; `free`: the look given) on copies of one
    realistic session; alternate rounds of prompts; each side's client write -> engine stdin."""
    clients = {side: controlling_client(paths[f"{side}-look"]) for side in ("fresh", "free")}
    sent: dict[str, list[dict[str, float]]] = {"fresh": [], "free": []}
    outcomes: dict[str, int] = {}
    try:
        for r in range(args.look_rounds + 1):  # round 0 warms both up and is left out
            order = ("fresh", "free") if r % 2 == 0 else ("free", "fresh")
            for side in order:
                client, auth = clients[side]
                stamps, got = prompt_round(client, auth, f"look-{side}-{r}", args.prompts, controller=True)
                if r:
                    sent[side].append(stamps)
                for k, v in got.items():
                    outcomes[f"{side}:{k}"] = outcomes.get(f"{side}:{k}", 0) + v
    finally:
        for client, _ in clients.values():
            client.close()
    result: dict[str, Any] = {"outcomes": outcomes, "session_bytes": args.look_bytes,
                              "finals": {side: proc.ask() for side, proc in procs.items()}}
    per_round: dict[str, list[list[float]]] = {}
    for side in ("fresh", "free"):
        engine = read_stamps(paths[f"stamps-{side}-look"])[0]
        per_round[side] = [[(engine[t] - t0) * 1e6 for t, t0 in stamps.items() if t in engine]
                           for stamps in sent[side]]
        result[side] = summarize(per_round[side])
    # Paired per round: the same round's two sides ran back to back.
    added = [pct(a, 0.5) - pct(b, 0.5) for a, b in zip(per_round["fresh"], per_round["free"], strict=True) if a and b]
    result["added_p50_rounds"] = [round(x, 1) for x in added]
    result["added_p50"] = statistics.median(added) if added else float("nan")
    if any(not k.endswith(":finished") for k in outcomes):
        notes.append(f"section 4 prompt outcomes other than finished: {outcomes}")
    return result


# ------------------------------------------------------------------------------- 2. and 3. the fan-out


class Observer(asyncio.Protocol):
    """One observer connection: per text-delta, receive stamp (once per read) - the emit stamp in it."""

    def __init__(self) -> None:
        self.buf = b""
        self.lat = array("d")
        self.deltas = 0
        self.last = 0.0
        self.markers = 0
        self.replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.settled = asyncio.Event()
        self.receipt = asyncio.Event()
        self.crid = b""
        self.rid = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def reset(self, crid: str) -> None:
        self.lat = array("d")
        self.deltas = 0
        self.last = 0.0
        self.markers = 0
        self.settled.clear()
        self.receipt.clear()
        self.crid = b'"clientRequest":"%s"' % crid.encode()

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        lines = (self.buf + data).split(b"\n") if self.buf else data.split(b"\n")
        self.buf = lines.pop()
        append = self.lat.append
        n = 0
        for line in lines:
            i = line.find(b'"delta":"')
            if i >= 0:
                append(now - float(line[i + 9:i + 29]))
                n += 1
            else:
                self.other(line)
        if n:
            self.deltas += n
            self.last = now

    def other(self, line: bytes) -> None:
        if line.startswith(b'{"jsonrpc":"2.0","id":'):
            message = json.loads(line)
            future = self.replies.pop(message["id"], None)
            if future is not None and not future.done():
                future.set_result(message)
        elif b'"eventType":"run-settled"' in line:
            self.settled.set()
        elif b'"reason":"lagging"' in line:
            self.markers += 1
        elif b'"type":"receipt"' in line and self.crid and self.crid in line:
            if json.loads(line)["params"]["state"] in TERMINAL:
                self.receipt.set()

    def write_request(self, method: str, params: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        assert self.transport is not None
        self.rid += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.replies[self.rid] = future
        self.transport.write(json.dumps({"jsonrpc": "2.0", "id": self.rid, "method": method, "params": params},
                                        separators=(",", ":")).encode() + b"\n")
        return future


async def observers(path: str, n: int) -> list[Observer]:
    loop = asyncio.get_running_loop()
    out: list[Observer] = []
    for _ in range(n):
        _, obs = await loop.create_unix_connection(Observer, path)
        out.append(obs)
    await asyncio.wait_for(asyncio.gather(*(o.write_request("observe", {}) for o in out)), WAIT)
    return out


class RssSampler:
    """Samples a process's RSS every 5 ms on a thread; `peak` after `stop`."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss_kib(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_kib(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kib(self.pid))
        return self.peak - self.before


def nonreader(path: str) -> socket.socket:
    """Connect, observe, and wait (peeking, nothing consumed) until the observe was answered: from then the
    connection is subscribed. Never read afterwards."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(WAIT)
    sock.connect(path)
    sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"observe","params":{}}\n')
    sock.recv(1, socket.MSG_PEEK)
    return sock


def drain_nonreader(sock: socket.socket) -> dict[str, Any]:
    """Read what the non-reader was sent until the lagging marker: the bytes held for it up to there."""
    sock.settimeout(DRAIN_WAIT)
    total = 0
    tail = b""
    try:
        while True:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return {"marker": False, "bytes_to_marker": total, "dropped": 0}
            window = tail + chunk
            i = window.find(b'"reason":"lagging","dropped":')
            if i >= 0:
                end = window.find(b"\n", i)
                while end < 0:
                    more = sock.recv(4096)
                    if not more:
                        break
                    window += more
                    end = window.find(b"\n", i)
                line_start = window.rfind(b"\n", 0, i) + 1
                marker = json.loads(window[line_start:end])
                total += end + 1 - len(tail)
                return {"marker": True, "bytes_to_marker": total, "dropped": marker["params"]["dropped"]}
            total += len(chunk)
            tail = window[-256:]
    except TimeoutError:
        return {"marker": False, "bytes_to_marker": total, "dropped": 0}
    finally:
        sock.close()


async def stream_run(args: argparse.Namespace, obs: list[Observer], proc: Proc, stamps: str, crid: str,
                     auth: dict[str, Any] | None, extra: socket.socket | None) -> dict[str, Any]:
    """One streamed reply of `args.deltas` deltas; the figures of this run."""
    driver = obs[0]
    for o in obs:
        o.reset(crid)
    cpu0 = proc.ask()["cpu"]  # also resets the engine counter
    sampler = RssSampler(proc.p.pid)
    text = f"stream {args.deltas} {args.delta_bytes}"
    reply = driver.write_request("prompt", {**(auth or {"incarnation": "floor", "generation": 2}),
                                            "clientRequestId": crid, "text": text})
    if auth is not None:
        answer = await asyncio.wait_for(reply, WAIT)
        if "error" in answer:
            raise RuntimeError(f"the stream prompt was refused: {answer['error']}")
    incomplete = 0
    try:
        await asyncio.wait_for(asyncio.gather(*(o.settled.wait() for o in obs)), WAIT)
        if auth is not None:
            await asyncio.wait_for(driver.receipt.wait(), WAIT)
    except TimeoutError:
        incomplete = sum(1 for o in obs if not o.settled.is_set())
    growth = sampler.stop()
    engine = proc.ask()
    _, streams = read_stamps(stamps)
    n, first_emit, last_emit = streams[-1]
    lat = array("d")
    for o in obs:
        lat.extend(o.lat)
    last = max(o.last for o in obs)
    out: dict[str, Any] = {
        "p50_ms": pct(lat, 0.50) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3,
        "delivered": sum(o.deltas for o in obs), "min_per_observer": min(o.deltas for o in obs),
        "markers_on_readers": sum(o.markers for o in obs), "incomplete": incomplete,
        "wall_s": last - first_emit, "throughput": sum(o.deltas for o in obs) / (last - first_emit),
        "emit_s": last_emit - first_emit,
        "read_rate": engine["events"] / (engine["last"] - first_emit) if engine["events"] else 0.0,
        "rss_growth_kib": growth, "peak_outbox_max": engine.get("peak_outbox_max", 0),
        "dropped_total": engine.get("dropped_total", 0), "cpu_s": engine["cpu"] - cpu0,
    }
    if extra is not None:
        out["nonreader"] = drain_nonreader(extra)
    return out


async def measure_fanout(args: argparse.Namespace, ctl: Proc, floor: Proc, paths: dict[str, str]) -> dict[str, Any]:
    ctl_obs = await observers(paths["fan"], args.observers)
    floor_obs = await observers(paths["floor"], args.observers)
    driver = ctl_obs[0]
    observed = (await asyncio.wait_for(driver.write_request("observe", {}), WAIT))["result"]
    token = observed["incarnation"]
    took = await asyncio.wait_for(driver.write_request(
        "takeover", {"incarnation": token, "expectedGeneration": observed["generation"]}), WAIT)
    auth = {"incarnation": token, "generation": took["result"]["generation"]}
    runs: dict[str, list[dict[str, Any]]] = {"floor": [], "ctl": [], "iso": []}
    try:
        for r in range(args.fanout_rounds):
            order = ["floor", "ctl", "iso"] if r % 2 == 0 else ["floor", "iso", "ctl"]
            for kind in order:
                if kind == "floor":
                    runs[kind].append(await stream_run(args, floor_obs, floor, paths["stamps-floor"],
                                                       f"s:{kind}:{r}", None, None))
                else:
                    extra = nonreader(paths["fan"]) if kind == "iso" else None
                    runs[kind].append(await stream_run(args, ctl_obs, ctl, paths["stamps-fan"], f"s:{kind}:{r}",
                                                       auth, extra))
    finally:
        for o in (*ctl_obs, *floor_obs):
            if o.transport is not None:
                o.transport.close()
    return runs


def median_of(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in runs))


def spread_of(runs: list[dict[str, Any]], key: str) -> float:
    values = [r[key] for r in runs]
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid and len(values) > 1 else 0.0


# -------------------------------------------------------------------------------------------- the table


def row(section: str, figure: str, unit: str, value: float, floor: float | None, ratio: float | None,
        goal: str, met: bool | None, noise: float | None = None) -> dict[str, Any]:
    return {"section": section, "figure": figure, "unit": unit, "value": value, "floor": floor,
            "ratio": ratio, "goal": goal, "met": "-" if met is None else ("met" if met else "missed"),
            "floor_spread": noise}


def paired(values: list[float], floors: list[float]) -> tuple[float, float, float]:
    """min, median, max of the per-round ratios value / floor (each round's two sides ran back to back)."""
    ratios = [v / f for v, f in zip(values, floors, strict=True) if f]
    return min(ratios), statistics.median(ratios), max(ratios)


def spread_text(r: tuple[float, float, float]) -> str:
    return f"{r[1]:.2f}x ({r[0]:.2f}-{r[2]:.2f})"


def build_rows(prompt: dict[str, Any], fan: dict[str, list[dict[str, Any]]] | None, deltas: int,
               observers: int) -> list[dict[str, Any]]:
    """The table's rows; with `fan` None (``--prompt-only``) section 0's prompt rows alone."""
    rows: list[dict[str, Any]] = []
    ph = prompt["phases"]
    req = "required-work relay"

    def anchors(name: str, unit: str, values: dict[str, list[float]], medians: dict[str, float]) -> None:
        """The same measure against the second anchor, the required-work relay (REQUIRED): its own ratio to
        the plain relay (the floor of what the brief makes the controller do), and the controller's over it."""
        rq = paired(values["req"], values["floor"])
        rows.append(row("0 issue 34", f"  {name}: {req} / plain relay: {spread_text(rq)}", unit, medians["req"],
                        medians["floor"], rq[1], "report", None))
        rc = paired(values["ctl"], values["req"])
        rows.append(row("0 issue 34", f"  {name}: controller / {req}: {spread_text(rc)}", unit, medians["ctl"],
                        medians["req"], rc[1], "report", None))

    # Issue 34's rows: each a median of paired per-round ratios, min-max beside it; the goal against the
    # plain relay, then the same against the required-work relay.
    sides = ("floor", "ctl", "req")
    c, f = ph["ctl observed"], ph["floor observed"]
    r50 = paired(c["rounds_p50"], f["rounds_p50"])
    rows.append(row("0 issue 34", f"prompt path p50, {observers} observers: {spread_text(r50)}", "us", c["p50"],
                    f["p50"], r50[1], "<= 2x", r50[1] <= 2.0, f["p50_spread"]))
    anchors("prompt path p50", "us", {k: ph[f"{k} observed"]["rounds_p50"] for k in sides},
            {k: ph[f"{k} observed"]["p50"] for k in sides})
    over = c["p99"] - f["p99"]
    rows.append(row("0 issue 34", f"prompt path p99 overhead, {observers} observers", "us", over, None, None,
                    "< 1000 us", over < 1000))
    q = ph["req observed"]
    rows.append(row("0 issue 34", f"  the same, {req} - plain relay", "us", q["p99"] - f["p99"], None, None,
                    "report", None))
    rows.append(row("0 issue 34", f"  the same, controller - {req}", "us", c["p99"] - q["p99"], None, None,
                    "report", None))
    for phase in ("idle", "observed"):
        c, f = ph[f"ctl {phase}"], ph[f"floor {phase}"]
        rc = paired(c["cpu_us"], f["cpu_us"])
        rows.append(row("0 issue 34", f"server CPU per prompt, {phase}: {spread_text(rc)}", "us",
                        statistics.median(c["cpu_us"]), statistics.median(f["cpu_us"]), rc[1], "<= 3x", rc[1] <= 3.0))
        anchors(f"CPU, {phase}", "us", {k: ph[f"{k} {phase}"]["cpu_us"] for k in sides},
                {k: statistics.median(ph[f"{k} {phase}"]["cpu_us"]) for k in sides})
        read_us = statistics.median(prompt["req_read_us"][phase])
        rows.append(row("0 issue 34", f"  of the {req}'s: the drift check's file read and SHA-256 pass (the session "
                        f"{prompt['req_session_bytes'][phase] / 1e6:.2f} MB at the phase's end)", "us", read_us,
                        statistics.median(ph[f"req {phase}"]["cpu_us"]), None, "report", None))
    c, f = ph["ctl idle"], ph["floor idle"]
    rt = paired(c["turn_rounds_p50"], f["turn_rounds_p50"])
    rows.append(row("0 issue 34", f"whole idle turn p50 (-> finished; floor -> agent_settled): {spread_text(rt)}",
                    "us", c["turn"]["p50"], f["turn"]["p50"], rt[1], "<= 3x", rt[1] <= 3.0))
    anchors("idle turn (both -> finished)", "us", {k: ph[f"{k} idle"]["turn_rounds_p50"] for k in sides},
            {k: ph[f"{k} idle"]["turn"]["p50"] for k in sides})
    if fan is None:
        return rows
    rf = paired([r["cpu_s"] for r in fan["ctl"]], [r["cpu_s"] for r in fan["floor"]])
    rows.append(row("0 issue 34", f"fan-out CPU, {deltas} deltas to {observers} observers (floor: batched relay): "
                    f"{spread_text(rf)}", "ms", 1e3 * median_of(fan["ctl"], "cpu_s"),
                    1e3 * median_of(fan["floor"], "cpu_s"), rf[1], "<= 1.2x", rf[1] <= 1.2))
    for phase in ("idle", "loaded"):
        c, f = ph[f"ctl {phase}"], ph[f"floor {phase}"]
        rows.append(row("1 prompt path", f"client write -> engine stdin p50, {phase}", "us", c["p50"], f["p50"],
                        c["p50"] / f["p50"], "report", None, f["p50_spread"]))
        rows.append(row("1 prompt path", f"client write -> engine stdin p99, {phase}", "us", c["p99"], f["p99"],
                        c["p99"] / f["p99"], "report", None, f["p99_spread"]))
        over = c["p99"] - f["p99"]
        rows.append(row("1 prompt path", f"overhead p99 (controller - floor), {phase}", "us", over, None, None,
                        "< 2000 us", over < 2000))
    ci, cl = ph["ctl idle"]["p99"], ph["ctl loaded"]["p99"]
    fi, fl = ph["floor idle"]["p99"], ph["floor loaded"]["p99"]
    rows.append(row("1 prompt path", "loaded p99 / idle p99 (floor: the same for the floor)", "x", cl / ci,
                    fl / fi, (cl / ci) / (fl / fi), "<= 2.0", cl / ci <= 2.0))
    ctl, floor, iso = fan["ctl"], fan["floor"], fan["iso"]
    for key, name, unit in (("p50_ms", "per-event latency p50", "ms"), ("p99_ms", "per-event latency p99", "ms"),
                            ("throughput", "events/s delivered to all observers", "ev/s"),
                            ("wall_s", f"wall time, first emit -> last delivery ({deltas} deltas)", "s")):
        value, fl_value = median_of(ctl, key), median_of(floor, key)
        rows.append(row("2 fan-out", name, unit, value, fl_value, value / fl_value, "report", None,
                        spread_of(floor, key)))
    base = median_of(ctl, "read_rate")
    rows.append(row("2 fan-out", "engine records read/s by the controller (floor: the relay)", "rec/s", base,
                    median_of(floor, "read_rate"), base / median_of(floor, "read_rate"), "report", None,
                    spread_of(floor, "read_rate")))
    # Isolation: each round runs with and without the non-reader back to back; the ratio is the median of
    # the rounds' paired ratios (drift in the machine's load cancels within a pair).
    checks: list[tuple[str, str, str, str, Callable[[float], bool] | None]] = [
        ("read_rate", "engine read rate with a non-reader (floor: without)", "rec/s", ">= 0.95x",
         lambda x: x >= 0.95),
        ("p99_ms", "other observers' p99 with a non-reader (floor: without)", "ms", "<= 1.05x",
         lambda x: x <= 1.05),
        ("p50_ms", "other observers' p50 with a non-reader (floor: without)", "ms", "report", None)]
    for key, name, unit, goal, ok in checks:
        ratio = statistics.median(i[key] / c[key] for i, c in zip(iso, ctl, strict=True))
        rows.append(row("3 isolation", name, unit, median_of(iso, key), median_of(ctl, key), ratio, goal,
                        None if ok is None else ok(ratio), spread_of(ctl, key)))
    # RSS growth is a high-water mark: a later run reuses what an earlier one freed, so the worst run counts.
    g_with = max(r["rss_growth_kib"] for r in iso) / 1024
    g_without = max(r["rss_growth_kib"] for r in ctl) / 1024
    cap = MAX_OUTBOX / (1 << 20)
    rows.append(row("3 isolation", "controller RSS growth, worst run, with a non-reader (floor: without)", "MiB", g_with,
                    g_without, g_with / g_without if g_without > 0 else None,
                    f"extra <= {2 * cap:.0f} MiB", g_with - g_without <= 2 * cap))
    got = sum(1 for r in iso if r["nonreader"]["marker"])
    peak = max(r["peak_outbox_max"] for r in iso) / (1 << 20)
    item = 1024 / (1 << 20)  # the outbox may pass the cap by one notification (about 600 bytes here)
    rows.append(row("3 isolation", f"non-reader: lagging marker in {got}/{len(iso)} runs; its peak outbox "
                    "(floor: the cap)", "MiB", peak, cap, peak / cap, "marker, <= cap + 1 item",
                    got == len(iso) and peak <= cap + item))
    return rows


def fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "x" or abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def print_table(rows: list[dict[str, Any]]) -> None:
    width = max(len(r["figure"]) for r in rows) + 2
    head = (f"{'figure':<{width}}{'unit':>6}{'value':>12}{'floor':>12}{'ratio':>8}{'floor spread':>14}"
            f"{'goal':>26}{'':>2}met")
    section = ""
    for r in rows:
        if r["section"] != section:
            section = r["section"]
            print()
            print(f"== {section}")
            print(head)
        spread = "-" if r["floor_spread"] is None else f"{100 * r['floor_spread']:.0f}%"
        print(f"{r['figure']:<{width}}{r['unit']:>6}{fmt(r['value'], r['unit']):>12}{fmt(r['floor']):>12}"
              f"{fmt(r['ratio'], 'x'):>8}{spread:>14}{r['goal']:>26}  {r['met']}")


# ---------------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--role", choices=["main", "controller", "relay"], default="main", help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--stamps", help=argparse.SUPPRESS)
    parser.add_argument("--page-bytes", type=int, default=256 * 1024, help="the stub reader's page (observe reply)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and a short loaded phase (~15 s)")
    parser.add_argument("--rounds", type=int, default=5, help="prompt-path rounds per phase")
    parser.add_argument("--prompts", type=int, default=400, help="prompts per round and side")
    parser.add_argument("--loaded-seconds", type=float, default=11.0,
                        help="measure under load at least this long (the slowloris bound is 10 s)")
    parser.add_argument("--idle", type=int, default=500, help="idle connections in the load")
    parser.add_argument("--slowloris", type=int, default=300)
    parser.add_argument("--hangups-per-second", type=float, default=50.0)
    parser.add_argument("--deltas", type=int, default=10_000)
    parser.add_argument("--delta-bytes", type=int, default=400, help="characters of each delta's text")
    parser.add_argument("--observers", type=int, default=64)
    parser.add_argument("--fanout-rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--prompt-only", action="store_true",
                        help="section 0's prompt rows alone (idle and observed phases, the three sides): no loaded "
                             "phase, no fan-out, no section 4")
    parser.add_argument("--profile-controller", metavar="PREFIX",
                        help="run both controllers under cProfile, stats to PREFIX.prompt and PREFIX.fanout "
                             "(slows every figure; for finding where the time goes)")
    parser.add_argument("--profile", help=argparse.SUPPRESS)
    parser.add_argument("--look-bytes", type=int, default=18_600_000,
                        help="section 4's session size in bytes (0: skip the section)")
    parser.add_argument("--look-rounds", type=int, default=6, help="section 4's rounds per side")
    parser.add_argument("--session-bytes", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--look", choices=["fresh", "free"], default="fresh", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "controller":
        return role_controller(args.socket, args.stamps, args.page_bytes, args.profile, args.session_bytes,
                               args.look)
    if args.role == "relay":
        return role_relay(args.socket, args.stamps)
    if args.quick:
        args.rounds, args.prompts, args.loaded_seconds, args.fanout_rounds = 1, 100, 1.0, 1
        args.deltas, args.observers, args.idle, args.slowloris = 2000, 16, 50, 30
        args.look_rounds = 2
        args.look_bytes = min(args.look_bytes, 2_000_000)  # section 4 runs; its 18.6 MB figures are the full run's
        global DRAIN_WAIT
        DRAIN_WAIT = 2.0

    notes = ["the controller runs in its own process (core, link and server on one event loop, as deployed); the "
             "clients, observers and the non-reader run in this process, the load in a third, the stubs in their own; "
             "a fresh controller serves the fan-out, so its RSS is not the loaded phase's high-water mark",
             "value and floor are medians over rounds (RSS growth: the worst run); 'floor spread' is "
             "(max - min) / median of the floor's "
             "per-round figure; the isolation ratios are medians of per-round paired ratios (the runs with and "
             "without the non-reader go back to back)",
             "engine read rate = engine records the controller core took / (its last take - the stub's first "
             "emit); per-event latency = the observer's read stamp - the stub's emit stamp (CLOCK_MONOTONIC)"]
    limit = raise_nofile()
    if limit < args.idle + args.slowloris + 200:
        fit = max(0, limit - args.slowloris - 200)
        notes.append(f"RLIMIT_NOFILE hard limit {limit}: idle connections reduced from {args.idle} to {fit}")
        args.idle = fit
    tmp = tempfile.mkdtemp(prefix="mcbc-", dir="/tmp")  # 0700: a private socket directory
    names = ("ctl.sock", "fan.sock", "floor.sock", "req.sock", "stamps-ctl", "stamps-fan", "stamps-floor", "stamps-req",
             "fresh-look.sock", "free-look.sock", "stamps-fresh-look", "stamps-free-look")
    paths = {name.removesuffix(".sock"): os.path.join(tmp, name) for name in names}
    procs: list[Proc] = []

    def controller(sock: str, stamps: str, section: str) -> Proc:
        profile = [] if args.profile_controller is None else ["--profile", f"{args.profile_controller}.{section}"]
        proc = Proc(me("controller", "--socket", paths[sock], "--stamps", paths[stamps], "--page-bytes",
                       str(args.page_bytes), *profile))
        procs.append(proc)
        proc.wait_ready()
        return proc

    t_start = time.monotonic()
    look: dict[str, Any] | None = None
    try:
        floor = Proc(me("relay", "--socket", paths["floor"], "--stamps", paths["stamps-floor"]))
        procs.append(floor)
        floor.wait_ready()
        req = Proc([sys.executable, REQUIRED, "--socket", paths["req"], "--stamps", paths["stamps-req"]])
        procs.append(req)
        req.wait_ready()
        ctl = controller("ctl", "stamps-ctl", "prompt")
        prompt = measure_prompt_path(args, ctl, floor, req, paths, notes)
        req.stop()
        procs.remove(req)
        ctl_final = {"prompt": ctl.stop()}
        procs.remove(ctl)
        # A fresh controller for the fan-out: its RSS is not the loaded phase's high-water mark.
        fan: dict[str, list[dict[str, Any]]] | None = None
        if not args.prompt_only:
            fan_ctl = controller("fan", "stamps-fan", "fanout")
            fan = asyncio.run(measure_fanout(args, fan_ctl, floor, paths))
            ctl_final["fanout"] = fan_ctl.stop()
            procs.remove(fan_ctl)
        floor_final = floor.stop()
        procs.remove(floor)
        if args.look_bytes and not args.prompt_only:
            sides: dict[str, Proc] = {}
            for side in ("fresh", "free"):
                sides[side] = Proc(me("controller", "--socket", paths[f"{side}-look"], "--stamps",
                                      paths[f"stamps-{side}-look"], "--page-bytes", str(args.page_bytes),
                                      "--session-bytes", str(args.look_bytes), "--look", side))
                procs.append(sides[side])
                sides[side].wait_ready()
            look = measure_look(args, sides, paths, notes)
            for proc in sides.values():
                ctl_final.setdefault("look", []).append(proc.stop())
                procs.remove(proc)
    finally:
        for p in procs:
            p.kill()
        for name in names:
            if os.path.lexists(os.path.join(tmp, name)):
                os.unlink(os.path.join(tmp, name))
            project = os.path.join(tmp, "proj-" + name.replace(".", "-"))  # session_for's session tree
            if os.path.isdir(project):
                shutil.rmtree(project)
        os.rmdir(tmp)
    elapsed = time.monotonic() - t_start

    rows = build_rows(prompt, fan, args.deltas, args.observers)
    outcomes = prompt["outcomes"]
    if any(not k.endswith((":finished", ":settled")) for k in outcomes):
        notes.append(f"prompt outcomes other than finished: {outcomes}")
    iso = fan["iso"] if fan is not None else []
    for kind in ("floor", "ctl", "iso") if fan is not None else ():
        assert fan is not None
        bad = [r for r in fan[kind] if r["incomplete"] or r["markers_on_readers"]
               or r["min_per_observer"] < args.deltas]
        if bad:
            notes.append(f"{kind}: {len(bad)} run(s) where a reading observer lagged or missed deltas: "
                         f"{[(r['min_per_observer'], r['markers_on_readers'], r['incomplete']) for r in bad]}")
    if look is not None:
        rows.append(row("4 the look", f"client write -> engine stdin p50, {look['session_bytes'] / 1e6:.1f} MB session "
                        "(floor: the look given)", "us", look["fresh"]["p50"], look["free"]["p50"], None, "report", None,
                        look["free"]["p50_spread"]))
        rows.append(row("4 the look", "the same p99", "us", look["fresh"]["p99"], look["free"]["p99"], None, "report",
                        None, look["free"]["p99_spread"]))
        rows.append(row("4 the look", "p50 the look adds (median of paired rounds)", "us", look["added_p50"], None,
                        None, "< 200 us", look["added_p50"] < 200, None))
    report = {
        "rows": rows,
        "look": look,
        "prompt_path": prompt,
        "fanout": fan,
        "controller_final": ctl_final,
        "floor_final": floor_final,
        "settings": {k: v for k, v in vars(args).items() if k not in ("role", "socket", "stamps")},
        "cpus": os.cpu_count(),
        "elapsed_s": round(elapsed, 1),
        "notes": notes,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"controller benchmark: {args.rounds} rounds x {args.prompts} prompts per side and phase; "
          f"{args.fanout_rounds} fan-out round(s) of {args.deltas} deltas x {args.observers} observers; "
          f"{os.cpu_count()} cpus; {elapsed:.0f} s")
    print_table(rows)
    print()
    ph = prompt["phases"]
    print("bytes sent to each observer per prompt: " + "; ".join(
        f"{side} {b:,.0f}" for side, b in prompt["observer_bytes"].items())
        + " (the required-work relay's notifications are the controller's shapes)")
    print("prompt path, per-round p99 us: " + "; ".join(f"{k} {v['p99_rounds']}" for k, v in ph.items()))
    print("prompt path, pooled p50/p99 us: " + "; ".join(
        f"{k} {v['pooled_p50']:.0f}/{v['pooled_p99']:.0f} (n={v['n']})" for k, v in ph.items()))
    if fan is None:  # --prompt-only
        for note in notes:
            print(f"note: {note}")
        return
    print(f"load held: {prompt['held']} connections at the start, {prompt['held_after']} at the end of "
          f"{prompt['loaded_s']} s ({prompt['load_ready_s']} s to set up); generator: {json.dumps(prompt['load'])}")
    print(f"controller RSS KiB: idle {prompt['rss_kib']['idle']}, loaded peak {prompt['rss_kib']['loaded_peak']}, "
          f"after {prompt['rss_kib']['after']}")
    print("non-reader per run: " + "; ".join(
        f"marker {h['nonreader']['marker']} after {h['nonreader']['bytes_to_marker'] / (1 << 20):.2f} MiB read, "
        f"{h['nonreader']['dropped']} dropped, peak outbox {h['peak_outbox_max'] / (1 << 20):.2f} MiB"
        for h in iso))
    print("readers' peak outbox MiB per run without it: "
          + str([round(r["peak_outbox_max"] / (1 << 20), 2) for r in fan["ctl"]])
          + "; RSS growth MiB per run: " + "; ".join(
              f"{kind} {[round(r['rss_growth_kib'] / 1024, 1) for r in fan[kind]]}" for kind in ("ctl", "iso")))
    print("fan-out per-run p99 ms: " + "; ".join(
        f"{kind} {[round(r['p99_ms'], 1) for r in fan[kind]]}" for kind in ("floor", "ctl", "iso")))
    for section, final in ctl_final.items():
        print(f"{section} controller at exit: {json.dumps(final)}")
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
