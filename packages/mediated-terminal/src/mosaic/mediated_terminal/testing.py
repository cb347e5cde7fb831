"""Test helpers: a private tmux server running the terminal (`TmuxTerminal`) and a tap on the engine
link that records every byte the controller wrote to the engine's stdin (`EngineTap`).

`TmuxTerminal` drives tmux by its own command line (no library): a server of its own on a unique socket
name (``tmux -L mosaic-term-<hex> -f /dev/null``), one session of a fixed size running
``python -m mosaic.mediated_terminal --socket PATH`` with this interpreter. Every wait polls
``capture-pane -p`` and is bounded (a timeout fails with the screen in the message); nothing sleeps as an
assertion. `aclose` kills exactly that server, then every process it recorded as the pane's, by pid, and
removes the server's socket file by the path the server reported.
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
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

__all__ = ["WAIT", "EngineTap", "TmuxError", "TmuxTerminal", "tmux_terminal"]

WAIT = 30.0
POLL = 0.05


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

    def __init__(self, socket_path: str, *, width: int = 120, height: int = 40) -> None:
        if shutil.which("tmux") is None:
            raise TmuxError("tmux is not installed (CI installs it: apt-get install tmux)")
        self.name = f"mosaic-term-{secrets.token_hex(6)}"
        self.socket_path = socket_path
        self.width, self.height = width, height
        self.dir = tempfile.mkdtemp(prefix="mosaic-tmux-")
        self.stderr = Path(self.dir) / "stderr"
        self.log = Path(self.dir) / "log"
        self.pids: list[int] = []
        self.server_socket: str | None = None  # the tmux server's socket file, removed by this exact path
        self.started = False

    async def tmux(self, *args: str) -> str:
        proc = await asyncio.create_subprocess_exec("tmux", "-L", self.name, "-f", "/dev/null", *args,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise TmuxError(f"tmux {' '.join(args)} failed ({proc.returncode}): {err.decode(errors='replace')}")
        return out.decode("utf-8", errors="replace")

    async def start(self) -> None:
        command = (shlex.join([sys.executable, "-m", "mosaic.mediated_terminal", "--socket", self.socket_path,
                               "--log", str(self.log)])
                   + f" 2>{shlex.quote(str(self.stderr))}; echo '[terminal exited' $? ']'; sleep 3600")
        self.started = True
        await self.tmux("new-session", "-d", "-s", "t", "-x", str(self.width), "-y", str(self.height), command)
        found = (await self.tmux("display-message", "-p", "-t", "t", "#{pane_pid} #{socket_path}")).strip()
        pid, _, self.server_socket = found.partition(" ")
        self.pids.append(int(pid))

    def _children(self) -> list[int]:
        found: list[int] = []
        for pid in list(self.pids):
            with contextlib.suppress(OSError):
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                found += [int(c) for c in children]
        return found

    async def aclose(self) -> None:
        """Kill exactly this server; then every process recorded as the pane's (and its children), by pid."""
        if self.started:
            self.pids += [p for p in self._children() if p not in self.pids]
            with contextlib.suppress(TmuxError):
                await self.tmux("kill-server")
            deadline = time.monotonic() + 5.0
            while any(_alive(p) for p in self.pids) and time.monotonic() < deadline:
                await asyncio.sleep(POLL)
            for pid in self.pids:
                if _alive(pid):
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

    async def wait_for(self, predicate: Callable[[list[str]], bool], what: str, timeout: float = WAIT) -> list[str]:
        """Poll the screen until `predicate(rows)`; AssertionError with the screen after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            rows = await self.screen()
            if predicate(rows):
                return rows
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n" + "\n".join(rows)
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

    async def paste(self, text: str) -> None:
        """Paste `text` as a terminal paste (bracketed when the application asked for it)."""
        await self.tmux("set-buffer", "-b", "mosaic", "--", text)
        await self.tmux("paste-buffer", "-p", "-d", "-b", "mosaic", "-t", "t")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of the tmux server is gone for our purposes once the server reaped it.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return False


@contextlib.asynccontextmanager
async def tmux_terminal(socket_path: str, **options: Any) -> AsyncIterator[TmuxTerminal]:
    """A started `TmuxTerminal`, closed (its server killed, its processes gone) on exit."""
    term = TmuxTerminal(socket_path, **options)
    try:
        await term.start()
        yield term
    finally:
        await term.aclose()
