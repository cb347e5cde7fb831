"""Test helpers: a private tmux server running the terminal (`TmuxTerminal`) and a tap on the engine
link that records every byte the controller wrote to the engine's stdin (`EngineTap`).

`TmuxTerminal` drives tmux by its own command line (no library): a server of its own on a unique socket
name (``tmux -L mosaic-term-<hex> -f /dev/null``), one session of a fixed size running
``python -m mosaic.mediated_terminal --socket PATH`` with this interpreter, on a pty of its own behind a
relay (`_relay`), so that `chunk` can write raw byte chunks to the terminal's pty, each one write(2), as a
keyboard burst or a paste arrives; tmux's send-keys and paste-buffer pass through the relay unchanged.
Every wait polls ``capture-pane -p`` and is bounded (a timeout fails with the screen in the message);
nothing sleeps as an assertion. `aclose` kills exactly that server, then every process it recorded as the
pane's (and their descendants), by pid, and removes the server's socket file by the path the server
reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shlex
import shutil
import signal
import struct
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

__all__ = ["WAIT", "EngineTap", "TmuxError", "TmuxTerminal", "tmux_terminal"]

WAIT = 30.0
POLL = 0.05
SETTLE_CAPTURES = 4  # extra captures wait_for takes until two agree: a redraw tmux is still taking in


class TmuxError(RuntimeError):
    """tmux is missing or one of its commands failed."""


class EngineTap:
    """Every byte the engine link wrote to the engine's stdin, in order: it wraps `write_done` of the
    controller's link core (`rig.core.link`), which the link's shell calls after each write with the count
    of bytes the pipe accepted."""

    def __init__(self, link_core: Any) -> None:
        self.data = bytearray()
        original = link_core.write_done

        def write_done(command: Any, *, accepted: int, error: BaseException | None, now: float) -> Any:
            self.data += bytes(command.data[:accepted])
            return original(command, accepted=accepted, error=error, now=now)

        link_core.write_done = write_done

    def mark(self) -> int:
        """The current length: bytes written after it are `since(mark)`."""
        return len(self.data)

    def since(self, mark: int) -> bytes:
        return bytes(self.data[mark:])

    @staticmethod
    def records(data: bytes) -> list[dict[str, Any]]:
        """The whole LF-ended records in `data`, decoded."""
        *lines, _partial = data.split(b"\n")
        return [json.loads(line) for line in lines if line]

    def prompts(self, mark: int = 0) -> list[bytes]:
        """The raw lines of every prompt command written since `mark`."""
        out = []
        for line in self.since(mark).split(b"\n"):
            if line and json.loads(line).get("type") == "prompt":
                out.append(line + b"\n")
        return out


class TmuxTerminal:
    """The terminal running in a private tmux server (module docstring)."""

    def __init__(self, socket_path: str, *, width: int = 120, height: int = 40,
                 env: dict[str, str] | None = None) -> None:
        if shutil.which("tmux") is None:
            raise TmuxError("tmux is not installed (CI installs it: apt-get install tmux)")
        self.name = f"mosaic-term-{secrets.token_hex(6)}"
        self.socket_path = socket_path
        self.width, self.height = width, height
        self.env = dict(env or {})
        self.dir = tempfile.mkdtemp(prefix="mosaic-tmux-")
        self.stderr = Path(self.dir) / "stderr"
        self.log = Path(self.dir) / "log"
        self.chunks = str(Path(self.dir) / "chunks")  # the relay's socket: raw chunks for the terminal's pty
        self.pids: list[int] = []
        self._born: dict[int, str | None] = {}  # pid -> its start time when recorded (a reused pid differs)
        self.server_socket: str | None = None  # the tmux server's socket file, removed by this exact path
        self.started = False
        self._chunker: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def tmux(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec("tmux", "-L", self.name, "-f", "/dev/null", *args,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise TmuxError(f"tmux {' '.join(args)} failed ({proc.returncode}): {err.decode(errors='replace')}")
        return out.decode("utf-8", errors="replace")

    def command(self) -> list[str]:
        """The terminal's command line (this interpreter, the socket, the log file)."""
        return [sys.executable, "-m", "mosaic.mediated_terminal", "--socket", self.socket_path, "--log",
                str(self.log)]

    async def start(self, argv: list[str] | None = None) -> None:
        """Start the server and its one pane: the relay running `argv` (default: the terminal)."""
        relay = [sys.executable, "-m", "mosaic.mediated_terminal._relay", self.chunks, "--"]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        command = ((f"env {env} " if env else "") + shlex.join(relay + (argv or self.command()))
                   + f" 2>{shlex.quote(str(self.stderr))}; echo '[terminal exited' $? ']'; sleep 3600")
        self.started = True
        await self.tmux("new-session", "-d", "-s", "t", "-x", str(self.width), "-y", str(self.height), command)
        found = (await self.tmux("display-message", "-p", "-t", "t", "#{pane_pid} #{socket_path}")).strip()
        pid, _, self.server_socket = found.partition(" ")
        self._record([int(pid)])

    def _record(self, pids: list[int]) -> None:
        for pid in pids:
            if pid not in self.pids:
                self.pids.append(pid)
                self._born[pid] = _start_time(pid)

    def processes(self) -> list[int]:
        """Every process of the pane now (the shell, the relay, the terminal), recorded for `aclose`."""
        self._record(self._descendants())
        return list(self.pids)

    async def wait_gone_processes(self, pids: list[int], timeout: float = WAIT) -> None:
        """Wait until every one of `pids` (recorded by `processes`) has ended; TimeoutError after `timeout`."""
        deadline = time.monotonic() + timeout
        while any(self._alive(p) for p in pids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still running after {timeout} s: {[p for p in pids if self._alive(p)]}")
            await asyncio.sleep(POLL)

    def _descendants(self) -> list[int]:
        found: list[int] = []
        todo = list(self.pids)
        while todo:
            pid = todo.pop()
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    for child in Path(f"/proc/{pid}/task/{task}/children").read_text().split():
                        if int(child) not in found and int(child) not in self.pids:
                            found.append(int(child))
                            todo.append(int(child))
        return found

    async def aclose(self) -> None:
        """Kill exactly this server; then every process recorded as the pane's (and its children), by pid."""
        if self.started:
            self._record(self._descendants())
            if self._chunker is not None:
                self._chunker[1].close()
            with contextlib.suppress(TmuxError):
                await self.tmux("kill-server")
            deadline = time.monotonic() + 5.0
            while any(self._alive(p) for p in self.pids) and time.monotonic() < deadline:
                await asyncio.sleep(POLL)
            for pid in self.pids:
                if self._alive(pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if self.server_socket and Path(self.server_socket).name == self.name:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.server_socket)  # tmux 3.3 leaves it behind after kill-server
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- the screen -----------------------------------------------------------------------------------

    async def screen(self) -> list[str]:
        """The visible screen, one string per row (trailing blanks stripped)."""
        text = await self.tmux("capture-pane", "-p", "-t", "t")
        return [line.rstrip() for line in text.split("\n")][: self.height]

    async def styled_screen(self) -> list[str]:
        """The visible screen with tmux's SGR escape sequences for each cell's style (capture-pane -e)."""
        text = await self.tmux("capture-pane", "-p", "-e", "-t", "t")
        return text.split("\n")[: self.height]

    async def wait_for(self, predicate: Callable[[list[str]], bool], what: str, timeout: float = WAIT) -> list[str]:
        """Poll the screen until `predicate(rows)`; TimeoutError with the screen after `timeout` s.

        The screen returned is a whole frame: tmux may be captured while it is still taking in a redraw
        (the status row new, the rows below it not yet), so once the predicate holds the screen is captured
        again, until two captures in a row agree (at most a few times: a spinner may never stand still),
        and the last capture for which the predicate holds is returned."""
        deadline = time.monotonic() + timeout
        while True:
            rows = await self.screen()
            if predicate(rows):
                for _ in range(SETTLE_CAPTURES):
                    again = await self.screen()
                    if again == rows or not predicate(again):
                        break
                    rows = again
                return rows
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}; the screen:\n" + "\n".join(rows)
                                     + "\n--- stderr:\n" + self.read_stderr())
            await asyncio.sleep(POLL)

    async def wait_text(self, text: str, timeout: float = WAIT) -> list[str]:
        return await self.wait_for(lambda rows: any(text in r for r in rows), repr(text), timeout)

    async def wait_gone(self, text: str, timeout: float = WAIT) -> list[str]:
        return await self.wait_for(lambda rows: not any(text in r for r in rows), f"{text!r} to go", timeout)

    def read_stderr(self) -> str:
        try:
            return self.stderr.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    async def title(self) -> str:
        return (await self.tmux("display-message", "-p", "-t", "t", "#{pane_title}")).rstrip("\n")

    # -- input ----------------------------------------------------------------------------------------

    async def keys(self, *keys: str) -> None:
        """Send tmux key names (``C-t``, ``Enter``, ``PPage``)."""
        await self.tmux("send-keys", "-t", "t", *keys)

    async def type(self, text: str) -> None:
        """Type `text` literally."""
        await self.tmux("send-keys", "-t", "t", "-l", text)

    async def chunk(self, data: bytes) -> None:
        """Write `data` to the terminal's pty as one chunk (one write(2) by the relay); return once written."""
        if self._chunker is None:
            deadline = time.monotonic() + WAIT
            while True:
                try:
                    self._chunker = await asyncio.open_unix_connection(self.chunks)
                    break
                except (FileNotFoundError, ConnectionRefusedError):
                    if time.monotonic() > deadline:
                        raise TimeoutError("the relay never listened for chunks") from None
                    await asyncio.sleep(POLL)
        reader, writer = self._chunker
        writer.write(struct.pack(">I", len(data)) + data)
        await writer.drain()
        ack = await asyncio.wait_for(reader.readexactly(1), WAIT)
        if ack != b"\1":
            raise AssertionError(f"the relay wrote {data!r} in part")

    async def paste(self, text: str) -> None:
        """Paste `text` as a terminal paste (bracketed when the application asked for it)."""
        await self.tmux("set-buffer", "-b", "mosaic", "--", text)
        await self.tmux("paste-buffer", "-p", "-d", "-b", "mosaic", "-t", "t")


    def _alive(self, pid: int) -> bool:
        """The recorded process `pid` still runs (not a zombie, and not another process given its pid)."""
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            # A zombie child of the tmux server is gone for our purposes once the server reaped it.
            return fields[0] != "Z" and fields[19] == self._born.get(pid)
        return False


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (the start time in clock ticks), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


@contextlib.asynccontextmanager
async def tmux_terminal(socket_path: str, **options: Any) -> AsyncIterator[TmuxTerminal]:
    """A started `TmuxTerminal`, closed (its server killed, its processes gone) on exit."""
    term = TmuxTerminal(socket_path, **options)
    try:
        await term.start()
        yield term
    finally:
        await term.aclose()


def __dir__() -> list[str]:
    return sorted(__all__)
