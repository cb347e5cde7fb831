"""The supervisor shim: the scope's (or direct cgroup's) first process (seeds/000 src/shim.mjs, brief §6).

What it does, in order:

1. ignores SIGTERM (and SIGINT, SIGHUP) so that a stray TERM never drops the scope's anchor, and becomes
   a child subreaper so that every orphaned member re-parents to it and is reaped by it (facts §7.3);
2. finds its own cgroup from /proc/self/cgroup and the cgroup2 mount from mountinfo, and checks the unit's
   name against the unit it was told: a scope shim is born in the unit's cgroup (systemd puts it there), a
   direct one in the unit's ``supervisor/``, which the launcher made with the unit's cgroup (see 4);
3. reads the scope's InvocationID from the manager (``systemctl --user show``); $INVOCATION_ID is only a
   cross-check (brief §6 "Identity and epoch"), and records machine id, boot id and the cgroup ids;
4. a scope shim creates ``supervisor/`` and moves itself there; a direct shim was born there and never
   moves (a move through cgroup.procs takes the kernel's cgroup_threadgroup_rwsem for writing, an RCU grace
   period: 8-28 ms measured here, on the engine's critical path). Then it creates ``engine/`` and
   (optionally) gives it to the engine's uid the way Delegate=yes would (the directory, cgroup.procs,
   cgroup.threads, cgroup.subtree_control; never cgroup.freeze or cgroup.kill), and sets the engine's
   limits (``_limits``, README "Limits"): each controller the unit's parent enables for the unit is enabled
   in the unit's ``cgroup.subtree_control`` and its limit written into engine/ (``pids.max``,
   ``memory.max``, ``cpu.max``); what cannot be held there becomes an rlimit set on the engine between its
   credential drop and its exec (step 6), or nothing; the hello says which;
5. runs the containment canary (K13): a child with the engine's credentials, inside ``engine/``, tries to
   write its own pid into cgroup.procs of supervisor/, of the unit, of the unit's parent and of the mount
   root. Containment holds only if every one is refused by the kernel's permission check;
6. spawns the engine into ``engine/`` with clone3(CLONE_INTO_CGROUP): contained from its first
   instruction (optionally in a cgroup namespace rooted at engine/, always with no_new_privs). The shim
   has one thread (it starts none; ``subprocess.run`` starts none on POSIX), which the canary's and the
   engine's clone3 require: ``_ffi`` refuses them in a process with more than one (README "Threads");
7. reports its hello on the status descriptor, then serves ops on a private Unix socket (peer must be
   root or the shim's own uid): hello, events, members, term, freeze, kill, deaths, release.

Steps 1-6, up to the engine's birth, are this module (``start``); the rest is ``_shim_ops.Shim``, imported
only once the engine runs. What the start hands to the rest (``Startup``) and its failure (``ShimError``)
are ``_shim_state``'s, which both import. Every millisecond before the engine's birth delays the engine (README "Threads":
what a launch costs), so this module imports the standard library, ``_ffi`` (``_cffi_backend``),
``cgroupfs``, ``_evidence``, ``_limits`` and ``_proc``, and nothing that is not needed before the engine starts
(mosaic.safe_open, socket, selectors, subprocess; a scope shim imports ``subprocess`` for the one
``systemctl`` call of step 3). Where steps 1-6 run:

* scope: in the shim process systemd-run became (``main``), which then goes on to step 7;
* direct: in the spawn helper's clone3 child, the shim's process from its birth in ``<unit>/supervisor``
  (``start_and_exec``): a copy of an interpreter that is already booted, single-threaded, with this module
  imported, so the engine is born within a few ms of the request. The process then execs a fresh interpreter
  on ``main`` with ``--resume`` (the ``Startup`` of steps 1-6: descriptors, paths, the canary's verdict, the
  engine's pid), which goes on to step 7. Its pid, cgroup and children (the engine) are the same throughout.

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
import select
import signal
import sys
import time

from . import cgroupfs as cg
from ._evidence import EvidenceUnavailable
from ._ffi import (
    CLONE_NEWCGROUP,
    CLONE_NEWUSER,
    Credentials,
    clone_child,
    pidfd_send_signal,
    set_child_subreaper,
    set_no_new_privs,
    spawn,
)
from ._limits import EngineLimits, held_to_dict, rlimits_of, settle
from ._proc import cgroup_of
from ._shim_state import ShimError, Startup

# Annotations only (strings here): typing alone would add ~2 ms to the shim's start.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

__all__ = ["main", "start", "start_and_exec", "warm"]

DELEGATED_FILES = ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control")


def _ignore_stop_signals() -> None:
    # A stray TERM (or a terminal's INT/HUP) must never drop the unit's anchor.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


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
        poller = select.poll()
        poller.register(r, select.POLLIN)
        while time.monotonic() < deadline:
            if not poller.poll(max(0, int((deadline - time.monotonic()) * 1000)) + 1):
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
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


def _manager_invocation_id(systemctl: str, unit: str) -> str:
    # The scope route only: the direct shim never imports subprocess.
    import subprocess  # noqa: PLC0415

    cmd = [systemctl, "--user", "show", "-p", "InvocationID", "--value", "--", unit]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    value = r.stdout.strip()
    if r.returncode != 0 or len(value) != 32:
        raise ShimError(f"InvocationID of {unit} unreadable from the manager: rc={r.returncode} "
                        f"{r.stderr.strip()!r} {value!r}")
    return value


def start(a: argparse.Namespace, s: Startup, log: Callable[[str], None]) -> None:
    """Steps 1-6 of the module docstring, into ``s``: from the shim's birth in the unit cgroup to the
    engine's birth in engine/, whose stdin and stdout the shim then no longer holds."""
    _ignore_stop_signals()
    set_child_subreaper(True)  # kept across the direct route's exec, as are the ignored signals
    s.mount = mount = cg.find_cgroup2()
    here = cgroup_of("self")
    if here is None:
        raise ShimError("no cgroup2 line in /proc/self/cgroup")
    born_in_supervisor = a.mode == "direct"
    if born_in_supervisor and os.path.basename(here) != "supervisor":
        raise ShimError(f"a direct shim is born in <unit>/supervisor, not in {here!r}")
    s.own = own = os.path.dirname(here) if born_in_supervisor else here
    s.unit_path = unit_path = os.path.normpath(mount.mount_point + own)
    if os.path.basename(unit_path) != a.unit:
        raise ShimError(f"shim runs in {here!r}, not in a cgroup named {a.unit!r}")
    s.env_invocation = os.environ.get("INVOCATION_ID")
    if a.mode == "scope":
        s.invocation = _manager_invocation_id(a.systemctl, a.unit)
        if s.env_invocation is not None and s.env_invocation != s.invocation:
            raise ShimError(f"$INVOCATION_ID {s.env_invocation} != manager's {s.invocation}")
    s.unit_fd = unit_fd = os.open(unit_path, cg.O_DIR)
    if born_in_supervisor:
        s.sup_fd = os.open("supervisor", cg.O_DIR, dir_fd=unit_fd)
    else:
        os.mkdir("supervisor", 0o755, dir_fd=unit_fd)
        s.sup_fd = os.open("supervisor", cg.O_DIR, dir_fd=unit_fd)
        cg.write_value(s.sup_fd, "cgroup.procs", "0")
        now = cgroup_of("self")
        if now is None or os.path.normpath(mount.mount_point + now) != os.path.join(unit_path, "supervisor"):
            raise ShimError(f"move to supervisor/ did not take: {now!r}")
    os.mkdir("engine", 0o755, dir_fd=unit_fd)
    s.engine_fd = os.open("engine", cg.O_DIR, dir_fd=unit_fd)
    creds = None
    if a.engine_uid is not None:
        creds = Credentials(a.engine_uid, a.engine_gid if a.engine_gid is not None else a.engine_uid, ())
        for name in (".", *DELEGATED_FILES):
            os.chown(name, creds.uid, creds.gid, dir_fd=s.engine_fd, follow_symlinks=False)
    s.engine_path = os.path.join(unit_path, "engine")
    s.engine_rel = os.path.join(own, "engine")
    s.features = [f for f in ("cgroup.freeze", "cgroup.kill") if cg.has_feature(s.engine_fd, f)]
    parent = os.path.dirname(unit_path)
    targets = [os.path.join(unit_path, "supervisor", "cgroup.procs"), os.path.join(unit_path, "cgroup.procs")]
    if parent.startswith(mount.mount_point) and parent != mount.mount_point:
        targets.append(os.path.join(parent, "cgroup.procs"))
    targets.append(os.path.join(mount.mount_point, "cgroup.procs"))
    # An unprivileged shim needs a user namespace for the cgroup namespace (root in it = its own uid).
    s.userns = userns = bool(a.cgroupns) and os.geteuid() != 0
    if userns and creds is not None:
        raise ShimError("an unprivileged shim cannot give the engine another uid; use the subuid route")
    if userns:
        creds = Credentials(0, 0, None)
    s.creds = creds
    # The engine's kuid: its own uid, or (in a user namespace, or with no credentials) the shim's.
    engine_kuid = os.geteuid() if creds is None or userns else creds.uid
    held = settle(EngineLimits.from_dict(json.loads(a.limits)), s.unit_fd, s.engine_fd,
                  engine_owns_files=engine_kuid in (0, os.geteuid()), engine_root=engine_kuid == 0)
    s.limits = held_to_dict(held)
    log(f"limits {s.limits}")
    s.containment = run_canary(s.engine_fd, targets, creds, a.cgroupns, mount.nsdelegate, userns=userns)
    log(f"canary {s.containment}")
    env = json.loads(a.engine_env) if a.engine_env else {"PATH": "/usr/bin:/bin"}
    stderr_fd = a.engine_stderr_fd if a.engine_stderr_fd is not None else 2
    child = spawn(
        a.engine,
        env=env,
        fds={0: 0, 1: 1, 2: stderr_fd},
        cgroup_fd=s.engine_fd,
        credentials=creds,
        new_cgroupns=a.cgroupns,
        no_new_privs=True,
        cwd=a.engine_cwd,
        userns_setup=map_self if userns else None,
        rlimits=rlimits_of(held),
    )
    s.engine_pid = child.pid
    child.close()
    # The engine owns stdin/stdout now: the shim must not hold them, or the controller never sees EOF.
    devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    if a.engine_stderr_fd is not None:
        os.close(a.engine_stderr_fd)
    os.close(devnull)


