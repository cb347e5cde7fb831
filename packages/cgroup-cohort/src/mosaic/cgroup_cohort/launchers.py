"""Launching an engine in a cohort under the unit name the writer claim recorded.

Three launchers with one shape (``Launcher``): ``ScopeLauncher`` (a delegated ``systemd --user`` scope,
reached through a ``UserManager``), ``DirectCgroupLauncher`` (a cgroup2 directory it creates under a
delegated parent, no systemd; ``find_cgroup2`` says where the mount is) and ``PgroupLauncher`` (the
process-group fallback, whose stop never proves). ``launch(unit, argv, ...)`` returns a ``CohortHandle``:
the engine's stdio (``take_stdio``, once) and the reference to record (``handle.ref``).
``presence(unit)`` answers a restart's question (``Presence``), ``rediscover(unit)`` rebuilds a live
cohort's reference, ``release_cohort(ref)`` lets a recorded cohort's shim go. README "The launcher shape and presence", "Threads".
"""

from typing import TYPE_CHECKING

from ._direct import DirectCgroupLauncher
from ._ffi import Credentials
from ._launcher import CohortHandle, Launcher, Presence, release_cohort
from ._model import LauncherKind
from ._pgroup import PgroupLauncher
from ._scope import ScopeLauncher, UserManager
from .cgroupfs import find_cgroup2

__all__ = [
    "CohortHandle",
    "Credentials",
    "DirectCgroupLauncher",
    "Launcher",
    "LauncherKind",
    "PgroupLauncher",
    "Presence",
    "ScopeLauncher",
    "UserManager",
    "find_cgroup2",
    "release_cohort",
]

if TYPE_CHECKING:
    # mypy proves here that every launcher is a Launcher (the controller holds one without knowing which).
    def _conforms(s: ScopeLauncher, d: DirectCgroupLauncher, p: PgroupLauncher) -> tuple[Launcher, ...]:
        return (s, d, p)


def __dir__() -> list[str]:
    return sorted(__all__)
