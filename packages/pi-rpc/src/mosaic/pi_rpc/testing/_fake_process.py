"""The fake engine's process: pinned Pi 0.85.1's RPC mode, in Python, with named hold points.

This module is the process (main.js: the arguments; output-guard.js: stdout taken over and written by a
chain; jsonl.js: stdin split on LF; the signal and EOF exits of rpc-mode.js 581-598, 641-644). The rest
follows pinned Pi's files, so that the same inputs give the same records in the same order (the
conformance suite holds it to the real binary): :mod:`._fake_rpc` (rpc-mode.js), :mod:`._fake_agent_session`
(agent-session.js, sdk.js), :mod:`._fake_agent_loop` (pi-agent-core agent.js, agent-loop.js, the bash
tool), :mod:`._fake_stream` (pi-ai openai-completions.js over the scripted model), :mod:`._fake_session`
(session-manager.js), :mod:`._fake_ops` and :mod:`._fake_runtime` (the control channel). It models the
behaviour FACTS.md lists under "What a Python fake engine must mimic":

1. Framing: writes ``JSON.stringify(value) + "\\n"`` (:func:`mosaic.pi_rpc.framing.js_json_dumps`), reads
   LF-split lines with one CR stripped, UTF-8 with replacement; bad JSON gets V8's message
   (:mod:`._jsjson`) in a ``parse`` response with no id.
2. Concurrent dispatch: every input line starts its own task at once (rpc-mode.js 646-648); a ``get_state``
   read in the same chunk as a prompt answers before the prompt's ack.
3. The ack is written from ``preflightResult(true)``; ``isStreaming`` is set in the same step, and the ack
   bytes go out later through the stdout writer (output-guard.js 67-75).
4. The preflight window: preflight awaits (the ``preflight`` hold point, then ticks), so a second prompt
   read meanwhile passes the streaming check, is acked, and its run throws "Agent is already processing a
   prompt..." (agent.js 226-229), which the RPC swallows; its ``finally`` emits a spurious
   ``agent_settled`` and clears ``isStreaming`` while the first run continues.
5. Refusal while streaming with the exact text; a registered ``/cmd`` (``/llama``) runs first, even mid-run.
6. The run event grammar of agent-loop.js, ``message_update`` without ``message``/``partial``.
7. ``agent_end`` before ``agent_settled``; several ``agent_end`` per settle (auto-retry, queued input).
8. Abort: ``stopReason: "aborted"``, ``errorMessage: "Request was aborted"``, persisted; the response
   after ``agent_settled``; queued steer/follow-up run after an abort unless cleared first.
9. Queues: ``queue_update`` before the steer/follow_up/clear_queue response; removal by text on the user
   ``message_start``; ``pendingMessageCount``.
10. Extension UI: ``notify`` from ``/llama``; dialogs (:mod:`._fake_dialogs`, rpc-mode.js 47-84, 174-192)
    from the fixture extension's tool when the seal's fixture option loaded it (``--extension`` with the
    fixture's path), and from the control channel's ``dialog`` op; a response settles its dialog once,
    anything else (unknown, missing or settled id) is ignored without output; nothing is written at a
    timeout or an abort.
11-12. get_state / get_entries / get_tree / get_messages shapes (:mod:`._fake_session` for the tree).
13. Persistence timing: entries are written synchronously when Pi writes them, before the event's stdout
    bytes (hold ``stdout`` to see the file ahead of stdout).
14-15. The startup append and the load side effects (:mod:`._fake_session`).
16. Lifecycle: stdin EOF flushes and exits 0; SIGTERM exits 143 without flushing; SIGHUP 129 after a
    flush; a missing header cwd or a file that is not a session exits 1 before any output.
17. Prefixes: only an index-0 ``/`` naming a registered command is special.
18. No entry ids on the stream.

Known differences from the real binary are listed in the package README ("Known limits").
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
import signal
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mosaic.pi_rpc._framing import RecordDecoder, encode_record
from mosaic.pi_rpc._seal import _fixture_file_refusal, check_fixture_env
from mosaic.pi_rpc.testing._fake_agent_loop import Agent
from mosaic.pi_rpc.testing._fake_agent_session import AgentSession
from mosaic.pi_rpc.testing._fake_ops import run_op
from mosaic.pi_rpc.testing._fake_rpc import RpcMode, die
from mosaic.pi_rpc.testing._fake_runtime import Control, Json
from mosaic.pi_rpc.testing._fake_session import InvalidSession, SessionFile
from mosaic.pi_rpc.testing.model_server import DEFAULT_SCENARIOS, Scenario

__all__ = ["FakeOptions", "Output", "parse_args", "run_fake_engine"]

_PI_FLAGS = ("--no-extensions", "--no-prompt-templates", "--no-themes", "--no-context-files", "--no-skills")
_VALUED = ("--session", "--model", "--provider", "--thinking", "--fake-control", "--fake-scenarios", "--extension")


@dataclass
class FakeOptions:
    """What the fake was started with: Pi's sealed arguments and the fake's own ``--fake-*`` options."""

    session: str
    model: str | None = None
    provider: str | None = None
    thinking: str | None = None
    control: str | None = None
    scenarios: tuple[Scenario, ...] = DEFAULT_SCENARIOS
    flags: set[str] = field(default_factory=set)
    argv: list[str] = field(default_factory=list)
    fixture_extension: bool = False


def parse_args(argv: Sequence[str]) -> FakeOptions:
    """Pi's sealed arguments plus ``--fake-control PATH`` and ``--fake-scenarios MODULE:ATTR``. Anything
    Pi would reject or the seal does not allow exits 2 (the fake is never started unsealed by tests): an
    ``--extension`` loads the fixture extension only when the seal's fixture rule passes for it (its exact
    path and bytes) and the environment carries ``FIXTURE_EXTENSION_ENV``."""
    args = list(argv)
    opts: dict[str, Any] = {"flags": set(), "argv": list(argv)}
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("--mode",):
            if i + 1 >= len(args) or args[i + 1] != "rpc":
                die("the fake engine speaks only --mode rpc", 2)
            i += 2
            continue
        if a in _PI_FLAGS:
            opts["flags"].add(a)
            i += 1
            continue
        if a in _VALUED:
            if i + 1 >= len(args):
                die(f"{a} needs a value", 2)
            if a == "--extension":
                refusal = _fixture_file_refusal(args[i + 1]) or check_fixture_env(os.environ)
                if refusal is not None or "extension" in opts:
                    die(f"the fake engine loads only the fixture extension, once: {refusal or 'a second one'}", 2)
            opts[a.lstrip("-").replace("fake-", "")] = args[i + 1]
            i += 2
            continue
        die(f"unsupported argument {a!r}", 2)
    if "session" not in opts:
        die("the fake engine needs --session", 2)
    scenarios = DEFAULT_SCENARIOS
    if "scenarios" in opts:
        mod, _, attr = str(opts.pop("scenarios")).partition(":")
        scenarios = tuple(getattr(importlib.import_module(mod), attr))
    control = opts.pop("control", None) or os.environ.get("MOSAIC_FAKE_PI_CONTROL")
    return FakeOptions(session=opts.pop("session"), model=opts.get("model"), provider=opts.get("provider"),
                       thinking=opts.get("thinking"), control=control, scenarios=scenarios,
                       flags=opts["flags"], argv=opts["argv"], fixture_extension="extension" in opts)


class Output:
    """stdout, Pi's ``writeRawStdout`` chain (output-guard.js 67-75): records are queued by ``write`` and
    written by a writer task, in order; ``drain`` waits for the queue to empty
    (``waitForRawStdoutBackpressure``). The hold point ``stdout`` stops the writer before each record (its
    detail names the record's type, and the message role for message events)."""

    def __init__(self, fd: int, control: Control) -> None:
        self.fd = fd
        self.control = control
        self.queue: deque[tuple[Json, bytes]] = deque()
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()
        self.idle.set()
        self.task = asyncio.get_running_loop().create_task(self._run())

    def write(self, obj: Json) -> None:
        self.queue.append((obj, encode_record(obj)))
        self.idle.clear()
        self.wake.set()

    async def drain(self) -> None:
        await self.idle.wait()

    def flush_now(self) -> None:
        """Write everything queued, synchronously (shutdown)."""
        while self.queue:
            self._write(self.queue.popleft()[1])

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                n = os.write(self.fd, view)
            except BrokenPipeError:
                self.queue.clear()
                return
            view = view[n:]

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            while self.queue:
                obj = self.queue[0][0]
                msg = obj.get("message")
                await self.control.hit("stdout", type=obj.get("type"), id=obj.get("id"),
                                       role=msg.get("role") if isinstance(msg, dict) else None)
                if not self.queue:
                    break
                self._write(self.queue.popleft()[1])
                await asyncio.sleep(0)
            self.idle.set()


def _open_session(options: FakeOptions) -> tuple[SessionFile, str]:
    """The session file and the agent dir, or exit 1 as Pi does before any output."""
    agent_dir = os.environ.get("PI_CODING_AGENT_DIR")
    if not agent_dir:
        # No default paths (DESIGN.md principle 3): the real binary would fall back to ~/.pi/agent.
        die("the fake engine needs PI_CODING_AGENT_DIR (it never uses ~/.pi)")
    try:
        sm = SessionFile.open(os.path.abspath(options.session), os.getcwd())
    except InvalidSession as exc:
        die(str(exc))
    if not os.path.isdir(sm.cwd):
        die(f"Stored session working directory does not exist: {sm.cwd}\nSession file: {sm.path}\n"
            f"Current working directory: {os.getcwd()}")
    return sm, agent_dir


async def _main(options: FakeOptions) -> None:
    loop = asyncio.get_running_loop()
    sm, agent_dir = _open_session(options)
    control = Control()
    agent = Agent(control, sm.cwd, options.scenarios)
    session = AgentSession(sm, agent_dir, agent, control, model=options.model, provider=options.provider,
                           thinking=options.thinking)
    rpc = RpcMode(session)
    if options.fixture_extension:
        agent.fixture_dialogs = rpc.ui  # the extension's tool raises its dialogs through the RPC UI context
    if options.control:
        await control.connect(options.control, options.argv, functools.partial(run_op, rpc))
    session.startup()
    out = session.out = Output(1, control)

    def on_signal(code: int, flush: bool) -> None:
        if flush:
            out.flush_now()
        control.send({"event": "bye", "code": code})
        os._exit(code)

    loop.add_signal_handler(signal.SIGTERM, on_signal, 143, False)
    loop.add_signal_handler(signal.SIGHUP, on_signal, 129, True)

    decoder = RecordDecoder(errors="replace", max_record_bytes=1 << 30)
    eof = asyncio.Event()

    def on_stdin() -> None:
        try:
            data = os.read(0, 1 << 16)
        except BlockingIOError:
            return
        if not data:
            loop.remove_reader(0)
            eof.set()
            return
        for line in decoder.feed(data):
            loop.create_task(rpc.handle_line(line))

    os.set_blocking(0, False)
    loop.add_reader(0, on_stdin)
    await eof.wait()
    # stdin EOF: shutdown() flushes stdout and exits 0 (rpc-mode.js 581-598, 641-644). Lines still being
    # handled are cut off: the run's remaining events never come (FACTS.md Part 2 L).
    await asyncio.sleep(0)
    out.flush_now()
    control.send({"event": "bye", "code": 0})
    if control.writer is not None:
        try:
            await asyncio.wait_for(control.writer.drain(), 5)
        except (TimeoutError, ConnectionError):
            pass
    os._exit(0)


def run_fake_engine(argv: Sequence[str] | None = None) -> None:
    """Run the fake engine process (``python -m mosaic.pi_rpc.testing.fake_engine <Pi args>``)."""
    options = parse_args(sys.argv[1:] if argv is None else argv)
    asyncio.run(_main(options))
