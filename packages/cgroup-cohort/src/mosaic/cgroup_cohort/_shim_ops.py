"""The running shim: from the engine's birth to its release (steps 7 and on of ``_shim``'s docstring).

``_shim.start`` has made the cgroups, run the canary and started the engine; ``Shim`` reads what the hello
reports (the machine and boot ids and the start times through mosaic.safe_open, the cgroup ids), binds the
private socket last (a client that can connect finds a complete shim), then serves the ops and reaps every
member it can, recording (pid, start time, signal or status, time) for each. ``_shim.main`` imports this
module only once the engine runs (README "Threads": what a launch costs).
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
import time
from collections.abc import Callable
from typing import Any

# The shim's import graph: the standard library, cffi (through _ffi), this package's cgroupfs, _errors,
# _evidence, _ffi, _proc, _shim and _shim_state, and mosaic.safe_open (the one reading of the machine id, the boot id and
# /proc/<pid>/stat). safe_open loads no cffi at import. The launchers put both packages' roots on the shim's
# path (_boot.SHIM_ROOTS); a vendored shim_path must hold both (README "The shim").
from mosaic.safe_open.identity import boot_id, machine_id, read_stat

from . import cgroupfs as cg
from ._evidence import EvidenceUnavailable
from ._ffi import pidfd_open, pidfd_send_signal
from ._proc import cgroup_of, start_time
from ._shim_state import ShimError, Startup

__all__ = ["Shim"]

MAX_DEATHS = 200_000


class Shim:
    """The running shim. All state lives here; one thread; blocking ops are bounded."""

    def __init__(self, args: argparse.Namespace, s: Startup, log: Callable[[str], None]) -> None:
        self.args = args
        self.log = log
        self.deaths: dict[tuple[int, int], dict[str, Any]] = {}
        self.released = False
        self.sel = selectors.DefaultSelector()
        self.conns: dict[int, tuple[socket.socket, bytearray]] = {}
        self.unit_fd, self.sup_fd, self.engine_fd = s.unit_fd, s.sup_fd, s.engine_fd
        self.engine_path, self.engine_rel = s.engine_path, s.engine_rel
        self.engine_pid = s.engine_pid
        st = start_time(s.engine_pid)  # an unreaped child of this process: its stat stays readable
        if st is None:
            raise ShimError("the engine vanished before its start time was read")
        self.engine_start = st
        assert s.mount is not None
        self.hello: dict[str, Any] = {
            "nonce": args.nonce,
            "mode": args.mode,
            "unit": args.unit,
            "mountPoint": s.mount.mount_point,
            "nsdelegate": s.mount.nsdelegate,
            "cgroupPath": s.own,
            "machineId": machine_id(),
            "bootId": boot_id(),
            "invocationId": s.invocation,
            "invocationIdEnv": s.env_invocation,
            "unitCgroupId": cg.cgroup_id(s.unit_fd),
            "supervisorCgroupId": cg.cgroup_id(s.sup_fd),
            "engineCgroupId": cg.cgroup_id(s.engine_fd),
            "shim": {"pid": os.getpid(), "startTime": start_time(os.getpid())},
            "engine": {"pid": self.engine_pid, "startTime": self.engine_start},
            "engineUid": os.geteuid() if s.creds is None or s.userns else s.creds.uid,
            "engineUserns": s.userns,
            "cgroupns": bool(args.cgroupns),
            "containment": s.containment,
            "features": s.features,
            "limits": s.limits,  # where each engine limit holds (_limits, README "Limits")
        }
        # The socket last: a client that can connect finds a complete shim.
        self.sock_path = args.socket
        self._bind(args.socket)

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

    def _switch_on(self, name: str) -> bool:
        """Write 1 to engine/`name` (cgroup.freeze, cgroup.kill); False when this kernel has no such file.
        Any other error is evidence unavailable."""
        try:
            cg.write_value(self.engine_fd, name, "1")
        except OSError as e:
            if e.errno == errno.ENOENT:
                return False
            raise EvidenceUnavailable("cgroup-unavailable", f"{name}: {e}") from e
        return True

    def op_freeze(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        timeout = float(req.get("timeout", 10.0))
        if not self._switch_on("cgroup.freeze"):
            return {"frozen": False, "detail": "cgroup.freeze missing"}
        ok, detail = cg.wait_tree(self.engine_fd, lambda e: e.frozen is True, timeout)
        return {"frozen": ok, "detail": "" if ok else f"not frozen after {timeout}s: {detail}"}

    def op_kill(self, req: dict[str, Any]) -> dict[str, Any]:
        self._engine_alive_check()
        timeout = float(req.get("timeout", 10.0))
        if not self._switch_on("cgroup.kill"):
            return {"written": False, "populated0": False, "at": None}
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
