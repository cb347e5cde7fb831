"""The asyncio shell around :class:`mosaic.pi_rpc._link.LinkCore`: it only moves bytes and reads the clock.

It owns two raw file descriptors, the write end of the engine's stdin and the read end of its stdout, set
non-blocking and driven by ``loop.add_reader``/``loop.add_writer``, so the core learns exactly how many
bytes each ``os.write`` accepted (a buffered transport would hide a partial write). The process itself is
someone else's business (a launcher, the cgroup shim, or :meth:`EngineLink.spawn` for tests and the
smoke suite); the shell only needs the two pipes.

Failure behaviour: a write error, a partial write, a stalled write or an overdue response makes the
command's outcome ``unknown``; the awaiting caller gets :class:`OutcomeUnknownError`, the link is
poisoned and every later send raises :class:`mosaic.pi_rpc._link.LinkPoisoned`. EOF on stdout ends the
link the same way for the commands still in flight. Cancelling an awaiting caller does not cancel the
command: its bytes may already be in the pipe, and the outcome is still recorded on the
:class:`~mosaic.pi_rpc._link.Command`.
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

from mosaic.pi_rpc._framing import DEFAULT_MAX_RECORD_BYTES
from mosaic.pi_rpc._link import (
    DEFAULT_BOUND,
    Command,
    CommandOutcome,
    EngineEvent,
    LinkCore,
    LinkEvent,
    LinkPoisoned,
    OutcomeKnown,
    OutcomeUnknown,
    PromptStateEvidence,
)

__all__ = ["EngineLink", "OutcomeUnknownError"]

_READ_SIZE = 1 << 16
_DEFAULT: Any = object()


class OutcomeUnknownError(Exception):
    """The command's outcome is ``unknown`` (``command.unknown_reason``); the link is poisoned."""

    def __init__(self, command: Command) -> None:
        super().__init__(f"{command.type} {command.id}: outcome unknown ({command.unknown_reason})")
        self.command = command


