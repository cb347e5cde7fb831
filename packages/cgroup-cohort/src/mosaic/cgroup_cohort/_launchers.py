"""Launchers: a systemd user scope, a direct delegated cgroup2 directory, and the process-group fallback.

Each launch returns a ``CohortHandle`` whose ``claim`` (a ``CohortClaim``) is what a controller records
in its writer claim before it relies on the engine, and what ``force_stop`` needs later, also after a
restart (K10). The engine's stdin and stdout are pipes the caller owns (the controller's engine link).

* ``ScopeLauncher``: ``systemd-run --user --scope -p Delegate=yes --unit=<from the claim ID>`` running the
  shim. A unit name is busy for tens of milliseconds after its previous scope ends (facts §6: 17-52 ms);
  the launcher retries with a bounded backoff and refuses ``unit-busy`` after that.
* ``DirectCgroupLauncher``: the same shim on a cgroup the launcher creates under a delegated cgroup2
  directory, for hosts with no systemd (containers, CI). The shim is itself born in that cgroup (clone3).
* ``PgroupLauncher``: the engine as a process-group leader. Its force stop always ends ``uncertain`` (K2).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import selectors
import stat as _stat
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from . import _cgroupfs as cg
from ._channel import ShimChannel
from ._errors import CohortRefusal, EvidenceUnavailable
from ._ffi import Credentials, Spawned, pidfd_open, spawn
from ._model import CohortClaim, Containment, MemberRef
from ._proc import boot_id, machine_id, start_time

__all__ = [
    "CohortHandle",
    "DirectCgroupLauncher",
    "PgroupLauncher",
    "ScopeLauncher",
    "UserManager",
    "unit_name_for",
]

_CLAIM_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def unit_name_for(claim_id: str) -> str:
    """The scope unit name derived from a claim ID (seeds/003 §2: recorded before anything is spawned)."""
    if not _CLAIM_ID.match(claim_id):
        raise CohortRefusal("configuration", f"claim ID {claim_id!r} cannot name a unit")
    return f"mosaic-{claim_id}.scope"


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


class UserManager:
    """How to reach a systemd user manager: an argv prefix for its clients (empty in a real session).

    The CI sandbox supplies a prefix that moves the client into the delegated tree and enters the
    manager's namespaces (facts §2.1, §7.4).
    """

    def __init__(self, prefix: Sequence[str] = (), *, systemctl: str = "systemctl",
                 systemd_run: str = "systemd-run") -> None:
        self.prefix = list(prefix)
        self.systemctl = systemctl
        self.systemd_run = systemd_run

    def show(self, unit: str, props: Sequence[str]) -> dict[str, str]:
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

    def invocation_id(self, unit: str) -> str | None:
        """The unit's current InvocationID, or None when no unit of that name is loaded and active."""
        props = self.show(unit, ["InvocationID", "LoadState", "ActiveState"])
        value = props.get("InvocationID", "")
        if props.get("LoadState") != "loaded" or not value:
            return None
        return value


