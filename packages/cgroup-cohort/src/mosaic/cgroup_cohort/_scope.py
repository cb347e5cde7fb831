"""The systemd scope launcher: the shim as the first process of a delegated ``systemd --user`` scope.

``systemd-run --user --scope -p Delegate=yes --unit=<the recorded name>`` runs the shim; the membership
epoch is the scope's InvocationID. A unit name is busy for tens of milliseconds after its previous scope
ends (facts §6: 17-52 ms); the launcher retries with a bounded backoff and refuses ``unit-busy`` after that.
``UserManager`` is how this launcher, the executors and ``presence`` reach the manager.

Safe from any thread (README "Threads"): the caller's process only starts ``systemd-run`` with
``subprocess.Popen``; the raw clone3s (the canary, the engine) run in the shim, single-threaded.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from ._boot import read_status, reap, shim_args
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials, pidfd_open
from ._launcher import CohortHandle, Presence
from ._limits import EngineLimits, LimitHeld, held_from_dict
from ._model import CohortRef, check_unit
from ._shim_launcher import (
    Pipes,
    ShimLauncher,
    abort_shim,
    hello_of,
    ref_from_hello,
    shim_socket_path,
    status_error,
)

__all__ = ["ScopeLauncher", "UserManager"]


class UserManager:
    """How to reach a systemd user manager: an argv prefix for its clients (empty in a real session).

    The CI sandbox supplies a prefix that moves the client into the delegated tree and enters the
    manager's namespaces (facts §2.1, §7.4). Its readers raise the package's internal EvidenceUnavailable;
    the launchers and executors turn that into ``unavailable`` answers.
    """

    def __init__(self, prefix: Sequence[str] = (), *, systemctl: str = "systemctl",
                 systemd_run: str = "systemd-run") -> None:
        self.prefix = list(prefix)
        self.systemctl = systemctl
        self.systemd_run = systemd_run

    def _show(self, unit: str, props: Sequence[str]) -> dict[str, str]:
        """``systemctl --user show`` of ``unit``. Raises EvidenceUnavailable when the manager cannot answer."""
        argv = [*self.prefix, self.systemctl, "--user", "show"]
        for p in props:
            argv += ["-p", p]
        argv += ["--", unit]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EvidenceUnavailable("identity-unavailable", f"systemctl show {unit}: {e}") from e
        if r.returncode != 0:
            raise EvidenceUnavailable("identity-unavailable", f"systemctl show {unit}: rc={r.returncode} "
                                                              f"{r.stderr.strip()}")
        out: dict[str, str] = {}
        for line in r.stdout.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                out[k] = v
        return out

    def _invocation_id(self, unit: str) -> str | None:
        """The unit's current InvocationID, or None when no unit of that name is loaded and active.

        Raises EvidenceUnavailable when the manager cannot answer.
        """
        props = self._show(unit, ["InvocationID", "LoadState", "ActiveState"])
        value = props.get("InvocationID", "")
        if props.get("LoadState") != "loaded" or not value:
            return None
        return value

    def _presence(self, unit: str) -> Presence:
        """Whether the manager knows a unit of this name (its LoadState). Never raises."""
        try:
            load = self._show(unit, ["LoadState"]).get("LoadState")
        except EvidenceUnavailable:
            return "unavailable"
        if load == "not-found":
            return "absent"
        # Any other state holds the name (a failed scope stays "loaded" until collected, facts §2.4). An
        # empty or missing answer is no answer at all.
        if load in ("loaded", "stub", "merged", "masked", "error", "bad-setting"):
            return "present"
        return "unavailable"



class ScopeLauncher(ShimLauncher):
    """Launch the shim as the first process of a delegated systemd user scope (seeds/000 src/cohort.mjs).

    ``shim_python`` and ``shim_path`` (one directory holding the ``mosaic`` package with both
    ``cgroup_cohort`` and ``safe_open`` in it, and cffi importable) choose the interpreter and code the
    shim runs; by default the launcher's own. ``shim_uid`` is the uid the shim runs as (the manager's
    user), which must own the private socket directory.

    ``engine`` credentials give the engine a uid that owns no ancestor of engine/ (facts §4.4): the only
    kernel-enforced K13 boundary on a host without nsdelegate. Without them the engine runs as the scope
    owner, the canary escapes, and every stop of that cohort ends ``uncertain`` (K1, K13).
    """

    kind: Literal["scope"] = "scope"

    def __init__(
        self,
        manager: UserManager,
        socket_dir: str,
        *,
        engine: Credentials | None = None,
        cgroupns: bool = True,
        shim_python: str = sys.executable,
        shim_path: str | None = None,
        shim_uid: int | None = None,
        name_reuse_timeout: float = 3.0,
        start_timeout: float = 30.0,
        log_dir: str | None = None,
        on_busy: Callable[[int, str], None] | None = None,
    ) -> None:
        self.manager = manager
        self.on_busy = on_busy
        super().__init__(socket_dir, shim_uid=shim_uid, engine=engine, cgroupns=cgroupns,
                         shim_python=shim_python, start_timeout=start_timeout, log_dir=log_dir)
        self.shim_path = shim_path
        self.name_reuse_timeout = name_reuse_timeout
        self.busy_retries = 0  # how many "already loaded" retries the last launch needed

    def prewarm(self, *, idle: float = 30.0) -> bool:
        """Nothing to start ahead: ``systemd-run`` is started by the launch itself. Always False."""
        return False

    def close(self) -> None:
        """Nothing to stop (see ``prewarm``)."""

    def presence(self, unit: str) -> Presence:
        """The manager's LoadState for ``unit``: ``not-found`` is absent, any loaded state present, and
        anything else (manager unreachable, systemctl failing, no answer) unavailable. Refuses
        ``configuration`` for a name that is not a scope unit name."""
        return self.manager._presence(check_unit(unit))

    def rediscover(self, unit: str) -> CohortRef | None:
        """The reference of the live cohort under ``unit``, rebuilt from its shim's hello, for a controller
        that crashed after the launch and before it recorded the reference (W13): the unit must be loaded
        with the InvocationID the shim reports. None when nothing answers or anything disagrees; the stop
        machine still checks the identity before any signal."""
        found = self._shim_hello(unit)
        if found is None:
            return None
        socket_path, hello = found
        try:
            if self.manager._invocation_id(unit) != hello.get("invocationId"):
                return None
            return ref_from_hello("scope", unit, hello, socket_path, str(hello["cgroupPath"]))
        except (EvidenceUnavailable, KeyError, TypeError, ValueError):
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
        """Start the engine in a new scope named ``unit`` (the name the claim recorded).

        Refuses ``configuration`` for a name that is not a scope unit name (or whose socket path is too
        long), ``unit-busy`` when the name stays loaded past the reuse bound, and ``launch-failed`` when
        the shim does not report a hello; in each case nothing runs under the name afterwards.
        """
        unit = check_unit(unit)
        socket_path = shim_socket_path(self.socket_dir, unit)
        deadline = time.monotonic() + self.name_reuse_timeout
        backoff = 0.005
        self.busy_retries = 0
        while True:
            handle, diag = self._try(unit, socket_path, engine_argv, env, cwd, stderr, limits, engine)
            if handle is not None:
                return handle
            busy = "already loaded" in diag or "already exists" in diag or "Unit busy" in diag or (
                "is busy" in diag)
            if not busy:
                raise CohortRefusal("launch-failed", f"{unit}: {diag.strip()[-2000:]}")
            if time.monotonic() >= deadline:
                raise CohortRefusal("unit-busy", f"{unit} still loaded after {self.name_reuse_timeout}s")
            # Unit-name reuse fails for tens of ms after the previous scope ends (facts §6): back off.
            self.busy_retries += 1
            if self.on_busy is not None:
                self.on_busy(self.busy_retries, diag)
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.2)

    def _try(
        self, unit: str, socket_path: str, engine_argv: Sequence[str],
        env: Mapping[str, str] | None, cwd: str | None, stderr: int | None, limits: EngineLimits | None,
        engine: Credentials | None = None,
    ) -> tuple[CohortHandle | None, str]:
        pipes = Pipes()
        devnull = None
        if stderr is None:
            devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            stderr = devnull
        nonce = secrets.token_hex(16)
        log = self._log_path(unit)
        argv = [
            *self.manager.prefix, self.manager.systemd_run, "--user", "--scope", "--quiet", "--collect",
            f"--unit={unit}", "-p", "Delegate=yes", "--", self.shim_python,
            *shim_args(mode="scope", shim_path=self.shim_path, unit=unit, socket_path=socket_path, nonce=nonce,
                        status_fd=pipes.status_w, stderr_fd=stderr, credentials=engine or self.engine, env=env,
                        cwd=cwd, cgroupns=self.cgroupns, log=log, systemctl=self.manager.systemctl,
                        engine_argv=engine_argv, limits=limits),
        ]
        try:
            proc = subprocess.Popen(
                argv, stdin=pipes.stdin_r, stdout=pipes.stdout_w, stderr=pipes.diag_w,
                pass_fds=(pipes.status_w, stderr), start_new_session=True,
            )
        except OSError as e:
            pipes.child_side_closed()
            pipes.close_all()
            raise CohortRefusal("launch-failed", f"cannot start systemd-run: {e}") from e
        finally:
            if devnull is not None:
                os.close(devnull)
        pipes.child_side_closed()
        proc_fd = pidfd_open(proc.pid)
        try:
            status, diag = read_status(pipes.status_r, pipes.diag_r, proc_fd, self.start_timeout)
        finally:
            os.close(proc_fd)
        hello = hello_of(status, nonce)
        ref: CohortRef | None = None
        held: dict[str, LimitHeld] = {}
        if hello is not None:
            # The shim read the InvocationID from the manager; read it again independently (brief §6).
            try:
                inv = self.manager._invocation_id(unit)
            except EvidenceUnavailable:
                inv = None
            try:
                ref = ref_from_hello("scope", unit, hello, socket_path, str(hello["cgroupPath"]))
                held = held_from_dict(hello["limits"])
                if inv != ref.invocation_id:
                    raise ValueError(f"manager says invocation {inv}, shim {ref.invocation_id}")
            except (KeyError, TypeError, ValueError) as e:
                abort_shim(socket_path)
                pipes.close_all()
                reap(proc)
                raise CohortRefusal("launch-failed", f"{unit}: {e}") from e
        if ref is None or hello is None:
            pipes.close_all()
            reap(proc)
            return None, diag + status_error(status)
        stdin_w, stdout_r = pipes.parent_ends()
        return CohortHandle(ref, hello, stdin_w, stdout_r, popen=proc, limits=held), ""
