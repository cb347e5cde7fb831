"""Launchers: a systemd user scope, a direct delegated cgroup2 directory, and the process-group fallback.

All three satisfy ``Launcher``: a controller holds one without knowing which it has. Each ``launch`` takes
the unit name the writer claim recorded before anything was spawned (seeds/003 §2 "Fields", "Lifecycle"
step 2; ``mosaic.writer_claim.unit_name_for`` derives it) and returns a ``CohortHandle`` whose ``ref`` (a
``CohortRef``) is what the controller records in the claim before it relies on the engine, and what the
force stop needs later, also after a restart (K10). ``presence(unit)`` answers the restart question "is
a unit (or cgroup) of that name there now?" (§2 "Restart"), with ``unavailable`` never read as ``absent``
(§6 "Unavailable is not empty").

* ``ScopeLauncher``: ``systemd-run --user --scope -p Delegate=yes --unit=<the recorded name>`` running the
  shim. A unit name is busy for tens of milliseconds after its previous scope ends (facts §6: 17-52 ms);
  the launcher retries with a bounded backoff and refuses ``unit-busy`` after that.
* ``DirectCgroupLauncher``: the same shim on a cgroup the launcher creates under a delegated cgroup2
  directory, named by the recorded unit name, for hosts with no systemd (containers, CI). The shim is
  itself born in that cgroup (clone3).
* ``PgroupLauncher``: the engine as a process-group leader. Its force stop always ends ``uncertain`` (K2).

Every launcher is safe to call from any thread of a threaded process (README "Threads"): none runs a
raw clone3 in the caller's process. The scope launcher starts ``systemd-run`` with ``subprocess.Popen``;
the direct and process-group launchers start the spawn helper (``_spawner``) with ``subprocess.Popen``,
and the helper, single-threaded, clone3s the shim or engine as the caller's child (CLONE_PARENT). The
direct shim's clone runs the shim's start, up to the engine's birth, before it execs the shim's own
interpreter. ``prewarm()`` starts the next launch's helper ahead, ``close()`` stops one no launch used.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import selectors
import socket
import stat as _stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import mosaic.safe_open
from mosaic.safe_open import HostIdentity, ProcessRef, current_host

from . import _cgroupfs as cg
from ._channel import ShimChannel
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials, Spawned, pidfd_open
from ._limits import EngineLimits, LimitHeld, decide, hard_limits, held_from_dict, rlimits_of
from ._model import SOCKET_PATH_MAX, CohortRef, Containment, LauncherKind, check_unit
from ._proc import start_time
from ._spawner import EXPIRED as HELPER_EXPIRED

__all__ = [
    "CohortHandle",
    "DirectCgroupLauncher",
    "Launcher",
    "PgroupLauncher",
    "Presence",
    "ScopeLauncher",
    "UserManager",
]

Presence = Literal["absent", "present", "unavailable"]


@runtime_checkable
class Launcher(Protocol):
    """What the controller holds: one of the three launchers, used without knowing which.

    ``kind`` is the ``CohortRef.kind`` its references carry. ``launch`` starts the engine under the unit
    name the claim recorded, with ``limits`` (``EngineLimits``; None: the defaults) set where the kernel
    can hold them (README "Limits"), and returns the handle, whose ``limits`` say where each one holds
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


def _check_socket_dir(path: str, owner: int | None = None) -> str:
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


def _socket_path(socket_dir: str, unit: str) -> str:
    """``<socket_dir>/<unit>.sock``; refuses ``configuration`` when it does not fit in sun_path (unix(7))."""
    path = os.path.join(socket_dir, f"{unit}.sock")
    if len(os.fsencode(path)) > SOCKET_PATH_MAX:
        raise CohortRefusal("configuration", f"socket path {path!r} is longer than {SOCKET_PATH_MAX} bytes; "
                                             "use a shorter socket directory")
    return path


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


