"""Roots from repository specs, seat registrations as hints, and conversation ids.

Seed README, "Sources": roots come from the board's repository specs only, as
<projectRoot>/.pi/state/<seat>/sessions, with the project named after the root directory; there is no
global scan. A spec of a Claude Code seat (issue 30, brief §8) names its Claude root too (the config
directory, explicit, never a default `~/.claude`): its sessions are the ids the seat's launcher receipts
name, each resolved under `<claude root>/projects/` (`_claude.py`); no Claude directory is ever listed for
sessions. A seat registration is seat-written, so it is a hint, not authority: it counts for a root only
when seat, layout repo, project and sessionsDir all match; it supplies engineStartedAt; a non-Pi harness
makes the root unsupported (one catalogue row, the directory never read); a seat on another harness with no
spec adds a placeholder row when its registration names the standard directory under an approved project
root. A registration never adds a root or names a file.

Nothing here opens a file: `os.path.realpath` (samePath) resolves paths and opens nothing.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from ._refusal import ReaderRefusal

# What the public modules show of this module; the rest is the package's own.
__all__ = [
    "CLAUDE_HARNESS",
    "PI_HARNESS",
    "ClaudeRoot",
    "RefusedSpec",
    "RepositorySpec",
    "Roots",
    "SeatRegistration",
    "SessionRoot",
    "UnsupportedRoot",
    "claude_conversation_id",
    "conversation_id",
    "roots_from_specs",
]

#: The harness name of a Pi seat (seed "Sources", D2).
PI_HARNESS = "pi"
#: The harness name of a Claude Code seat: what its registration says (seed "Sources": "This is Rocko's case
#: today: claude-code"). Read only with a spec that names its Claude root (issue 30); any other harness is
#: unsupported (D2).
CLAUDE_HARNESS = "claude-code"

#: The conversation id prefixes (a Pi file, a Claude session) and the number of hex digits of SHA-256 kept.
CONVERSATION_PREFIX = "pi-"
CLAUDE_PREFIX = "claude-"
CONVERSATION_HEX = 40


@dataclass(frozen=True)
class RepositorySpec:
    """One repository spec of the board: an approved project root and one of its seats.

    `project_root` must be absolute; it may itself be a symlink (the seed's compatibility path), and it is
    kept as written (normalised lexically), so a conversation id does not change when the link's target
    does. `seat` is one path component. `layout_repo` is the layout repository the spec belongs to (a path);
    registrations must name the same one (samePath) to count. `harness` is the seat's harness: `"pi"` (the
    default) or `"claude-code"`, which needs `claude_root`, the seat's Claude config directory (absolute;
    its `projects/` is the approved Claude root). Any other harness is one unsupported row.
    """

    project_root: str
    seat: str
    layout_repo: str
    harness: str = PI_HARNESS
    claude_root: str | None = None


@dataclass(frozen=True)
class SeatRegistration:
    """A seat-written registration: a hint, never authority (seed "Sources").

    `project` is the project name (the basename of the project root) or the project root itself as an
    absolute path; `sessions_dir` and `layout_repo` are paths; `started_at` is the engine's ISO 8601 start
    time; `harness` is "pi" for a Pi seat.
    """

    seat: str
    harness: str
    layout_repo: str
    project: str
    sessions_dir: str
    started_at: str


@dataclass(frozen=True)
class SessionRoot:
    """An approved Pi sessions directory: <project_root>/<sessions_rel>, with its counting registrations."""

    project_root: str
    project: str
    seat: str
    layout_repo: str
    registrations: tuple[SeatRegistration, ...] = ()

    @property
    def sessions_rel(self) -> str:
        return sessions_rel(self.seat)

    def engine_started_at(self, created_at: str | None) -> str | None:
        """The startedAt of the latest counting registration at or before `created_at`, else None.

        Seed "Sources": a registration "supplies engineStartedAt for conversations created at or after its
        startedAt". A conversation's creation time is its header timestamp; an unparsable time matches
        nothing.
        """
        return _started_at(self.registrations, created_at)


def _started_at(registrations: tuple[SeatRegistration, ...], created_at: str | None) -> str | None:
    created = _instant(created_at)
    if created is None:
        return None
    best: tuple[datetime, str] | None = None
    for reg in registrations:
        started = _instant(reg.started_at)
        if started is not None and started <= created and (best is None or started > best[0]):
            best = (started, reg.started_at)
    return None if best is None else best[1]


@dataclass(frozen=True)
class ClaudeRoot:
    """An approved Claude Code seat: its receipts under <project_root>/.pi/state/<seat>, its transcripts
    under <claude_root>/projects/. `registrations` are the counting ones (they supply engineStartedAt)."""

    project_root: str
    project: str
    seat: str
    layout_repo: str
    claude_root: str
    registrations: tuple[SeatRegistration, ...] = ()

    @property
    def receipts_rel(self) -> str:
        return receipts_rel(self.seat)

    def engine_started_at(self, created_at: str | None) -> str | None:
        """As SessionRoot's; a Claude conversation's creation time is its first entry's timestamp."""
        return _started_at(self.registrations, created_at)


