"""How a launcher starts this package's own code in a fresh interpreter, and reads what it reports.

Two programs of this package run in processes a launch starts: the supervisor shim (``_shim``, started by
``systemd-run`` in a scope or clone3'd by the spawn helper) and the spawn helper (``_spawner``). Each is
started with ``python -I -c <boot> <roots> ...``: a short boot line that imports exactly the code the
launcher runs and nothing of the caller's environment, and each reports one JSON line on a pipe
(``read_status``). ``reap`` collects a ``subprocess.Popen`` child that should be exiting.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import mosaic.safe_open

from ._ffi import Credentials
from ._limits import EngineLimits

__all__ = ["HELPER_CODE", "HELPER_ROOT", "SHIM_CODE", "SHIM_ROOTS", "clean_env", "read_status", "reap",
           "shim_args", "shim_boot"]


def package_root(module_file: str) -> str:
    """The directory holding the ``mosaic`` directory a module file sits in (``.../mosaic/<pkg>/x.py``)."""
    return str(Path(module_file).resolve().parents[2])


# The shim imports exactly the code this launcher runs: the directories holding this package and
# mosaic.safe_open (its bottom layer: the refusal base and the shared identities) go first on its path, and
# -I keeps every PYTHON* variable and the user site out of a process that may run as root. In an installed
# environment both are the same site-packages directory; in an editable or source layout they differ, and
# the namespace package ``mosaic`` is assembled from both (PEP 420). (``python -m mosaic.cgroup_cohort.shim``
# is the same entry point for a manual start.)
SHIM_ROOTS: tuple[str, ...] = tuple(dict.fromkeys((package_root(__file__),
                                                   package_root(mosaic.safe_open.__file__ or ""))))
# The boot puts the roots first on the path and registers ``mosaic.cgroup_cohort`` as a bare package (its
# directory under each root as ``__path__``) without running its ``__init__``, which would import every module
# of the package (the stop machines, the proofs, the launchers) and take about half of the shim's start.
_BARE_PACKAGE = ("import os, sys; roots = sys.argv.pop(1).split(os.pathsep); sys.path[:0] = roots; "
                 "pkg = type(sys)('mosaic.cgroup_cohort'); "
                 "pkg.__path__ = [os.path.join(r, 'mosaic', 'cgroup_cohort') for r in roots]; "
                 "sys.modules[pkg.__name__] = pkg; ")
SHIM_CODE = _BARE_PACKAGE + "from mosaic.cgroup_cohort._shim import main; sys.exit(main())"


def shim_boot(shim_path: str | None) -> list[str]:
    """The interpreter arguments that start the shim from ``shim_path`` (one directory holding both
    packages, e.g. a vendored copy) or, by default, from the launcher's own package roots."""
    roots = os.pathsep.join(SHIM_ROOTS) if shim_path is None else shim_path
    return ["-I", "-c", SHIM_CODE, roots]


def shim_args(
    *, mode: str, shim_path: str | None = None, unit: str, socket_path: str, nonce: str, status_fd: int,
    stderr_fd: int, credentials: Credentials | None, env: Mapping[str, str] | None, cwd: str | None,
    cgroupns: bool, log: str | None, systemctl: str | None, engine_argv: Sequence[str],
    limits: EngineLimits | None = None,
) -> list[str]:
    """The shim's whole command line after the interpreter: its boot line, then every option its parser
    (``_shim.parse_args``) reads back, then ``--`` and the engine's argv, which stays the engine's."""
    args = [*shim_boot(shim_path), "--mode", mode, "--unit", unit, "--socket", socket_path,
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
HELPER_CODE = _BARE_PACKAGE + "from mosaic.cgroup_cohort._spawner import main; os._exit(main())"
HELPER_ROOT = package_root(__file__)


def clean_env() -> dict[str, str]:
    """The environment of a shim or spawn helper a launcher starts: ``PATH`` alone, nothing else of the
    caller's (the process may run as root, and ``-I`` ignores the ``PYTHON*`` variables anyway)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def read_status(status_r: int, diag_r: int, proc_fd: int, timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Wait for the shim's (or the spawn helper's) one-line status on ``status_r``, reading its diagnostics
    from ``diag_r`` meanwhile, until it arrives, ``proc_fd`` (a pidfd) says the process exited, or
    ``timeout``; returns (status or None, diagnostics read so far)."""
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


def reap(proc: subprocess.Popen[bytes]) -> None:
    """Wait (bounded) for a child that should be exiting (a systemd-run or the shim it became, a spawn
    helper); kill it if not."""
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
