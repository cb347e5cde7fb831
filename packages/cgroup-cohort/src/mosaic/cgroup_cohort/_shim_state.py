"""What the shim's start hands to the rest of its life: ``Startup`` (the cgroups it holds, the canary's
verdict, the engine it started; carried across the direct route's exec as JSON) and ``ShimError`` (a start
that failed). ``_shim`` (steps 1-6 of its docstring) fills a ``Startup``; ``_shim_ops.Shim`` (step 7 on)
reads it. Both import this module and neither imports the other's state, so the two files are no import
circle. Imported before the engine's birth: the standard library's ``json``, ``cgroupfs``, ``_ffi`` and
``_limits``, which the start loads anyway (README "Threads").
"""

from __future__ import annotations

import json

from . import cgroupfs as cg
from ._ffi import Credentials
from ._limits import held_from_dict, held_to_dict

# Annotations only (strings here): typing alone would add ~2 ms to the shim's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ShimError", "Startup"]


class ShimError(Exception):
    """Startup failed; the message goes to the status descriptor and stderr, exit status 3."""


class Startup:
    """What the shim's start leaves to the rest of its life (``_shim_ops.Shim``): the cgroup2 mount, the
    unit's cgroup and the two it made (held as O_DIRECTORY descriptors), the canary's verdict and the engine
    it started. Filled in as the start goes, so that a start that fails can still kill what it has already
    put in engine/."""

    def __init__(self) -> None:
        self.mount: cg.Cgroup2Mount | None = None
        self.own = ""  # the unit's cgroup path as this shim sees it (from /proc/self/cgroup)
        self.unit_path = ""
        self.invocation: str | None = None
        self.env_invocation: str | None = None
        self.unit_fd = -1
        self.sup_fd = -1
        self.engine_fd = -1
        self.engine_path = ""
        self.engine_rel = ""
        self.creds: Credentials | None = None
        self.userns = False
        self.features: list[str] = []
        self.containment: dict[str, Any] = {}
        self.limits: dict[str, Any] = {}  # _limits.held_to_dict: where each limit holds
        self.engine_pid = -1

    def to_json(self) -> str:
        """This state for ``--resume``: the exec'd rest of the shim holds the same descriptors (inheritable
        by then) and the same child."""
        mount, creds = self.mount, self.creds
        assert mount is not None
        return json.dumps({
            "mount": [mount.mount_point, mount.nsdelegate, mount.super_options], "own": self.own,
            "unitPath": self.unit_path, "invocation": self.invocation, "envInvocation": self.env_invocation,
            "fds": [self.unit_fd, self.sup_fd, self.engine_fd], "enginePath": self.engine_path,
            "engineRel": self.engine_rel, "userns": self.userns, "features": self.features,
            "creds": None if creds is None else [creds.uid, creds.gid, creds.groups],
            "containment": self.containment, "limits": self.limits, "enginePid": self.engine_pid,
        })

    @classmethod
    def from_json(cls, text: str) -> Startup:
        """The state ``to_json`` wrote before the exec. Raises ValueError (or KeyError, TypeError) for
        anything else."""
        d = json.loads(text)
        s = cls()
        s.mount = cg.Cgroup2Mount(str(d["mount"][0]), bool(d["mount"][1]), str(d["mount"][2]))
        s.own, s.unit_path = str(d["own"]), str(d["unitPath"])
        s.invocation, s.env_invocation = d["invocation"], d["envInvocation"]
        s.unit_fd, s.sup_fd, s.engine_fd = (int(fd) for fd in d["fds"])
        s.engine_path, s.engine_rel = str(d["enginePath"]), str(d["engineRel"])
        s.userns, s.features, s.containment = bool(d["userns"]), list(d["features"]), dict(d["containment"])
        c = d["creds"]
        s.creds = None if c is None else Credentials(int(c[0]), int(c[1]), None if c[2] is None else tuple(c[2]))
        s.limits = held_to_dict(held_from_dict(d["limits"]))
        s.engine_pid = int(d["enginePid"])
        return s
