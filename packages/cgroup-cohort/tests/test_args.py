"""What the launchers ask the shim to do, as the shim reads it back, and how the shim finds its code.

The argument builder, the boot line and the shim's parser are the shim's private internals; testing them is
the point here, so this file imports ``_launchers`` and ``_shim``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import mosaic.cgroup_cohort
import mosaic.safe_open
from mosaic.cgroup_cohort import CohortRefusal, Credentials
from mosaic.cgroup_cohort._launchers import SHIM_ROOTS, _check_socket_dir, _shim_args, _shim_boot
from mosaic.cgroup_cohort._shim import parse_args

BOOT = len(_shim_boot(None))


def _build(**over):
    kw = dict(mode="scope", unit="cohort-claim-abc.scope", socket_path="/s/cohort-claim-abc.scope.sock", nonce="n1",
              status_fd=5, stderr_fd=6, credentials=Credentials(1001, 1002), env={"PATH": "/usr/bin", "X": "a b"},
              cwd="/work", cgroupns=True, log=None, systemctl="systemctl",
              engine_argv=["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"])
    kw.update(over)
    return _shim_args(**kw)


def test_shim_reads_back_exactly_what_the_launcher_asked():
    argv = _build()
    assert argv[:BOOT] == _shim_boot(None)
    assert argv[0] == "-I"  # no PYTHON* variable reaches a shim that may run as root
    a = parse_args(argv[BOOT:])
    assert (a.mode, a.unit, a.socket, a.nonce, a.status_fd, a.engine_stderr_fd) == (
        "scope", "cohort-claim-abc.scope", "/s/cohort-claim-abc.scope.sock", "n1", 5, 6)
    assert (a.engine_uid, a.engine_gid, a.cgroupns, a.engine_cwd) == (1001, 1002, True, "/work")
    assert json.loads(a.engine_env) == {"PATH": "/usr/bin", "X": "a b"}
    # Engine arguments that look like options stay the engine's (after "--").
    assert a.engine == ["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"]


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
    assert _shim_boot("/vendored")[-1] == "/vendored"


def test_the_shim_boot_line_imports_everything_the_shim_needs(tmp_path):
    """The exact boot the launchers run, in an empty environment and another directory, gets as far as the
    shim's argument parser: its whole import graph (cffi, mosaic.safe_open included) resolved."""
    r = subprocess.run([sys.executable, *_shim_boot(None), "--help"], capture_output=True, text=True, env={},
                       cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "--engine-uid" in r.stdout


def test_socket_dir_must_be_private(tmp_path):
    d = tmp_path / "socks"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    with pytest.raises(CohortRefusal) as e:
        _check_socket_dir(str(d))
    assert e.value.code == "configuration"
    d.chmod(0o700)
    assert _check_socket_dir(str(d)) == str(d.resolve())
    with pytest.raises(CohortRefusal):
        _check_socket_dir(str(tmp_path / "missing"))
