"""The asyncio shell around :class:`mosaic.claude_rpc.link.ClaudeLinkCore`: it only moves bytes and reads the
clock, the same design as pi-rpc's ``EngineLink`` (claude-rpc may not import pi-rpc: the layers rule).

It owns two raw file descriptors, the write end of the engine's stdin and the read end of its stdout, set
non-blocking and driven by ``loop.add_reader``/``loop.add_writer``, so the core learns exactly how many
bytes each ``os.write`` accepted. The process is someone else's (a launcher, the cohort shim, or
:meth:`ClaudeEngineLink.spawn` for tests and the smoke suite).

Three rules of the read side, as pi-rpc's:

1. **Backpressure, never loss.** Events wait in a queue for :meth:`ClaudeEngineLink.next_event`, bounded by
   ``max_queued_events``. Before each line goes to the core the shell checks the queue has room; when it is
   full, the bytes already read wait in the shell (at most one 64 KiB read) and the reader is removed, so
   the engine blocks on its own write. Reading resumes at the low-water mark (half the bound). No event is
   dropped, reordered or merged.
2. **A bound is acted on only after the engine's output has been read**: when a deadline passes, the timer
   first reads the pipe until it is empty (and waits while reading is paused), then ticks the core. So an
   acknowledgement already written by the engine is never declared ``no-response``.
3. **Reading stops when the output ends or becomes unreadable**: the reader is removed and the read end
   closed; nothing is fed to the core again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mosaic.claude_rpc._link import ClaudeLinkCore
from mosaic.claude_rpc._link_model import LinkEvent, LinkPoisoned, Outcome, Outgoing
from mosaic.claude_rpc._refusal import ClaudeRpcRefusal

__all__ = ["DEFAULT_MAX_QUEUED_EVENTS", "ClaudeEngineLink", "OutcomeUnknownError"]

DEFAULT_MAX_QUEUED_EVENTS = 1024
_READ_SIZE = 1 << 16
_DEFAULT: Any = object()
_SETTLED = (Outcome.ACKNOWLEDGED, Outcome.UNKNOWN, Outcome.NOT_WRITTEN)


class OutcomeUnknownError(Exception):
    """The line's outcome is ``unknown`` (``out.unknown_reason``); the link is poisoned."""

    def __init__(self, out: Outgoing) -> None:
        super().__init__(f"{out.kind.value} {out.key}: outcome unknown ({out.unknown_reason})")
        self.out = out


