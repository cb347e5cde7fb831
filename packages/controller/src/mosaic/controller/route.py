"""The cohort route: how a controller's engine is contained on this host (`mosaic.controller.route`).

One choice, made the same way by `mosaic-controller serve` and by the main job's demo (ci/demo.py):

* a systemd user manager answers this process (`systemctl --user show-environment`): each engine in a
  transient scope (`ScopeLauncher`);
* otherwise a direct cgroup: a parent cgroup, named by the caller, made under the cgroup2 mount found in
  /proc/self/mountinfo, and each engine in a cgroup under it (`DirectCgroupLauncher`; needs root, or a
  delegated writable subtree).

In both the engine runs under the `engine` credentials (the engine account), so the cohort is contained
(K13); `engine_can_read(tree)` says whether that account can run the Pi install where it is (else the
caller gives it a readable copy, `mosaic.controller.testing.readable_install`). Why the route was chosen is said in plain words: systemctl's D-Bus error ("Failed to connect to bus:
No medium found") becomes "no systemd user manager". `RouteUnavailable` (one line) when neither route can
be used here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mosaic.cgroup_cohort import Credentials, DirectCgroupLauncher, Launcher, ScopeLauncher, UserManager
from mosaic.cgroup_cohort.cgroupfs import find_cgroup2

__all__ = ["Route", "RouteUnavailable", "choose_route", "engine_can_read", "user_manager_answers"]

PROBE_TIMEOUT = 10.0


class RouteUnavailable(Exception):
    """Neither route can contain an engine here; `str()` is one line saying why and what to do."""


@dataclass
class Route:
    """The chosen route: its `kind`, the `launcher` (and the `manager` of a scope route), the `parent`
    cgroup a direct route made (removed by `close`, by that exact path) and `why`, in plain words."""

    kind: Literal["scope", "direct"]
    launcher: Launcher
    manager: UserManager | None
    parent: str | None
    why: str

    def describe(self) -> str:
        """One line: why, and what is used (`no systemd user manager: using a direct cgroup under ...`)."""
        if self.kind == "scope":
            return f"{self.why}: using a transient systemd scope for each engine"
        return f"{self.why}: using a direct cgroup under {self.parent}"

    def close(self) -> bool:
        """Remove the direct route's parent cgroup, by its recorded path, once every cohort under it was
        released (cgroup-cohort `release_cohort` removes each). Returns False when something is still in
        it (an engine that was not proven stopped keeps its cgroup); True when removed or nothing to do."""
        if self.parent is None:
            return True
        try:
            os.rmdir(self.parent)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


def user_manager_answers(*, systemctl: str = "systemctl", timeout: float = PROBE_TIMEOUT) -> tuple[bool, str]:
    """Whether a systemd user manager answers this process, and why not in plain words (never systemctl's
    raw D-Bus text)."""
    try:
        r = subprocess.run([systemctl, "--user", "show-environment"], capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return False, "no systemctl (systemd is not installed)"
    except subprocess.TimeoutExpired:
        return False, f"the systemd user manager did not answer within {timeout:.0f} s"
    except OSError as e:
        return False, f"systemctl could not run ({e.strerror})"
    if r.returncode == 0:
        return True, "a systemd user manager answers"
    if "Failed to connect to bus" in r.stderr or "No medium found" in r.stderr:
        return False, "no systemd user manager"
    return False, f"no systemd user manager (systemctl --user exit {r.returncode})"


def _direct_parent(parent_name: str) -> str:
    """Make `<cgroup2 mount>/<parent_name>` (0755, root-owned: the engine uid owns no ancestor of its
    engine/). Raises RouteUnavailable in one line."""
    if "/" in parent_name or parent_name in ("", ".", ".."):
        raise ValueError(f"a parent cgroup name, not a path: {parent_name!r}")
    try:
        mount = find_cgroup2().mount_point
    except Exception:  # noqa: BLE001 - cgroup-cohort's evidence error: there is no usable mount
        raise RouteUnavailable("no cgroup2 mount in /proc/self/mountinfo and no systemd user manager: the engine "
                               "cannot be contained here (run on a host or VM with cgroup v2)") from None
    parent = os.path.join(mount, parent_name)
    try:
        os.mkdir(parent, 0o755)
    except OSError as e:
        if e.errno == errno.EROFS:
            raise RouteUnavailable(f"the cgroup2 mount {mount} is read-only here and no systemd user manager "
                                   "answers: run on a host or VM, or with a writable cgroup2 mount") from None
        if e.errno in (errno.EACCES, errno.EPERM):
            raise RouteUnavailable(f"the cgroup2 mount {mount} is not writable by uid {os.geteuid()} and no "
                                   "systemd user manager answers: run as root") from None
        raise RouteUnavailable(f"cannot make the parent cgroup {parent}: {e.strerror}") from None
    return parent


def choose_route(socket_dir: str, engine: Credentials, parent_name: str, *,
                 systemctl: str = "systemctl") -> Route:
    """The route for this host (see the module docstring). `socket_dir` is the private directory of the
    cohorts' shim sockets; `parent_name` the direct route's parent cgroup, which the caller records before
    this call makes it. Raises RouteUnavailable (one line) when neither route can be used."""
    answers, why = user_manager_answers(systemctl=systemctl)
    if answers:
        manager = UserManager(systemctl=systemctl)
        return Route("scope", ScopeLauncher(manager, socket_dir, engine=engine), manager, None, why)
    parent = _direct_parent(parent_name)
    try:
        launcher = DirectCgroupLauncher(parent, socket_dir, engine=engine)
    except BaseException:
        with contextlib.suppress(OSError):
            os.rmdir(parent)
        raise
    return Route("direct", launcher, None, parent, why)


def engine_can_read(tree: str | os.PathLike[str]) -> bool:
    """Whether another uid (the engine account) can read the install `tree` where it is: every directory
    above it searchable by others, every directory in it searchable and readable, every file readable. A
    checkout under a 0700 /root is not; there the caller runs a readable copy, whose 19,000 files (the
    pinned Pi with Node) take seconds to make and to remove."""
    real = os.path.realpath(tree)
    for parent in Path(real).parents:
        if not os.stat(parent).st_mode & 0o001:
            return False
    for dirpath, _dirs, files in os.walk(real):
        if os.stat(dirpath).st_mode & 0o005 != 0o005:
            return False
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if not stat.S_ISLNK(st.st_mode) and not st.st_mode & 0o004:
                return False
    return True


def __dir__() -> list[str]:
    return list(__all__)