@dataclass(frozen=True)
class UnsupportedRoot:
    """A seat whose harness is not Pi: one catalogue row, and its directory is never read.

    `placeholder` is True when the seat has no spec and its registration named the standard directory
    under an approved project root (seed "Sources": "This is Rocko's case today").
    """

    project_root: str
    project: str
    seat: str
    harness: str
    placeholder: bool


@dataclass(frozen=True)
class RefusedSpec:
    """A spec that names no usable root (a relative project root, a seat that is not one component)."""

    project_root: str
    seat: str
    refusal: ReaderRefusal


@dataclass(frozen=True)
class Roots:
    """What `roots_from_specs` returns, and what the reader's `roots` callable must return."""

    sessions: tuple[SessionRoot, ...] = ()
    unsupported: tuple[UnsupportedRoot, ...] = ()
    refused: tuple[RefusedSpec, ...] = field(default=())
    claude: tuple[ClaudeRoot, ...] = ()


def sessions_rel(seat: str) -> str:
    """The sessions directory of a seat, relative to its project root."""
    return f".pi/state/{seat}/sessions"


def receipts_rel(seat: str) -> str:
    """The directory of a seat's launcher receipts, relative to its project root (brief §8): its
    `session-id` and `launches/<n>/session-id`."""
    return f".pi/state/{seat}"


def claude_conversation_id(project_root: str, seat: str, session_id: str) -> str:
    """claude- plus the first 40 hex digits of SHA-256 over project root, seat and the session id a receipt
    names: `conversation_id`'s construction over the receipt's line (as written, whatever it holds), with
    its own prefix, so a Claude session's id never equals a Pi file's."""
    return CLAUDE_PREFIX + conversation_id(project_root, seat, session_id)[len(CONVERSATION_PREFIX):]


def conversation_id(project_root: str, seat: str, name: str) -> str:
    """pi- plus the first 40 hex digits of SHA-256 over project root, seat and file name.

    Exact construction: SHA-256 of os.fsencode(project_root) + b"\\0" + os.fsencode(seat) + b"\\0" +
    os.fsencode(name), where project_root is the spec's root normalised lexically (posixpath.normpath).
    NUL never occurs in a path, so the encoding is unambiguous. A session file name is never empty, so
    the id of an unsupported seat's row (name "") never equals a conversation's.
    """
    h = hashlib.sha256()
    h.update(os.fsencode(project_root) + b"\0" + os.fsencode(seat) + b"\0" + os.fsencode(name))
    return CONVERSATION_PREFIX + h.hexdigest()[:CONVERSATION_HEX]


def same_path(a: str, b: str) -> bool:
    """samePath: both absolute and equal after realpath (a missing path compares as written)."""
    if not (isinstance(a, str) and isinstance(b, str) and a.startswith("/") and b.startswith("/")):
        return False
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def _instant(value: str | None) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _seat_ok(seat: object) -> bool:
    return isinstance(seat, str) and seat not in ("", ".", "..") and "/" not in seat and "\0" not in seat


def _project_matches(reg: SeatRegistration, project_root: str, project: str) -> bool:
    if reg.project == project:
        return True
    return reg.project.startswith("/") and same_path(reg.project, project_root)


