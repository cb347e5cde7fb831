"""What the launchers ask the shim to do, as the shim reads it back (no process is started)."""

from __future__ import annotations

import json

import pytest

from mosaic.cgroup_cohort import CohortRefusal, Credentials
from mosaic.cgroup_cohort._launchers import _SHIM_BOOT, _check_socket_dir, _shim_args
from mosaic.cgroup_cohort._shim import parse_args


def _build(**over):
    kw = dict(mode="scope", unit="mosaic-abc.scope", socket_path="/s/mosaic-abc.scope.sock", nonce="n1",
              status_fd=5, stderr_fd=6, credentials=Credentials(1001, 1002), env={"PATH": "/usr/bin", "X": "a b"},
              cwd="/work", cgroupns=True, log=None, systemctl="systemctl",
              engine_argv=["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"])
    kw.update(over)
    return _shim_args(**kw)


def test_shim_reads_back_exactly_what_the_launcher_asked():
    argv = _build()
    assert argv[: len(_SHIM_BOOT)] == list(_SHIM_BOOT)
    assert _SHIM_BOOT[0] == "-I"  # no PYTHON* variable reaches a shim that may run as root
    a = parse_args(argv[len(_SHIM_BOOT):])
    assert (a.mode, a.unit, a.socket, a.nonce, a.status_fd, a.engine_stderr_fd) == (
        "scope", "mosaic-abc.scope", "/s/mosaic-abc.scope.sock", "n1", 5, 6)
    assert (a.engine_uid, a.engine_gid, a.cgroupns, a.engine_cwd) == (1001, 1002, True, "/work")
    assert json.loads(a.engine_env) == {"PATH": "/usr/bin", "X": "a b"}
    # Engine arguments that look like options stay the engine's (after "--").
    assert a.engine == ["/usr/bin/node", "cli.js", "--mode", "rpc", "--session", "/x y/s.jsonl"]


def test_root_engine_and_no_namespace_are_explicit():
    a = parse_args(_build(credentials=None, cgroupns=False, env=None, cwd=None, mode="direct",
                          systemctl=None)[len(_SHIM_BOOT):])
    assert a.engine_uid is None and not a.cgroupns and a.engine_env is None and a.mode == "direct"


def test_shim_refuses_an_unknown_mode():
    with pytest.raises(SystemExit):
        parse_args(["--mode", "nspawn", "--unit", "u", "--socket", "s", "--nonce", "n", "--status-fd", "3",
                    "--", "true"])


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
