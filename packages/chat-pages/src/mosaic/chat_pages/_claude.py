"""Claude Code seats (issue 30, brief §8): sessions only from launcher receipts, each resolved to exactly one
transcript under the approved Claude root.

- **Receipts.** The seat's launcher writes `<project>/.pi/state/<seat>/session-id` and, per launch,
  `.pi/state/<seat>/launches/<n>/session-id`: one session id per line. They are the only source of the
  seat's sessions ("A launcher receipt is a hint, not membership": the approved project and the spec stay
  the authority). A receipt is a small regular file (at most `MAX_RECEIPT_BYTES`), opened in a directory
  safe-open resolved beneath the project root, `O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`, its
  (dev, ino) equal to its lstat: a symlinked or swapped receipt is `unsafe-path`, never followed.
- **Ids.** A line must be a session id, a lowercase UUID (what the binary names its files by): anything
  else (a path, `..`, a name with a slash) names no file and is refused `unsafe-path` in its row, never
  opened.
- **Resolution.** The Claude root is `<claude_root>`, opened once with safe-open; a session's transcript is
  `projects/<slug>/<id>.jsonl` beneath it. The slug cannot always be recomputed from the cwd (FACTS §2:
  UTF-16 units, a hash past 200 characters), so the id is looked up by exact name in each directory directly
  in `projects/`: the names in `projects/` are listed (the project directories), never a project
  directory's own files, so a session file no receipt names (a decoy) is never listed and never opened (L3).
  Exactly one must hold it: none is `unavailable` (not written yet, or gone), two are `unsafe-path`
  (ambiguous: never guessed). A symlinked project directory is not looked into; when the id is found in no
  other, its refusal (`unsafe-path`) is the answer, since the session could be behind it. The transcript
  itself is opened with safe-open's session-file rules (a symlink, a FIFO, a swap: refused, L4), and its
  first entry's cwd must be the project or inside it (`foreign-project`: another project's session, L4).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from mosaic.safe_open import Root, SafeOpenRefusal

from ._refusal import ReaderRefusal
from ._sources import ClaudeRoot, claude_conversation_id

#: The name of a launcher receipt, in the seat's state directory and in each launch directory.
RECEIPT_NAME = "session-id"
#: The directory of per-launch receipts, in the seat's state directory.
LAUNCHES = "launches"
#: A receipt larger than this is refused `too-large` (a receipt holds a few 37-byte lines).
MAX_RECEIPT_BYTES = 64 * 1024
#: A session id: a lowercase UUID, as Claude Code names its transcripts (`<sessionId>.jsonl`).
SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: Where the project directories are, beneath the Claude root.
PROJECTS = "projects"

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


@dataclass(frozen=True)
class Receipted:
    """One line of a receipt: the session id it names (as written), the receipt that named it first
    (relative to the project root), and the conversation id."""

    session_id: str
    receipt: str
    conversation: str

    @property
    def valid(self) -> bool:
        return SESSION_ID.fullmatch(self.session_id) is not None

    @property
    def file(self) -> str:
        """The transcript's file name (what the catalogue row shows)."""
        return f"{self.session_id}.jsonl"


def receipted(root: Root, croot: ClaudeRoot) -> tuple[list[Receipted], list[ReaderRefusal]]:
    """Every session the seat's receipts name, in receipt order (the seat's receipt first, then the launches
    in the order of their numbers), each once; and the refusal of each receipt that could not be read (its
    message names it). Opens the receipts only, beneath `root` (the project root)."""
    names: list[tuple[str, str]] = [(croot.receipts_rel, RECEIPT_NAME)]
    refused: list[ReaderRefusal] = []
    launches = f"{croot.receipts_rel}/{LAUNCHES}"
    try:
        launched = root.listdir(launches)
    except SafeOpenRefusal as e:
        launched = []
        if e.code != "unavailable" or root.closed:
            refused.append(ReaderRefusal(e.code, e.message))
    for n in sorted((x for x in launched if not x.startswith(".")), key=_launch_order):
        names.append((f"{launches}/{n}", RECEIPT_NAME))
    out: list[Receipted] = []
    seen: set[str] = set()
    for rel, name in names:
        try:
            data = read_receipt(root, rel, name)
        except ReaderRefusal as r:
            refused.append(r)
            continue
        if data is None:
            continue
        for line in _receipt_lines(data):
            if line in seen:
                continue
            seen.add(line)
            out.append(Receipted(line, f"{rel}/{name}",
                                 claude_conversation_id(croot.project_root, croot.seat, line)))
    return out, refused


def receipt_naming(root: Root, croot: ClaudeRoot, receipt: str, conversation: str) -> Receipted | None:
    """What `receipted` gives for `conversation` when `receipt` (a receipt's path relative to the project root,
    as `Receipted.receipt` names it) still names its session, read from that one receipt; None when it does
    not, or cannot be read (`receipted` then says why). A `next` reads its cursor's receipt only: the seat's
    other receipts, one a launch, are not read again at every page."""
    rel, _, name = receipt.rpartition("/")
    try:
        data = read_receipt(root, rel, name)
    except ReaderRefusal:
        return None
    for line in _receipt_lines(data or b""):
        if claude_conversation_id(croot.project_root, croot.seat, line) == conversation:
            return Receipted(line, receipt, conversation)
    return None


