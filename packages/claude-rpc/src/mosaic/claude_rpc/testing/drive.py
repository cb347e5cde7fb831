"""Run the pinned binary in a scratch directory and drive it: one ``-p`` run, or a stream-json session.

Every run gets exactly the environment of :func:`claude_env`: nothing of the caller's (``env -i``), a
minimal PATH, ``HOME``, ``CLAUDE_CONFIG_DIR`` and ``CLAUDE_CODE_TMPDIR`` in a scratch directory, the two
switches (``DISABLE_AUTOUPDATER=1``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``), the scripted server's
``ANTHROPIC_BASE_URL`` and the fake key ``sk-ant-fake``. So no model is called, no credential is read and
nothing is written outside the scratch directory (docs/claude-2.1.283.md "Isolation").

:class:`StreamSession` speaks stream-json (``--input-format stream-json --output-format stream-json
--verbose --permission-prompt-tool stdio``): it writes one JSON object per line, reads stdout in raw chunks
split on LF bytes only, and keeps every line in order as ``{"dir": "in"|"out", "msg": ...}``, the form of
the committed recordings. Every wait is bounded; the process runs in its own session and is killed by its
recorded process group on any failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.claude_rpc._install import make_quiet_dirs

__all__ = [
    "FAKE_KEY",
    "STREAM_JSON_ARGS",
    "WAIT",
    "DriveError",
    "PrintRun",
    "StreamSession",
    "claude_env",
    "run_print",
    "write_records",
]

FAKE_KEY = "sk-ant-fake"
WAIT = 60.0  # seconds: the bound of every wait on the binary (a scripted turn takes well under 2 s)
STREAM_JSON_ARGS = ("-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
                    "--permission-prompt-tool", "stdio")

JsonObject = dict[str, Any]


class DriveError(RuntimeError):
    """The binary did not do what the driver waited for within the bound, or exited unexpectedly."""


def claude_env(scratch: str | os.PathLike[str], base_url: str) -> dict[str, str]:
    """The whole environment of a run (see the module docstring); the three directories are created."""
    env = make_quiet_dirs(scratch)
    env["ANTHROPIC_BASE_URL"] = base_url
    env["ANTHROPIC_API_KEY"] = FAKE_KEY
    return env


def _exited(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to ``timeout`` for the process to exit WITHOUT reaping it (``WNOWAIT``): while it is an
    unreaped zombie its pid, hence its process group id, cannot be reused."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.returncode is not None:
            return True
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None and info.si_pid == proc.pid:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process's own group (the binary and whatever it left behind), then reap it. Called only
    before the leader is reaped, so the group id is still the one this driver started."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


@dataclass(frozen=True)
class PrintRun:
    """One finished ``-p`` run: its exit code, stdout split into JSON lines (stream-json), stderr bytes."""

    returncode: int
    lines: tuple[JsonObject, ...]
    stderr: bytes

    def of_type(self, kind: str, subtype: str | None = None) -> list[JsonObject]:
        return [m for m in self.lines if m.get("type") == kind and (subtype is None or m.get("subtype") == subtype)]


def run_print(binary: str | os.PathLike[str], args: Sequence[str], *, env: Mapping[str, str],
              cwd: str | os.PathLike[str], stdin: bytes = b"", timeout: float = WAIT,
              prefix: Sequence[str] = ()) -> PrintRun:
    """Run ``binary args`` (a ``-p`` run with ``--output-format stream-json``) to its end; ``stdin`` is fed
    whole then closed; ``prefix`` goes before the binary (a tracer). Raises :class:`DriveError` on a timeout
    (the process group is killed first)."""
    proc = subprocess.Popen([*prefix, os.fspath(binary), *args], env=dict(env), cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream: Any) -> None:
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=("out", proc.stdout), daemon=True),
               threading.Thread(target=drain, args=("err", proc.stderr), daemon=True)]
    for t in readers:
        t.start()
    try:
        assert proc.stdin is not None
        proc.stdin.write(stdin)
        proc.stdin.close()
        if not _exited(proc, timeout):
            raise DriveError(f"{list(args)[:6]} did not end within {timeout} s")
    finally:
        _kill_group(proc)
    for t in readers:
        t.join(timeout)
    out = chunks.get("out", b"")
    lines = tuple(json.loads(line) for line in out.split(b"\n") if line.strip())
    return PrintRun(proc.returncode, lines, chunks.get("err", b""))


class StreamSession:
    """One stream-json process: ``send`` objects, ``wait`` for output lines, ``close`` stdin, ``exit_code``.

    ``records`` is every line in order, ``{"dir": "in"|"out", "msg": obj}``; ``out`` the output objects
    alone. Use it as a context manager: leaving kills the process group if it still runs.
    """

    def __init__(self, binary: str | os.PathLike[str], args: Sequence[str], *, env: Mapping[str, str],
                 cwd: str | os.PathLike[str], bound: float = WAIT) -> None:
        # ``binary`` is the program run (the pinned binary, or a fake engine's interpreter with its module in
        # ``args``); ``bound`` is every wait's default (the fake engine's runs take a shorter one).
        self.bound = bound
        self.records: list[JsonObject] = []
        self.out: list[JsonObject] = []
        self.stderr = bytearray()
        self._cond = threading.Condition()
        self._eof = False
        self.proc = subprocess.Popen([os.fspath(binary), *args], env=dict(env), cwd=cwd, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def __enter__(self) -> StreamSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for line in complete:
                try:
                    obj = json.loads(line.decode("utf-8"))
                except ValueError:
                    obj = {"type": "__unparsed__", "text": line.decode("utf-8", "replace")}
                with self._cond:
                    self.records.append({"dir": "out", "msg": obj})
                    self.out.append(obj)
                    self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            with self._cond:
                self.stderr += chunk

    def mark(self) -> int:
        """The number of output lines so far: pass it as ``since`` to wait only for later lines."""
        with self._cond:
            return len(self.out)

    def send(self, obj: JsonObject) -> None:
        """Write one object as one line (no spaces, non-ASCII raw) and record it."""
        assert self.proc.stdin is not None
        data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._cond:
            self.records.append({"dir": "in", "msg": obj})
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send_together(self, objs: Sequence[JsonObject]) -> None:
        """Write several objects, one line each, in ONE write (so the engine reads them in one chunk), and
        record them in order."""
        assert self.proc.stdin is not None
        data = b"".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for o in objs)
        with self._cond:
            self.records.extend({"dir": "in", "msg": o} for o in objs)
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def user(self, content: str | list[JsonObject]) -> None:
        """Send a user message (the SDK's shape: ``session_id`` ``default``, no parent tool use)."""
        self.send({"type": "user", "message": {"role": "user", "content": content}, "parent_tool_use_id": None,
                   "session_id": "default"})

    def control(self, request_id: str, request: JsonObject) -> None:
        self.send({"type": "control_request", "request_id": request_id, "request": request})

    def answer(self, request_id: str, response: JsonObject) -> None:
        """Answer a control_request of the binary's (``can_use_tool``) with a success response."""
        self.send({"type": "control_response",
                   "response": {"subtype": "success", "request_id": request_id, "response": response}})

    def wait(self, pred: Callable[[JsonObject], bool], *, since: int = 0, timeout: float | None = None) -> JsonObject:
        """The first output line at index >= ``since`` for which ``pred`` holds; :class:`DriveError` after
        ``timeout`` (the session's ``bound`` unless given) or at EOF without one."""
        deadline = time.monotonic() + (self.bound if timeout is None else timeout)
        with self._cond:
            while True:
                for obj in self.out[since:]:
                    if pred(obj):
                        return obj
                left = deadline - time.monotonic()
                if self._eof or left <= 0:
                    kinds = [(o.get("type"), o.get("subtype")) for o in self.out[-10:]]
                    raise DriveError(f"wait failed (eof={self._eof}); last lines {kinds}; "
                                     f"stderr {bytes(self.stderr)[-400:]!r}")
                self._cond.wait(left)

    def response_to(self, request_id: str, *, since: int = 0, timeout: float | None = None) -> JsonObject:
        """The control_response for ``request_id``."""
        return self.wait(lambda o: o.get("type") == "control_response"
                         and (o.get("response") or {}).get("request_id") == request_id, since=since, timeout=timeout)

    def result(self, *, since: int = 0, timeout: float | None = None) -> JsonObject:
        """The next ``result`` message."""
        return self.wait(lambda o: o.get("type") == "result", since=since, timeout=timeout)

    def close(self, *, timeout: float | None = None) -> int:
        """Close stdin (EOF) and wait for the exit; return the exit code. Kills the group on a timeout."""
        assert self.proc.stdin is not None
        timeout = self.bound if timeout is None else timeout
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        exited = _exited(self.proc, timeout)
        self.kill()  # the leader has exited (or is killed now): its leftovers go with its group
        if not exited:
            raise DriveError(f"no exit within {timeout} s of stdin EOF")
        for t in self._threads:
            t.join(timeout)
        return self.proc.returncode

    def kill(self) -> None:
        _kill_group(self.proc)


def write_records(path: str | os.PathLike[str], records: Sequence[JsonObject]) -> None:
    """Write records one per line, compact, non-ASCII raw, LF-terminated."""
    Path(path).write_text("".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records))


def __dir__() -> list[str]:
    return sorted(__all__)
