"""Benchmark: what a turn end costs the controller with the drift check on, and what 10,000 prompts leave in
its memory, at any session size the reader accepts (README "Benchmarks"). In-process, on the sans-io core
(no sockets: their cost is bench_controller.py's), with the parts the check really runs: the engine link's
decoder (LinkCore.feed) for the get_entries answer and the runtime's SessionFileReader (safe-open, read and
SHA-256) for the file.

1. Turn end. A session file of a given size (turns of user, assistant with thinking, text and a tool call,
   tool result and reply, the shapes of Pi 0.85.1's entries) and the engine's list of the same entries. For
   each measured turn the "engine" appends the turn's two entries to the file and its list; the timer runs
   from feeding the run's agent_settled to the check's verdict, and covers what the controller does: the
   get_entries answer decoded, the file read from the start (hashed) and the new lines decoded (the
   incremental check), or every line decoded and compared (the full check, as every turn end ran before).
   The engine's own encoding of its answer is made before the timer starts. Floors, in the same run: the
   same turn end on a 100-entry session, and one SHA-256 pass over the large file (`hashlib.file_digest`).
   Goal: turn end at 18.6 MB <= 1.5 x (turn end at 100 entries + one SHA-256 pass over 18.6 MB). Also
   reported at 5x the size (93 MB), to show how it grows.
2. 10,000 prompts. The core (drift off, so only the requests and receipts count) runs 10,000 prompt turns;
   the memory it holds (tracemalloc, after a collection) at 1,000 and at 10,000 prompts, per prompt; and the
   cost of an observe (the call and its page) at 100 and at 10,000 prompts (a 32-receipt repeat either
   way): flat is a ratio of 1.

No assertions: numbers only. `--quick` measures fewer turns and skips the 93 MB size (CI's quick pass).

    python packages/controller/bench/bench_turn_end.py [--quick] [--json] [--turns N] [--prompts N]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import shutil
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from mosaic.controller.access import Peer
from mosaic.controller.core import (
    READ_SESSION,
    Call,
    Connected,
    ControllerCore,
    CoreConfig,
    Effect,
    EffectDone,
    EngineEvents,
    PageRead,
    ReadPage,
)
from mosaic.controller.drift import DriftConfig
from mosaic.controller.engines.pi import PI_RULES
from mosaic.controller.runtime import SessionFileReader

SID = "01a22bb8-0000-7000-8000-00000000ben1"
INCARNATION = "inc-" + "b" * 32
EXECUTION = "exec-bench"
CONN = "c1"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


class Session:
    """The session file and the engine's list of its entries (kept as the bytes of each line, as Pi's
    JSON.stringify writes them both ways)."""

    def __init__(self, root: Path, target: int, seed: int = 11) -> None:
        self.project = root / "proj"
        self.dir = self.project / ".pi" / "state" / "seat" / "sessions"
        self.dir.mkdir(parents=True)
        self.path = self.dir / "s.jsonl"
        self.rng = random.Random(seed)
        self.lines: list[bytes] = []  # entry lines, header excluded
        self.ids: list[str] = []
        self.n = 0
        self.parent = "t0000000"
        header = _dumps({"type": "session", "version": 3, "id": SID, "timestamp": "2026-12-01T00:00:00.000Z",
                         "cwd": str(self.project)}) + b"\n"
        with self.path.open("wb") as f:
            f.write(header)
            self._put(f, {"type": "thinking_level_change", "id": "t0000000", "parentId": None,
                          "timestamp": "2026-12-01T00:00:00.000Z", "thinkingLevel": "off"})
            size = len(header)
            while size < target:
                for entry in self._turn(long=True):
                    size += self._put(f, entry)

    def _words(self, n: int) -> str:
        return " ".join(self.rng.choice(("alpha", "beta", "gamma", "delta", "kappa", "lambda", "sigma"))
                        for _ in range(n // 6))

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n:07x}"

    def _turn(self, *, long: bool) -> list[dict[str, Any]]:
        ts = "2026-12-01T00:00:01.000Z"
        uid, aid = self._id("u"), self._id("a")
        user = {"type": "message", "id": uid, "parentId": self.parent, "timestamp": ts,
                "message": {"role": "user", "content": [{"type": "text", "text": self._words(600)}],
                            "timestamp": 1}}
        content: list[dict[str, Any]] = [{"type": "text", "text": self._words(500)}]
        if long:
            content = [{"type": "thinking", "thinking": self._words(1500), "thinkingSignature": "rc"}, *content,
                       {"type": "toolCall", "id": f"call_{self.n}", "name": "bash",
                        "arguments": {"command": "printf " + self._words(120)}}]
        reply = {"type": "message", "id": aid, "parentId": uid, "timestamp": ts,
                 "message": {"role": "assistant", "content": content, "api": "openai-completions",
                             "provider": "fakeprov", "model": "fake-model-1", "stopReason": "stop", "timestamp": 2}}
        self.parent = aid
        return [user, reply]

    def _put(self, f: Any, entry: dict[str, Any]) -> int:
        raw = _dumps(entry)
        f.write(raw + b"\n")
        self.lines.append(raw)
        self.ids.append(entry["id"])
        return len(raw) + 1

    def append_turn(self) -> None:
        with self.path.open("ab") as f:
            for entry in self._turn(long=False):
                self._put(f, entry)

    def answer(self, cid: str, since: str | None) -> bytes:
        """The engine's get_entries answer line (rpc-mode.js 505-516): the entries after the first with
        `since`, or all of them."""
        start = 0 if since is None else self.ids.index(since) + 1
        body = b",".join(self.lines[start:])
        leaf = self.ids[-1]
        return (b'{"id":' + _dumps(cid) + b',"type":"response","command":"get_entries","success":true,'
                b'"data":{"entries":[' + body + b'],"leafId":' + _dumps(leaf) + b"}}\n")


class Driver:
    """A core and the engine and shell it talks to, in this process."""

    def __init__(self, session: Session | None, *, incremental: bool = True) -> None:
        drift = DriftConfig(SID, incremental=incremental) if session is not None else None
        self.core = ControllerCore(CoreConfig(conversation="pi-bench", execution=EXECUTION, binding="b1",
                                              incarnation=INCARNATION, engine=PI_RULES, drift=drift), now=time.time())
        self.session = session
        self.reader = (SessionFileReader(session.project, ".pi/state/seat/sessions", "s.jsonl")
                       if session is not None else None)
        self.rpc = 0
        self.last_reply: tuple[int, Any] | None = None
        self.pending: list[Any] = []  # actions to carry out
        self._draining = False
        self.page = {"ok": True, "page": {"parts": []}, "cursor": None}
        self.feed(Connected(CONN, Peer(os.geteuid(), os.getegid(), os.getpid())))  # the owner
        self.call("observe")
        self.call("takeover", expectedGeneration=self.core.generation)
        if session is not None:
            from mosaic.controller.core import DRIFT_START, TimerFired

            self.feed(TimerFired(DRIFT_START))  # the takeover check: the full one

    def feed(self, event: Any) -> None:
        self.pending.extend(self.core.receive(event, now=time.time()))
        if self._draining:
            return
        self._draining = True
        try:
            self._drain()
        finally:
            self._draining = False

    def _drain(self) -> None:
        while self.pending:
            action = self.pending.pop(0)
            if isinstance(action, ReadPage):
                self.feed(PageRead(action.conn, action.rpc_id, self.page))
            elif isinstance(action, Effect) and action.kind == READ_SESSION:
                assert self.reader is not None
                result = {"ok": True, "file": self.reader(int(action.payload.get("from", 0)))}
                self.feed(EffectDone(action.effect_id, READ_SESSION, result))
            elif type(action).__name__ == "FlushEngine":
                self.flush()
            elif type(action).__name__ in ("Reply", "Refuse"):
                self.last_reply = (action.rpc_id, getattr(action, "result", None))

    def flush(self) -> None:
        link = self.core.link
        while (command := link.next_write()) is not None:
            self.feed(EngineEvents(EXECUTION, link.write_done(command, accepted=len(command.data), error=None,
                                                              now=time.time())))
            record = json.loads(command.data)
            if record["type"] == "get_entries":
                assert self.session is not None
                self.engine(self.session.answer(record["id"], record.get("since")))
            elif record["type"] == "get_state":
                self.engine(_dumps({"id": record["id"], "type": "response", "command": "get_state", "success": True,
                                    "data": {"isStreaming": False}}) + b"\n")
            elif record["type"] == "prompt":
                self.engine(_dumps({"id": record["id"], "type": "response", "command": "prompt",
                                    "success": True}) + b"\n")

    def engine(self, data: bytes) -> None:
        self.feed(EngineEvents(EXECUTION, self.core.link.feed(data, now=time.time())))

    def call(self, method: str, **params: Any) -> Any:
        self.rpc += 1
        if method != "observe":
            params.setdefault("incarnation", INCARNATION)
        self.feed(Call(CONN, self.rpc, method, params))
        return self.last_reply[1] if self.last_reply is not None and self.last_reply[0] == self.rpc else None

    def turn(self, n: int) -> float:
        """One prompt's turn; returns the seconds from its agent_settled to the check's verdict."""
        self.call("prompt", text=f"prompt {n}", clientRequestId=f"r-{n}", generation=self.core.generation)
        user = {"role": "user", "content": [{"type": "text", "text": f"prompt {n}"}], "timestamp": 1}
        reply = {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "stopReason": "stop"}
        run = b"".join(_dumps(r) + b"\n" for r in (
            {"type": "agent_start"}, {"type": "turn_start"}, {"type": "message_start", "message": user},
            {"type": "message_end", "message": user}, {"type": "message_start", "message": reply},
            {"type": "message_end", "message": reply}, {"type": "turn_end", "message": reply, "toolResults": []},
            {"type": "agent_end", "messages": [], "willRetry": False}))
        self.engine(run)
        if self.session is not None:
            self.session.append_turn()
        start = time.perf_counter()
        self.engine(b'{"type":"agent_settled"}\n')
        took = time.perf_counter() - start
        verdict = self.core.drift_verdict
        assert self.session is None or (verdict is not None and not verdict.drift), verdict
        return took


def turn_end(root: Path, target: int, turns: int, *, incremental: bool = True) -> dict[str, Any]:
    session = Session(root, target)
    size = session.path.stat().st_size
    driver = Driver(session, incremental=incremental)
    times = [driver.turn(n) for n in range(turns)]
    mode = driver.core.drift_verdict.incremental if driver.core.drift_verdict is not None else None
    return {"bytes": size, "entries": len(session.ids), "median_ms": statistics.median(times) * 1e3,
            "min_ms": min(times) * 1e3, "max_ms": max(times) * 1e3, "incremental": mode}


def sha_floor(path: Path, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        with path.open("rb") as f:
            hashlib.file_digest(f, "sha256")
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def memory_and_observe(prompts: int) -> dict[str, Any]:
    driver = Driver(None)

    def observe_ms(rounds: int = 500) -> float:
        for _ in range(50):  # warm
            driver.call("observe")
        start = time.perf_counter()
        for _ in range(rounds):
            driver.call("observe")
        return (time.perf_counter() - start) / rounds * 1e3

    out: dict[str, Any] = {}
    for n in range(100):
        driver.turn(n)
    out["observe_ms_at_100"] = observe_ms()  # before tracing (tracemalloc slows every allocation)
    tracemalloc.start()
    for n in range(100, prompts):
        driver.turn(n)
        if n + 1 == 1_000:
            gc.collect()
            out["traced_at_1000"] = tracemalloc.get_traced_memory()[0]
    gc.collect()
    out["traced_at_end"] = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    out["observe_ms_at_end"] = observe_ms()
    out["prompts"] = prompts
    out["requests_in_memory"] = len(driver.core.requests)
    out["bytes_per_prompt"] = (out["traced_at_end"] - out["traced_at_1000"]) / max(1, prompts - 1_000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--turns", type=int, default=15)
    parser.add_argument("--prompts", type=int, default=10_000)
    args = parser.parse_args()
    turns = 5 if args.quick else args.turns
    sizes = [1_860_000] if args.quick else [18_600_000, 93_000_000]  # quick: a tenth, one size
    report: dict[str, Any] = {}
    root = Path(tempfile.mkdtemp(prefix="mosaic-bench-turn-"))
    try:
        report["small"] = turn_end(root / "small", 110_000, turns)  # about 100 entries
        for size in sizes:
            label = f"{size / 1e6:.1f}MB"
            report[label] = turn_end(root / label, size, turns)
            report[label]["sha_floor_ms"] = sha_floor(root / label / "proj/.pi/state/seat/sessions/s.jsonl", 5)
            if size == sizes[0]:
                report[label + "-full"] = turn_end(root / (label + "-full"), size, max(3, turns // 3),
                                                   incremental=False)
            shutil.rmtree(root / label)
        report["prompts"] = memory_and_observe(1_100 if args.quick else args.prompts)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    small = report["small"]
    print(f"turn end with the drift check on (median of {turns} turns; floors in the same run)")
    print(f"  100-entry session ({small['bytes']:,} B, {small['entries']} entries): {small['median_ms']:.2f} ms")
    for size in sizes:
        label = f"{size / 1e6:.1f}MB"
        row = report[label]
        bound = small["median_ms"] + row["sha_floor_ms"]
        print(f"  {label} ({row['entries']:,} entries): {row['median_ms']:.1f} ms (min {row['min_ms']:.1f}, "
              f"max {row['max_ms']:.1f}); floor: 100-entry turn end + SHA-256 of the file "
              f"{small['median_ms']:.2f} + {row['sha_floor_ms']:.1f} = {bound:.1f} ms; "
              f"ratio {row['median_ms'] / bound:.2f} (goal <= 1.5)")
    full = report.get(f"{sizes[0] / 1e6:.1f}MB-full")
    if full is not None:
        print(f"  the full check at every turn end instead (as before): {full['median_ms']:.0f} ms")
    if len(sizes) > 1:
        a, b = report[f"{sizes[0] / 1e6:.1f}MB"], report[f"{sizes[1] / 1e6:.1f}MB"]
        print(f"  5x the file: {b['median_ms'] / a['median_ms']:.2f}x the turn end "
              f"(SHA floor {b['sha_floor_ms'] / a['sha_floor_ms']:.2f}x)")
    p = report["prompts"]
    print(f"{p['prompts']:,} prompts (drift off): {p['requests_in_memory']} requests in memory; "
          f"{p['bytes_per_prompt']:.0f} B traced per prompt from 1,000 on (the exact-retry index, H12); "
          f"observe {p['observe_ms_at_100']:.3f} ms at 100 prompts, {p['observe_ms_at_end']:.3f} ms at "
          f"{p['prompts']:,}: {p['observe_ms_at_end'] / p['observe_ms_at_100']:.2f}x (flat is 1)")


if __name__ == "__main__":
    main()