def _receipt_lines(data: bytes) -> Iterator[str]:
    """A receipt's lines as session ids are read from it: each stripped, undecodable bytes replaced, empty
    ones skipped (`receipted` and `receipt_naming` read them alike)."""
    for raw in data.split(b"\n"):
        line = raw.strip().decode("utf-8", "replace")
        if line:
            yield line


def _launch_order(name: str) -> tuple[int, int, str]:
    return (0, int(name), name) if name.isdigit() else (1, 0, name)


def read_receipt(root: Root, rel: str, name: str) -> bytes | None:
    """The bytes of receipt `rel/name` beneath `root`, or None when there is none. Raises ReaderRefusal:
    `unsafe-path` (a symlink, not a regular file, swapped between its lstat and its open, or any refusal of
    the directories on the way), `unreadable`, `too-large` (over MAX_RECEIPT_BYTES)."""
    what = f"{rel}/{name}"
    try:
        dfd = root.open_dir(rel)
    except SafeOpenRefusal as e:
        if e.code == "unavailable" and not root.closed:
            return None
        raise ReaderRefusal(e.code, e.message) from None
    try:
        try:
            before = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise _refusal(e, what) from None
        if not stat.S_ISREG(before.st_mode):
            raise ReaderRefusal("unsafe-path", f"the receipt {what} is not a regular file (mode {before.st_mode:o})")
        if before.st_size > MAX_RECEIPT_BYTES:
            raise ReaderRefusal("too-large", f"the receipt {what} is {before.st_size} bytes, over {MAX_RECEIPT_BYTES}")
        try:
            fd = os.open(name, _FLAGS, dir_fd=dfd)
        except OSError as e:
            raise _refusal(e, what) from None
        try:
            after = os.fstat(fd)
            if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(after.st_mode):
                raise ReaderRefusal("unsafe-path", f"the receipt {what} was swapped between its lstat and its open")
            data = os.pread(fd, MAX_RECEIPT_BYTES + 1, 0)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)
    if len(data) > MAX_RECEIPT_BYTES:
        raise ReaderRefusal("too-large", f"the receipt {what} grew over {MAX_RECEIPT_BYTES} bytes while it was read")
    return data


def _refusal(e: OSError, what: str) -> ReaderRefusal:
    if e.errno in (errno.EACCES, errno.EPERM):
        return ReaderRefusal("unreadable", f"the receipt {what}: permission denied")
    if e.errno == errno.ENOENT:
        return ReaderRefusal("unavailable", f"the receipt {what} was removed while it was read")
    return ReaderRefusal("unsafe-path", f"the receipt {what}: {os.strerror(e.errno or 0)}")


def locate(croot: Root, session: Receipted) -> str:
    """The directory beneath the Claude root (`projects/<slug>`) that holds the session's transcript: the
    one project directory where `<id>.jsonl` exists (not followed if it is a symlink: safe-open refuses it
    at the open). Raises ReaderRefusal: `unsafe-path` (the receipt's line is not a session id; two project
    directories hold it; or none does and a project directory that is a symlink could), `unavailable` (no
    project directory holds it), and the refusals of listing `projects/`."""
    if not session.valid:
        raise ReaderRefusal("unsafe-path", f"the receipt {session.receipt} names {session.session_id[:80]!r}, "
                                           "which is not a session id: no file is looked up for it")
    try:
        slugs = croot.listdir(PROJECTS)
    except SafeOpenRefusal as e:
        raise ReaderRefusal(e.code, e.message) from None
    name = session.file
    found: list[str] = []
    blocked: SafeOpenRefusal | None = None
    for slug in sorted(slugs):
        if slug.startswith("."):
            continue
        rel = f"{PROJECTS}/{slug}"
        try:
            kind = croot.lstat(rel).st_mode
        except SafeOpenRefusal as e:
            blocked = blocked or e
            continue
        if stat.S_ISLNK(kind):
            blocked = blocked or SafeOpenRefusal("unsafe-path", f"{rel} is a symlink: not looked into")
            continue
        if not stat.S_ISDIR(kind):
            continue
        try:
            croot.lstat(f"{rel}/{name}")
        except SafeOpenRefusal as e:
            if e.code != "unavailable":
                blocked = blocked or e
            continue
        found.append(rel)
    if len(found) == 1:
        return found[0]
    if found:
        raise ReaderRefusal("unsafe-path", f"session {session.session_id} is in {len(found)} project directories "
                                           f"({', '.join(found[:4])}): not one file, so none is opened")
    if blocked is not None:
        raise ReaderRefusal(blocked.code, f"session {session.session_id} is in no readable project directory, and "
                                          f"one could not be looked into ({blocked.message})")
    raise ReaderRefusal("unavailable", f"session {session.session_id} has no transcript under the Claude root "
                                       f"(not written yet, or removed)")
