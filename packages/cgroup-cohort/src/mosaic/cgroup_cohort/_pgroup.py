"""The process-group launcher: the fallback with no cgroup, whose force stop always ends ``uncertain`` (K2).

Safe from any thread (README "Threads"): the spawn helper (``_spawn_helper``) clone3s the engine as the
caller's child. With no cgroup, the engine's limits are the rlimits that stand in (README "Limits").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from mosaic.safe_open import ProcessRef, current_host

from ._errors import CohortRefusal
from ._ffi import Credentials
from ._launcher import CohortHandle, Presence
from ._limits import EngineLimits, decide, hard_limits, rlimits_of
from ._model import CohortRef, Containment, check_unit
from ._proc import start_time
from ._spawn_helper import Prewarm

__all__ = ["PgroupLauncher"]


class PgroupLauncher(Prewarm):
    """The process-group fallback (no cgroup): the engine leads a new session and process group.

    It can signal the group, never enumerate the cohort: a member that calls setsid() leaves the group and
    survives a group kill (K2). Its force stop therefore always ends ``uncertain``. The unit name the claim
    recorded is kept in the reference (it ties the cohort to the claim); no unit of that name is made.

    The engine is clone3'd by the spawn helper on ``helper_python`` (a fresh single-threaded process that
    must import this package and cffi, README "Threads") as this process's child; the helper must report
    within ``start_timeout`` seconds. ``prewarm()`` starts the next launch's helper now, ``close()`` stops
    one that no launch used.
    """

    kind: Literal["pgroup"] = "pgroup"

    def __init__(self, *, engine: Credentials | None = None, helper_python: str = sys.executable,
                 start_timeout: float = 30.0) -> None:
        self.engine = engine
        self.helper_python = helper_python
        self.start_timeout = start_timeout
        Prewarm.__init__(self)

    def _helper_python(self) -> str:
        return self.helper_python

    def presence(self, unit: str) -> Presence:
        """Always ``unavailable``: a process group has no name to look up (refuses ``configuration`` for a
        name that is not a scope unit name, as every launcher does)."""
        check_unit(unit)
        return "unavailable"

    def rediscover(self, unit: str) -> CohortRef | None:
        """Always None: a process group has no name or shim to find it by (see ``Launcher.rediscover``)."""
        check_unit(unit)
        return None

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
    ) -> CohortHandle:
        """Start the engine as the leader of a new session and process group.

        The engine is clone3'd by the spawn helper (the one ``prewarm()`` started, else a fresh one). With
        no cgroup, ``limits`` become the rlimits that stand in (RLIMIT_NPROC, RLIMIT_AS, RLIMIT_CORE; no
        cpu), set on the engine before its exec (README "Limits").
        Refuses ``configuration`` for a name that is not a scope unit name, and ``launch-failed`` when the
        host identity cannot be read (before anything starts), the spawn helper fails, or the engine cannot
        be started (its exec failed: it is reaped) or is gone before its start time was read (it is then
        reaped).
        """
        unit = check_unit(unit)
        try:
            host = current_host()
        except (OSError, ValueError) as e:
            raise CohortRefusal("launch-failed", f"host identity unreadable: {e}") from e
        engine = engine if engine is not None else self.engine
        engine_root = (os.geteuid() if engine is None else engine.uid) == 0
        held = decide(limits or EngineLimits(), offered=None, engine_owns_files=engine_root,
                      engine_root=engine_root, hard=hard_limits(),
                      no_cgroup="the process-group launcher makes no cgroup")
        stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
        stdout_r, stdout_w = os.pipe2(os.O_CLOEXEC)
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            # The clone3 runs in the spawn helper (README "Threads"); the engine is this process's child.
            child = self._spawn(
                engine_argv, env=dict(env) if env is not None else {"PATH": "/usr/bin:/bin"},
                fds={0: stdin_r, 1: stdout_w, 2: stderr if stderr is not None else devnull},
                credentials=engine, no_new_privs=True, new_session=True, cwd=cwd,
                rlimits=rlimits_of(held))
        except OSError as e:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
                os.close(fd)
            raise CohortRefusal("launch-failed", f"cannot start the engine: {e}") from e
        finally:
            os.close(devnull)
        os.close(stdin_r)
        os.close(stdout_w)
        st = start_time(child.pid)
        if st is None:
            os.close(stdin_w)
            os.close(stdout_r)
            os.waitpid(child.pid, 0)
            child.close()
            raise CohortRefusal("launch-failed", "the engine exited before its start time was read")
        ref = CohortRef(
            kind="pgroup", unit=unit, host=host, engine=ProcessRef(child.pid, st), pgid=child.pid,
            containment=Containment(False, "none", (("process-group", "a setsid member leaves the group"),)),
        )
        return CohortHandle(ref, {}, stdin_w, stdout_r, spawned=child, limits=held)
