"""The spawn helper: the only place a launcher's clone3 runs (README "Threads").

A clone3 child runs Python code (descriptor moves, the credential drop) before it execs, without what
fork(2) does for a threaded process, so ``_ffi.spawn`` refuses in a process with more than one thread.
A launcher may be called from any thread of a threaded process (the controller calls it from a worker
thread of its asyncio loop), so it never calls ``spawn`` itself: it starts this helper with
``subprocess.Popen`` (CPython's fork + exec, which runs no Python code in between) and the helper, a
fresh interpreter with one thread, does the clone3. A launcher may start the helper ahead of the launch
(``prewarm``), so that its interpreter boots while the caller does other work; it is used for one spawn:

1. it waits for one spawn request on its stdin, a Unix stream socket whose other end the launcher holds:
   a JSON object (to EOF) with the descriptors it names attached to its first bytes (SCM_RIGHTS). It
   waits at most ``idle`` seconds (its one argument) for the first byte; with none by then, or EOF first
   (the launcher closed its end: ``close()``, or it died), it exits with ``EXPIRED`` (75), having read
   nothing and started nothing;
2. it calls ``spawn`` with ``sibling=True`` (CLONE_PARENT): the new process is the *launcher's* child,
   not the helper's. It is born in the requested cgroup (CLONE_INTO_CGROUP) and gets spawn's other
   promises (descriptors, signals, credentials, no_new_privs, session, cwd) exactly as in the launcher;
3. it writes one JSON line on its stdout, ``{"ok": true, "pid": P}`` or ``{"ok": false, "errno": E,
   "error": "...", "pid": P or null}`` (P: a child that failed before exec, for the launcher to reap),
   and exits: 0, or 1 after a failure. It never waits for the child and outlives the spawn by nothing.

A shim request (the direct launcher's: it carries ``shimArgs``) starts the shim instead: step 2 is a clone3
(CLONE_INTO_CGROUP, CLONE_PARENT, as ``spawn``'s) whose child sets its signals, session and descriptors as
``spawn``'s child would and then runs the shim's steps 1-6 itself (``_shim.start_and_exec``: the cgroups,
the canary, the engine) before it execs the shim's interpreter for the rest (``argv`` is that interpreter and
its boot line). The child is a copy of this already booted, single-threaded interpreter, so the engine is
born within a few ms of the request instead of after a fresh interpreter's start (README "Threads": what a
launch costs). The helper reports the child at once; the shim reports its own start on its status
descriptor, as a shim started any other way does. Started with the argument ``shim`` after ``idle``, the helper imports ``_shim`` while
it waits, so that the request finds it imported.

The request: ``argv`` (list of str), ``env`` (object of str), ``fds`` (object: target descriptor, as a
decimal string, to the index of a received descriptor), optional ``cgroupFd`` (the index of a received
O_DIRECTORY descriptor), ``credentials`` (``[uid, gid, [groups...]]`` or null), ``noNewPrivs``,
``newSession`` (bools), ``cwd`` (str or null), ``rlimits`` (``[[resource, value], ...]``: set on the child
before its exec, ``_limits``), and for a shim request ``shimArgs`` (list of str: the shim's arguments after
its boot line; ``cgroupFd`` is then required, ``credentials``, ``noNewPrivs``, ``cwd`` and ``rlimits`` are
not allowed: the shim sets the engine's own).

Imports: the standard library and ``_ffi`` (``_cffi_backend``), and for a shim ``_shim`` (which adds
``cgroupfs``, ``_evidence`` and ``_proc``; no mosaic.safe_open). The launcher's boot line registers the
package without running its ``__init__``, which would import everything.
"""

from __future__ import annotations

import errno
import json
import os
import select
import signal
import socket
import sys

from ._ffi import Credentials, ExecFailed, clone_child, place_fds, reset_signals, spawn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["EXPIRED", "main"]

EXPIRED = 75  # exit status: no request was read and nothing was started (idle bound reached, or EOF first)
MAX_FDS = 16  # a request carries at most this many descriptors (the launchers pass five or six)
CHUNK = 1 << 16


def _receive(sock: socket.socket, idle: float) -> tuple[bytes, list[int]] | None:
    """The request's bytes and descriptors, or None when none came within ``idle`` seconds (or EOF first).

    Once its first bytes have come, the rest must follow within ``idle`` seconds too (ValueError).
    """
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    if not poller.poll(max(0, int(idle * 1000))):
        return None
    data, fds, flags, _ = socket.recv_fds(sock, CHUNK, MAX_FDS)
    if flags & socket.MSG_CTRUNC:
        raise ValueError("the request carries more descriptors than a request may")
    if not data and not fds:
        return None  # EOF: the launcher closed its end (close()) or is gone, and sent nothing
    chunks = [data]
    sock.settimeout(idle)
    try:
        while data:
            data = sock.recv(CHUNK)
            chunks.append(data)
    except TimeoutError as e:
        raise ValueError(f"the request did not end within {idle}s") from e
    return b"".join(chunks), fds


