"""The direct cgroup launcher: the shim on a cgroup2 directory the launcher creates, with no systemd.

For hosts with no systemd user manager (containers, CI): the cgroup is ``<parent>/<the recorded unit
name>`` under a delegated cgroup2 directory, and its membership epoch is the kernfs cgroup id (facts §5).
The shim is born in the unit's ``supervisor/`` (clone3 with CLONE_INTO_CGROUP) and never moves.

Safe from any thread (README "Threads"): the spawn helper (``_spawn_helper``) clone3s the shim as the
caller's child; the clone runs the shim's start, up to the engine's birth, before it execs the shim's own
interpreter. ``prewarm()`` starts the next launch's helper ahead, ``close()`` stops one no launch used.
"""

from __future__ import annotations

import os
import secrets
import stat as _stat
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from . import cgroupfs as cg
from ._boot import clean_env, read_status, shim_args, shim_boot
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials
from ._launcher import CohortHandle, Presence
from ._limits import EngineLimits, LimitHeld, held_from_dict
from ._model import CohortRef, check_unit
from ._shim_launcher import Pipes, ShimLauncher, hello_of, ref_from_hello, shim_socket_path, status_error
from ._spawn_helper import Prewarm

__all__ = ["DirectCgroupLauncher", "dir_presence"]


def dir_presence(parent: str, name: str) -> Presence:
    """Whether the directory ``parent/name`` exists: absent only on ENOENT from a parent that is still the
    directory at that path; any other error, or a non-directory, is unavailable. Never raises."""
    try:
        parent_fd = os.open(parent, cg.O_DIR)
    except OSError:
        return "unavailable"
    try:
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            # ENOENT from a parent that was removed (or replaced) says nothing about the name under the
            # parent path: only a parent still linked at that path makes this an absent observation.
            try:
                same = os.path.samestat(os.fstat(parent_fd), os.stat(parent, follow_symlinks=False))
            except OSError:
                return "unavailable"
            return "absent" if same else "unavailable"
        except OSError:
            return "unavailable"
        return "present" if _stat.S_ISDIR(st.st_mode) else "unavailable"
    finally:
        os.close(parent_fd)


