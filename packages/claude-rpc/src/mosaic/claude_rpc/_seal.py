"""The seal for Claude: the only argv and environment a Mosaic engine may run the pinned binary with.

The sealed arguments (after the binary's path) are exactly::

    -p --input-format stream-json --output-format stream-json --verbose --permission-prompt-tool stdio
    --setting-sources "" --strict-mcp-config --mcp-config {"mcpServers":{}}
    (--session-id <uuid> | --resume <uuid>)
    [--model <plain value>] [--include-partial-messages]

the two optional flags at most once each, in any order. Anything else refuses ``unsealed-engine``: a flag
missing, moved or repeated, a second session flag, ``--fork-session``, ``--resume-session-at``,
``--continue``, ``--settings``, ``--add-dir``, ``--permission-mode``, ``--dangerously-skip-permissions``,
``--flag=value`` forms, a bare word (a prompt), a session id that is not a lowercase canonical UUID.

Why each required flag (docs/claude-2.1.283.md "The seal", every line verified on the binary by
``tests_smoke/test_seal_real.py``):

* ``-p --input-format stream-json --output-format stream-json --verbose``: headless, one JSON object per
  line each way (``--verbose`` is what makes ``-p`` write every message, not only the result).
* ``--permission-prompt-tool stdio``: every permission the engine would ask a person for comes to the
  controller as a ``can_use_tool`` control request (hidden from ``--help``; the binary's own text: "permission
  prompts reach the host over stdio").
* ``--setting-sources ""``: no user, project or local settings file is read (the binary parses ``""`` as the
  empty list). Seen on the binary: with it, the ``CLAUDE.md``, ``CLAUDE.local.md``, ``AGENTS.md``, the
  ``.claude/{skills,commands,agents,rules,output-styles}`` and ``.claude/settings*.json`` planted in the cwd
  and in an ancestor, and the skills, commands, agents and output styles planted in ``CLAUDE_CONFIG_DIR``,
  reach neither the model request nor the init message; without it every one of them does.
* ``--strict-mcp-config --mcp-config {"mcpServers":{}}``: the MCP servers are exactly the empty set given
  here ("Only use MCP servers from --mcp-config, ignoring all other MCP configurations").

``--settings`` is refused, not pinned: flag settings are the one source ``--setting-sources`` cannot turn
off, so the seal passes none. The environment (:func:`check_env`) is ``env -i`` style: exactly
:data:`REQUIRED_ENV` plus the optional :data:`OPTIONAL_ENV`, the three switches set to ``1`` (auto-update
off, non-essential traffic off, ``CLAUDE.md`` loading off: the binary's ``CLAUDE_CODE_DISABLE_CLAUDE_MDS``
returns early from every ``CLAUDE.md`` loader, the managed one in ``/etc/claude-code`` included), absolute
paths, and ``CLAUDE_CODE_TMPDIR`` a private directory (a real directory, mode 0700, ours), inside the
execution's scratch directory when one is named.

**The managed policy** in :data:`MANAGED_POLICY_DIR` (``/etc/claude-code``: ``managed-settings.json``,
``managed-settings.d/``, ``managed-mcp.json``) is read whatever the flags say: the binary's path function
ignores ``CLAUDE_CODE_MANAGED_SETTINGS_PATH`` on this build and ``--setting-sources`` always keeps the policy
source. So :func:`check_host` refuses ``unsealed-engine`` while that directory exists (or cannot be proved
absent); the seal never creates or hides it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mosaic.claude_rpc._refusal import ClaudeRpcRefusal

__all__ = [
    "EMPTY_MCP_CONFIG",
    "MANAGED_POLICY_DIR",
    "OPTIONAL_ENV",
    "OPTIONAL_FLAGS",
    "REQUIRED_ENV",
    "SEALED_FLAGS",
    "SESSION_FLAGS",
    "SWITCHES",
    "SealedLaunch",
    "build_sealed_args",
    "check_env",
    "check_host",
    "check_launch",
    "check_seal",
    "is_session_uuid",
    "seal_launch",
    "sealed_env",
]

EMPTY_MCP_CONFIG = '{"mcpServers":{}}'
SEALED_FLAGS: tuple[str, ...] = (
    "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
    "--permission-prompt-tool", "stdio",
    "--setting-sources", "", "--strict-mcp-config", "--mcp-config", EMPTY_MCP_CONFIG,
)
SESSION_FLAGS: tuple[str, ...] = ("--session-id", "--resume")
# flag -> takes a value
OPTIONAL_FLAGS: Mapping[str, bool] = {"--model": True, "--include-partial-messages": False}

SWITCHES: Mapping[str, str] = {
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_CLAUDE_MDS": "1",
}
REQUIRED_ENV: tuple[str, ...] = ("PATH", "HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR", *SWITCHES)
# ANTHROPIC_API_KEY: the fake key in tests; never read from the caller's environment.
OPTIONAL_ENV: tuple[str, ...] = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")
MANAGED_POLICY_DIR = "/etc/claude-code"

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")


def _refuse(message: str) -> ClaudeRpcRefusal:
    return ClaudeRpcRefusal("unsealed-engine", message)


def _plain(value: str) -> bool:
    return bool(value) and not value.startswith("-") and "\0" not in value and value.strip() == value


def is_session_uuid(value: object) -> bool:
    """True for a lowercase canonical UUID (what ``--session-id`` needs and what the claim stores)."""
    return isinstance(value, str) and _UUID.match(value) is not None


def check_seal(args: Sequence[str]) -> ClaudeRpcRefusal | None:
    """``None`` when ``args`` (the binary's arguments, after its path) are sealed, else the
    ``unsealed-engine`` refusal naming the first token that breaks the allow-list. Never raises."""
    argv = list(args)
    if not all(isinstance(a, str) for a in argv):
        return _refuse("every argument must be a string")
    head = list(SEALED_FLAGS)
    for i, want in enumerate(head):
        got = argv[i] if i < len(argv) else None
        if got != want:
            return _refuse(f"argument {i} must be {want!r}, found {got!r}")
    rest = argv[len(head):]
    if len(rest) < 2 or rest[0] not in SESSION_FLAGS:
        return _refuse(f"--session-id <uuid> or --resume <uuid> must follow the sealed flags, found {rest[:2]!r}")
    if not is_session_uuid(rest[1]):
        return _refuse(f"{rest[0]} needs one lowercase canonical UUID, found {rest[1]!r}")
    seen: set[str] = set()
    extra = rest[2:]
    i = 0
    while i < len(extra):
        flag = extra[i]
        if flag not in OPTIONAL_FLAGS:
            what = "a bare word, which the binary reads as a prompt" if not flag.startswith("-") else "not allowed"
            return _refuse(f"{flag!r} after the session flag is {what}; only {', '.join(OPTIONAL_FLAGS)} may follow")
        if flag in seen:
            return _refuse(f"{flag} appears twice")
        seen.add(flag)
        if OPTIONAL_FLAGS[flag]:
            value = extra[i + 1] if i + 1 < len(extra) else None
            if value is None or not _plain(value):
                return _refuse(f"{flag} needs one plain value (not empty, not starting with '-'), found {value!r}")
            i += 2
        else:
            i += 1
    return None


def build_sealed_args(*, session_id: str, resume: bool, model: str | None = None,
                      partial_messages: bool = False) -> list[str]:
    """The sealed arguments for a new session (``resume=False``: ``--session-id``) or the claimed one
    (``--resume``); raises the ``unsealed-engine`` refusal for a value :func:`check_seal` refuses."""
    args = [*SEALED_FLAGS, "--resume" if resume else "--session-id", session_id]
    if model is not None:
        args += ["--model", model]
    if partial_messages:
        args.append("--include-partial-messages")
    refusal = check_seal(args)
    if refusal is not None:
        raise refusal
    return args


_Owner = int | range | None  # a uid; a range (one of these uids, or ours: decided at launch); None: ours


def _private_dir(path: str, what: str, owner: _Owner = None) -> ClaudeRpcRefusal | None:
    if isinstance(owner, range):  # the uid of each launch is allocated later: ours until then, or a range uid's
        ok: range | tuple[int, ...] = owner
        want = f"this process's or a uid of {owner.start}-{owner.stop - 1}"
    else:
        ok = (os.geteuid() if owner is None else owner,)
        want = f"uid {ok[0]}'s"
    try:
        st = os.lstat(path)
    except OSError as exc:
        return _refuse(f"{what} {path!r} cannot be checked: {exc.strerror}")
    if not stat.S_ISDIR(st.st_mode):
        return _refuse(f"{what} {path!r} is not a directory (a symlink is refused)")
    mine = st.st_uid in ok or (isinstance(owner, range) and st.st_uid == os.geteuid())
    if stat.S_IMODE(st.st_mode) != 0o700 or not mine:
        return _refuse(f"{what} {path!r} must be {want} with mode 0700, found uid {st.st_uid} mode "
                       f"{stat.S_IMODE(st.st_mode):o}")
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def check_env(env: Mapping[str, str], *, scratch: str | os.PathLike[str] | None = None,
              owner: _Owner = None) -> ClaudeRpcRefusal | None:
    """``None`` when ``env`` is a sealed environment, else the ``unsealed-engine`` refusal.

    Exactly :data:`REQUIRED_ENV` plus any of :data:`OPTIONAL_ENV`; the switches as in :data:`SWITCHES`; PATH
    a list of absolute directories; HOME, CLAUDE_CONFIG_DIR and CLAUDE_CODE_TMPDIR absolute and normalised;
    CLAUDE_CODE_TMPDIR a real directory of ours with mode 0700 (``owner``'s when given: the uid a contained
    engine runs as, another than its controller's; a ``range``: ours or one of its uids, for a launch whose
    uid is allocated later, checked again with that uid), and inside ``scratch`` when it is given.
    """
    keys = set(env)
    missing = [k for k in REQUIRED_ENV if k not in keys]
    if missing:
        return _refuse(f"the environment lacks {', '.join(missing)}")
    extra = sorted(keys - set(REQUIRED_ENV) - set(OPTIONAL_ENV))
    if extra:
        return _refuse(f"the environment may not carry {', '.join(extra)} (env -i: only the sealed keys)")
    for key, value in env.items():
        if not isinstance(value, str) or "\0" in value:
            return _refuse(f"{key} must be a string without NUL")
    for key, want in SWITCHES.items():
        if env[key] != want:
            return _refuse(f"{key} must be {want!r}, found {env[key]!r}")
    if not all(p and os.path.isabs(p) for p in env["PATH"].split(":")):
        return _refuse(f"PATH must list absolute directories only, found {env['PATH']!r}")
    for key in ("HOME", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_TMPDIR"):
        value = env[key]
        if not os.path.isabs(value) or os.path.normpath(value) != value:
            return _refuse(f"{key} must be an absolute, normalised path, found {value!r}")
    tmp = env["CLAUDE_CODE_TMPDIR"]
    if scratch is not None and not _inside(tmp, os.path.normpath(os.fspath(scratch))):
        return _refuse(f"CLAUDE_CODE_TMPDIR {tmp!r} is not inside the execution's scratch {os.fspath(scratch)!r}")
    return _private_dir(tmp, "CLAUDE_CODE_TMPDIR", owner)


def check_host(policy_dir: str | os.PathLike[str] = MANAGED_POLICY_DIR) -> ClaudeRpcRefusal | None:
    """``None`` when the managed policy directory is absent, else ``unsealed-engine``: the binary reads
    ``managed-settings.json``, ``managed-settings.d/`` and ``managed-mcp.json`` there whatever the flags say.
    A directory that cannot be proved absent (``EACCES``, ...) refuses too."""
    path = os.fspath(policy_dir)
    try:
        os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _refuse(f"cannot prove that the managed policy {path!r} is absent: {exc.strerror}")
    return _refuse(f"the managed policy {path!r} exists; the binary would apply it over every flag of the seal")


def sealed_env(scratch: str | os.PathLike[str], *, config_dir: str | os.PathLike[str] | None = None,
               base_url: str | None = None, api_key: str | None = None,
               path: str = "/usr/bin:/bin", owner: _Owner = None) -> dict[str, str]:
    """A sealed environment for one execution whose scratch directory is ``scratch`` (absolute): HOME is
    ``scratch/home``, CLAUDE_CODE_TMPDIR ``scratch/tmp`` (both created mode 0700), CLAUDE_CONFIG_DIR
    ``config_dir`` or ``scratch/claude`` (created 0700 when it is the scratch one). ``api_key`` is only ever a
    fake key in tests. ``owner``: the uid a contained engine runs as; the directories made here are given to it
    (``chown``, which needs the privilege to) and checked as its. A ``range`` (each launch's uid allocated
    later from it): nothing is given to anyone here, the directories are checked as ours or a range uid's.
    Raises the ``unsealed-engine`` refusal when the
    result does not pass :func:`check_env`."""
    base = os.path.normpath(os.fspath(scratch))
    if not os.path.isabs(base):
        raise _refuse(f"the scratch directory must be absolute, found {base!r}")
    env = {"PATH": path, "HOME": os.path.join(base, "home"),
           "CLAUDE_CONFIG_DIR": os.path.normpath(os.fspath(config_dir)) if config_dir is not None
           else os.path.join(base, "claude"),
           "CLAUDE_CODE_TMPDIR": os.path.join(base, "tmp"), **SWITCHES}
    made = ["HOME", "CLAUDE_CODE_TMPDIR"] + (["CLAUDE_CONFIG_DIR"] if config_dir is None else [])
    for key in made:
        os.makedirs(env[key], mode=0o700, exist_ok=True)
        if isinstance(owner, int):
            os.chown(env[key], owner, -1, follow_symlinks=False)
    if base_url is not None:
        env["ANTHROPIC_BASE_URL"] = base_url
    if api_key is not None:
        env["ANTHROPIC_API_KEY"] = api_key
    refusal = check_env(env, scratch=base, owner=owner)
    if refusal is not None:
        raise refusal
    return env


@dataclass(frozen=True)
class SealedLaunch:
    """One sealed launch: ``argv`` = ``command`` + ``args``, exactly ``env``, in ``cwd``.

    ``pinned`` is True when ``command`` is the pinned binary alone (checked with L7 at construction and
    again by :func:`check_launch`); a test's fake engine command is not pinned and says so.
    """

    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: str
    session_id: str
    resume: bool
    pinned: bool
    scratch: str
    # the uid the engine runs as, when not ours (its private directories are its); a range: allocated later
    owner: _Owner = None

    @property
    def argv(self) -> list[str]:
        return [*self.command, *self.args]


def seal_launch(claude_dir: str | os.PathLike[str] | None, *, session_id: str, resume: bool,
                scratch: str | os.PathLike[str], cwd: str | os.PathLike[str],
                config_dir: str | os.PathLike[str] | None = None, base_url: str | None = None,
                api_key: str | None = None, model: str | None = None, partial_messages: bool = False,
                command: Sequence[str] | None = None,
                policy_dir: str | os.PathLike[str] = MANAGED_POLICY_DIR, owner: _Owner = None) -> SealedLaunch:
    """The sealed launch of the pinned binary in ``claude_dir`` (L7: the whole pin is checked first and a
    mismatch raises ``engine-pin-mismatch``; nothing is spawned), or of ``command`` (a fake engine's
    test hook, ``claude_dir`` ``None``: not the pinned engine, not pin-checked). Raises ``unsealed-engine``
    for the argv, the environment or the host (:func:`check_host`)."""
    if command is None:
        if claude_dir is None:
            raise ValueError("claude_dir is needed unless a test's command is given")
        from mosaic.claude_rpc._pin import engine_binary  # the pin check runs here, at construction

        cmd: tuple[str, ...] = (str(engine_binary(claude_dir)),)
        pinned = True
    else:
        cmd = tuple(command)
        if not cmd or not all(isinstance(c, str) for c in cmd):
            raise _refuse("the engine command must be a non-empty list of strings")
        pinned = False
    refusal = check_host(policy_dir)
    if refusal is not None:
        raise refusal
    args = build_sealed_args(session_id=session_id, resume=resume, model=model, partial_messages=partial_messages)
    env = sealed_env(scratch, config_dir=config_dir, base_url=base_url, api_key=api_key, owner=owner)
    where = os.path.normpath(os.fspath(cwd))
    if not os.path.isabs(where) or not Path(where).is_dir():
        raise _refuse(f"the engine's cwd must be an existing absolute directory, found {where!r}")
    return SealedLaunch(cmd, tuple(args), env, where, session_id, resume, pinned, os.path.normpath(os.fspath(scratch)),
                        owner)


def check_launch(launch: SealedLaunch, *, policy_dir: str | os.PathLike[str] = MANAGED_POLICY_DIR) \
        -> ClaudeRpcRefusal | None:
    """The checks again, at bind: L7 on the binary (when ``launch.pinned``), the argv, the environment and
    the host. ``None`` or the first refusal; never raises."""
    if launch.pinned:
        from mosaic.claude_rpc._pin import check_binary

        if len(launch.command) != 1:
            return _refuse("a pinned launch runs the binary alone, with no pre-arguments")
        refusal = check_binary(launch.command[0])
        if refusal is not None:
            return refusal
    refusal = check_seal(launch.args)
    if refusal is not None:
        return refusal
    session_flag = "--resume" if launch.resume else "--session-id"
    if launch.args[len(SEALED_FLAGS): len(SEALED_FLAGS) + 2] != (session_flag, launch.session_id):
        return _refuse(f"the argv does not name {session_flag} {launch.session_id}")
    refusal = check_env(launch.env, scratch=launch.scratch, owner=launch.owner)
    if refusal is not None:
        return refusal
    return check_host(policy_dir)

