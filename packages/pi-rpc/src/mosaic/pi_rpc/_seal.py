"""The seal: the only Pi argv a Mosaic engine may run with, as an allow-list (seed README "Seal").

The sealed argv is exactly::

    --mode rpc --no-extensions --no-prompt-templates --no-themes --no-context-files --no-skills
    --session <absolute file> [--model V] [--provider V] [--thinking V]

with each optional flag at most once, in any order, each with one plain value. Anything else refuses
``unsealed-engine``: another flag or a missing one, a second ``--mode`` or ``--session`` (Pi keeps the last
of each, P/dist/cli/args.js 40-80), a session or output flag (``--no-session``, ``--fork``, ``--export``,
``--print``, ``--continue``, ...), an ``-e``/``--extension``, a ``--flag=value`` form (args.js 226-229 turns
it into an extension flag), or a bare word (Pi reads it as a prompt, args.js 245). A plain value is a
non-empty string that does not start with ``-`` or ``@`` (args.js 222: ``@x`` is a file argument) and has
no NUL; a ``--thinking`` value must be one of Pi's levels (args.js 6), since Pi only warns about others.

**Decision: the seal adds ``--no-context-files`` and ``--no-skills``** (FACTS.md Part 2 "Network and
filesystem reach"): without them the sealed binary reads ``AGENTS.md``/``CLAUDE.md`` (and variants) from
every ancestor of the session's cwd up to ``/`` into the system prompt, and discovers ``.agents/skills`` in
every ancestor up to the git root or ``/`` (and ``~/.agents/skills``), which adds ``skill:`` commands and
skill descriptions. Those files lie outside the fixture root, outside the pin and outside anything the
controller records, so two runs of the same session could get different instructions from whatever
happens to sit in ``/tmp`` or ``/``. Skills cannot be invoked anyway (slash text refuses at admission), so
``--no-skills`` loses nothing; ``--no-context-files`` also drops a project's own ``AGENTS.md``, a loss the
README records. Both flags exist in 0.85.1 (args.js 164, 173).

The pre-arguments (the seed's ``engine.preArgs``, between the command and Pi's argv; the Pi CLI path by
default, the fake engine's options under a test hook) are checked too: a token Pi would parse as one of its
own options refuses, so ``--extension`` cannot ride in front of the sealed argv.

**The fixture extension (issue 33), one allow-list entry, off by default.** Pi loads an explicit
``--extension <file>`` even with ``--no-extensions`` (args.js 294), so the seal refuses every extension, with
one exception for test seats: with ``fixture_extension=True`` (the seal's explicit option; every function
here defaults it to off) the argv may carry ``--extension <path>`` once, after ``--session``, where the path
is exactly :data:`FIXTURE_EXTENSION_PATH` (this package's ``testing/fixture_extension/dialogs.js``, absolute
and with no symlink on the way) and the file there, opened without following a symlink, is a regular file
whose sha256 is :data:`FIXTURE_EXTENSION_SHA256`. Any other path, the right path with other bytes, a
symlink, the short form ``-e``, a second ``--extension`` refuse ``unsealed-engine``; so does the fixture
without the option. ``--no-extensions`` stays required, so discovery stays off and only the named file
loads. Pi loads the file through jiti, which by default keeps a transpile cache in ``$TMPDIR/jiti`` (``/tmp``
when unset) and runs a cached file in place of the source when its trailer names the source's hash: a
planted cache file runs other code under the right path and hash (seen on the real Pi: docs/pi-0.85.1.md
"The fixture extension"). So the engine's environment must carry :data:`FIXTURE_EXTENSION_ENV`
(``JITI_FS_CACHE=false``) and no other ``JITI_*`` variable (``JITI_ALIAS`` remaps imports):
:func:`check_fixture_env`. The seal cannot see where a seat lives; the controller refuses the option for a
seat outside its fixture root (the live-session guard's side).
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from mosaic.pi_rpc._refusal import PiRpcRefusal

__all__ = [
    "FIXTURE_EXTENSION_ENV",
    "FIXTURE_EXTENSION_PATH",
    "FIXTURE_EXTENSION_SHA256",
    "OPTIONAL_FLAGS",
    "SEALED_FLAGS",
    "THINKING_LEVELS",
    "build_sealed_argv",
    "check_fixture_env",
    "check_pre_args",
    "check_seal",
]

SEALED_FLAGS: tuple[str, ...] = (
    "--mode",
    "rpc",
    "--no-extensions",
    "--no-prompt-templates",
    "--no-themes",
    "--no-context-files",
    "--no-skills",
)
OPTIONAL_FLAGS: tuple[str, ...] = ("--model", "--provider", "--thinking")
EXTENSION_FLAG = "--extension"

# The one allow-list entry for an extension: this package's fixture, by its exact path and its bytes.
FIXTURE_EXTENSION_PATH: str = os.path.join(
    os.path.realpath(os.path.dirname(os.path.abspath(__file__))), "testing", "fixture_extension", "dialogs.js")
FIXTURE_EXTENSION_SHA256 = "b05474ffee44830afc891bdf8eddc9aea2edf89b9c937bc20c0fd852833e3747"
FIXTURE_EXTENSION_ENV: Mapping[str, str] = MappingProxyType({"JITI_FS_CACHE": "false"})
_FIXTURE_MAX_BYTES = 1 << 20  # the fixture is a few KiB; a larger file is not it, and is not read whole
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high", "xhigh", "max")

# Every option Pi 0.85.1's parser knows (P/dist/cli/args.js 23-220), long and short. A pre-argument equal
# to one of these (or a --name=value form of a long one) would be read by Pi, so it refuses.
PI_OPTIONS: frozenset[str] = frozenset({
    "--", "--help", "-h", "--version", "-v", "--mode", "--continue", "-c", "--resume", "-r", "--provider",
    "--model", "--api-key", "--system-prompt", "--append-system-prompt", "--name", "-n", "--no-session",
    "--session", "--session-id", "--fork", "--session-dir", "--models", "--no-tools", "-nt",
    "--no-builtin-tools", "-nbt", "--tools", "-t", "--exclude-tools", "-xt", "--thinking", "--print", "-p",
    "--export", "--extension", "-e", "--no-extensions", "-ne", "--skill", "--prompt-template", "--theme",
    "--use-theme", "--no-skills", "-ns", "--no-prompt-templates", "-np", "--no-themes", "--no-context-files",
    "-nc", "--list-models", "--tui-mode", "--verbose", "--approve", "-a", "--no-approve", "-na", "--offline",
})


def _refuse(message: str) -> PiRpcRefusal:
    return PiRpcRefusal("unsealed-engine", message)


def _plain(value: str) -> bool:
    return bool(value) and not value.startswith(("-", "@")) and "\0" not in value


def _fixture_file_refusal(value: str) -> PiRpcRefusal | None:
    """``None`` when ``value`` names the fixture extension: exactly :data:`FIXTURE_EXTENSION_PATH`, no symlink
    on the way or at the end, a regular file whose bytes hash to :data:`FIXTURE_EXTENSION_SHA256`."""
    if value != FIXTURE_EXTENSION_PATH:
        return _refuse(f"--extension {value!r} is not on the seal's allow-list (only the fixture extension "
                       f"{FIXTURE_EXTENSION_PATH!r} may load)")
    if os.path.realpath(value) != value:
        return _refuse(f"--extension {value!r} goes through a symlink")
    try:
        fd = os.open(value, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        return _refuse(f"--extension {value!r} cannot be opened without following a symlink: {exc.strerror}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return _refuse(f"--extension {value!r} is not a regular file")
        digest, size = hashlib.sha256(), 0
        while size <= _FIXTURE_MAX_BYTES:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    except OSError as exc:
        return _refuse(f"--extension {value!r} cannot be read: {exc.strerror}")
    finally:
        os.close(fd)
    if size > _FIXTURE_MAX_BYTES or digest.hexdigest() != FIXTURE_EXTENSION_SHA256:
        return _refuse(f"--extension {value!r} does not hold the fixture's bytes (sha256 "
                       f"{FIXTURE_EXTENSION_SHA256} expected)")
    return None


def check_fixture_env(env: Mapping[str, str]) -> PiRpcRefusal | None:
    """``None`` when ``env`` (the engine's whole environment) may run the fixture extension: it carries
    :data:`FIXTURE_EXTENSION_ENV` exactly and no other ``JITI_*`` variable; else ``unsealed-engine``."""
    for key, value in FIXTURE_EXTENSION_ENV.items():
        if env.get(key) != value:
            return _refuse(f"the fixture extension needs {key}={value} in the engine's environment (jiti's "
                           f"transpile cache would run a cached file in place of the hashed one)")
    extra = sorted(k for k in env if k.startswith("JITI_") and k not in FIXTURE_EXTENSION_ENV)
    if extra:
        return _refuse(f"{', '.join(extra)} would change how jiti loads the fixture extension")
    return None


def check_seal(argv: Sequence[str], *, fixture_extension: bool = False) -> PiRpcRefusal | None:
    """``None`` when ``argv`` (Pi's arguments, after the CLI path) is sealed, else the ``unsealed-engine``
    refusal naming the first token that breaks the allow-list. Never raises for a bad argv.

    ``fixture_extension`` (off by default) lets ``--extension`` name the fixture extension, once, after
    ``--session`` (module doc); without it every extension refuses."""
    args = list(argv)
    if not all(isinstance(a, str) for a in args):
        return _refuse("every argument must be a string")
    head = list(SEALED_FLAGS)
    if args[: len(head)] != head:
        for i, want in enumerate(head):
            got = args[i] if i < len(args) else None
            if got != want:
                return _refuse(f"argument {i} must be {want!r}, found {got!r}")
    rest = args[len(head):]
    if len(rest) < 2 or rest[0] != "--session":
        return _refuse(f"--session <absolute file> must follow the sealed flags, found {rest[:2]!r}")
    session = rest[1]
    if not _plain(session) or not os.path.isabs(session):
        return _refuse(f"--session needs one absolute file path, found {session!r}")
    if os.path.normpath(session) != session:
        return _refuse(f"--session path {session!r} is not normalised (no '.', '..' or '//' parts)")
    seen: set[str] = set()
    extra = rest[2:]
    i = 0
    while i < len(extra):
        flag = extra[i]
        if flag == EXTENSION_FLAG:
            if not fixture_extension:
                return _refuse(f"{flag!r} refuses: the seal loads no extension (the fixture extension only "
                               "with the seal's fixture option, for a test seat)")
            if flag in seen:
                return _refuse(f"{flag} appears twice (only the fixture extension may load, once)")
            seen.add(flag)
            path = extra[i + 1] if i + 1 < len(extra) else ""
            refusal = _fixture_file_refusal(path)
            if refusal is not None:
                return refusal
            i += 2
            continue
        if flag not in OPTIONAL_FLAGS:
            what = "a bare word, which Pi reads as a prompt" if not flag.startswith("-") else "not allowed"
            return _refuse(f"{flag!r} after --session is {what}; only {', '.join(OPTIONAL_FLAGS)} may follow")
        if flag in seen:
            return _refuse(f"{flag} appears twice (Pi keeps the last one)")
        seen.add(flag)
        if i + 1 >= len(extra) or not _plain(extra[i + 1]):
            value = extra[i + 1] if i + 1 < len(extra) else None
            return _refuse(f"{flag} needs one plain value (not starting with '-' or '@'), found {value!r}")
        if flag == "--thinking" and extra[i + 1] not in THINKING_LEVELS:
            return _refuse(f"--thinking {extra[i + 1]!r} is not one of {', '.join(THINKING_LEVELS)}")
        i += 2
    return None


def check_pre_args(pre_args: Sequence[str]) -> PiRpcRefusal | None:
    """``None`` unless a pre-argument is one of Pi's own options (``--extension``, ``--no-session``, ...,
    or ``--name=value`` of one): then the ``unsealed-engine`` refusal."""
    for tok in pre_args:
        if not isinstance(tok, str):
            return _refuse("every pre-argument must be a string")
        name = tok.split("=", 1)[0] if tok.startswith("--") else tok
        if name in PI_OPTIONS:
            return _refuse(f"pre-argument {tok!r} is a Pi option; it would change the sealed engine")
    return None


def build_sealed_argv(session_file: str, *, model: str | None = None, provider: str | None = None,
                      thinking: str | None = None, fixture_extension: bool = False) -> list[str]:
    """The sealed argv for ``session_file``; raises the ``unsealed-engine`` :class:`PiRpcRefusal` when a
    value is not plain or the path is not absolute and normalised (the same checks as :func:`check_seal`).
    ``fixture_extension`` appends ``--extension`` :data:`FIXTURE_EXTENSION_PATH` (checked: path and bytes)."""
    argv = [*SEALED_FLAGS, "--session", session_file]
    for flag, value in (("--model", model), ("--provider", provider), ("--thinking", thinking)):
        if value is not None:
            argv += [flag, value]
    if fixture_extension:
        argv += [EXTENSION_FLAG, FIXTURE_EXTENSION_PATH]
    refusal = check_seal(argv, fixture_extension=fixture_extension)
    if refusal is not None:
        raise refusal
    return argv
