"""The supervisor shim: the scope's (or direct cgroup's) first process (seeds/000 src/shim.mjs, brief §6).

What it does, in order:

1. ignores SIGTERM (and SIGINT, SIGHUP) so that a stray TERM never drops the scope's anchor, and becomes
   a child subreaper so that every orphaned member re-parents to it and is reaped by it (facts §7.3);
2. finds its own cgroup (the unit) from /proc/self/cgroup and the cgroup2 mount from mountinfo, and checks
   its name against the unit it was told;
3. reads the scope's InvocationID from the manager (``systemctl --user show``); $INVOCATION_ID is only a
   cross-check (brief §6 "Identity and epoch"), and records machine id, boot id and the cgroup ids;
4. creates ``supervisor/`` and moves itself there, creates ``engine/`` and (optionally) gives it to the
   engine's uid the way Delegate=yes would (the directory, cgroup.procs, cgroup.threads,
   cgroup.subtree_control; never cgroup.freeze or cgroup.kill);
5. runs the containment canary (K13): a child with the engine's credentials, inside ``engine/``, tries to
   write its own pid into cgroup.procs of supervisor/, of the unit, of the unit's parent and of the mount
   root. Containment holds only if every one is refused by the kernel's permission check;
6. spawns the engine into ``engine/`` with clone3(CLONE_INTO_CGROUP): contained from its first
   instruction (optionally in a cgroup namespace rooted at engine/, always with no_new_privs);
7. reports its hello on the status descriptor, then serves ops on a private Unix socket (peer must be
   root or the shim's own uid): hello, events, members, term, freeze, kill, deaths, release.

It stays alive until released, so the scope is not collected before emptiness is read, and it reaps every
member it can, recording (pid, start time, signal or status, time) for each.

Protocol: one JSON object per line each way. Replies carry ``ok``; a failed observation carries
``unavailable`` (a reason of UNCERTAIN_REASONS), never a made-up empty value.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

# The shim's import graph: the standard library, cffi (through _ffi), this package's _cgroupfs, _errors,
# _ffi and _proc, and mosaic.safe_open (the refusal base, and the one reading of the machine id, the boot
# id and /proc/<pid>/stat). safe_open loads no cffi at import. The launchers put both packages' roots on
# the shim's path (_launchers.SHIM_ROOTS); a vendored shim_path must hold both (README "The shim").
from mosaic.safe_open import boot_id, machine_id, read_stat

from . import _cgroupfs as cg
from ._errors import EvidenceUnavailable
from ._ffi import (
    CLONE_NEWCGROUP,
    CLONE_NEWUSER,
    Credentials,
    clone_child,
    pidfd_open,
    pidfd_send_signal,
    set_child_subreaper,
    set_no_new_privs,
    spawn,
)
from ._proc import cgroup_of, start_time

__all__ = ["main"]

DELEGATED_FILES = ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control")
MAX_DEATHS = 200_000


class ShimError(Exception):
    """Startup failed; the message goes to the status descriptor and stderr, exit status 3."""


def _log_to(path: str | None) -> Callable[[str], None]:
    def log(msg: str) -> None:
        if path is None:
            return
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{time.time():.6f} shim[{os.getpid()}] {msg}\n")

    return log


def _errno_name(e: OSError) -> str:
    return errno.errorcode.get(e.errno or 0, str(e.errno))


def map_self(pid: int) -> None:
    """Map root of ``pid``'s new user namespace to this process's uid and gid (``unshare -U -r``).

    The one mapping an unprivileged process may write for its child (user_namespaces(7)); it is how an
    unprivileged shim gives the engine a cgroup namespace (CLONE_NEWCGROUP needs CAP_SYS_ADMIN in the
    owning user namespace). The engine stays the same kuid: this adds no boundary (facts §4.1).
    """
    with open(f"/proc/{pid}/uid_map", "w", encoding="ascii") as f:
        f.write(f"0 {os.geteuid()} 1\n")
    with open(f"/proc/{pid}/setgroups", "w", encoding="ascii") as f:
        f.write("deny\n")
    with open(f"/proc/{pid}/gid_map", "w", encoding="ascii") as f:
        f.write(f"0 {os.getegid()} 1\n")


def run_canary(
    engine_fd: int,
    targets: list[str],
    credentials: Credentials | None,
    new_cgroupns: bool,
    nsdelegate: bool,
    timeout: float = 10.0,
    userns: bool = False,
) -> dict[str, Any]:
    """K13 canary: can a process with the engine's credentials, born in engine/, leave it?

    Returns {"held", "method", "attempts": [[target, result], ...]}. ``held`` is True only when every
    target refused with EACCES (the ownership boundary, facts §4.4) or, on an nsdelegate mount from a
    cgroup namespace rooted at engine/, with ENOENT (facts §4.2). ENOENT without nsdelegate is path
    hiding, not a boundary (facts §4.5), so it does not count.
    """
    r, w = os.pipe2(os.O_CLOEXEC)
    sync_r, sync_w = os.pipe2(os.O_CLOEXEC) if userns else (-1, -1)

    def body() -> int:
        os.close(r)
        if userns:
            os.close(sync_w)
            os.read(sync_r, 1)  # wait until the parent has written the id maps
        results: list[list[str]] = []
        if credentials is not None:
            if credentials.groups is not None:
                os.setgroups(list(credentials.groups))
            os.setresgid(credentials.gid, credentials.gid, credentials.gid)
            os.setresuid(credentials.uid, credentials.uid, credentials.uid)
        set_no_new_privs()
        for target in targets:
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    os.write(fd, b"0")
                finally:
                    os.close(fd)
                results.append([target, "MOVED"])
                break  # it is outside engine/ now: report and exit at once
            except OSError as e:
                results.append([target, _errno_name(e)])
        os.write(w, json.dumps(results).encode())
        return 0

    flags = (CLONE_NEWCGROUP if new_cgroupns else 0) | (CLONE_NEWUSER if userns else 0)
    try:
        child = clone_child(body, cgroup_fd=engine_fd, flags=flags)
    finally:
        os.close(w)
        if userns:
            os.close(sync_r)
    if userns:
        try:
            map_self(child.pid)
        finally:
            os.close(sync_w)
    try:
        data = b""
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(r, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        sel.close()
    finally:
        os.close(r)
        try:
            pidfd_send_signal(child.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(child.pid, 0)
        child.close()
    try:
        attempts = [(str(t), str(res)) for t, res in json.loads(data or b"[]")]
    except ValueError:
        attempts = []
    ok = {"EACCES"} | ({"ENOENT"} if (nsdelegate and new_cgroupns) else set())
    held = bool(attempts) and len(attempts) == len(targets) and all(res in ok for _, res in attempts)
    method = "none"
    if held:
        method = "nsdelegate" if any(res == "ENOENT" for _, res in attempts) else "engine-uid"
    return {"held": held, "method": method, "attempts": [list(a) for a in attempts]}


class Shim:
    """The running shim. All state lives here; one thread; blocking ops are bounded."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = _log_to(args.log)
        self.deaths: dict[tuple[int, int], dict[str, Any]] = {}
        self.engine_pid = -1
        self.engine_start = -1
        self.released = False
        self.hello: dict[str, Any] = {}
        self.sel = selectors.DefaultSelector()
        self.conns: dict[int, tuple[socket.socket, bytearray]] = {}

    # ------------------------------------------------------------------------------------------ startup
    def _manager_invocation_id(self, unit: str) -> str:
        cmd = [self.args.systemctl, "--user", "show", "-p", "InvocationID", "--value", "--", unit]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
        value = r.stdout.strip()
        if r.returncode != 0 or len(value) != 32:
            raise ShimError(f"InvocationID of {unit} unreadable from the manager: rc={r.returncode} "
                            f"{r.stderr.strip()!r} {value!r}")
        return value

    def start(self) -> None:
        a = self.args
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        set_child_subreaper(True)
        mount = cg.find_cgroup2()
        own = cgroup_of("self")
        if own is None:
            raise ShimError("no cgroup2 line in /proc/self/cgroup")
        unit_path = os.path.normpath(mount.mount_point + own)
        if os.path.basename(unit_path) != a.unit:
            raise ShimError(f"shim runs in {own!r}, not in a cgroup named {a.unit!r}")
        invocation = None
        env_invocation = os.environ.get("INVOCATION_ID")
        if a.mode == "scope":
            invocation = self._manager_invocation_id(a.unit)
            if env_invocation is not None and env_invocation != invocation:
                raise ShimError(f"$INVOCATION_ID {env_invocation} != manager's {invocation}")
        unit_fd = os.open(unit_path, cg.O_DIR)
        self.unit_fd = unit_fd
        os.mkdir("supervisor", 0o755, dir_fd=unit_fd)
        self.sup_fd = os.open("supervisor", cg.O_DIR, dir_fd=unit_fd)
        cg.write_value(self.sup_fd, "cgroup.procs", "0")
        now = cgroup_of("self")
        if now is None or os.path.normpath(mount.mount_point + now) != os.path.join(unit_path, "supervisor"):
            raise ShimError(f"move to supervisor/ did not take: {now!r}")
        os.mkdir("engine", 0o755, dir_fd=unit_fd)
        self.engine_fd = os.open("engine", cg.O_DIR, dir_fd=unit_fd)
        creds = None
        if a.engine_uid is not None:
            creds = Credentials(a.engine_uid, a.engine_gid if a.engine_gid is not None else a.engine_uid, ())
            for name in (".", *DELEGATED_FILES):
                os.chown(name, creds.uid, creds.gid, dir_fd=self.engine_fd, follow_symlinks=False)
        self.engine_path = os.path.join(unit_path, "engine")
        self.engine_rel = os.path.join(own, "engine")
        features = [f for f in ("cgroup.freeze", "cgroup.kill") if cg.has_feature(self.engine_fd, f)]
        parent = os.path.dirname(unit_path)
        targets = [os.path.join(unit_path, "supervisor", "cgroup.procs"), os.path.join(unit_path, "cgroup.procs")]
        if parent.startswith(mount.mount_point) and parent != mount.mount_point:
            targets.append(os.path.join(parent, "cgroup.procs"))
        targets.append(os.path.join(mount.mount_point, "cgroup.procs"))
        # An unprivileged shim needs a user namespace for the cgroup namespace (root in it = its own uid).
        userns = bool(a.cgroupns) and os.geteuid() != 0
        if userns and creds is not None:
            raise ShimError("an unprivileged shim cannot give the engine another uid; use the subuid route")
        if userns:
            creds = Credentials(0, 0, None)
        containment = run_canary(self.engine_fd, targets, creds, a.cgroupns, mount.nsdelegate, userns=userns)
        self.log(f"canary {containment}")
        env = json.loads(a.engine_env) if a.engine_env else {"PATH": "/usr/bin:/bin"}
        stderr_fd = a.engine_stderr_fd if a.engine_stderr_fd is not None else 2
        child = spawn(
            a.engine,
            env=env,
            fds={0: 0, 1: 1, 2: stderr_fd},
            cgroup_fd=self.engine_fd,
            credentials=creds,
            new_cgroupns=a.cgroupns,
            no_new_privs=True,
            cwd=a.engine_cwd,
            userns_setup=map_self if userns else None,
        )
        self.engine_pid = child.pid
        st = start_time(child.pid)
        child.close()
        if st is None:
            raise ShimError("the engine vanished before its start time was read")
        self.engine_start = st
        # The engine owns stdin/stdout now: the shim must not hold them, or the controller never sees EOF.
        devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        if a.engine_stderr_fd is not None:
            os.close(a.engine_stderr_fd)
        os.close(devnull)
        self.hello = {
            "nonce": a.nonce,
            "mode": a.mode,
            "unit": a.unit,
            "mountPoint": mount.mount_point,
            "nsdelegate": mount.nsdelegate,
            "cgroupPath": own,
            "machineId": machine_id(),
            "bootId": boot_id(),
            "invocationId": invocation,
            "invocationIdEnv": env_invocation,
            "unitCgroupId": cg.cgroup_id(unit_fd),
            "supervisorCgroupId": cg.cgroup_id(self.sup_fd),
            "engineCgroupId": cg.cgroup_id(self.engine_fd),
            "shim": {"pid": os.getpid(), "startTime": start_time(os.getpid())},
            "engine": {"pid": self.engine_pid, "startTime": self.engine_start},
            "engineUid": os.geteuid() if creds is None or userns else creds.uid,
            "engineUserns": userns,
            "cgroupns": bool(a.cgroupns),
            "containment": containment,
            "features": features,
        }
        # The socket last: a client that can connect finds a complete shim.
        self.sock_path = a.socket
        self._bind(a.socket)

    def _bind(self, path: str) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None:
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(path)
                raise ShimError(f"a live shim already serves {path}")
            except (ConnectionRefusedError, FileNotFoundError):
                os.unlink(path)
            finally:
                probe.close()
        old = os.umask(0o177)
        try:
            self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.listener.bind(path)
        finally:
            os.umask(old)
        self.listener.listen(8)
        self.listener.setblocking(False)
        self.sel.register(self.listener, selectors.EVENT_READ, "accept")

    # ------------------------------------------------------------------------------------------ reaping
    def reap(self) -> int:
        """Collect every child that has exited, recording how it died. Returns how many."""
        n = 0
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return n
            if info is None or info.si_pid == 0:
                return n
            pid = info.si_pid
            st = start_time(pid)  # still a zombie: /proc/<pid>/stat is readable
            os.waitid(os.P_PID, pid, os.WEXITED)
            n += 1
            if st is None:
                continue
            killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
            if len(self.deaths) >= MAX_DEATHS:
                self.deaths.pop(next(iter(self.deaths)))
            self.deaths[(pid, st)] = {
                "pid": pid,
                "startTime": st,
                "time": time.time(),
                "how": "reaped",
                "signal": info.si_status if killed else None,
                "status": None if killed else info.si_status,
            }

    # --------------------------------------------------------------------------------------------- ops
    def _engine_alive_check(self) -> None:
        # The held fd names the engine cgroup this shim made; if that directory was removed (or the name
        # now points at another cgroup), its events are unreadable: unavailable, never empty (K15).
        cg.read_events(self.engine_fd)
        if cg.cgroup_id(self.engine_path) != self.hello["engineCgroupId"]:
            raise EvidenceUnavailable("cgroup-unavailable", "engine/ was replaced")

    def _in_engine(self, pid: int) -> bool:
        path = cgroup_of(pid)
        if path is None:
            return False
        full = os.path.normpath(str(self.hello["mountPoint"]) + path)
        return full == self.engine_path or full.startswith(self.engine_path + "/")

    def op_hello(self, req: dict[str, Any]) -> dict[str, Any]:
        out = dict(self.hello)
        try:
            self._engine_alive_check()
            out["engineCgroupIdNow"] = cg.cgroup_id(self.engine_path)
        except EvidenceUnavailable as e:
            out["engineCgroupIdNow"] = None
            out["engineUnavailable"] = e.detail
        return out

    def op_events(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        until = req.get("until")
        timeout = float(req.get("timeout", 0.0))
        if until == "populated0":
            ok, ev = cg.wait_events(self.engine_fd, lambda e: not e.populated, timeout)
        else:
            ok, ev = True, cg.read_events(self.engine_fd)
        # frozen 1 of engine/ alone is not enough (see wait_tree): report the whole subtree too.
        tree_frozen, _ = cg.wait_tree(self.engine_fd, lambda e: e.frozen is True, 0.0)
        return {"reached": ok, "populated": ev.populated, "frozen": ev.frozen, "treeFrozen": tree_frozen}

    def op_members(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        first, c1 = cg.enumerate_members(self.engine_fd)
        second, c2 = cg.enumerate_members(self.engine_fd)
        return {"members": [list(m) for m in second], "stable": c1 and c2 and first == second}

    def op_term(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        members, _ = cg.enumerate_members(self.engine_fd)
        termed: list[list[int]] = []
        skipped: list[list[int]] = []
        for pid, st in members:
            try:
                pfd = pidfd_open(pid)
            except ProcessLookupError:
                skipped.append([pid, st])
                continue
            try:
                # The pidfd pins this process: check it is still the enumerated one and still in engine/.
                if start_time(pid) != st or not self._in_engine(pid):
                    skipped.append([pid, st])
                    continue
                pidfd_send_signal(pfd, signal.SIGTERM)
                termed.append([pid, st])
            except ProcessLookupError:
                skipped.append([pid, st])
            finally:
                os.close(pfd)
        return {"termed": termed, "skipped": skipped}

    def op_freeze(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        timeout = float(req.get("timeout", 10.0))
        try:
            cg.write_value(self.engine_fd, "cgroup.freeze", "1")
        except OSError as e:
            if e.errno == errno.ENOENT:
                return {"frozen": False, "detail": "cgroup.freeze missing"}
            raise EvidenceUnavailable("cgroup-unavailable", f"cgroup.freeze: {e}") from e
        ok, detail = cg.wait_tree(self.engine_fd, lambda e: e.frozen is True, timeout)
        return {"frozen": ok, "detail": "" if ok else f"not frozen after {timeout}s: {detail}"}

    def op_kill(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        timeout = float(req.get("timeout", 10.0))
        try:
            cg.write_value(self.engine_fd, "cgroup.kill", "1")
        except OSError as e:
            if e.errno == errno.ENOENT:
                return {"written": False, "populated0": False, "at": None}
            raise EvidenceUnavailable("cgroup-unavailable", f"cgroup.kill: {e}") from e
        ok, _ = cg.wait_events(self.engine_fd, lambda e: not e.populated, timeout)
        return {"written": True, "populated0": ok, "at": time.time() if ok else None}

    def op_deaths(self, req: dict[str, Any]) -> dict[str, Any]:
        wanted = {(int(p), int(s)) for p, s in req.get("members", [])}
        timeout = float(req.get("timeout", 2.0))
        deadline = time.monotonic() + timeout
        while True:
            self.reap()
            if wanted <= set(self.deaths):
                break
            if time.monotonic() >= deadline:
                break
            self._wait_sigchld(min(0.05, max(0.0, deadline - time.monotonic())))
        deaths: list[dict[str, Any]] = []
        survivors: list[list[int]] = []
        now = time.time()
        for pid, st in sorted(wanted):
            rec = self.deaths.get((pid, st))
            if rec is not None:
                deaths.append(rec)
                continue
            stat = read_stat(pid)
            if stat is None or stat.start_time != st:
                how = "populated-0"  # that (pid, start) no longer exists
            elif stat.state in ("Z", "X"):
                how = "zombie"
            elif stat.exiting:
                # populated 0 is signalled from cgroup_exit(), before the task becomes a zombie: a member
                # can still be in do_exit (PF_EXITING, irreversible) when it is read here.
                how = "exiting"
            else:
                survivors.append([pid, st])
                continue
            deaths.append({"pid": pid, "startTime": st, "time": now, "how": how, "signal": None, "status": None})
        return {"deaths": deaths, "survivors": survivors}

    def op_release(self, req: dict[str, Any]) -> dict[str, Any]:
        try:
            ev = cg.read_events(self.engine_fd)
            populated: bool | None = ev.populated
        except EvidenceUnavailable:
            populated = None
        if populated and not req.get("force"):
            return {"ok": False, "refused": "shim-refused", "detail": "engine/ is populated; stop it first"}
        self.released = True
        return {"released": True}

    OPS = ("hello", "events", "members", "term", "freeze", "kill", "deaths", "release")

    def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        if op not in self.OPS:
            return {"ok": False, "refused": "shim-refused", "detail": f"unknown op {op!r}"}
        try:
            out: dict[str, Any] = getattr(self, f"op_{op}")(req)
        except EvidenceUnavailable as e:
            return {"ok": False, "unavailable": e.reason, "detail": e.detail}
        out.setdefault("ok", True)
        return out

    # -------------------------------------------------------------------------------------------- loop
    def _wait_sigchld(self, timeout: float) -> None:
        self.sel.select(timeout)  # the wakeup pipe is registered; anything readable ends the wait

    def _on_accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except BlockingIOError:
            return
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid not in (0, os.geteuid()):
            self.log(f"refused peer uid {uid}")
            conn.close()
            return
        conn.setblocking(False)
        self.conns[conn.fileno()] = (conn, bytearray())
        self.sel.register(conn, selectors.EVENT_READ, "conn")

    def _on_conn(self, conn: socket.socket) -> None:
        _, buf = self.conns[conn.fileno()]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(conn)
            del self.conns[conn.fileno()]
            conn.close()
            return
        buf.extend(data)
        while b"\n" in buf:
            line, _, rest = bytes(buf).partition(b"\n")
            buf[:] = rest
            try:
                req = json.loads(line)
                if not isinstance(req, dict):
                    raise ValueError("not an object")
                resp = self.handle(req)
                resp["id"] = req.get("id")
            except ValueError as e:
                resp = {"ok": False, "refused": "shim-refused", "detail": f"malformed request: {e}"}
            self.reap()
            conn.setblocking(True)
            try:
                conn.sendall(json.dumps(resp).encode() + b"\n")
            except OSError:
                pass
            finally:
                conn.setblocking(False)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.sel.register(wake_r, selectors.EVENT_READ, "wake")
        while not self.released:
            for key, _ in self.sel.select(1.0):
                if key.data == "accept":
                    self._on_accept()
                elif key.data == "wake":
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                elif key.data == "conn":
                    assert isinstance(key.fileobj, socket.socket)
                    self._on_conn(key.fileobj)
            self.reap()
        for conn, _ in list(self.conns.values()):
            conn.close()
        self.listener.close()
        try:
            os.unlink(self.sock_path)
        except FileNotFoundError:
            pass


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m mosaic.cgroup_cohort.shim")
    ap.add_argument("--mode", choices=("scope", "direct"), required=True)
    ap.add_argument("--unit", required=True, help="the scope unit name (x.scope) or the direct cgroup's name")
    ap.add_argument("--socket", required=True, help="the private ops socket path")
    ap.add_argument("--nonce", required=True)
    ap.add_argument("--status-fd", type=int, required=True)
    ap.add_argument("--engine-stderr-fd", type=int)
    ap.add_argument("--engine-uid", type=int)
    ap.add_argument("--engine-gid", type=int)
    ap.add_argument("--engine-env", help="JSON object: the engine's whole environment")
    ap.add_argument("--engine-cwd")
    ap.add_argument("--cgroupns", action="store_true", help="engine in a cgroup namespace rooted at engine/")
    ap.add_argument("--systemctl", default="systemctl")
    ap.add_argument("--log")
    ap.add_argument("engine", nargs="+")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    shim = Shim(args)
    status_fd = args.status_fd
    try:
        shim.start()
    except (ShimError, OSError, EvidenceUnavailable, ValueError) as e:
        msg = json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n"
        try:
            os.write(status_fd, msg.encode())
        except OSError:
            pass
        sys.stderr.write(msg)
        # Anything already spawned is in engine/: kill it so a failed launch leaves nothing running.
        try:
            cg.write_value(shim.engine_fd, "cgroup.kill", "1")
        except (AttributeError, OSError):
            pass
        return 3
    os.write(status_fd, (json.dumps({"ok": True, "hello": shim.hello}) + "\n").encode())
    os.close(status_fd)
    # Nobody reads the launcher's diagnostic pipe after the hello: never block on it.
    if args.log:
        fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    else:
        fd = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    os.dup2(fd, 2)
    os.close(fd)
    shim.serve()
    shim.log("released")
    return 0
