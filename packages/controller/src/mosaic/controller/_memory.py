"""The lifecycle on ports a test can hold in one process, without root (`mosaic.controller.testing`):

- `MemoryCohort`, a `CohortPort` (and cgroup-cohort `Launcher`): each launch runs the engine (pi-rpc's fake
  engine) as a plain child of this process, under a reference of the direct route whose cgroup ids are this
  world's (`world`); a force stop runs cgroup-cohort's real stop machine (`force_stop`) over a
  `MemoryExecutor` that acts on the child and answers as the world says (its epoch changed: K14; nothing
  readable: K15); every action it is asked is logged (`log`). A unit is present from its launch until it
  is let go (as a cgroup stays while its shim lives), whatever its engine did.
- `Liveness`, writer-claim's owner check (`OwnerLiveness`) for runners in this one process: each
  `runner()` a controller process of its own as writer-claim records it, alive until it crashed
  (`crashed`).
- `Crash`, raised at a named point (`crash_at`) to end a runner as a SIGKILL there would: it is a
  `BaseException`, so nothing on its way out handles it, and what it leaves on disk is what the point says
  is durable.

The real ports are held to the kernel by the cohort suites (`tests_cohort/`); these hold the lifecycle's
rules to the same outcomes in the unit suite (`tests/test_lifecycle_ports.py`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mosaic.cgroup_cohort import CohortHandle, CohortRef, Credentials, EngineLimits, Launcher
from mosaic.cgroup_cohort.reference import Containment
from mosaic.cgroup_cohort.stop import (
    AwaitGrace,
    Census,
    CheckIdentity,
    Collect,
    Death,
    Enumerate,
    Enumerated,
    Freeze,
    Frozen,
    FrozenRechecked,
    GraceEnded,
    IdentityObserved,
    IdentityUnavailable,
    Kill,
    Killed,
    ObservedIdentity,
    Reaped,
    RecheckFrozen,
    SendTerm,
    StopExecutor,
    TermSent,
)
from mosaic.safe_open import ProcessRef, current_host, process_ref
from mosaic.writer_claim.model import Owner, ProcessIdentity

from .lifecycle._ports import ClaimsOwner

__all__ = ["Crash", "Liveness", "MemoryCohort", "MemoryExecutor", "World", "crash_at"]


class Crash(BaseException):  # noqa: N818 - what it models is a crash, not an error
    """A runner ends at this named point, as a SIGKILL there would end its process."""


def crash_at(point: str) -> Callable[[str], None]:
    """A `Hooks.on_launch_step` / `on_stop_phase` that crashes the runner at `point`."""
    def hook(name: str) -> None:
        if name == point:
            raise Crash(point)
    return hook


class Liveness:
    """Controller processes in this one process, as writer-claim's owner check sees them: each `runner()` a
    `ClaimsOwner` (a process identity of its own, in this pid namespace); one is alive until `crashed`."""

    def __init__(self) -> None:
        self._namespace = os.readlink("/proc/self/ns/pid")
        self._pids = itertools.count(4_000_000)  # past pid_max: no live process of this host is named
        self._dead: set[ProcessIdentity] = set()

    def runner(self) -> ClaimsOwner:
        process = ProcessIdentity(next(self._pids), 1, self._namespace)
        return ClaimsOwner(process, self)

    def crashed(self, owner: ClaimsOwner) -> None:
        self._dead.add(owner.process)

    def owner_alive(self, owner: Owner) -> bool | None:
        if owner.process.pid_namespace != self._namespace:
            return None
        return owner.process not in self._dead


@dataclass
class World:
    """What the cohort's world says at a force stop: its epoch changed under the recorded name (K14: the
    unit's cgroup id is another), or nothing of it can be read (K15: `unavailable` says why)."""

    epoch_changed: bool = False
    unavailable: str | None = None


@dataclass
class _Unit:
    popen: subprocess.Popen[bytes]
    ref: CohortRef
    members: list[ProcessRef] = field(default_factory=list)


