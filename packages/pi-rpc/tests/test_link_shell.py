"""The asyncio link shell over real pipes and real processes: partial write, EPIPE, silence, EOF; a core
driven from outside with flush(); backpressure (a bounded event queue) and the deadline rule that comes with
it; reading stops once the output is unreadable."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mosaic.pi_rpc import Command, EngineLink, LinkCore
from mosaic.pi_rpc.framing import MAX_RECORD_DEPTH, UNREADABLE_OUTPUT, encode_record
from mosaic.pi_rpc.link import (
    DEFAULT_MAX_QUEUED_EVENTS,
    CommandOutcome,
    CommandWritten,
    EngineEvent,
    LinkEvent,
    LinkPoisoned,
    OutcomeKnown,
    OutcomeUnknownError,
    Poisoned,
    ProtocolViolation,
)

# A toy engine: answers get_state, answers "echo" with the byte length and SHA-256 of the whole line it
# read, ignores "hang", emits an event on "emit", exits on "exit",
# closes its stdin on "close-stdin", and never reads again after "stop-reading".
RESPONDER = textwrap.dedent(
    r"""
    import json, os, sys
    out = sys.stdout.buffer
    def w(obj):
        out.write(json.dumps(obj, ensure_ascii=False).encode() + b"\n"); out.flush()
    w({"type": "ready"})
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd = json.loads(line)
            t = cmd.get("type")
            if t == "get_state":
                w({"id": cmd["id"], "type": "response", "command": t, "success": True,
                   "data": {"isStreaming": False, "note": "a\u2028b"}})
            elif t == "emit":
                w({"type": "agent_start"})
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
            elif t == "echo":
                import hashlib
                w({"id": cmd["id"], "type": "response", "command": t, "success": True,
                   "data": {"lineBytes": len(line), "sha256": hashlib.sha256(line).hexdigest()}})
            elif t == "exit":
                sys.exit(0)
            elif t == "close-stdin":
                os.close(0)
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
                import time
                while True:
                    time.sleep(1)
            elif t == "stop-reading":
                w({"id": cmd["id"], "type": "response", "command": t, "success": True})
                import time
                while True:
                    time.sleep(1)
            # "hang": no answer
    """
)

BOUND = 20.0  # generous: only a broken link reaches it


async def next_read(link: EngineLink) -> LinkEvent:
    """The next event of the read side: `CommandWritten` (the write side's news that a line went into the
    pipe whole) is skipped here, where the tests look at what the engine said."""
    while True:
        event = await link.next_event(BOUND)
        if not isinstance(event, CommandWritten):
            return event


@pytest.fixture
def responder(tmp_path: Path) -> list[str]:
    script = tmp_path / "responder.py"
    script.write_text(RESPONDER)
    return [sys.executable, str(script)]


async def _start(argv: list[str], tmp_path: Path, **kw: object) -> EngineLink:
    link = await EngineLink.spawn(argv, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), **kw)  # type: ignore[arg-type]
    ready = await next_read(link)
    assert isinstance(ready, EngineEvent) and ready.type == "ready"
    return link


def test_request_roundtrip_and_events_in_read_order(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            s = await link.request({"type": "get_state"})
            assert s.outcome is CommandOutcome.ACKNOWLEDGED
            assert s.response is not None and s.response["data"]["note"] == "a\u2028b"
            assert isinstance(await next_read(link), OutcomeKnown)
            e = link.send({"type": "emit"})
            first = await next_read(link)
            assert isinstance(first, EngineEvent) and first.type == "agent_start"
            assert await next_read(link) == OutcomeKnown(e)
            link.close_stdin()
            assert await link.wait(BOUND) == 0
            await link.wait_output_end(BOUND)
        finally:
            await link.aclose()

    asyncio.run(main())


def test_epipe_makes_outcome_unknown_and_poisons(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            await link.request({"type": "close-stdin"})
            p = link.send_prompt("hello")
            with pytest.raises(OutcomeUnknownError) as info:
                await link.outcome(p)
            assert info.value.command.unknown_reason == "write-error"
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_partial_write_then_death_is_unknown_with_bytes_accepted(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            await link.request({"type": "stop-reading"})
            big = link.send({"type": "get_state", "pad": "x" * (4 << 20)}, bound=None)
            # The pipe takes what fits (64 KiB on Linux) and the shell waits for room that never comes.
            for _ in range(1000):
                if big.accepted > 0:
                    break
                await asyncio.sleep(0)
            assert 0 < big.accepted < len(big.data)
            assert big.outcome is CommandOutcome.WRITING
            link.kill()
            with pytest.raises(OutcomeUnknownError):
                await asyncio.wait_for(link.outcome(big), BOUND)
            assert big.unknown_reason in ("write-error", "engine-output-ended")
            assert 0 < big.accepted < len(big.data)
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_no_response_within_bound_is_unknown(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            h = link.send({"type": "hang"}, bound=0.2)
            with pytest.raises(OutcomeUnknownError) as info:
                await asyncio.wait_for(link.outcome(h), BOUND)
            assert info.value.command.unknown_reason == "no-response"
            with pytest.raises(LinkPoisoned):
                link.send({"type": "get_state"})
        finally:
            await link.aclose()

    asyncio.run(main())


def test_engine_exit_makes_in_flight_unknown(responder: list[str], tmp_path: Path) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            h = link.send({"type": "hang"}, bound=None)
            await link.request({"type": "get_state"})
            link.send({"type": "exit"}, bound=None)
            with pytest.raises(OutcomeUnknownError) as info:
                await asyncio.wait_for(link.outcome(h), BOUND)
            assert info.value.command.unknown_reason == "engine-output-ended"
            assert await link.wait(BOUND) == 0
        finally:
            await link.aclose()

    asyncio.run(main())


def test_spawn_passes_exactly_the_given_environment(tmp_path: Path) -> None:
    script = tmp_path / "env.py"
    script.write_text("import json, os\nprint(json.dumps({'type': 'env', 'env': dict(os.environ)}), flush=True)\n")

    async def main() -> None:
        link = await EngineLink.spawn([sys.executable, str(script)], env={"ONLY": "this"}, cwd=str(tmp_path))
        try:
            ev = await next_read(link)
            assert isinstance(ev, EngineEvent)
            env = dict(ev.record["env"])
            env.pop("LC_CTYPE", None)  # Python's C-locale coercion may add it in the child
            assert env == {"ONLY": "this"}
            assert await link.wait(BOUND) == 0
        finally:
            await link.aclose()

    os.environ.setdefault("MOSAIC_TEST_MARKER", "1")  # must not leak into the child
    asyncio.run(main())


# --------------------------------------------------------------------------------------------------------
# Driven from outside: a core someone else owns, flush()
# --------------------------------------------------------------------------------------------------------


def _drain_fd(fd: int) -> bytes:
    """Every byte readable from a non-blocking fd right now."""
    out = b""
    while True:
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return out
        if not chunk:
            return out
        out += chunk


def _response(cmd: Command) -> bytes:
    return encode_record({"id": cmd.id, "type": "response", "command": cmd.type, "success": True})


class _Pipes:
    """The engine's two pipes, with the test as the engine: it reads what the link writes (``in_r``) and
    writes what the link reads (``out_w``). The link takes ``in_w`` and ``out_r``; close() closes the rest."""

    def __init__(self) -> None:
        self.in_r, self.in_w = os.pipe()
        self.out_r, self.out_w = os.pipe()
        os.set_blocking(self.in_r, False)

    def close(self) -> None:
        for fd in (self.in_r, self.out_w):
            os.close(fd)


def test_a_core_driven_directly_is_written_by_flush_exactly() -> None:
    async def main() -> None:
        pipes = _Pipes()
        core = LinkCore()
        link = await EngineLink.from_fds(pipes.in_w, pipes.out_r, core=core)
        try:
            link.flush()  # nothing queued: nothing written, nothing raised
            assert _drain_fd(pipes.in_r) == b""
            s = core.send({"type": "get_state"}, now=time.monotonic())
            p = core.send_prompt("hello", now=time.monotonic())
            assert _drain_fd(pipes.in_r) == b""  # the owner queued; no byte moves before flush()
            link.flush()
            link.flush()  # idempotent
            assert _drain_fd(pipes.in_r) == s.data + p.data
            assert s.outcome is p.outcome is CommandOutcome.WRITTEN
            os.write(pipes.out_w, encode_record({"type": "agent_start"}) + _response(p) + _response(s))
            events = [await next_read(link) for _ in range(3)]
            assert events == [EngineEvent(0, {"type": "agent_start"}), OutcomeKnown(p), OutcomeKnown(s)]
            assert await link.outcome(s) is s and core.in_flight == ()
            # Poisoned by the engine: flush() stays safe and writes nothing, sending refuses.
            os.write(pipes.out_w, encode_record({"type": "response", "command": "parse", "success": False}))
            assert isinstance(await next_read(link), ProtocolViolation)
            assert isinstance(await next_read(link), Poisoned)
            link.flush()
            assert _drain_fd(pipes.in_r) == b""
            with pytest.raises(LinkPoisoned):
                core.send({"type": "get_state"}, now=time.monotonic())
        finally:
            await link.aclose()
            pipes.close()

    asyncio.run(main())


def test_a_link_over_a_core_with_queued_commands_starts_writing_them() -> None:
    async def main() -> None:
        pipes = _Pipes()
        core = LinkCore()
        a = core.send({"type": "get_state"}, now=time.monotonic())
        with pytest.raises(ValueError):
            EngineLink(pipes.in_w, pipes.out_r, core=core, default_bound=1.0)  # configure the core instead
        link = EngineLink(pipes.in_w, pipes.out_r, core=core)
        try:
            assert _drain_fd(pipes.in_r) == a.data and a.outcome is CommandOutcome.WRITTEN
        finally:
            await link.aclose()
            pipes.close()

    asyncio.run(main())


# --------------------------------------------------------------------------------------------------------
# A bound is acted on only after the engine's output has been read (rule 2 of _shell.py)
# --------------------------------------------------------------------------------------------------------


def test_response_already_in_the_pipe_when_the_bound_passes_is_acknowledged() -> None:
    async def main() -> None:
        pipes = _Pipes()
        clock = [0.0]
        link = await EngineLink.from_fds(pipes.in_w, pipes.out_r, clock=lambda: clock[0])
        try:
            x = link.send({"type": "get_state"}, bound=10.0)
            assert _drain_fd(pipes.in_r) == x.data
            os.write(pipes.out_w, _response(x))  # answered in time; the link has not read it yet
            clock[0] = 100.0  # the bound has passed
            link.flush()  # acts on the passed deadline now: it reads the pipe first
            assert x.outcome is CommandOutcome.ACKNOWLEDGED
            assert await next_read(link) == OutcomeKnown(x)
        finally:
            await link.aclose()
            pipes.close()

    asyncio.run(main())


# An engine that answers "flood" with n event lines, then the response (none for "flood-silent").
FLOODER = textwrap.dedent(
    r"""
    import json, os, sys
    def line(obj):
        return (json.dumps(obj) + "\n").encode()
    buf = b""
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            raw, buf = buf.split(b"\n", 1)
            cmd = json.loads(raw)
            pad = "x" * cmd.get("pad", 0)
            out = b"".join(line({"type": "tick", "seq": i, "pad": pad}) for i in range(cmd["n"]))
            if cmd["type"] == "flood":
                out += line({"id": cmd["id"], "type": "response", "command": "flood", "success": True})
            view = memoryview(out)
            while view:  # one blocking write loop: the pipe takes what the link reads
                try:
                    view = view[os.write(1, view):]
                except BrokenPipeError:
                    sys.exit(0)
    """
)


@pytest.fixture
def flooder(tmp_path: Path) -> list[str]:
    script = tmp_path / "flooder.py"
    script.write_text(FLOODER)
    return [sys.executable, str(script)]


def test_slow_consumer_pending_command_response_in_the_pipe_is_acknowledged(flooder: list[str],
                                                                              tmp_path: Path) -> None:
    """Backpressure must not turn into "no-response": the bound passes while the link is not reading
    (its queue is full) and the response sits behind 3000 events; it is read, and acknowledged."""
    async def main() -> None:
        clock = [0.0]
        link = await EngineLink.spawn(flooder, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path),
                                      max_queued_events=8, clock=lambda: clock[0])
        try:
            x = link.send({"type": "flood", "n": 3000, "pad": 40}, bound=10.0)
            first = await next_read(link)  # the engine is writing; the first read filled the queue
            assert isinstance(first, EngineEvent) and first.record["seq"] == 0
            assert link.reading_paused
            clock[0] = 100.0  # the bound passes while the link chooses not to read
            link.flush()  # act on it now: the rule defers it
            assert x.outcome is CommandOutcome.WRITTEN
            seen: list[LinkEvent] = [first]
            while not isinstance(seen[-1], OutcomeKnown):
                assert link.queued_events <= 8
                seen.append(await next_read(link))
            assert seen[-1] == OutcomeKnown(x) and x.outcome is CommandOutcome.ACKNOWLEDGED
            ticks = seen[:-1]
            assert all(isinstance(e, EngineEvent) for e in ticks)
            assert [e.record["seq"] for e in ticks if isinstance(e, EngineEvent)] == list(range(3000))
            assert link.core.poisoned is None
        finally:
            await link.aclose()

    asyncio.run(main())


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for row in f:
            if row.startswith("VmRSS:"):
                return int(row.split()[1])
    raise AssertionError("no VmRSS in /proc/self/status")


def test_flooding_engine_with_a_slow_consumer_bounded_queue_every_event_in_order(flooder: list[str],
                                                                                 tmp_path: Path) -> None:
    n = 100_000

    async def main() -> tuple[int, int]:
        link = await EngineLink.spawn(flooder, env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path))
        try:
            assert link.max_queued_events == DEFAULT_MAX_QUEUED_EVENTS == 1024
            rss_before = _rss_kib()
            link.send({"type": "flood-silent", "n": n, "pad": 60}, bound=None)
            peak = 0
            expect = 0
            while expect < n:
                peak = max(peak, link.queued_events)
                ev = await next_read(link)
                assert isinstance(ev, EngineEvent) and ev.record["seq"] == expect  # none lost, none reordered
                expect += 1
                if expect % 64 == 0:
                    await asyncio.sleep(0)  # a slow consumer: the engine's reads get turns in between
            growth = _rss_kib() - rss_before
            assert link.core.poisoned is None
            return peak, growth
        finally:
            await link.aclose()

    peak, growth_kib = asyncio.run(main())
    assert peak <= 1024
    # Retaining the 100,000 events (about 7 MB of lines, several times that as objects) would show here.
    assert growth_kib < 16 * 1024, growth_kib


# --------------------------------------------------------------------------------------------------------
# Reading stops when the output becomes unreadable (rule 3 of _shell.py)
# --------------------------------------------------------------------------------------------------------

GARBAGE = textwrap.dedent(
    r"""
    import os, sys
    first = bytes.fromhex(sys.argv[1])
    os.write(1, b'{"type":"ready"}\n' + first)
    junk = b"garbage " * 8192
    while True:  # keeps writing after the framing error until the link closes its end
        try:
            os.write(1, junk)
        except BrokenPipeError:
            sys.exit(0)
    """
)


def _nested(levels: int) -> bytes:
    """A response-shaped record nesting `levels` containers (the record itself is the first)."""
    return b'{"type":"response","data":' + b'[' * (levels - 1) + b']' * (levels - 1) + b"}\n"


# Every kind of engine line the decoder cannot take (framing.UNREADABLE_OUTPUT), through the real link: the
# command waiting for its answer has no bound, so only the poison can end its wait (never a timeout).
UNDECODABLE = [
    ("not-utf-8", b"\xff\xfe not UTF-8\n", None),
    ("not-an-object", b"[1, 2]\n", None),
    ("record-too-large", b"x" * 4096, 1024),
    ("not-json", b'{"type":"response","id":"m1"} trailing\n', None),
    ("not-json", b'{"type":"response",\n', None),
    ("too-deep", _nested(3000), None),  # the decoder's RecursionError (Pi's get_tree of a long chain)
    ("too-deep", _nested(MAX_RECORD_DEPTH + 1), None),  # decodable, one level past the cap
    ("number-out-of-range", b'{"type":"response","data":1e400}\n', None),
    ("number-out-of-range", b'{"type":"response","data":-Infinity}\n', None),
    ("number-out-of-range", b'{"type":"response","data":NaN}\n', None),
    ("number-out-of-range", b'{"type":"response","data":' + b"7" * 5000 + b"}\n", None),  # past the digit limit
    ("number-out-of-range", b'{"type":"response","data":' + b"7" * 400 + b"}\n", None),  # past a double
]


@pytest.mark.parametrize(("kind", "first", "cap"), UNDECODABLE,
                         ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(UNDECODABLE)])
def test_garbage_after_unreadable_output_logs_nothing_and_poisons_once(tmp_path: Path, kind: str, first: bytes,
                                                                       cap: int | None) -> None:
    """Issue 27: any line the decoder cannot take poisons the link at once with its named kind; no
    exception escapes the read callback (the loop's exception handler sees nothing), no bound is waited."""
    script = tmp_path / "garbage.py"
    script.write_text(GARBAGE)

    async def main() -> list[dict[str, object]]:
        loop = asyncio.get_running_loop()
        errors: list[dict[str, object]] = []
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        kw = {} if cap is None else {"max_record_bytes": cap}
        link = await EngineLink.spawn([sys.executable, str(script), first.hex()], env={"PATH": "/usr/bin:/bin"},
                                      cwd=str(tmp_path), **kw)  # type: ignore[arg-type]
        try:
            pending = link.send({"type": "get_state"}, bound=None)
            events = [await next_read(link)]
            while not isinstance(events[-1], Poisoned):
                events.append(await next_read(link))
            await link.wait_output_end(BOUND)  # the reader is gone and the read end closed
            assert await link.wait(BOUND) == 0  # so the engine's next write failed with EPIPE
            while link.queued_events:
                events.append(await next_read(link))
            assert sum(isinstance(e, Poisoned) for e in events) == 1
            assert pending.outcome is CommandOutcome.UNKNOWN and pending.unknown_reason == "output-unreadable"
            (poisoned,) = [e for e in events if isinstance(e, Poisoned)]
            assert link.core.unreadable == kind and poisoned.reason.startswith(f"engine output unreadable ({kind})")
            assert kind in UNREADABLE_OUTPUT
        finally:
            await link.aclose()
        return errors

    assert asyncio.run(main()) == []


# --------------------------------------------------------------------------------------------------------
# Lines longer than the pipe: every byte once, in order (a retry from byte 0 once wrote ~52 million bytes
# for a 70,041-byte prompt line, and Pi never saw a line end)
# --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [65_535, 65_536, 65_537, 70_041, 200_000, 262_144 * 3])
def test_a_line_longer_than_the_pipe_reaches_the_engine_whole_and_once(responder: list[str], tmp_path: Path,
                                                                       size: int) -> None:
    async def main() -> None:
        link = await _start(responder, tmp_path)
        try:
            pad = "x" * max(0, size - len(encode_record({"type": "echo", "id": "c1", "pad": ""})) + 1)
            cmd = link.send({"type": "echo", "pad": pad})
            line = cmd.data[:-1]  # without its LF
            done = await asyncio.wait_for(link.outcome(cmd), BOUND)
            assert done.response is not None
            assert done.response["data"] == {"lineBytes": len(line),
                                             "sha256": __import__("hashlib").sha256(line).hexdigest()}
            assert cmd.accepted == len(cmd.data)  # counted once, never re-counted from byte 0
            after = await link.request({"type": "get_state"})  # the next line is a line of its own
            assert after.succeeded
        finally:
            await link.aclose()

    asyncio.run(main())


def test_a_pipe_that_takes_a_few_bytes_at_a_time_gets_each_byte_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer alone: the engine's stdin accepts at most 7 bytes per write and is "full" after every
    second write (BlockingIOError), so a 70,041-byte line needs ~10,000 writes and ~10,000 waits for room.
    What reaches the pipe is exactly the line, once, and the core is told the whole line was accepted.
    (A writer that lost its place would never finish: past twice the line's bytes the pipe takes nothing
    more and the test compares what it got.)"""
    real_write = os.write

    async def main() -> None:
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        calls = {"n": 0, "bytes": 0, "cap": 1 << 62}
        done = asyncio.Event()

        def stingy_write(fd: int, data: object) -> int:
            if fd != in_w:
                return real_write(fd, data)  # type: ignore[arg-type]
            calls["n"] += 1
            if calls["n"] % 2 == 0 or calls["bytes"] >= calls["cap"]:
                if calls["bytes"] >= calls["cap"]:
                    done.set()
                raise BlockingIOError(11, "pipe full")
            n = real_write(fd, bytes(memoryview(data)[:7]))  # type: ignore[arg-type]
            calls["bytes"] += n
            return n

        monkeypatch.setattr(os, "write", stingy_write)
        received = bytearray()

        def drain() -> None:
            received.extend(os.read(in_r, 1 << 16))
            if received.endswith(b"\n"):
                done.set()

        loop = asyncio.get_running_loop()
        os.set_blocking(in_r, False)
        loop.add_reader(in_r, drain)
        link = await EngineLink.from_fds(in_w, out_r)
        try:
            cmd = link.send({"type": "echo", "pad": "y" * 70_000})
            calls["cap"] = 2 * len(cmd.data)
            await asyncio.wait_for(done.wait(), BOUND)
            for _ in range(100):  # what the last writes put in the pipe
                await asyncio.sleep(0)
            assert bytes(received) == cmd.data  # each byte once, in order, one LF at the end
            assert cmd.accepted == len(cmd.data)
            assert cmd.outcome is CommandOutcome.WRITTEN
            assert calls["n"] > 10_000  # it really was written a few bytes at a time
        finally:
            loop.remove_reader(in_r)
            monkeypatch.setattr(os, "write", real_write)
            await link.aclose()
            os.close(in_r)
            os.close(out_w)

    asyncio.run(main())
