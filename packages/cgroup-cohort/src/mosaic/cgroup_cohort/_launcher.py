"""The one shape every launcher has (``Launcher``), the handle a launch returns, and ``release_cohort``.

A controller holds one of the three launchers (``_scope``, ``_direct``, ``_pgroup``) without knowing which.
Each ``launch`` takes the unit name the writer claim recorded before anything was spawned (seeds/003 §2
"Fields", "Lifecycle" step 2; ``mosaic.writer_claim.unit_name_for`` derives it) and returns a
``CohortHandle`` whose ``ref`` (a ``CohortRef``) is what the controller records in the claim before it
relies on the engine, and what the force stop needs later, also after a restart (K10). ``presence(unit)``
answers the restart question "is a unit (or cgroup) of that name there now?" (§2 "Restart"), with
``unavailable`` never read as ``absent`` (§6 "Unavailable is not empty").
"""

from __future__ import annotations

import os
import selectors
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from . import cgroupfs as cg
from ._channel import ShimChannel
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials, Spawned, pidfd_open
from ._limits import EngineLimits, LimitHeld
from ._model import CohortRef, LauncherKind
from ._proc import start_time

__all__ = ["CohortHandle", "Launcher", "Presence", "release_cohort"]

Presence = Literal["absent", "present", "unavailable"]


@runtime_checkable
class Launcher(Protocol):
    """What the controller holds: one of the three launchers, used without knowing which.

    ``kind`` is the ``CohortRef.kind`` its references carry. ``launch`` starts the engine under the unit
    name the claim recorded, with ``limits`` (``EngineLimits``; None: the defaults) set where the kernel
    can hold them (README "Limits"), as ``engine`` (credentials for this launch alone, e.g. a uid allocated
    for this execution; None: the launcher's own ``engine``), and returns the handle, whose ``limits`` say
    where each one holds
    (refusing ``configuration`` for a name that is not a scope unit name, ``unit-busy`` or
    ``launch-failed``); ``presence`` says whether a unit or cgroup of
    that name is there now: ``"absent"``, ``"present"``, or ``"unavailable"`` when it cannot be told
    (any error reading; never reported as absent). The process-group fallback has nothing to look up by
    name, so its answer is always ``"unavailable"``.
    """

    @property
    def kind(self) -> LauncherKind: ...

    def launch(
        self,
        unit: str,
        engine_argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
        limits: EngineLimits | None = None,
        engine: Credentials | None = None,
    ) -> CohortHandle: ...

    def presence(self, unit: str) -> Presence: ...

    def rediscover(self, unit: str) -> CohortRef | None:
        """The reference of the live cohort under the recorded ``unit``, rebuilt from what the live system
        says (its shim), for a controller that crashed after the launch and before it recorded the
        reference (seeds/003 W13); None when it cannot be found or does not agree with itself. Never a
        substitute for the identity check: the stop machine checks again before any signal."""
        ...

    def prewarm(self, *, idle: float = 30.0) -> bool:
        """Start now what the next ``launch`` needs first, so that it is ready when the launch comes: one spawn
        helper for the direct and process-group launchers (README "Threads": prewarm). Returns False when
        there is nothing to start (the scope launcher) or it could not be started (the launch then starts
        its own and reports any failure). Safe from any thread; what no launch uses exits by itself after
        ``idle`` seconds or when this process is gone, and ``close`` stops it before."""
        ...

    def close(self) -> None:
        """Stop and reap what ``prewarm`` started and no launch used. Idempotent; the launcher stays usable."""
        ...



