"""Helpers for the tests of the CI scripts (ci/tests, and ci/tests_demo under `nox -s demo`): a command run
on a pseudo-terminal as a person's terminal runs it (its own session, the terminal as its controlling
terminal, so Ctrl-C and a closed terminal reach it as they would), and running scripts as another uid
from a copy it can read (a checkout under /root is not readable to it)."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import tempfile
import termios
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOBODY = 65534


class Tty:
    """`argv` on a new pseudo-terminal: `setsid -c` makes it a session leader whose controlling terminal
    is the pty, as a login shell's job would be. Every read is bounded; a timeout fails the test."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> None:
        master, slave = os.openpty()
        # NOFLSH: the line discipline sends SIGINT for a Ctrl-C and then flushes the output queue; a program
        # quick enough to answer between the two (on the other core) would have its answer discarded before
        # this test reads it. A person's terminal emulator drains the queue as it comes; so does this flag.
        attrs = termios.tcgetattr(slave)
        attrs[3] |= termios.NOFLSH
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.master: int | None = master
        setsid = shutil.which("setsid") or "/usr/bin/setsid"  # found on the test's PATH, not the command's
        self.proc = subprocess.Popen([setsid, "-c", *argv], stdin=slave, stdout=slave, stderr=slave,
                                     env=dict(env) if env is not None else None, cwd=cwd, close_fds=True)
        os.close(slave)
        self.output = ""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self, timeout: float) -> bool:
        """Read what is there within `timeout`; False at the terminal's end (every writer gone)."""
        assert self.master is not None
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: the slave side is closed everywhere
            return False
        if not chunk:
            return False
        self.output += chunk.decode("utf-8", "replace").replace("\r\n", "\n")
        return True

    def read_until(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {text!r} within {timeout}s; the terminal shows:\n{self.output[-3000:]}")
            if not self._read(min(left, 0.5)) and text not in self.output:
                raise AssertionError(f"the terminal ended before {text!r}; it showed:\n{self.output[-3000:]}")
        return self.output

    def lines(self) -> list[str]:
        """What the terminal showed, line by line, without the echo of Ctrl-C: the kernel echoes "^C" after
        it has sent SIGINT, so on a busy machine the echo can land after the program's own last line."""
        return self.output.replace("^C", "").strip().splitlines()

    def ctrl_c(self) -> None:
        """What the Ctrl-C key sends: the terminal turns it into SIGINT for its foreground process group."""
        assert self.master is not None
        os.write(self.master, b"\x03")

    def hang_up(self) -> None:
        """The terminal window closes: the pty hangs up and the kernel sends SIGHUP to the session leader."""
        assert self.master is not None
        os.close(self.master)
        self.master = None

    def finish(self, timeout: float = 120.0) -> int:
        """Read until the end and wait for the process (bounded); its exit status (128 + n for a signal n
        it died of, as a shell reports it)."""
        deadline = time.monotonic() + timeout
        while self.master is not None and time.monotonic() < deadline:
            if not self._read(min(0.5, max(0.0, deadline - time.monotonic()))) and self.proc.poll() is not None:
                break
            if self.proc.poll() is not None:
                # The process is gone; what it wrote is still in the pty: read to the end (EIO once every
                # writer has closed), bounded.
                drain_until = time.monotonic() + 5.0
                while time.monotonic() < drain_until and self._read(0.2):
                    pass
                break
        try:
            code = self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running after {timeout}s; the terminal showed:\n{self.output[-3000:]}") from None
        return code if code >= 0 else 128 - code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.master is not None:
            os.close(self.master)
            self.master = None


def ended_within(pid: int, timeout: float) -> bool:
    """Whether the process `pid` (not necessarily a child) is gone now or ends within `timeout`: its pidfd
    turns readable when it exits."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def as_nobody(argv: Sequence[str]) -> list[str]:
    """`argv` run as uid/gid 65534 (nobody) with no supplementary groups: setpriv, which needs root."""
    if os.geteuid() != 0:
        return list(argv)  # already not root: run as this uid
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]


def copy_scripts(dest: Path, *names: str) -> None:
    for name in names:
        target = dest / "ci" / name
        shutil.copy(REPO / "ci" / name, target)
        os.chmod(target, 0o755)


def system_python() -> str:
    """An interpreter every uid can run: Debian's /usr/bin/python3 (the pyenv or venv one may sit in /root)."""
    for candidate in ("/usr/bin/python3.11", "/usr/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    pytest.fail("no /usr/bin/python3: the tests run the CI scripts as another uid with the system Python")


@pytest.fixture
def tty() -> Iterator[Callable[..., Tty]]:
    """Start commands on pseudo-terminals (`tty(argv, env=..., cwd=...)`); each is killed and closed at the
    end of the test if it is still there."""
    made: list[Tty] = []

    def start(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Tty:
        made.append(Tty(argv, env=env, cwd=cwd))
        return made[-1]

    yield start
    for t in made:
        t.close()


@pytest.fixture
def scratch_repo() -> Iterator[Path]:
    """An empty checkout-shaped directory under /tmp that any uid can read (pytest's tmp_path is 0700 under
    /tmp/pytest-of-root): copy into it the scripts a test runs. Removed by its exact name afterwards."""
    path = Path(tempfile.mkdtemp(prefix="mosaic-ci-test-", dir="/tmp"))
    os.chmod(path, 0o755)
    (path / "ci").mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


