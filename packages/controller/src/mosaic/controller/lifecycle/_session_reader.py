"""The session file as the drift check and a prompt's look read it, read-only through safe-open (brief §2
"No writes to sessions", W11): `SessionFileReader`, a `SessionReader` (and, through `identity`, a
`SessionStatter`) for the runtime."""

from __future__ import annotations

import hashlib
import os

from mosaic.safe_open import MAX_SESSION_FILE_BYTES, SafeOpenRefusal, open_root

from ..engines._verdict import FileIdentity, SessionBytes

__all__ = ["SessionFileReader"]


class SessionFileReader:
    """A `SessionReader` that opens the session file read-only through safe-open (brief §2 "No writes to
    sessions", W11): the project root is resolved once and held as a directory fd; each call opens
    `<sessions_rel>/<name>` beneath it with openat2 (or the walk) and no symlinks, `O_RDONLY | O_NOFOLLOW |
    O_NONBLOCK | O_CLOEXEC`, the fd's (dev, ino) equal to its lstat, then reads it to EOF in 1 MiB blocks,
    hashing every byte (SHA-256) and keeping only those from `offset` on (`SessionBytes`): what the
    incremental drift check needs costs one pass over the file and memory for the new bytes only.

    Returns None when the file does not exist (Pi creates a new session's file at its first assistant
    message: W19; Claude its transcript, and its directory, at the first turn). Raises `SafeOpenRefusal` for anything else safe-open refuses (a symlink or a FIFO
    swapped in, a missing sessions directory, a file over 256 MiB, also while it is read) and OSError for
    a read that fails. Construction raises what `open_root` raises. `close()` releases the root fd."""

    def __init__(self, project: str | os.PathLike[str], sessions_rel: str, name: str) -> None:
        self.sessions_rel = sessions_rel
        self.name = name
        self._root = open_root(project)

    def __call__(self, offset: int = 0) -> SessionBytes | None:
        root = self._root
        try:
            opened = root.open_session_file(self.sessions_rel, self.name)
        except SafeOpenRefusal as refusal:
            if refusal.code == "unavailable" and self._absent():
                return None
            raise
        with opened as f:
            chunks: list[bytes] = []
            total = 0
            whole = hashlib.sha256()
            prefix: str | None = whole.hexdigest() if offset == 0 else None
            while chunk := os.read(f.fd, 1 << 20):
                if total > MAX_SESSION_FILE_BYTES - len(chunk):
                    raise SafeOpenRefusal("too-large", f"{self.name} grew past 256 MiB while it was read")
                start = total
                total += len(chunk)
                if total <= offset:
                    whole.update(chunk)
                elif start >= offset:
                    whole.update(chunk)
                    chunks.append(chunk)
                else:  # the block holds the offset: hash up to it, note the prefix's digest, keep the rest
                    cut = offset - start
                    whole.update(chunk[:cut])
                    prefix = whole.hexdigest()
                    whole.update(chunk[cut:])
                    chunks.append(chunk[cut:])
                if total == offset:
                    prefix = whole.hexdigest()
            return SessionBytes(b"".join(chunks), FileIdentity(f.dev, f.ino, total), offset, prefix, whole.hexdigest())

    def identity(self) -> FileIdentity | None:
        """A `SessionStatter`: the file opened as `__call__` opens it, its (dev, ino) and size (fstat), no
        byte read; None when it does not exist. Raises what `__call__` raises."""
        root = self._root
        try:
            opened = root.open_session_file(self.sessions_rel, self.name)
        except SafeOpenRefusal as refusal:
            if refusal.code == "unavailable" and self._absent():
                return None
            raise
        with opened as f:
            return FileIdentity(f.dev, f.ino, os.fstat(f.fd).st_size)

    def _absent(self) -> bool:
        """Absent, not unavailable: the directory is there and the name is not in it, or the directory itself
        is missing (a Claude transcript's `projects/<slug>` is made with its first turn's file; the check
        then decides: no file where one was verified is `file-removed`)."""
        try:
            return self.name not in self._root.listdir(self.sessions_rel)
        except SafeOpenRefusal as missing:
            if missing.code == "unavailable":
                return True
            raise

    def close(self) -> None:
        self._root.close()