@dataclass
class CohortHandle:
    """One launched cohort: the claim to record, the engine's stdio, and the launcher-side process."""

    claim: CohortClaim
    hello: Mapping[str, Any]
    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    launcher: str
    _popen: subprocess.Popen[bytes] | None = None
    _spawned: Spawned | None = None
    _unit_dir: str | None = None
    _closed: bool = field(default=False)

    @property
    def pid(self) -> int:
        """The pid of the process this launcher started (shim for scope/direct, engine for pgroup)."""
        if self._popen is not None:
            return self._popen.pid
        assert self._spawned is not None
        return self._spawned.pid

    def channel(self, timeout: float = 30.0) -> ShimChannel:
        if self.claim.socket_path is None:
            raise CohortRefusal("configuration", "the process-group fallback has no shim")
        return ShimChannel(self.claim.socket_path, timeout=timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Reap the launcher's child (shim or engine); returns its status or None if still running."""
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
        """Tell the shim to exit (refused while engine/ is populated unless ``force``), wait for it, and
        (direct launcher) remove the cgroup it created. For a pgroup handle, reap the engine."""
        if self.claim.kind != "pgroup":
            try:
                with self.channel() as ch:
                    ch.call("release", force=force)
            except EvidenceUnavailable:
                pass  # the shim is gone already
        if self.wait(timeout) is None and self.claim.kind != "pgroup":
            raise TimeoutError(f"the shim of {self.claim.unit} did not exit within {timeout}s")
        if self._unit_dir is not None:
            cg.remove_tree(self._unit_dir)
        self.close()

    def close(self) -> None:
        for f in (self.stdin, self.stdout):
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass


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


# The shim imports exactly the code this launcher runs: the directory holding this ``mosaic`` package goes
# first on its path, and -I keeps every PYTHON* variable and the user site out of a process that may run
# as root. (``python -m mosaic.cgroup_cohort.shim`` is the same entry point for a manual start.)
_PKG_ROOT = str(Path(__file__).resolve().parents[2])
_SHIM_BOOT = (
    "-I",
    "-c",
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from mosaic.cgroup_cohort._shim import main; "
    "sys.exit(main())",
    _PKG_ROOT,
)


def _shim_args(
    *, mode: str, shim_path: str | None = None, unit: str, socket_path: str, nonce: str, status_fd: int, stderr_fd: int,
    credentials: Credentials | None, env: Mapping[str, str] | None, cwd: str | None, cgroupns: bool,
    log: str | None, systemctl: str | None, engine_argv: Sequence[str],
) -> list[str]:
    boot = list(_SHIM_BOOT) if shim_path is None else [*_SHIM_BOOT[:-1], shim_path]
    args = [*boot, "--mode", mode, "--unit", unit, "--socket", socket_path,
            "--nonce", nonce, "--status-fd", str(status_fd), "--engine-stderr-fd", str(stderr_fd)]
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


def _claim_from_hello(kind: str, claim_id: str, hello: Mapping[str, Any], socket_path: str,
                      cgroup_path: str) -> CohortClaim:
    return CohortClaim(
        kind="scope" if kind == "scope" else "direct",
        claim_id=claim_id,
        unit=str(hello["unit"]),
        machine_id=str(hello["machineId"]),
        boot_id=str(hello["bootId"]),
        engine=MemberRef.from_dict(hello["engine"]),
        socket_path=socket_path,
        invocation_id=hello.get("invocationId"),
        cgroup_path=cgroup_path,
        unit_cgroup_id=int(hello["unitCgroupId"]),
        engine_cgroup_id=int(hello["engineCgroupId"]),
        shim=MemberRef.from_dict(hello["shim"]),
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
        for fd in (self.stdin_w, self.stdout_r, self.status_r, self.diag_r):
            try:
                os.close(fd)
            except OSError:
                pass

    def parent_ends(self) -> tuple[IO[bytes], IO[bytes]]:
        os.close(self.status_r)
        os.close(self.diag_r)
        return os.fdopen(self.stdin_w, "wb", buffering=0), os.fdopen(self.stdout_r, "rb", buffering=0)


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


class ScopeLauncher(_ShimLauncher):
    """Launch the shim as the first process of a delegated systemd user scope (seeds/000 src/cohort.mjs).

    ``shim_python`` and ``shim_path`` (the directory holding the ``mosaic`` package, with cffi importable)
    choose the interpreter and code the shim runs; by default the launcher's own. ``shim_uid`` is the uid
    the shim runs as (the manager's user), which must own the private socket directory.

    ``engine`` credentials give the engine a uid that owns no ancestor of engine/ (facts §4.4): the only
    kernel-enforced K13 boundary on a host without nsdelegate. Without them the engine runs as the scope
    owner, the canary escapes, and every stop of that cohort ends ``uncertain`` (K1, K13).
    """

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

    def launch(
        self,
        claim_id: str,
        engine_argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
    ) -> CohortHandle:
        """Start the engine in a new scope named from ``claim_id``. Refuses ``unit-busy`` when the name
        stays loaded past the reuse bound, ``launch-failed`` when the shim does not report a hello."""
        unit = unit_name_for(claim_id)
        socket_path = os.path.join(self.socket_dir, f"{unit}.sock")
        deadline = time.monotonic() + self.name_reuse_timeout
        backoff = 0.005
        self.busy_retries = 0
        while True:
            handle, diag = self._try(claim_id, unit, socket_path, engine_argv, env, cwd, stderr)
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
        self, claim_id: str, unit: str, socket_path: str, engine_argv: Sequence[str],
        env: Mapping[str, str] | None, cwd: str | None, stderr: int | None,
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
                        engine_argv=engine_argv),
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
        if hello is None:
            pipes.close_all()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            return None, diag + _status_error(status)
        # The shim read the InvocationID from the manager; read it again independently (brief §6).
        try:
            inv = self.manager.invocation_id(unit)
        except EvidenceUnavailable:
            inv = None
        stdin, stdout = pipes.parent_ends()
        handle = CohortHandle(_claim_from_hello("scope", claim_id, hello, socket_path, str(hello["cgroupPath"])),
                              hello, stdin, stdout, "scope", _popen=proc)
        if inv != hello.get("invocationId"):
            _abort(handle)
            raise CohortRefusal("launch-failed", f"{unit}: manager says invocation {inv}, shim "
                                                 f"{hello.get('invocationId')}")
        return handle, ""


def _abort(handle: CohortHandle) -> None:
    try:
        with handle.channel() as ch:
            ch.call("freeze", timeout=5)
            ch.call("kill", timeout=10)
            ch.call("release", force=True)
    except (EvidenceUnavailable, CohortRefusal):
        pass
    handle.wait(10)
    handle.close()


class DirectCgroupLauncher(_ShimLauncher):
    """The shim on a cgroup2 directory this launcher creates under ``parent``, with no systemd.

    ``parent`` must be a directory of the cgroup2 mount that the launcher may write (root, or a
    delegated subtree). Membership epoch: (machine id, boot id, cgroup path, cgroup id) (facts §5).
    For the K13 boundary, ``parent`` and everything above it must not be owned by the engine's uid.
    """

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
        mount = cg.find_cgroup2()
        real = os.path.realpath(parent)
        if not (real == mount.mount_point or real.startswith(mount.mount_point + "/")):
            raise CohortRefusal("configuration", f"{parent!r} is not inside the cgroup2 mount {mount.mount_point}")
        if not os.path.isdir(real):
            raise CohortRefusal("configuration", f"{parent!r} is not a cgroup directory")
        self.mount = mount
        self.parent = real
        super().__init__(socket_dir, shim_uid=None, engine=engine, cgroupns=cgroupns,
                         shim_python=shim_python, start_timeout=start_timeout, log_dir=log_dir)

    def launch(
        self,
        name: str,
        engine_argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
    ) -> CohortHandle:
        """Create ``parent/name``, start the shim inside it (clone3, no window) and the engine in engine/.

        Refuses ``unit-busy`` if the cgroup exists and ``launch-failed`` if the shim does not come up
        (the cgroup is then removed again).
        """
        if not _CLAIM_ID.match(name.removeprefix("mosaic-")) or "/" in name:
            raise CohortRefusal("configuration", f"cgroup name {name!r}")
        unit_dir = os.path.join(self.parent, name)
        try:
            os.mkdir(unit_dir, 0o755)
        except FileExistsError as e:
            raise CohortRefusal("unit-busy", f"{unit_dir} exists") from e
        socket_path = os.path.join(self.socket_dir, f"{name}.sock")
        pipes = _Pipes()
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        nonce = secrets.token_hex(16)
        log = self._log_path(name)
        unit_fd = os.open(unit_dir, cg.O_DIR)
        try:
            argv = [self.shim_python, *_shim_args(
                mode="direct", unit=name, socket_path=socket_path, nonce=nonce, status_fd=3,
                stderr_fd=4, credentials=self.engine, env=env, cwd=cwd, cgroupns=self.cgroupns, log=log,
                systemctl=None, engine_argv=engine_argv)]
            child = spawn(
                argv, env=_shim_env(), cgroup_fd=unit_fd, new_session=True,
                fds={0: pipes.stdin_r, 1: pipes.stdout_w, 2: pipes.diag_w, 3: pipes.status_w,
                     4: stderr if stderr is not None else devnull},
            )
        except OSError as e:
            pipes.child_side_closed()
            pipes.close_all()
            cg.remove_tree(unit_dir)
            raise CohortRefusal("launch-failed", f"cannot start the shim: {e}") from e
        finally:
            os.close(unit_fd)
            os.close(devnull)
        pipes.child_side_closed()
        status, diag = _read_status(pipes.status_r, pipes.diag_r, child.pidfd, self.start_timeout)
        hello = _hello_of(status, nonce)
        if hello is not None:
            # The epoch as the launcher sees it must be the one the shim reports (facts §5).
            try:
                same = cg.cgroup_id(unit_dir) == hello["unitCgroupId"]
            except EvidenceUnavailable:
                same = False
            if not same:
                diag += "cgroup id of the created directory differs from the shim's"
                hello = None
        if hello is None:
            pipes.close_all()
            try:
                cg.write_value(unit_dir, "cgroup.kill", "1")
            except OSError:
                pass
            os.waitpid(child.pid, 0)
            child.close()
            cg.remove_tree(unit_dir)
            diag += _status_error(status)
            raise CohortRefusal("launch-failed", f"{name}: {diag.strip()[-2000:]}")
        stdin, stdout = pipes.parent_ends()
        rel = "/" + os.path.relpath(unit_dir, self.mount.mount_point)
        claim = _claim_from_hello("direct", name, hello, socket_path, rel)
        return CohortHandle(claim, hello, stdin, stdout, "direct", _spawned=child, _unit_dir=unit_dir)


class PgroupLauncher:
    """The process-group fallback (no cgroup): the engine leads a new session and process group.

    It can signal the group, never enumerate the cohort: a member that calls setsid() leaves the group and
    survives a group kill (K2). Its force stop therefore always ends ``uncertain``.
    """

    def __init__(self, *, engine: Credentials | None = None) -> None:
        self.engine = engine

    def launch(
        self,
        claim_id: str,
        engine_argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
    ) -> CohortHandle:
        stdin_r, stdin_w = os.pipe2(os.O_CLOEXEC)
        stdout_r, stdout_w = os.pipe2(os.O_CLOEXEC)
        devnull = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        try:
            child = spawn(engine_argv, env=dict(env) if env is not None else {"PATH": "/usr/bin:/bin"},
                          fds={0: stdin_r, 1: stdout_w, 2: stderr if stderr is not None else devnull},
                          credentials=self.engine, no_new_privs=True, new_session=True, cwd=cwd)
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
            raise CohortRefusal("launch-failed", "the engine exited before its start time was read")
        claim = CohortClaim(
            kind="pgroup", claim_id=claim_id, unit="", machine_id=machine_id(), boot_id=boot_id(),
            engine=MemberRef(child.pid, st), pgid=child.pid,
            containment=Containment(False, "none", (("process-group", "a setsid member leaves the group"),)),
        )
        return CohortHandle(claim, {}, os.fdopen(stdin_w, "wb", buffering=0), os.fdopen(stdout_r, "rb", buffering=0),
                            "pgroup", _spawned=child)
