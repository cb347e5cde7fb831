"""The asyncio shell around :class:`mosaic.pi_rpc.LinkCore`: it only moves bytes and reads the clock.

It owns two raw file descriptors, the write end of the engine's stdin and the read end of its stdout, set
non-blocking and driven by ``loop.add_reader``/``loop.add_writer``, so the core learns exactly how many
bytes each ``os.write`` accepted (a buffered transport would hide a partial write). The process itself is
someone else's business (a launcher, the cgroup shim, or :meth:`EngineLink.spawn` for tests and the
smoke suite); the shell only needs the two pipes.

Failure behaviour: a write error, a partial write, a stalled write or an overdue response makes the
command's outcome ``unknown``; the awaiting caller gets :class:`OutcomeUnknownError`, the link is
poisoned and every later send raises :class:`mosaic.pi_rpc.link.LinkPoisoned`. EOF on stdout ends the link the
same way for the commands still in flight. Cancelling an awaiting caller does not cancel the command: its
bytes may already be in the pipe, and the outcome is still recorded on the :class:`~mosaic.pi_rpc.Command`.

Three rules of the read side:

1. **Backpressure, never loss.** The events wait in a queue for :meth:`EngineLink.next_event`. Before each
   record is handed to the core the shell checks that the queue holds fewer than ``max_queued_events``;
   when it is full, the bytes already read wait in the shell (at most one read, 64 KiB) and the reader is
   removed, so the engine blocks on its own write (Pi's stdout writer awaits the pipe, output-guard.js
   67-75, and its agent loop awaits that writer before the next event, rpc-mode.js 271-273). Reading
   resumes when the consumer has drained the queue to the low-water mark (half the bound). No event is
   dropped, reordered or merged. One record can add more than one event (a violation adds the outcomes it
   ends and ``Poisoned``), so the queue holds at most ``max_queued_events - 1`` plus one record's events.
2. **A bound is acted on only after the engine's output has been read.** When a deadline passes, the
   timer does not tick the core at once: it first reads the pipe until it is empty. While reading is
   paused by rule 1 the tick waits, and after reading resumes the backlog is read before the tick. So a
   response the link chose not to read yet is never declared ``no-response`` (nor a write the engine could
   not take because it was blocked writing to us ``write-stalled``). An engine that keeps writing without
   a pause postpones the verdict: it is not silent, so "no response" would be a guess.
3. **Reading stops when the output ends or becomes unreadable.** The reader is removed and the read end
   closed (the engine's later writes fail with EPIPE); nothing is fed to the core again, so no error is
   logged per read. Poisoning is the core's, exactly once.
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
    UI_RESPONSE,
    Command,
    CommandOutcome,
    EngineEvent,
    LinkCore,
    LinkEvent,
    LinkPoisoned,
    PromptStateEvidence,
)

__all__ = ["DEFAULT_MAX_QUEUED_EVENTS", "EngineLink", "OutcomeUnknownError"]

# Events waiting for next_event() before the link stops reading. A few seconds of a fast stream; a
# get_entries answer is one event whatever its size (its bytes are bounded by the framing cap).
DEFAULT_MAX_QUEUED_EVENTS = 1024

_READ_SIZE = 1 << 16
_DEFAULT: Any = object()
_SETTLED = (CommandOutcome.ACKNOWLEDGED, CommandOutcome.UNKNOWN, CommandOutcome.NOT_WRITTEN)


def _answer_written(command: Command) -> bool:
    """A dialog answer whose line the pipe took whole: its last outcome (rule 8 of _link.py)."""
    return command.type == UI_RESPONSE and command.outcome is CommandOutcome.WRITTEN


class OutcomeUnknownError(Exception):
    """The command's outcome is ``unknown`` (``command.unknown_reason``); the link is poisoned."""

    def __init__(self, command: Command) -> None:
        super().__init__(f"{command.type} {command.id}: outcome unknown ({command.unknown_reason})")
        self.command = command