class MemoryCohort:
    """A `CohortPort` for tests, in this process and without root (module docstring)."""

    kind: Literal["direct"] = "direct"

    def __init__(self, world: World | None = None) -> None:
        self.world = world or World()
        self.units: dict[str, _Unit] = {}
        self.log: list[str] = []
        self._ids = itertools.count(1000, 2)

    # -- cgroup-cohort's Launcher ----------------------------------------------------------------------

    def launcher(self) -> Launcher:
        return self

    def prewarm(self, *, idle: float = 30.0) -> bool:
        return False

    def close(self) -> None:
        pass

    def presence(self, unit: str) -> Literal["absent", "present", "unavailable"]:
        if self.world.unavailable is not None:
            return "unavailable"
        return "present" if unit in self.units else "absent"

    def rediscover(self, unit: str) -> CohortRef | None:
        found = self.units.get(unit)
        return found.ref if found is not None else None

    def launch(self, unit: str, engine_argv: Sequence[str], *, env: Mapping[str, str] | None = None,
               cwd: str | None = None, stderr: int | None = None, limits: EngineLimits | None = None,
               engine: Credentials | None = None) -> CohortHandle:
        """The engine as a plain child of this process (no cgroup, no uid change), under `unit`."""
        self.log.append(f"launch {unit}")
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        try:
            popen = subprocess.Popen(list(engine_argv), stdin=stdin_r, stdout=stdout_w, stderr=subprocess.DEVNULL,
                                     env=dict(env or {}), cwd=cwd, start_new_session=True)
        except BaseException:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
                os.close(fd)
            raise
        os.close(stdin_r)
        os.close(stdout_w)
        engine_ref = process_ref(popen.pid)
        shim_ref = process_ref(os.getpid())
        if engine_ref is None or shim_ref is None:  # the child is gone already: /proc no longer shows it
            popen.kill()
            popen.wait()
            os.close(stdin_w)
            os.close(stdout_r)
            raise OSError(f"the engine of {unit} exited at once")
        cgroup = next(self._ids)
        ref = CohortRef(kind="direct", unit=unit, host=current_host(), engine=engine_ref,
                        socket_path=f"/memory/{unit}.sock", cgroup_path=f"/memory/{unit}",
                        unit_cgroup_id=cgroup, engine_cgroup_id=cgroup + 1, shim=shim_ref,
                        containment=Containment(True, "memory"), features=("cgroup.freeze", "cgroup.kill"))
        self.units[unit] = _Unit(popen, ref, [engine_ref])
        return CohortHandle(ref, {}, stdin_w, stdout_r)

    # -- what the lifecycle asks of a recorded cohort ---------------------------------------------------

    def census(self, ref: CohortRef) -> Census:
        found = self.units.get(ref.unit)
        if found is None:
            return Census(None, False, "no such unit")
        return Census(len(self._alive(found)), True, "the memory cohort's live members")

    def executor(self, ref: CohortRef) -> StopExecutor:
        return MemoryExecutor(self, ref)

    def let_go(self, ref: CohortRef) -> bool:
        self.log.append(f"let go {ref.unit}")
        found = self.units.pop(ref.unit, None)
        if found is not None:
            self._end(found)
        return True

    def cleanup(self) -> None:
        """End every engine this cohort started (by its recorded process), and forget every unit."""
        for found in self.units.values():
            self._end(found)
        self.units.clear()

    def _alive(self, unit: _Unit) -> list[ProcessRef]:
        return [m for m in unit.members if unit.popen.poll() is None and m.pid == unit.popen.pid]

    def _end(self, unit: _Unit) -> None:
        if unit.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                unit.popen.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            unit.popen.wait(10)


class MemoryExecutor:
    """cgroup-cohort's `StopExecutor` for a `MemoryCohort` unit: each action done to the child as the
    kernel would do it to a cohort, the world's answers (`World`) where it says so."""

    def __init__(self, cohort: MemoryCohort, ref: CohortRef) -> None:
        self.cohort, self.ref = cohort, ref

    def perform(self, action: Any) -> Any:
        cohort, ref = self.cohort, self.ref
        unit = cohort.units.get(ref.unit)
        cohort.log.append(f"{type(action).__name__} {ref.unit}")
        if isinstance(action, CheckIdentity):
            if cohort.world.unavailable is not None or unit is None:
                return IdentityUnavailable("identity-unavailable", cohort.world.unavailable or "no such unit")
            cgroup = (ref.unit_cgroup_id or 0) + (100 if cohort.world.epoch_changed else 0)
            return IdentityObserved(ObservedIdentity(
                host=current_host(), unit_cgroup_id=cgroup, shim_unit_cgroup_id=cgroup,
                engine_cgroup_id=ref.engine_cgroup_id, containment=ref.containment,
                features=("cgroup.freeze", "cgroup.kill")))
        assert unit is not None
        alive = tuple(cohort._alive(unit))
        if isinstance(action, SendTerm):
            for _member in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(unit.popen.pid, signal.SIGTERM)
            return TermSent(alive)
        if isinstance(action, AwaitGrace):
            with contextlib.suppress(subprocess.TimeoutExpired):
                unit.popen.wait(action.seconds)
            return GraceEnded(populated=unit.popen.poll() is None)
        if isinstance(action, Freeze):
            return Frozen(True)
        if isinstance(action, Enumerate):
            return Enumerated(alive, stable=True)
        if isinstance(action, RecheckFrozen):
            return FrozenRechecked(True)
        if isinstance(action, Kill):
            if unit.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    unit.popen.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                unit.popen.wait(action.timeout)
            return Killed(populated0=unit.popen.poll() is not None, at=time.time())
        if isinstance(action, Collect):
            now = time.time()
            return Reaped(tuple(Death(m, now, "reaped", signal=9) for m in action.members))
        raise TypeError(f"a direct cohort's machine never asks {type(action).__name__}")

    def close(self) -> None:
        pass
