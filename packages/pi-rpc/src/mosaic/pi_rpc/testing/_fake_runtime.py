"""What the fake engine's modules share: the JSON alias, Node's event-loop turns, the stdout sink type, and
the fake's end of the control channel (the hold points).

The fake follows pinned Pi's files (the package README's module table): :mod:`._fake_process` (main.js,
output-guard.js, jsonl.js), :mod:`._fake_rpc` (rpc-mode.js), :mod:`._fake_agent_session`
(agent-session.js, sdk.js), :mod:`._fake_agent_loop` (pi-agent-core agent.js and agent-loop.js, the bash
tool), :mod:`._fake_stream` (pi-ai openai-completions.js, run on the scripted model), :mod:`._fake_ops`
(the control channel's ops), :mod:`._fake_session` (session-manager.js).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

__all__ = ["Control", "Json", "Stdout", "text_of", "tick"]

Json = dict[str, Any]


async def tick(n: int = 1) -> None:
    """``n`` turns of the event loop: where Node would run ``n`` microtask hops (an ``await`` of an already
    settled promise). The fake models Pi's ordering with these, checked against the binary (README)."""
    for _ in range(n):
        await asyncio.sleep(0)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` parts of a content list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


class Stdout(Protocol):
    """Pi's stdout writer as the session sees it (output-guard.js 67-75): ``write`` queues a record,
    ``drain`` waits until every queued record is written, ``flush_now`` writes them synchronously."""

    def write(self, obj: Json) -> None: ...

    async def drain(self) -> None: ...

    def flush_now(self) -> None: ...


class Control:
    """The fake's end of the control channel (the test's end is :class:`._fake_control.FakeControl`).

    :meth:`hit` stops a run at an armed hold point until the test releases it; the ops the test sends are
    answered by the handler given to :meth:`connect` (:func:`._fake_ops.run_op`).
    """

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}
        self.hits: dict[str, int] = {}
        self.waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self, path: str, argv: Sequence[str],
                      ops: Callable[[Json], Awaitable[Json]]) -> None:
        """Connect to the test's socket, say hello (pid, argv), and serve its ops with ``ops``."""
        reader, writer = await asyncio.open_unix_connection(path)
        self.writer = writer
        self.send({"event": "hello", "pid": os.getpid(), "argv": list(argv)})
        asyncio.get_running_loop().create_task(self._serve(reader, ops))

    def send(self, obj: Json) -> None:
        """A notification or reply to the test (dropped when no test is connected)."""
        if self.writer is not None:
            self.writer.write(json.dumps(obj).encode() + b"\n")

    async def hit(self, point: str, abort: asyncio.Event | None = None, **detail: Any) -> None:
        """Stop here if ``point`` is armed, until the test releases it (or ``abort`` is set)."""
        count = self.armed.get(point, 0)
        if count == 0:
            return
        if count > 0:
            self.armed[point] = count - 1
        self.hits[point] = self.hits.get(point, 0) + 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(point, deque()).append(fut)
        self.send({"event": "held", "point": point, "hit": self.hits[point], "detail": detail})
        if abort is None:
            await fut
            return
        aborter: asyncio.Future[Any] = asyncio.ensure_future(abort.wait())
        waits: set[asyncio.Future[Any]] = {fut, aborter}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            aborter.cancel()
        if not fut.done():
            self.waiting[point].remove(fut)
            fut.cancel()
            self.send({"event": "unheld", "point": point, "reason": "aborted"})

    async def _serve(self, reader: asyncio.StreamReader, ops: Callable[[Json], Awaitable[Json]]) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            msg = json.loads(line)
            try:
                reply = await ops(msg)
                self.send({"req": msg.get("req"), "ok": True, **reply})
            except Exception as exc:  # a bad op is the test's bug: report it, keep serving
                self.send({"req": msg.get("req"), "error": f"{type(exc).__name__}: {exc}"})