class DirectCgroupLauncher(ShimLauncher, Prewarm):
    """The shim on a cgroup2 directory this launcher creates under ``parent``, with no systemd.

    ``parent`` must be a directory of the cgroup2 mount that the launcher may write (root, or a
    delegated subtree). The cgroup it creates is ``parent/<unit>``, named by the unit name the claim
    recorded. Membership epoch: (machine id, boot id, cgroup path, cgroup id) (facts §5). For the K13
    boundary, ``parent`` and everything above it must not be owned by the engine's uid. Refuses
    ``configuration`` for a parent outside the cgroup2 mount (or no cgroup2 mount) and a socket directory
    that is not private.

    ``shim_python`` runs the spawn helper and the shim; it must import this package (from the launcher's
    own roots) and cffi. ``prewarm()`` starts the next launch's spawn helper now (README "Threads"),
    ``close()`` stops one that no launch used.
    """

    kind: Literal["direct"] = "direct"

    def __init__(
        self,
        parent: str,
        socket_dir: str,
        *,
        engine: Credentials | None = None,
        cgroupns: bool = True,
        shim_python: str = sys.executable,
        start_timeout: float = 30.0,
        log_dir: str | None = None,
    ) -> None:
        try:
            mount = cg.find_cgroup2()
        except EvidenceUnavailable as e:
            raise CohortRefusal("configuration", f"no cgroup2 mount: {e.detail}") from e
        real = os.path.realpath(parent)
        if not (real == mount.mount_point or real.startswith(mount.mount_point + "/")):
            raise CohortRefusal("configuration", f"{parent!r} is not inside the cgroup2 mount {mount.mount_point}")
        if not os.path.isdir(real):
            raise CohortRefusal("configuration", f"{parent!r} is not a cgroup directory")
        self.mount = mount
        self.parent = real
        ShimLauncher.__init__(self, socket_dir, shim_uid=None, engine=engine, cgroupns=cgroupns,
                              shim_python=shim_python, start_timeout=start_timeout, log_dir=log_dir)
        Prewarm.__init__(self)

    def _helper_python(self) -> str:
        return self.shim_python

    def _helper_starts_shims(self) -> bool:
        return True

    def presence(self, unit: str) -> Presence:
        """Whether the cgroup ``parent/<unit>`` exists now (see ``Launcher.presence``). Refuses
        ``configuration`` for a name that is not a scope unit name."""
        return dir_presence(self.parent, check_unit(unit))

    def rediscover(self, unit: str) -> CohortRef | None:
        """The reference of the live cohort in ``parent/<unit>``, rebuilt from its shim's hello (W13): the
        directory's cgroup id must be the one the shim reports. None when nothing answers or anything
        disagrees; the stop machine still checks the identity before any signal."""
        found = self._shim_hello(unit)
        if found is None:
            return None
        socket_path, hello = found
        unit_dir = os.path.join(self.parent, unit)
        try:
            if cg.cgroup_id(unit_dir) != hello["unitCgroupId"]:
                return None
            rel = "/" + os.path.relpath(unit_dir, self.mount.mount_point)
            return ref_from_hello("direct", unit, hello, socket_path, rel)
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
        """Create ``parent/<unit>`` and its ``supervisor/``, start the shim inside that (clone3, no window;
        it never moves) and the engine in engine/ (the shim makes it).

        The shim is clone3'd by the spawn helper (the one ``prewarm()`` started, else a fresh one: a
        single-threaded process, README "Threads") as this process's child, so this is safe from any
        thread. The clone runs the shim's start up to the engine's birth, then execs the shim's own
        interpreter, which reports the hello; the handle reaps the shim.

        Refuses ``configuration`` for a name that is not a scope unit name (or whose socket path is too
        long), ``unit-busy`` if the cgroup exists, and ``launch-failed`` if the shim does not come up (the
        cgroup is then removed again).
        """
        unit = check_unit(unit)
        socket_path = shim_socket_path(self.socket_dir, unit)
        unit_dir = os.path.join(self.parent, unit)
        try:
            os.mkdir(unit_dir, 0o755)
        except FileExistsError as e:
            raise CohortRefusal("unit-busy", f"{unit_dir} exists") from e
        except OSError as e:
            raise CohortRefusal("launch-failed", f"cannot create {unit_dir}: {e}") from e
        pipes = Pipes()
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        nonce = secrets.token_hex(16)
        log = self._log_path(unit)
        unit_fd = sup_fd = -1
        try:
            unit_fd = os.open(unit_dir, cg.O_DIR)
            # The shim's own cgroup, made here with the unit's: the shim is born in it and never moves, since
            # a move through cgroup.procs waits for an RCU grace period (README "Threads": what a launch costs).
            os.mkdir("supervisor", 0o755, dir_fd=unit_fd)
            sup_fd = os.open("supervisor", cg.O_DIR, dir_fd=unit_fd)
            sup_id = cg.cgroup_id(sup_fd)
            argv = shim_args(
                mode="direct", unit=unit, socket_path=socket_path, nonce=nonce, status_fd=3,
                stderr_fd=4, credentials=engine or self.engine, env=env, cwd=cwd, cgroupns=self.cgroupns, log=log,
                systemctl=None, engine_argv=engine_argv, limits=limits)
            boot = len(shim_boot(None))
            # The clone3 runs in the spawn helper (README "Threads"): the shim is still born in the unit
            # cgroup, in its supervisor/ (CLONE_INTO_CGROUP), and is this process's child (CLONE_PARENT). It
            # starts the engine from the helper's interpreter, then execs its own (_spawner, _shim).
            child = self._spawn(
                [self.shim_python, *argv[:boot]], shim_args=argv[boot:], env=clean_env(), cgroup_fd=sup_fd,
                new_session=True,
                fds={0: pipes.stdin_r, 1: pipes.stdout_w, 2: pipes.diag_w, 3: pipes.status_w,
                     4: stderr if stderr is not None else devnull},
            )
        except (OSError, EvidenceUnavailable) as e:
            pipes.child_side_closed()
            pipes.close_all()
            cg.remove_tree(unit_dir)
            raise CohortRefusal("launch-failed", f"cannot start the shim: {e}") from e
        finally:
            for fd in (unit_fd, sup_fd, devnull):
                if fd >= 0:
                    os.close(fd)
        pipes.child_side_closed()
        status, diag = read_status(pipes.status_r, pipes.diag_r, child.pidfd, self.start_timeout)
        hello = hello_of(status, nonce)
        ref: CohortRef | None = None
        held: dict[str, LimitHeld] = {}
        if hello is not None:
            rel = "/" + os.path.relpath(unit_dir, self.mount.mount_point)
            try:
                ref = ref_from_hello("direct", unit, hello, socket_path, rel)
                held = held_from_dict(hello["limits"])
                # The epoch as the launcher sees it must be the one the shim reports (facts §5), and the
                # shim that reports it must be the process started here.
                if cg.cgroup_id(unit_dir) != ref.unit_cgroup_id:
                    raise ValueError("cgroup id of the created directory differs from the shim's")
                if hello.get("supervisorCgroupId") != sup_id:
                    raise ValueError("the shim does not report the supervisor/ cgroup it was started in")
                if ref.shim is None or ref.shim.pid != child.pid:
                    raise ValueError(f"the hello names shim {ref.shim}, not the process started ({child.pid})")
            except (KeyError, TypeError, ValueError, EvidenceUnavailable) as e:
                diag += str(e)
                ref = None
        if ref is None or hello is None:
            pipes.close_all()
            try:
                cg.write_value(unit_dir, "cgroup.kill", "1")
            except OSError:
                pass
            os.waitpid(child.pid, 0)
            child.close()
            cg.remove_tree(unit_dir)
            diag += status_error(status)
            raise CohortRefusal("launch-failed", f"{unit}: {diag.strip()[-2000:]}")
        stdin_w, stdout_r = pipes.parent_ends()
        return CohortHandle(ref, hello, stdin_w, stdout_r, spawned=child, unit_dir=unit_dir, limits=held)
