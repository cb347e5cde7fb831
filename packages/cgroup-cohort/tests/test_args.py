"""What the launchers ask the shim to do, as the shim reads it back, and how the shim and the spawn helper
find their code (and no more of it than they need before the engine starts: README "Threads").

The argument builder, the boot lines, the shim's parser and its resume state, and the spawn helper's
protocol are the launchers' mechanism, public in ``mosaic.cgroup_cohort.shim`` and ``.spawn_helper``;
testing them is the point here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mosaic.cgroup_cohort
import mosaic.safe_open
from mosaic.cgroup_cohort import CohortRefusal, Credentials, EngineLimits, ScopeLauncher, UserManager
from mosaic.cgroup_cohort.cgroupfs import Cgroup2Mount
from mosaic.cgroup_cohort.internals import (
    EXPIRED,
    HELPER_CODE,
    HELPER_ROOT,
    SHIM_CODE,
    SHIM_ROOTS,
    Startup,
    parse_args,
    shim_args,
    shim_boot,
)
from mosaic.cgroup_cohort.limits import LimitHeld, held_to_dict

BOOT = len(shim_boot(None))


def _build(**over):
    kw = dict(mode="scope", unit="cohort-claim-abc.scope", socket_path="/s/cohort-claim-abc.scope.sock", nonce="n1",
              status_fd=5, stderr_fd=6, credentials=Credentials(1001, 1002), env={"PATH": "/usr/bin", "X": "a b"},
              cwd="/work", cgroupns=True, log=None, systemctl="systemctl",
              engine_argv=["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"])
    kw.update(over)
    return shim_args(**kw)


def test_shim_reads_back_exactly_what_the_launcher_asked():
    argv = _build()
    assert argv[:BOOT] == shim_boot(None)
    assert argv[0] == "-I"  # no PYTHON* variable reaches a shim that may run as root
    a = parse_args(argv[BOOT:])
    assert (a.mode, a.unit, a.socket, a.nonce, a.status_fd, a.engine_stderr_fd) == (
        "scope", "cohort-claim-abc.scope", "/s/cohort-claim-abc.scope.sock", "n1", 5, 6)
    assert (a.engine_uid, a.engine_gid, a.cgroupns, a.engine_cwd) == (1001, 1002, True, "/work")
    assert json.loads(a.engine_env) == {"PATH": "/usr/bin", "X": "a b"}
    # Engine arguments that look like options stay the engine's (after "--").
    assert a.engine == ["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"]
    # No limits asked: the defaults travel (README "Limits"); asked ones travel exactly.
    assert EngineLimits.from_dict(json.loads(a.limits)) == EngineLimits()
    asked = EngineLimits(pids=64, memory=1 << 28, address_space=None, cpu=0.5, core=None)
    assert EngineLimits.from_dict(json.loads(parse_args(_build(limits=asked)[BOOT:]).limits)) == asked


def test_root_engine_and_no_namespace_are_explicit():
    a = parse_args(_build(credentials=None, cgroupns=False, env=None, cwd=None, mode="direct",
                          systemctl=None)[BOOT:])
    assert a.engine_uid is None and not a.cgroupns and a.engine_env is None and a.mode == "direct"


def test_shim_refuses_an_unknown_mode():
    with pytest.raises(SystemExit):
        parse_args(["--mode", "nspawn", "--unit", "u", "--socket", "s", "--nonce", "n", "--status-fd", "3",
                    "--", "true"])


def test_shim_path_holds_the_roots_of_both_packages_it_imports():
    """The shim imports mosaic.safe_open (the refusal base, machine and boot ids, the stat parser): the boot
    puts the roots of both packages first on its path, whatever the install layout."""
    for module in (mosaic.cgroup_cohort, mosaic.safe_open):
        assert any(Path(module.__file__).resolve().is_relative_to(root) for root in SHIM_ROOTS), module
    assert shim_boot("/vendored")[-1] == "/vendored"


def test_the_shim_boot_line_imports_everything_the_shim_needs(tmp_path):
    """The exact boot the launchers run, in an empty environment and another directory, gets as far as the
    shim's argument parser, and the rest of the shim (``_shim_ops``: mosaic.safe_open, the socket) resolves
    from the same roots."""
    r = subprocess.run([sys.executable, *shim_boot(None), "--help"], capture_output=True, text=True, env={},
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--engine-uid" in r.stdout
    assert "mosaic.safe_open" in _boot_modules(SHIM_CODE, "mosaic.cgroup_cohort._shim_ops", tmp_path)


# Modules whose import the shim's start and the spawn helper avoid (README "Threads": what a launch costs):
# each costs milliseconds before the engine's birth (mosaic.safe_open ~10, dataclasses ~7, typing ~2).
HEAVY = {"mosaic.safe_open", "dataclasses", "typing", "inspect", "subprocess", "selectors", "hashlib",
         "mosaic.cgroup_cohort._shim_ops", "mosaic.cgroup_cohort._stop",
         *(f"mosaic.cgroup_cohort.{m}" for m in ("_launcher", "_boot", "_spawn_helper", "_shim_launcher", "_scope",
                                                 "_direct", "_pgroup"))}


def _boot_modules(code: str, module: str, cwd: Path, root: str | None = None) -> set[str]:
    """The modules loaded after ``code``'s boot prelude imports ``module``, in a fresh -I interpreter."""
    main = code[code.index("from mosaic.cgroup_cohort."):]
    probe = code.replace(main, f"import {module}; print(' '.join(sorted(sys.modules)))")
    r = subprocess.run([sys.executable, "-I", "-c", probe, root or os.pathsep.join(SHIM_ROOTS)],
                       capture_output=True, text=True, env={}, cwd=cwd, timeout=60)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_the_shims_start_imports_nothing_it_does_not_need_before_the_engine(tmp_path):
    """Steps 1-6 of the shim (``_shim``, up to the engine's birth) load this package's bindings and cgroup2
    readers and nothing heavy; never the package's ``__init__`` (the boot registers a bare package)."""
    loaded = _boot_modules(SHIM_CODE, "mosaic.cgroup_cohort._shim", tmp_path)
    ours = {m for m in loaded if m.startswith("mosaic.")}
    assert ours == {"mosaic.cgroup_cohort", *(f"mosaic.cgroup_cohort.{m}" for m in (
        "cgroupfs", "_evidence", "_ffi", "_ffi_abi", "_limits", "_proc", "_record", "_shim", "_shim_state"))}
    assert not loaded & HEAVY, loaded & HEAVY
    assert "cffi" not in loaded and "pycparser" not in loaded  # _ffi_abi: the backend only


