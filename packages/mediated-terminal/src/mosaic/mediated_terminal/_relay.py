"""A pty of our own between tmux and the terminal, so a test can write raw byte chunks to the terminal's pty.

    python -m mosaic.mediated_terminal._relay CHUNKS_SOCKET -- COMMAND...

It runs COMMAND on a new pty (its stdin and stdout; its stderr stays the relay's), the session leader with
that pty as its controlling terminal, sized as the relay's own terminal. It copies what COMMAND writes to
its stdout and what its own terminal types (tmux's send-keys) to COMMAND's pty, both with the relay's
terminal in raw mode, so the bytes pass as typed. On CHUNKS_SOCKET (a Unix socket it listens on) it takes
frames (4 bytes big-endian length, then the bytes) and writes each frame to the pty master with one
write(2), then answers one byte: each frame reaches the terminal as one input chunk, the way a keyboard
burst or a paste does (seed README "The terminal": text after an Enter in the same chunk). A resize of its
terminal (SIGWINCH) is passed on. It exits with COMMAND's exit status (128 + n for a signal) once COMMAND's
output ends and COMMAND is reaped.

Test-only (`mosaic.mediated_terminal.testing.TmuxTerminal` runs it); it has no dependencies beyond the standard library.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import selectors
import signal
import socket
import struct
import sys
import termios
import tty
from collections.abc import Sequence

__all__ = ["relay"]


def _winsize(fd: int) -> bytes | None:
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
    except OSError:
        return None


def _spawn(argv: Sequence[str], slave: int, master: int) -> int:
    pid = os.fork()
    if pid == 0:  # the child: a new session whose controlling terminal is the new pty
        try:
            os.close(master)
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            os.dup2(slave, 0)
            os.dup2(slave, 1)
            if slave > 2:
                os.close(slave)
            os.execvp(argv[0], list(argv))
        finally:
            os._exit(127)
    return pid


def _status(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def relay(chunks_path: str, argv: Sequence[str]) -> int:
    """Run `argv` on a new pty and relay (module docstring); its exit code."""
    master, slave = os.openpty()
    size = _winsize(0)
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(chunks_path)
    listener.listen(4)
    pid = _spawn(argv, slave, master)
    os.close(slave)
    saved = None
    with contextlib.suppress(termios.error):
        saved = termios.tcgetattr(0)
        tty.setraw(0)

    def resized(_signum: int, _frame: object) -> None:
        now = _winsize(0)
        if now is not None:
            with contextlib.suppress(OSError):
                fcntl.ioctl(master, termios.TIOCSWINSZ, now)

    signal.signal(signal.SIGWINCH, resized)
    sel = selectors.DefaultSelector()
    sel.register(master, selectors.EVENT_READ, "out")
    sel.register(0, selectors.EVENT_READ, "in")
    sel.register(listener, selectors.EVENT_READ, "accept")
    frames: dict[socket.socket, bytearray] = {}
    try:
        while True:
            for key, _ in sel.select():
                what = key.data
                if what == "out":
                    try:
                        data = os.read(master, 65536)
                    except OSError as exc:
                        if exc.errno != errno.EIO:
                            raise
                        data = b""
                    if not data:
                        return _status(os.waitpid(pid, 0)[1])
                    os.write(1, data)
                elif what == "in":
                    data = os.read(0, 65536)
                    if not data:
                        sel.unregister(0)  # our terminal went away; COMMAND keeps its pty
                    else:
                        os.write(master, data)
                elif what == "accept":
                    conn, _ = listener.accept()
                    frames[conn] = bytearray()
                    sel.register(conn, selectors.EVENT_READ, conn)
                elif isinstance(what, socket.socket):
                    conn = what
                    data = conn.recv(65536)
                    if not data:
                        sel.unregister(conn)
                        conn.close()
                        del frames[conn]
                        continue
                    buf = frames[conn]
                    buf += data
                    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
                        n = struct.unpack(">I", buf[:4])[0]
                        chunk = bytes(buf[4:4 + n])
                        del buf[:4 + n]
                        written = os.write(master, chunk)  # one write(2): one chunk for the reader
                        conn.sendall(b"\1" if written == len(chunk) else b"\0")
    finally:
        if saved is not None:
            with contextlib.suppress(termios.error):
                termios.tcsetattr(0, termios.TCSADRAIN, saved)
        with contextlib.suppress(OSError):
            os.unlink(chunks_path)


def main(argv: Sequence[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: relay CHUNKS_SOCKET -- COMMAND...", file=sys.stderr)
        return 2
    return relay(argv[0], argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
