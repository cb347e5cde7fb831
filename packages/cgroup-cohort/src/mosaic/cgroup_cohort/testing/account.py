"""The engine account: the unprivileged uid a contained engine runs under, in one place.

The engine of a contained cohort runs as a uid that owns no ancestor of its ``engine/`` cgroup, so a K13
escape gets EACCES (docs/cgroup-facts.md §4.4, §7.11; README "Containment (K13), honestly"). Every caller (the
real-kernel suites' lab, the demo, the controller's real-Pi tests and benchmarks, ``mosaic-controller
serve``) gets it from :func:`engine_account`.

What it must be: a **system account** (a uid from 1 to ``SYS_UID_MAX`` of /etc/login.defs), with **no
home** (``/nonexistent``, or a home directory that does not exist) and **no login shell**
(``/usr/sbin/nologin`` or ``false``), so nobody logs in as it and nothing is ever written into a home of
it. The name is ``cohorttest`` unless ``MOSAIC_ENGINE_USER`` names another (for a machine where that name
is taken by something else).

* Missing: created, as root, with ``useradd --system --no-create-home --home-dir /nonexistent --shell
  /usr/sbin/nologin --user-group`` (two creators at once: the loser finds the winner's account).
* Present with those properties: used as it is.
* Present with other properties (a login account of that name, uid 1001 made by ``useradd -m``): never
  modified; :class:`EngineAccountError` says in one line what differs and what to do.

``python -m mosaic.cgroup_cohort.testing.account [--check] [NAME]`` runs the same: it prints ``NAME UID GID``
and exits 0, or prints the one line and exits 3 (present with other properties) or 4 (missing and cannot be
created: not root, no useradd); ``--check`` never creates.
"""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Sequence

from .._ffi import Credentials

__all__ = ["ENGINE_USER", "ENGINE_USER_ENV", "NO_HOME", "NOLOGIN_SHELLS", "EngineAccountError", "account_problems",
           "engine_account", "engine_user_name", "main", "sys_uid_max"]

ENGINE_USER = "cohorttest"
ENGINE_USER_ENV = "MOSAIC_ENGINE_USER"
NO_HOME = "/nonexistent"
NOLOGIN_SHELLS = frozenset({"/usr/sbin/nologin", "/sbin/nologin", "/usr/bin/false", "/bin/false"})
USERADD = ("--system", "--no-create-home", "--home-dir", NO_HOME, "--shell", "/usr/sbin/nologin", "--user-group",
           "--comment", "Mosaic engine (contained cohorts)")

# Exit statuses of `python -m ...account` (README "Run it").
EXIT_OTHER_PROPERTIES = 3
EXIT_CANNOT_CREATE = 4


class EngineAccountError(Exception):
    """The engine account cannot be used: ``kind`` is ``"other-properties"`` (it exists as something else;
    left unchanged) or ``"cannot-create"`` (missing, and this process cannot create it). ``str()`` is one
    line saying what to do."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def exit_status(self) -> int:
        return EXIT_OTHER_PROPERTIES if self.kind == "other-properties" else EXIT_CANNOT_CREATE


def engine_user_name() -> str:
    """``MOSAIC_ENGINE_USER`` when set, else ``cohorttest``."""
    return os.environ.get(ENGINE_USER_ENV) or ENGINE_USER


def sys_uid_max(login_defs: str = "/etc/login.defs") -> int:
    """The highest system uid: ``SYS_UID_MAX`` of login.defs, else ``UID_MIN - 1``, else 999 (shadow's
    defaults, which Debian's login.defs leaves commented out)."""
    values: dict[str, int] = {}
    try:
        with open(login_defs, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] in ("SYS_UID_MAX", "UID_MIN") and parts[1].isdigit():
                    values[parts[0]] = int(parts[1])
    except OSError:
        pass
    if "SYS_UID_MAX" in values:
        return values["SYS_UID_MAX"]
    return values["UID_MIN"] - 1 if "UID_MIN" in values else 999


def account_problems(entry: pwd.struct_passwd, *, uid_max: int | None = None) -> list[str]:
    """What makes ``entry`` other than a system account with no home and no login shell (empty: none)."""
    uid_max = sys_uid_max() if uid_max is None else uid_max
    problems = []
    if not 1 <= entry.pw_uid <= uid_max:
        problems.append(f"uid {entry.pw_uid} is not a system uid (1-{uid_max})")
    if entry.pw_dir != NO_HOME and os.path.lexists(entry.pw_dir):
        problems.append(f"its home {entry.pw_dir} exists")
    if entry.pw_shell not in NOLOGIN_SHELLS:
        problems.append(f"its shell {entry.pw_shell or '(empty: /bin/sh)'} allows a login")
    return problems


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _create(name: str) -> None:
    if os.geteuid() != 0:
        raise EngineAccountError("cannot-create", f"the engine account {name} does not exist and only root can "
                                                  "create it: run as root")
    useradd = shutil.which("useradd") or next((p for p in ("/usr/sbin/useradd", "/sbin/useradd")
                                               if os.access(p, os.X_OK)), None)
    if useradd is None:
        raise EngineAccountError("cannot-create", "useradd is not installed (Debian: apt-get install passwd); "
                                                  f"it creates the engine account {name}")
    # A concurrent creator makes useradd fail "already exists": the lookup below then finds its account.
    subprocess.run([useradd, *USERADD, name], capture_output=True, stdin=subprocess.DEVNULL, check=False)


def engine_account(name: str | None = None, *, create: bool = True) -> Credentials:
    """The engine account's credentials (uid, gid, no supplementary groups), created as a system account
    when it is missing and ``create``. Raises :class:`EngineAccountError` (one line) when it exists with
    other properties (never modified) or cannot be created."""
    name = name or engine_user_name()
    entry = _lookup(name)
    if entry is None:
        if not create:
            raise EngineAccountError("cannot-create", f"the engine account {name} does not exist yet (it is "
                                                      "created as a system account on the first run as root)")
        _create(name)
        entry = _lookup(name)
        if entry is None:
            raise EngineAccountError("cannot-create", f"useradd could not create the system account {name}: "
                                                      f"useradd {' '.join(USERADD[:-2])} {name}")
    problems = account_problems(entry)
    if problems:
        raise EngineAccountError(
            "other-properties",
            f"the account {name} exists but is not a system account with no home and no login shell "
            f"({', '.join(problems)}); it is left unchanged: remove it (userdel {name}) so it is created as "
            f"one, or name another engine account in {ENGINE_USER_ENV}")
    return Credentials(entry.pw_uid, entry.pw_gid, ())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mosaic.cgroup_cohort.testing.account",
                                     description="Create (as root) or check the engine account.")
    parser.add_argument("name", nargs="?", help=f"the account (default: ${ENGINE_USER_ENV} or {ENGINE_USER})")
    parser.add_argument("--check", action="store_true", help="never create it; only check what exists")
    args = parser.parse_args(argv)
    name = args.name or engine_user_name()
    try:
        creds = engine_account(name, create=not args.check)
    except EngineAccountError as e:
        print(f"engine account: {e}", file=sys.stderr)
        return e.exit_status
    print(f"{name} {creds.uid} {creds.gid}")
    return 0


def __dir__() -> list[str]:
    return sorted(__all__)


if __name__ == "__main__":
    raise SystemExit(main())