def _parser() -> argparse.ArgumentParser:
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
    ap.add_argument("--limits", default=json.dumps(EngineLimits().to_dict()),
                    help="JSON object: the engine's limits (EngineLimits.to_dict(); default: the defaults)")
    ap.add_argument("--systemctl", default="systemctl")
    ap.add_argument("--log")
    ap.add_argument("--resume", help="internal (the direct route): the state of steps 1-6, which ran before an "
                                     "exec into this process")
    ap.add_argument("engine", nargs="+")
    return ap


_PARSER: list[argparse.ArgumentParser] = []  # built once, at the first parse


def parse_args(argv: list[str]) -> argparse.Namespace:
    if not _PARSER:
        _PARSER.append(_parser())
    return _PARSER[0].parse_args(argv)


def warm() -> None:
    """What the spawn helper runs while it waits for a shim request: one parse, which builds the parser and
    fills what argparse fills at its first use (compiled patterns, gettext's lookups). The helper's clone
    then parses the shim's arguments in ~0.3 ms instead of ~4 ms (measured), before the engine's birth."""
    parse_args(["--mode", "direct", "--unit", "u.scope", "--socket", "s", "--nonce", "n", "--status-fd", "3",
                "--", "true"])


def _failed(status_fd: int, s: Startup, e: BaseException) -> int:
    """Report a failed start on the status descriptor (and stderr) and kill whatever is already in engine/,
    so that a failed launch leaves nothing running. Returns the exit status, 3."""
    msg = json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n"
    try:
        os.write(status_fd, msg.encode())
    except OSError:
        pass
    try:
        os.write(2, msg.encode())
    except OSError:
        pass
    if s.engine_fd >= 0:
        try:
            cg.write_value(s.engine_fd, "cgroup.kill", "1")
        except OSError:
            pass
    return 3


