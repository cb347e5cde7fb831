"""The live-session guard: CHAT-03 acts on fixture sessions only, enforced by path (brief §2 "Location and
live-session guard"; fixtures G1-G3; mutant 14; the seed README's "Live roots" choice).

The brief: "The claim root and every session path are constructor arguments. CHAT-03 has no production
default. At construction and again at bind time, the controller resolves real paths. It refuses
live-session-refused for any session file or claim root that is not inside the explicit fixture root it
was given. It also refuses any path under the repository's .pi/state/, ~/.pi, ~/.claude, the configured
data root, or a path named in any seat registration."

Nothing here has a default path (DESIGN.md principle 3). `LiveRoots` names the fixture root and the live
locations; `home` is an argument, never `$HOME` read here: the seed resolved `~` through
`os.homedir()`, which follows `$HOME`, so under a scratch HOME it protected the scratch directories and
left the real ones to the fixture-root containment alone. Here the caller says whose home is live (the
real one in production, a scratch one in tests).

The rules this file keeps, in the order `check` applies them (the first that matches is the one the
refusal's message names, as `<rule>: ...`; every one refuses `live-session-refused`):

1. ``relative-path``: the path is not absolute. A relative path means whatever the process's working
   directory says at the moment, which is ambient state, not an argument, and can change between
   construction and bind. Refused, never resolved.
2. ``unresolvable``: the real path cannot be determined: a symlink loop (more than 40 links, Linux's
   MAXSYMLINKS), a component the process may not look up (EACCES), a NUL byte, a ``..`` after a
   component that does not exist (what it names depends on what that component becomes).
3. ``live-location``: the real path is at or under the real path of a live location: the repository's
   ``.pi/state``, ``<home>/.pi``, ``<home>/.claude``, ``<home>/.mosaic-dev``, the data root, or a path
   named in a seat registration. Checked before containment so the message names the live location even
   when the path is outside the fixture root too, and enforced even when a live location lies inside the
   fixture root (a fixture root that holds a repository checkout or a scratch home).
4. ``live-identity``: the path, or any existing directory above it, is the same file as an existing live
   location by (st_dev, st_ino): a hard link to a registered session file, or a bind mount of a live
   directory. Real paths cannot see either (principle 5: prevent where a path comparison only detects).
5. ``contains-live-location``: a live location's real path is under the path: a claim root or a session
   directory that contains ``~/.pi``. Refused because a checked directory is permission for what lies
   below it (the claim store creates key directories under its root; a walk lists below it), so holding
   a live location is as dangerous as being in one.
6. ``pi-state-outside-fixture-root``: the real path is under a ``.pi/state`` directory that is not
   strictly inside the fixture root: another project's live sessions, named by no registration.
7. ``outside-fixture-root``: the real path is not strictly inside the fixture root's real path (the
   fixture root itself is refused too: a claim root or a session must be something in it).

`bind` adds one: ``changed-since-construction``: the real path now differs from the one `check` returned
at construction (a directory component or the file swapped for a symlink, G3), even when the new target
is another fixture file: the controller's construction-time facts (the header ID, the claim keys) are
about the file it checked then.

Resolution (rules 1-2) follows symlinks in every component and resolves ``..`` after the symlink before
it, as the kernel does (``link/..`` is the parent of the link's target, not the directory holding the
link). A path that does not exist yet is resolved through its deepest existing ancestor; the missing rest
is appended as given. The roots are resolved once, at construction.

The construction refuses a fixture root that is at or under a live location, the same file as one, or
under any ``.pi/state`` directory (every path inside it would be refused anyway, rules 3, 4, 6). A fixture
root that *contains* a live location is accepted: rules 3 and 5 still refuse that location and everything
below and above it inside the fixture root.

Limits, stated: the guard answers for the moment of the call; what happens between `bind` and an open is
safe-open's (it opens below a root without following symlinks). Live locations that do not exist at
construction are protected at the path they would have; one created later as a symlink elsewhere is
protected only by containment. A bind mount or hard link of a live location *below* a checked directory is
not seen (that would need a walk of the directory). A fixture root as wide as ``/`` leaves only the named
live locations protected: containment is only as narrow as the root the caller gives.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from typing import TypeAlias

from mosaic.controller_client import ControlRefusal

__all__ = [
    "LiveRoots",
    "LiveSessionGuard",
    "RULES",
]

StrPath: TypeAlias = "str | os.PathLike[str]"

# The home directories the seed's guard protects (seed README, "Live roots"): Pi's, Claude's, and the
# Mosaic development data directory.
HOME_LIVE_NAMES: tuple[str, ...] = (".pi", ".claude", ".mosaic-dev")

# Linux's MAXSYMLINKS (include/linux/namei.h): more links than this in one lookup is ELOOP to the kernel.
MAX_SYMLINKS = 40

# The refusal rules, in the order `check` applies them, then bind's own (the module docstring explains each).
RULES: tuple[str, ...] = (
    "relative-path",
    "unresolvable",
    "live-location",
    "live-identity",
    "contains-live-location",
    "pi-state-outside-fixture-root",
    "outside-fixture-root",
    "changed-since-construction",
)


def _configuration(message: str) -> ControlRefusal:
    return ControlRefusal("configuration", message)


def _refused(rule: str, message: str) -> ControlRefusal:
    assert rule in RULES, rule
    return ControlRefusal("live-session-refused", f"{rule}: {message}")


def _optional_path(value: object, name: str) -> str | None:
    return None if value is None else _required_path(value, name)


def _required_path(value: object, name: str) -> str:
    if value is None:
        raise _configuration(f"{name} is missing: CHAT-03 has no default path")
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a str or os.PathLike[str], not {type(value).__name__}")
    text = os.fspath(value)
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a text path, not bytes")
    if not os.path.isabs(text):
        raise _configuration(f"{name} {text!r} is not an absolute path")
    return text


@dataclass(frozen=True, kw_only=True)
class LiveRoots:
    """Where a controller may act and what is live, all explicit (no default path anywhere).

    - `fixture_root`: every session file and claim root must be strictly inside its real path;
    - `home`: whose ``.pi``, ``.claude`` and ``.mosaic-dev`` are live (the real home in production, a
      scratch one in tests; never read from ``$HOME`` here);
    - `repository`: a checkout whose ``.pi/state`` is live, or None;
    - `data_root`: the configured data root, or None;
    - `registrations`: the paths seat registrations name (session directories or files).

    Every path is kept as an absolute ``str`` (a PathLike is converted; a list of registrations becomes a
    tuple). Raises `ControlRefusal` ``configuration`` when a required path is missing (None) or any path
    is relative; `TypeError` for a value that is not a text path (a programming error).
    """

    fixture_root: StrPath
    home: StrPath
    repository: StrPath | None = None
    data_root: StrPath | None = None
    registrations: tuple[StrPath, ...] = ()

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "fixture_root", _required_path(self.fixture_root, "the fixture root"))
        set_(self, "home", _required_path(self.home, "home"))
        set_(self, "repository", _optional_path(self.repository, "the repository"))
        set_(self, "data_root", _optional_path(self.data_root, "the data root"))
        if isinstance(self.registrations, (str, os.PathLike)):
            raise TypeError("registrations must be a sequence of paths, not one path")
        set_(self, "registrations", tuple(
            _required_path(p, "a registration path") for p in self.registrations))

    def live_locations(self) -> tuple[tuple[str, str], ...]:
        """Every live location as given, as (kind, absolute path), in a fixed order: the repository's
        ``.pi/state``, the three home directories, the data root, then each registration path."""
        out: list[tuple[str, str]] = []
        if self.repository is not None:
            repository = os.fspath(self.repository)
            out.append(("the repository's .pi/state", os.path.join(repository, ".pi", "state")))
        for name in HOME_LIVE_NAMES:
            out.append((f"home {name}", os.path.join(os.fspath(self.home), name)))
        if self.data_root is not None:
            out.append(("the data root", os.fspath(self.data_root)))
        for path in self.registrations:
            out.append(("a seat registration", os.fspath(path)))
        return tuple(out)


class _Unresolvable(Exception):
    """The real path of a path cannot be determined; the message says why."""


def _real_path(path: str) -> str:
    """The real path of the absolute `path`: every symlink in every component followed (``..`` applied
    to what the component before it resolved to, as the kernel does), and for a path that does not exist
    yet, the real path of its deepest existing ancestor with the missing rest appended as given.

    Raises `_Unresolvable` for a symlink loop (more than MAX_SYMLINKS links), a component that cannot be
    looked up (EACCES, ENAMETOOLONG, a NUL byte, any other OSError but ENOENT/ENOTDIR), or a ``..`` after
    a component that does not exist. Never opens or reads a file; reads only directory entries' metadata
    (lstat) and symlink targets (readlink).
    """
    pending = path.split("/")[::-1]  # a stack: the next component is last
    done = "/"  # resolved so far: exists, and contains no symlink
    missing: list[str] = []  # components past the deepest existing ancestor
    links = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if missing:
                raise _Unresolvable(f"'..' follows {missing[-1]!r}, which does not exist")
            done = os.path.dirname(done)
            continue
        if missing:
            missing.append(name)
            continue
        candidate = os.path.join(done, name)
        try:
            st = os.lstat(candidate)
        except (FileNotFoundError, NotADirectoryError):
            missing.append(name)
            continue
        except (OSError, ValueError) as exc:
            raise _Unresolvable(f"cannot look up {candidate!r}: {_why(exc)}") from None
        if not stat.S_ISLNK(st.st_mode):
            done = candidate
            continue
        links += 1
        if links > MAX_SYMLINKS:
            raise _Unresolvable(f"more than {MAX_SYMLINKS} symbolic links (a loop?) at {candidate!r}")
        try:
            target = os.readlink(candidate)
        except OSError as exc:
            raise _Unresolvable(f"cannot read the symlink {candidate!r}: {_why(exc)}") from None
        if target.startswith("/"):
            done = "/"
        pending.extend(target.split("/")[::-1])
    return os.path.join(done, *missing)


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return str(exc)


def _at_or_under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _strictly_under(path: str, root: str) -> bool:
    return path != root and _at_or_under(path, root)


def _identities(path: str) -> list[tuple[str, tuple[int, int]]]:
    """(real path, (st_dev, st_ino)) of `path` and every existing ancestor of it. `path` is a real path,
    so lstat sees no symlink but possibly a missing tail (skipped)."""
    out: list[tuple[str, tuple[int, int]]] = []
    current = path
    while True:
        try:
            st = os.lstat(current)
        except OSError:
            pass
        else:
            out.append((current, (st.st_dev, st.st_ino)))
        if current == "/":
            return out
        current = os.path.dirname(current)


def _pi_state_dirs(path: str) -> list[str]:
    """Every ``.../.pi/state`` directory the real `path` is at or under, outermost first."""
    parts = path.split("/")
    return ["/".join(parts[: i + 2]) for i in range(1, len(parts) - 1)
            if parts[i] == ".pi" and parts[i + 1] == "state"]


class LiveSessionGuard:
    """The brief §2 guard over one `LiveRoots`. Construction resolves the real path of the fixture root
    and of every live location once, and records the (st_dev, st_ino) of each live location that exists.

    Construction raises `ControlRefusal`:

    - ``configuration`` when the fixture root cannot be resolved, does not exist or is not a directory,
      or a live location cannot be resolved (the guard would not know what it protects);
    - ``live-session-refused`` when the fixture root is at or under a live location, is the same file as
      one, or is under any ``.pi/state`` directory (everything inside it would be refused).
    """

    def __init__(self, roots: LiveRoots) -> None:
        self.roots = roots
        fixture = os.fspath(roots.fixture_root)
        try:
            self.fixture_root: str = _real_path(fixture)
        except _Unresolvable as exc:
            raise _configuration(f"the fixture root {fixture!r} cannot be resolved: {exc}") from None
        if not os.path.isdir(self.fixture_root):
            raise _configuration(f"the fixture root {fixture!r} (real path {self.fixture_root!r}) is not an "
                                 "existing directory")
        live: list[tuple[str, str]] = []
        for kind, given in roots.live_locations():
            try:
                live.append((kind, _real_path(given)))
            except _Unresolvable as exc:
                raise _configuration(
                    f"the live location {kind} {given!r} cannot be resolved: {exc}") from None
        self.live_locations: tuple[tuple[str, str], ...] = tuple(live)
        self._live_ids: dict[tuple[int, int], tuple[str, str]] = {}
        for kind, real in self.live_locations:
            try:
                st = os.lstat(real)
            except OSError:
                continue  # not there (yet): protected by its path only
            self._live_ids.setdefault((st.st_dev, st.st_ino), (kind, real))
        refusal = self._live_rules(self.fixture_root, "the fixture root", contains=False)
        if refusal is None:
            outer = _pi_state_dirs(self.fixture_root)
            if outer:
                refusal = _refused("pi-state-outside-fixture-root",
                                   f"the fixture root {self.fixture_root!r} is under {outer[0]!r}")
        if refusal is not None:
            raise refusal

    def check(self, path: StrPath, *, what: str) -> str:
        """The real path of `path`, once the guard has found it strictly inside the fixture root and clear
        of every live location (the module docstring's rules 1-7, in that order).

        Raises `ControlRefusal` ``live-session-refused`` otherwise; the message starts with the rule's
        name (one of `RULES`) and names `what` (e.g. "session file", "claim root") and the locations
        involved, never anything read from a file (the guard reads no file content).
        """
        raw = os.fspath(path)
        if not isinstance(raw, str):
            raise TypeError("the guard checks text paths, not bytes")
        if not os.path.isabs(raw):
            raise _refused("relative-path", f"the {what} {raw!r} is not an absolute path; a relative path "
                                            "depends on the working directory and is never resolved")
        try:
            real = _real_path(raw)
        except _Unresolvable as exc:
            raise _refused("unresolvable", f"the {what} {raw!r}: {exc}") from None
        refusal = self._live_rules(real, f"the {what} {raw!r}", contains=True)
        if refusal is not None:
            raise refusal
        for state_dir in _pi_state_dirs(real):
            if not _strictly_under(state_dir, self.fixture_root):
                raise _refused("pi-state-outside-fixture-root",
                               f"the {what} {raw!r} resolves to {real!r}, under {state_dir!r}, which is not "
                               f"inside the fixture root {self.fixture_root!r}")
        if not _strictly_under(real, self.fixture_root):
            raise _refused("outside-fixture-root", f"the {what} {raw!r} resolves to {real!r}, which is not "
                                                   f"inside the fixture root {self.fixture_root!r}")
        return real

    def bind(self, path: StrPath, *, what: str, expected: str) -> str:
        """The bind-time check (brief §2 "again at bind time"; G3): `check` again, and the real path must
        still be `expected`, the one `check` returned at construction. Returns it.

        Raises `ControlRefusal` ``live-session-refused``: whatever `check` raises now (a path swapped for
        a live one), or ``changed-since-construction`` when it resolves elsewhere, even inside the
        fixture root.
        """
        real = self.check(path, what=what)
        if real != expected:
            raise _refused("changed-since-construction",
                           f"the {what} {os.fspath(path)!r} now resolves to {real!r}, not {expected!r} as at "
                           "construction")
        return real

    def _live_rules(self, real: str, subject: str, *, contains: bool) -> ControlRefusal | None:
        """Rules 3-5 for the real path `real`; `contains` adds rule 5. None when none refuses."""
        for kind, live in self.live_locations:
            if _at_or_under(real, live):
                return _refused("live-location", f"{subject} resolves to {real!r}, at or under {kind} "
                                                 f"({live!r})")
        for at, ident in _identities(real):
            if ident in self._live_ids:
                kind, live = self._live_ids[ident]
                return _refused("live-identity", f"{subject} resolves to {real!r}; {at!r} is the same file "
                                                 f"as {kind} ({live!r}): a hard link or a bind mount")
        if contains:
            for kind, live in self.live_locations:
                if _strictly_under(live, real):
                    return _refused("contains-live-location", f"{subject} resolves to {real!r}, which "
                                                              f"contains {kind} ({live!r})")
        return None