def _read_status(status_r: int, diag_r: int, proc_fd: int, timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Wait for the shim's one-line status; returns (status or None, diagnostics read so far)."""
    sel = selectors.DefaultSelector()
    sel.register(status_r, selectors.EVENT_READ, "status")
    sel.register(diag_r, selectors.EVENT_READ, "diag")
    sel.register(proc_fd, selectors.EVENT_READ, "exit")
    status = b""
    diag = b""
    exited = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for key, _ in sel.select(max(0.0, deadline - time.monotonic())):
                if key.data == "exit":
                    exited = True
                    sel.unregister(proc_fd)
                    continue
                chunk = os.read(key.fd, 65536)
                if key.data == "status":
                    if not chunk:
                        sel.unregister(status_r)
                        return None, (diag + _drain(diag_r)).decode("utf-8", "replace")
                    status += chunk
                    if b"\n" in status:
                        line = status.split(b"\n", 1)[0]
                        try:
                            return json.loads(line), diag.decode("utf-8", "replace")
                        except ValueError:
                            return None, f"malformed status {line!r}"
                else:
                    if not chunk:
                        sel.unregister(diag_r)
                    diag += chunk
            if exited and not status:
                # The process is gone; whatever is left in the pipes is all there will be.
                return None, (diag + _drain(diag_r)).decode("utf-8", "replace")
        return None, diag.decode("utf-8", "replace") + f"\n(no status within {timeout}s)"
    finally:
        sel.close()


def _drain(fd: int) -> bytes:
    os.set_blocking(fd, False)
    out = b""
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
    except BlockingIOError:
        pass
    return out


def _package_root(module_file: str) -> str:
    """The directory holding the ``mosaic`` directory a module file sits in (``.../mosaic/<pkg>/x.py``)."""
    return str(Path(module_file).resolve().parents[2])


# The shim imports exactly the code this launcher runs: the directories holding this package and
# mosaic.safe_open (its bottom layer: the refusal base and the shared identities) go first on its path, and
# -I keeps every PYTHON* variable and the user site out of a process that may run as root. In an installed
# environment both are the same site-packages directory; in an editable or source layout they differ, and
# the namespace package ``mosaic`` is assembled from both (PEP 420). (``python -m mosaic.cgroup_cohort.shim``
# is the same entry point for a manual start.)
SHIM_ROOTS: tuple[str, ...] = tuple(dict.fromkeys((_package_root(__file__),
                                                   _package_root(mosaic.safe_open.__file__ or ""))))
# The boot puts the roots first on the path and registers ``mosaic.cgroup_cohort`` as a bare package (its
# directory under each root as ``__path__``) without running its ``__init__``, which would import every module
# of the package (the stop machines, the proofs, the launchers) and take about half of the shim's start.
_BARE_PACKAGE = ("import os, sys; roots = sys.argv.pop(1).split(os.pathsep); sys.path[:0] = roots; "
                 "pkg = type(sys)('mosaic.cgroup_cohort'); "
                 "pkg.__path__ = [os.path.join(r, 'mosaic', 'cgroup_cohort') for r in roots]; "
                 "sys.modules[pkg.__name__] = pkg; ")
_SHIM_CODE = _BARE_PACKAGE + "from mosaic.cgroup_cohort._shim import main; sys.exit(main())"


def _shim_boot(shim_path: str | None) -> list[str]:
    """The interpreter arguments that start the shim from ``shim_path`` (one directory holding both
    packages, e.g. a vendored copy) or, by default, from the launcher's own package roots."""
    roots = os.pathsep.join(SHIM_ROOTS) if shim_path is None else shim_path
    return ["-I", "-c", _SHIM_CODE, roots]


def _shim_args(
    *, mode: str, shim_path: str | None = None, unit: str, socket_path: str, nonce: str, status_fd: int,
    stderr_fd: int, credentials: Credentials | None, env: Mapping[str, str] | None, cwd: str | None,
    cgroupns: bool, log: str | None, systemctl: str | None, engine_argv: Sequence[str],
    limits: EngineLimits | None = None,
) -> list[str]:
    args = [*_shim_boot(shim_path), "--mode", mode, "--unit", unit, "--socket", socket_path,
            "--nonce", nonce, "--status-fd", str(status_fd), "--engine-stderr-fd", str(stderr_fd),
            "--limits", json.dumps((limits or EngineLimits()).to_dict())]
    if credentials is not None:
        args += ["--engine-uid", str(credentials.uid), "--engine-gid", str(credentials.gid)]
    if env is not None:
        args += ["--engine-env", json.dumps(dict(env))]
    if cwd is not None:
        args += ["--engine-cwd", cwd]
    if cgroupns:
        args.append("--cgroupns")
    if log is not None:
        args += ["--log", log]
    if systemctl is not None:
        args += ["--systemctl", systemctl]
    return [*args, "--", *engine_argv]


# The spawn helper's boot line (README "Threads"): the shim's bare-package boot with the package's root
# (so that a root holding cffi's backend too, like the vendored copy, is enough), running ``_spawner``, which
# imports only ``_ffi`` (and ``_cffi_backend``). -I as for the shim. ``os._exit``: the report is written
# with os.write, nothing is buffered, and the launcher waits for the helper's exit, which interpreter
# finalization would delay by ~15 ms. An exception still exits through the interpreter, with its
# traceback on the helper's stderr.
_HELPER_CODE = _BARE_PACKAGE + "from mosaic.cgroup_cohort._spawner import main; os._exit(main())"
HELPER_ROOT = _package_root(__file__)


class _Helper:
    """One spawn helper process (``_spawner``), started now and used for at most one spawn.

    Started with ``subprocess.Popen`` (fork + exec, no Python code in between: safe from any thread) in its
    own session, with one end of a Unix stream socket as its stdin (the request and its descriptors travel
    there), a pipe for its report and one for its stderr. It waits ``idle`` seconds at most for a request,
    and exits at once on EOF (``close()``, or this process dying), so it never outlives its launcher.
    """

    def __init__(self, python: str, idle: float, *, shim: bool = False) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        argv = [python, "-I", "-c", _HELPER_CODE, HELPER_ROOT, repr(float(idle)), *(("shim",) if shim else ())]
        try:
            self.proc = subprocess.Popen(
                argv, stdin=theirs.fileno(),
                stdout=report_w, stderr=err_w, start_new_session=True, env=_shim_env(),
            )
        except OSError as e:
            ours.close()
            for fd in (report_r, err_r):
                os.close(fd)
            raise OSError(e.errno or errno.EIO, f"cannot start the spawn helper {python!r}: {e}") from e
        finally:
            theirs.close()
            os.close(report_w)
            os.close(err_w)
        self._sock: socket.socket | None = ours
        self._report_r = report_r
        self._err_r = err_r

    def exited(self) -> bool:
        """Whether the helper has exited already (reaped by this check)."""
        return self.proc.poll() is not None

    def spawn(self, request: bytes, fds: Sequence[int], timeout: float) -> Spawned | None:
        """Hand the helper ``request`` with ``fds`` attached and read its report. The helper is reaped
        (killed first if it has not reported within ``timeout``) and this object closed, whatever happens.

        Returns None when the helper exited without reading anything (it reached its idle bound, or saw
        EOF): nothing was started, a fresh helper may be asked. Raises OSError as ``_spawn_in_helper``.
        """
        report: dict[str, Any] | None = None
        try:
            assert self._sock is not None, "a helper serves one spawn"
            self._sock.settimeout(timeout)  # a helper that never reads cannot block this send for longer
            try:
                sent = socket.send_fds(self._sock, [request], list(fds), socket.MSG_NOSIGNAL)
                self._sock.sendall(request[sent:], socket.MSG_NOSIGNAL)
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the helper is gone already (or stuck): its exit status and stderr say why
            helper_fd = pidfd_open(self.proc.pid)
            try:
                report, diag = _read_status(self._report_r, self._err_r, helper_fd, timeout)
            finally:
                os.close(helper_fd)
        finally:
            if report is None and self.proc.poll() is None:
                self.proc.kill()
            self.close()
        if report is None:
            if self.proc.returncode == HELPER_EXPIRED:
                return None
            if "(no status within" in diag:
                raise OSError(errno.ETIMEDOUT, f"the spawn helper did not report within {timeout}s: "
                                               f"{diag.strip()[-2000:]}")
            raise OSError(errno.EIO, f"the spawn helper failed: {diag.strip()[-2000:] or 'no report'}")
        pid = report.get("pid")
        if not report.get("ok"):
            if isinstance(pid, int) and pid > 0:
                try:
                    os.waitpid(pid, 0)  # the child that failed before exec is ours (CLONE_PARENT): reap it
                except ChildProcessError:
                    pass
            code = report.get("errno")
            raise OSError(code if isinstance(code, int) and code > 0 else errno.EIO, str(report.get("error")))
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            raise OSError(errno.EIO, f"the spawn helper reported no pid: {report!r}")
        # Ours and not reaped (nobody else may reap it), so the number cannot have been reused: pin it.
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError as e:
            raise OSError(errno.ECHILD, f"the spawn helper reported pid {pid}, not a child of this process") from e
        return Spawned(pid=pid, pidfd=pidfd_open(pid))

    def close(self) -> None:
        """Stop the helper unless it has exited (SIGKILL to its recorded pid: an unreaped child of this
        process, so the pid is still its own), reap it, and close this side's descriptors. Idempotent."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            os.close(self._report_r)
            os.close(self._err_r)
        if self.proc.poll() is None:
            self.proc.kill()
        _reap(self.proc)


class _Prewarm:
    """What the direct and process-group launchers share: spawn helpers started ahead (``prewarm``), each
    consumed by the next ``launch``, and ``close`` for the ones never used. No pool is kept: a helper
    exists only between a ``prewarm`` and the ``launch`` (or ``close``) that ends it."""

    start_timeout: float

    def __init__(self) -> None:
        self._warm: list[_Helper] = []
        self._warm_lock = threading.Lock()

    def _helper_python(self) -> str:
        raise NotImplementedError

    def _helper_starts_shims(self) -> bool:
        """Whether this launcher's helpers start shims (and import ``_shim`` while they wait)."""
        return False

    def prewarm(self, *, idle: float = 30.0) -> bool:
        """Start one spawn helper now, so that its interpreter boots while the caller does other work (the
        controller: its claim reservation and spawn marker); the next ``launch`` uses it. Safe from any
        thread. The helper waits ``idle`` seconds at most for that launch and exits by itself after that,
        or as soon as this process is gone; ``close()`` stops it before. Returns False (and starts nothing)
        when it cannot be started: the launch then starts its own helper and reports the failure."""
        self._drop_exited()
        try:
            helper = _Helper(self._helper_python(), idle, shim=self._helper_starts_shims())
        except OSError:
            return False
        with self._warm_lock:
            self._warm.append(helper)
        return True

    def close(self) -> None:
        """Stop and reap every prewarmed helper no launch has used (by its recorded pid). Idempotent; the
        launcher stays usable (a later ``launch`` starts its own helper, a later ``prewarm`` a new one)."""
        with self._warm_lock:
            warm, self._warm = self._warm, []
        for helper in warm:
            helper.close()

    def _drop_exited(self) -> None:
        with self._warm_lock:
            gone = [h for h in self._warm if h.exited()]
            self._warm = [h for h in self._warm if h not in gone]
        for helper in gone:
            helper.close()

    def _take_helper(self) -> _Helper | None:
        with self._warm_lock:
            return self._warm.pop(0) if self._warm else None

    def _spawn(self, argv: Sequence[str], **kw: Any) -> Spawned:
        """``_spawn_in_helper`` on this launcher's interpreter, with a prewarmed helper when there is one."""
        return _spawn_in_helper(self._helper_python(), argv, timeout=self.start_timeout,
                                helper=self._take_helper(), shim=self._helper_starts_shims(), **kw)


def _spawn_in_helper(
    python: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    fds: Mapping[int, int],
    cgroup_fd: int | None = None,
    credentials: Credentials | None = None,
    no_new_privs: bool = False,
    new_session: bool = False,
    cwd: str | None = None,
    timeout: float = 30.0,
    helper: _Helper | None = None,
    shim: bool = False,
    shim_args: Sequence[str] | None = None,
    rlimits: Sequence[tuple[int, int]] = (),
) -> Spawned:
    """``_ffi.spawn`` performed by a spawn helper (``_spawner``), safe from any thread of any process.

    The helper is ``helper`` (prewarmed) or one started now with ``subprocess.Popen`` (fork + exec with no
    Python code in between) on ``python``; it clone3s the child with CLONE_PARENT, so the child is a child
    of THIS process, exactly as if ``spawn`` had run here, and exits. The descriptors in ``fds`` (target ->
    this process's fd) and ``cgroup_fd`` reach it attached to the request (SCM_RIGHTS). A prewarmed helper
    that expired unused is replaced by a fresh one. Returns the child, not yet reaped, with a pidfd.

    With ``shim_args`` it is a shim request (``_spawner``): ``argv`` is the shim's interpreter and boot line,
    the child runs the shim's start (up to the engine's birth) before it execs them with ``shim_args``.
    ``shim`` starts a fresh helper that imports the shim's start while it waits (as a prewarmed one does).

    Raises OSError: with the errno the child hit before exec (the child is reaped here first), or EIO
    when the helper itself failed (its stderr is in the message), ETIMEDOUT when it did not report within
    ``timeout``, ECHILD when the pid it reports is not a child of this process.
    """
    passed: list[int] = []  # the descriptors in the order they travel; the request names them by index

    def index(fd: int) -> int:
        if fd not in passed:
            passed.append(fd)
        return passed.index(fd)

    request = json.dumps({
        "argv": list(argv),
        **({} if shim_args is None else {"shimArgs": list(shim_args)}),
        "env": dict(env),
        "fds": {str(t): index(s) for t, s in fds.items()},
        "cgroupFd": None if cgroup_fd is None else index(cgroup_fd),
        "credentials": None if credentials is None else [
            credentials.uid, credentials.gid, None if credentials.groups is None else list(credentials.groups)],
        "noNewPrivs": no_new_privs,
        "newSession": new_session,
        "cwd": cwd,
        **({"rlimits": [list(r) for r in rlimits]} if rlimits else {}),
    }).encode()
    if helper is not None:
        child = helper.spawn(request, passed, timeout)
        if child is not None:
            return child
    child = _Helper(python, timeout, shim=shim or shim_args is not None).spawn(request, passed, timeout)
    if child is None:
        raise OSError(errno.EIO, "the spawn helper exited without reading its request")
    return child


def _ref_from_hello(kind: LauncherKind, unit: str, hello: Mapping[str, Any], socket_path: str,
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


def _shim_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _hello_of(status: Mapping[str, Any] | None, nonce: str) -> Mapping[str, Any] | None:
    """The shim's hello when ``status`` is an ok status carrying this launch's nonce; else None."""
    if status is None or not status.get("ok") or status.get("hello", {}).get("nonce") != nonce:
        return None
    hello: Mapping[str, Any] = status["hello"]
    return hello


def _status_error(status: Mapping[str, Any] | None) -> str:
    """The error a failed status reports, for the diagnostics ("" when there is no failed status)."""
    if status is not None and not status.get("ok"):
        return str(status.get("error"))
    return ""


class _Pipes:
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


def _abort_shim(socket_path: str) -> None:
    """Best effort after a launch that cannot be completed: freeze, kill and release whatever the shim runs."""
    try:
        with ShimChannel(socket_path, timeout=30.0) as ch:
            ch.call("freeze", timeout=5)
            ch.call("kill", timeout=10)
            ch.call("release", force=True)
    except (EvidenceUnavailable, CohortRefusal):
        pass


class _ShimLauncher:
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
        self.socket_dir = _check_socket_dir(socket_dir, shim_uid)
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
        socket_path = _socket_path(self.socket_dir, check_unit(unit))
        if not os.path.exists(socket_path):
            return None
        try:
            with ShimChannel(socket_path, timeout=10.0) as ch:
                hello = ch.call("hello")
        except (EvidenceUnavailable, CohortRefusal, OSError):
            return None
        return socket_path, hello


class ScopeLauncher(_ShimLauncher):
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
            return _ref_from_hello("scope", unit, hello, socket_path, str(hello["cgroupPath"]))
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
    ) -> CohortHandle:
        """Start the engine in a new scope named ``unit`` (the name the claim recorded).

        Refuses ``configuration`` for a name that is not a scope unit name (or whose socket path is too
        long), ``unit-busy`` when the name stays loaded past the reuse bound, and ``launch-failed`` when
        the shim does not report a hello; in each case nothing runs under the name afterwards.
        """
        unit = check_unit(unit)
        socket_path = _socket_path(self.socket_dir, unit)
        deadline = time.monotonic() + self.name_reuse_timeout
        backoff = 0.005
        self.busy_retries = 0
        while True:
            handle, diag = self._try(unit, socket_path, engine_argv, env, cwd, stderr, limits)
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
    ) -> tuple[CohortHandle | None, str]:
        pipes = _Pipes()
        devnull = None
        if stderr is None:
            devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
            stderr = devnull
        nonce = secrets.token_hex(16)
        log = self._log_path(unit)
        argv = [
            *self.manager.prefix, self.manager.systemd_run, "--user", "--scope", "--quiet", "--collect",
            f"--unit={unit}", "-p", "Delegate=yes", "--", self.shim_python,
            *_shim_args(mode="scope", shim_path=self.shim_path, unit=unit, socket_path=socket_path, nonce=nonce,
                        status_fd=pipes.status_w, stderr_fd=stderr, credentials=self.engine, env=env,
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
            status, diag = _read_status(pipes.status_r, pipes.diag_r, proc_fd, self.start_timeout)
        finally:
            os.close(proc_fd)
        hello = _hello_of(status, nonce)
        ref: CohortRef | None = None
        held: dict[str, LimitHeld] = {}
        if hello is not None:
            # The shim read the InvocationID from the manager; read it again independently (brief §6).
            try:
                inv = self.manager._invocation_id(unit)
            except EvidenceUnavailable:
                inv = None
            try:
                ref = _ref_from_hello("scope", unit, hello, socket_path, str(hello["cgroupPath"]))
                held = held_from_dict(hello["limits"])
                if inv != ref.invocation_id:
                    raise ValueError(f"manager says invocation {inv}, shim {ref.invocation_id}")
            except (KeyError, TypeError, ValueError) as e:
                _abort_shim(socket_path)
                pipes.close_all()
                _reap(proc)
                raise CohortRefusal("launch-failed", f"{unit}: {e}") from e
        if ref is None or hello is None:
            pipes.close_all()
            _reap(proc)
            return None, diag + _status_error(status)
        stdin_w, stdout_r = pipes.parent_ends()
        return CohortHandle(ref, hello, stdin_w, stdout_r, popen=proc, limits=held), ""


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait (bounded) for a systemd-run (or the shim it became) that should be exiting; kill it if not."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _dir_presence(parent: str, name: str) -> Presence:
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


class DirectCgroupLauncher(_ShimLauncher, _Prewarm):
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
        _ShimLauncher.__init__(self, socket_dir, shim_uid=None, engine=engine, cgroupns=cgroupns,
                               shim_python=shim_python, start_timeout=start_timeout, log_dir=log_dir)
        _Prewarm.__init__(self)

    def _helper_python(self) -> str:
        return self.shim_python

    def _helper_starts_shims(self) -> bool:
        return True

    def presence(self, unit: str) -> Presence:
        """Whether the cgroup ``parent/<unit>`` exists now (see ``Launcher.presence``). Refuses
        ``configuration`` for a name that is not a scope unit name."""
        return _dir_presence(self.parent, check_unit(unit))

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
            return _ref_from_hello("direct", unit, hello, socket_path, rel)
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
        socket_path = _socket_path(self.socket_dir, unit)
        unit_dir = os.path.join(self.parent, unit)
        try:
            os.mkdir(unit_dir, 0o755)
        except FileExistsError as e:
            raise CohortRefusal("unit-busy", f"{unit_dir} exists") from e
        except OSError as e:
            raise CohortRefusal("launch-failed", f"cannot create {unit_dir}: {e}") from e
        pipes = _Pipes()
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
            argv = _shim_args(
                mode="direct", unit=unit, socket_path=socket_path, nonce=nonce, status_fd=3,
                stderr_fd=4, credentials=self.engine, env=env, cwd=cwd, cgroupns=self.cgroupns, log=log,
                systemctl=None, engine_argv=engine_argv, limits=limits)
            boot = len(_shim_boot(None))
            # The clone3 runs in the spawn helper (README "Threads"): the shim is still born in the unit
            # cgroup, in its supervisor/ (CLONE_INTO_CGROUP), and is this process's child (CLONE_PARENT). It
            # starts the engine from the helper's interpreter, then execs its own (_spawner, _shim).
            child = self._spawn(
                [self.shim_python, *argv[:boot]], shim_args=argv[boot:], env=_shim_env(), cgroup_fd=sup_fd,
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
        status, diag = _read_status(pipes.status_r, pipes.diag_r, child.pidfd, self.start_timeout)
        hello = _hello_of(status, nonce)
        ref: CohortRef | None = None
        held: dict[str, LimitHeld] = {}
        if hello is not None:
            rel = "/" + os.path.relpath(unit_dir, self.mount.mount_point)
            try:
                ref = _ref_from_hello("direct", unit, hello, socket_path, rel)
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
            diag += _status_error(status)
            raise CohortRefusal("launch-failed", f"{unit}: {diag.strip()[-2000:]}")
        stdin_w, stdout_r = pipes.parent_ends()
        return CohortHandle(ref, hello, stdin_w, stdout_r, spawned=child, unit_dir=unit_dir, limits=held)


class PgroupLauncher(_Prewarm):
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
        _Prewarm.__init__(self)

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
        engine_root = (os.geteuid() if self.engine is None else self.engine.uid) == 0
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
                credentials=self.engine, no_new_privs=True, new_session=True, cwd=cwd,
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


if TYPE_CHECKING:
    # mypy proves here that every launcher is a Launcher (the controller holds one without knowing which).
    def _conforms(s: ScopeLauncher, d: DirectCgroupLauncher, p: PgroupLauncher) -> tuple[Launcher, ...]:
        return (s, d, p)