def test_the_spawn_helper_boot_line_imports_only_what_it_spawns_with(tmp_path):
    """The spawn helper (README "Threads") boots as the launchers run it: ``_spawner`` and the bindings, and
    for a shim request (the direct launcher's) the shim's start; never the package's ``__init__``, never
    mosaic.safe_open (its root is not even on the helper's path)."""
    bindings = {"mosaic.cgroup_cohort", *(f"mosaic.cgroup_cohort.{m}" for m in ("_ffi", "_ffi_abi", "_record"))}
    loaded = _boot_modules(HELPER_CODE, "mosaic.cgroup_cohort._spawner", tmp_path, HELPER_ROOT)
    assert {m for m in loaded if m.startswith("mosaic.")} == bindings | {"mosaic.cgroup_cohort._spawner"}
    assert not loaded & (HEAVY - {"selectors"}), loaded & HEAVY  # socket imports selectors
    loaded = _boot_modules(HELPER_CODE, "mosaic.cgroup_cohort._spawner, mosaic.cgroup_cohort._shim", tmp_path,
                           HELPER_ROOT)
    assert not loaded & (HEAVY - {"selectors"}), loaded & HEAVY


def _helper(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """The spawn helper as the launchers start it, with its socket (our end returned)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen([sys.executable, "-I", "-c", HELPER_CODE, HELPER_ROOT, *extra], stdin=theirs.fileno(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, cwd=tmp_path)
    theirs.close()
    return proc, ours


@pytest.mark.parametrize("kind", [(), ("shim",)])
def test_the_spawn_helper_answers_a_malformed_request_with_a_refusal_report(tmp_path, kind):
    """Booted as the launchers boot it (in an empty environment and another directory), the helper reads its
    request from its socket and answers a malformed one with a report: its import graph resolved."""
    for request, fds in ((b"[]", []), (json.dumps({"argv": ["/bin/true"], "env": {}, "fds": {"0": 3}}).encode(), []),
                         (json.dumps({"argv": ["x"], "env": {}, "shimArgs": ["--mode"], "fds": {}}).encode(), [0]),
                         (json.dumps({"argv": ["/bin/true"], "env": {}, "rlimits": [[6]]}).encode(), []),
                         (json.dumps({"argv": ["x"], "env": {}, "shimArgs": [], "rlimits": [[6, 1]], "fds": {},
                                      "cgroupFd": 0}).encode(), [0])):
        proc, ours = _helper(tmp_path, "30", *kind)
        socket.send_fds(ours, [request], fds)
        ours.shutdown(socket.SHUT_WR)
        out, err = proc.communicate(timeout=60)
        ours.close()
        assert proc.returncode == 1, err
        report = json.loads(out)
        assert report["ok"] is False and report["pid"] is None and "malformed spawn request" in report["error"]


def test_an_unused_spawn_helper_exits_by_itself(tmp_path):
    """A helper nobody sends a request to (README "Threads": prewarm) exits with EXPIRED, reporting nothing:
    at its idle bound, and at once when the launcher's end of its socket closes (close(), or the launcher
    is gone)."""
    proc, ours = _helper(tmp_path, "0.3", "shim")
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (EXPIRED, b""), err
    assert 0.25 < time.monotonic() - t0 < 30
    ours.close()
    proc, ours = _helper(tmp_path, "600")
    time.sleep(0.2)
    ours.close()
    out, err = proc.communicate(timeout=30)  # long before its bound
    assert (proc.returncode, out) == (EXPIRED, b""), err


def test_the_resume_state_survives_the_exec_unchanged():
    """The direct route's shim runs steps 1-6 in the spawn helper's clone and execs the rest with
    ``--resume``: the state read back is the state written."""
    s = Startup()
    s.mount = Cgroup2Mount("/sys/fs/cgroup", False, "rw,nsdelegate")
    s.own, s.unit_path = "/p/cohort-x.scope", "/sys/fs/cgroup/p/cohort-x.scope"
    s.invocation, s.env_invocation = None, None
    s.unit_fd, s.sup_fd, s.engine_fd = 5, 6, 7
    s.engine_path, s.engine_rel = s.unit_path + "/engine", s.own + "/engine"
    s.creds, s.userns = Credentials(1001, 1002, (7, 8)), False
    s.features = ["cgroup.freeze", "cgroup.kill"]
    s.containment = {"held": True, "method": "engine-uid", "attempts": [["/a/cgroup.procs", "EACCES"]]}
    s.limits = held_to_dict({"pids": LimitHeld("cgroup", 64, "engine/pids.max"),
                             "memory": LimitHeld("rlimit", 1 << 34, "RLIMIT_AS", False, "memory.max: not offered"),
                             "data": LimitHeld("rlimit", 1 << 31, "RLIMIT_DATA", False, "per process"),
                             "cpu": LimitHeld("none", None, None, False, "cpu.max: not offered"),
                             "core": LimitHeld("rlimit", 0, "RLIMIT_CORE")})
    s.engine_pid = 4242
    back = Startup.from_json(s.to_json())
    assert vars(back) == vars(s)
    a = parse_args(["--resume", s.to_json(), *_build()[BOOT:]])
    assert a.resume == s.to_json() and a.engine[0] == "/usr/bin/node"


def check_socket_dir(path: str) -> str:
    """A shim launcher's socket directory check, through the public constructor (which reaches no manager)."""
    return ScopeLauncher(UserManager(), path).socket_dir


def test_socket_dir_must_be_private(tmp_path):
    d = tmp_path / "socks"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    with pytest.raises(CohortRefusal) as e:
        check_socket_dir(str(d))
    assert e.value.code == "configuration"
    d.chmod(0o700)
    assert check_socket_dir(str(d)) == str(d.resolve())
    with pytest.raises(CohortRefusal):
        check_socket_dir(str(tmp_path / "missing"))