class EngineLink:
    """An engine link over two pipe file descriptors (asyncio).

    Construct inside a running loop, with :meth:`from_fds` (or the constructor, same arguments) over a
    launcher's pipes, or :meth:`spawn` a process. The link takes ownership of both fds and closes them in
    :meth:`aclose`. Every :class:`~mosaic.pi_rpc.link.LinkEvent` comes out of :meth:`next_event` in the order it
    happened (engine records in read order, responses as ``OutcomeKnown``), so an observer sees one ordered
    stream. ``max_queued_events`` bounds that queue (module docstring, rule 1): the link reads the engine
    only while someone takes events, so a caller that only awaits :meth:`outcome` must also drain them.

    **Driving the core from outside.** Pass ``core=`` and the link moves bytes for a :class:`LinkCore`
    someone else owns (a controller's sans-io core), reading ``now`` from ``clock`` (give the link the
    clock the owner passes to the core: there is one clock). Who calls what:

    * the owner calls ``core.send(...)`` / ``core.send_prompt(...)`` / ``core.prompt_state(...)`` and reads
      outcomes on the :class:`~mosaic.pi_rpc.Command` values; after sending it calls :meth:`flush`, which
      starts the writes, re-arms the link's timer for the core's next deadline and wakes :meth:`outcome`
      callers;
    * the link alone calls the byte side: ``next_write``/``write_done``, ``feed``/``output_ended``;
    * ``tick`` is driven by the link's timer, under rule 2 of the module docstring, and its events come
      out of :meth:`next_event`. An owner that calls ``core.tick(now=)`` itself gets that call's events
      back (the link does not queue them), must not do so while :attr:`reading_paused` (a response may
      be unread), and calls :meth:`flush` after it so the link abandons a write the tick declared stalled.

    Events of the calls the link makes still come out of :meth:`next_event` in read order, whoever sent
    the commands. ``default_bound`` and ``max_record_bytes`` configure the core the link makes when
    ``core`` is ``None``; with ``core=`` they are a ``ValueError`` (configure the core you pass).
    """

    def __init__(self, write_fd: int, read_fd: int, *, core: LinkCore | None = None,
                 default_bound: float | None = _DEFAULT, max_record_bytes: int = _DEFAULT,
                 max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if core is None:
            core = LinkCore(default_bound=DEFAULT_BOUND if default_bound is _DEFAULT else default_bound,
                            max_record_bytes=DEFAULT_MAX_RECORD_BYTES if max_record_bytes is _DEFAULT
                            else max_record_bytes)
        elif default_bound is not _DEFAULT or max_record_bytes is not _DEFAULT:
            raise ValueError("default_bound and max_record_bytes configure the core the link makes; "
                             "configure the LinkCore you pass instead")
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
        self._waiters: dict[int, tuple[Command, asyncio.Future[Command]]] = {}
        self._pending_data: memoryview | None = None
        self._pending_cmd: Command | None = None
        self._unfed = bytearray()  # read, not yet fed to the core: only while reading is paused
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
    async def from_fds(cls, write_fd: int, read_fd: int, *, core: LinkCore | None = None,
                       default_bound: float | None = _DEFAULT, max_record_bytes: int = _DEFAULT,
                       max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                       clock: Callable[[], float] = time.monotonic) -> EngineLink:
        """A link over ``write_fd`` (the engine's stdin) and ``read_fd`` (its stdout); takes both fds.
        With ``core=``, the link drives that core (class docstring) and starts writing what it has queued;
        the core must have no write in progress. Raises ``ValueError`` for the argument errors above."""
        return cls(write_fd, read_fd, core=core, default_bound=default_bound, max_record_bytes=max_record_bytes,
                   max_queued_events=max_queued_events, clock=clock)

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: str,
                    core: LinkCore | None = None,
                    default_bound: float | None = _DEFAULT,
                    max_record_bytes: int = _DEFAULT,
                    max_queued_events: int = DEFAULT_MAX_QUEUED_EVENTS,
                    clock: Callable[[], float] = time.monotonic,
                    stderr: int | None = None) -> EngineLink:
        """Start ``argv`` with exactly ``env`` (nothing inherited) in ``cwd`` and link its stdin/stdout.

        The child gets its own session (``start_new_session``) so a signal to the caller's group does not
        reach it; ``stderr`` defaults to ``subprocess.DEVNULL``. Kill it with :meth:`terminate` /
        :meth:`kill` (by the recorded pid) and reap it with :meth:`wait`. A failed start closes all four
        pipe ends and raises what ``Popen`` raised.
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
        link = cls(in_w, out_r, core=core, default_bound=default_bound, max_record_bytes=max_record_bytes,
                   max_queued_events=max_queued_events, clock=clock)
        link.process = proc
        return link

    # -- sending -----------------------------------------------------------------------------------------

    def send(self, command: Mapping[str, Any], *, bound: float | None = _DEFAULT) -> Command:
        """Queue a command (not a prompt) and start writing it; return its Command at once. Raises what
        :meth:`LinkCore.send` raises."""
        cmd = self.core.send(command, now=self._clock(), **({} if bound is _DEFAULT else {"bound": bound}))
        self.flush()
        return cmd

    def send_prompt(self, message: str, *, bound: float | None = _DEFAULT) -> Command:
        """Queue a prompt; raises :class:`~mosaic.pi_rpc.link.PromptNotAcknowledged` while an earlier
        prompt has no response, :class:`~mosaic.pi_rpc.link.LinkPoisoned` when poisoned."""
        cmd = self.core.send_prompt(message, now=self._clock(), **({} if bound is _DEFAULT else {"bound": bound}))
        self.flush()
        return cmd

    def send_ui_response(self, dialog_id: str, answer: Mapping[str, Any], *,
                         bound: float | None = _DEFAULT) -> Command:
        """Queue the answer to a dialog (:meth:`LinkCore.send_ui_response`) and start writing it; return its
        Command at once. :meth:`outcome` returns it once ``written`` (Pi never answers it)."""
        cmd = self.core.send_ui_response(dialog_id, answer, now=self._clock(),
                                         **({} if bound is _DEFAULT else {"bound": bound}))
        self.flush()
        return cmd

    def flush(self) -> None:
        """Start writing whatever the core has queued, and bring the shell up to date with the core.

        Idempotent and safe at any time: with nothing queued, with a write in progress (it goes on), after
        the poison (nothing is written). It also abandons a write the core has already decided (an owner's
        own ``tick`` declared it ``write-stalled``), wakes :meth:`outcome` callers whose command is settled,
        and re-arms the timer for the core's next deadline; a deadline already passed is acted on now,
        under rule 2 of the module docstring. Never raises for the link's state.
        """
        events: list[LinkEvent] = []
        pending = self._pending_cmd
        if pending is not None and pending.outcome is not CommandOutcome.WRITING:
            events += self._abandon_write(pending)
        if events:
            self._dispatch(events)
        if self._pending_cmd is None:
            self._pump()
        self._wake_settled()
        deadline = self.core.next_deadline()
        if deadline is not None and deadline <= self._clock():
            self._on_timer()
        else:
            self._arm_timer()

    async def outcome(self, command: Command) -> Command:
        """Wait until ``command`` is acknowledged (a dialog answer: written); return it. Raises
        :class:`OutcomeUnknownError` when its outcome is unknown, :class:`~mosaic.pi_rpc.link.LinkPoisoned`
        when it was never written.

        Responses are read only while the event queue has room (module docstring, rule 1): someone must take
        events from :meth:`next_event`, or after ``max_queued_events`` of them this waits for a response the
        link does not read (and, by rule 2, no bound passes on it either)."""
        while True:
            if command.outcome is CommandOutcome.ACKNOWLEDGED or _answer_written(command):
                return command
            if command.outcome is CommandOutcome.UNKNOWN:
                raise OutcomeUnknownError(command)
            if command.outcome is CommandOutcome.NOT_WRITTEN:
                raise LinkPoisoned(self.core.poisoned or "not written")
            entry = self._waiters.get(command.seq)
            if entry is None or entry[1].done():
                entry = (command, self._loop.create_future())
                self._waiters[command.seq] = entry
            await asyncio.shield(entry[1])

    async def request(self, command: Mapping[str, Any], *, bound: float | None = _DEFAULT) -> Command:
        """:meth:`send` then :meth:`outcome`."""
        return await self.outcome(self.send(command, bound=bound))

    async def prompt(self, message: str, *, bound: float | None = _DEFAULT) -> Command:
        """:meth:`send_prompt` then :meth:`outcome` (the ack, or the error response)."""
        return await self.outcome(self.send_prompt(message, bound=bound))

    def prompt_state(self, prompt: Command, state: Command) -> PromptStateEvidence:
        """The core's evidence rule (see :meth:`LinkCore.prompt_state`)."""
        return self.core.prompt_state(prompt, state)

    # -- events ------------------------------------------------------------------------------------------

    @property
    def queued_events(self) -> int:
        """How many events wait for :meth:`next_event`."""
        return self._events.qsize()

    @property
    def reading_paused(self) -> bool:
        """True while the link does not read the engine's stdout because the event queue is full (rule 1)."""
        return self._paused

    async def next_event(self, timeout: float | None = None) -> LinkEvent:
        """The next link event in read order; ``TimeoutError`` after ``timeout`` seconds. Taking an event
        may resume reading (rule 1)."""
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
        """The spawned process's pid, or ``None`` for a link made over a launcher's fds."""
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
        """Wait until the link stopped reading for good: the engine's stdout reached EOF or became
        unreadable, or the link was closed. ``TimeoutError`` after ``timeout``."""
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

    # -- the write side ----------------------------------------------------------------------------------

    def _dispatch(self, events: list[LinkEvent]) -> None:
        for ev in events:
            self._events.put_nowait(ev)
        if events:
            self._wake_settled()
        self._arm_timer()

    def _wake_settled(self) -> None:
        # Only the commands someone awaits: the link keeps no history (a NOT_WRITTEN command is settled by
        # the poison without an event of its own).
        for seq, (cmd, fut) in list(self._waiters.items()):
            if cmd.outcome in _SETTLED or _answer_written(cmd):
                del self._waiters[seq]
                if not fut.done():
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
            if cmd.outcome is CommandOutcome.UNKNOWN:
                # The bound passed mid-write (write-stalled): stop, the core has decided.
                break
            try:
                n = os.write(self._wfd, data)
            except BlockingIOError:
                # The pipe is full: keep what is left (never the whole line again: a retry from byte 0
                # would put a repeated prefix, with no line end, into the engine's stdin) and wait.
                self._pending_data = data
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

    def _abandon_write(self, cmd: Command) -> list[LinkEvent]:
        """The core decided the write in progress (write-stalled): stop writing it and report its end."""
        if self._wfd is not None:
            self._loop.remove_writer(self._wfd)
        self._pending_cmd = None
        self._pending_data = None
        return self.core.write_done(cmd, accepted=cmd.accepted, error=None, now=self._clock())

    # -- the read side (rules 1 and 3) -------------------------------------------------------------------

    def _on_readable(self) -> None:
        if self._rfd is None or self._paused:
            return
        self._read_chunk()
        if self._tick_owed and not self._paused:
            self._settle_deadlines()

    def _read_chunk(self) -> bool:
        """One read from the engine's stdout, fed as far as the queue allows. True when there was nothing to
        read (the pipe is empty) or reading ended; False when bytes were read."""
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
        """Hand the bytes read to the core, never more records than the queue has room for (rule 1)."""
        buf = self._unfed
        while buf and self._rfd is not None:
            room = self.max_queued_events - self._events.qsize()
            if room <= 0:
                return
            if buf.count(b"\n") <= room:
                end = len(buf)  # every record fits (a tail without LF waits in the core's decoder)
            else:
                end = 0
                for _ in range(room):
                    end = buf.index(b"\n", end) + 1
            chunk = bytes(buf[:end])
            del buf[:end]
            self._dispatch(self.core.feed(chunk, now=self._clock()))
            if self.core.output_closed:
                self._stop_reading()  # rule 3: the core takes nothing more

    def _set_reading(self) -> None:
        """Remove the reader when the queue is full or bytes wait; add it back at the low-water mark."""
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
            return  # the owed tick runs once the output has been read
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
        """Tick the core once everything the engine wrote has been read: read until the pipe is empty;
        while reading is paused, wait (the consumer's next_event resumes it and calls back here)."""
        if not self._tick_owed:
            return
        while self._rfd is not None:
            if self._paused:
                return
            if self._read_chunk():
                break
        self._tick_owed = False
        events = self.core.tick(now=self._clock())
        pending = self._pending_cmd
        if pending is not None and pending.outcome is CommandOutcome.UNKNOWN:
            # The stalled write is abandoned: report it so the core stops waiting on it.
            events += self._abandon_write(pending)
        self._dispatch(events)
