"""The thin asyncio shell around the core: the engine link, the socket server, timers, effects, pages.

`ControllerRuntime` owns one `ControllerCore` and carries out its actions; it decides nothing. Every
input reaches the core through `feed` on the event loop's thread, never re-entered: the socket server
calls `feed` only from its own callbacks (its rule 4), the engine pump task from its loop iteration,
timers from `call_later`, and the results of work done off the loop (history pages, effects) are fed back
with `call_soon_threadsafe`.

A prompt, with the drift check on, waits for one look at the session file before the core sees it
(`ControllerCore.wants_session_stat`; the core's `core/_drift` rule 6): the look (`session_stat`, a
safe-open open and fstat) runs off the loop on a thread of its own, and every input that arrives meanwhile
(calls, engine events, timers, effect results) waits behind the prompt, in order, so the core sees the
inputs in the order they came, the prompt with its look attached (`Call.session`). It costs the prompt
path one thread hop each way, the cheapest there is: a `SimpleQueue.put` to the look thread, a
`call_soon_threadsafe` back (README "Benchmarks", the prompt path).

Blocking lower calls run off the loop in a small bounded pool (DESIGN "The controller's intended
shape"): the reader's page reads, the drift check's session file reads (`session_reader`, for the core's
`Effect("read-session")`; the core's rule 8) and any effect handler that blocks (claim fsyncs, a force
stop's grace and kill in the next issue). A core with the drift check on gets `TimerFired(DRIFT_START)`
once when the runtime starts: the check after the controller takes over the engine.

The one clock: the core, its `LinkCore` and the engine link read the same `clock` (epoch seconds by
default, so records carry wall time; a bound can stretch or shrink with a wall-clock jump, accepted for
fixture-only use, brief "Limits"). Timers are armed as `deadline - clock()` from now.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import errno
import functools
import json
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from mosaic.pi_rpc import EngineLink
from mosaic.pi_rpc.link import LinkEvent

from ..core._effects import EFFECTS, EffectKind, EffectPorts
from ..core._io import (
    Action,
    Call,
    CancelTimer,
    CloseConnection,
    ConnId,
    Effect,
    EffectDone,
    EngineEvents,
    Evidence,
    FlushEngine,
    Input,
    Notify,
    PageRead,
    ReadPage,
    Refuse,
    Reply,
    RpcId,
    SessionStat,
    SetTimer,
    TimerFired,
)
from ..core._receive import DRIFT_START, ControllerCore
from ..engines._seam import PageReader
from ..engines._verdict import FileIdentity, SessionBytes
from ._socket_server import Placeholder, ServerLimits, SocketServer

__all__ = ["ControllerRuntime", "EffectHandler", "PageReader", "SessionReader", "SessionStatter", "no_cohort_effects",
           "ports_from_handler"]

logger = logging.getLogger("mosaic.controller.runtime")

# PageReader (the seam's): blocking, the reader's result for the first page of the current branch (None) or a
# cursor's page.

EffectHandler = Callable[[Effect], Awaitable[Mapping[str, Any]]]
"""Carries out one effect the core asked for and returns its result (fed back as `EffectDone`)."""

SessionStatter = Callable[[], FileIdentity | None]
"""Blocking: the session file's (dev, ino, size) as one look sees it now; None when there is no file. Raises
when it cannot be looked at."""

SessionReader = Callable[[int], SessionBytes | None]
"""Blocking: the session file read from the start, the bytes before the offset hashed and the rest kept
(`SessionBytes`), with the identity of the descriptor read; None when there is no file. Raises when the
file cannot be read (the drift check is then uncertain, never "no drift")."""

MAX_BATCH = 256  # engine events fed to the core per call: a long run does not starve the clients
EVIDENCE_KEPT = 10_000  # evidence lines kept in memory (all of them go to the evidence file when one is set)


async def no_cohort_effects(effect: Effect) -> Mapping[str, Any]:
    """The effects of a controller with no lifecycle attached (`fake_controller`), each its row's `unattached`
    answer (`EFFECTS`): claim publications are no-ops (there is no claim), a census counts nobody, a force
    stop cannot prove anything (it ends uncertain, saying why) and a recover is refused `stop-proof`."""
    return copy.deepcopy(dict(EFFECTS[effect.kind].unattached))


class _HandlerPorts:
    """`EffectPorts` over one `EffectHandler`: every port calls it."""

    def __init__(self, handler: EffectHandler) -> None:
        self.handler = handler

    async def census(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)

    async def read_session(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)

    async def force_stop(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)

    async def recover(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)

    async def publish_generation(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)

    async def mark_uncertain(self, effect: Effect) -> Mapping[str, Any]:
        return await self.handler(effect)


def ports_from_handler(handler: EffectHandler) -> EffectPorts:
    """The `EffectPorts` of one handler function (every effect kind goes to it): what a test or a rig gives
    the runtime in place of a lifecycle's ports."""
    return _HandlerPorts(handler)


