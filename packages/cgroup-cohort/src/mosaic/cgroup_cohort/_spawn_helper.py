"""The launchers' side of the spawn helper: a single-threaded process that clone3s for them.

A raw clone3 runs only in a single-threaded process (README "Threads"), and a launcher may be called from
any thread of a threaded caller. So the direct and process-group launchers never clone3 in the caller's
process: ``spawn_in_helper`` starts a helper (``_spawner``, its own code) with ``subprocess.Popen``, which
runs no Python code between fork and exec, and the helper clone3s the shim or the engine as the
caller's child (CLONE_PARENT). ``Prewarm`` is what both launchers share: a helper started ahead of the
launch (``prewarm``) and stopped when no launch used it (``close``).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from ._boot import HELPER_CODE, HELPER_ROOT, clean_env, read_status, reap
from ._ffi import Credentials, Spawned, pidfd_open
from ._spawner import EXPIRED as HELPER_EXPIRED

__all__ = ["Prewarm", "SpawnHelper", "spawn_in_helper"]


class SpawnHelper:
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
        argv = [python, "-I", "-c", HELPER_CODE, HELPER_ROOT, repr(float(idle)), *(("shim",) if shim else ())]
        try:
            self.proc = subprocess.Popen(
                argv, stdin=theirs.fileno(),
                stdout=report_w, stderr=err_w, start_new_session=True, env=clean_env(),
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
        EOF): nothing was started, a fresh helper may be asked. Raises OSError as ``spawn_in_helper``.
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
                report, diag = read_status(self._report_r, self._err_r, helper_fd, timeout)
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
        reap(self.proc)


class Prewarm:
    """What the direct and process-group launchers share: spawn helpers started ahead (``prewarm``), each
    consumed by the next ``launch``, and ``close`` for the ones never used. No pool is kept: a helper
    exists only between a ``prewarm`` and the ``launch`` (or ``close``) that ends it."""

    start_timeout: float

    def __init__(self) -> None:
        self._warm: list[SpawnHelper] = []
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
            helper = SpawnHelper(self._helper_python(), idle, shim=self._helper_starts_shims())
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

    def _take_helper(self) -> SpawnHelper | None:
        with self._warm_lock:
            return self._warm.pop(0) if self._warm else None

    def _spawn(self, argv: Sequence[str], **kw: Any) -> Spawned:
        """``spawn_in_helper`` on this launcher's interpreter, with a prewarmed helper when there is one."""
        return spawn_in_helper(self._helper_python(), argv, timeout=self.start_timeout,
                               helper=self._take_helper(), shim=self._helper_starts_shims(), **kw)


def spawn_in_helper(
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
    helper: SpawnHelper | None = None,
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
    child = SpawnHelper(python, timeout, shim=shim or shim_args is not None).spawn(request, passed, timeout)
    if child is None:
        raise OSError(errno.EIO, "the spawn helper exited without reading its request")
    return child