def _counts(reg: SeatRegistration, spec_root: str, project: str, seat: str, layout_repo: str) -> bool:
    """Seed "Sources": a registration counts only when seat, layout repo, project and sessionsDir match."""
    return (
        reg.seat == seat
        and same_path(reg.layout_repo, layout_repo)
        and _project_matches(reg, spec_root, project)
        and same_path(reg.sessions_dir, posixpath.join(spec_root, sessions_rel(seat)))
    )


def roots_from_specs(
    specs: Iterable[RepositorySpec], registrations: Iterable[SeatRegistration] = ()
) -> Roots:
    """The roots the reader may list: one per valid spec, never anything else.

    A Pi spec gives a `SessionRoot`; a Claude Code spec (with its Claude root) a `ClaudeRoot`; a spec of any
    other harness, or whose counting registration names another harness than the spec's, an unsupported
    row. A non-Pi
    registration for a seat with no spec adds a placeholder row when it names the standard directory of an
    approved project root (same project and layout repo). Registrations that match nothing are ignored.
    Invalid specs are returned in `refused` (unsafe-path), never guessed at.
    """
    regs = [r for r in registrations if isinstance(r, SeatRegistration)]
    sessions: list[SessionRoot] = []
    claude: list[ClaudeRoot] = []
    unsupported: list[UnsupportedRoot] = []
    refused: list[RefusedSpec] = []
    seen: set[tuple[str, str]] = set()
    approved: dict[str, tuple[str, str]] = {}  # normalised project root -> (project, layout repo)
    for spec in specs:
        root = spec.project_root
        if not isinstance(root, str) or not root.startswith("/") or "\0" in root:
            refused.append(RefusedSpec(str(root), str(spec.seat), ReaderRefusal(
                "unsafe-path", f"project root {root!r} is not an absolute path")))
            continue
        if not _seat_ok(spec.seat):
            refused.append(RefusedSpec(root, str(spec.seat), ReaderRefusal(
                "unsafe-path", f"seat {spec.seat!r} is not one path component")))
            continue
        root = posixpath.normpath(root)
        if (root, spec.seat) in seen:
            continue
        seen.add((root, spec.seat))
        project = posixpath.basename(root)
        approved.setdefault(root, (project, spec.layout_repo))
        counting = tuple(r for r in regs if _counts(r, root, project, spec.seat, spec.layout_repo))
        harness = spec.harness if isinstance(spec.harness, str) else str(spec.harness)
        foreign = [r for r in counting if r.harness != harness]
        if foreign or harness not in (PI_HARNESS, CLAUDE_HARNESS):
            shown = foreign[0].harness if foreign else harness
            unsupported.append(UnsupportedRoot(root, project, spec.seat, shown, placeholder=False))
            continue
        if harness == CLAUDE_HARNESS:
            croot = spec.claude_root
            if not isinstance(croot, str) or not croot.startswith("/") or "\0" in croot:
                refused.append(RefusedSpec(root, spec.seat, ReaderRefusal(
                    "unsafe-path", f"a {CLAUDE_HARNESS} seat needs its Claude root (the config directory) as an "
                                   f"absolute path, not {croot!r}; none is ever assumed")))
                continue
            claude.append(ClaudeRoot(root, project, spec.seat, spec.layout_repo, posixpath.normpath(croot),
                                     counting))
            continue
        sessions.append(SessionRoot(root, project, spec.seat, spec.layout_repo, counting))
    # Placeholder rows: a non-Pi seat with no spec, registered at the standard directory of an approved root.
    for reg in regs:
        if reg.harness == PI_HARNESS or not _seat_ok(reg.seat):
            continue
        for root, (project, layout_repo) in approved.items():
            if (root, reg.seat) in seen:
                continue
            if _counts(reg, root, project, reg.seat, layout_repo):
                seen.add((root, reg.seat))
                unsupported.append(UnsupportedRoot(root, project, reg.seat, reg.harness, placeholder=True))
    return Roots(tuple(sessions), tuple(unsupported), tuple(refused), tuple(claude))