class EngineLink:
    """An engine link over two pipe file descriptors (asyncio).

    Construct with :meth:`from_fds` inside a running loop (the link takes ownership of both fds and
    closes them in :meth:`aclose`), or :meth:`spawn` a process. Records that are not responses are
    delivered by :meth:`next_event`, every :class:`~mosaic.pi_rpc._link.LinkEvent` in read order
    (responses too, as ``OutcomeKnown``), so an observer sees one ordered stream.
    """

    def __init__(self, core: LinkCore, write_fd: int, read_fd: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.core = core
        self._wfd: int | None = write_fd
        self._rfd: int | None = read_fd
        self._clock = clock
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[LinkEvent] = asyncio.Queue()
        self._waiters: dict[int, asyncio.Future[Command]] = {}
        self._pending_data: memoryview | None = None
        self._pending_cmd: Command | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = asyncio.Event()
        self.process: subprocess.Popen[bytes] | None = None
        os.set_blocking(write_fd, False)
        os.set_blocking(read_fd, False)
        self._loop.add_reader(read_fd, self._on_readable)

    # -- construction ------------------------------------------------------------------------------------

    @classmethod
    async def from_fds(cls, write_fd: int, read_fd: int, *, default_bound: float | None = DEFAULT_BOUND,
                       max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> EngineLink:
        """A link over ``write_fd`` (the engine's stdin) and ``read_fd`` (its stdout); takes both fds."""
        return cls(LinkCore(default_bound=default_bound, max_record_bytes=max_record_bytes), write_fd, read_fd)

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: str,
                    default_bound: float | None = DEFAULT_BOUND,
                    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                    stderr: int | None = None) -> EngineLink:
        """Start ``argv`` with exactly ``env`` (nothing inherited) in ``cwd`` and link its stdin/stdout.

        The child gets its own session (``start_new_session``) so a signal to the caller's group does not
        reach it; ``stderr`` defaults to ``subprocess.DEVNULL``. Kill it with :meth:`terminate` /
        :meth:`kill` (by the recorded pid) and reap it with :meth:`wait`.
        """
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
        link = await cls.from_fds(in_w, out_r, default_bound=default_bound, max_record_bytes=max_record_bytes)
        link.process = proc
        return link

    # -- sending -----------------------------------------------------------------------------------------

    def send(self, command: Mapping[str, Any], *, bound: float | None = _DEFAULT) -> Command:
        """Queue a command (not a prompt) and start writing it; return its Command at once."""
        cmd = self.core.send(command, now=self._clock(), **({} if bound is _DEFAULT else {"bound": bound}))
        self._pump()
        return cmd

    def send_prompt(self, message: str, *, bound: float | None = _DEFAULT) -> Command:
        """Queue a prompt; raises :class:`~mosaic.pi_rpc._link.PromptNotAcknowledged` while an earlier
        prompt has no response, :class:`~mosaic.pi_rpc._link.LinkPoisoned` when poisoned."""
        cmd = self.core.send_prompt(message, now=self._clock(), **({} if bound is _DEFAULT else {"bound": bound}))
        self._pump()
        return cmd

    async def outcome(self, command: Command) -> Command:
        """Wait until ``command`` is acknowledged; return it. Raises :class:`OutcomeUnknownError` when its
        outcome is unknown, :class:`~mosaic.pi_rpc._link.LinkPoisoned` when it was never written."""
        while True:
            if command.outcome is CommandOutcome.ACKNOWLEDGED:
                return command
            if command.outcome is CommandOutcome.UNKNOWN:
                raise OutcomeUnknownError(command)
            if command.outcome is CommandOutcome.NOT_WRITTEN:
                raise LinkPoisoned(self.core.poisoned or "not written")
            fut = self._waiters.get(command.seq)
            if fut is None or fut.done():
                fut = self._loop.create_future()
                self._waiters[command.seq] = fut
            await asyncio.shield(fut)

    async def request(self, command: Mapping[str, Any], *, bound: float | None = _DEFAULT) -> Command:
        """:meth:`send` then :meth:`outcome`."""
        return await self.outcome(self.send(command, bound=bound))

    async def prompt(self, message: str, *, bound: float | None = _DEFAULT) -> Command:
        """:meth:`send_prompt` then :meth:`outcome` (the ack, or the error response)."""
        return await self.outcome(self.send_prompt(message, bound=bound))

    def prompt_state(self, prompt: Command, state: Command) -> PromptStateEvidence:
        """The core's evidence rule (see :meth:`LinkCore.prompt_state`)."""
        return self.core.prompt_state(prompt, state)

    async def next_event(self, timeout: float | None = None) -> LinkEvent:
        """The next link event in read order; ``TimeoutError`` after ``timeout`` seconds."""
        if timeout is None:
            return await self._events.get()
        return await asyncio.wait_for(self._events.get(), timeout)

    async def wait_event(self, predicate: Callable[[LinkEvent], bool], timeout: float) -> LinkEvent:
        """Consume events until one satisfies ``predicate``; ``TimeoutError`` when the bound passes."""
        deadline = self._loop.time() + timeout
        while True:
            left = deadline - self._loop.time()
            if left <= 0:
                raise TimeoutError("no matching engine event within the bound")
            ev = await self.next_event(left)
            if predicate(ev):
                return ev

    @staticmethod
    def is_event(kind: str) -> Callable[[LinkEvent], bool]:
        """A predicate for :meth:`wait_event`: an engine record of type ``kind``."""
        return lambda ev: isinstance(ev, EngineEvent) and ev.type == kind

    # -- process helpers ---------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def close_stdin(self) -> None:
        """Close the engine's stdin (EOF: pinned Pi shuts down with exit 0, rpc-mode.js 641-644)."""
        if self._wfd is not None:
            if self._pending_cmd is not None:
                self._loop.remove_writer(self._wfd)
            fd, self._wfd = self._wfd, None
            os.close(fd)

    def terminate(self) -> None:
        """SIGTERM to the spawned process (by its recorded pid)."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the spawned process (by its recorded pid)."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()

    async def wait(self, timeout: float) -> int:
        """Reap the spawned process; its exit status (negative = signal). ``TimeoutError`` after ``timeout``."""
        if self.process is None:
            raise RuntimeError("this link did not spawn its process")
        proc = self.process
        return await asyncio.wait_for(self._loop.run_in_executor(None, proc.wait), timeout)

    async def wait_output_end(self, timeout: float) -> None:
        """Wait until the engine's stdout reached EOF (or the link was closed)."""
        await asyncio.wait_for(self._closed.wait(), timeout)

    async def aclose(self) -> None:
        """Close both fds (no more reading or writing); kill and reap a spawned process still running."""
        self.close_stdin()
        self._stop_reading()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.process is not None and self.process.poll() is None:
            self.kill()
            with contextlib.suppress(TimeoutError):
                await self.wait(10)

    # -- the byte pump -----------------------------------------------------------------------------------

    def _dispatch(self, events: list[LinkEvent]) -> None:
        for ev in events:
            self._events.put_nowait(ev)
            if isinstance(ev, OutcomeKnown | OutcomeUnknown):
                self._wake(ev.command)
        if self.core.poisoned is not None:
            for cmd in self.core.commands:
                if cmd.outcome is CommandOutcome.NOT_WRITTEN:
                    self._wake(cmd)
        self._arm_timer()

    def _wake(self, cmd: Command) -> None:
        fut = self._waiters.pop(cmd.seq, None)
        if fut is not None and not fut.done():
            fut.set_result(cmd)

    def _pump(self) -> None:
        if self._pending_cmd is None:
            cmd = self.core.next_write()
            if cmd is None:
                self._arm_timer()
                return
            if self._wfd is None:
                self._dispatch(self.core.write_done(cmd, accepted=0, error=OSError(errno.EBADF, "stdin closed"),
                                                    now=self._clock()))
                return
            self._pending_cmd = cmd
            self._pending_data = memoryview(cmd.data)
            cmd.accepted = 0
        self._write_some()

    def _write_some(self) -> None:
        cmd, data = self._pending_cmd, self._pending_data
        assert cmd is not None and data is not None
        error: BaseException | None = None
        while data and self._wfd is not None:
            if self.core.poisoned is not None and cmd.outcome is CommandOutcome.UNKNOWN:
                # The bound passed mid-write (write-stalled): stop, the core has decided.
                break
            try:
                n = os.write(self._wfd, data)
            except BlockingIOError:
                self._loop.add_writer(self._wfd, self._on_writable)
                self._arm_timer()
                return
            except OSError as exc:
                error = exc
                break
            cmd.accepted += n
            data = data[n:]
        self._pending_data = data
        if data and error is None and self._wfd is None:
            error = OSError(errno.EBADF, "stdin closed during the write")
        accepted = cmd.accepted
        self._pending_cmd = None
        self._pending_data = None
        self._dispatch(self.core.write_done(cmd, accepted=accepted, error=error, now=self._clock()))
        self._pump()

    def _on_writable(self) -> None:
        if self._wfd is not None:
            self._loop.remove_writer(self._wfd)
        if self._pending_cmd is not None:
            self._write_some()

    def _on_readable(self) -> None:
        if self._rfd is None:
            return
        try:
            data = os.read(self._rfd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        now = self._clock()
        if not data:
            self._stop_reading()
            self._dispatch(self.core.output_ended(now=now))
            return
        self._dispatch(self.core.feed(data, now=now))
        if self.core.poisoned is not None and self._pending_cmd is None:
            self._pump()

    def _stop_reading(self) -> None:
        if self._rfd is not None:
            self._loop.remove_reader(self._rfd)
            fd, self._rfd = self._rfd, None
            os.close(fd)
        self._closed.set()

    def _arm_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.core.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self._clock())
        self._timer = self._loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        events = self.core.tick(now=self._clock())
        if self._pending_cmd is not None and self._pending_cmd.outcome is CommandOutcome.UNKNOWN:
            # The stalled write is abandoned: report it so the core stops waiting on it.
            cmd = self._pending_cmd
            if self._wfd is not None:
                self._loop.remove_writer(self._wfd)
            self._pending_cmd = None
            self._pending_data = None
            events += self.core.write_done(cmd, accepted=cmd.accepted, error=None, now=self._clock())
        self._dispatch(events)