def start_and_exec(exec_argv: list[str], shim_args: list[str], env: dict[str, str]) -> int:
    """The direct route's steps 1-6, in the spawn helper's clone3 child (module docstring): ``start``, then
    exec ``exec_argv`` (the shim's interpreter and boot) with ``--resume`` and ``shim_args``, the rest of
    the shim. Its descriptors 0-4 are in place (``_ffi.place_fds``). Returns only after a failure, with the
    exit status, having reported it (``_failed``)."""
    args = parse_args(shim_args)
    s = Startup()
    try:
        start(args, s, _log_to(args.log))
        for fd in (s.unit_fd, s.sup_fd, s.engine_fd):
            os.set_inheritable(fd, True)
        os.execve(exec_argv[0], [*exec_argv, "--resume", s.to_json(), *shim_args], env)
    except Exception as e:  # noqa: BLE001 - this process has no caller: every failure is reported
        return _failed(args.status_fd, s, e)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = _log_to(args.log)
    startup = Startup()
    status_fd = args.status_fd
    try:
        if args.resume is None:
            start(args, startup, log)
        else:
            startup = Startup.from_json(args.resume)  # steps 1-6 ran before the exec (start_and_exec)
            _ignore_stop_signals()
        # The engine runs: only now the rest of the shim (the hello's readers, the socket, the ops).
        from ._shim_ops import Shim  # noqa: PLC0415

        shim = Shim(args, startup, log)
    except (ShimError, OSError, EvidenceUnavailable, ValueError, KeyError, TypeError) as e:
        return _failed(status_fd, startup, e)
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
    log("released")
    return 0