class CohortHandle:
    """One launched cohort: the reference to record, the engine's stdio, and the launcher-side process.

    Made by the launchers. The handle owns the engine's stdin write end and stdout read end (raw fds)
    until ``take_stdio()`` hands them over, exactly once, to the caller (the controller's engine link):
    after that ``close()`` and ``release()`` never close them. Never taken, ``close()`` closes them. Each
    descriptor is therefore closed exactly once, by whoever owns it.
    """

    def __init__(
        self,
        ref: CohortRef,
        hello: Mapping[str, Any],
        stdin_w: int,
        stdout_r: int,
        *,
        popen: subprocess.Popen[bytes] | None = None,
        spawned: Spawned | None = None,
        unit_dir: str | None = None,
        limits: Mapping[str, LimitHeld] | None = None,
    ) -> None:
        self.ref = ref
        self.hello = hello
        # Where each engine limit holds (README "Limits"): limit name -> LimitHeld (via cgroup, rlimit or
        # none, with the value). The controller puts it on the binding record.
        self.limits: dict[str, LimitHeld] = dict(limits or {})
        self._stdin_w: int | None = stdin_w
        self._stdout_r: int | None = stdout_r
        self._taken = False
        self._popen = popen
        self._spawned = spawned
        self._unit_dir = unit_dir

    @property
    def kind(self) -> LauncherKind:
        return self.ref.kind

    @property
    def pid(self) -> int:
        """The pid of this process's child that the handle reaps: ``systemd-run``, which becomes the shim,
        for a scope; the shim for direct; the engine for pgroup (the spawn helper that clone3'd the last
        two has already exited)."""
        if self._popen is not None:
            return self._popen.pid
        assert self._spawned is not None
        return self._spawned.pid

    def take_stdio(self) -> tuple[int, int]:
        """Hand over (engine stdin write fd, engine stdout read fd); the caller owns and closes them.

        Raises RuntimeError on a second call, or after ``close()`` closed them (they are gone).
        """
        if self._taken:
            raise RuntimeError("the engine's stdio was already taken")
        if self._stdin_w is None or self._stdout_r is None:
            raise RuntimeError("the engine's stdio was closed with the handle")
        fds = (self._stdin_w, self._stdout_r)
        self._taken = True
        self._stdin_w = self._stdout_r = None
        return fds

    def _channel(self, timeout: float = 30.0) -> ShimChannel:
        if self.ref.socket_path is None:
            raise CohortRefusal("configuration", "the process-group fallback has no shim")
        return ShimChannel(self.ref.socket_path, timeout=timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Reap the launcher's child (shim or engine); returns its exit code or None if still running."""
        if self._popen is not None:
            try:
                return self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return None
        assert self._spawned is not None
        if self._spawned.pidfd < 0:
            return 0
        sel = selectors.DefaultSelector()
        sel.register(self._spawned.pidfd, selectors.EVENT_READ)
        ready = sel.select(timeout)
        sel.close()
        if not ready:
            return None
        _, status = os.waitpid(self._spawned.pid, 0)
        self._spawned.close()
        return os.waitstatus_to_exitcode(status)

    def release(self, *, timeout: float = 15.0, force: bool = False) -> None:
        """``close()`` (the engine's stdio, unless taken), tell the shim to exit, wait for it, and (direct
        launcher) remove the cgroup it created. For a pgroup handle, reap the engine if it exits within
        ``timeout`` (closing its stdin is how a cooperative engine is asked to).

        The shim refuses (``shim-refused``) while engine/ is populated unless ``force``; a shim that is
        already gone is fine. Raises TimeoutError when the shim does not exit within ``timeout``.
        """
        self.close()
        if self.ref.kind != "pgroup":
            try:
                with self._channel() as ch:
                    ch.call("release", force=force)
            except EvidenceUnavailable:
                pass  # the shim is gone already
        if self.wait(timeout) is None and self.ref.kind != "pgroup":
            raise TimeoutError(f"the shim of {self.ref.unit} did not exit within {timeout}s")
        if self._unit_dir is not None:
            cg.remove_tree(self._unit_dir)

    def close(self) -> None:
        """Close the engine's stdio unless it was taken; idempotent (each fd is closed at most once)."""
        for fd in (self._stdin_w, self._stdout_r):
            if fd is not None:
                os.close(fd)
        self._stdin_w = self._stdout_r = None


def release_cohort(ref: CohortRef, *, force: bool = False, timeout: float = 15.0) -> bool:
    """Let the shim of a recorded cohort go, from the reference alone (a restarted controller after a
    proven stop has no handle), and remove a direct cohort's cgroup by its exact recorded identity.

    The shim is addressed only if the process recorded as the shim (pid AND start time) is still it; it
    refuses (``shim-refused``) while engine/ is populated unless ``force``. The direct route's unit cgroup
    is removed only when its cgroup id is still the recorded one (never another cgroup that took the
    name). Returns True when the shim is gone afterwards (or was already), False when it is still running
    after ``timeout``. A process-group cohort has no shim: True at once.
    """
    if ref.kind == "pgroup" or ref.shim is None:
        return True
    gone = True
    try:
        fd = pidfd_open(ref.shim.pid)
    except OSError:
        fd = -1  # no such process: the shim is gone
    try:
        if fd >= 0 and start_time(ref.shim.pid) == ref.shim.start_time:
            try:
                assert ref.socket_path is not None
                with ShimChannel(ref.socket_path, timeout=timeout) as ch:
                    ch.call("release", force=force)
            except EvidenceUnavailable:
                pass  # the shim stopped answering: wait for it below all the same
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            gone = bool(sel.select(timeout))
            sel.close()
    finally:
        if fd >= 0:
            os.close(fd)
    if gone and ref.kind == "direct" and ref.cgroup_path is not None:
        unit_dir = os.path.normpath(cg.find_cgroup2().mount_point + ref.cgroup_path)
        try:
            same = cg.cgroup_id(unit_dir) == ref.unit_cgroup_id
        except EvidenceUnavailable:
            same = False  # already removed, or not readable: nothing of ours to remove by this name
        if same:
            cg.remove_tree(unit_dir)
    return gone