def _request(raw: bytes, received: list[int]) -> dict[str, Any]:
    req = json.loads(raw)
    if not isinstance(req, dict):
        raise ValueError("the request is not a JSON object")
    argv, env, fds = req.get("argv"), req.get("env"), req.get("fds", {})
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise ValueError("argv must be a non-empty list of strings")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise ValueError("env must be an object of strings")
    if not isinstance(fds, dict):
        raise ValueError("fds must map target descriptors to received ones")
    cgroup = req.get("cgroupFd")
    for index in [*fds.values(), *(() if cgroup is None else (cgroup,))]:
        if type(index) is not int or not 0 <= index < len(received):
            raise ValueError("fds and cgroupFd must name received descriptors")
    rlimits = req.get("rlimits", [])
    if not (isinstance(rlimits, list) and all(
            isinstance(p, list) and len(p) == 2 and all(type(x) is int and x >= 0 for x in p) for p in rlimits)):
        raise ValueError("rlimits must be a list of [resource, value] pairs of integers")
    if "shimArgs" in req:
        shim_args = req["shimArgs"]
        if not (isinstance(shim_args, list) and all(isinstance(a, str) for a in shim_args)):
            raise ValueError("shimArgs must be a list of strings")
        if cgroup is None or any(req.get(k) for k in ("credentials", "noNewPrivs", "cwd", "rlimits")):
            raise ValueError("a shim request names its cgroup and nothing of the engine's")
    return req


def _spawn(req: dict[str, Any], received: list[int]) -> int:
    creds = req.get("credentials")
    credentials = None
    if creds is not None:
        uid, gid, groups = creds
        credentials = Credentials(int(uid), int(gid), None if groups is None else tuple(int(g) for g in groups))
    cgroup = req.get("cgroupFd")
    child = spawn(
        req["argv"],
        env=req["env"],
        fds={int(k): received[v] for k, v in req.get("fds", {}).items()},
        cgroup_fd=None if cgroup is None else received[cgroup],
        credentials=credentials,
        no_new_privs=bool(req.get("noNewPrivs")),
        new_session=bool(req.get("newSession")),
        cwd=req.get("cwd"),
        sibling=True,
        rlimits=[(number, value) for number, value in req.get("rlimits", [])],
    )
    child.close()
    return child.pid


def _start_shim(req: dict[str, Any], received: list[int]) -> int:
    """The shim request: a clone3 child in the requested cgroup, this process's sibling, that runs the
    shim's start and execs the rest of the shim (module docstring)."""
    from . import _shim  # noqa: PLC0415 - imported at boot when the launcher asked for it ("shim")

    exec_argv, shim_args, env = list(req["argv"]), list(req["shimArgs"]), dict(req["env"])
    fds = {int(k): received[v] for k, v in req.get("fds", {}).items()}
    new_session = bool(req.get("newSession"))

    def body() -> int:
        reset_signals()
        if new_session:
            os.setsid()
        place_fds(fds)
        return _shim.start_and_exec(exec_argv, shim_args, env)

    child = clone_child(body, cgroup_fd=received[req["cgroupFd"]], sibling=True)
    child.close()
    return child.pid


def main(argv: list[str] | None = None) -> int:
    # A stray TERM (or a terminal's INT/HUP) must not cut a spawn in half; the child's dispositions are
    # reset to the defaults by spawn itself.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    args = sys.argv[1:] if argv is None else argv
    idle = float(args[0]) if args else 30.0
    if "shim" in args[1:]:
        from . import _shim  # noqa: PLC0415 - ready for the shim request before it comes

        _shim.warm()
    sock = socket.socket(fileno=0)
    report: dict[str, Any]
    try:
        got = _receive(sock, idle)
        if got is None:
            return EXPIRED
        raw, received = got
        req = _request(raw, received)
        pid = _start_shim(req, received) if "shimArgs" in req else _spawn(req, received)
        report = {"ok": True, "pid": pid}
    except ExecFailed as e:
        report = {"ok": False, "errno": e.errno, "error": e.strerror or str(e), "pid": e.pid}
    except OSError as e:
        report = {"ok": False, "errno": e.errno, "error": e.strerror or str(e), "pid": None}
    except (KeyError, TypeError, ValueError) as e:
        report = {"ok": False, "errno": errno.EINVAL, "error": f"malformed spawn request: {e!r}", "pid": None}
    try:
        os.write(1, (json.dumps(report) + "\n").encode())
    except OSError:
        pass  # the launcher is gone; a spawned child is reparented (and killed with its cohort) without it
    return 0 if report["ok"] else 1