class ClaudeEngineLink:
    """A Claude link over two pipe file descriptors (asyncio); see the module docstring.

    Construct inside a running loop with :meth:`from_fds` over a launcher's pipes, or :meth:`spawn` a
    process. The link takes both fds and closes them in :meth:`aclose`. With ``core=`` it drives a core
    someone else owns (a controller's), reading ``now`` from ``clock`` (the owner's clock); the owner calls
    the core's send methods and then :meth:`flush`. Without, it makes a core from ``core_options``.
    """

    def __init__(self, write_fd: int, read_fd: int, *, core: ClaudeLinkCore | None = None,
                 max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                 clock: Callable[[], float] = time.monotonic, **core_options: Any) -> None:
        if core is None:
            core = ClaudeLinkCore(**core_options)
        elif core_options:
            raise ValueError("core options configure the core the link makes; configure the core you pass instead")
        if max_queued_events < 2:
            raise ValueError("max_queued_events must be at least 2")
        self.core = core
        self.max_queued_events = max_queued_events
        self._low_water = max_queued_events // 2
        self._wfd: int | None = write_fd
        self._rfd: int | None = read_fd
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[LinkEvent] = asyncio.Queue()
        self._waiters: dict[int, tuple[Outgoing, asyncio.Future[Outgoing]]] = {}
        self._pending_data: memoryview | None = None
        self._pending: Outgoing | None = None
        self._unfed = bytearray()
        self._paused = False
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._tick_owed = False
        self._closed = asyncio.Event()
        self.process: subprocess.Popen[bytes] | None = None
        os.set_blocking(write_fd, False)
        os.set_blocking(read_fd, False)
        self._loop.add_reader(read_fd, self._on_readable)
        self.flush()

    # -- construction ------------------------------------------------------------------------------------

    @classmethod
    async def from_fds(cls, write_fd: int, read_fd: int, *, core: ClaudeLinkCore | None = None,
                       max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                       clock: Callable[[], float] = time.monotonic, **core_options: Any) -> ClaudeEngineLink:
        """A link over ``write_fd`` (the engine's stdin) and ``read_fd`` (its stdout); takes both fds."""
        return cls(write_fd, read_fd, core=core, max_queued_events=max_queued_events, clock=clock, **core_options)

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: str,
                    core: ClaudeLinkCore | None = None, max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                    clock: Callable[[], float] = time.monotonic, stderr: int | None = None,
                    **core_options: Any) -> ClaudeEngineLink:
        """Start ``argv`` with exactly ``env`` in ``cwd``, in its own session, and link its stdin and stdout
        (``stderr`` defaults to ``subprocess.DEVNULL``). A failed start closes all four pipe ends."""
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        try:
            proc = subprocess.Popen(list(argv), stdin=in_r, stdout=out_w,
                                    stderr=subprocess.DEVNULL if stderr is None else stderr,
                                    env=dict(env), cwd=cwd, start_new_session=True, close_fds=True)
        except BaseException:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise
        os.close(in_r)
        os.close(out_w)
        link = cls(in_w, out_r, core=core, max_queued_events=max_queued_events, clock=clock, **core_options)
        link.process = proc
        return link

    # -- sending -----------------------------------------------------------------------------------------

    def send_user(self, content: str | Sequence[Mapping[str, Any]], *, uuid: str,
                  bound: float | None = _DEFAULT) -> Outgoing:
        out = self.core.send_user(content, uuid=uuid, now=self._clock(), **self._bound(bound))
        self.flush()
        return out

    def send_initialize(self, *, bound: float | None = _DEFAULT) -> Outgoing:
        out = self.core.send_initialize(now=self._clock(), **self._bound(bound))
        self.flush()
        return out

    def send_interrupt(self, *, cancel_queued: bool = True, bound: float | None = _DEFAULT) -> Outgoing:
        out = self.core.send_interrupt(cancel_queued=cancel_queued, now=self._clock(), **self._bound(bound))
        self.flush()
        return out

    def send_set_permission_mode(self, mode: str, *, bound: float | None = _DEFAULT) -> Outgoing:
        out = self.core.send_set_permission_mode(mode, now=self._clock(), **self._bound(bound))
        self.flush()
        return out

    def allow(self, request_id: str) -> Outgoing | ClaudeRpcRefusal:
        """The core's :meth:`~ClaudeLinkCore.allow`, then a flush."""
        out = self.core.allow(request_id, now=self._clock())
        self.flush()
        return out

    def deny(self, request_id: str, message: str) -> Outgoing | ClaudeRpcRefusal:
        out = self.core.deny(request_id, message, now=self._clock())
        self.flush()
        return out

    @staticmethod
    def _bound(bound: float | None) -> dict[str, float | None]:
        return {} if bound is _DEFAULT else {"bound": bound}

    def flush(self) -> None:
        """Start writing what the core has queued and bring the shell up to date with the core: abandon a write
        the core decided, wake :meth:`outcome` callers, re-arm the timer (acting now on a passed deadline,
        under rule 2). Idempotent, safe at any time, never raises for the link's state."""
        pending = self._pending
        if pending is not None and pending.outcome is not Outcome.WRITING:
            self._dispatch(self._abandon_write(pending))
        if self._pending is None:
            self._pump()
        self._wake_settled()
        deadline = self.core.next_deadline()
        if deadline is not None and deadline <= self._clock():
            self._on_timer()
        else:
            self._arm_timer()

    async def outcome(self, out: Outgoing) -> Outgoing:
        """Wait until ``out`` is acknowledged; raises :class:`OutcomeUnknownError` when its outcome is unknown,
        :class:`LinkPoisoned` when it was never written. Someone must drain :meth:`next_event` (rule 1)."""
        while True:
            if out.outcome is Outcome.ACKNOWLEDGED:
                return out
            if out.outcome is Outcome.UNKNOWN:
                raise OutcomeUnknownError(out)
            if out.outcome is Outcome.NOT_WRITTEN:
                raise LinkPoisoned(self.core.poisoned or "not written")
            entry = self._waiters.get(out.seq)
            if entry is None or entry[1].done():
                entry = (out, self._loop.create_future())
                self._waiters[out.seq] = entry
            await asyncio.shield(entry[1])

    # -- events ------------------------------------------------------------------------------------------

    @property
    def queued_events(self) -> int:
        return self._events.qsize()

    @property
    def reading_paused(self) -> bool:
        return self._paused

    async def next_event(self, timeout: float | None = None) -> LinkEvent:
        """The next event in order; ``TimeoutError`` after ``timeout`` seconds."""
        if timeout is None:
            ev = await self._events.get()
        else:
            ev = await asyncio.wait_for(self._events.get(), timeout)
        if self._paused and self._events.qsize() <= self._low_water:
            self._feed_unfed()
            self._set_reading()
            if not self._paused:
                self._settle_deadlines()
        return ev

    async def wait_event(self, predicate: Callable[[LinkEvent], bool], timeout: float) -> LinkEvent:
        """Take events until one satisfies ``predicate``; ``TimeoutError`` when the bound passes."""
        deadline = self._loop.time() + timeout
        while True:
            left = deadline - self._loop.time()
            if left <= 0:
                raise TimeoutError("no matching engine event within the bound")
            ev = await self.next_event(left)
            if predicate(ev):
                return ev

    # -- process helpers ---------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def close_stdin(self) -> None:
        """Close the engine's stdin (EOF: the binary finishes what it holds, then exits 0, or 1 when its last
        turn ended with an error result; docs/claude-2.1.283.md)."""
        if self._wfd is not None:
            if self._pending is not None:
                self._loop.remove_writer(self._wfd)
            fd, self._wfd = self._wfd, None
            os.close(fd)

    def terminate(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self.process.kill()

    async def wait(self, timeout: float) -> int:
        """Reap the spawned process; its exit status. ``TimeoutError`` after ``timeout``."""
        if self.process is None:
            raise RuntimeError("this link did not spawn its process")
        proc = self.process
        return await asyncio.wait_for(self._loop.run_in_executor(None, proc.wait), timeout)

    async def wait_output_end(self, timeout: float) -> None:
        """Wait until the link stopped reading for good (EOF, unreadable output, or closed)."""
        await asyncio.wait_for(self._closed.wait(), timeout)

    async def aclose(self) -> None:
        """Close both fds; kill and reap a spawned process still running."""
        self.close_stdin()
        self._stop_reading()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.process is not None and self.process.poll() is None:
            self.kill()
            with contextlib.suppress(TimeoutError):
                await self.wait(10)

    # -- the write side ----------------------------------------------------------------------------------

    def _dispatch(self, events: list[LinkEvent]) -> None:
        for ev in events:
            self._events.put_nowait(ev)
        if events:
            self._wake_settled()
        self._arm_timer()

    def _wake_settled(self) -> None:
        for seq, (out, fut) in list(self._waiters.items()):
            if out.outcome in _SETTLED:
                del self._waiters[seq]
                if not fut.done():
                    fut.set_result(out)

    def _pump(self) -> None:
        if self._pending is None:
            out = self.core.next_write()
            if out is None:
                self._arm_timer()
                return
            if self._wfd is None:
                self._dispatch(self.core.write_done(out, accepted=0, error=OSError(errno.EBADF, "stdin closed"),
                                                    now=self._clock()))
                return
            self._pending = out
            self._pending_data = memoryview(out.data)
            out.accepted = 0
        self._write_some()

    def _write_some(self) -> None:
        out, data = self._pending, self._pending_data
        assert out is not None and data is not None
        error: BaseException | None = None
        while data and self._wfd is not None:
            if out.outcome is Outcome.UNKNOWN:
                break  # the bound passed mid-write: the core has decided
            try:
                n = os.write(self._wfd, data)
            except BlockingIOError:
                # Keep what is left (a retry from byte 0 would repeat a prefix with no line end) and wait.
                self._pending_data = data
                self._loop.add_writer(self._wfd, self._on_writable)
                self._arm_timer()
                return
            except OSError as exc:
                error = exc
                break
            out.accepted += n
            data = data[n:]
        if data and error is None and self._wfd is None:
            error = OSError(errno.EBADF, "stdin closed during the write")
        accepted = out.accepted
        self._pending = None
        self._pending_data = None
        self._dispatch(self.core.write_done(out, accepted=accepted, error=error, now=self._clock()))
        self._pump()

    def _on_writable(self) -> None:
        if self._wfd is not None:
            self._loop.remove_writer(self._wfd)
        if self._pending is not None:
            self._write_some()

    def _abandon_write(self, out: Outgoing) -> list[LinkEvent]:
        if self._wfd is not None:
            self._loop.remove_writer(self._wfd)
        self._pending = None
        self._pending_data = None
        return self.core.write_done(out, accepted=out.accepted, error=None, now=self._clock())

    # -- the read side (rules 1 and 3) -------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._rfd is None or self._paused:
            return
        self._read_chunk()
        if self._tick_owed and not self._paused:
            self._settle_deadlines()

    def _read_chunk(self) -> bool:
        """One read, fed as far as the queue allows. True when the pipe was empty or reading ended."""
        if self._rfd is None:
            return True
        try:
            data = os.read(self._rfd, _READ_SIZE)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            self._stop_reading()
            self._dispatch(self.core.output_ended(now=self._clock()))
            return True
        self._unfed += data
        self._feed_unfed()
        self._set_reading()
        return False

    def _feed_unfed(self) -> None:
        buf = self._unfed
        while buf and self._rfd is not None:
            room = self.max_queued_events - self._events.qsize()
            if room <= 0:
                return
            # A line can add more than one event; feeding at most `room` lines keeps the queue within one
            # line's events of the bound.
            if buf.count(b"\n") <= room:
                end = len(buf)
            else:
                end = 0
                for _ in range(room):
                    end = buf.index(b"\n", end) + 1
            chunk = bytes(buf[:end])
            del buf[:end]
            self._dispatch(self.core.feed(chunk, now=self._clock()))
            if self.core.output_closed:
                self._stop_reading()

    def _set_reading(self) -> None:
        if self._rfd is None:
            return
        if self._paused:
            if not self._unfed and self._events.qsize() <= self._low_water:
                self._loop.add_reader(self._rfd, self._on_readable)
                self._paused = False
        elif self._unfed or self._events.qsize() >= self.max_queued_events:
            self._loop.remove_reader(self._rfd)
            self._paused = True

    def _stop_reading(self) -> None:
        if self._rfd is not None:
            if not self._paused:
                self._loop.remove_reader(self._rfd)
            self._paused = False
            fd, self._rfd = self._rfd, None
            os.close(fd)
        self._unfed.clear()
        self._closed.set()

    # -- the clock (rule 2) ------------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        if self._tick_owed:
            return
        deadline = self.core.next_deadline()
        if self._timer is not None:
            if self._timer_at == deadline:
                return
            self._timer.cancel()
            self._timer = None
        if deadline is None:
            return
        self._timer_at = deadline
        self._timer = self._loop.call_later(max(0.0, deadline - self._clock()), self._on_timer)

    def _on_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._tick_owed = True
        self._settle_deadlines()

    def _settle_deadlines(self) -> None:
        if not self._tick_owed:
            return
        while self._rfd is not None:
            if self._paused:
                return
            if self._read_chunk():
                break
        self._tick_owed = False
        events = self.core.tick(now=self._clock())
        pending = self._pending
        if pending is not None and pending.outcome is Outcome.UNKNOWN:
            events += self._abandon_write(pending)
        self._dispatch(events)