class ControllerRuntime:
    """One controller: the core, its engine link and its socket server, wired. Start with `start()`,
    stop with `aclose()` (which leaves the engine to its owner: closing the controller never stops or
    releases anything, H11 and brief §2 "What never releases a claim")."""

    def __init__(
        self,
        core: ControllerCore,
        link: EngineLink | None,
        socket_path: str,
        *,
        page_reader: PageReader | None = None,
        session_reader: SessionReader | None = None,
        effects: EffectPorts | EffectHandler = no_cohort_effects,
        limits: ServerLimits | None = None,
        clock: Callable[[], float] = time.time,
        evidence_path: str | None = None,
        workers: int = 2,
        engine_hook: Callable[[list[LinkEvent]], None] | None = None,
        session_stat: SessionStatter | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        if link is not None and link.core is not core.link:
            raise ValueError("the engine link must run over the core's own LinkCore (EngineLink(core=core.link))")
        self.core = core
        self.link = link
        self.clock = clock
        # The grants decide in the core (rule 7b); the same grants open the socket's gate to their uids and gids.
        self.server = SocketServer(socket_path, self.feed, limits=limits or ServerLimits(), clock=time.monotonic,
                                   reach=core.config.access.reach(),
                                   standing=functools.partial(core.config.access.standing, conversation=core.config.conversation))
        self.page_reader = page_reader
        self.session_reader = session_reader
        # A prompt's look at the session file (`SessionFileReader.identity` when the reader has one).
        self.session_stat: SessionStatter | None = session_stat or getattr(session_reader, "identity", None)
        # What runs the core's effects but the session file's read (the runtime's own port): the lifecycle's
        # ports, or a handler every effect goes to (`ports_from_handler`).
        self.effects: EffectPorts = _HandlerPorts(effects) if callable(effects) else effects
        self.evidence: deque[Evidence] = deque(maxlen=EVIDENCE_KEPT)
        self._evidence_path = evidence_path
        # Blocking work off the loop: the pool given (the lifecycle's one pool, which it shuts down), or its own.
        self._own_pool = pool is None
        self._pool = pool or ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mosaic-controller")
        # The prompt's look runs on a thread of its own: never behind a page or a drift read in the pool. Its
        # jobs go by a SimpleQueue (None stops it), started with the first look.
        self._look_jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._look_thread: threading.Thread | None = None
        self._waiting: deque[Input] = deque()  # inputs that came while a prompt's look was taken
        self._looking = False
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._placeholders: dict[tuple[ConnId, RpcId], Placeholder] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pump: asyncio.Task[None] | None = None
        self._closed = False
        self.internal_errors = 0
        self.evidence_lost = 0  # evidence lines the evidence file could not take (kept in memory)
        self._evidence_errors: set[int | None] = set()
        self._waiters: list[tuple[Callable[[ControllerCore], bool], asyncio.Future[None]]] = []
        self._engine_hook = engine_hook  # a test seam: sees each batch of link events before the core does

    @property
    def socket_path(self) -> str:
        return self.server.socket_path

    async def start(self) -> None:
        """Bind the socket and start reading the engine. Raises what the server raises for a socket path
        that is not private (SocketPathError)."""
        self._loop = asyncio.get_running_loop()
        await self.server.start()
        if self.link is not None:  # None: no engine attached (an orphan, a stopped execution)
            self._pump = self._loop.create_task(self._engine_pump(), name="mosaic-controller-engine")
        if self.core.config.drift is not None:
            self.feed(TimerFired(DRIFT_START))  # the drift check after taking the engine over (core rule 8)

    async def aclose(self) -> None:
        """Stop serving (clients get `closing` "shutdown"), stop the timers and the pump, close the link.
        Nothing is released or stopped: the engine and any claim are their owner's."""
        if self._closed:
            return
        self._closed = True
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        for task in list(self._tasks):
            task.cancel()
        await self.server.aclose()
        if self.link is not None:
            await self.link.aclose()
        if self._own_pool:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._look_jobs.put(None)  # the look thread ends after the look it may be taking (never waited for)

    # -- the one way in ------------------------------------------------------------------------------------

    def feed(self, event: Input) -> None:
        """Give the core one input and carry out what it returns, in order (on the loop's thread). A prompt
        the core wants looked at waits for its look (module docstring), and so does every input after it."""
        if self._closed:
            return
        if self._looking:
            self._waiting.append(event)
            return
        if isinstance(event, Call) and event.session is None and self.core.wants_session_stat(event):
            self._look(event)
            return
        self._receive(event)

    def _look(self, call: Call) -> None:
        """Take the prompt's look at the session file on the look thread; `_looked` feeds the prompt with it
        when it is back (no future and no task between: the cheapest hop off the loop and back)."""
        assert self._loop is not None
        loop = self._loop
        look = self.session_stat

        def stat() -> None:
            if look is None:
                seen = SessionStat(None, "this controller has no session reader")
            else:
                try:
                    seen = SessionStat(look())
                except Exception as exc:  # noqa: BLE001 - a look that fails is no evidence: the core reads the file
                    seen = SessionStat(None, repr(exc))
            with contextlib.suppress(RuntimeError):  # the loop is closed: the controller is gone
                loop.call_soon_threadsafe(self._looked, call, seen)

        if self._look_thread is None:
            self._look_thread = threading.Thread(target=self._look_worker, name="mosaic-controller-look",
                                                 daemon=True)
            self._look_thread.start()
        self._looking = True
        self._look_jobs.put(stat)

    def _look_worker(self) -> None:
        """The look thread: each job in turn, until None."""
        jobs = self._look_jobs
        while (job := jobs.get()) is not None:
            job()

    def _looked(self, call: Call, seen: SessionStat) -> None:
        self._looking = False
        try:
            if not self._closed:
                self._receive(replace(call, session=seen))
        finally:  # what waited behind the prompt goes on, in order, whatever carrying the prompt out raised
            while self._waiting and not self._looking and not self._closed:
                self.feed(self._waiting.popleft())

    def _receive(self, event: Input) -> None:
        """The core decides on `event`; its actions are carried out in order. A bug never takes the
        controller down, and never leaves a request unanswered (the server's rule 5: every request gets a
        JSON answer): when the core raises on a call, or on the page read an observe waits for, that
        request is answered -32603; an action that cannot be carried out is logged and the ones after it
        still are."""
        try:
            actions = self.core.receive(event, now=self.clock())
        except Exception:  # noqa: BLE001 - a bug in the core must not take the controller down
            self.internal_errors += 1
            logger.exception("controller core failed on %s", type(event).__name__)
            if isinstance(event, (Call, PageRead)):
                self._internal_error(event.conn, event.rpc_id)
            return
        notes: list[Notify] = []  # consecutive notifications to the same connections, delivered as one (issue 34)
        for action in actions:
            if type(action) is Notify:
                if notes and notes[0].to != action.to:
                    self._notify(notes)
                    notes = []
                notes.append(action)
                continue
            if notes:
                self._notify(notes)
                notes = []
            try:
                self._carry_out(action)
            except Exception:  # noqa: BLE001 - one bad action must not cost the others (or a reply)
                self.internal_errors += 1
                logger.exception("carrying out %s failed", type(action).__name__)
                if isinstance(action, (Reply, Refuse)):
                    self._internal_error(action.conn, action.rpc_id)
        if notes:
            self._notify(notes)
        if self._waiters:
            self._wake_waiters()

    def _notify(self, notes: list[Notify]) -> None:
        try:
            self.server.deliver_notifications(notes)
        except Exception:  # noqa: BLE001 - one bad action must not cost the others (or a reply)
            self.internal_errors += 1
            logger.exception("carrying out Notify failed")

    def _internal_error(self, conn: ConnId, rpc_id: RpcId) -> None:
        """Answer (conn, rpc_id) -32603: its place if one is held (an observe's page), else the server's."""
        placeholder = self._placeholders.pop((conn, rpc_id), None)
        if placeholder is not None and not placeholder.filled:
            placeholder.fail()
        else:
            self.server.internal_error(conn, rpc_id)

    def _carry_out(self, action: Action) -> None:
        if isinstance(action, (Reply, Refuse)):
            placeholder = self._placeholders.pop((action.conn, action.rpc_id), None)
            if placeholder is not None:
                placeholder.fill(action)
            else:
                self.server.deliver(action)
        elif isinstance(action, (Notify, CloseConnection)):
            self.server.deliver(action)
        elif isinstance(action, FlushEngine):
            if self.link is not None:
                self.link.flush()
        elif isinstance(action, SetTimer):
            self._set_timer(action.key, action.deadline)
        elif isinstance(action, CancelTimer):
            handle = self._timers.pop(action.key, None)
            if handle is not None:
                handle.cancel()
        elif isinstance(action, ReadPage):
            self._read_page(action)
        elif isinstance(action, Effect):
            row = EFFECTS[action.kind]  # the core asks only for its rows' kinds
            if row.runs_in == "runtime" and row.port == "read_session":
                self._read_session_soon(action, row)  # the runtime's own: one hop each way, no task
            else:
                ports: Any = self if row.runs_in == "runtime" else self.effects
                self._start(self._effect(action, row, getattr(ports, row.port)))
        elif isinstance(action, Evidence):
            self._record_evidence(action)

    # -- engine, timers, pages, effects, evidence ----------------------------------------------------------

    async def _engine_pump(self) -> None:
        """Every link event, in order, to the core, in batches of what is already queued. The link stops
        reading the engine when its queue is full (backpressure): this pump is what drains it."""
        execution = self.core.execution
        link = self.link
        assert link is not None
        while True:
            batch: list[LinkEvent] = [await link.next_event()]
            while link.queued_events and len(batch) < MAX_BATCH:
                batch.append(await link.next_event())
            if self._engine_hook is not None:
                self._engine_hook(batch)
            self.feed(EngineEvents(execution, batch))

    def _set_timer(self, key: str, deadline: float) -> None:
        assert self._loop is not None
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, deadline - self.clock())

        def fire() -> None:
            self._timers.pop(key, None)
            self.feed(TimerFired(key))

        self._timers[key] = self._loop.call_later(delay, fire)

    def _read_page(self, action: ReadPage) -> None:
        self._placeholders[(action.conn, action.rpc_id)] = self.server.reserve(action.conn, action.rpc_id)
        reader = self.page_reader

        def read() -> Mapping[str, Any]:
            if reader is None:
                return {"ok": False, "refusal": {"code": "unavailable", "reconcile": False,
                                                 "message": "this controller has no history reader"}}
            try:
                return reader(action.cursor)
            except Exception as exc:  # noqa: BLE001 - unreadable is reported, never a crash
                logger.exception("history page read failed")
                return {"ok": False, "refusal": {"code": "unavailable", "reconcile": False,
                                                 "message": f"the history page could not be read: {exc!r}"}}

        async def run() -> None:
            assert self._loop is not None
            result = await self._loop.run_in_executor(self._pool, read)
            self.feed(PageRead(action.conn, action.rpc_id, result))

        self._start(run())

    def _session_read(self, effect: Effect) -> Callable[[], Mapping[str, Any]]:
        """The drift check's file read (core rule 8), blocking: {"ok": True, "file": SessionBytes | None} or
        {"ok": False, "error": ...}; never raises."""
        reader = self.session_reader

        def read() -> Mapping[str, Any]:
            if reader is None:
                return {"ok": False, "error": "this controller has no session reader"}
            try:
                return {"ok": True, "file": reader(int(effect.payload.get("from", 0)))}
            except Exception as exc:  # noqa: BLE001 - unreadable is reported (the check is uncertain), never a crash
                return {"ok": False, "error": repr(exc)}

        return read

    async def read_session(self, effect: Effect) -> Mapping[str, Any]:
        """The runtime's own port (`EffectPorts.read_session`): the drift check's file read, off the loop in
        the pool. `_carry_out` takes the same read by `_read_session_soon` (no task); this is the port's form."""
        assert self._loop is not None
        result: Mapping[str, Any] = await self._loop.run_in_executor(self._pool, self._session_read(effect))
        return result

    def _read_session_soon(self, effect: Effect, row: EffectKind) -> None:
        """The session file's read in the pool, its result fed back as `EffectDone` by one
        `call_soon_threadsafe` (issue 34: the task and the asyncio future of `_effect` cost the turn's end two
        more loop hops). Whatever the read raised, or a pool that was shut down, is the row's `failed` answer
        (never success: `_effects` rule 2), fed on a later loop turn as `_effect` would."""
        assert self._loop is not None
        loop = self._loop

        def done_now(result: Mapping[str, Any]) -> None:
            self.feed(EffectDone(effect.effect_id, effect.kind, result))

        def back(done: Future[Mapping[str, Any]]) -> None:
            try:
                result = done.result()
            except BaseException as exc:  # noqa: BLE001 - cancelled or failed: the row's failed answer
                result = row.failed(exc)
            with contextlib.suppress(RuntimeError):  # the loop is closed: the controller is gone
                loop.call_soon_threadsafe(done_now, result)

        try:
            self._pool.submit(self._session_read(effect)).add_done_callback(back)
        except RuntimeError as exc:  # the pool was shut down: closing
            loop.call_soon(done_now, row.failed(exc))

    async def wait_core(self, predicate: Callable[[ControllerCore], bool], timeout: float) -> None:
        """Return once `predicate(core)` holds, checked now and after each input the core takes; raises
        TimeoutError after `timeout` seconds (for rigs and tests: a wait on state, never a sleep)."""
        if predicate(self.core):
            return
        assert self._loop is not None
        future: asyncio.Future[None] = self._loop.create_future()
        entry = (predicate, future)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(future, timeout)
        finally:
            if entry in self._waiters:
                self._waiters.remove(entry)

    def _wake_waiters(self) -> None:
        for predicate, future in list(self._waiters):
            if not future.done() and predicate(self.core):
                future.set_result(None)

    async def _effect(self, effect: Effect, row: EffectKind,
                      port: Callable[[Effect], Awaitable[Mapping[str, Any]]]) -> None:
        """Run one effect on its row's port; its result, or its row's `failed` answer when the port raised
        (never success: `_effects` rule 2), goes back to the core."""
        try:
            result = await port(effect)
        except Exception as exc:  # noqa: BLE001 - an effect that fails is reported to the core as failed
            logger.exception("effect %s failed", effect.kind)
            result = row.failed(exc)
        self.feed(EffectDone(effect.effect_id, effect.kind, result))

    def run_blocking(self, fn: Callable[[], Any]) -> Awaitable[Any]:
        """Run a blocking call in the controller's bounded pool (for effect handlers)."""
        assert self._loop is not None
        return self._loop.run_in_executor(self._pool, fn)

    def _start(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._loop is not None
        task: asyncio.Task[None] = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _record_evidence(self, evidence: Evidence) -> None:
        """Keep the line in memory and append it to the evidence file, if one is set. A file that cannot be
        written (a full disk: ENOSPC) costs that line in the file, never the controller: this runs inside
        `feed`, on the engine pump's path, so a raise here would stop the engine being read. The loss is
        counted (`evidence_lost`) and said once per errno, in one line (no traceback)."""
        self.evidence.append(evidence)
        if self._evidence_path is not None:
            line = json.dumps({"at": self.clock(), "kind": evidence.kind, **evidence.detail}, ensure_ascii=False,
                              default=str)
            try:
                fd = os.open(self._evidence_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
                try:
                    os.write(fd, line.encode("utf-8", "surrogatepass") + b"\n")
                finally:
                    os.close(fd)
            except OSError as exc:
                self.evidence_lost += 1
                if exc.errno not in self._evidence_errors:
                    self._evidence_errors.add(exc.errno)
                    logger.warning("evidence file %s: %s (%s); evidence is kept in memory, lines lost from the "
                                   "file are counted", self._evidence_path, errno.errorcode.get(exc.errno or 0, "?"),
                                   exc.strerror)
