"""What the scope and direct launchers share: the shim's socket directory and pipes, its hello, and its end.

Both start the supervisor shim (``_shim``) as the first process of the unit's cgroup, hand it the engine's
stdin and stdout, read its one-line status (``_boot.read_status``) and build the cohort reference from the
hello it reports (``ref_from_hello``). A launch that cannot be completed tells the shim to kill what it
runs (``abort_shim``).
"""

from __future__ import annotations

import os
import stat as _stat
from collections.abc import Mapping
from typing import Any

from mosaic.safe_open import HostIdentity, ProcessRef

from ._channel import ShimChannel
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials
from ._model import SOCKET_PATH_MAX, CohortRef, Containment, LauncherKind, check_unit

__all__ = ["Pipes", "ShimLauncher", "abort_shim", "check_socket_dir", "hello_of", "ref_from_hello",
           "shim_socket_path", "status_error"]


def check_socket_dir(path: str, owner: int | None = None) -> str:
    """The socket directory must be private (no group/other access) and owned by the shim's uid."""
    owner = os.geteuid() if owner is None else owner
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as e:
        raise CohortRefusal("configuration", f"socket directory {path!r}: {e}") from e
    if not _stat.S_ISDIR(st.st_mode) or st.st_uid != owner or st.st_mode & 0o077:
        raise CohortRefusal("configuration", f"socket directory {path!r} must be a private (0700) directory "
                                             f"owned by uid {owner}")
    return os.path.realpath(path)


def shim_socket_path(socket_dir: str, unit: str) -> str:
    """``<socket_dir>/<unit>.sock``; refuses ``configuration`` when it does not fit in sun_path (unix(7))."""
    path = os.path.join(socket_dir, f"{unit}.sock")
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise CohortRefusal("configuration", f"socket path {path!r} is longer than {SOCKET_PATH_MAX} bytes; "
                                             "use a shorter socket directory")
    return path


def ref_from_hello(kind: LauncherKind, unit: str, hello: Mapping[str, Any], socket_path: str,
                   cgroup_path: str) -> CohortRef:
    """The reference a shim's hello describes. Raises KeyError, TypeError or ValueError for a hello that
    does not describe a complete cohort (the launch then fails and is undone)."""
    if hello.get("unit") != unit:
        raise ValueError(f"the shim reports unit {hello.get('unit')!r}, not {unit!r}")
    return CohortRef(
        kind=kind,
        unit=unit,
        host=HostIdentity(hello["machineId"], hello["bootId"]),
        engine=ProcessRef.from_dict(hello["engine"]),
        socket_path=socket_path,
        invocation_id=hello.get("invocationId") if kind == "scope" else None,
        cgroup_path=cgroup_path,
        unit_cgroup_id=hello["unitCgroupId"],
        engine_cgroup_id=hello["engineCgroupId"],
        shim=ProcessRef.from_dict(hello["shim"]),
        containment=Containment.from_dict(hello["containment"]),
        features=tuple(hello.get("features", ())),
    )



def hello_of(status: Mapping[str, Any] | None, nonce: str) -> Mapping[str, Any] | None:
    """The shim's hello when ``status`` is an ok status carrying this launch's nonce; else None."""
    if status is None or not status.get("ok") or status.get("hello", {}).get("nonce") != nonce:
        return None
    hello: Mapping[str, Any] = status["hello"]
    return hello


def status_error(status: Mapping[str, Any] | None) -> str:
    """The error a failed status reports, for the diagnostics ("" when there is no failed status)."""
    if status is not None and not status.get("ok"):
        return str(status.get("error"))
    return ""


class Pipes:
    """The engine's stdin/stdout pipes plus the launcher's status and diagnostics pipes."""

    def __init__(self) -> None:
        self.stdin_r, self.stdin_w = os.pipe2(os.O_CLOEXEC)
        self.stdout_r, self.stdout_w = os.pipe2(os.O_CLOEXEC)
        self.status_r, self.status_w = os.pipe2(os.O_CLOEXEC)
        self.diag_r, self.diag_w = os.pipe2(os.O_CLOEXEC)

    def child_side_closed(self) -> None:
        for fd in (self.stdin_r, self.stdout_w, self.status_w, self.diag_w):
            os.close(fd)

    def close_all(self) -> None:
        """Close the launcher's ends (after a failed launch)."""
        for fd in (self.stdin_w, self.stdout_r, self.status_r, self.diag_r):
            os.close(fd)

    def parent_ends(self) -> tuple[int, int]:
        """Close the status and diagnostics ends; return (engine stdin write fd, engine stdout read fd)."""
        os.close(self.status_r)
        os.close(self.diag_r)
        return self.stdin_w, self.stdout_r


def abort_shim(socket_path: str) -> None:
    """Best effort after a launch that cannot be completed: freeze, kill and release whatever the shim runs."""
    try:
        with ShimChannel(socket_path, timeout=30.0) as ch:
            ch.call("freeze", timeout=5)
            ch.call("kill", timeout=10)
            ch.call("release", force=True)
    except (EvidenceUnavailable, CohortRefusal):
        pass


class ShimLauncher:
    """What the scope and direct launchers share: the private socket directory and how the shim starts."""

    def __init__(
        self,
        socket_dir: str,
        *,
        shim_uid: int | None,
        engine: Credentials | None,
        cgroupns: bool,
        shim_python: str,
        start_timeout: float,
        log_dir: str | None,
    ) -> None:
        self.socket_dir = check_socket_dir(socket_dir, shim_uid)
        self.engine = engine
        self.cgroupns = cgroupns
        self.shim_python = shim_python
        self.start_timeout = start_timeout
        self.log_dir = log_dir

    def _log_path(self, name: str) -> str | None:
        """Where the shim of ``name`` logs (None: no log)."""
        return None if self.log_dir is None else os.path.join(self.log_dir, f"{name}.log")

    def _shim_hello(self, unit: str) -> tuple[str, Mapping[str, Any]] | None:
        """The live shim's hello for ``unit`` (its socket is ``<socket_dir>/<unit>.sock``), or None when no
        shim answers there."""
        socket_path = shim_socket_path(self.socket_dir, check_unit(unit))
        if not os.path.exists(socket_path):
            return None
        try:
            with ShimChannel(socket_path, timeout=10.0) as ch:
                hello = ch.call("hello")
        except (EvidenceUnavailable, CohortRefusal, OSError):
            return None
        return socket_path, hello
